#!/bin/sh
# bench/setup-torch.sh — the PyTorch that users install today, for
# bench/compare.sh: a virtual environment (default bench/.venv-torch,
# ignored by git; TORCH_VENV overrides) holding the current release of
# torch from PyPI with onnxruntime, onnx and numpy beside it, so that the
# benchmark can run PyTorch eager and under torch.compile (inductor on the
# cpu, which compiles C++ with the system's g++) and onnxruntime from one
# interpreter. Debian's python3-torch (1.13, /usr/bin/python3) stays where
# it is; compare.sh measures both.
#
#   bash bench/setup-torch.sh            # create or update the venv
#   PYTHON=python3.12 bash bench/setup-torch.sh
#
# PyPI's default Linux wheel of torch is the CUDA build: it pulls the
# nvidia-* runtime packages (several GB on disk) even on a machine without
# a GPU, and PyPI has no cpu-only wheel (that one lives on PyTorch's own
# index). The cpu code of both builds is the same, so the default wheel is
# what this installs; set TORCH_INDEX_URL to a cpu-only index where one is
# reachable to skip the nvidia packages. Needs python3-venv and network
# access to PyPI; re-running it upgrades to the newest release.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
venv=${TORCH_VENV:-$top/bench/.venv-torch}
python=${PYTHON:-}
if [ -z "$python" ]; then
  # Debian's interpreter when it has venv (python3-venv), else the first
  # python3 on PATH.
  if /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null; then
    python=/usr/bin/python3
  else
    python=python3
  fi
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "setup-torch: creating $venv with $python"
  "$python" -m venv "$venv" || {
    echo "setup-torch: $python -m venv failed (apt-get install python3-venv)" >&2
    exit 1
  }
fi
vpy=$venv/bin/python
"$vpy" -m pip install -q --disable-pip-version-check --upgrade pip
if [ -n "${TORCH_INDEX_URL:-}" ]; then
  "$vpy" -m pip install --disable-pip-version-check --upgrade \
    --index-url "$TORCH_INDEX_URL" torch
fi
"$vpy" -m pip install --disable-pip-version-check --upgrade \
  torch onnxruntime onnx numpy
"$vpy" - <<'EOF'
import onnx, onnxruntime, torch
print("setup-torch: torch %s (cuda build: %s), onnxruntime %s, onnx %s"
      % (torch.__version__, torch.version.cuda is not None,
         onnxruntime.__version__, onnx.__version__))
EOF
du -sh "$venv" | sed 's/^/setup-torch: on disk: /'
