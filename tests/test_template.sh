#!/bin/sh
# tests/test_template.sh — the out-of-tree plugin template, as a vendor
# would use it: install torc into a temporary DESTDIR, build a copy of
# examples/plugin-template with its own Makefile against the INSTALLED
# headers (found with pkg-config), then load example.so into a program
# linked to the installed libtorc and run add, mul, fill_ and copy on
# example:0, and list it with the installed `torc plugins --config`.
# Never writes into the source tree (distcheck makes it read-only).

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ -z "${TORC_TOP_SRCDIR:-}" ] || [ -z "${TORC_TOP_BUILDDIR:-}" ]; then
  skip "TORC_TOP_SRCDIR/TORC_TOP_BUILDDIR unset: run through make check"
fi
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
command -v "$PKG_CONFIG" >/dev/null 2>&1 || skip "no pkg-config ($PKG_CONFIG)"
CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || skip "no C compiler ($CC)"
MAKE=${MAKE:-make}
command -v "${MAKE%% *}" >/dev/null 2>&1 || skip "no make ($MAKE)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/torc-template.XXXXXX") ||
  fail "cannot create a temporary folder"
# shellcheck disable=SC2317 # called by the trap
cleanup() { chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
dest=$tmp/dest

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

# The makes below are not children of the running `make check` (no
# jobserver, and its command-line variables such as TESTS are not theirs).
unset MAKEFLAGS MFLAGS MAKELEVEL

# ---- 1. install into a temporary DESTDIR (copies what is built) ----
if ! "$MAKE" -C "$TORC_TOP_BUILDDIR" install \
     DESTDIR="$dest" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"
  fail "make install DESTDIR=$dest failed"
fi
pc=$(find "$dest" -name torc.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || fail "make install put no torc.pc under $dest"

# ---- 2. pkg-config sees only the installed torc ----
PKG_CONFIG_LIBDIR=$(dirname "$pc")
PKG_CONFIG_PATH=
PKG_CONFIG_SYSROOT_DIR=$dest
PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1
PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
export PKG_CONFIG_LIBDIR PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR \
  PKG_CONFIG_ALLOW_SYSTEM_CFLAGS PKG_CONFIG_ALLOW_SYSTEM_LIBS
cflags=$("$PKG_CONFIG" --cflags torc) || fail "pkg-config --cflags torc failed"
libs=$("$PKG_CONFIG" --libs torc) || fail "pkg-config --libs torc failed"
case " $cflags " in
  *" -I$dest/"*) ;;
  *) fail "pkg-config --cflags torc gives '$cflags', not an include folder under $dest" ;;
esac
libdir=
for f in $libs; do
  case $f in -L*) libdir=${f#-L} ;; esac
done
if [ -z "$libdir" ] || [ ! -e "$libdir/libtorc.so" ]; then
  fail "no installed libtorc.so in '$libdir' (pkg-config --libs torc: $libs)"
fi

# ---- 3. build the template out of tree with its own Makefile ----
cp -R "$TORC_TOP_SRCDIR/examples/plugin-template" "$tmp/template" ||
  fail "cannot copy the template"
chmod -R u+w "$tmp/template"
if ! "$MAKE" -C "$tmp/template" PKG_CONFIG="$PKG_CONFIG" \
     CC="$CC" CFLAGS="-O1 -g -Werror" >"$tmp/build.log" 2>&1; then
  cat "$tmp/build.log"
  fail "building the template with its Makefile failed"
fi
so=$tmp/template/example.so
[ -f "$so" ] || fail "the template's Makefile built no example.so"
# Its headers came from the installed tree, not the source tree.
# shellcheck disable=SC2086
hdr=$("$CC" $cflags -M "$tmp/template/template.c" | tr ' ' '\n' |
  grep 'torc/plugin\.h$' | head -n 1)
case $hdr in
  "$dest"/*) ;;
  *) fail "template.c included torc/plugin.h from '$hdr', not from $dest" ;;
esac
if command -v nm >/dev/null 2>&1; then
  "$MAKE" -s -C "$tmp/template" check-exports ||
    fail "example.so exports more than torc_plugin_entry"
fi

# ---- 4. a program linked to the installed libtorc uses the plugin ----
cat >"$tmp/use_example.c" <<'EOF'
/* Loads example.so by path and runs its kernels on example:0. */
#include <stdio.h>
#include <string.h>
#include <torc/torc.h>

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "line %d: %s failed: %s\n", __LINE__, #cond,            \
              torc_last_error());                                              \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  const char *keys[] = {"memory_limit"};
  const char *values[] = {"4K"};
  torc_plugin_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.keys = keys;
  opts.values = values;
  opts.n_keys = 1;
  CHECK(torc_plugin_load(argv[1], &opts) == TORC_OK);
  torc_device dev;
  CHECK(torc_device_parse("example:0", &dev) == TORC_OK);
  CHECK(!torc_device_is_host(dev));

  const float av[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {10, -20, 0.5f};
  torc_tensor *a = torc_from_host(av, TORC_SHAPE(2, 3), TORC_F32, dev);
  torc_tensor *b = torc_from_host(bv, TORC_SHAPE(3), TORC_F32, dev);
  torc_tensor *sum = torc_add(a, b); /* b broadcast over rows */
  torc_tensor *prod = torc_mul(a, b);
  CHECK(sum != NULL && prod != NULL);
  CHECK(torc_device_eq(torc_device_of(sum), dev));
  float s[6], p[6];
  CHECK(torc_to_host(sum, s, sizeof s) == TORC_OK);
  CHECK(torc_to_host(prod, p, sizeof p) == TORC_OK);
  for (int i = 0; i < 6; i++) {
    CHECK(s[i] == av[i] + bv[i % 3]);
    CHECK(p[i] == av[i] * bv[i % 3]);
  }

  /* copy through strides: the transpose made contiguous on the device */
  torc_tensor *t = torc_transpose(sum, 0, 1);
  torc_tensor *tc = torc_contiguous(t);
  CHECK(tc != NULL && torc_is_contiguous(tc));
  float ts[6];
  CHECK(torc_to_host(tc, ts, sizeof ts) == TORC_OK);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++)
      CHECK(ts[i * 2 + j] == s[j * 3 + i]);

  /* copy with a cast, and fill_ */
  torc_tensor *d = torc_to_dtype(prod, TORC_I64);
  CHECK(d != NULL && torc_dtype_of(d) == TORC_I64);
  long long di[6];
  CHECK(torc_to_host(d, di, sizeof di) == TORC_OK);
  for (int i = 0; i < 6; i++)
    CHECK(di[i] == (long long)p[i]);
  torc_tensor *f = torc_full(TORC_SHAPE(4), 2.5, TORC_F32, dev);
  CHECK(f != NULL);
  float fv[4];
  CHECK(torc_to_host(f, fv, sizeof fv) == TORC_OK);
  for (int i = 0; i < 4; i++)
    CHECK(fv[i] == 2.5f);

  /* memory_limit = 4K: a 2048-float tensor does not fit */
  CHECK(torc_device_memory_allocated(dev) > 0);
  torc_tensor *big = torc_empty(TORC_SHAPE(2048), TORC_F32, dev);
  CHECK(big == NULL && torc_last_status() == TORC_ERR_OOM);
  CHECK(strstr(torc_last_error(), "memory_limit") != NULL);

  torc_release(a), torc_release(b), torc_release(sum), torc_release(prod);
  torc_release(t), torc_release(tc), torc_release(d), torc_release(f);
  CHECK(torc_device_memory_allocated(dev) == 0);
  torc_shutdown();
  printf("example.so: add, mul, copy and fill_ on example:0 ok\n");
  return 0;
}
EOF
# A sanitizer build of libtorc needs the program built the same way.
san=
if command -v readelf >/dev/null 2>&1 &&
   readelf -d "$libdir/libtorc.so" 2>/dev/null | grep -q 'libasan'; then
  san="-fsanitize=address,undefined"
fi
# shellcheck disable=SC2086
"$CC" -std=c11 $san $cflags -o "$tmp/use_example" "$tmp/use_example.c" \
  $libs >"$tmp/cc.log" 2>&1 || {
  cat "$tmp/cc.log"
  fail "cannot build a program against the installed torc"
}
LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
if command -v ldd >/dev/null 2>&1; then
  ldd "$tmp/use_example" | grep 'libtorc\.so' | grep -q "$dest" ||
    fail "use_example does not resolve libtorc from $dest: $(ldd "$tmp/use_example" | grep libtorc)"
fi
run "$tmp/use_example" "$so" || fail "using example.so failed (above)"

# ---- 5. the installed `torc plugins --config` lists it ----
torc=$(find "$dest" -path '*/bin/torc' -type f | head -n 1)
[ -n "$torc" ] || fail "make install put no bin/torc under $dest"
cat >"$tmp/example.ini" <<EOF
[plugin.example]
module = $so
memory_limit = 1M
EOF
run "$torc" plugins --config "$tmp/example.ini" >"$tmp/plugins.out" 2>&1 || {
  cat "$tmp/plugins.out"
  fail "torc plugins --config $tmp/example.ini failed"
}
# The plugin (by its real path), its device, and its kernels in the op
# table: rows "add ... f32" and "mul ... f32".
so_real=$(cd "$tmp/template" && pwd -P)/example.so
for want in "example 0.1.0" "$so_real" "example:0" \
            '^[[:space:]]*add[[:space:]].*f32' '^[[:space:]]*mul[[:space:]].*f32'; do
  grep -q -- "$want" "$tmp/plugins.out" || {
    cat "$tmp/plugins.out"
    fail "torc plugins --config does not show '$want'"
  }
done
echo "template: built against $dest and used through libtorc and torc plugins"
exit 0
