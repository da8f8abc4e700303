#!/bin/sh
# bench/dist.sh — data-parallel training against threads on the same two
# cores: 2 ranks x 1 thread (`mpirun -np 2 --bind-to core torc train` with
# torc.threads = 1) versus 1 rank x 2 threads (`torc train` with
# torc.threads = 2), for the MLP and the CNN of examples/fashion-mnist, as
# training samples/s.
#
# Each run is one epoch on the first MLP_SAMPLES (default 51200) or
# CNN_SAMPLES (default 16000) training samples, the examples as they are
# otherwise ([data.train] batch_size 64 is the global batch: 32 per rank
# on 2 ranks; workers = 1, a loader thread in each rank beside its compute
# thread). The figure is the samples/s of the last progress line
# (--progress lines), with [train] log_every set to half the epoch's
# steps (rounded up): the line's window is the epoch's second half, so it
# leaves out the first half's warm-up (the thread pool, first-touch of
# memory, the loader's first batches) and, being printed at the last
# step, the test evaluation, the checkpoint and the start-up. On 2 ranks
# it is already global (rank 0's window samples x the ranks). The epoch
# summary line's time is not used: it includes the test evaluation.
# [data.test] is cut to TEST_SAMPLES (default 1000) samples since its
# evaluation is not measured; the runs write into a temporary folder.
#
# The two configurations alternate, in an order that reverses each
# repetition so that a busy spell of the shared machine hits both; REPS
# repetitions (default 5) of each, and the table gives the median
# samples/s (and the lowest and highest), the ratio of the medians
# (2 ranks / 1 rank: > 1, the ranks win), and on the 2-rank rows the
# median all-reduce wait per step of rank 0 from torc's `dist:` line
# (every step of the epoch, the first half's included). `uptime` is
# printed before and after; a 1-minute load above BUSY_LOAD (default 0.5)
# before the run is warned about: the figures are then not quotable.
# One repetition took 25 s on a busy 2-core machine (load 2), so a full
# set (REPS=5) takes about two minutes, less on a quiet one.
#   bash bench/dist.sh
#   REPS=1 VERBOSE=1 bash bench/dist.sh
# Environment: BUILD (the build tree, default $top/_build), REPS,
# MLP_SAMPLES, CNN_SAMPLES, TEST_SAMPLES, BUSY_LOAD, VERBOSE (1: print
# each torc command before it runs), MPIRUN (default mpirun).
# Needs the build tree with the mpi plugin (bash scripts/setup.sh, which
# installs libopenmpi-dev and openmpi-bin) and dataset-fashion-mnist.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/_build}
reps=${REPS:-5}
mlp_samples=${MLP_SAMPLES:-51200} cnn_samples=${CNN_SAMPLES:-16000}
test_samples=${TEST_SAMPLES:-1000}
busy_load=${BUSY_LOAD:-0.5} verbose=${VERBOSE:-0}
mpirun=${MPIRUN:-mpirun}
case $reps$mlp_samples$cnn_samples$test_samples in
*[!0-9]* | '') echo "dist.sh: REPS, MLP_SAMPLES, CNN_SAMPLES and" \
  "TEST_SAMPLES take whole numbers" >&2; exit 2 ;;
esac
if [ "$reps" -lt 1 ] || [ "$mlp_samples" -lt 1 ] || [ "$cnn_samples" -lt 1 ] ||
  [ "$test_samples" -lt 1 ]; then
  echo "dist.sh: REPS, MLP_SAMPLES, CNN_SAMPLES and TEST_SAMPLES must be" \
    "at least 1" >&2
  exit 2
fi

# The load before anything of this run (the build included) runs.
load_before=$(cut -d' ' -f1 /proc/loadavg)
uptime_before=$(uptime)

# What the runs need, each missing piece named with its remedy.
command -v "$mpirun" >/dev/null 2>&1 || {
  echo "dist.sh: $mpirun not found: apt-get install openmpi-bin" \
    "libopenmpi-dev (or bash scripts/setup.sh), or set MPIRUN" >&2
  exit 1
}
[ -f "$build/Makefile" ] || {
  echo "dist.sh: no build tree at $build: bash scripts/setup.sh (or set" \
    "BUILD)" >&2
  exit 1
}
make -s -C "$build" all >/dev/null
torc=$build/tools/torc
export TORC_PLUGIN_PATH="$build/plugins/.libs"
[ -f "$TORC_PLUGIN_PATH/mpi.so" ] || {
  echo "dist.sh: the mpi plugin is missing ($TORC_PLUGIN_PATH/mpi.so):" \
    "configure builds it when it finds Open MPI: apt-get install" \
    "libopenmpi-dev openmpi-bin, then bash scripts/setup.sh" >&2
  exit 1
}
for ex in mlp cnn; do
  ini=$top/examples/fashion-mnist/$ex.ini
  sed -n 's/^\(images\|labels\) *= *//p' "$ini" | while read -r f; do
    [ -f "$f" ] || {
      echo "dist.sh: $f (of $ex.ini) is missing: apt-get install" \
        "dataset-fashion-mnist" >&2
      exit 1
    }
  done
done
# Open MPI refuses root unless told (a container).
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/results

# batch_of INI: [data.train] batch_size (64 when the INI leaves it out).
batch_of() {
  awk '/^\[/ { s = $0 } s == "[data.train]" && $1 == "batch_size" {
    sub(/^[^=]*= */, ""); sub(/[ ;].*/, ""); b = $0 }
    END { print (b == "" ? 64 : b) }' "$1"
}

n=0 nfail=0
# run_one EXAMPLE CONFIG: one run of 1r (1 rank x 2 threads) or 2r (2 ranks
# x 1 thread); appends "R EXAMPLE CONFIG SAMPLES_PER_S WAIT_MS" to $out
# (WAIT_MS - on 1 rank), or "F EXAMPLE CONFIG" when it failed.
run_one() {
  ex=$1 cfg=$2
  ini=$top/examples/fashion-mnist/$ex.ini
  if [ "$ex" = mlp ]; then samples=$mlp_samples; else samples=$cnn_samples; fi
  batch=$(batch_of "$ini")
  steps=$(((samples + batch - 1) / batch))
  n=$((n + 1))
  set -- "$torc" train "$ini" --progress lines \
    --set train.epochs=1 --set train.eval_every=0 \
    --set train.log_every=$(((steps + 1) / 2)) \
    --set train.dir="$tmp/run$n" \
    --set data.train.limit="$samples" --set data.test.limit="$test_samples"
  if [ "$cfg" = 2r ]; then
    set -- "$mpirun" -np 2 --bind-to core -x TORC_PLUGIN_PATH "$@" \
      --set torc.threads=1
  else
    set -- "$@" --set torc.threads=2
  fi
  [ "$verbose" != 1 ] || echo "+ $*"
  rc=0
  "$@" </dev/null >"$tmp/log" 2>&1 || rc=$?
  sps=$(sed -n 's/^epoch [0-9]*\/[0-9]* step .* \([0-9.]*\) samples\/s.*/\1/p' \
    "$tmp/log" | tail -n 1)
  wait_ms=-
  [ "$cfg" != 2r ] ||
    wait_ms=$(sed -n 's/^dist: .*all-reduce wait \([0-9.]*\) ms per step.*/\1/p' \
      "$tmp/log" | tail -n 1)
  if [ "$rc" != 0 ] || [ -z "$sps" ] || [ -z "$wait_ms" ]; then
    echo "dist.sh: $ex $cfg run failed (exit $rc); the end of its output:" >&2
    tail -n 5 "$tmp/log" >&2
    echo "F $ex $cfg" >>"$out"
    nfail=$((nfail + 1))
    return 0
  fi
  echo "R $ex $cfg $sps $wait_ms" >>"$out"
}

echo "before:$uptime_before"
if awk -v l="$load_before" -v b="$busy_load" 'BEGIN { exit !(l > b) }'; then
  echo "WARNING: the 1-minute load is $load_before (> $busy_load): the" \
    "machine is busy, the figures are not quotable"
fi
: >"$out"
r=1
while [ "$r" -le "$reps" ]; do
  [ ! -t 2 ] || printf '\rrepetition %d/%d' "$r" "$reps" >&2
  for ex in mlp cnn; do
    if [ $((r % 2)) = 1 ]; then order="2r 1r"; else order="1r 2r"; fi
    for cfg in $order; do run_one "$ex" "$cfg"; done
  done
  r=$((r + 1))
done
[ ! -t 2 ] || printf '\r%40s\r' '' >&2
echo "after: $(uptime)"

echo "2 ranks x 1 thread vs 1 rank x 2 threads, examples/fashion-mnist," \
  "one epoch of $mlp_samples (mlp) / $cnn_samples (cnn) samples;"
echo "training samples/s of the epoch's second half, medians of $reps" \
  "alternating repetitions"
awk '
  function med(key,   k, i, j, t, a) {
    k = cnt[key]; if (k == 0) return ""
    for (i = 1; i <= k; i++) a[i] = v[key, i] + 0
    for (i = 2; i <= k; i++)
      for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
        t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
      }
    lo = a[1]; hi = a[k]
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  $1 == "F" { fail[$2, $3]++; next }
  $1 == "R" {
    key = $2 SUBSEP $3
    v[key, ++cnt[key]] = $4
    if ($5 != "-") w[key, ++wcnt[key]] = $5
  }
  END {
    fmt = "%-7s %-20s %10s %17s %7s %12s %5s\n"
    printf fmt, "example", "config", "samples/s", "min-max", "ratio",
      "wait ms/step", "runs"
    split("mlp cnn", exs, " ")
    for (e = 1; e <= 2; e++) {
      ex = exs[e]
      one = med(ex SUBSEP "1r")
      two = med(ex SUBSEP "2r")
      for (c = 1; c <= 2; c++) {
        cfg = c == 1 ? "2r" : "1r"; key = ex SUBSEP cfg
        m = med(key); range = m == "" ? "-" : sprintf("%.0f-%.0f", lo, hi)
        ratio = "-"
        if (cfg == "2r" && one + 0 > 0 && two != "")
          ratio = sprintf("%.2f", two / one)
        wm = "-"
        if (cfg == "2r" && wcnt[key]) {
          # the median of the waits, through med on their own key
          for (i = 1; i <= wcnt[key]; i++) v["w" key, i] = w[key, i]
          cnt["w" key] = wcnt[key]; wm = sprintf("%.3f", med("w" key))
        }
        runs = cnt[key] + 0
        if (fail[ex, cfg]) runs = runs "/" runs + fail[ex, cfg]
        printf fmt, ex, (cfg == "2r" ? "2 ranks x 1 thread" : \
          "1 rank x 2 threads"), (m == "" ? "-" : sprintf("%.0f", m)), range,
          ratio, wm, runs
      }
    }
  }' "$out"
echo "ratio: 2 ranks / 1 rank of the median samples/s (> 1: the ranks win);" \
  "wait: rank 0's all-reduce wait per step"
if [ "$nfail" != 0 ]; then
  echo "dist.sh: $nfail of $n runs failed (runs: counted/run)" >&2
  exit 1
fi
