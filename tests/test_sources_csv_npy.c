/* tests/test_sources_csv_npy.c — the data plugin's csv and npy sources
 * (plugins/data), opened through torc_dataset_open: CSV text and .npy
 * bytes written at run time into a temporary folder; each source's values
 * and every bad-input error it reports.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "testutil.h"
#include "data_testutil.h"
#include "sources_testutil.h"

#include "torc/data.h"
#include "torc/philox.h"

/* ======================================================================
 * csv
 * ==================================================================== */

static void check_features(const torc_tensor *in, const float *want, int n) {
  assert_int_equal(torc_dtype_of(in), TORC_F32);
  assert_int_equal(torc_ndim(in), 1);
  assert_int_equal(torc_shape(in)[0], n);
  const float *v = torc_data(in);
  for (int i = 0; i < n; i++)
    if (v[i] != want[i]) {
      print_error("feature %d: got %g, expected %g\n", i, (double)v[i],
                  (double)want[i]);
      fail();
    }
}

static void test_csv_classification(void **state) {
  (void)state;
  write_text(P("iris.csv"), "sepal,petal,species\n"
                            "5.1,1.4,virginica\n"
                            "4.9, 1.5 ,setosa\n"
                            "\n"
                            "6.3,-2e-1,versicolor\n"
                            "5.0,1.0,setosa\n");
  torc_dataset *ds = open_ds("csv", 1, "path", P("iris.csv"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 4);
  assert_int_equal(torc_dataset_num_classes(ds), 3);
  const char *d = torc_dataset_describe(ds);
  assert_contains(d, "4 samples, input [2] f32, 3 classes");
  assert_contains(d, "column 'species'");
  assert_contains(d, "setosa, versicolor, virginica");
  char name[64];
  assert_ok(torc_dataset_class_name(ds, 0, name, sizeof name));
  assert_string_equal(name, "setosa");
  assert_ok(torc_dataset_class_name(ds, 2, name, sizeof name));
  assert_string_equal(name, "virginica");
  /* The mapping is logged once, at info level. */
  assert_int_equal(count_substr(log_buf, "0 = setosa, 1 = versicolor, 2 = "
                                         "virginica"),
                   1);
  assert_contains(log_buf, "[2] csv:");
  static const float f0[2] = {5.1f, 1.4f}, f1[2] = {4.9f, 1.5f},
                     f2[2] = {6.3f, -0.2f}, f3[2] = {5.0f, 1.0f};
  const float *want[4] = {f0, f1, f2, f3};
  const int64_t cls[4] = {2, 0, 1, 0};
  const int64_t shape[1] = {2};
  for (int64_t i = 0; i < 4; i++) {
    torc_tensor *in, *tg;
    get_sample(ds, i, TORC_F32, shape, 1, &in, &tg);
    check_features(in, want[i], 2);
    assert_class(tg, cls[i]);
    release2(in, tg);
  }
  torc_dataset_close(ds);
}

static void test_csv_numeric_labels(void **state) {
  (void)state;
  /* "10" sorts after "9": numeric order when every label is a number. */
  write_text(P("num.csv"), "x,y\n1,10\n2,9\n3,2\n4,9\n");
  torc_dataset *ds = open_ds("csv", 1, "path", P("num.csv"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_num_classes(ds), 3);
  assert_contains(torc_dataset_describe(ds), "numeric order: 2, 9, 10");
  const int64_t want[4] = {2, 1, 0, 1};
  const int64_t shape[1] = {1};
  for (int64_t i = 0; i < 4; i++) {
    torc_tensor *in, *tg;
    get_sample(ds, i, TORC_F32, shape, 1, &in, &tg);
    assert_class(tg, want[i]);
    release2(in, tg);
  }
  char name[16];
  assert_ok(torc_dataset_class_name(ds, 2, name, sizeof name));
  assert_string_equal(name, "10");
  torc_dataset_close(ds);
}

static void test_csv_columns(void **state) {
  (void)state;
  write_text(P("cols.csv"),
             "id,label,a,b,c\n7,cat,1,2,3\n8,dog,4,5,6\n");
  /* Label by name, features a subset (in the order given). */
  torc_dataset *ds = open_ds("csv", 3, "path", P("cols.csv"), "label_column",
                             "label", "feature_columns", "c, a");
  assert_torc(ds);
  const int64_t shape[1] = {2};
  torc_tensor *in, *tg;
  get_sample(ds, 1, TORC_F32, shape, 1, &in, &tg);
  static const float w1[2] = {6, 4};
  check_features(in, w1, 2);
  assert_class(tg, 1);
  release2(in, tg);
  torc_dataset_close(ds);
  /* Label by 0-based index; every other column is a feature. */
  ds = open_ds("csv", 2, "path", P("cols.csv"), "label_column", "1");
  assert_torc(ds);
  const int64_t shape4[1] = {4};
  get_sample(ds, 0, TORC_F32, shape4, 1, &in, &tg);
  static const float w0[4] = {7, 1, 2, 3};
  check_features(in, w0, 4);
  assert_class(tg, 0);
  release2(in, tg);
  torc_dataset_close(ds);
  /* Unknown column: the columns are listed. */
  assert_open_fails(open_ds("csv", 2, "path", P("cols.csv"), "label_column",
                            "lable"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "'lable' is not a column");
  assert_contains(torc_last_error(), "'label'");
  assert_open_fails(open_ds("csv", 2, "path", P("cols.csv"), "label_column",
                            "5"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "index below 5");
  /* A feature that is also the target. */
  assert_open_fails(open_ds("csv", 3, "path", P("cols.csv"), "label_column",
                            "label", "feature_columns", "a,label"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "both a feature and a target");
  /* A label column of text read as a feature. */
  assert_open_fails(open_ds("csv", 2, "path", P("cols.csv"), "label_column",
                            "id"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), ":2:3: 'cat' is not a number (column "
                                     "'label')");
}

static void test_csv_regression(void **state) {
  (void)state;
  write_text(P("reg.csv"), "x1,y1,x2,y2\n1,0.5,2,-1\n3,1.5,4,-2\n");
  torc_dataset *ds = open_ds("csv", 3, "path", P("reg.csv"), "task",
                             "regression", "target_columns", "y1,y2");
  assert_torc(ds);
  assert_int_equal(torc_dataset_num_classes(ds), 0);
  assert_contains(torc_dataset_describe(ds),
                  "2 samples, input [2] f32, regression targets [2] f32");
  const int64_t shape[1] = {2};
  torc_tensor *in, *tg;
  get_sample(ds, 1, TORC_F32, shape, 1, &in, &tg);
  static const float wi[2] = {3, 4}, wt[2] = {1.5f, -2};
  check_features(in, wi, 2);
  check_features(tg, wt, 2);
  release2(in, tg);
  torc_dataset_close(ds);
  /* One target: label_column (default last). */
  ds = open_ds("csv", 2, "path", P("reg.csv"), "task", "regression");
  assert_torc(ds);
  get_sample(ds, 0, TORC_F32, (const int64_t[1]){3}, 1, &in, &tg);
  static const float wt1[1] = {-1};
  check_features(tg, wt1, 1);
  release2(in, tg);
  torc_dataset_close(ds);
  /* A non-numeric regression target. */
  write_text(P("reg-bad.csv"), "x,y\n1,2\n3,n/a\n");
  assert_open_fails(open_ds("csv", 2, "path", P("reg-bad.csv"), "task",
                            "regression"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "reg-bad.csv:3:3: 'n/a' is not a number "
                                     "(column 'y')");
  assert_contains(torc_last_error(), "regression target");
  /* Bad task; target_columns without regression. */
  assert_open_fails(open_ds("csv", 2, "path", P("reg.csv"), "task", "regress"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "classification or regression");
  assert_open_fails(open_ds("csv", 2, "path", P("reg.csv"), "target_columns",
                            "y1"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "task = regression");
}

static void test_csv_formats(void **state) {
  (void)state;
  /* No header, semicolons, CRLF, a byte-order mark, a quoted label with
   * the delimiter and a doubled quote. */
  write_text(P("fmt.csv"), "\xEF\xBB\xBF"
                           "1;2;\"a;b\"\r\n"
                           "3;4;\"say \"\"hi\"\"\"\r\n");
  torc_dataset *ds = open_ds("csv", 3, "path", P("fmt.csv"), "header", "no",
                             "delimiter", "semicolon");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 2);
  char name[32];
  assert_ok(torc_dataset_class_name(ds, 0, name, sizeof name));
  assert_string_equal(name, "a;b");
  assert_ok(torc_dataset_class_name(ds, 1, name, sizeof name));
  assert_string_equal(name, "say \"hi\"");
  torc_tensor *in, *tg;
  get_sample(ds, 0, TORC_F32, (const int64_t[1]){2}, 1, &in, &tg);
  static const float w0[2] = {1, 2};
  check_features(in, w0, 2);
  assert_class(tg, 0);
  release2(in, tg);
  torc_dataset_close(ds);
  /* Tabs, header=no with the label first. */
  write_text(P("fmt.tsv"), "b\t1.5\t2\na\t3\t4\n");
  ds = open_ds("csv", 4, "path", P("fmt.tsv"), "header", "no", "delimiter",
               "tab", "label_column", "0");
  assert_torc(ds);
  get_sample(ds, 1, TORC_F32, (const int64_t[1]){2}, 1, &in, &tg);
  static const float w1[2] = {3, 4};
  check_features(in, w1, 2);
  assert_class(tg, 0);
  release2(in, tg);
  torc_dataset_close(ds);
  /* Bad delimiter, bad header value. */
  assert_open_fails(open_ds("csv", 2, "path", P("fmt.tsv"), "delimiter",
                            "::"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "one character");
  assert_open_fails(open_ds("csv", 2, "path", P("fmt.tsv"), "header",
                            "maybe"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "yes or no");
  /* An unterminated quote, text after a closing quote. */
  write_text(P("q1.csv"), "a,b\n1,\"x\n");
  assert_open_fails(open_ds("csv", 1, "path", P("q1.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "q1.csv:2:3: a quoted field has no "
                                     "closing quote");
  write_text(P("q2.csv"), "a,b\n1,\"x\"y\n");
  assert_open_fails(open_ds("csv", 1, "path", P("q2.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "q2.csv:2:6: text after the closing "
                                     "quote");
}

static void test_csv_ragged(void **state) {
  (void)state;
  write_text(P("rag.csv"), "a,b,c,d,e,f\n1,2,3,4,5,x\n1,2,3,4,y\n");
  assert_open_fails(open_ds("csv", 1, "path", P("rag.csv")), TORC_ERR_IO);
  char want[600];
  snprintf(want, sizeof want, "%s:3: row has 5 fields, the header has 6",
           P("rag.csv"));
  assert_contains(torc_last_error(), want);
  /* Without a header, the first row sets the width. */
  write_text(P("rag2.csv"), "1,2,a\n\n1,2,3,b\n");
  assert_open_fails(open_ds("csv", 2, "path", P("rag2.csv"), "header", "no"),
                    TORC_ERR_IO);
  snprintf(want, sizeof want, "%s:3: row has 4 fields, the first row has 3",
           P("rag2.csv"));
  assert_contains(torc_last_error(), want);
}

static void test_csv_not_a_number(void **state) {
  (void)state;
  write_text(P("nan.csv"), "name,age,class\nx,1,a\nx,abc,b\n");
  assert_open_fails(open_ds("csv", 2, "path", P("nan.csv"),
                            "feature_columns", "age"),
                    TORC_ERR_IO);
  char want[600];
  snprintf(want, sizeof want,
           "%s:3:3: 'abc' is not a number (column 'age')", P("nan.csv"));
  assert_contains(torc_last_error(), want);
  assert_contains(torc_last_error(), "feature_columns");
  /* "name" is text: a feature by default. */
  assert_open_fails(open_ds("csv", 1, "path", P("nan.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), ":2:1: 'x' is not a number (column "
                                     "'name')");
  /* Empty fields and non-finite values. */
  write_text(P("nan2.csv"), "a,b\n,1\n");
  assert_open_fails(open_ds("csv", 1, "path", P("nan2.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), ":2:1: '' is not a number (column 'a')");
  write_text(P("nan3.csv"), "a,b\n1,1\ninf,1\n");
  assert_open_fails(open_ds("csv", 1, "path", P("nan3.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), ":3:1: 'inf' is not a finite number");
  /* An empty label. */
  write_text(P("nan4.csv"), "a,b\n1,\n");
  assert_open_fails(open_ds("csv", 1, "path", P("nan4.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), ":2:3: the label (column 'b') is empty");
}

static void test_csv_files(void **state) {
  (void)state;
  assert_open_fails(open_ds("csv", 1, "path", P("absent.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "absent.csv' does not exist");
  write_text(P("empty.csv"), "\n\n");
  assert_open_fails(open_ds("csv", 1, "path", P("empty.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "is empty");
  write_text(P("head.csv"), "a,b\n");
  assert_open_fails(open_ds("csv", 1, "path", P("head.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "no data rows");
  write_text(P("one.csv"), "a\n1\n");
  assert_open_fails(open_ds("csv", 1, "path", P("one.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "check the delimiter");
  if (running_as_root("csv unreadable file"))
    return;
  write_text(P("locked.csv"), "a,b\n1,2\n");
  assert_int_equal(chmod(P("locked.csv"), 0), 0);
  assert_open_fails(open_ds("csv", 1, "path", P("locked.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "not readable");
  chmod(P("locked.csv"), 0644);
}

/* ======================================================================
 * npy
 * ==================================================================== */

/* write_npy_raw and write_npy are in data_testutil.h. */

static void test_npy_classification(void **state) {
  (void)state;
  float x[4 * 2 * 3];
  for (int i = 0; i < 24; i++)
    x[i] = (float)i * 0.5f - 3;
  const int64_t y[4] = {1, 0, 4, 1};
  write_npy(P("x.npy"), 1, "<f4", "(4, 2, 3)", x, sizeof x);
  write_npy(P("y.npy"), 1, "<i8", "(4,)", y, sizeof y);
  torc_dataset *ds = open_ds("npy", 2, "inputs", P("x.npy"), "targets",
                             P("y.npy"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 4);
  assert_int_equal(torc_dataset_num_classes(ds), 5);
  assert_string_equal(torc_dataset_describe(ds),
                      "4 samples, input [2, 3] f32, 5 classes");
  const int64_t shape[2] = {2, 3};
  for (int64_t i = 0; i < 4; i += 3) {
    torc_tensor *in, *tg;
    get_sample(ds, i, TORC_F32, shape, 2, &in, &tg);
    assert_memory_equal(torc_data(in), x + 6 * i, 6 * sizeof(float));
    assert_class(tg, y[i]);
    release2(in, tg);
  }
  torc_dataset_close(ds);
}

static void test_npy_versions_and_dtypes(void **state) {
  (void)state;
  /* Version 2, u8 images; version 3, f64 regression targets [N, 2]. */
  uint8_t img[3 * 4];
  for (int i = 0; i < 12; i++)
    img[i] = (uint8_t)(250 + i % 6);
  const double t[3 * 2] = {0.5, -1, 2.25, 3, 1e-3, 7};
  write_npy(P("img.npy"), 2, "|u1", "(3, 4)", img, sizeof img);
  write_npy(P("t.npy"), 3, "<f8", "(3, 2)", t, sizeof t);
  torc_dataset *ds = open_ds("npy", 2, "inputs", P("img.npy"), "targets",
                             P("t.npy"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_num_classes(ds), 0);
  assert_string_equal(torc_dataset_describe(ds),
                      "3 samples, input [4] u8, regression targets [2] f32");
  torc_tensor *in, *tg;
  get_sample(ds, 2, TORC_U8, (const int64_t[1]){4}, 1, &in, &tg);
  assert_memory_equal(torc_data(in), img + 8, 4);
  const float wt[2] = {1e-3f, 7};
  check_features(tg, wt, 2);
  release2(in, tg);
  torc_dataset_close(ds);
  /* i4 class targets; f64 inputs; 1-D float targets give [1]. */
  const int32_t c[3] = {2, 2, 0};
  const double x[3] = {1.5, 2.5, 3.5};
  write_npy(P("c.npy"), 1, "<i4", "(3,)", c, sizeof c);
  write_npy(P("x64.npy"), 1, "<f8", "(3,)", x, sizeof x);
  ds = open_ds("npy", 2, "inputs", P("x64.npy"), "targets", P("c.npy"));
  assert_torc(ds);
  get_sample(ds, 1, TORC_F64, NULL, 0, &in, &tg);
  assert_true(*(const double *)torc_data(in) == 2.5);
  assert_class(tg, 2);
  release2(in, tg);
  torc_dataset_close(ds);
  const float r[3] = {1, 2, 3};
  write_npy(P("r.npy"), 1, "<f4", "(3,)", r, sizeof r);
  ds = open_ds("npy", 2, "inputs", P("img.npy"), "targets", P("r.npy"));
  assert_torc(ds);
  get_sample(ds, 1, TORC_U8, (const int64_t[1]){4}, 1, &in, &tg);
  const float wr[1] = {2};
  check_features(tg, wr, 1);
  release2(in, tg);
  torc_dataset_close(ds);
}

static void test_npy_bad_header(void **state) {
  (void)state;
  const int64_t y[2] = {0, 1};
  write_npy(P("by.npy"), 1, "<i8", "(2,)", y, sizeof y);
  /* Not a .npy file. */
  write_text(P("bad-magic.npy"), "PK\x03\x04 this is a zip (an .npz)");
  assert_open_fails(open_ds("npy", 2, "inputs", P("bad-magic.npy"),
                            "targets", P("by.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "is not a .npy file");
  assert_contains(torc_last_error(), "bad-magic.npy");
  /* A header that is not a dict, one with a missing key, an unknown
   * format version, a header longer than the file. */
  write_npy_raw(P("bad-dict.npy"), 1, "[1, 2, 3]", y, sizeof y);
  assert_open_fails(open_ds("npy", 2, "inputs", P("bad-dict.npy"),
                            "targets", P("by.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "bad header: it is not a Python dict");
  write_npy_raw(P("bad-key.npy"), 1, "{'descr': '<i8', 'shape': (2,), }", y,
                sizeof y);
  assert_open_fails(open_ds("npy", 2, "inputs", P("bad-key.npy"),
                            "targets", P("by.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "'fortran_order' is missing");
  write_npy_raw(P("bad-shape.npy"), 1,
                "{'descr': '<i8', 'fortran_order': False, 'shape': (2, x), }",
                y, sizeof y);
  assert_open_fails(open_ds("npy", 2, "inputs", P("bad-shape.npy"),
                            "targets", P("by.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "'shape'");
  size_t n;
  unsigned char *b = test_read_file(P("by.npy"), &n);
  b[6] = 9;
  test_write_file(P("bad-version.npy"), b, n);
  assert_open_fails(open_ds("npy", 2, "inputs", P("bad-version.npy"),
                            "targets", P("by.npy")),
                    TORC_ERR_UNSUPPORTED);
  assert_contains(torc_last_error(), "format version 9.0");
  b[6] = 1;
  test_write_file(P("bad-cut.npy"), b, 40);
  free(b);
  assert_open_fails(open_ds("npy", 2, "inputs", P("bad-cut.npy"),
                            "targets", P("by.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "ends inside the header");
  /* Data shorter than the shape says. */
  write_npy(P("short.npy"), 1, "<i8", "(3,)", y, sizeof y);
  assert_open_fails(open_ds("npy", 2, "inputs", P("short.npy"), "targets",
                            P("by.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "holds 16 bytes of data but its "
                                     "header's shape [3] of i64 needs 24");
  assert_contains(torc_last_error(), "truncated");
}

static void test_npy_unsupported(void **state) {
  (void)state;
  const int64_t y[2] = {0, 1};
  const float x[4] = {1, 2, 3, 4};
  write_npy(P("uy.npy"), 1, "<i8", "(2,)", y, sizeof y);
  /* Big-endian and complex dtypes. */
  write_npy(P("be.npy"), 1, ">f4", "(2, 2)", x, sizeof x);
  assert_open_fails(open_ds("npy", 2, "inputs", P("be.npy"), "targets",
                            P("uy.npy")),
                    TORC_ERR_UNSUPPORTED);
  assert_contains(torc_last_error(), "dtype '>f4'");
  assert_contains(torc_last_error(), "astype('<f4')");
  write_npy(P("c8.npy"), 1, "<c8", "(2, 1)", x, sizeof x);
  assert_open_fails(open_ds("npy", 2, "inputs", P("c8.npy"), "targets",
                            P("uy.npy")),
                    TORC_ERR_UNSUPPORTED);
  assert_contains(torc_last_error(), "dtype '<c8'");
  /* Fortran order. */
  write_npy_raw(P("fo.npy"), 1,
                "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                x, sizeof x);
  assert_open_fails(open_ds("npy", 2, "inputs", P("fo.npy"), "targets",
                            P("uy.npy")),
                    TORC_ERR_UNSUPPORTED);
  assert_contains(torc_last_error(), "Fortran order");
  assert_contains(torc_last_error(), "ascontiguousarray");
  /* Integer targets that are not one index per sample. */
  write_npy(P("x22.npy"), 1, "<f4", "(2, 2)", x, sizeof x);
  const int64_t y2[4] = {0, 1, 1, 0};
  write_npy(P("y22.npy"), 1, "<i8", "(2, 2)", y2, sizeof y2);
  assert_open_fails(open_ds("npy", 2, "inputs", P("x22.npy"), "targets",
                            P("y22.npy")),
                    TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "class indices");
  /* A negative class index. */
  const int64_t yn[2] = {0, -1};
  write_npy(P("yn.npy"), 1, "<i8", "(2,)", yn, sizeof yn);
  assert_open_fails(open_ds("npy", 2, "inputs", P("x22.npy"), "targets",
                            P("yn.npy")),
                    TORC_ERR_RANGE);
  assert_contains(torc_last_error(), "class index -1 at row 1");
}

static void test_npy_length_mismatch(void **state) {
  (void)state;
  const float x[6] = {1, 2, 3, 4, 5, 6};
  const int64_t y[2] = {0, 1};
  write_npy(P("lx.npy"), 1, "<f4", "(3, 2)", x, sizeof x);
  write_npy(P("ly.npy"), 1, "<i8", "(2,)", y, sizeof y);
  assert_open_fails(open_ds("npy", 2, "inputs", P("lx.npy"), "targets",
                            P("ly.npy")),
                    TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "has 3 rows");
  assert_contains(torc_last_error(), "has 2");
  assert_open_fails(open_ds("npy", 2, "inputs", P("nope.npy"), "targets",
                            P("ly.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "does not exist");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_csv_classification),
      T(test_csv_numeric_labels),
      T(test_csv_columns),
      T(test_csv_regression),
      T(test_csv_formats),
      T(test_csv_ragged),
      T(test_csv_not_a_number),
      T(test_csv_files),
      T(test_npy_classification),
      T(test_npy_versions_and_dtypes),
      T(test_npy_bad_header),
      T(test_npy_unsupported),
      T(test_npy_length_mismatch),
  };
  return cmocka_run_group_tests(tests, group_setup, data_tmp_teardown);
}
