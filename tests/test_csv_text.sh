#!/bin/sh
# tests/test_csv_text.sh — a text classifier trained by torc train on the
# csv source's text column mode: short sentences written here, labelled
# good or bad by the word they hold, read as char token ids (padded on the
# right with <pad> = 0, as pad_sequence), then embedding (padding_idx 0) ->
# lstm (batch_first) -> last_step -> linear. [data.train] saves the
# vocabulary and [data.test] reads it; the test accuracy after a few epochs
# is checked to be well above chance (0.5). TORC_VALGRIND=1 runs torc
# under valgrind.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup csv-text

cd "$tmp" || exit 1
# 6 subjects x 3 verbs x 4 adverbs x 2 words = 144 sentences; a quarter
# of the combinations are test sentences (new to the model).
printf 'text,label\n' >train.csv
printf 'text,label\n' >test.csv
i=0
for s in 'the food' 'our meal' 'this film' 'the room' 'my day' 'the staff'; do
  for v in was felt looked; do
    for a in '' 'very ' 'so ' 'really '; do
      for w in good bad; do
        # c numbers the sentence without its word: both words of a
        # combination go to the same file and are quoted alike.
        c=$((i / 2))
        if [ $((c % 4)) -eq 3 ]; then f=test.csv; else f=train.csv; fi
        # a third are quoted, with a comma: the delimiter inside a text
        if [ $((c % 3)) -eq 0 ]; then
          printf '"%s %s %s%s, yes",%s\n' "$s" "$v" "$a" "$w" "$w" >>$f
        else
          printf '%s %s %s%s,%s\n' "$s" "$v" "$a" "$w" "$w" >>$f
        fi
        i=$((i + 1))
      done
    done
  done
done
[ "$(wc -l <train.csv)" -eq 109 ] || { echo "FAIL: train.csv"; exit 1; }
# The vocabulary: <pad>, the distinct chars of the training texts, <unk>.
n_chars=$(tail -n +2 train.csv | sed 's/,[a-z]*$//; s/"//g' | fold -w1 |
  sort -u | wc -l)
vocab=$((n_chars + 2))

cat >clf.ini <<EOF2
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
source = csv
path = train.csv
text_column = text
label_column = label
max_len = 28
unk = yes
save_vocab = run/vocab.txt
batch_size = 12
shuffle = yes
[data.test]
source = csv
path = test.csv
text_column = text
max_len = 28
vocab = run/vocab.txt
batch_size = 36
[model]
input = 28
[layer]
type = embedding
num_embeddings = $vocab
embedding_dim = 16
padding_idx = 0
[layer]
type = lstm
hidden_size = 24
batch_first = yes
[layer]
type = last_step
[layer]
type = linear
out_features = 2
[loss]
type = cross_entropy
[optimizer]
type = adam
lr = 0.005
[train]
epochs = 6
dir = run
metrics = run/metrics.csv
EOF2

run_torc train clf.ini
expect_rc 0
pass "a text classifier trains on the csv source's text column"
[ "$(head -n 1 run/vocab.txt)" = "<pad>" ] ||
  fail "run/vocab.txt does not start with <pad>"
[ "$(tail -n 1 run/vocab.txt)" = "<unk>" ] ||
  fail "run/vocab.txt does not end with <unk>"
[ "$(wc -l <run/vocab.txt)" -eq "$vocab" ] ||
  fail "run/vocab.txt has $(wc -l <run/vocab.txt) lines, expected $vocab"
grep -qx '\\s' run/vocab.txt || fail "run/vocab.txt lacks the space as \\s"
grep -qx ',' run/vocab.txt || fail "run/vocab.txt lacks the comma"
pass "save_vocab wrote <pad>, the $n_chars chars and <unk>"
acc=$(awk -F, '$3 == "test" { a = $5 } END { print a }' run/metrics.csv)
[ -n "$acc" ] || fail "no test accuracy in run/metrics.csv"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.8) }' ||
  fail "test accuracy $acc, expected at least 0.8 (chance is 0.5)"
pass "the test accuracy ($acc) is well above chance"

# A test text with a char the vocabulary lacks maps to <unk>; without
# <unk> in the file it is an error naming the row and the char.
printf 'text,label\nthe food was good!,good\nthe food was bad,bad\n' >odd.csv
grep -v '^<unk>$' run/vocab.txt >nounk.txt
sed 's|^path = test.csv|path = odd.csv|; s|^vocab = run/vocab.txt|vocab = nounk.txt|' \
  clf.ini >odd.ini
run_torc train odd.ini --overwrite
expect_rc 2
grep -q "odd.csv:2:1: the text (column 'text') has char '!' (U+0021)" \
  "$tmp/err" || fail "no message naming the unknown char"
pass "a char outside the vocabulary without <unk> is refused, with its row"

echo "PASS: $n_pass checks"
