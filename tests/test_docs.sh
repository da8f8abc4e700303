#!/bin/sh
# tests/test_docs.sh — docs/config.md documents every section and key that
# `torc help config` lists: each section as a "## `[SECTION]`" heading, each
# key as `KEY` under that heading. Prints the missing ones and fails.
# And `torc help ops` lists every row of the op table (include/torc/ops*.def)
# in the table's order.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup docs

doc=$TORC_TOP_SRCDIR/docs/config.md
if [ ! -r "$doc" ]; then
  echo "FAIL: $doc is missing"
  exit 1
fi

run_torc help config
expect_rc 0

# "[section]" or "[layer] (may repeat)" starts a section; "  key   text"
# (two spaces, a name) is a key; "(other keys)" and the description lines
# (four spaces) are neither.
awk '
  /^\[[^]]*\]/ { s = $1; print "S " s; next }
  /^  [a-z_][a-z0-9_]* / { print "K " s " " $1 }
' "$tmp/out" >"$tmp/schema"

if ! grep -q '^K \[train\] epochs$' "$tmp/schema"; then
  echo "FAIL: cannot parse the output of torc help config:"
  cat "$tmp/out"
  exit 1
fi

# The part of docs/config.md under the "## " heading naming a section.
doc_part() {
  awk -v s="\`$1\`" '
    /^## / { on = index($0, s) > 0; next }
    on { print }
  ' "$doc"
}

missing=0
while read -r kind section key; do
  if [ "$kind" = S ]; then
    if ! grep '^## ' "$doc" | grep -qF "\`$section\`"; then
      echo "MISSING: section $section (no \"## \`$section\`\" heading in docs/config.md)"
      missing=$((missing + 1))
    fi
  elif ! doc_part "$section" | grep -qF "\`$key\`"; then
    echo "MISSING: key '$key' of $section in docs/config.md"
    missing=$((missing + 1))
  fi
done <"$tmp/schema"

if [ "$missing" -ne 0 ]; then
  echo "FAIL: $missing sections or keys of torc help config are not in docs/config.md"
  exit 1
fi
n=$(wc -l <"$tmp/schema")
echo "PASS: docs/config.md documents the $n sections and keys of torc help config"

# ---- torc help ops: every op of the table, in order ----
run_torc help ops
expect_rc 0
cat "$TORC_TOP_SRCDIR"/include/torc/ops.def >"$tmp/def"
# ops.def includes the other tables where their sections go.
for part in ops_nn ops_index ops_fused; do
  grep -q "#include \"$part.def\"" "$tmp/def" ||
    { echo "FAIL: ops.def no longer includes $part.def"; exit 1; }
done
awk -v dir="$TORC_TOP_SRCDIR/include/torc" '
  /^#include "ops_[a-z]*\.def"/ {
    f = $2; gsub(/"/, "", f)
    while ((getline line < (dir "/" f)) > 0) print line
    next
  }
  { print }
' "$tmp/def" | sed -n 's/^TORC_OP(\([a-z0-9_]*\),.*/\1/p' >"$tmp/table_ops"
sed -n 's/^\([a-z0-9_]*\)  *[A-Z]* .* backward .*/\1/p' "$tmp/out" >"$tmp/help_ops"
if ! cmp -s "$tmp/table_ops" "$tmp/help_ops"; then
  echo "FAIL: torc help ops differs from the op table (< table, > help):"
  diff "$tmp/table_ops" "$tmp/help_ops" | head -20
  exit 1
fi
[ "$(wc -l <"$tmp/table_ops")" -gt 90 ] ||
  { echo "FAIL: only $(wc -l <"$tmp/table_ops") ops parsed from the table"; exit 1; }
echo "PASS: torc help ops lists the $(wc -l <"$tmp/table_ops") ops of the op table, in order"
