#!/bin/sh
# tests/test_eval.sh — `torc eval` as a user reads it, on a small synthetic
# problem (ref backend): without --checkpoint it evaluates the run's newest
# checkpoint and says which, or says there is none (status 2); --predict
# shows the true class, the class predicted and its probability, marking
# mistakes; [data.*] class_names label the predictions, the confusion
# matrix and the classification report, whose figures are checked here
# against the printed matrix (worked out again in awk). TORC_VALGRIND=1
# runs each torc under valgrind.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup eval

# 3 classes of 6 features, a small MLP; a checkpoint every epoch, all kept.
cat >"$tmp/base.ini" <<'EOF'
[torc]
seed = 5
deterministic = yes
[plugin.ref]
module = ref
[plugin.data]
module = data
[plugin.losses]
module = losses
[plugin.optim]
module = optim
[data.train]
source = synthetic
shape = 6
classes = 3
samples = 96
batch_size = 16
shuffle = yes
[data.test]
source = synthetic
shape = 6
classes = 3
samples = 60
batch_size = 25
[model]
input = 6
[layer]
type = linear
out_features = 12
[layer]
type = relu
[layer]
type = linear
out_features = 3
[loss]
type = cross_entropy
[optimizer]
type = sgd
lr = 0.1
momentum = 0.9
[train]
epochs = 3
log_every = 6
[checkpoint]
dir = run/ckpt
keep = 5
EOF
cd "$tmp" || exit 1

# ---- no checkpoint yet, no [checkpoint] section ----

run_torc eval base.ini
expect_rc 2
expect_has err "no checkpoint (ckpt-*.safetensors) in run/ckpt, the [checkpoint] dir of base.ini, and no final.safetensors"
expect_has err "torc train base.ini"
expect_has err "--checkpoint PATH"
expect_empty out
pass "no checkpoint to evaluate: says so, status 2"

sed '/^\[checkpoint\]/,$d' base.ini >nockpt.ini
run_torc eval nockpt.ini
expect_rc 2
expect_has err "nockpt.ini has no [checkpoint] dir and its run folder"
expect_has err "--checkpoint PATH"
pass "no [checkpoint] section: says so, status 2"

run_torc train nockpt.ini
expect_rc 0
tail -n 2 "$tmp/out" | head -n 1 |
  grep -q '^wrote .*runs/nockpt: config.ini metrics.csv curves.svg final.safetensors$' ||
  fail "torc train's second-to-last line says what the run folder holds"
run_torc eval nockpt.ini
expect_rc 0
head -n 1 "$tmp/out" |
  grep -q "^checkpoint: .*runs/nockpt/final.safetensors (the run's final weights)\$" ||
  fail "no [checkpoint] section: eval takes the run's final.safetensors"
pass "no [checkpoint] section: eval takes the run's final weights"

# ---- the newest checkpoint by default ----

run_torc train base.ini
expect_rc 0
newest=$(ls run/ckpt/ckpt-*.safetensors | sort | tail -n 1)
[ "$(ls run/ckpt/ckpt-*.safetensors | wc -l)" -eq 3 ] || fail "3 checkpoints"
run_torc eval base.ini
expect_rc 0
head -n 1 "$tmp/out" | grep -qxF "checkpoint: $newest (the newest of the run)" ||
  fail "the first line names the newest checkpoint, $newest"
tail -n 1 "$tmp/out" >default.last
run_torc eval base.ini --checkpoint "$newest"
expect_rc 0
expect_lacks out "the newest of the run"
tail -n 1 "$tmp/out" | cmp -s - default.last ||
  fail "the default evaluates other weights than --checkpoint $newest"
oldest=$(ls run/ckpt/ckpt-*.safetensors | sort | head -n 1)
run_torc eval base.ini --checkpoint "$oldest"
expect_rc 0
tail -n 1 "$tmp/out" | cmp -s - default.last &&
  fail "the oldest checkpoint evaluates as the newest (the check is blind)"
pass "without --checkpoint: the newest checkpoint, named"

# ---- --predict: class, probability, true label, mistakes marked ----

run_torc eval base.ini --predict 7
expect_rc 0
expect_has out "sample  true       predicted  probability"
# The 7 rows: index, true class, predicted class, its probability (at
# least 1/3 of 3 classes, at most 1), "<- mistake" exactly where the two
# differ.
awk '/^sample  true/ { on = 1; next }
     on && NF == 0 { exit }
     on {
       n++
       if ($1 != n - 1) bad = bad " index " $1
       if ($4 < 1/3 - 1e-6 || $4 > 1) bad = bad " probability " $4
       wrong = ($2 != $3)
       marked = ($5 == "<-" && $6 == "mistake")
       if (wrong != marked) bad = bad " mark of sample " $1
       if (!wrong && NF != 4) bad = bad " junk after sample " $1
     }
     END { if (n != 7 || bad != "") { print n " rows:" bad; exit 1 } }' \
  "$tmp/out" || fail "the prediction rows"
grep -q -- '<- mistake$' "$tmp/out" ||
  fail "no mistake among 7 samples of a 3-epoch toy model (the marks are untested)"
tail -n 1 "$tmp/out" | grep -q '^eval: loss=[0-9.]* accuracy=[0-9.]* samples=60$' ||
  fail "eval: last line"
pass "--predict: true class, predicted class, probability, mistakes marked"

# ---- class names and the classification report ----

sed 's/^classes = 3$/classes = 3\nclass_names = cat, dog , bird of prey/' \
  base.ini >named.ini
grep -c '^class_names' named.ini | grep -qx 2 || fail "named.ini"
run_torc train named.ini --set checkpoint.dir=named/ckpt
expect_rc 0
run_torc eval named.ini --set checkpoint.dir=named/ckpt --predict 4
expect_rc 0
expect_has out "     0  "
awk '/^sample  true/ { on = 1; next }
     on && NF == 0 { exit }
     on { row = $0; sub(/^ *[0-9]+  /, "", row)
          if (row !~ /^(cat|dog|bird of prey) +(cat|dog|bird of prey) +[01]\.[0-9][0-9][0-9][0-9]/)
            { print "not named: " $0; exit 1 } }' "$tmp/out" ||
  fail "the predictions name the classes"
expect_has out "0 cat     "
expect_has out "1 dog     "
expect_has out "2 bird of prey "
expect_has out "              precision    recall  f1-score   support"
expect_has out "bird of prey  "
expect_has out "    accuracy  "
expect_has out "   macro avg  "
expect_has out "weighted avg  "
# Every figure of the report again from the matrix, as scikit-learn's
# classification_report defines them (zero_division = 0).
awk -v k=3 '
  function r(a, b) { return b > 0 ? a / b : 0 }
  /^confusion matrix/ { m = 1; getline; next }
  m && NF == 0 { m = 0; rep = 1; next }
  m { i++; for (j = 1; j <= k; j++) c[i, j] = $(NF - k + j) }
  /^eval: / { rep = 0 }
  rep && / (avg|accuracy) / { tail[++t] = $0; next }
  rep && /[0-9]\.[0-9][0-9][0-9][0-9] / { line[++l] = $0 }
  END {
    for (a = 1; a <= k; a++) {
      sup = 0; pred = 0
      for (b = 1; b <= k; b++) { sup += c[a, b]; pred += c[b, a] }
      tp = c[a, a]; p = r(tp, pred); q = r(tp, sup); f = r(2 * tp, sup + pred)
      want = sprintf("%.4f %.4f %.4f %d", p, q, f, sup)
      n = split(line[a], w, " ")
      got = w[n - 3] " " w[n - 2] " " w[n - 1] " " w[n]
      if (got != want) { print "class " a ": " got " != " want; bad = 1 }
      mp += p; mq += q; mf += f; wp += p * sup; wq += q * sup; wf += f * sup
      tot += sup; right += tp
    }
    sumline[1] = sprintf("accuracy %.4f %d", r(right, tot), tot)
    sumline[2] = sprintf("macro avg %.4f %.4f %.4f %d", mp / k, mq / k, mf / k, tot)
    sumline[3] = sprintf("weighted avg %.4f %.4f %.4f %d", r(wp, tot), r(wq, tot), r(wf, tot), tot)
    for (x = 1; x <= 3; x++) {
      g = tail[x]; gsub(/ +/, " ", g); sub(/^ /, "", g)
      if (g != sumline[x]) { print "\"" g "\" != \"" sumline[x] "\""; bad = 1 }
    }
    if (l != k || t != 3) { print l " class rows, " t " summary rows"; bad = 1 }
    exit bad
  }' "$tmp/out" || fail "the report's figures are not the matrix's"
acc=$(awk '$1 == "accuracy" { print $2 }' "$tmp/out")
tail -n 1 "$tmp/out" | grep -q "accuracy=$acc " || fail "accuracy $acc in the report and the eval: line"
pass "class_names: predictions, confusion matrix and report named; the report's figures"

sed 's/^class_names = .*/class_names = cat, dog/' named.ini >two.ini
run_torc eval two.ini --set checkpoint.dir=named/ckpt
expect_rc 2
expect_has err "two.ini:"
expect_has err "key 'class_names' in [data.test]: 2 names for the 3 classes of the model"
pass "class_names of the wrong length: file, line and key, status 2"

# [data.test] has none: [data.train]'s are taken.
awk '/^\[data.test\]/ { t = 1 } /^\[model\]/ { t = 0 }
     !(t && /^class_names/)' named.ini >trainnames.ini
grep -c '^class_names' trainnames.ini | grep -qx 1 || fail "trainnames.ini"
run_torc eval trainnames.ini --set checkpoint.dir=named/ckpt
expect_rc 0
expect_has out "2 bird of prey "
pass "class_names of [data.train] when [data.test] has none"

run_torc eval base.ini --set data.test.class_names=a,,c
expect_rc 2
expect_has err "key 'class_names' in [data.test]: name 2 is empty"
pass "an empty class name"

echo "test_eval.sh: $n_pass checks passed"
