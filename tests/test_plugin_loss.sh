#!/bin/sh
# tests/test_plugin_loss.sh — examples/plugin-loss: a loss plugin built out
# of tree against the installed headers (make install into a temporary
# folder, pkg-config), loaded from an INI file and used by torc train; with
# gamma = 0 the focal loss trains as cross-entropy does.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup plugin-loss
for tool in "${PKG_CONFIG:-pkg-config}" "${CC:-cc}" "${MAKE:-make}"; do
  command -v "${tool%% *}" >/dev/null 2>&1 || {
    echo "SKIP: no $tool"
    exit 77
  }
done
MAKE=${MAKE:-make}
unset MAKEFLAGS MFLAGS MAKELEVEL

what="make install DESTDIR"
rc=0
$MAKE -C "$TORC_TOP_BUILDDIR" install DESTDIR="$tmp/dest" >"$tmp/out" 2>"$tmp/err" ||
  { rc=$?; fail "make install failed"; }
pc=$(find "$tmp/dest" -name torc.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || fail "no torc.pc under $tmp/dest"
PKG_CONFIG_LIBDIR=$(dirname "$pc") PKG_CONFIG_PATH= \
  PKG_CONFIG_SYSROOT_DIR=$tmp/dest PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1
export PKG_CONFIG_LIBDIR PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR \
  PKG_CONFIG_ALLOW_SYSTEM_CFLAGS

cp -R "$TORC_TOP_SRCDIR/examples/plugin-loss" "$tmp/pl"
chmod -R u+w "$tmp/pl"
what="make focal.so check-exports (out of tree)"
$MAKE -C "$tmp/pl" focal.so check-exports >"$tmp/out" 2>"$tmp/err" ||
  { rc=$?; fail "the plugin did not build against the installed headers"; }
grep -q -- "-I$tmp/dest" "$tmp/out" || fail "not built with the installed headers"
pass "built out of tree against the installed headers, one export"

done_value() {
  tail -n 1 "$tmp/out" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

run_torc train "$tmp/pl/focal.ini" --progress lines
expect_rc 0
expect_has out "epoch 5/5: train loss"
first=$(grep -m1 '^epoch 1/5: train loss' "$tmp/out" | sed 's/.*train loss \([0-9.]*\).*/\1/')
last=$(grep -m1 '^epoch 5/5: train loss' "$tmp/out" | sed 's/.*train loss \([0-9.]*\).*/\1/')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
  fail "the focal loss did not go down ($first -> $last)"
pass "torc train with [loss] type = focal from the plugin: $first -> $last"

run_torc train "$tmp/pl/focal.ini" --progress lines --set loss.gamma=0 --overwrite
expect_rc 0
fl=$(done_value test_loss) fa=$(done_value test_accuracy)
sed -e 's/^type = focal$/type = cross_entropy/' -e '/^gamma = /d' \
  -e 's/^\[plugin.focal\]$/[plugin.losses]/' -e 's/^module = focal$/module = losses/' \
  "$tmp/pl/focal.ini" >"$tmp/pl/ce.ini"
run_torc train "$tmp/pl/ce.ini" --progress lines
expect_rc 0
cl=$(done_value test_loss) ca=$(done_value test_accuracy)
awk -v a="$fl" -v b="$cl" 'BEGIN { d = a - b; exit !(d < 1e-3 && d > -1e-3) }' ||
  fail "gamma 0: test loss $fl, cross_entropy's $cl"
[ "$fa" = "$ca" ] || fail "gamma 0: test accuracy $fa, cross_entropy's $ca"
pass "gamma = 0 trains as cross_entropy (test loss $fl vs $cl, accuracy $fa)"

run_torc train "$tmp/pl/focal.ini" --set loss.gamma=-1
expect_rc 2
expect_has err "gamma"
pass "a bad gamma: the plugin's message, status 2"
echo "$n_pass checks passed"
