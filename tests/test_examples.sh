#!/bin/sh
# tests/test_examples.sh — the INI examples reach their accuracy: the
# tabular ones in full (under a second each), the Fashion-MNIST MLP on a
# short schedule (one epoch: at least 83% test accuracy), the CNN and the
# ResNet on a subset ([data.*] limit), the text examples on 640 windows;
# the full runs are in README. Outputs go to a temporary folder, not next to the INI
# files. Skips the Fashion-MNIST part without dataset-fashion-mnist.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup examples
ex=$TORC_TOP_SRCDIR/examples

# done_value KEY: the value of KEY= on the done: line of the last run.
done_value() {
  tail -n 1 "$tmp/out" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

# at_least A B: A >= B (decimals).
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }

run_torc train "$ex/tabular/wine.ini" --progress lines \
  --set train.dir="$tmp/wine" --set train.metrics="$tmp/wine/metrics.csv"
expect_rc 0
acc=$(done_value test_accuracy)
at_least "$acc" 0.94 || fail "wine: test accuracy $acc < 0.94"
[ -s "$tmp/wine/curves.svg" ] || fail "wine: no curves.svg"
pass "wine (classification from CSV): test accuracy $acc"

run_torc train "$ex/tabular/diabetes.ini" --progress lines \
  --set train.dir="$tmp/diabetes" --set train.metrics="$tmp/diabetes/metrics.csv"
expect_rc 0
loss=$(done_value test_loss)
at_least 3600 "$loss" || fail "diabetes: test MSE $loss > 3600"
expect_lacks out "test_accuracy"
pass "diabetes (regression from CSV): test MSE $loss, no accuracy"

if [ "${TORC_VALGRIND:-0}" = 1 ]; then
  echo "PASS: (the Fashion-MNIST epoch is not run under valgrind)"
elif [ ! -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "PASS: (no Fashion-MNIST here: apt-get install dataset-fashion-mnist)"
else
  run_torc train "$ex/fashion-mnist/mlp.ini" --progress lines \
    --set train.epochs=1 --set scheduler.warmup_epochs=0 \
    --set train.dir="$tmp/mlp" --set train.metrics="$tmp/mlp/metrics.csv" \
    --set checkpoint.dir="$tmp/mlp"
  expect_rc 0
  acc=$(done_value test_accuracy)
  at_least "$acc" 0.83 || fail "Fashion-MNIST MLP: one epoch gave $acc < 0.83"
  pass "Fashion-MNIST MLP, one epoch: test accuracy $acc"

  # The CNN and the ResNet: one epoch on the first 10000 training images
  # at lr 0.01, tested on 2000 (84% and 79% here; the 15-epoch runs are in
  # README).
  # Under LeakSanitizer (the ASan build) the leak check at exit walks every
  # thread's dynamic TLS; with oneDNN's OpenMP runtime (libgomp) loaded
  # through a plugin, gcc 12's LSan crashed there at the end of the ResNet
  # run ("Tracer caught signal 11" on a garbage TLS range), depending on
  # the heap's layout (an unrelated INI line moved it). Its TLS
  # scan is off for these two runs and libgomp's TLS-held blocks are
  # suppressed; every other leak is still reported. Without ASan the
  # variable is ignored.
  lsan="${LSAN_OPTIONS:+$LSAN_OPTIONS:}use_tls=0:suppressions=$TORC_TOP_SRCDIR/tests/lsan_libgomp.supp"
  for spec in cnn:0.80 resnet:0.75; do
    name=${spec%%:*} min=${spec#*:}
    LSAN_OPTIONS=$lsan run_torc train "$ex/fashion-mnist/$name.ini" --progress lines \
      --set train.epochs=1 --set scheduler.warmup_epochs=0 \
      --set optimizer.lr=0.01 --set data.train.limit=10000 \
      --set data.test.limit=2000 \
      --set train.dir="$tmp/$name" --set train.metrics="$tmp/$name/metrics.csv" \
      --set checkpoint.dir="$tmp/$name"
    expect_rc 0
    acc=$(done_value test_accuracy)
    at_least "$acc" "$min" ||
      fail "Fashion-MNIST $name: one epoch on 10000 gave $acc < $min"
    pass "Fashion-MNIST $name, one epoch on 10000 images: test accuracy $acc"
  done
fi
# The text examples: one short epoch of each (640 windows, 20 steps;
# tested on 64: 3.10 and 2.92 here), then a few generated chars. The full
# runs are in README.
if [ "${TORC_VALGRIND:-0}" = 1 ]; then
  echo "PASS: (the text examples are not trained under valgrind)"
elif [ ! -r /usr/share/games/fortunes/cookie ]; then
  echo "PASS: (no fortunes here: apt-get install fortunes)"
else
  for spec in char-lstm:3.4 char-gpt:3.4; do
    name=${spec%%:*} max=${spec#*:}
    run_torc train "$ex/text/$name.ini" --progress lines \
      --set train.epochs=1 --set data.train.limit=640 \
      --set data.test.limit=64 \
      --set data.train.save_vocab="$tmp/$name/vocab.txt" \
      --set data.test.vocab="$tmp/$name/vocab.txt" \
      --set train.dir="$tmp/$name" --set train.metrics="$tmp/$name/metrics.csv" \
      --set checkpoint.dir="$tmp/$name"
    expect_rc 0
    loss=$(done_value test_loss)
    at_least "$max" "$loss" ||
      fail "$name: one short epoch gave test loss $loss > $max"
    run_torc generate "$ex/text/$name.ini" --prompt "The " --tokens 20 \
      --set data.test.vocab="$tmp/$name/vocab.txt" \
      --set train.dir="$tmp/$name" --set checkpoint.dir="$tmp/$name"
    expect_rc 0
    expect_has err "generate: 20 tokens after a prompt of 4"
    pass "$name, 640 windows: test loss $loss (uniform: 4.73), then 20 chars"
  done
fi
echo "$n_pass checks passed"
