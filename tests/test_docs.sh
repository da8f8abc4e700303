#!/bin/sh
# tests/test_docs.sh — docs/config.md documents every section and key that
# `torc help config` lists: each section as a "## `[SECTION]`" heading, each
# key as `KEY` under that heading. Prints the missing ones and fails.

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
