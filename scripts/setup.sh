#!/usr/bin/env bash
# scripts/setup.sh — installs what is missing (Debian packages only),
# generates the build system and builds torc in _build/. Idempotent: when
# nothing is missing and nothing changed it only runs an incremental make.
#
#   bash scripts/setup.sh            # install, configure, build
#   BUILD=_asan CONFIGURE_FLAGS=--enable-sanitizers bash scripts/setup.sh
#   bash scripts/setup.sh --fuzz     # also clang + libFuzzer; builds the
#                                    # fuzzers in _fuzz (docs/fuzzing.md)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
fuzz=no
for arg in "$@"; do
  case $arg in
    --fuzz) fuzz=yes ;;
    *) echo "usage: bash scripts/setup.sh [--fuzz]" >&2; exit 2 ;;
  esac
done
if [ $fuzz = yes ]; then
  BUILD=${BUILD:-_fuzz}
  CONFIGURE_FLAGS=${CONFIGURE_FLAGS:---enable-fuzzers}
fi
build=${BUILD:-_build}
case $build in /*) ;; *) build="$top/$build" ;; esac

# Debian packages the build and the tests need.
# zlib1g-dev, libpng-dev, libjpeg-dev: the data plugin (gzip IDX, PNG,
# JPEG); dataset-fashion-mnist: the examples and test_sources' real-data
# check (skipped without it); libopenblas-dev: the cpu plugin (optional:
# configure leaves it out without OpenBLAS, and its tests skip);
# libdnnl-dev: the onednn plugin (optional in the same way);
# librsvg2-bin: rsvg-convert, which test_curves renders curves.svg with
# (skipped without it); libprotobuf-c-dev, protobuf-c-compiler and
# libonnx-dev (onnx.proto): libtorc's ONNX import and export;
# libonnx-testdata: ONNX's backend test cases, which torc onnx-test runs
# in make check; python3-onnx: onnx.checker on exported models; fortunes:
# the text of examples/text (test_examples.sh trains on it briefly);
# libopenmpi-dev, openmpi-bin: the mpi plugin and mpirun (training in
# several processes, test_dist).
packages=(gcc make autoconf automake libtool pkg-config
          libprotobuf-c-dev protobuf-c-compiler libonnx-dev
          libonnx-testdata python3-onnx
          libinih-dev libjansson-dev libcmocka-dev valgrind
          zlib1g-dev libpng-dev libjpeg-dev dataset-fashion-mnist
          libopenblas-dev libdnnl-dev librsvg2-bin fortunes
          libopenmpi-dev openmpi-bin)
# --fuzz: clang with libFuzzer and the sanitizer runtimes, and
# llvm-symbolizer (llvm-14) for the stacks of its reports.
[ $fuzz = no ] || packages+=(clang-14 libclang-rt-14-dev llvm-14)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: run as root (or install: apt-get install ${missing[*]})" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# onnx and onnxruntime for the python3 on PATH (pip's, not Debian's):
# tests/test_onnx_export_cli.sh runs exported models with onnxruntime and
# skips that part, saying why, when they cannot be imported. A failure here
# (no network, no wheel for this python) is reported, never fatal.
if command -v python3 >/dev/null 2>&1 &&
   ! python3 -c 'import onnx, onnxruntime, numpy' >/dev/null 2>&1; then
  pip_log=$(mktemp)
  if python3 -m pip install -q --disable-pip-version-check --timeout 20 \
       onnxruntime onnx \
       >"$pip_log" 2>&1; then
    echo "setup: pip installed onnxruntime and onnx for $(command -v python3)"
  else
    echo "setup: pip could not install onnxruntime and onnx for" \
      "$(command -v python3) (the onnxruntime checks of make check will" \
      "skip): $(tail -n 1 "$pip_log")"
  fi
  rm -f "$pip_log"
fi

# Generate configure when absent or older than its inputs.
cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] ||
   [ -n "$(find . -name 'local.mk' -newer configure -print -quit)" ] ||
   [ Makefile.am -nt configure ]; then
  echo "setup: autoreconf"
  ./autogen.sh
fi

# The fuzzers need clang (Debian's clang-14 installs clang-14; the plain
# name comes with the clang package, which may be absent).
if [ $fuzz = yes ] && [ -z "${CC:-}" ]; then
  CC=$(command -v clang || command -v clang-14)
  export CC
fi

mkdir -p "$build"
cd "$build"
flags="--enable-werror ${CONFIGURE_FLAGS:-}${CC:+ CC=$CC}"
if [ ! -f config.status ] || [ "$top/configure" -nt config.status ] ||
   [ "$(cat .torc-configure-flags 2>/dev/null)" != "$flags" ]; then
  echo "setup: configure $flags"
  # shellcheck disable=SC2086
  "$top/configure" $flags >configure.out 2>&1 || { cat configure.out; exit 1; }
  sed -n '/will be built with/,$p' configure.out
  echo "$flags" > .torc-configure-flags
fi
make -j"$(nproc)" >make.out 2>&1 || { tail -50 make.out; exit 1; }
echo "setup: built in $build"
