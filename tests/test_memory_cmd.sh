#!/bin/sh
# tests/test_memory_cmd.sh — `torc memory FILE.ini` on a small synthetic
# problem: one line per step whose peak is at least what is allocated,
# the memory summary's rows, the advice; on sim (a 64 MiB cap) the
# reserved bytes stay the same from step 2 on and the advice names the
# cap; nothing is written beside the file; the usage errors (no file, a
# missing file, a device no plugin provides, a count that is not a
# positive integer) are one message and status 2, and a device too small
# for the model or for a step is status 1 with the out-of-memory message
# (and, in a step, the summary at the failure).
# TORC_VALGRIND=1 runs each torc under valgrind.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup memory-cmd

# 3 classes of 256 features, an MLP trained with Adam (its moments are
# allocated at the first step) whose first weight (256 x 2048 floats, 2
# MiB), its gradient and moments go to the sim device's large pool, the
# rest to the small one; in a folder of its own.
mkdir "$tmp/w" || exit 1
cat >"$tmp/w/small.ini" <<'EOF'
[torc]
seed = 3
[plugin.ref]
module = ref
[plugin.data]
module = data
[plugin.losses]
module = losses
[plugin.optim]
module = optim
[plugin.sim]
module = sim
memory = 64M
[data.train]
source = synthetic
shape = 256
classes = 3
samples = 64
batch_size = 16
shuffle = yes
[model]
input = 256
[layer]
type = linear
out_features = 2048
[layer]
type = relu
[layer]
type = linear
out_features = 3
[loss]
type = cross_entropy
[optimizer]
type = adam
lr = 0.01
[train]
epochs = 1
EOF
cd "$tmp/w" || exit 1

# check_steps N: stdout has N step lines, numbered 1..N, each with
# allocated <= peak allocated (the figures in parentheses are bytes);
# writes "step allocated reserved peak" rows to $tmp/steps.
check_steps() {
  awk '
    /^ *[0-9]+  / {
      n = 0
      s = $0
      while (match(s, /\([0-9]+\)/)) {
        v[++n] = substr(s, RSTART + 1, RLENGTH - 2)
        s = substr(s, RSTART + RLENGTH)
      }
      if (n == 3) print $1, v[1], v[2], v[3]
    }' "$tmp/out" >"$tmp/steps"
  [ "$(wc -l <"$tmp/steps")" -eq "$1" ] ||
    fail "expected $1 step lines, got $(wc -l <"$tmp/steps")"
  awk -v n="$1" '
    $1 != NR { print "step " $1 " is line " NR; bad = 1 }
    $2 + 0 > $4 + 0 { print "step " $1 ": allocated " $2 " > peak " $4; bad = 1 }
    $2 + 0 == 0 || $3 + 0 < $2 + 0 {
      print "step " $1 ": allocated " $2 ", reserved " $3; bad = 1 }
    END { exit bad }' "$tmp/steps" >"$tmp/why" ||
    fail "$(cat "$tmp/why")"
}

# ---- cpu: the size-class cache ----

run_torc memory small.ini
expect_rc 0
check_steps 3
expect_has out "3 training steps on cpu (bytes)"
# Caching is off in sanitizer builds and under TORC_NO_CACHE.
nocache=0
grep -q 'caching: none' "$tmp/out" && nocache=1
if [ $nocache = 1 ]; then
  expect_has out "memory summary of cpu (caching: none)"
  expect_has out "steady state: caching is off on cpu"
else
  expect_has out "memory summary of cpu (caching: size classes)"
fi
for row in "  allocated " "    small pool (<= 1 MiB)" "    large pool " \
    "  reserved " "    small pool " "reserved - allocated:" "cache hits:" \
    "out-of-memory errors: 0"; do
  expect_has out "$row"
done
expect_has out "advice: peak allocated "
expect_has out "of the host's"
pass "cpu: a line per step, peak >= allocated, the summary's rows, advice"

# Nothing written: no run folder, no checkpoint.
[ "$(ls)" = "small.ini" ] || fail "torc memory wrote files: $(ls)"
pass "writes no run folder and no checkpoint"

# ---- sim: the block allocator, 64 MiB ----

run_torc memory small.ini --device sim --steps 6
expect_rc 0
check_steps 6
expect_has out "6 training steps on sim:0 (bytes)"
expect_has out "device: 64.0 MiB total"
expect_has out "of the device's 64.0 MiB"
if [ $nocache = 1 ]; then
  expect_has out "memory summary of sim:0 (caching: none)"
  expect_has out "steady state: caching is off on sim:0"
  pass "sim: caching is off here, said so (the block cache is not checked)"
else
expect_has out "memory summary of sim:0 (caching: blocks (split and merged))"
grep -E '^    large pool +20\.0 MiB +20\.0 MiB +1 +0$' "$tmp/out" >/dev/null ||
  fail "expected one 20 MiB segment in the large pool"
expect_has out "steady state: steps 3 to 6 took no new device memory"
# The caching allocator's steady state: from step 2 on a step takes its
# memory from the cache.
r2=$(awk '$1 == 2 { print $3 }' "$tmp/steps")
awk -v r2="$r2" '$1 >= 2 && $3 != r2 { exit 1 }' "$tmp/steps" ||
  fail "reserved moved after step 2: $(cat "$tmp/steps")"
pass "sim: reserved stays $r2 bytes from step 2 to step 6"
fi

# [device] type in the file is the default; --device replaces it.
sed 's/^\[train\]$/[device]\ntype = sim\n[train]/' small.ini >onsim.ini
run_torc memory onsim.ini --steps 2
expect_rc 0
check_steps 2
expect_has out "2 training steps on sim:0 (bytes)"
run_torc memory onsim.ini --steps 1 --device cpu
expect_rc 0
check_steps 1
expect_has out "1 training step on cpu (bytes)"
pass "[device] type, and --device over it"

# The help, as torc help memory prints it.
run_torc memory --help
expect_rc 0
expect_has out "usage: torc memory FILE.ini [--steps N] [--device D]"
cp "$tmp/out" "$tmp/help"
run_torc help memory
expect_rc 0
cmp -s "$tmp/help" "$tmp/out" || fail "differs from torc memory --help"
run_torc --help
expect_has out "memory FILE.ini [--steps N] [--device D]"
pass "the help, in torc help memory and torc --help"

# ---- errors ----

run_torc memory
expect_rc 2
expect_has err "torc memory: which file? usage: torc memory FILE.ini"
expect_empty out
pass "no file: status 2"

run_torc memory missing.ini
expect_rc 2
expect_has err "torc memory: cannot open configuration file 'missing.ini'"
expect_empty out
pass "a missing file: status 2"

run_torc memory small.ini --device nosuch
expect_rc 2
expect_has err "torc memory: --device nosuch: unknown device type 'nosuch'"
expect_has err "registered: cpu (1 device), sim (1 device)"
expect_empty out
run_torc memory small.ini --device sim:3
expect_rc 2
expect_has err "torc memory: --device sim:3: device 'sim:3' does not exist"
pass "a device no plugin provides, or one too many: status 2"

for n in 0 -1 x 1.5 ""; do
  run_torc memory small.ini --steps "$n"
  expect_rc 2
  expect_has err "torc memory: --steps takes a positive count of steps (1..100000), not $n"
  expect_has err "(torc memory --help for the options)"
  [ "$(wc -l <"$tmp/err")" -eq 2 ] || fail "expected one message"
  expect_empty out
done
run_torc memory small.ini --steps
expect_rc 2
expect_has err "torc memory: unknown option (or missing value) --steps"
pass "--steps not a positive integer: one message, status 2"

# A device too small for the model's first weight and its gradient: the
# step runs out of memory (status 1) with the allocator's message.
run_torc memory small.ini --device sim --set plugin.sim.memory=48K
expect_rc 1
expect_has err "out of memory on sim:0"
expect_has err "the device has 48.0 KiB in total"
expect_lacks out "at the failure"
pass "out of memory on the device: status 1, the allocator's message"

# Room for the model, not for a step: the summary at the failure.
run_torc memory small.ini --device sim --set plugin.sim.memory=6M
expect_rc 1
expect_has err "out of memory on sim:0: cannot allocate"
expect_has err "the device has 6.0 MiB in total"
expect_has out "at the failure: memory summary of sim:0"
expect_has out "out-of-memory errors: 1"
pass "out of memory in a step: status 1, the summary at the failure"

echo "test_memory_cmd: $n_pass checks passed"
exit 0
