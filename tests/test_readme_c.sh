#!/bin/sh
# tests/test_readme_c.sh — README.md's "Using torc from C" program, taken
# from README's own text so that it cannot rot: the fenced C block after
# the line "<!-- tests/test_readme_c.sh builds and runs this -->" is written
# to a .c file, compiled with -Werror against the build tree's headers and
# libtorc, and run in a temporary folder. It must train (it exits non-zero
# when the loss did not halve), on the cpu plugin with an optimizer of the
# optim plugin, and leave its checkpoint: a safetensors file holding the
# model's weights and the optimizer's state.

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

if [ -z "${TORC_TOP_SRCDIR:-}" ] || [ -z "${TORC_TOP_BUILDDIR:-}" ]; then
  skip "TORC_TOP_SRCDIR/TORC_TOP_BUILDDIR unset: run through make check"
fi
CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || skip "no C compiler ($CC)"
B=$TORC_TOP_BUILDDIR
readme=$TORC_TOP_SRCDIR/README.md
[ -r "$readme" ] || fail "$readme is missing"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/torc-readme.XXXXXX") ||
  fail "cannot create a temporary folder"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP

# The fenced block that follows the marker line.
awk '
  /^<!-- tests\/test_readme_c\.sh builds and runs this -->$/ { marked = 1; next }
  marked && /^```c$/ { on = 1; marked = 0; next }
  on && /^```$/ { exit }
  on { print }
' "$readme" >"$tmp/readme.c"
[ -s "$tmp/readme.c" ] ||
  fail "README.md has no \`\`\`c block after the line '<!-- tests/test_readme_c.sh builds and runs this -->'"

# What the section promises a reader: a module, an optimizer, the fast
# plugins, a checkpoint.
for want in torc_sequential_new torc_optimizer_build torc_optimizer_step \
            '"cpu"' '"optim"' torc_checkpoint_new torc_state_dict_save \
            '\.safetensors"'; do
  grep -q -- "$want" "$tmp/readme.c" ||
    fail "README's C program does not use $want"
done
if grep -q '"ref"' "$tmp/readme.c" && ! grep -q '"cpu"' "$tmp/readme.c"; then
  fail "README's C program runs on the ref plugin alone"
fi

[ -e "$TORC_PLUGIN_PATH/cpu.so" ] ||
  skip "the cpu plugin is not built (configure found no OpenBLAS nor oneDNN): README's program needs it"

# A sanitizer build of libtorc needs the program built the same way.
san=
lib=$B/.libs/libtorc.so
if readelf -d "$lib" 2>/dev/null | grep -q 'libasan'; then
  san="-fsanitize=address,undefined"
elif readelf -d "$lib" 2>/dev/null | grep -q 'libtsan'; then
  san="-fsanitize=thread"
fi
# shellcheck disable=SC2086
"$CC" -std=c11 -Wall -Wextra -Werror $san -I"$TORC_TOP_SRCDIR/include" \
  -I"$B" -o "$tmp/readme" "$tmp/readme.c" "$lib" -Wl,-rpath,"$B/.libs" \
  >"$tmp/cc.log" 2>&1 || {
  cat "$tmp/cc.log"
  echo "--- the program, from README.md:"
  cat -n "$tmp/readme.c"
  fail "README's C program does not compile"
}

cd "$tmp" || fail "cannot cd to $tmp"
if [ "${TORC_VALGRIND:-0}" = 1 ]; then
  valgrind --quiet --error-exitcode=99 --leak-check=full \
    --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible \
    --suppressions="$TORC_TOP_SRCDIR/tests/valgrind.supp" \
    ./readme >out 2>&1
else
  ./readme >out 2>&1
fi
rc=$?
cat out
[ "$rc" -eq 0 ] || fail "README's C program exited with status $rc"

ckpt=$(grep -o '"[^"]*\.safetensors"' readme.c | head -n 1 | tr -d '"')
[ -s "$ckpt" ] || fail "README's C program wrote no $ckpt"
# The safetensors header (JSON after an 8-byte length) names the tensors.
for key in model.0.weight model.2.bias optimizer.state.0.exp_avg; do
  head -c 4096 "$ckpt" | grep -aq "\"$key\"" ||
    fail "the checkpoint $ckpt has no tensor $key"
done
echo "PASS: README's C program trains an MLP with Adam on cpu and writes $ckpt"
exit 0
