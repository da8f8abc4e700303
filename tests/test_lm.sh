#!/bin/sh
# tests/test_lm.sh — a language model from an INI file, end to end, on a
# text written here (a repeating line, 'abcdabce': after "abc" comes d
# or e as the line's start says, so only a model that carries its state
# from step to step continues it): an embedding of token ids
# first ([model] input_dtype auto), a stack by `repeat`, logits [N, L, V]
# against the next chars (cross_entropy class_dim = -1), the text read from
# a folder through `files` and `exclude`, save_vocab in a run folder not
# made yet; resume bit for bit; torc generate (greedy continues the line,
# a seed repeats its text, its errors). TORC_VALGRIND=1 runs torc under
# valgrind.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup lm

cd "$tmp" || exit 1
mkdir corpus
i=0
while [ $i -lt 150 ]; do
  printf 'abcdabce\n' >>corpus/part1
  printf 'abcdabce\n' >>corpus/part2
  i=$((i + 1))
done
# not UTF-8: reading it would fail the run, so exclude must skip it
printf '\377\376' >corpus/part1.dat

untimed() { cut -d, -f1-6 "$1"; }

# 6 chars (a..e and the newline): ids 0 = \n, 1..5 = a..e.
cat >lm.ini <<'EOF2'
[torc]
seed = 3
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
path = corpus
files = *
exclude = *.*
context = 12
stride = 5
split = train
save_vocab = run/vocab.txt
batch_size = 16
shuffle = yes
[data.test]
source = text
path = corpus
files = *
exclude = *.*
context = 12
split = test
vocab = run/vocab.txt
batch_size = 16
[model]
input = 12
[layer]
type = embedding
num_embeddings = 6
embedding_dim = 8
[layer]
type = lstm
hidden_size = 24
batch_first = yes
repeat = 2
[layer]
type = linear
out_features = 6
[loss]
type = cross_entropy
class_dim = -1
[optimizer]
type = adam
lr = 0.02
[train]
epochs = 4
dir = run
metrics = run/metrics.csv
[checkpoint]
dir = run/ckpt
keep = 1
EOF2

run_torc describe lm.ini
expect_rc 0
expect_has out "(1): lstm(8, 24, batch_first=True)"
expect_has out "(2): lstm(24, 24, batch_first=True)"
expect_has out "[1, 12, 6]"
pass "describe: an embedding of i64 ids, repeat = 2 gives two lstm layers"

run_torc train lm.ini
expect_rc 0
[ "$(wc -l <run/vocab.txt)" -eq 6 ] ||
  fail "run/vocab.txt has $(wc -l <run/vocab.txt) lines, expected 6"
loss=$(sed -n 's/.*| test loss \([0-9.]*\).*/\1/p' "$tmp/out" | tail -n 1)
[ -n "$loss" ] || fail "no test loss reported"
awk -v l="$loss" 'BEGIN { exit !(l < 0.3) }' ||
  fail "test loss $loss; the line repeats, so it should fall below 0.3"
pass "an lstm language model trains from a folder's files (test loss $loss)"
untimed run/metrics.csv >a
cp run/ckpt/*.safetensors straight.safetensors
cp run/final.safetensors straight-final.safetensors

# ---- resume: 2 epochs, then 2 more, are the 4 straight ----
rm -rf run
run_torc train lm.ini --set train.epochs=2
expect_rc 0
run_torc train lm.ini --resume
expect_rc 0
untimed run/metrics.csv >b
cmp -s a b || { diff a b; fail "2 epochs + resume for 2 differ from 4 straight"; }
same_tensors straight.safetensors run/ckpt/*.safetensors ||
  fail "the resumed run's last checkpoint holds other tensors"
pass "resume: 2 + 2 epochs give the metrics and checkpoint of 4 straight"

# ---- generate ----
run_torc generate lm.ini --prompt "abcdab" --tokens 12 --temperature 0
expect_rc 0
expect_text out "abcdabce
abcdabce
"
expect_has err "12 tokens after a prompt of 6"
expect_has err "each step one position"
pass "generate, greedy: the model continues the line"

run_torc generate lm.ini --checkpoint straight-final.safetensors \
  --prompt "d" --tokens 30 --seed 7
expect_rc 0
cp "$tmp/out" s1
run_torc generate lm.ini --checkpoint straight-final.safetensors \
  --prompt "d" --tokens 30 --seed 7
expect_rc 0
cmp -s "$tmp/out" s1 || fail "the same seed gave other text"
pass "generate: a seed gives the same text again"

run_torc generate lm.ini --prompt "abz" --tokens 3
expect_rc 2
expect_has err "the prompt's char 'z' at byte 2 is not in the model's vocabulary of 6 tokens"
pass "generate: a prompt char outside the vocabulary"

run_torc generate lm.ini --tokens 0
expect_rc 2
expect_has err "--tokens takes a number from 1 to 1e+06, not 0"
run_torc generate lm.ini --checkpoint nowhere.safetensors
expect_rc 2
expect_has err "nowhere.safetensors"
run_torc generate
expect_rc 2
expect_has err "which file?"
pass "generate: bad options, a missing checkpoint, no file"

sed 's/^out_features = 6$/out_features = 10/; s/^num_embeddings = 6$/num_embeddings = 10/' \
  lm.ini >big.ini
run_torc generate big.ini --checkpoint straight-final.safetensors
expect_rc 2
expect_has err "mismatched"
pass "generate: weights of another shape are refused"

rm -rf run2
sed 's/^out_features = 6$/out_features = 10/; s/^num_embeddings = 6$/num_embeddings = 10/; s/^dir = run$/dir = run2/; s|^metrics = run/metrics.csv|metrics = run2/metrics.csv|; s|^dir = run/ckpt|dir = run2/ckpt|; s/^epochs = 4/epochs = 1/' \
  lm.ini >big.ini
run_torc train big.ini
expect_rc 0
run_torc generate big.ini
expect_rc 2
expect_has err "the model gives logits for 10 tokens but the vocabulary of [data.test] has 6; set the embedding's num_embeddings and the last layer's out_features to 6"
pass "generate: a model whose vocabulary is not the source's"

# ---- a small GPT: causal transformer blocks by repeat ----
sed -n '1,/^embedding_dim/p' lm.ini | sed 's/^embedding_dim = 8$/embedding_dim = 16/' >gpt.ini
cat >>gpt.ini <<'EOF2'
[layer]
type = positional_embedding
max_len = 12
d_model = 16
[layer]
type = transformer_encoder_layer
d_model = 16
nhead = 2
dim_feedforward = 32
dropout = 0.1
activation = gelu
norm_first = yes
batch_first = yes
causal = yes
repeat = 2
[layer]
type = layernorm
normalized_shape = 16
[layer]
type = linear
out_features = 6
[loss]
type = cross_entropy
class_dim = -1
[optimizer]
type = adamw
lr = 0.01
[train]
epochs = 6
dir = gpt
metrics = gpt/metrics.csv
[checkpoint]
dir = gpt/ckpt
keep = 1
EOF2
run_torc train gpt.ini
expect_rc 0
untimed gpt/metrics.csv >a
cp gpt/ckpt/*.safetensors gpt-straight.safetensors
rm -rf gpt
run_torc train gpt.ini --set train.epochs=3
expect_rc 0
run_torc train gpt.ini --resume
expect_rc 0
untimed gpt/metrics.csv >b
cmp -s a b || { diff a b; fail "gpt: 3 epochs + resume for 3 differ from 6 straight"; }
same_tensors gpt-straight.safetensors gpt/ckpt/*.safetensors ||
  fail "gpt: the resumed run's last checkpoint holds other tensors"
pass "a causal transformer with dropout: 3 + 3 epochs resume to the 6 straight, bit for bit"
run_torc generate gpt.ini --prompt "abcdab" --tokens 12 --temperature 0
expect_rc 0
expect_text out "abcdabce
abcdabce
"
expect_has err "each step one position (key/value and state cache)"
pass "a causal transformer (positional embedding, 2 blocks by repeat) trains and generates from its cache"

sed 's/^num_embeddings = 6$/num_embeddings = 4/' lm.ini >small.ini
run_torc train small.ini --set train.dir=run4
expect_rc 2
expect_has err "the embedding (layer 0) has num_embeddings = 4, but the data's vocabulary has 6 tokens; set num_embeddings (and the last layer's out_features) to 6"
pass "an embedding smaller than the vocabulary is refused before training"

sed 's/^class_dim = -1$/class_dim = 2/' lm.ini >cd.ini
run_torc train cd.ini --set train.dir=run3
expect_rc 2
expect_has err "class_dim"
pass "a bad class_dim"

echo "PASS: all"
