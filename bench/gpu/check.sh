#!/usr/bin/env bash
# bench/gpu/check.sh — one prepared check of torc on a CUDA machine, in one
# run within a time budget: the environment, a fresh build, the cuda
# plugin's devices, conformance against ref and device tests
# (tests/test_cuda_device: streams, events, a bad index reported at the
# next wait, out of memory), the MLP and CNN examples
# trained on cuda:0 and on the cpu on the same short schedule (test
# accuracy within 0.3 points, step time), per-op overhead and step time
# beside PyTorch on CUDA where it is installed, and mixed precision on
# cuda:0 (both examples trained and timed in bf16 and fp16 beside f32, the
# bf16 checkpoint evaluated in f32 and bf16), and on a machine with two
# GPUs the MLP trained in two processes with NCCL (mpirun -np 2, one GPU
# per rank). Every step has its own
# timeout; a part that cannot run is a SKIP with the reason, one that
# fails a FAIL with the error, and the run goes on. The report is
# $OUT/report.md (written as the run goes, so it is there even if the run
# is cut short), the raw logs $OUT/*.log. Exit status 0 once the report
# is complete, whatever it holds; 2 on a usage error.
#   bash bench/gpu/check.sh [--budget SECONDS] [--samples N] [--test N]
#                           [--steps N] [--keep-build]
#     --budget S    the whole run's time (default 420); each step's timeout
#                   is its own limit or what is left, the smaller
#     --samples N   training samples of the one-epoch runs (default 20000)
#     --test N      test samples they are scored on (default 10000, all)
#     --steps N     timed steps of `torc bench` and PyTorch (default 50)
#     --keep-build  reuse the build folder of an earlier run (default: a
#                   fresh one)
# Environment: OUT (the report's folder, default ./gpu-check-out), BUILD
# (the build folder, default _gpu in the tree), CONFIGURE_FLAGS (added to
# configure's), CUDA_DIR (default /usr/local/cuda), FASHION_MNIST (the data
# set's folder, default /usr/share/datasets/fashion-mnist; without its
# files the training runs on synthetic data of the same shape), and, to
# rehearse the device parts where there is no GPU, CHECK_PLUGIN and
# CHECK_DEVICE (default cuda and cuda:0; e.g. sim and sim:0).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$PWD/gpu-check-out}
build=${BUILD:-$top/_gpu}
cuda_dir=${CUDA_DIR:-/usr/local/cuda}
data=${FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
plugin=${CHECK_PLUGIN:-cuda} dev=${CHECK_DEVICE:-cuda:0}
budget=420 samples=20000 test=10000 steps=50 keep=0
usage() {
  sed -n '/^#   bash/,/^#                   fresh one)/p' "$0" |
    sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case $1 in
  --budget) [ $# -gt 1 ] || usage; budget=$2; shift ;;
  --samples) [ $# -gt 1 ] || usage; samples=$2; shift ;;
  --test) [ $# -gt 1 ] || usage; test=$2; shift ;;
  --steps) [ $# -gt 1 ] || usage; steps=$2; shift ;;
  --keep-build) keep=1 ;;
  *) usage ;;
  esac
  shift
done
case $budget$samples$test$steps in *[!0-9]* | '') usage ;; esac
case $out in /*) ;; *) out=$PWD/$out ;; esac
case $build in /*) ;; *) build=$PWD/$build ;; esac
mkdir -p "$out/ini" "$out/runs" || exit 2
report=$out/report.md
t_start=$(date +%s)
deadline=$((t_start + budget))
jobs=$(nproc 2>/dev/null || echo 1)
[ "$jobs" -le 16 ] || jobs=16
npass=0 nfail=0 nskip=0

# ---- the report ----
esc() { printf '%s' "$*" | tr '|\n' '/ ' | cut -c1-400; }
table() { printf '\n| check | result | details |\n|---|---|---|\n' >>"$report"; }
section() { printf '\n## %s\n' "$1" >>"$report"; table; }
row() { # CHECK PASS|FAIL|SKIP|INFO DETAILS
  case $2 in PASS) npass=$((npass + 1)) ;; FAIL) nfail=$((nfail + 1)) ;;
  SKIP) nskip=$((nskip + 1)) ;; esac
  printf '| %s | %s | %s |\n' "$(esc "$1")" "$2" "$(esc "$3")" >>"$report"
  printf '%-44s %-4s %s\n' "$1" "$2" "$3" | cut -c1-200 >&2
}
para() { printf '\n%s\n' "$*" >>"$report"; }
finish() {
  # The weights of the runs are of no use in the report.
  find "$out/runs" -name '*.safetensors' -delete 2>/dev/null
  printf '\n## Summary\n\n%d PASS, %d FAIL, %d SKIP in %d s (budget %d s).\n' \
    "$npass" "$nfail" "$nskip" "$(($(date +%s) - t_start))" "$budget" \
    >>"$report"
  echo "check.sh: $npass PASS, $nfail FAIL, $nskip SKIP; report: $report" >&2
}

# step NAME LIMIT CMD...: runs CMD under timeout (LIMIT seconds or what is
# left of the budget, the smaller), output in $out/NAME.log; status in rc,
# the reason of a failure in why. No time left: rc 125.
step() {
  name=$1 limit=$2
  shift 2
  left=$((deadline - $(date +%s) - 5))
  [ "$left" -lt "$limit" ] && limit=$left
  log=$out/$name.log
  if [ "$limit" -lt 3 ]; then
    rc=125 why="the budget is spent"
    echo "not run: $why" >"$log"
    return 0
  fi
  timeout -k 5 "$limit" "$@" >"$log" 2>&1
  rc=$?
  case $rc in
  0) why= ;;
  124 | 137) why="timed out after $limit s" ;;
  *) why="exit $rc: $(grep -v '^ *$' "$log" | tail -n 1)" ;;
  esac
  return 0
}

{
  echo "# torc GPU check"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M:%S UTC'); budget $budget s; one-epoch runs" \
    "on $samples training samples, scored on ${test} test samples; $steps" \
    "timed steps. Raw logs: *.log beside this file."
} >"$report"

# ---- 1. the environment ----
section "1. Environment"
row "machine" INFO "$(uname -srm); $(nproc) CPUs; $(free -g 2>/dev/null | awk '/^Mem:/ { print $2 " GiB memory" }')"
git -C "$top" log -1 --format='%h %s' >"$out/git.log" 2>&1 &&
  row "source" INFO "$(cat "$out/git.log")$(git -C "$top" status --porcelain 2>/dev/null | grep -q . && echo ' (with local changes)')"
if command -v nvidia-smi >/dev/null 2>&1; then
  step nvidia-smi 30 nvidia-smi
  gpu=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader 2>&1 | head -n 4 | tr '\n' ';')
  row "nvidia-smi" INFO "${gpu:-$why}"
else
  echo none >"$out/nvidia-smi.log"
  row "nvidia-smi" INFO "none"
fi
nvcc=${NVCC:-$cuda_dir/bin/nvcc}
[ -x "$nvcc" ] || nvcc=$(command -v nvcc 2>/dev/null || echo "$nvcc")
if [ -x "$nvcc" ]; then
  "$nvcc" --version >"$out/nvcc.log" 2>&1
  row "nvcc" INFO "$nvcc: $(grep -i release "$out/nvcc.log" | head -n 1)"
else
  row "nvcc" INFO "none at $cuda_dir/bin/nvcc (nor on PATH)"
fi
cudnn_h=$(ls -d "$cuda_dir"/include/cudnn_version.h /usr/include/cudnn_version.h \
  /usr/include/*/cudnn_version.h 2>/dev/null | head -n 1)
if [ -n "$cudnn_h" ]; then
  row "cuDNN" INFO "$(awk '/define CUDNN_(MAJOR|MINOR|PATCHLEVEL) / { v = v (v ? "." : "") $3 } END { print v }' "$cudnn_h") ($cudnn_h)"
else
  row "cuDNN" INFO "no cudnn_version.h in $cuda_dir/include or /usr/include"
fi
ls "$cuda_dir"/lib64/libcudart.so* "$cuda_dir"/lib64/libcublas.so* \
  "$cuda_dir"/lib64/libcudnn.so* >"$out/cuda-libs.log" 2>&1
row "CUDA libraries" INFO "$(sed 's|.*/||' "$out/cuda-libs.log" | grep -v ' ' | tr '\n' ' ')"
have=
missing=
for m in inih jansson zlib libpng libjpeg cmocka openblas; do
  if pkg-config --exists "$m" 2>/dev/null; then have="$have $m"
  else missing="$missing $m"; fi
done
if [ -f /usr/include/dnnl.h ]; then have="$have onednn"; else missing="$missing onednn"; fi
for t in autoreconf make gcc pkg-config apt-get; do
  if command -v "$t" >/dev/null 2>&1; then have="$have $t"
  else missing="$missing $t"; fi
done
if [ -f "$data/train-images-idx3-ubyte.gz" ] && [ -f "$data/t10k-labels-idx1-ubyte.gz" ]; then
  have="$have fashion-mnist" dataset=1
else
  missing="$missing fashion-mnist" dataset=0
fi
step torch-probe 90 python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())'
torch_cuda=0
if [ "$rc" = 0 ]; then
  read -r torch_v torch_cv torch_ok <"$out/torch-probe.log"
  have="$have torch-$torch_v"
  [ "$torch_ok" = True ] && torch_cuda=1
  row "PyTorch" INFO "$torch_v (CUDA $torch_cv), torch.cuda.is_available(): $torch_ok"
else
  missing="$missing python3-torch"
  row "PyTorch" INFO "not importable: $why"
fi
row "found" INFO "${have# }"
missing=${missing# }
row "missing" INFO "${missing:-none}"

# ---- 2. the build ----
section "2. Build"
torc=$build/tools/torc
export TORC_PLUGIN_PATH=$build/plugins/.libs
build_ok=0 cuda_built=0
gen_ok=1
have_autoreconf=0
command -v autoreconf >/dev/null 2>&1 && have_autoreconf=1
if [ ! -x "$top/configure" ] || { [ "$have_autoreconf" = 1 ] &&
  [ "$top/configure.ac" -nt "$top/configure" ]; }; then
  if [ "$have_autoreconf" = 1 ]; then
    step autogen 120 sh -c "cd '$top' && ./autogen.sh"
    if [ "$rc" = 0 ]; then row "autoreconf" PASS "configure generated"
    else row "autoreconf" FAIL "$why"; gen_ok=0; fi
  else
    row "autoreconf" FAIL "no configure in the tree and no autoreconf" \
      "(autoconf, automake, libtool): bring configure, Makefile.in," \
      "config.h.in, aclocal.m4, build-aux and m4 from a machine that has them"
    gen_ok=0
  fi
elif [ "$have_autoreconf" = 0 ]; then
  # The generated files as they came, newer than their inputs in their
  # generation order, so that make does not ask for automake.
  (cd "$top" && touch aclocal.m4 && sleep 1 && touch configure config.h.in &&
    find . -name Makefile.in -exec touch {} +) 2>/dev/null
  row "autoreconf" INFO "none; the configure that came with the tree is used"
fi
if [ "$gen_ok" = 1 ]; then
  [ "$keep" = 1 ] || rm -rf "$build"
  mkdir -p "$build"
  if [ "$keep" = 1 ] && [ -f "$build/config.status" ]; then
    rc=0
  else
    # shellcheck disable=SC2086 # the flags' words, split on purpose
    step configure 180 sh -c "cd '$build' && '$top/configure' --with-cuda='$cuda_dir' ${CONFIGURE_FLAGS:-}"
  fi
  if [ "$rc" = 0 ]; then
    row "configure" PASS "$(sed -n 's/^ *plugins\/cuda *(CUDA device) *//p' "$out/configure.log" 2>/dev/null | head -n 1 | sed 's/^/plugins\/cuda: /')"
    # all first, then the benchmark program: one make with both goals
    # runs all's recursive make beside the program's own rules, and the
    # two build the same objects at once.
    step make 300 sh -c "make -C '$build' -j$jobs all &&
      make -C '$build' -j$jobs bench/gpu/op_overhead"
    if [ "$rc" = 0 ]; then
      build_ok=1
      row "make -j$jobs" PASS "built in $build"
    else
      row "make -j$jobs" FAIL "$(grep -E 'error:|Error [0-9]|cannot' "$out/make.log" | head -n 1) ($why)"
    fi
  else
    row "configure" FAIL "$(grep -E 'error:' "$out/configure.log" | head -n 1 | sed 's/^configure: //') ($why)"
  fi
  [ -f "$build/plugins/.libs/$plugin.so" ] && cuda_built=1
  if [ "$build_ok" = 1 ] && [ "$cuda_built" = 0 ]; then
    row "$plugin plugin" FAIL "not built: $(sed -n 's/^ *plugins\/cuda *(CUDA device) *//p' "$out/configure.log" | head -n 1)"
  elif [ "$cuda_built" = 1 ]; then
    row "$plugin plugin" PASS "$build/plugins/.libs/$plugin.so"
  fi
fi

# ---- 3. the plugin: devices and conformance ----
section "3. The $plugin plugin"
ndev=0 nodev=
if [ "$build_ok" = 0 ]; then
  nodev="the build failed"
elif [ "$cuda_built" = 0 ]; then
  nodev="the $plugin plugin was not built"
else
  step plugins 30 "$torc" plugins
  cuda_row=$(grep -E "^  $plugin +[0-9]+ device" "$out/plugins.log" | head -n 1 | sed 's/^ *//')
  if [ "$rc" = 0 ] && [ -n "$cuda_row" ]; then
    ndev=$(echo "$cuda_row" | awk '{ print $2 }')
    row "torc plugins" PASS "$cuda_row"
  else
    row "torc plugins" FAIL "${why:-no $plugin row in the device list}"
  fi
  if [ "$ndev" = 0 ]; then
    # The CUDA runtime's own words, from a run asking for the device.
    cat >"$out/ini/probe.ini" <<EOF
[plugin.ref]
module = ref
[plugin.$plugin]
module = $plugin
[device]
type = $dev
[data.train]
source = synthetic
shape = 4
samples = 8
batch_size = 8
[model]
input = 4
[layer]
type = linear
out_features = 2
[train]
dir = $out/runs/probe
EOF
    step probe 30 "$torc" train "$out/ini/probe.ini" --overwrite
    words=$(sed -n "s/.*$plugin has 0 devices: \\(.*\\); install or update.*/\\1/p;
      s/.*$plugin has 0 devices: \\(.*\\), or run on the CPU.*/\\1/p" "$out/probe.log" | head -n 1)
    nodev="no CUDA device: ${words:-$(tail -n 1 "$out/probe.log")}"
    row "$dev" SKIP "$nodev"
  fi
fi
if [ "$cuda_built" = 1 ]; then
  step test-backend 150 "$torc" test-backend "$plugin" --verbose
  summary=$(grep -E "^conformance on $plugin" "$out/test-backend.log" | tail -n 1)
  lacking=$(grep '^SKIP' "$out/test-backend.log" | grep -v 'refuses too' |
    awk '{ print $2 }' | sort -u | tr '\n' ' ')
  if [ "$ndev" = 0 ]; then
    row "torc test-backend $plugin" SKIP "$nodev; it says: $(grep -v '^ *$' "$out/test-backend.log" | tail -n 1)"
  elif [ "$rc" = 0 ]; then
    row "torc test-backend $plugin" PASS "$summary"
  else
    row "torc test-backend $plugin" FAIL "${summary:-$why}; first failures: $(grep '^FAIL' "$out/test-backend.log" | head -n 3 | tr '\n' ' ')"
  fi
  [ -z "$lacking" ] || row "ops without a $plugin kernel" INFO "$lacking"
else
  row "torc test-backend $plugin" SKIP "$nodev"
fi
# The device tests of the cuda plugin (streams, events, a bad index at
# the next wait, out of memory, one kernel of each family): a cmocka
# program that skips without a GPU.
if [ "$cuda_built" = 1 ] && [ "$plugin" = cuda ]; then
  step cuda-device-build 180 make -C "$build" -j"$jobs" tests/test_cuda_device
  if [ "$rc" != 0 ]; then
    row "tests/test_cuda_device" SKIP "not built (cmocka missing?): $why"
  else
    step cuda-device 120 "$build/tests/test_cuda_device"
    case $rc in
    0) row "tests/test_cuda_device" PASS "$(grep -c '^\[       OK \]' "$out/cuda-device.log") cases passed" ;;
    77) row "tests/test_cuda_device" SKIP "$(grep '^SKIP' "$out/cuda-device.log" | head -n 1)" ;;
    *) row "tests/test_cuda_device" FAIL "$why; $(grep -E '^\[  (FAILED|ERROR)' "$out/cuda-device.log" | head -n 3 | tr '\n' ' ')" ;;
    esac
  fi
fi
gpu_ok=0
[ "$cuda_built" = 1 ] && [ "$ndev" != 0 ] && gpu_ok=1
[ "$gpu_ok" = 1 ] || [ -n "$nodev" ] || nodev="$plugin lists no device"

# ---- 4. training: the device beside the cpu ----
# The INI files: the examples, or with synthetic data in place of
# Fashion-MNIST where the data set is not installed.
for m in mlp cnn; do
  src=$top/examples/fashion-mnist/$m.ini
  if [ "$dataset" = 1 ]; then
    sed "s|/usr/share/datasets/fashion-mnist|$data|" "$src" >"$out/ini/$m.ini"
  else
    awk '/^\[/ { skip = ($0 ~ /^\[data\./) } !skip' "$src" >"$out/ini/$m.ini"
    cat >>"$out/ini/$m.ini" <<EOF
[data.train]
source = synthetic
shape = 1,28,28
samples = $samples
batch_size = 64
shuffle = yes
workers = 1
[data.test]
source = synthetic
shape = 1,28,28
samples = $test
seed = 1
batch_size = 1000
EOF
  fi
done
printf '\n## 4. Training: one epoch on %s and on the cpu\n' "$dev" >>"$report"
if [ "$dataset" = 1 ]; then
  para "Data: Fashion-MNIST ($data)."
else
  para "Data: synthetic (N(0, 1) images, uniform labels: Fashion-MNIST is" \
    "not installed), so the accuracies are chance and only their agreement" \
    "and the step times mean anything."
fi
table
batches=$(((samples + 63) / 64))
# train_run NAME INI DEVICE [--set ...]: one epoch; sets acc (test
# accuracy, 0-1), ms (ms per training step), sps (samples/s).
train_run() {
  n=$1 ini=$2 on=$3
  shift 3
  set -- "$torc" train "$ini" --overwrite --progress lines \
    --set device.type="$on" --set torc.threads="$jobs" \
    --set train.epochs=1 --set data.train.limit="$samples" \
    --set data.test.limit="$test" --set train.dir="$out/runs/$n" "$@"
  [ "$on" = cpu ] || set -- "$@" --set plugin."$plugin".module="$plugin"
  step "train-$n" 150 "$@"
  acc='' ms='' sps=''
  [ "$rc" = 0 ] || return 0
  acc=$(sed -n 's/^done:.*test_accuracy=\([0-9.]*\).*/\1/p' "$out/train-$n.log")
  read -r sps ms <<EOF
$(awk -F, -v b="$batches" '$3 == "train" { s = $7; t = $8 } END {
    if (t > 0) printf "%.0f %.3f\n", s, 1000 * t / b }' "$out/runs/$n/metrics.csv")
EOF
}
fallback=
# The f32 runs on the device by model, for part 6: test accuracy, ms per
# step and the run's name.
declare -A f32_acc f32_ms f32_run
for m in mlp cnn; do
  ini=$out/ini/$m.ini
  train_run "$m-cpu" "$ini" cpu
  if [ "$rc" = 0 ]; then
    acc_cpu=$acc ms_cpu=$ms
    row "$m on cpu" PASS "test accuracy $acc; $ms ms/step, $sps samples/s ($jobs threads)"
  else
    acc_cpu='' ms_cpu=''
    row "$m on cpu" FAIL "$why"
  fi
  if [ "$gpu_ok" = 0 ]; then
    row "$m on $dev" SKIP "$nodev"
    continue
  fi
  train_run "$m-gpu" "$ini" "$dev"
  how=
  if [ "$rc" != 0 ] && grep -qi 'kernel' "$out/train-$m-gpu.log"; then
    row "$m on $dev" FAIL "$why"
    fallback="--set torc.fallback=cpu"
    # shellcheck disable=SC2086
    train_run "$m-gpu-fallback" "$ini" "$dev" $fallback
    how=" (torc.fallback=cpu)"
  fi
  if [ "$rc" != 0 ]; then
    row "$m on $dev$how" FAIL "$why"
    continue
  fi
  f32_acc[$m]=$acc f32_ms[$m]=$ms f32_run[$m]=$m-gpu${how:+-fallback}
  if [ -z "$how" ]; then
    row "$m on $dev" PASS "test accuracy $acc; $ms ms/step, $sps samples/s"
  else
    row "$m on $dev$how" INFO "test accuracy $acc; $ms ms/step, $sps samples/s"
  fi
  if [ -n "$acc_cpu" ]; then
    d=$(awk -v a="$acc" -v b="$acc_cpu" 'BEGIN { d = 100 * (a - b); if (d < 0) d = -d; printf "%.2f", d }')
    sp=$(awk -v a="$ms_cpu" -v b="$ms" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
    if awk -v d="$d" 'BEGIN { exit !(d <= 0.3) }'; then
      row "$m: $dev accuracy vs cpu$how" PASS "$d points apart (target <= 0.3); step time cpu/$dev $sp"
    else
      row "$m: $dev accuracy vs cpu$how" FAIL "$d points apart (target <= 0.3); step time cpu/$dev $sp"
    fi
  fi
done

# ---- 5. benchmarks: per-op overhead, step time, PyTorch on CUDA ----
section "5. Benchmarks"
fig=$out/figures.txt
: >"$fig"
if [ "$build_ok" = 1 ]; then
  step op-cpu 60 "$build/bench/gpu/op_overhead" cpu
  cat "$out/op-cpu.log" >>"$fig"
  if [ "$rc" = 0 ]; then row "op overhead, cpu" PASS "$(grep '^torc' "$out/op-cpu.log" | awk '{ printf "%s %s ns; ", $2, $4 }')"
  else row "op overhead, cpu" FAIL "$why"; fi
fi
if [ "$gpu_ok" = 1 ]; then
  step op-gpu 60 "$build/bench/gpu/op_overhead" "$dev"
  cat "$out/op-gpu.log" >>"$fig"
  if [ "$rc" = 0 ] && ! grep -q ' -$' "$out/op-gpu.log"; then
    row "op overhead, $dev" PASS "$(grep '^torc' "$out/op-gpu.log" | awk '{ printf "%s %s ns; ", $2, $4 }')"
  else
    row "op overhead, $dev" FAIL "${why:-$(grep -v '^torc' "$out/op-gpu.log" | head -n 1)}"
  fi
else
  row "op overhead, $dev" SKIP "$nodev"
fi
# torc bench: the step time and the profile of each model on each device.
for m in mlp cnn; do
  for on in cpu "$dev"; do
    n=$m-${on%%:*}
    if [ "$build_ok" = 0 ]; then
      row "torc bench $m on $on" SKIP "the build failed"
      continue
    fi
    set -- "$torc" bench "$out/ini/$m.ini" --steps "$steps" \
      --set device.type="$on" --set torc.threads="$jobs"
    how=
    if [ "$on" != cpu ]; then
      if [ "$gpu_ok" = 0 ]; then
        row "torc bench $m on $on" SKIP "$nodev"
        continue
      fi
      # shellcheck disable=SC2086 # the option's words, split on purpose
      set -- "$@" --set plugin."$plugin".module="$plugin" $fallback
      how=${fallback:+ (torc.fallback=cpu)}
    fi
    step "bench-$n" 120 "$@"
    line=$(grep -E 'ms/step' "$out/bench-$n.log" | head -n 1)
    if [ "$rc" = 0 ] && [ -n "$line" ]; then
      echo "$line" | awk -v m="$m" -v d="$on" '{
        for (i = 1; i <= NF; i++) {
          if ($(i) == "ms/step,") print "torc step_ms_" m " " d " " $(i - 1)
          if ($(i) == "samples/s") print "torc train_" m " " d " " $(i - 1) } }' >>"$fig"
      row "torc bench $m on $on$how" PASS "$line; top kernels: $(awk '/^kernels by op/ { on = 1; getline; next } on && NF == 0 { exit } on && n++ < 3 { printf "%s %s %s; ", $1, $3, $NF }' "$out/bench-$n.log")"
    else
      row "torc bench $m on $on$how" FAIL "$why"
    fi
  done
done
if [ "$plugin" != cuda ]; then
  row "PyTorch on $dev" SKIP "PyTorch's side runs on cuda devices only"
elif [ "$torch_cuda" = 1 ] && [ "$gpu_ok" = 1 ]; then
  step torch-cuda 180 python3 "$top/bench/gpu/torch_cuda.py" --device "$dev" --steps "$steps"
  grep '^torch' "$out/torch-cuda.log" >>"$fig"
  if [ "$rc" = 0 ]; then
    row "PyTorch on $dev" PASS "$(grep '^torch version' "$out/torch-cuda.log" | cut -d' ' -f3-); data $(awk '$2 == "data" { print $4 }' "$out/torch-cuda.log")"
  else
    row "PyTorch on $dev" FAIL "$why"
  fi
elif [ "$gpu_ok" = 0 ]; then
  row "PyTorch on $dev" SKIP "$nodev"
elif grep -q 'python3-torch' <<<"$missing"; then
  row "PyTorch on $dev" SKIP "PyTorch is not installed for python3"
else
  row "PyTorch on $dev" SKIP "torch.cuda.is_available() is false"
fi
# The figures side by side.
{
  echo
  echo "| measure | unit | torc cpu | torc $dev | PyTorch $dev | PyTorch/torc on $dev |"
  echo "|---|---|---|---|---|---|"
  awk -v dev="$dev" '
    { v[$1, $2, $3] = $4; if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 } }
    function f(x) { return x == "" ? "-" : x }
    END {
      for (i = 0; i < n; i++) {
        m = order[i]
        if (m == "version" || m == "data") continue
        unit = m ~ /_ns$/ ? "ns" : m ~ /^step_ms/ ? "ms" : "samples/s"
        t = v["torc", m, dev]; p = v["torch", m, dev]; r = "-"
        if (t + 0 > 0 && p + 0 > 0)
          r = sprintf("%.2f", unit == "samples/s" ? p / t : t / p)
        printf "| %s | %s | %s | %s | %s | %s |\n", m, unit,
          f(v["torc", m, "cpu"]), f(t), f(p), r
      }
    }' "$fig"
  echo
  echo "PyTorch/torc > 1: PyTorch is ahead (time ratio torc/PyTorch for ns" \
    "and ms, rate ratio PyTorch/torc for samples/s). op_ns: one add of two" \
    "16-float tensors, queued; op_sync_ns: with a synchronize after each;" \
    "step_ms and train: \`torc bench\` over $steps steps of batch 64, and" \
    "the same models in bench/gpu/torch_cuda.py."
} >>"$report"

# ---- 6. mixed precision on the device ----
# bf16 and fp16 ([train] precision) trained on part 4's schedule and timed
# as in part 5, beside the f32 runs there; the bf16 checkpoint evaluated
# in f32 and with [eval] precision = bf16.
printf '\n## 6. Mixed precision on %s\n' "$dev" >>"$report"
t_mp=$(date +%s)
# One epoch's test accuracy moves by points with any change of rounding:
# on the cpu (bf16 by onednn), the f32 CNN of part 4 at 20000 samples
# scores 83.2, 79.9 and 77.3% with seeds 0, 1 and 2 (the MLP 80.9, 82.2
# and 79.9%), and bf16 on the same seeds -2.1, +2.8 and +2.8 points from
# it. Part 4's 0.3 points hold because its two runs do the same
# arithmetic; a half-precision run is held to half_tol points of f32,
# which catches a broken half path, not the few tenths a full schedule
# would show.
half_tol=5
para "\`[train] precision = bf16\` and \`fp16\` on $dev on the schedule" \
  "of part 4 (one epoch on $samples samples, scored on $test): test" \
  "accuracy against the f32 run on $dev (PASS within $half_tol points:" \
  "after one epoch a change of rounding alone moves the accuracy by" \
  "points, as a change of seed does, so this catches a broken half path" \
  "and not the few tenths of a full schedule), the start-up header's" \
  "\`precision:\` line, and for fp16" \
  "the gradient scaler's skipped steps (the metrics CSV's" \
  "\`skipped_steps\`) with finite losses: PASS when fewer than half the" \
  "steps were skipped. \`torc bench\` ($steps steps) of each, against" \
  "part 5's f32 figure, with the provider of matmul and conv2d in its" \
  "profile; \`torc eval\` of the bf16 checkpoint in f32 and with" \
  "\`[eval] precision = bf16\`."
# Off cuda the half dtypes may have only the reference kernels, which
# [train] precision refuses unless allow_emulated.
half=
if [ "$plugin" != cuda ]; then
  half="--set train.allow_emulated=yes"
  para "$plugin is not cuda: the half-precision runs add" \
    "\`--set train.allow_emulated=yes\`, so that they run where only" \
    "reference kernels serve the dtype. Their accuracies are the half" \
    "arithmetic's; their step times say nothing of half-precision speed."
fi
table
# pts A B: |A - B| in points (A and B in 0-1).
pts() { awk -v a="$1" -v b="$2" 'BEGIN { d = 100 * (a - b); if (d < 0) d = -d; printf "%.2f", d }'; }
# ratio A B: A / B as "N.NNx"; "-" without both.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else print "-" }'; }
# within D LIMIT: D <= LIMIT.
within() { awk -v d="$1" -v l="$2" 'BEGIN { exit !(d <= l) }'; }
# finite X: X is a number, not nan or inf.
finite() { case $1 in '' | - | *[nN][aA][nN]* | *[iI][nN][fF]*) return 1 ;; esac; }
# csv_last RUN: from the last train and test rows of RUN's metrics CSV,
# by column name: tl (train loss), vl (test loss), nst (steps so far), k
# (skipped_steps); "-" for what is not there.
csv_last() {
  read -r tl vl nst k <<EOF
$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$(i)] = i; next }
  $(c["split"]) == "train" { tl = $(c["loss"]); n = $(c["step"])
    if (c["skipped_steps"]) k = $(c["skipped_steps"]) }
  $(c["split"]) == "test" { vl = $(c["loss"]) }
  function f(x) { return x == "" ? "-" : x }
  END { print f(tl), f(vl), f(n), f(k) }' "$out/runs/$1/metrics.csv" 2>/dev/null ||
  echo - - - -)
EOF
}
declare -A half_acc half_k half_bench
how=${fallback:+ (torc.fallback=cpu)}
for m in mlp cnn; do
  for p in bf16 fp16; do
    n=$m-$p
    if [ "$gpu_ok" = 0 ]; then
      row "$m $p on $dev" SKIP "$nodev"
      continue
    fi
    # shellcheck disable=SC2086 # the options' words, split on purpose
    train_run "$n" "$out/ini/$m.ini" "$dev" --set train.precision="$p" \
      $half $fallback
    if [ "$rc" != 0 ]; then
      row "$m $p on $dev$how" FAIL "$why"
      continue
    fi
    # The header's line ends with the plugins that serve the products in
    # the dtype: "...; bf16 matmul by cuda, conv2d by cuda".
    pl=$(sed -n 's/^precision: //p' "$out/train-$n.log" | head -n 1)
    if [ -z "$acc" ] || [ -z "$pl" ]; then
      row "$m $p on $dev$how" FAIL "no test accuracy or no precision: line in its output (train-$n.log)"
      continue
    fi
    half_acc[$n]=$acc
    row "$m $p on $dev$how" PASS "test accuracy $acc; $ms ms/step, $sps samples/s; precision: $pl"
    a32=${f32_acc[$m]:-}
    if [ -z "$a32" ]; then
      row "$m $p: accuracy vs f32" SKIP "no f32 run on $dev to compare with (part 4)"
    else
      d=$(pts "$acc" "$a32")
      what="$d points apart ($acc against $a32; target <= $half_tol); step time f32/$p $(ratio "${f32_ms[$m]}" "$ms")"
      if within "$d" "$half_tol"; then row "$m $p: accuracy vs f32" PASS "$what"
      else row "$m $p: accuracy vs f32" FAIL "$what"; fi
    fi
    [ "$p" = fp16 ] || continue
    csv_last "${f32_run[$m]:-none}"
    tl32=$tl vl32=$vl
    csv_last "$n"
    half_k[$m]=$k
    what="skipped_steps $k of $nst steps; train loss $tl (f32 $tl32), test loss $vl (f32 $vl32)"
    case $k in '' | *[!0-9]*) k=-1 ;; esac
    case $nst in '' | *[!0-9]*) nst=0 ;; esac
    if finite "$tl" && finite "$vl" && [ "$k" -ge 0 ] && [ $((2 * k)) -lt "$nst" ]; then
      row "$m fp16: loss scaling" PASS "$what: finite, not diverged"
    else
      row "$m fp16: loss scaling" FAIL "$what (target: finite losses, fewer than half the steps skipped)"
    fi
  done
done
# step32 MODEL: part 5's f32 ms per step of MODEL on the device.
step32() { awk -v m="$1" -v d="$dev" '$1 == "torc" && $2 == "step_ms_" m && $3 == d { print $4 }' "$fig"; }
# torc bench in each half precision. The profile names each op's
# provider, not its dtype: the dtype is autocast's (the step line's "bf16
# mixed precision"), and matmul and conv2d must be the plugin's, not ref's.
for m in mlp cnn; do
  for p in bf16 fp16; do
    n=$m-$p
    if [ "$gpu_ok" = 0 ]; then
      row "torc bench $m $p on $dev" SKIP "$nodev"
      continue
    fi
    # shellcheck disable=SC2086 # the options' words, split on purpose
    step "bench-$n" 120 "$torc" bench "$out/ini/$m.ini" --steps "$steps" \
      --set device.type="$dev" --set torc.threads="$jobs" \
      --set plugin."$plugin".module="$plugin" --set train.precision="$p" \
      $half $fallback
    line=$(grep -E 'ms/step' "$out/bench-$n.log" | head -n 1)
    if [ "$rc" != 0 ] || [ -z "$line" ]; then
      row "torc bench $m $p on $dev$how" FAIL "${why:-no ms/step line in bench-$n.log}"
      continue
    fi
    ms=$(echo "$line" | awk '{ for (i = 2; i <= NF; i++) if ($(i) == "ms/step,") print $(i - 1) }')
    half_bench[$n]=$ms
    # The profile shows the 15 ops that took the most time (on an
    # asynchronous device, to queue): the model's products that are shown
    # must all be the plugin's ("cuda", not "ref" nor "cuda+ref"), and at
    # least one must be shown.
    ops=matmul bad='' served='' unseen=''
    [ "$m" = cnn ] && ops="conv2d matmul"
    for o in $ops; do
      by=$(awk -v o="$o" '/^kernels by op/ { on = 1; getline; next }
        on && NF == 0 { exit } on && $1 == o { print $3; exit }' "$out/bench-$n.log")
      if [ "$by" = "$plugin" ]; then served="$served${served:+ and }$o"
      elif [ -n "$by" ]; then bad="$bad $o by $by;"
      else unseen="$unseen${unseen:+ and }$o"; fi
    done
    [ -n "$served" ] || [ -n "$bad" ] ||
      bad="$bad no ${ops// / nor } among the profile's ops shown;"
    echo "$line" | grep -q "$p mixed precision" ||
      bad="$bad the step line does not say \"$p mixed precision\";"
    mode=$(echo "$line" | sed -n 's/.*warm-up; \([^)]*\)).*/\1/p')
    what="$ms ms/step, f32/$p $(ratio "$(step32 "$m")" "$ms"); $mode; $served by $plugin${unseen:+ ($unseen not among the ops shown)}"
    if [ -z "$bad" ]; then
      row "torc bench $m $p on $dev$how" PASS "$what; top kernels: $(awk '/^kernels by op/ { on = 1; getline; next } on && NF == 0 { exit } on && n++ < 3 { printf "%s %s %s; ", $1, $3, $NF }' "$out/bench-$n.log")"
    else
      row "torc bench $m $p on $dev$how" FAIL "$ms ms/step;$bad"
    fi
  done
done
# torc eval of the bf16 checkpoint: in f32 (the default; the training's
# own last test pass is the same weights on the same data), then with
# [eval] precision = bf16, which scores an f32 pass and a bf16 one.
for m in mlp cnn; do
  n=$m-bf16
  ck=$out/runs/$n/final.safetensors
  if [ "$gpu_ok" = 0 ]; then
    row "torc eval $m bf16-trained, f32" SKIP "$nodev"
    row "torc eval $m bf16-trained, bf16" SKIP "$nodev"
    continue
  fi
  if [ ! -f "$ck" ]; then
    row "torc eval $m bf16-trained, f32" SKIP "no checkpoint: the bf16 run did not finish"
    row "torc eval $m bf16-trained, bf16" SKIP "no checkpoint: the bf16 run did not finish"
    continue
  fi
  # shellcheck disable=SC2086 # the option's words, split on purpose
  set -- "$torc" eval "$out/ini/$m.ini" --checkpoint "$ck" \
    --set device.type="$dev" --set torc.threads="$jobs" \
    --set plugin."$plugin".module="$plugin" --set data.test.limit="$test" \
    $fallback
  step "eval-$n-f32" 90 "$@"
  ea=$(sed -n 's/^eval:.*accuracy=\([0-9.]*\).*/\1/p' "$out/eval-$n-f32.log" | tail -n 1)
  if [ "$rc" != 0 ] || [ -z "$ea" ]; then
    row "torc eval $m bf16-trained, f32" FAIL "${why:-no eval: line in eval-$n-f32.log}"
  elif [ -z "${half_acc[$n]:-}" ]; then
    row "torc eval $m bf16-trained, f32" PASS "accuracy $ea"
  else
    at=${half_acc[$n]}
    d=$(pts "$ea" "$at")
    what="accuracy $ea; the training's last test pass $at, $d points apart (the same weights and data; target <= 0.1)"
    if within "$d" 0.1; then row "torc eval $m bf16-trained, f32" PASS "$what"
    else row "torc eval $m bf16-trained, f32" FAIL "$what"; fi
  fi
  step "eval-$n-bf16" 150 "$@" --set eval.precision=bf16
  # "precision: bf16 accuracy=A, f32 accuracy=B, delta=D (loss ...); pass
  # X s in bf16, Y s in f32"
  pl=$(sed -n 's/^precision: bf16 //p' "$out/eval-$n-bf16.log" | tail -n 1)
  if [ "$rc" != 0 ] || [ -z "$pl" ]; then
    row "torc eval $m bf16-trained, bf16" FAIL "${why:-no precision: line in eval-$n-bf16.log}"
    continue
  fi
  d=$(echo "$pl" | sed -n 's/.*delta=\([-+0-9.]*\).*/\1/p')
  d=$(pts "${d:-1}" 0)
  if within "$d" 0.3; then
    row "torc eval $m bf16-trained, bf16" PASS "$d points from f32 (target <= 0.3): $pl"
  else
    row "torc eval $m bf16-trained, bf16" FAIL "$d points from f32 (target <= 0.3): $pl"
  fi
done
row "time of part 6" INFO "$(($(date +%s) - t_mp)) s (meant to be under 90 s on an H100 with the default counts)"
# The figures side by side.
{
  echo
  echo "| model | f32 on $dev | bf16 | fp16 | bf16 - f32 | fp16 - f32 | fp16 skipped steps | step ms f32 | bf16 | fp16 | f32/bf16 | f32/fp16 |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for m in mlp cnn; do
    a32=${f32_acc[$m]:-} ab=${half_acc[$m-bf16]:-} ah=${half_acc[$m-fp16]:-}
    t32=$(step32 "$m")
    tb=${half_bench[$m-bf16]:-} th=${half_bench[$m-fp16]:-}
    db=- dh=-
    [ -n "$a32" ] && [ -n "$ab" ] && db=$(awk -v a="$ab" -v b="$a32" 'BEGIN { printf "%+.2f", 100 * (a - b) }')
    [ -n "$a32" ] && [ -n "$ah" ] && dh=$(awk -v a="$ah" -v b="$a32" 'BEGIN { printf "%+.2f", 100 * (a - b) }')
    echo "| $m | ${a32:--} | ${ab:--} | ${ah:--} | $db | $dh | ${half_k[$m]:--} | ${t32:--} | ${tb:--} | ${th:--} | $(ratio "$t32" "$tb") | $(ratio "$t32" "$th") |"
  done
  echo
  echo "Accuracies: test accuracy (0-1) after part 4's one epoch; the" \
    "differences in points. Step times: \`torc bench\` over $steps steps of" \
    "batch 64 (f32: part 5's run); f32/bf16 > 1: bf16 is faster."
} >>"$report"

# ---- 7. data-parallel training on two GPUs with NCCL ----
# The MLP on part 4's schedule in two processes (mpirun -np 2), one GPU
# each, the gradients all-reduced by the cuda plugin's nccl communicator.
# Each rank sees only its own GPU: a wrapper sets CUDA_VISIBLE_DEVICES to
# the rank's place on this machine (OMPI_COMM_WORLD_LOCAL_RANK; the Nth
# entry of an existing CUDA_VISIBLE_DEVICES list), so both run on cuda:0.
section "7. Data-parallel training: 2 GPUs with NCCL"
ngpu=0
command -v nvidia-smi >/dev/null 2>&1 &&
  ngpu=$(timeout 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
nccl_cfg=$(sed -n 's/^ *NCCL *(cuda communicator) *//p' "$out/configure.log" 2>/dev/null | head -n 1)
# The cuda plugin's provides line in part 3's listing: "communicators"
# when it was built with NCCL.
cuda_provides=$(awk '/^  [a-z]/ { p = $1 } p == "cuda" && /^      provides:/ { print; exit }' "$out/plugins.log" 2>/dev/null)
mpirun_bin=$(command -v mpirun 2>/dev/null)
if [ "$plugin" != cuda ]; then
  row "mlp on 2 GPUs, nccl" SKIP "NCCL runs on cuda devices only (the device parts ran on $dev)"
elif [ "$ngpu" -lt 2 ]; then
  row "mlp on 2 GPUs, nccl" SKIP "the NCCL part needs 2 GPUs and this machine has $ngpu"
elif [ "$gpu_ok" = 0 ]; then
  row "mlp on 2 GPUs, nccl" SKIP "$nodev"
elif ! echo "$cuda_provides" | grep -q communicators; then
  row "mlp on 2 GPUs, nccl" SKIP "the cuda plugin was built without NCCL (configure: NCCL ${nccl_cfg:-unknown}; it needs nccl.h and libnccl in $cuda_dir)"
elif [ ! -f "$build/plugins/.libs/mpi.so" ]; then
  row "mlp on 2 GPUs, nccl" SKIP "the mpi plugin, which carries NCCL's unique id to the ranks, was not built (Open MPI: libopenmpi-dev)"
elif [ -z "$mpirun_bin" ]; then
  row "mlp on 2 GPUs, nccl" SKIP "no mpirun (Open MPI: openmpi-bin)"
else
  n=mlp-nccl
  # Half the CPUs per rank.
  rjobs=$(((jobs + 1) / 2))
  # shellcheck disable=SC2016 # expanded by the rank's bash, not here
  step "train-$n" 150 env OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_DEBUG="${NCCL_DEBUG:-WARN}" \
    "$mpirun_bin" -np 2 --oversubscribe \
    bash -c 'IFS=, read -r -a v <<<"${CUDA_VISIBLE_DEVICES:-}"
      r=${OMPI_COMM_WORLD_LOCAL_RANK:?not started by Open MPI}
      CUDA_VISIBLE_DEVICES=${v[$r]:-$r} exec "$0" "$@"' \
    "$torc" train "$out/ini/mlp.ini" --overwrite --progress lines \
    --set device.type=cuda --set plugin.cuda.module=cuda \
    --set dist.backend=nccl --set dist.timeout=60 \
    --set torc.threads="$rjobs" --set train.epochs=1 \
    --set data.train.limit="$samples" --set data.test.limit="$test" \
    --set train.dir="$out/runs/$n"
  dline=$(grep '^dist: ' "$out/train-$n.log" | head -n 1)
  acc=$(sed -n 's/^done:.*test_accuracy=\([0-9.]*\).*/\1/p' "$out/train-$n.log" | head -n 1)
  # mpirun's own lines come last: the reason is a rank's first error.
  err=$(grep -m 1 -E '^torc train|NCCL WARN' "$out/train-$n.log")
  if [ "$rc" != 0 ]; then
    case $rc in
    124 | 137 | 125) ;;
    *) [ -z "$err" ] || why="exit $rc: $err" ;;
    esac
    row "mlp on 2 GPUs, nccl" FAIL "$why"
  elif ! echo "$dline" | grep -q '^dist: 2 ranks on nccl'; then
    row "mlp on 2 GPUs, nccl" FAIL "finished, but no \"dist: 2 ranks on nccl\" line in train-$n.log (${dline:-none})"
  else
    row "mlp on 2 GPUs, nccl" PASS "test accuracy ${acc:--}; $dline"
  fi
fi

finish
exit 0
