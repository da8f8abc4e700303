/* tests/test_sources_text.c — the data plugin's text source
 * (plugins/data/text.c), opened through torc_dataset_open: byte and char
 * tokens, windows, strides and targets, the train/test split, the
 * vocabulary file's round trip and every bad-input error it reports. The
 * text is written at run time into a temporary folder.
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

/* Asserts t is i64 [n] holding want[0 .. n). */
static void assert_ids(const torc_tensor *t, const int64_t *want, int n) {
  assert_int_equal(torc_dtype_of(t), TORC_I64);
  assert_int_equal(torc_ndim(t), 1);
  assert_int_equal(torc_shape(t)[0], n);
  const int64_t *v = torc_data(t);
  for (int i = 0; i < n; i++)
    if (v[i] != want[i]) {
      print_error("id %d: got %lld, expected %lld\n", i, (long long)v[i],
                  (long long)want[i]);
      fail();
    }
}

/* Window i of ds: input ids text[start .. start + L), target shifted by
 * one, where the ids are given in `ids` (the whole text's). */
static void check_window(torc_dataset *ds, int64_t i, const int64_t *ids,
                         int64_t start, int L) {
  torc_tensor *in, *tg;
  assert_ok(torc_dataset_get(ds, i, &in, &tg));
  assert_ids(in, ids + start, L);
  assert_ids(tg, ids + start + 1, L);
  release2(in, tg);
}

static void test_byte_windows(void **state) {
  (void)state;
  const char *text = "hello, world\n";
  write_text(P("b.txt"), text);
  int64_t ids[32];
  for (int i = 0; text[i]; i++)
    ids[i] = (unsigned char)text[i];
  /* 13 bytes, context 4, stride 4: windows start at 0, 4, 8 (8 + 4 < 13). */
  torc_dataset *ds = open_ds("text", 3, "path", P("b.txt"), "level", "byte",
                             "context", "4");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 3);
  assert_int_equal(torc_dataset_num_classes(ds), 256);
  for (int64_t i = 0; i < 3; i++)
    check_window(ds, i, ids, i * 4, 4);
  assert_contains(torc_dataset_describe(ds), "3 windows, input [4] i64");
  assert_contains(torc_dataset_describe(ds), "vocabulary 256 (byte)");
  assert_contains(torc_dataset_describe(ds), "13 tokens");
  char name[16];
  assert_ok(torc_dataset_class_name(ds, 'h', name, sizeof name));
  assert_string_equal(name, "h");
  assert_ok(torc_dataset_class_name(ds, '\n', name, sizeof name));
  assert_string_equal(name, "\\x0A");
  assert_ok(torc_dataset_class_name(ds, ' ', name, sizeof name));
  assert_string_equal(name, "\\s");
  torc_dataset_close(ds);
  /* Stride 3: starts 0, 3, 6, 9 ((13 - 5) / 3 + 1 = 3 ... 9 + 4 = 13 is
   * the last target: 4 windows). */
  ds = open_ds("text", 4, "path", P("b.txt"), "level", "byte", "context",
               "3", "stride", "3");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), (13 - 4) / 3 + 1);
  for (int64_t i = 0; i < torc_dataset_length(ds); i++)
    check_window(ds, i, ids, i * 3, 3);
  torc_dataset_close(ds);
  /* target = next: a 0-dim class index, the byte after the window. */
  ds = open_ds("text", 5, "path", P("b.txt"), "level", "byte", "context",
               "5", "stride", "1", "target", "next");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 13 - 5);
  for (int64_t i = 0; i < 8; i++) {
    torc_tensor *in, *tg;
    assert_ok(torc_dataset_get(ds, i, &in, &tg));
    assert_ids(in, ids + i, 5);
    assert_class(tg, ids[i + 5]);
    release2(in, tg);
  }
  torc_dataset_close(ds);
}

/* "héllo wörld ☃\n": the distinct code points, sorted, are the ids. */
static void test_char_level(void **state) {
  (void)state;
  const char *text = "h\xC3\xA9llo w\xC3\xB6rld \xE2\x98\x83\n";
  const uint32_t cps[] = {'h', 0xE9, 'l', 'l', 'o', ' ', 'w', 0xF6, 'r', 'l',
                          'd', ' ', 0x2603, '\n'};
  const int n = (int)(sizeof cps / sizeof cps[0]);
  /* The sorted distinct ones: \n ' ' d h l o r w é ö ☃. */
  const uint32_t vocab[] = {'\n', ' ', 'd', 'h', 'l', 'o',
                            'r',  'w', 0xE9, 0xF6, 0x2603};
  const int nv = (int)(sizeof vocab / sizeof vocab[0]);
  int64_t ids[32];
  for (int i = 0; i < n; i++)
    for (int k = 0; k < nv; k++)
      if (vocab[k] == cps[i])
        ids[i] = k;
  write_text(P("c.txt"), text);
  torc_dataset *ds = open_ds("text", 4, "path", P("c.txt"), "context", "6",
                             "stride", "2", "save_vocab", P("c.vocab"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_num_classes(ds), nv);
  assert_int_equal(torc_dataset_length(ds), (n - 7) / 2 + 1);
  for (int64_t i = 0; i < torc_dataset_length(ds); i++)
    check_window(ds, i, ids, i * 2, 6);
  char name[16];
  assert_ok(torc_dataset_class_name(ds, 0, name, sizeof name));
  assert_string_equal(name, "\\n");
  assert_ok(torc_dataset_class_name(ds, 10, name, sizeof name));
  assert_string_equal(name, "\xE2\x98\x83");
  assert_contains(torc_dataset_describe(ds), "vocabulary 11 (char)");
  assert_contains(torc_dataset_describe(ds), "14 tokens");
  assert_contains(torc_dataset_describe(ds), "vocabulary written to");
  torc_dataset_close(ds);
  /* The file: one token per line, escapes for \n and the space. */
  size_t size;
  char *saved = (char *)test_read_file(P("c.vocab"), &size);
  saved[size] = '\0';
  assert_non_null(saved);
  assert_string_equal(saved, "\\n\n\\s\nd\nh\nl\no\nr\nw\n\xC3\xA9\n"
                             "\xC3\xB6\n\xE2\x98\x83\n");
  free(saved);
  assert_int_equal(access(P("c.vocab.tmp"), F_OK), -1);
}

/* The vocabulary written from the training text maps another text the
 * same way; its own order (not sorted) gives the ids; unknown chars are
 * an error, or <unk> when the vocabulary has it. */
static void test_vocab_file(void **state) {
  (void)state;
  write_text(P("train.txt"), "abcab\tc\\\n");
  torc_dataset *ds = open_ds("text", 3, "path", P("train.txt"), "context",
                             "2", "save_vocab", P("v.txt"));
  assert_torc(ds);
  torc_dataset_close(ds);
  /* \t \n \\ a b c */
  write_text(P("test.txt"), "cab\\\t");
  ds = open_ds("text", 3, "path", P("test.txt"), "context", "4", "vocab",
               P("v.txt"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_num_classes(ds), 6);
  const int64_t want[] = {5, 3, 4, 2, 0};
  check_window(ds, 0, want, 0, 4);
  torc_dataset_close(ds);
  /* A hand-written vocabulary in its own order, with \u escapes and <unk>. */
  write_text(P("hand.txt"), "z\n\\u00E9\n<unk>\n\\s\r\n");
  write_text(P("t2.txt"), "z\xC3\xA9 qz");
  ds = open_ds("text", 3, "path", P("t2.txt"), "context", "4", "vocab",
               P("hand.txt"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_num_classes(ds), 4);
  const int64_t want2[] = {0, 1, 3, 2, 0};
  check_window(ds, 0, want2, 0, 4);
  char name[16];
  assert_ok(torc_dataset_class_name(ds, 2, name, sizeof name));
  assert_string_equal(name, "<unk>");
  torc_dataset_close(ds);
  /* Without <unk>: the unknown char is named with its offset. */
  write_text(P("t3.txt"), "abc\xE2\x82\xAC" "ab");
  assert_open_fails(open_ds("text", 3, "path", P("t3.txt"), "context", "2",
                            "vocab", P("v.txt")),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "char '\xE2\x82\xAC' (U+20AC)");
  assert_contains(torc_last_error(), "byte offset 3");
  assert_contains(torc_last_error(), "v.txt");
  /* unk = yes builds one. */
  ds = open_ds("text", 3, "path", P("t3.txt"), "context", "2", "unk", "yes");
  assert_torc(ds);
  assert_int_equal(torc_dataset_num_classes(ds), 5);
  assert_ok(torc_dataset_class_name(ds, 4, name, sizeof name));
  assert_string_equal(name, "<unk>");
  torc_dataset_close(ds);
}

static void test_vocab_errors(void **state) {
  (void)state;
  write_text(P("t.txt"), "aaaa");
  static const struct {
    const char *file, *needle;
  } bad[] = {
      {"ab\n", "line 1 is not a token: it holds more than one character"},
      {"a\n\nb\n", "line 2 is not a token: it is empty"},
      {"a\n\\q\n", "line 2 is not a token: it is an unknown escape"},
      {"\\uD800\n", "not a Unicode scalar value"},
      {"\\u00G0\n", "not a hex digit"},
      {"\xFF\n", "line 1 is not a token: it is not valid UTF-8"},
      {"a\nb\na\n", "lists token 'a' twice, on lines 1 and 3"},
      {"", "holds no token"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    write_text(P("bad.vocab"), bad[i].file);
    assert_open_fails(open_ds("text", 3, "path", P("t.txt"), "context", "2",
                              "vocab", P("bad.vocab")),
                      TORC_ERR_IO);
    assert_contains(torc_last_error(), bad[i].needle);
  }
  assert_open_fails(open_ds("text", 4, "path", P("t.txt"), "context", "2",
                            "vocab", P("nope.vocab"), "level", "char"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "nope.vocab");
  assert_open_fails(open_ds("text", 4, "path", P("t.txt"), "context", "2",
                            "vocab", P("bad.vocab"), "level", "byte"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "key 'vocab' is for level = char");
  /* a folder that cannot be made: its parent is a file */
  assert_open_fails(open_ds("text", 3, "path", P("t.txt"), "context", "2",
                            "save_vocab", P("t.txt/dir/v")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "save_vocab file");
  /* missing folders are made (a run folder before its first run) */
  torc_dataset *ds = open_ds("text", 3, "path", P("t.txt"), "context", "2",
                             "save_vocab", P("no/such/dir/v"));
  assert_torc(ds);
  torc_dataset_close(ds);
  assert_int_equal(access(P("no/such/dir/v"), R_OK), 0);
}

/* split = train / test: the last test_fraction of the tokens is test;
 * no window of either holds a token of the other. */
static void test_split(void **state) {
  (void)state;
  char text[101];
  for (int i = 0; i < 100; i++)
    text[i] = (char)('a' + i % 26);
  text[100] = '\0';
  write_text(P("s.txt"), text);
  torc_dataset *tr = open_ds("text", 5, "path", P("s.txt"), "level", "byte",
                             "context", "8", "split", "train",
                             "test_fraction", "0.2");
  torc_dataset *te = open_ds("text", 5, "path", P("s.txt"), "level", "byte",
                             "context", "8", "split", "test",
                             "test_fraction", "0.2");
  assert_torc(tr);
  assert_torc(te);
  /* train: tokens 0..79, (80 - 9) / 8 + 1 = 9 windows; test: 80..99, 2. */
  assert_int_equal(torc_dataset_length(tr), 9);
  assert_int_equal(torc_dataset_length(te), 2);
  assert_contains(torc_dataset_describe(tr), "80 tokens (train part of 100)");
  assert_contains(torc_dataset_describe(te), "20 tokens (test part of 100)");
  int64_t ids[100];
  for (int i = 0; i < 100; i++)
    ids[i] = (unsigned char)text[i];
  check_window(tr, 8, ids, 64, 8);
  check_window(te, 0, ids, 80, 8);
  check_window(te, 1, ids, 88, 8);
  torc_dataset_close(tr);
  torc_dataset_close(te);
  /* char level: the vocabulary is the train part's, so a char only in
   * the test part is unknown there. */
  write_text(P("s2.txt"), "abababababababababXY");
  tr = open_ds("text", 4, "path", P("s2.txt"), "context", "2", "split",
               "train", "save_vocab", P("s2.vocab"));
  assert_torc(tr);
  assert_int_equal(torc_dataset_num_classes(tr), 2); /* a and b */
  torc_dataset_close(tr);
  assert_open_fails(open_ds("text", 3, "path", P("s2.txt"), "context", "1",
                            "split", "test"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "char 'X' (U+0058) at byte offset 18");
  assert_contains(torc_last_error(), "of the train part");
  assert_open_fails(open_ds("text", 3, "path", P("s.txt"), "context", "2",
                            "test_fraction", "1"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "test_fraction");
  /* A test part too short for one window names the part. */
  assert_open_fails(open_ds("text", 5, "path", P("s.txt"), "context", "12",
                            "level", "byte", "split", "test",
                            "test_fraction", "0.1"),
                    TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "the test part of '");
  assert_contains(torc_last_error(), "s.txt' has 10 tokens (of 100 in all), "
                                     "fewer than context + 1 = 13");
  assert_open_fails(open_ds("text", 3, "path", P("s.txt"), "context", "2",
                            "split", "valid"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "not all, train or test");
}

static void test_bad_text(void **state) {
  (void)state;
  /* Invalid UTF-8: a stray continuation byte, an overlong form, a
   * surrogate, a truncated sequence; each named with its byte offset. */
  static const struct {
    const char *text;
    const char *needle;
  } bad[] = {
      {"ab\x80" "cd", "at byte offset 2 (byte 0x80)"},
      {"abc\xC0\xAF", "at byte offset 3 (byte 0xC0)"},
      {"\xED\xA0\x80zz", "at byte offset 0 (byte 0xED)"},
      {"abcd\xE2\x98", "at byte offset 4 (byte 0xE2)"},
      {"abcde\xF5\x80\x80\x80", "at byte offset 5 (byte 0xF5)"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    write_text(P("u.txt"), bad[i].text);
    assert_open_fails(open_ds("text", 2, "path", P("u.txt"), "context", "1"),
                      TORC_ERR_IO);
    assert_contains(torc_last_error(), "is not valid UTF-8");
    assert_contains(torc_last_error(), bad[i].needle);
  }
  /* The same bytes are fine at level = byte. */
  torc_dataset *ds = open_ds("text", 3, "path", P("u.txt"), "context", "1",
                             "level", "byte");
  assert_torc(ds);
  torc_dataset_close(ds);
  /* Empty, and shorter than a window. */
  write_text(P("e.txt"), "");
  assert_open_fails(open_ds("text", 2, "path", P("e.txt"), "context", "4"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "holds no text");
  write_text(P("short.txt"), "0123456789");
  assert_open_fails(open_ds("text", 2, "path", P("short.txt"), "context",
                            "128"),
                    TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "has 10 tokens");
  assert_contains(torc_last_error(), "context + 1 = 129");
  /* context 9 fits exactly: one window. */
  ds = open_ds("text", 2, "path", P("short.txt"), "context", "9");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 1);
  torc_dataset_close(ds);
  /* Keys and files. */
  assert_open_fails(open_ds("text", 2, "path", P("short.txt"), "context",
                            "0"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "key 'context' = '0'");
  assert_open_fails(open_ds("text", 3, "path", P("short.txt"), "context",
                            "2", "level", "word"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "not byte or char");
  assert_open_fails(open_ds("text", 3, "path", P("short.txt"), "context",
                            "2", "max_bytes", "4"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "max_bytes");
  assert_open_fails(open_ds("text", 2, "path", P("nope.txt"), "context",
                            "2"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "does not exist");
  assert_open_fails(open_ds("text", 2, "path", "/dev/zero", "context", "2"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "character device");
}

/* A folder: its .txt files in sorted name order, joined; other files are
 * left out; an error names the file and the offset within it. */
static void test_folder(void **state) {
  (void)state;
  make_dir(P("corpus"));
  write_text(P("corpus/b.txt"), "CD");
  write_text(P("corpus/a.txt"), "AB");
  write_text(P("corpus/c.txt"), "EF");
  write_text(P("corpus/notes.md"), "zzzz");
  torc_dataset *ds = open_ds("text", 4, "path", P("corpus"), "level", "byte",
                             "context", "5", "stride", "1");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 1);
  const int64_t want[] = {'A', 'B', 'C', 'D', 'E', 'F'};
  check_window(ds, 0, want, 0, 5);
  torc_dataset_close(ds);
  write_text(P("corpus/d.txt"), "ok\xFF");
  assert_open_fails(open_ds("text", 2, "path", P("corpus"), "context", "2"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "d.txt' is not valid UTF-8 at byte "
                                     "offset 2");
  /* Together over max_bytes. */
  assert_open_fails(open_ds("text", 3, "path", P("corpus"), "context", "2",
                            "max_bytes", "7"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "max_bytes");
  make_dir(P("empty"));
  assert_open_fails(open_ds("text", 2, "path", P("empty"), "context", "2"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "holds no file matching files = *.txt");
  /* files and exclude pick the names: a and b, not a.dat (not UTF-8) */
  make_dir(P("globs"));
  write_text(P("globs/a"), "AB");
  write_text(P("globs/b"), "CD");
  write_text(P("globs/a.dat"), "\xFF\xFE");
  ds = open_ds("text", 5, "path", P("globs"), "context", "3", "files", "*",
               "exclude", "*.*", "stride", "1");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 1);
  const int64_t ab[] = {0, 1, 2, 3}; /* the vocabulary: A B C D */
  check_window(ds, 0, ab, 0, 3);
  torc_dataset_close(ds);
  assert_open_fails(open_ds("text", 3, "path", P("globs"), "context", "3",
                            "files", "*"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "a.dat' is not valid UTF-8");
  assert_open_fails(open_ds("text", 4, "path", P("globs"), "context", "3",
                            "files", "*", "exclude", "*"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "holds no file matching files = * and "
                                     "not exclude = *");
}

/* encoding = onehot: input f32 [vocabulary, context], column t the
 * one-hot of token t; the target stays the ids. */
static void test_onehot(void **state) {
  (void)state;
  write_text(P("o.txt"), "abcab");
  torc_dataset *ds = open_ds("text", 3, "path", P("o.txt"), "context", "3",
                             "encoding", "onehot");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 1);
  assert_contains(torc_dataset_describe(ds), "input [3, 3] f32 (one-hot)");
  torc_tensor *in, *tg;
  const int64_t shape[2] = {3, 3};
  get_sample(ds, 0, TORC_F32, shape, 2, &in, &tg);
  const float *v = torc_data(in);
  const int64_t ids[] = {0, 1, 2, 0};
  for (int c = 0; c < 3; c++)
    for (int t = 0; t < 3; t++)
      assert_true(v[c * 3 + t] == (ids[t] == c ? 1.0f : 0.0f));
  assert_ids(tg, ids + 1, 3);
  release2(in, tg);
  torc_dataset_close(ds);
  /* 256 x 300000 elements: over the cap of 2^26. */
  size_t big = 300001;
  char *text = malloc(big + 1);
  assert_non_null(text);
  memset(text, 'x', big);
  text[big] = '\0';
  write_text(P("big.txt"), text);
  free(text);
  assert_open_fails(open_ds("text", 4, "path", P("big.txt"), "context",
                            "300000", "encoding", "onehot", "level", "byte"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "vocabulary 256 x context 300000");
  assert_open_fails(open_ds("text", 3, "path", P("o.txt"), "context", "3",
                            "encoding", "bits"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "not ids or onehot");
}

/* The loader batches windows: input [B, L], target [B, L]. */
static void test_loader(void **state) {
  (void)state;
  write_text(P("l.txt"), "the quick brown fox jumps over the lazy dog\n");
  torc_dataset *ds = open_ds("text", 2, "path", P("l.txt"), "context", "8");
  assert_torc(ds);
  torc_loader_opts o = {.batch_size = 2, .shuffle = 1, .seed = 3};
  torc_loader *ld = torc_loader_new(ds, &o);
  assert_torc(ld);
  torc_batch b = {0};
  assert_int_equal(torc_loader_next(ld, &b), 1);
  assert_int_equal(torc_ndim(b.input), 2);
  assert_int_equal(torc_shape(b.input)[0], 2);
  assert_int_equal(torc_shape(b.input)[1], 8);
  assert_int_equal(torc_ndim(b.target), 2);
  assert_int_equal(torc_shape(b.target)[1], 8);
  torc_batch_clear(&b);
  torc_loader_free(ld);
  torc_dataset_close(ds);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_byte_windows), T(test_char_level), T(test_vocab_file),
      T(test_vocab_errors), T(test_split),      T(test_bad_text),
      T(test_folder),       T(test_onehot),     T(test_loader),
  };
  return cmocka_run_group_tests(tests, group_setup, data_tmp_teardown);
}
