#!/bin/sh
# tests/test_text_train.sh — torc train on the text source, on a text
# written here: a per-token model (one-hot inputs, conv1d layers of kernel
# 1, cross_entropy over [N, vocabulary, context] against the next tokens)
# and a next-char model (target = next, flatten -> linear) each train two
# short epochs; the vocabulary is saved from the train part and read by
# [data.test] (split = test), whose loss is checked to fall below the
# uniform guess's. TORC_VALGRIND=1 runs torc under valgrind.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup text-train

cd "$tmp" || exit 1
i=0
: >corpus.txt
while [ $i -lt 12 ]; do
  printf 'the cat sat on the mat; the dog sat on the log.\n' >>corpus.txt
  i=$((i + 1))
done

# 16 distinct chars in the text: ' ' . ; \n a c d e g h l m n o s t.
# The sequence model: one-hot columns [16, 8], conv1d layers of kernel 1
# (each position sees its own token only: a bigram model), logits
# [N, 16, 8] against the next tokens [N, 8] (cross_entropy over [N, C, L]).
head() {
  cat <<EOF2
[torc]
seed = 1
deterministic = yes
[plugin.ref]
module = ref
[plugin.data]
module = data
[plugin.losses]
module = losses
[plugin.optim]
module = optim
[data.train]
source = text
path = corpus.txt
level = char
context = 8
stride = 3
encoding = onehot
target = $1
split = train
save_vocab = vocab.txt
batch_size = 16
shuffle = yes
[data.test]
source = text
path = corpus.txt
context = 8
encoding = onehot
target = $1
split = test
vocab = vocab.txt
batch_size = 16
[model]
input = 16,8
EOF2
}
tail_ini() {
  cat <<'EOF2'
[loss]
type = cross_entropy
[optimizer]
type = adam
lr = 0.01
[train]
epochs = 2
EOF2
}
{
  head sequence
  cat <<'EOF2'
[layer]
type = conv1d
out_channels = 32
kernel = 1
[layer]
type = relu
[layer]
type = conv1d
out_channels = 16
kernel = 1
EOF2
  tail_ini
} >seq.ini
# The next-char model: the whole window flattened, one linear layer.
{
  head next
  cat <<'EOF2'
[layer]
type = flatten
[layer]
type = linear
out_features = 16
EOF2
  tail_ini
} >next.ini

run_torc train seq.ini
expect_rc 0
[ -s vocab.txt ] || fail "save_vocab wrote no vocab.txt"
pass "a per-token language model trains on the text source"
[ "$(wc -l <vocab.txt)" -eq 16 ] ||
  fail "vocab.txt has $(wc -l <vocab.txt) lines, expected 16"
grep -qx '\\s' vocab.txt || fail "vocab.txt lacks the space as \\s"
grep -qx '\\n' vocab.txt || fail "vocab.txt lacks the newline as \\n"
pass "the vocabulary file holds the 16 chars, escaped"
# The loss falls from ln 16 = 2.77 (uniform) within two epochs.
loss=$(grep -o 'test[._]loss[ =:]*[0-9.]*' "$tmp/out" "$tmp/err" | tail -n 1 |
  sed 's/.*[ =:]//')
[ -n "$loss" ] || fail "no test loss reported"
awk -v l="$loss" 'BEGIN { exit !(l < 2.7) }' ||
  fail "test loss $loss, expected below ln 16 = 2.77"
pass "the test loss ($loss) is below the uniform guess's"

rm -f vocab.txt
run_torc train next.ini
expect_rc 0
pass "a next-char model (target = next) trains on the text source"

echo "PASS: $n_pass checks"
