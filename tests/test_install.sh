#!/bin/sh
# tests/test_install.sh — installing as docs/install.md says, with nothing
# set in the environment: `make install DESTDIR=...` from the build tree
# (a torc.pc naming the configured prefix, a bin/torc that finds the libtorc
# installed beside it), and `make install prefix=DIR` from a copy of the
# build tree (a torc.pc naming DIR, plugins found in DIR/lib/torc/plugins,
# a program built with `pkg-config --cflags --libs torc` and the rpath of
# install.md that runs without LD_LIBRARY_PATH or TORC_PLUGIN_PATH).
# The copy keeps the build tree itself untouched while other tests use it.

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; }

if [ -z "${TORC_TOP_SRCDIR:-}" ] || [ -z "${TORC_TOP_BUILDDIR:-}" ]; then
  skip "TORC_TOP_SRCDIR/TORC_TOP_BUILDDIR unset: run through make check"
fi
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
command -v "$PKG_CONFIG" >/dev/null 2>&1 || skip "no pkg-config ($PKG_CONFIG)"
CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || skip "no C compiler ($CC)"
MAKE=${MAKE:-make}
command -v tar >/dev/null 2>&1 || skip "no tar (to copy the build tree)"
B=$TORC_TOP_BUILDDIR

tmp=$(mktemp -d "${TMPDIR:-/tmp}/torc-install.XXXXXX") ||
  fail "cannot create a temporary folder"
# shellcheck disable=SC2317 # called by the trap
cleanup() { chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Nothing of make check's environment helps the installed programs.
unset LD_LIBRARY_PATH TORC_PLUGIN_PATH PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
unset MAKEFLAGS MFLAGS MAKELEVEL # not children of the running make

# Programs this script starts run under valgrind when asked.
run() {
  if [ "${TORC_VALGRIND:-0}" = 1 ]; then
    valgrind --quiet --error-exitcode=99 --leak-check=full \
      --show-leak-kinds=definite,indirect,possible \
      --errors-for-leak-kinds=definite,indirect,possible \
      --suppressions="$TORC_TOP_SRCDIR/tests/valgrind.supp" "$@"
  else
    "$@"
  fi
}

# libtorc_of PROGRAM: the libtorc.so the dynamic loader picks for it.
libtorc_of() {
  l=$(ldd "$1" 2>/dev/null |
    sed -n 's/^[[:space:]]*libtorc\.so[^ ]* => \([^ ]*\).*/\1/p')
  [ -n "$l" ] && readlink -f "$l"
}

# ---- 1. make install DESTDIR=... from the build tree ----
prefix=$(sed -n 's/^prefix = //p' "$B/Makefile")
[ -n "$prefix" ] || fail "no prefix in $B/Makefile"
dest=$tmp/dest
real_tmp=$(cd "$tmp" && pwd -P)
if ! "$MAKE" -C "$B" install DESTDIR="$dest" >"$tmp/install1.log" 2>&1; then
  cat "$tmp/install1.log"
  fail "make install DESTDIR=$dest failed"
fi
pc=$dest$prefix/lib/pkgconfig/torc.pc
[ -f "$pc" ] || fail "make install DESTDIR=$dest put no $prefix/lib/pkgconfig/torc.pc there"
grep -qx "prefix=$prefix" "$pc" ||
  fail "the torc.pc installed under DESTDIR does not name the prefix $prefix: $(head -n 3 "$pc")"
torc=$dest$prefix/bin/torc
run "$torc" version >"$tmp/version.out" 2>&1 || {
  cat "$tmp/version.out"
  fail "the installed $prefix/bin/torc (under DESTDIR) does not run without LD_LIBRARY_PATH"
}
case $(libtorc_of "$torc") in
  "$real_tmp/dest$prefix/lib/"*) ;;
  *) fail "$prefix/bin/torc under DESTDIR uses libtorc '$(libtorc_of "$torc")', not the one installed beside it" ;;
esac
pass "make install DESTDIR: torc.pc names $prefix; bin/torc finds its libtorc"

# ---- 2. make install prefix=DIR from a copy of the build tree ----
# The copy lies in a mirror of the build tree's parent folder (links to
# each of its other entries), so that paths relative to the build tree, as
# a configure run as ../configure writes them, lead where they did.
srcdir=$(sed -n 's/^srcdir = //p' "$B/Makefile")
case $srcdir in
  ../../*|../..)
    skip "make install prefix=DIR is checked on a copy of the build tree, which cannot follow its source folder $srcdir: configure with an absolute path, as scripts/setup.sh does" ;;
esac
parent=$(cd "$B/.." && pwd) && name=$(basename "$B") ||
  fail "cannot find the folder above $B"
mkdir "$tmp/m" || fail "cannot create $tmp/m"
for e in "$parent"/* "$parent"/.[!.]*; do
  [ -e "$e" ] && [ "$(basename "$e")" != "$name" ] && ln -s "$e" "$tmp/m/"
done
copy=$tmp/m/$name
mkdir "$copy" || fail "cannot create $copy"
(cd "$B" && tar --exclude=./tests --exclude='*.log' --exclude='*.trs' \
   -cf - .) | (cd "$copy" && tar -xf -) ||
  fail "cannot copy the build tree $B"
p=$tmp/p
if ! "$MAKE" -C "$copy" install prefix="$p" >"$tmp/install2.log" 2>&1; then
  tail -n 40 "$tmp/install2.log"
  fail "make install prefix=$p failed"
fi
pc=$p/lib/pkgconfig/torc.pc
[ -f "$pc" ] || fail "make install prefix=$p put no lib/pkgconfig/torc.pc there"
PKG_CONFIG_PATH=$p/lib/pkgconfig
export PKG_CONFIG_PATH
[ "$("$PKG_CONFIG" --variable=prefix torc)" = "$p" ] ||
  fail "make install prefix=$p installed a torc.pc with prefix '$("$PKG_CONFIG" --variable=prefix torc)'"
libdir=$("$PKG_CONFIG" --variable=libdir torc)
[ "$libdir" = "$p/lib" ] && [ -e "$libdir/libtorc.so" ] ||
  fail "pkg-config --variable=libdir torc is '$libdir', without libtorc.so in it"
[ "$("$PKG_CONFIG" --variable=plugindir torc)" = "$p/lib/torc/plugins" ] ||
  fail "torc.pc's plugindir is '$("$PKG_CONFIG" --variable=plugindir torc)'"

run "$p/bin/torc" version >"$tmp/version.out" 2>&1 || {
  cat "$tmp/version.out"
  fail "$p/bin/torc version does not run without LD_LIBRARY_PATH"
}
case $(libtorc_of "$p/bin/torc") in
  "$real_tmp/p/lib/"*) ;;
  *) fail "$p/bin/torc uses libtorc '$(libtorc_of "$p/bin/torc")', not $p/lib's" ;;
esac
run "$p/bin/torc" plugins >"$tmp/plugins.out" 2>&1 || {
  cat "$tmp/plugins.out"
  fail "$p/bin/torc plugins failed"
}
grep -q "file: $p/lib/torc/plugins/ref\.so" "$tmp/plugins.out" || {
  cat "$tmp/plugins.out"
  fail "$p/bin/torc plugins does not find ref.so in $p/lib/torc/plugins"
}
pass "make install prefix=DIR: torc.pc, bin/torc, libtorc and the plugins in DIR"

# A program built the way docs/install.md says, run with nothing set.
cat >"$tmp/hello.c" <<'EOF'
/* Loads the installed ref plugin by name and multiplies two matrices. */
#include <stdio.h>
#include <torc/torc.h>

int main(void) {
  if (torc_plugin_load("ref", NULL) != TORC_OK) {
    fprintf(stderr, "%s\n", torc_last_error());
    return 1;
  }
  int scope = torc_scope_begin();
  torc_tensor *y = torc_matmul(torc_ones(TORC_SHAPE(2, 3), TORC_F32, TORC_CPU),
                               torc_ones(TORC_SHAPE(3, 4), TORC_F32, TORC_CPU));
  double v = 0;
  int ok = y != NULL && torc_item(torc_sum(y, NULL, 0, 0), &v) == TORC_OK;
  if (!ok)
    fprintf(stderr, "%s\n", torc_last_error());
  torc_scope_end(scope);
  torc_shutdown();
  printf("sum %g\n", v);
  return ok && v == 24 ? 0 : 1;
}
EOF
san=
if readelf -d "$libdir/libtorc.so" 2>/dev/null | grep -q 'libasan'; then
  san="-fsanitize=address,undefined"
elif readelf -d "$libdir/libtorc.so" 2>/dev/null | grep -q 'libtsan'; then
  san="-fsanitize=thread"
fi
# shellcheck disable=SC2046,SC2086 # pkg-config's flags split on purpose
"$CC" -std=c11 $san -o "$tmp/hello" "$tmp/hello.c" \
  $("$PKG_CONFIG" --cflags --libs torc) \
  -Wl,-rpath,"$("$PKG_CONFIG" --variable=libdir torc)" >"$tmp/cc.log" 2>&1 || {
  cat "$tmp/cc.log"
  fail "cannot build a program with pkg-config --cflags --libs torc"
}
run "$tmp/hello" >"$tmp/hello.out" 2>&1 || {
  cat "$tmp/hello.out"
  fail "a program built with pkg-config and the rpath does not run without LD_LIBRARY_PATH"
}
grep -qx "sum 24" "$tmp/hello.out" || fail "hello printed '$(cat "$tmp/hello.out")'"
pass "a program built with pkg-config and -Wl,-rpath runs with nothing set"
exit 0
