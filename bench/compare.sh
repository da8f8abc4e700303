#!/bin/sh
# bench/compare.sh — torc and PyTorch side by side in one run: training and
# evaluation samples/s of an MLP and a CNN on Fashion-MNIST, per-op
# overhead, batch-1 latency, GEMM and conv GFLOP/s against the machine's
# fp32 peak, peak RSS and start-up time. torc's side is
# bench/compare/bench_compare.c, PyTorch's bench/compare/torch_compare.py
# (Debian's python3-torch under /usr/bin/python3, at its best: THREADS
# threads through torch.set_num_threads, OMP_WAIT_POLICY=PASSIVE). Each
# measurement is its own process; the two sides alternate (the first to go
# swaps every repetition) so that a busy spell of the shared machine hits
# both, and the table gives the medians of RUNS repetitions, their ratio
# (> 1: torc is better) and torc's target. The eval rows add onnxruntime
# (bench/compare/ort_compare.py, the same models built with onnx.helper,
# the same batch 1000, threads and pre-decoded input as PyTorch's side)
# and torc's planned eval (eval_plan_*: traced on the first batch, run
# through a torc_plan), whose PyTorch and onnxruntime figures are those of
# the eager eval row. The seq rows (--only seq, not in the default set: a
# run of torc's GPT lasts minutes) time the training step of a character
# LSTM (embedding 113x64, lstm 64->256, linear 256->113, Adam) and of a
# small GPT (embedding 113x128, learned positions, 4 pre-norm causal gelu
# encoder layers d_model 128 / 4 heads / feed-forward 512 / dropout 0.1,
# layernorm, linear 128->113, AdamW), cross-entropy, clip_grad_norm 1.0,
# on random token ids (batch 32, context 128, vocabulary 113), as
# training tokens/s: the median of SEQ_STEPS timed steps after 3 warm-up
# ones; PyTorch's is its best of 1 and THREADS threads.
#   bash bench/compare.sh [--quick] [--runs N] [--samples N] [--only LIST]
#                         [--no-build] [--torch-malloc] [--seq-steps N]
#     --quick      train on 10000 samples instead of the 60000 of an epoch
#     --runs N     repetitions of each measurement (default RUNS or 3)
#     --samples N  training samples per run (default one epoch, 60000)
#     --only LIST  comma-separated subset of: train train_mlp train_cnn
#                  ini eval eval_mlp eval_cnn op latency gemm conv startup
#                  seq seq_lstm seq_gpt
#                  (eval: eager and planned, MLP and CNN)
#                  (seq: seq_lstm and seq_gpt; default: all but seq)
#                  (ini: `torc train bench/compare/mlp.ini` itself, one
#                  epoch, beside PyTorch's MLP epoch)
#                  (peak is always measured)
#     --no-build   use the build tree as it is (no make)
#     --torch-malloc  give PyTorch glibc malloc tunables that keep freed
#                  memory (MALLOC_MMAP_MAX_=0, no trim), so that it stops
#                  re-faulting its activations' pages (~13 us per 4 KiB
#                  page here): faster CNN rows, higher RSS
#     --seq-steps N  timed training steps of each seq run (default
#                  SEQ_STEPS or 20)
# Environment: BUILD (the build tree, default $top/_build), RUNS, THREADS
# (default 2, both sides), TORCH_DATA (float or uint8: PyTorch's in-memory
# data set, see torch_compare.py). --quick takes ~5 minutes on a quiet
# machine, a full run ~10; several times that while others share the cores.
# Needs the build tree (bash scripts/setup.sh) and dataset-fashion-mnist;
# PyTorch's column is left empty without python3-torch, onnxruntime's
# without onnxruntime and onnx for ORT_PYTHON (default: python3 on PATH).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/_build}
runs=${RUNS:-3} threads=${THREADS:-2} samples=60000
seq_steps=${SEQ_STEPS:-20}
only=train,ini,eval,op,latency,gemm,conv,startup build_it=1 torch_malloc=0
usage() {
  sed -n '/^#   bash/,/^# PyTorch/p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case $1 in
  --quick) samples=10000 ;;
  --no-build) build_it=0 ;;
  --torch-malloc) torch_malloc=1 ;;
  --runs) [ $# -gt 1 ] || usage; runs=$2; shift ;;
  --samples) [ $# -gt 1 ] || usage; samples=$2; shift ;;
  --seq-steps) [ $# -gt 1 ] || usage; seq_steps=$2; shift ;;
  --only) [ $# -gt 1 ] || usage; only=$2; shift ;;
  *) usage ;;
  esac
  shift
done
case $runs$samples$seq_steps in *[!0-9]*) usage ;; esac
[ "$runs" -ge 1 ] || usage
[ "$seq_steps" -ge 1 ] || usage

# The jobs, one measurement (one process per side) each.
jobs=
for g in $(echo "$only" | tr ',' ' '); do
  case $g in
  train) jobs="$jobs train:mlp:$samples train:cnn:$samples" ;;
  train_mlp | train_cnn) jobs="$jobs train:${g#train_}:$samples" ;;
  eval) jobs="$jobs eval:mlp eval:cnn eval_plan:mlp eval_plan:cnn" ;;
  eval_mlp | eval_cnn) jobs="$jobs eval:${g#eval_} eval_plan:${g#eval_}" ;;
  op | latency | conv | startup) jobs="$jobs $g" ;;
  ini) jobs="$jobs ini" ;;
  gemm) jobs="$jobs gemm:256 gemm:1024 gemm:2048" ;;
  seq) jobs="$jobs seq:lstm:$seq_steps seq:gpt:$seq_steps" ;;
  seq_lstm | seq_gpt) jobs="$jobs seq:${g#seq_}:$seq_steps" ;;
  *) echo "compare.sh: unknown measurement '$g'" >&2; usage ;;
  esac
done

[ "$build_it" = 0 ] ||
  make -s -C "$build" all bench/compare/bench_compare bench/compare/peak \
    >/dev/null
bc="$build/bench/compare/bench_compare"
py="$top/bench/compare/torch_compare.py"
ort_py="$top/bench/compare/ort_compare.py"
ort_python=${ORT_PYTHON:-python3}
export TORC_PLUGIN_PATH="$build/plugins/.libs"

out=$(mktemp) err=$(mktemp)
ini_dir=$(mktemp -d)
trap 'rm -f "$out" "$err"; rm -rf "$ini_dir"' EXIT
torch_version=
if torch_version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)' \
  2>/dev/null); then
  have_torch=1
else
  have_torch=0 torch_version=
  echo "(PyTorch not installed for /usr/bin/python3 — apt-get install" \
    "python3-torch: its column is empty)" >&2
fi

ort_version=
if ort_version=$("$ort_python" -c 'import onnx, onnxruntime as o; print(o.__version__)' \
  2>/dev/null); then
  have_ort=1
else
  have_ort=0 ort_version=
  echo "(onnxruntime not installed for $ort_python — python3 -m pip install" \
    "onnxruntime onnx: its column is empty)" >&2
fi

ms() { date +%s%N; }

# run_side SIDE JOB: one measurement of one side, appended to $out; the
# start-up time is the wall time of the whole process, from exec to exit.
run_side() {
  side=$1
  if [ "$2" = ini ]; then
    run_ini "$side"
    return
  fi
  # shellcheck disable=SC2046 # the job's words, split on purpose
  set -- $(echo "$2" | tr ':' ' ')
  if [ "$side" = torc ]; then
    set -- env TORC_THREADS="$threads" "$bc" "$@"
  elif [ "$side" = ort ]; then
    # onnxruntime runs the eager eval jobs only
    [ "$have_ort" = 1 ] && [ "$1" = eval ] || return 0
    set -- env TORCH_THREADS="$threads" "$ort_python" "$ort_py" "$@"
  else
    [ "$1" != eval_plan ] || return 0 # PyTorch's eval row stands for it
    [ "$have_torch" = 1 ] || return 0
    set -- env OMP_WAIT_POLICY=PASSIVE TORCH_THREADS="$threads" \
      /usr/bin/python3 "$py" "$@"
    [ "$torch_malloc" = 0 ] || set -- env MALLOC_MMAP_MAX_=0 \
      MALLOC_TRIM_THRESHOLD_=137438953472 MALLOC_TOP_PAD_=268435456 "$@"
  fi
  t0=$(ms)
  if "$@" >>"$out" 2>>"$err"; then
    t1=$(ms)
    case $job in
    startup) echo "$side startup_s $(((t1 - t0) / 1000)) us" |
      awk '{ printf "%s %s %.4f\n", $1, $2, $3 / 1e6 }' >>"$out" ;;
    esac
  else
    echo "compare.sh: $side '$job' failed (exit $?):" >&2
    tail -n 3 "$err" >&2
  fi
}

# run_ini SIDE: the INI path — `torc train bench/compare/mlp.ini` itself
# (one epoch; samples/s from its done: line's seconds) beside PyTorch's
# train_mlp over the same 60000 samples.
run_ini() {
  if [ "$1" = torc ]; then
    rm -f "$ini_dir/metrics.csv"
    if "$build/tools/torc" train "$top/bench/compare/mlp.ini" --progress lines \
      --set torc.threads="$threads" --set train.metrics="$ini_dir/metrics.csv" \
      >/dev/null 2>>"$err"; then
      # The metrics CSV's seconds column (ms resolution) at the last row.
      awk -F, '$3 == "train" { s = $8 } END {
        if (s > 0) printf "torc train_ini_mlp %.0f\n", 60000 / s }' \
        "$ini_dir/metrics.csv" >>"$out"
    else
      echo "compare.sh: torc train $top/bench/compare/mlp.ini failed:" >&2
      tail -n 3 "$err" >&2
    fi
  elif [ "$have_torch" = 1 ]; then
    env OMP_WAIT_POLICY=PASSIVE TORCH_THREADS="$threads" /usr/bin/python3 \
      "$py" train mlp 60000 2>>"$err" |
      sed -n 's/^torch train_mlp /torch train_ini_mlp /p' >>"$out"
  fi
}

r=1
while [ "$r" -le "$runs" ]; do
  "$build/bench/compare/peak" "$threads" >>"$out"
  for job in $jobs; do
    [ ! -t 2 ] || printf '\rrun %d/%d: %-24s' "$r" "$runs" "$job" >&2
    if [ $((r % 2)) = 1 ]; then
      run_side torc "$job"
      run_side torch "$job"
      run_side ort "$job"
    else
      run_side ort "$job"
      run_side torch "$job"
      run_side torc "$job"
    fi
  done
  r=$((r + 1))
done
"$build/bench/compare/peak" "$threads" >>"$out"
[ ! -t 2 ] || printf '\r%40s\r' '' >&2

echo "torc vs PyTorch${torch_version:+ $torch_version}" \
  "(eval rows: and onnxruntime${ort_version:+ $ort_version}): $threads threads," \
  "medians of $runs alternating runs, training on $samples samples"
awk -v torch="$have_torch" -v ortok="$have_ort" -v nthreads="$threads" '
  # Medians of each (side, measure) over the runs.
  { if ($1 == "machine" && $2 == "peak_isa") { isa = $3; next }
    key = $1 SUBSEP $2; vals[key, ++cnt[key]] = $3
    if (!($2 in seen) && $1 != "machine") { seen[$2] = 1; order[n++] = $2 } }
  function med(key,   k, i, j, t, a) {
    k = cnt[key]; if (k == 0) return ""
    for (i = 1; i <= k; i++) a[i] = vals[key, i] + 0
    for (i = 2; i <= k; i++)
      for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
        t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
      }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  function fmt(v) {
    if (v == "") return "-"
    if (v >= 1000) return sprintf("%.0f", v)
    if (v >= 10) return sprintf("%.1f", v)
    if (v >= 1) return sprintf("%.2f", v)
    return sprintf("%.3f", v)
  }
  # unit, lower-is-better, and the target: ratio >= rt, torc <= at (same
  # unit), torc >= pt % of the peak.
  function meta(m) {
    unit = ""; lower = 0; rt = 0; at = 0; pt = 0; tgt = "-"
    if (m ~ /^train_seq_/) { unit = "tokens/s"; rt = 1 }
    else if (m ~ /^train_/) {
      unit = "samples/s"; rt = (m == "train_mlp" || m == "train_ini_mlp") ? 3 : 2 }
    else if (m ~ /^eval_/) { unit = "samples/s"; rt = 2 }
    else if (m == "op_ns") { unit = "ns"; lower = 1; rt = 5; at = 200 }
    else if (m == "autograd_ns") { unit = "ns"; lower = 1; rt = 5; at = 1000 }
    else if (m == "latency_us") { unit = "us"; lower = 1 }
    else if (m ~ /^gemm_/) {
      unit = "GFLOP/s"; if (substr(m, 6) + 0 >= 1024) pt = 80 }
    else if (m == "conv") { unit = "GFLOP/s"; pt = 80 }
    else if (m ~ /^rss_/) { unit = "KiB"; lower = 1; rt = 2 }
    else if (m == "startup_s") { unit = "s"; lower = 1; at = 0.1 }
    t = ""
    if (rt) t = sprintf(">=%gx", rt)
    if (at) t = t (t == "" ? "" : ", ") sprintf("<=%g %s", at, unit)
    if (pt) t = t (t == "" ? "" : ", ") sprintf(">=%g%% peak", pt)
    if (t != "") tgt = t
  }
  END {
    # The peak is a constant of the machine that only a busy spell lowers:
    # the best of the runs.
    peak = ""; key = "machine" SUBSEP "peak_gflops"
    for (i = 1; i <= cnt[key]; i++)
      if (peak == "" || vals[key, i] + 0 > peak + 0) peak = vals[key, i] + 0
    printf "machine fp32 FMA peak: %s GFLOP/s (%s, %s threads)\n",
      fmt(peak), isa, nthreads
    print "ratio > 1: torc is better (pytorch/torc for times, ns, us," \
      " KiB; torc/pytorch for rates)"
    printf "%-19s %-9s %15s %15s %8s  %-22s %-3s %12s %8s\n", "measure",
      "unit", "torc", "pytorch", "ratio", "target", "ok", "onnxruntime",
      "ratio"
    # The measures in this order first, then anything else printed.
    split("train_mlp train_ini_mlp train_cnn train_seq_lstm train_seq_gpt " \
      "eval_mlp eval_plan_mlp eval_cnn " \
      "eval_plan_cnn op_ns autograd_ns " \
      "latency_us gemm_256 gemm_1024 gemm_2048 conv rss_train_mlp " \
      "rss_train_cnn rss_train_seq_lstm rss_train_seq_gpt rss_eval_mlp rss_eval_plan_mlp rss_eval_cnn " \
      "rss_eval_plan_cnn startup_s", known, " ")
    k = 0
    for (i = 1; i in known; i++)
      if (known[i] in seen) { rows[k++] = known[i]; done[known[i]] = 1 }
    for (i = 0; i < n; i++) if (!(order[i] in done)) rows[k++] = order[i]
    for (i = 0; i < k; i++) {
      m = rows[i]; meta(m)
      # the planned eval beside the eager eval of the other sides
      om = m; sub(/eval_plan_/, "eval_", om)
      t = med("torc" SUBSEP m); p = med("torch" SUBSEP om)
      o = med("ort" SUBSEP om); oratio = ""
      if (t != "" && o != "" && t + 0 > 0 && o + 0 > 0)
        oratio = lower ? o / t : t / o
      ratio = ""
      if (t != "" && p != "" && t + 0 > 0 && p + 0 > 0)
        ratio = lower ? p / t : t / p
      ts = fmt(t); ps = fmt(p)
      if (unit == "GFLOP/s" && peak + 0 > 0) {
        if (t != "") ts = sprintf("%s (%.0f%%)", ts, 100 * t / peak)
        if (p != "") ps = sprintf("%s (%.0f%%)", ps, 100 * p / peak)
      }
      # ok: every part of the target met; ? where a part needs PyTorch.
      ok = ""
      if (tgt != "-") {
        ok = "✓"
        if (t == "") ok = "?"
        else {
          if (at && t + 0 > at) ok = "✗"
          if (pt && !(peak + 0 > 0)) ok = (ok == "✗") ? ok : "?"
          else if (pt && 100 * t / peak < pt) ok = "✗"
          if (rt && ratio == "") ok = (ok == "✗") ? ok : "?"
          else if (rt && ratio < rt) ok = "✗"
        }
      }
      printf "%-19s %-9s %15s %15s %8s  %-22s %-3s %12s %8s\n", m, unit, ts,
        (torch ? ps : "-"), (ratio == "" ? "-" : sprintf("%.2f", ratio)),
        tgt, ok, (ortok && o != "" ? fmt(o) : "-"),
        (oratio == "" ? "-" : sprintf("%.2f", oratio))
    }
  }' "$out"
echo "PyTorch: torch.set_num_threads($threads), OMP_WAIT_POLICY=PASSIVE$(
  [ "$torch_malloc" = 0 ] || echo ', glibc malloc keeping freed memory')."
echo "Data: PyTorch's set is decoded once into a tensor (${TORCH_DATA:-float})" \
  "and batches gathered by a"
echo "shuffled index, its fastest path; torc's go through its DataLoader" \
  "with a per-sample transform."
[ "$have_ort" = 0 ] || echo "onnxruntime: intra_op_num_threads=$threads," \
  "sequential, the PyTorch side's pre-decoded input."
case $jobs in *seq:*)
  echo "train_seq_*: batch 32 x context 128 random token ids, vocabulary" \
    "113; median of $seq_steps timed steps after 3 warm-up;"
  if [ "$threads" = 1 ]; then tn="at 1 thread"
  else tn="the best of 1 and $threads threads"; fi
  echo "PyTorch's $tn, causal float mask, foreach Adam/AdamW." ;;
esac
echo "startup_s: wall time of a process that loads the training set," \
  "builds the MLP, takes one step."
