/* tests/test_sources_csv_text.c — the csv source's text column mode
 * (plugins/data/csv.c with text_column, the vocabulary of
 * plugins/data/vocab.c), opened through torc_dataset_open: char and byte
 * token ids, cutting and padding, the vocabulary file it shares with the
 * text source, and every bad-input error it reports. The CSV files are
 * written at run time into a temporary folder.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "data_testutil.h"
#include "sources_testutil.h"

#include "torc/data.h"

/* Asserts sample i's input is i64 [n] holding want and its class cls. */
static void check_text(torc_dataset *ds, int64_t i, const int64_t *want,
                       int n, int64_t cls) {
  torc_tensor *in, *tg;
  const int64_t shape[1] = {n};
  get_sample(ds, i, TORC_I64, shape, 1, &in, &tg);
  const int64_t *v = torc_data(in);
  for (int k = 0; k < n; k++)
    if (v[k] != want[k]) {
      print_error("sample %lld, id %d: got %lld, expected %lld\n",
                  (long long)i, k, (long long)v[k], (long long)want[k]);
      fail();
    }
  assert_class(tg, cls);
  release2(in, tg);
}

/* The whole of file path into buf (size bytes at most), NUL-terminated. */
static void read_back(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  size_t n = fread(buf, 1, size - 1, f);
  fclose(f);
  buf[n] = '\0';
}

/* The reviews every test reads: a quoted text with the delimiter, an
 * empty text, and a text longer than max_len = 6 (cut). */
static const char *const reviews = "id,text,label\n"
                                   "1,good,pos\n"
                                   "2,\"a, b\",neg\n"
                                   "3,,neg\n"
                                   "4,bad dog!,neg\n";

static void test_csv_text_char(void **state) {
  (void)state;
  write_text(P("r.csv"), reviews);
  torc_dataset *ds = open_ds("csv", 4, "path", P("r.csv"), "text_column",
                             "text", "max_len", "6", "save_vocab",
                             P("run/v.txt"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 4);
  /* num_classes stays the label classes, not the vocabulary. */
  assert_int_equal(torc_dataset_num_classes(ds), 2);
  char name[16];
  assert_ok(torc_dataset_class_name(ds, 1, name, sizeof name));
  assert_string_equal(name, "pos");
  /* The kept chars, in code point order after <pad>:
   * <pad> ' ' ',' a b d g o = ids 0 .. 7 ("bad do" is the cut text). */
  const char *d = torc_dataset_describe(ds);
  assert_contains(d, "4 samples, input [6] i64 (the char ids of column "
                     "'text', vocabulary 8, <pad> = 0 at the end; texts of "
                     "0 to 8 tokens, 1 cut), 2 classes");
  assert_contains(d, "vocabulary written to '");
  assert_contains(log_buf, "vocabulary 8 (<pad> = 0), written to '");
  assert_contains(log_buf, "num_embeddings = 8 and padding_idx = 0");
  const int64_t good[6] = {6, 7, 7, 5, 0, 0};
  const int64_t ab[6] = {3, 2, 1, 4, 0, 0};
  const int64_t empty[6] = {0};
  const int64_t bad[6] = {4, 3, 5, 1, 5, 7};
  check_text(ds, 0, good, 6, 1);
  check_text(ds, 1, ab, 6, 0);
  check_text(ds, 2, empty, 6, 0);
  check_text(ds, 3, bad, 6, 0);
  torc_dataset_close(ds);
  /* The text source's file format, with <pad> on line 1; the folder made. */
  char buf[256];
  read_back(P("run/v.txt"), buf, sizeof buf);
  assert_string_equal(buf, "<pad>\n\\s\n,\na\nb\nd\ng\no\n");
}

/* vocab = the saved file gives the same ids to other texts; unk. */
static void test_csv_text_vocab(void **state) {
  (void)state;
  write_text(P("train.csv"), reviews);
  torc_dataset *ds = open_ds("csv", 5, "path", P("train.csv"), "text_column",
                             "1", "max_len", "6", "save_vocab", P("v.txt"),
                             "unk", "yes");
  assert_torc(ds);
  assert_contains(torc_dataset_describe(ds), "vocabulary 9, <pad> = 0 at "
                                             "the end, <unk> = 8");
  torc_dataset_close(ds);
  char buf[256];
  read_back(P("v.txt"), buf, sizeof buf);
  assert_string_equal(buf, "<pad>\n\\s\n,\na\nb\nd\ng\no\n<unk>\n");
  /* "dogz": z is not in the vocabulary and maps to <unk>. Padding on the
   * left puts the text's last token at the last step. */
  write_text(P("test.csv"), "text,label\ndogz,neg\n\"go\",pos\n");
  ds = open_ds("csv", 5, "path", P("test.csv"), "text_column", "text",
               "max_len", "5", "vocab", P("v.txt"), "padding_side", "left");
  assert_torc(ds);
  assert_contains(torc_dataset_describe(ds), "<pad> = 0 at the start");
  const int64_t dogz[5] = {0, 5, 7, 6, 8};
  const int64_t go[5] = {0, 0, 0, 6, 7};
  check_text(ds, 0, dogz, 5, 0);
  check_text(ds, 1, go, 5, 1);
  torc_dataset_close(ds);
  /* A vocabulary without <unk>: the unknown char is an error naming the
   * file, line, column, char and byte offset. */
  write_text(P("nounk.txt"), "<pad>\na\nb\n");
  write_text(P("t2.csv"), "text,label\nab,x\nb\xE2\x82\xAC" "a,y\n");
  assert_open_fails(open_ds("csv", 4, "path", P("t2.csv"), "text_column",
                            "text", "max_len", "8", "vocab", P("nounk.txt")),
                    TORC_ERR_INVALID);
  char want[600];
  snprintf(want, sizeof want,
           "%s:3:1: the text (column 'text') has char '\xE2\x82\xAC' "
           "(U+20AC) at byte offset 1 of the field, which the vocabulary "
           "'%s' does not hold",
           P("t2.csv"), P("nounk.txt"));
  assert_contains(torc_last_error(), want);
  assert_contains(torc_last_error(), "unk = yes");
  /* A char past max_len is never looked up. */
  ds = open_ds("csv", 4, "path", P("t2.csv"), "text_column", "text",
               "max_len", "1", "vocab", P("nounk.txt"));
  assert_torc(ds);
  torc_dataset_close(ds);
  /* The text source refuses the <pad> line, as before: its vocabulary has
   * no padding token. */
  write_text(P("lm.txt"), "abab");
  assert_open_fails(open_ds("text", 3, "path", P("lm.txt"), "context", "2",
                            "vocab", P("nounk.txt")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "text: vocab file");
  assert_contains(torc_last_error(), "line 1 is not a token: it holds more "
                                     "than one character");
}

/* level = byte: <pad> = 0 and byte b = b + 1, vocabulary 257; no header,
 * columns by index; regression targets with a text. */
static void test_csv_text_byte(void **state) {
  (void)state;
  write_text(P("b.csv"), "0.5\tab\n1.5\t\xC3\xA9\n");
  torc_dataset *ds =
      open_ds("csv", 7, "path", P("b.csv"), "header", "no", "delimiter",
              "tab", "text_column", "1", "label_column", "0", "level",
              "byte", "max_len", "3");
  assert_torc(ds);
  assert_contains(torc_dataset_describe(ds),
                  "input [3] i64 (the byte ids of column 1, vocabulary 257, "
                  "<pad> = 0 at the end, byte b = b + 1");
  const int64_t ab[3] = {'a' + 1, 'b' + 1, 0};
  const int64_t e[3] = {0xC3 + 1, 0xA9 + 1, 0};
  check_text(ds, 0, ab, 3, 0);
  check_text(ds, 1, e, 3, 1);
  torc_dataset_close(ds);
  ds = open_ds("csv", 7, "path", P("b.csv"), "header", "no", "delimiter",
               "tab", "text_column", "1", "target_columns", "0", "task",
               "regression", "max_len", "2");
  assert_torc(ds);
  assert_contains(torc_dataset_describe(ds), "regression targets [1] f32");
  torc_tensor *in, *tg;
  const int64_t shape[1] = {2};
  get_sample(ds, 1, TORC_I64, shape, 1, &in, &tg);
  assert_int_equal(torc_dtype_of(tg), TORC_F32);
  assert_true(*(const float *)torc_data(tg) == 1.5f);
  release2(in, tg);
  torc_dataset_close(ds);
}

/* A batch through the loader: [N, max_len] i64 and [N] class indices. */
static void test_csv_text_loader(void **state) {
  (void)state;
  write_text(P("l.csv"), reviews);
  torc_dataset *ds = open_ds("csv", 3, "path", P("l.csv"), "text_column",
                             "text", "max_len", "4");
  assert_torc(ds);
  torc_loader_opts o = {.batch_size = 4};
  torc_loader *ld = torc_loader_new(ds, &o);
  assert_torc(ld);
  torc_batch b = {0};
  assert_int_equal(torc_loader_next(ld, &b), 1);
  assert_int_equal(torc_dtype_of(b.input), TORC_I64);
  assert_int_equal(torc_ndim(b.input), 2);
  assert_int_equal(torc_shape(b.input)[0], 4);
  assert_int_equal(torc_shape(b.input)[1], 4);
  assert_int_equal(torc_ndim(b.target), 1);
  assert_int_equal(torc_shape(b.target)[0], 4);
  torc_batch_clear(&b);
  torc_loader_free(ld);
  torc_dataset_close(ds);
}

/* Bad UTF-8: the line, the field's column, the byte offset and the byte. */
static void test_csv_text_bad_utf8(void **state) {
  (void)state;
  write_text(P("u.csv"), "label,text\nx,ok\ny,\"ab\xC3\x28\"\n");
  assert_open_fails(open_ds("csv", 4, "path", P("u.csv"), "text_column",
                            "text", "label_column", "label", "max_len", "1"),
                    TORC_ERR_IO);
  char want[600];
  snprintf(want, sizeof want,
           "%s:3:3: the text (column 'text') is not valid UTF-8 at byte "
           "offset 2 of the field (byte 0xC3)",
           P("u.csv"));
  assert_contains(torc_last_error(), want);
  assert_contains(torc_last_error(), "iconv -t UTF-8");
  assert_contains(torc_last_error(), "level = byte");
  /* level = byte reads any bytes. */
  torc_dataset *ds = open_ds("csv", 5, "path", P("u.csv"), "text_column",
                             "text", "label_column", "label", "max_len", "8",
                             "level", "byte");
  assert_torc(ds);
  torc_dataset_close(ds);
}

/* Every key error: a message naming the key, the value and the fix. */
static void test_csv_text_keys(void **state) {
  (void)state;
  write_text(P("k.csv"), reviews);
  const char *csv = P("k.csv");
  static const struct {
    const char *key, *value, *needle;
  } bad_len[] = {
      {"max_len", "0", "key 'max_len' = '0' is not an integer in [1, "
                       "1048576]"},
      {"max_len", "1048577", "key 'max_len' = '1048577' is not an integer"},
      {"max_len", "ten", "key 'max_len' = 'ten' is not an integer"},
      {"level", "word", "key 'level' = 'word' is not char or byte"},
      {"padding_side", "both", "key 'padding_side' = 'both' is not right "
                               "or left"},
      {"unk", "maybe", "key 'unk'"},
  };
  for (size_t i = 0; i < sizeof bad_len / sizeof bad_len[0]; i++) {
    const char *ml = strcmp(bad_len[i].key, "max_len") ? "4"
                                                       : bad_len[i].value;
    torc_dataset *ds =
        strcmp(bad_len[i].key, "max_len")
            ? open_ds("csv", 4, "path", csv, "text_column", "text",
                      "max_len", ml, bad_len[i].key, bad_len[i].value)
            : open_ds("csv", 3, "path", csv, "text_column", "text",
                      "max_len", ml);
    assert_open_fails(ds, TORC_ERR_INVALID);
    assert_contains(torc_last_error(), bad_len[i].needle);
  }
  /* max_len is required. */
  assert_open_fails(open_ds("csv", 2, "path", csv, "text_column", "text"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "text_column = 'text' needs max_len");
  /* A missing column, by name and by index: the columns are listed. */
  assert_open_fails(open_ds("csv", 3, "path", csv, "text_column", "review",
                            "max_len", "4"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "key 'text_column': 'review' is not a "
                                     "column of");
  assert_contains(torc_last_error(), "('id', 'text', 'label')");
  assert_open_fails(open_ds("csv", 3, "path", csv, "text_column", "3",
                            "max_len", "4"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "a 0-based index below 3");
  /* The text and the label in one column. */
  assert_open_fails(open_ds("csv", 3, "path", csv, "text_column", "label",
                            "max_len", "4"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "column 'label' of");
  assert_contains(torc_last_error(), "is both the text and the label");
  /* Numeric features do not mix with a text. */
  assert_open_fails(open_ds("csv", 4, "path", csv, "text_column", "text",
                            "max_len", "4", "feature_columns", "id"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "leave feature_columns out");
  /* A text key without text_column. */
  assert_open_fails(open_ds("csv", 2, "path", csv, "max_len", "4"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "key 'max_len' is for a text column; "
                                     "give text_column");
  /* vocab, save_vocab and unk are for level = char; vocab and unk clash. */
  assert_open_fails(open_ds("csv", 5, "path", csv, "text_column", "text",
                            "max_len", "4", "level", "byte", "save_vocab",
                            P("x.txt")),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "key 'save_vocab' is for level = char");
  assert_open_fails(open_ds("csv", 5, "path", csv, "text_column", "text",
                            "max_len", "4", "vocab", P("x.txt"), "unk",
                            "yes"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "leave unk out");
  /* An unwritable save_vocab. */
  write_text(P("plain"), "x");
  assert_open_fails(open_ds("csv", 4, "path", csv, "text_column", "text",
                            "max_len", "4", "save_vocab", P("plain/v.txt")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "csv: save_vocab file");
  assert_contains(torc_last_error(), "cannot be written");
}

/* The vocabulary file's errors, from the shared reader, and <pad>. */
static void test_csv_text_vocab_errors(void **state) {
  (void)state;
  write_text(P("e.csv"), reviews);
  static const struct {
    const char *file, *needle;
  } bad[] = {
      {"a\nb\n", "has no <pad> line; a text column is padded with id 0"},
      {"a\n<pad>\n", "has <pad> on line 2; it must be line 1"},
      {"<pad>\na\n<pad>\n", "lists token '<pad>' twice, on lines 1 and 3"},
      {"<pad>\nab\n", "line 2 is not a token: it holds more than one "
                      "character"},
      {"<pad>\n\n", "line 2 is not a token: it is empty"},
      {"<pad>\n\\q\n", "line 2 is not a token: it is an unknown escape"},
      {"", "holds no token"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    write_text(P("bad.vocab"), bad[i].file);
    assert_open_fails(open_ds("csv", 4, "path", P("e.csv"), "text_column",
                              "text", "max_len", "4", "vocab",
                              P("bad.vocab")),
                      TORC_ERR_IO);
    assert_contains(torc_last_error(), "csv: vocab file");
    assert_contains(torc_last_error(), bad[i].needle);
  }
  assert_open_fails(open_ds("csv", 4, "path", P("e.csv"), "text_column",
                            "text", "max_len", "4", "vocab", P("none.txt")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "none.txt' does not exist");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_csv_text_char),        T(test_csv_text_vocab),
      T(test_csv_text_byte),        T(test_csv_text_loader),
      T(test_csv_text_bad_utf8),    T(test_csv_text_keys),
      T(test_csv_text_vocab_errors),
  };
  return cmocka_run_group_tests(tests, group_setup, data_tmp_teardown);
}
