#!/bin/sh
# bench/compare.sh — torc and PyTorch side by side in one run: training and
# evaluation samples/s of an MLP and a CNN on Fashion-MNIST, per-op
# overhead, batch-1 latency, GEMM and conv GFLOP/s against the machine's
# fp32 peak, peak RSS and start-up time. torc's side is
# bench/compare/bench_compare.c, PyTorch's bench/compare/torch_compare.py.
#
# A benchmark that cannot flatter torc: every row compares torc's best
# configuration with PyTorch's best, and says which configuration won.
#   PyTorch's figure is its best over
#     - installations: Debian's python3-torch (1.13, /usr/bin/python3) and
#       the current PyPI release in the venv of bench/setup-torch.sh
#       (bench/.venv-torch; TORCH_VENV overrides). The venv is optional:
#       without it the table says that its configurations are missing, and
#       why;
#     - modes: eager, and torch.compile (PyTorch 2 only; inductor on the
#       cpu, compiled and warmed up before the clock starts) on the train,
#       eval, latency and seq rows — op, gemm and conv are one aten call
#       each, and startup would time the compiler;
#     - threads: 1 and 2 (THREADS), torch.set_num_threads, always with
#       OMP_WAIT_POLICY=PASSIVE;
#     - allocators: glibc's default; "malloc", glibc keeping freed memory
#       (MALLOC_MMAP_MAX_=0, no trim, 256 MiB top pad), so that PyTorch
#       stops re-faulting its activations' pages; "hugetlb",
#       GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (malloc's memory madvised as
#       transparent huge pages). "malloc+hugetlb" (both) is swept only when
#       --torch-configs names it.
#   torc's figure is its best over the same thread counts (TORC_THREADS,
#   and torc.threads for `torc train`). onnxruntime's (the eval rows) is its
#   best over the thread counts too, run by the venv's python where it has
#   onnxruntime and onnx, else by ORT_PYTHON (default python3 on PATH).
#   "Best" is the highest median for rates and the lowest for times, ns and
#   RSS; each row prints the winning configuration of each side, e.g.
#   `2.15.0 compile 1t malloc` (version, mode, threads, allocator).
# Each measurement is its own process, and every configuration of every
# side runs once per repetition, in an order that reverses each repetition
# so that a busy spell of the shared machine hits all of them; a
# configuration's figure is its median over the RUNS repetitions.
#
# Quiet or busy: the 1-minute load average is read before the run (before
# the build) and before each measurement, and each measurement records the
# CPU time that OTHER processes used while it ran: the sum of utime +
# stime + cutime + cstime in /proc/*/stat over every pid outside this
# script's process tree, sampled before and after (a process that exits
# hands its time to its parent's cutime, so the sum is conserved across
# exits). The run is quotable only if the load average before it was at
# most BUSY_LOAD (default 1.0: on 2 cores, more than one runnable thread
# of someone else's) and, during every measurement, other processes used
# at most BUSY_OTHERS of one core (default 0.10: 10%, of the measurement's
# wall time or of one second, whichever is longer) and no measurement
# failed; the table marks with ! each row that a busy measurement fed
# (any configuration of any side, since a slowed PyTorch configuration
# can lose to one that should not have won), and the last line is the
# verdict: "quiet: quotable" or "BUSY: not quotable, because ...". The
# per-measurement load average is shown (the highest per row) but not
# judged: it also counts the benchmark's own previous measurement.
#
# The eval rows add onnxruntime (bench/compare/ort_compare.py, the same
# models built with onnx.helper, the same batch 1000, threads and
# pre-decoded input as PyTorch's side) and torc's planned eval
# (eval_plan_*: traced on the first batch, run through a torc_plan), whose
# PyTorch and onnxruntime figures are those of the eager eval row. The seq
# rows (--only seq, not in the default set: a run of torc's GPT lasts
# minutes) time the training step of a character LSTM (embedding 113x64,
# lstm 64->256, linear 256->113, Adam) and of a small GPT (embedding
# 113x128, learned positions, 4 pre-norm causal gelu encoder layers
# d_model 128 / 4 heads / feed-forward 512 / dropout 0.1, layernorm, linear
# 128->113, AdamW), cross-entropy, clip_grad_norm 1.0, on random token ids
# (batch 32, context 128, vocabulary 113), as training tokens/s: the median
# of SEQ_STEPS timed steps after 3 warm-up ones.
#
# Targets (ratio > 1: torc is better): train_mlp, train_ini_mlp and
# train_cnn >= 2x PyTorch; eval_mlp, eval_cnn (and their planned rows)
# >= 1.5x; gemm_256 >= 65% of the fp32 peak, gemm_1024 and gemm_2048
# >= 80%, conv >= 85% (the peak measured at the winning configuration's
# thread count); every rss_ row >= 2x; op_ns, autograd_ns >= 5x and
# <= 200 / 1000 ns; startup_s <= 0.1 s.
#
#   bash bench/compare.sh [--quick] [--runs N] [--samples N] [--only LIST]
#                         [--threads LIST] [--torch-configs SPEC]
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
#     --threads LIST  thread counts swept on every side (default THREADS
#                  or 1,2)
#     --torch-configs SPEC  which PyTorch configurations to sweep: full
#                  (the default, TORCH_CONFIGS) or a comma-separated list
#                  of installations (debian, pypi), modes (eager,
#                  compile) and allocators (default, malloc, hugetlb,
#                  malloc+hugetlb); a kind that the list does not name
#                  keeps all its values (allocators: the first three).
#                  For quick checks: --torch-configs default (glibc's
#                  allocator only), or e.g. debian,eager,default
#     --no-build   use the build tree as it is (no make)
#     --raw FILE   also keep every measurement's record in FILE: lines
#                  M ID SIDE CONFIG JOB LOAD1 OTHERS_CPU_S WALL_S EXIT and
#                  R ID SIDE CONFIG MEASURE VALUE (the figures it printed)
#     --torch-malloc  the same as adding malloc to --torch-configs
#     --seq-steps N  timed training steps of each seq run (default
#                  SEQ_STEPS or 20)
# Environment: BUILD (the build tree, default $top/_build), RUNS, THREADS,
# TORCH_CONFIGS, TORCH_VENV, ORT_PYTHON, BUSY_LOAD, BUSY_OTHERS,
# TORCH_DATA (float or uint8: PyTorch's in-memory data set, see
# torch_compare.py). A full sweep is up to 18 PyTorch processes per
# measurement and repetition, and each compiled one spends 10-60 s in the
# compiler (not timed): --quick --runs 1 takes ~30 minutes on a quiet
# 2-core machine, a full run of 3 repetitions about two hours; more while
# others share the cores. --quick --runs 1 --only train_mlp,eval_mlp,gemm
# took ~6 minutes here (busy), --torch-configs default about half of that.
# Needs the build tree (bash scripts/setup.sh) and dataset-fashion-mnist;
# PyTorch's Debian configurations need python3-torch, its PyPI ones
# bash bench/setup-torch.sh; onnxruntime's column is empty without
# onnxruntime and onnx.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/_build}
runs=${RUNS:-3} threads=${THREADS:-1,2} samples=60000
seq_steps=${SEQ_STEPS:-20}
torch_configs=${TORCH_CONFIGS:-full}
busy_load=${BUSY_LOAD:-1.0} busy_others=${BUSY_OTHERS:-0.10}
venv=${TORCH_VENV:-$top/bench/.venv-torch}
only=train,ini,eval,op,latency,gemm,conv,startup build_it=1 torch_malloc=0
raw=
usage() {
  sed -n '/^#   bash bench/,/^# Environment/p' "$0" | sed '$d' |
    sed 's/^# \{0,1\}//' >&2
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
  --threads) [ $# -gt 1 ] || usage; threads=$2; shift ;;
  --torch-configs) [ $# -gt 1 ] || usage; torch_configs=$2; shift ;;
  --raw) [ $# -gt 1 ] || usage; raw=$2; shift ;;
  *) usage ;;
  esac
  shift
done
case $runs$samples$seq_steps in *[!0-9]*) usage ;; esac
[ "$runs" -ge 1 ] || usage
[ "$seq_steps" -ge 1 ] || usage
threads=$(echo "$threads" | tr ',' ' ')
for t in $threads; do
  case $t in '' | *[!0-9]* | 0) usage ;; esac
done
[ -n "$threads" ] || usage

# The load before anything of this run (the build included) runs.
load_before=$(cut -d' ' -f1 /proc/loadavg)

# The jobs, one measurement (one process per configuration) each.
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

# PyTorch's configurations: the --torch-configs filter, kind by kind.
insts='' modes='' allocs=''
for v in $(echo "$torch_configs" | tr ',' ' '); do
  case $v in
  full) ;;
  debian | pypi) insts="$insts $v" ;;
  eager | compile) modes="$modes $v" ;;
  default | malloc | hugetlb | malloc+hugetlb) allocs="$allocs $v" ;;
  *) echo "compare.sh: unknown PyTorch configuration '$v'" >&2; usage ;;
  esac
done
[ "$torch_malloc" = 0 ] || allocs="$allocs malloc"
insts=${insts:-debian pypi} modes=${modes:-eager compile}
allocs=${allocs:-default malloc hugetlb}

out=$(mktemp) err=$(mktemp) res=$(mktemp) notes=$(mktemp)
ini_dir=$(mktemp -d)
trap 'rm -f "$out" "$err" "$res" "$notes"; rm -rf "$ini_dir"' EXIT
# The installations that are there, with their versions; the others are
# noted with the reason.
debian_version='' pypi_version='' pypi_compile=0
if debian_version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)' \
  2>/dev/null); then :; else
  debian_version=
  echo "PyTorch (Debian): missing: /usr/bin/python3 cannot import torch" \
    "(apt-get install python3-torch)" >>"$notes"
fi
vpy=$venv/bin/python
if [ ! -x "$vpy" ]; then
  echo "PyTorch (PyPI): missing: no venv at $venv (bash bench/setup-torch.sh)" \
    >>"$notes"
elif pypi_version=$("$vpy" -c 'import torch; print(torch.__version__)' \
  2>/dev/null); then
  if "$vpy" -c 'import torch, sys; sys.exit(not hasattr(torch, "compile"))' \
    2>/dev/null; then pypi_compile=1; else
    echo "PyTorch (PyPI) $pypi_version: no torch.compile, eager only" >>"$notes"
  fi
else
  pypi_version=
  echo "PyTorch (PyPI): missing: $vpy cannot import torch" \
    "(bash bench/setup-torch.sh)" >>"$notes"
fi
torch_cfgs=
for i in $insts; do
  case $i in
  debian) [ -n "$debian_version" ] || continue; ver=${debian_version%%+*} ;;
  pypi) [ -n "$pypi_version" ] || continue; ver=${pypi_version%%+*} ;;
  esac
  for m in $modes; do
    if [ "$m" = compile ] && { [ "$i" != pypi ] || [ "$pypi_compile" = 0 ]; }
    then continue; fi
    for t in $threads; do
      for a in $allocs; do
        torch_cfgs="$torch_cfgs $i:$m:$t:$a:$ver"
      done
    done
  done
done
[ -n "$torch_cfgs" ] ||
  echo "PyTorch: no configuration to run (--torch-configs $torch_configs)" \
    >>"$notes"

# onnxruntime: the venv's where it has it, else ORT_PYTHON / python3.
ort_python=
if [ -n "${ORT_PYTHON:-}" ]; then
  ort_python=$ORT_PYTHON
elif [ -x "$vpy" ] && "$vpy" -c 'import onnx, onnxruntime' 2>/dev/null; then
  ort_python=$vpy
else
  ort_python=python3
fi
ort_version=
if ort_version=$("$ort_python" -c \
  'import onnx, onnxruntime as o; print(o.__version__)' 2>/dev/null); then
  have_ort=1
else
  have_ort=0 ort_version=
  echo "onnxruntime: missing: $ort_python cannot import onnxruntime and onnx" \
    "(bash bench/setup-torch.sh)" >>"$notes"
fi

[ "$build_it" = 0 ] ||
  make -s -C "$build" all bench/compare/bench_compare bench/compare/peak \
    >/dev/null
bc="$build/bench/compare/bench_compare"
py="$top/bench/compare/torch_compare.py"
ort_py="$top/bench/compare/ort_compare.py"
export TORC_PLUGIN_PATH="$build/plugins/.libs"

ms() { date +%s%N; }
hz=$(getconf CLK_TCK)
root=$$

# others_ticks: the CPU time (clock ticks) that every process outside this
# script's tree has used, itself and its reaped children: utime + stime +
# cutime + cstime from /proc/PID/stat (fields 14-17; the fields after the
# last ')', since the command name may hold spaces and parentheses).
others_ticks() {
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$root" '
    { pid = $1; n = split($0, a, ")"); split(a[n], f, " ")
      pp[pid] = f[2]; t[pid] = f[12] + f[13] + f[14] + f[15] }
    END {
      s = 0
      for (p in t) {
        q = p; mine = 0
        for (d = 0; d < 64 && (q in pp); d++) {
          if (q == root) { mine = 1; break }
          q = pp[q]
        }
        if (!mine) s += t[p]
      }
      print s
    }'
}

mid=0
# measure SIDE CONFIG JOB COMMAND...: runs one measurement, its figures
# (the command's "side measure value" lines) appended to $out as
#   R ID SIDE CONFIG MEASURE VALUE
# after the measurement itself,
#   M ID SIDE CONFIG JOB LOAD1 OTHERS_S WALL_S EXIT
# ini and startup lines are derived here from the process.
measure() {
  m_side=$1 m_cfg=$2 m_job=$3
  shift 3
  mid=$((mid + 1))
  [ ! -t 2 ] || printf '\rrun %d/%d: %-64s' "$((r > runs ? runs : r))" "$runs" \
    "$m_side $m_cfg $m_job" >&2
  : >"$res"
  l0=$(cut -d' ' -f1 /proc/loadavg)
  o0=$(others_ticks)
  t0=$(ms)
  rc=0
  "$@" </dev/null >"$res" 2>>"$err" || rc=$?
  t1=$(ms)
  o1=$(others_ticks)
  if [ "$rc" != 0 ]; then
    echo "compare.sh: $m_side $m_cfg '$m_job' failed (exit $rc):" >&2
    tail -n 3 "$err" >&2
  fi
  case $m_job in
  startup) [ "$rc" != 0 ] || echo "x startup_s $(((t1 - t0) / 1000))" |
    awk '{ printf "%s %s %.4f\n", $1, $2, $3 / 1e6 }' >"$res" ;;
  ini)
    if [ "$m_side" = torc ]; then
      # The metrics CSV's seconds column (ms resolution) at the last row.
      [ "$rc" != 0 ] || awk -F, '$3 == "train" { s = $8 } END {
        if (s > 0) printf "torc train_ini_mlp %.0f\n", 60000 / s }' \
        "$ini_dir/metrics.csv" >"$res"
    else
      sed -n 's/^torch train_mlp /torch train_ini_mlp /p' "$res" >"$res.ini"
      mv "$res.ini" "$res"
    fi ;;
  esac
  echo "M $mid $m_side $m_cfg $m_job $l0 $(((o1 - o0) * 1000 / hz)) \
$(((t1 - t0) / 1000000)) $rc" |
    awk '{ $7 = sprintf("%.3f", $7 / 1000); $8 = sprintf("%.3f", $8 / 1000)
      print }' >>"$out"
  awk -v id="$mid" -v side="$m_side" -v cfg="$m_cfg" \
    'NF >= 3 { print "R", id, side, cfg, $2, $3 }' "$res" >>"$out"
}

# run_torc T JOB, run_ort T JOB, run_torch CONFIG JOB: one measurement of
# one side in one configuration.
run_torc() {
  if [ "$2" = ini ]; then
    # The run folder in the temporary directory, fresh each time: nothing
    # is written beside the INI in the source tree.
    rm -rf "$ini_dir/metrics.csv" "$ini_dir/run"
    measure torc "${1}t" ini "$build/tools/torc" train \
      "$top/bench/compare/mlp.ini" --progress lines --set torc.threads="$1" \
      --set train.dir="$ini_dir/run" --set train.metrics="$ini_dir/metrics.csv"
    return
  fi
  # shellcheck disable=SC2046 # the job's words, split on purpose
  measure torc "${1}t" "$2" env TORC_THREADS="$1" "$bc" $(echo "$2" | tr ':' ' ')
}
run_ort() {
  # onnxruntime runs the eager eval jobs only
  case $2 in eval:*) ;; *) return 0 ;; esac
  [ "$have_ort" = 1 ] || return 0
  # shellcheck disable=SC2046
  measure ort "${1}t" "$2" env TORCH_THREADS="$1" "$ort_python" "$ort_py" \
    $(echo "$2" | tr ':' ' ')
}
run_torch() {
  c_inst=$(echo "$1" | cut -d: -f1) c_mode=$(echo "$1" | cut -d: -f2)
  c_t=$(echo "$1" | cut -d: -f3) c_alloc=$(echo "$1" | cut -d: -f4)
  c_ver=$(echo "$1" | cut -d: -f5)
  case $2 in
  eval_plan:*) return 0 ;; # PyTorch's eval row stands for it
  ini) args="train mlp 60000" ;;
  *) args=$(echo "$2" | tr ':' ' ') ;;
  esac
  if [ "$c_mode" = compile ]; then
    case $2 in train:* | ini | eval:* | latency | seq:*) ;; *) return 0 ;; esac
  fi
  if [ "$c_inst" = pypi ]; then c_py=$vpy; else c_py=/usr/bin/python3; fi
  c_env="OMP_WAIT_POLICY=PASSIVE TORCH_THREADS=$c_t"
  [ "$c_mode" != compile ] || c_env="$c_env TORCH_COMPILE=1"
  case $c_alloc in
  malloc | malloc+hugetlb) c_env="$c_env MALLOC_MMAP_MAX_=0 \
MALLOC_TRIM_THRESHOLD_=137438953472 MALLOC_TOP_PAD_=268435456" ;;
  esac
  case $c_alloc in
  *hugetlb) c_env="$c_env GLIBC_TUNABLES=glibc.malloc.hugetlb=1" ;;
  esac
  # shellcheck disable=SC2086 # the environment and arguments, split
  measure torch "${c_ver}_${c_mode}_${c_t}t_$c_alloc" "$2" \
    env $c_env "$c_py" "$py" $args
}

# The measurements of one job in one repetition, in sweep order.
sweep() {
  for t in $threads; do echo "torc $t"; done
  for c in $torch_cfgs; do echo "torch $c"; done
  for t in $threads; do echo "ort $t"; done
}

r=1
while [ "$r" -le "$runs" ]; do
  for t in $threads; do
    measure machine "${t}t" peak "$build/bench/compare/peak" "$t"
  done
  for job in $jobs; do
    if [ $((r % 2)) = 1 ]; then sweep; else sweep | tac; fi >"$ini_dir/sweep"
    while read -r side cfg; do
      case $side in
      torc) run_torc "$cfg" "$job" ;;
      ort) run_ort "$cfg" "$job" ;;
      torch) run_torch "$cfg" "$job" ;;
      esac
    done <"$ini_dir/sweep"
  done
  r=$((r + 1))
done
for t in $threads; do
  measure machine "${t}t" peak "$build/bench/compare/peak" "$t"
done
[ ! -t 2 ] || printf '\r%80s\r' '' >&2
[ -z "$raw" ] || cp "$out" "$raw"

tlist=$(echo "$threads" | sed 's/ /, /g')
echo "torc vs PyTorch (eval rows: and onnxruntime${ort_version:+ $ort_version}):" \
  "each side at its best of $tlist threads and its configurations;"
echo "medians of $runs runs, training on $samples samples; PyTorch:" \
  "${debian_version:+Debian $debian_version}${debian_version:+${pypi_version:+, }}${pypi_version:+PyPI $pypi_version}" \
  "(--torch-configs $torch_configs)"
sed 's/^/  /' "$notes"
awk -v tl="$threads" -v lb="$load_before" -v bl="$busy_load" \
  -v bo="$busy_others" '
  function cfgname(c) { gsub(/_/, " ", c); return c }
  $1 == "M" {
    id = $2; mside[id] = $3; mcfg[id] = $4; mjob[id] = $5; mload[id] = $6
    # over at least a second: one 10 ms tick of a daemon is not 10% of a
    # 0.1 s measurement
    mfrac[id] = $7 / ($8 > 1 ? $8 : 1); mrc[id] = $9; nm++
    if ($9 != 0) { nfail++; failed = failed (failed == "" ? "" : "; ") \
      $3 " " cfgname($4) " " $5 }
    if (mfrac[id] > bo) {
      nbusy++
      if (mfrac[id] > worst) { worst = mfrac[id]
        worstwhat = $3 " " cfgname($4) " " $5 }
    }
    if ($6 > maxload) maxload = $6
    if (mfrac[id] > maxfrac) maxfrac = mfrac[id]
    next
  }
  $1 != "R" { next }
  {
    id = $2; side = $3; cfg = $4; m = $5
    if (side == "machine") {
      if (m == "peak_isa") { isa = $6; next }
      if (m == "peak_gflops") {
        t = cfg + 0; if ($6 + 0 > peak[t] + 0) peak[t] = $6 + 0
        if (mfrac[id] > bo) peakbusy[t] = 1
        next
      }
    }
    key = side SUBSEP cfg SUBSEP m
    vals[key, ++cnt[key]] = $6
    if (!(key in cseen)) { cseen[key] = 1
      cfgs[side, m] = cfgs[side, m] " " cfg }
    if (mfrac[id] > bo) busyrow[side, m] = 1
    if (mload[id] > rowload[side, m]) rowload[side, m] = mload[id]
    if (!(m in seen) && side != "machine") { seen[m] = 1; order[n++] = m }
  }
  function med(key,   k, i, j, t, a) {
    k = cnt[key]; if (k == 0) return ""
    for (i = 1; i <= k; i++) a[i] = vals[key, i] + 0
    for (i = 2; i <= k; i++)
      for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
        t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
      }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  # best(SIDE, M): the best median over the side s configurations, its
  # configuration in bestcfg.
  function best(side, m,   c, i, k, v, b) {
    bestcfg = ""; b = ""
    k = split(cfgs[side, m], c, " ")
    for (i = 1; i <= k; i++) {
      v = med(side SUBSEP c[i] SUBSEP m)
      if (v == "") continue
      if (b == "" || (lower ? v + 0 < b + 0 : v + 0 > b + 0)) {
        b = v; bestcfg = c[i]
      }
    }
    return b
  }
  function threadsof(c) { return match(c, /[0-9]+t/) ? \
    substr(c, RSTART, RLENGTH - 1) + 0 : 0 }
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
    else if (m ~ /^train_/) { unit = "samples/s"; rt = 2 }
    else if (m ~ /^eval_/) { unit = "samples/s"; rt = 1.5 }
    else if (m == "op_ns") { unit = "ns"; lower = 1; rt = 5; at = 200 }
    else if (m == "autograd_ns") { unit = "ns"; lower = 1; rt = 5; at = 1000 }
    else if (m == "latency_us") { unit = "us"; lower = 1 }
    else if (m ~ /^gemm_/) {
      unit = "GFLOP/s"; pt = (substr(m, 6) + 0 >= 1024) ? 80 : 65 }
    else if (m == "conv") { unit = "GFLOP/s"; pt = 85 }
    else if (m ~ /^rss_/) { unit = "KiB"; lower = 1; rt = 2 }
    else if (m == "startup_s") { unit = "s"; lower = 1; at = 0.1 }
    t = ""
    if (rt) t = sprintf(">=%gx", rt)
    if (at) t = t (t == "" ? "" : ", ") sprintf("<=%g %s", at, unit)
    if (pt) t = t (t == "" ? "" : ", ") sprintf(">=%g%% peak", pt)
    if (t != "") tgt = t
  }
  function pct(v, c,   t) {
    t = threadsof(c)
    return (v != "" && peak[t] + 0 > 0) ? \
      sprintf("%s (%.0f%%)", fmt(v), 100 * v / peak[t]) : fmt(v)
  }
  END {
    # The peak is a constant of the machine that only a busy spell lowers:
    # the best of the runs, per thread count, and never below the peak of
    # fewer threads.
    printf "machine fp32 FMA peak (%s):", isa
    nt = split(tl, tt, " ")
    for (i = 1; i <= nt; i++)
      for (j = 1; j <= nt; j++)
        if (tt[j] + 0 < tt[i] + 0 && peak[tt[j] + 0] + 0 > peak[tt[i] + 0] + 0) {
          peak[tt[i] + 0] = peak[tt[j] + 0]
          if (peakbusy[tt[j] + 0]) peakbusy[tt[i] + 0] = 1
        }
    for (i = 1; i <= nt; i++)
      printf "%s %s GFLOP/s at %d threads", (i > 1 ? ";" : ""),
        fmt(peak[tt[i] + 0]), tt[i]
    print ""
    print "ratio > 1: torc is better (pytorch/torc for times, ns, us," \
      " KiB; torc/pytorch for rates); ! : a busy measurement fed the row"
    fmtrow = "%-19s %-9s %15s %-4s %15s %-33s %6s  %-20s %-2s %11s %-4s %6s %5s %s\n"
    printf fmtrow, "measure", "unit", "torc", "cfg", "pytorch", "config",
      "ratio", "target", "ok", "onnxruntime", "cfg", "ratio", "load", ""
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
    nflag = 0
    for (i = 0; i < k; i++) {
      m = rows[i]; meta(m)
      # the planned eval beside the eager eval of the other sides
      om = m; sub(/eval_plan_/, "eval_", om)
      t = best("torc", m); tc = bestcfg
      p = best("torch", om); pc = bestcfg
      o = best("ort", om); oc = bestcfg
      oratio = ""
      if (t != "" && o != "" && t + 0 > 0 && o + 0 > 0)
        oratio = lower ? o / t : t / o
      ratio = ""
      if (t != "" && p != "" && t + 0 > 0 && p + 0 > 0)
        ratio = lower ? p / t : t / p
      ts = fmt(t); ps = fmt(p); tpk = 0
      if (unit == "GFLOP/s") {
        ts = pct(t, tc); ps = pct(p, pc); tpk = peak[threadsof(tc)] + 0
      }
      flag = (busyrow["torc", m] || busyrow["torch", om] || \
        busyrow["ort", om] || (unit == "GFLOP/s" && \
        (peakbusy[threadsof(tc)] || peakbusy[threadsof(pc)]))) ? "!" : ""
      if (flag != "") { nflag++; flagged = flagged " " m }
      load = rowload["torc", m]
      if (rowload["torch", om] > load) load = rowload["torch", om]
      if (rowload["ort", om] > load) load = rowload["ort", om]
      # ok: every part of the target met; ? where a part needs PyTorch.
      ok = ""
      if (tgt != "-") {
        ok = "✓"
        if (t == "") ok = "?"
        else {
          if (at && t + 0 > at) ok = "✗"
          if (pt && !(tpk > 0)) ok = (ok == "✗") ? ok : "?"
          else if (pt && 100 * t / tpk < pt) ok = "✗"
          if (rt && ratio == "") ok = (ok == "✗") ? ok : "?"
          else if (rt && ratio < rt) ok = "✗"
        }
      }
      printf fmtrow, m, unit, ts, (tc == "" ? "-" : cfgname(tc)), ps,
        (pc == "" ? "-" : cfgname(pc)),
        (ratio == "" ? "-" : sprintf("%.2f", ratio)), tgt, ok,
        (o != "" ? fmt(o) : "-"), (oc == "" ? "-" : cfgname(oc)),
        (oratio == "" ? "-" : sprintf("%.2f", oratio)), load, flag
    }
    printf "load: %.2f before the run (1-minute average), up to %.2f before" \
      " a measurement; other processes used up to %.0f%% of a core during" \
      " one (%d measurements)\n", lb, maxload, 100 * maxfrac, nm
    why = ""
    if (lb + 0 > bl + 0)
      why = sprintf("the load average was %.2f before the run (> %g)", lb, bl)
    if (nbusy)
      why = why (why == "" ? "" : "; ") sprintf("other processes used more" \
        " than %.0f%% of a core during %d of %d measurements (worst %.0f%%:" \
        " %s), rows marked !:%s", 100 * bo, nbusy, nm, 100 * worst,
        worstwhat, flagged)
    if (nfail)
      why = why (why == "" ? "" : "; ") sprintf("%d measurements failed" \
        " (%s)", nfail, failed)
    if (why == "") print "verdict: quiet: quotable"
    else print "verdict: BUSY: not quotable, because " why
  }' "$out" >"$res"
# The table, then the notes, then the verdict last.
sed '$d' "$res"
echo "Data: PyTorch's set is decoded once into a tensor (${TORCH_DATA:-float})" \
  "and batches gathered by a"
echo "shuffled index, its fastest path; torc's go through its DataLoader" \
  "with a per-sample transform."
[ "$have_ort" = 0 ] || echo "onnxruntime ($ort_python): intra_op_num_threads" \
  "as its cfg, sequential, the PyTorch side's pre-decoded input."
case $jobs in *seq:*)
  echo "train_seq_*: batch 32 x context 128 random token ids, vocabulary" \
    "113; median of $seq_steps timed steps after 3 warm-up;" \
    "causal float mask, foreach Adam/AdamW." ;;
esac
echo "startup_s: wall time of a process that loads the training set," \
  "builds the MLP, takes one step."
tail -n 1 "$res"
