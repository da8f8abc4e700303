/* tests/test_safetensors.c — safetensors: round trips of every dtype (0-dim,
 * empty, strided and sim-device tensors), the Python library's exact byte
 * layout, a file written on the PyTorch side (tests/fixtures/gen_dtypes.py),
 * one crafted bad file per error the reader reports, save's argument
 * errors, and atomic save (a failed save leaves the old file, no temp).
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "st_testutil.h"

/* Exported by core/safetensors.c for this test only (see there). */
TORC_API void torc__safetensors_fail_before_rename(int on);

static char tmpdir[256];
static int scope;
static int64_t live_at_start;

static int setup(void **state) {
  (void)state;
  test_load_plugin("ref");
  test_load_plugin("sim");
  if (test_make_tmpdir(tmpdir, sizeof tmpdir, "torc-st"))
    return -1;
  torc_clear_error();
  live_at_start = torc_tensor_live_count();
  scope = torc_scope_begin();
  return 0;
}

/* Removes every file in tmpdir (flat: tests make at most one subfolder
 * level, removed here too), then tmpdir. */
static void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
      rm_tree(p);
    else
      unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static int teardown(void **state) {
  (void)state;
  torc_scope_end(scope);
  torc__safetensors_fail_before_rename(0);
  rm_tree(tmpdir);
  int64_t live = torc_tensor_live_count();
  if (live != live_at_start) {
    fprintf(stderr, "teardown: %lld tensor(s) leaked\n",
            (long long)(live - live_at_start));
    return -1;
  }
  return 0;
}

/* ---- helpers ---- */

static torc_device sim(void) {
  torc_device d = TORC_CPU;
  assert_ok(torc_device_parse("sim", &d));
  return d;
}

/* tmpdir/name in one of a few rotating static buffers: valid until the
 * fourth call after. */
static const char *tpath(const char *name) {
  static char p[4][512];
  static int k;
  k = (k + 1) % 4;
  snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
  return p[k];
}

/* The raw bytes of t (any device) into a malloc'd buffer. */
static unsigned char *bytes_of(const torc_tensor *t, size_t *n) {
  *n = (size_t)torc_numel(t) * torc_dtype_size(torc_dtype_of(t));
  unsigned char *b = malloc(*n + 1);
  assert_non_null(b);
  assert_ok(torc_to_host(t, b, *n));
  return b;
}

static void assert_same_tensor(const torc_tensor *a, const torc_tensor *b) {
  assert_int_equal(torc_dtype_of(a), torc_dtype_of(b));
  assert_int_equal(torc_ndim(a), torc_ndim(b));
  for (int i = 0; i < torc_ndim(a); i++)
    assert_int_equal(torc_shape(a)[i], torc_shape(b)[i]);
  size_t na, nb;
  unsigned char *ba = bytes_of(a, &na), *bb = bytes_of(b, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(ba, bb, na);
  free(ba);
  free(bb);
}

/* Number of entries in tmpdir whose name contains ".tmp.". */
static int count_temps(void) {
  DIR *d = opendir(tmpdir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += strstr(e->d_name, ".tmp.") != NULL;
  closedir(d);
  return n;
}

/* ---- round trips ---- */

/* One tensor of every dtype with awkward values, a 0-dim, an empty one, a
 * strided view and a tensor on sim; saved, reopened, read on cpu and sim. */
static void test_round_trip_every_dtype(void **state) {
  (void)state;
  float f32[6] = {1.5f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f};
  double f64[3] = {0.1, -1e300, 4.9e-324};
  uint16_t f16[4] = {0x3c00, 0x8001, 0x7c00, 0x7e00};
  uint16_t bf16[2] = {0x3f80, 0xff80};
  int32_t i32[3] = {INT32_MIN, 0, INT32_MAX};
  int64_t i64[2] = {INT64_MIN, INT64_MAX};
  uint8_t u8[5] = {0, 1, 128, 254, 255};
  uint8_t bl[4] = {1, 0, 0, 1};
  double scalar = -2.25;
  torc_tensor *t[] = {
      torc_from_host(f32, TORC_SHAPE(2, 3), TORC_F32, TORC_CPU),
      torc_from_host(f64, TORC_SHAPE(3), TORC_F64, TORC_CPU),
      torc_from_host(f16, TORC_SHAPE(2, 1, 2), TORC_F16, TORC_CPU),
      torc_from_host(bf16, TORC_SHAPE(2), TORC_BF16, TORC_CPU),
      torc_from_host(i32, TORC_SHAPE(3), TORC_I32, TORC_CPU),
      torc_from_host(i64, TORC_SHAPE(2), TORC_I64, TORC_CPU),
      torc_from_host(u8, TORC_SHAPE(5), TORC_U8, TORC_CPU),
      torc_from_host(bl, TORC_SHAPE(2, 2), TORC_BOOL, TORC_CPU),
      torc_from_host(&scalar, NULL, 0, TORC_F64, TORC_CPU),
      torc_empty(TORC_SHAPE(0, 4), TORC_I32, TORC_CPU),
      NULL, /* a strided view */
      NULL, /* on sim */
  };
  t[10] = torc_transpose(t[0], 0, 1);
  t[11] = torc_to(t[0], sim());
  for (size_t i = 0; i < sizeof t / sizeof *t; i++)
    assert_torc(t[i]);
  assert_false(torc_is_contiguous(t[10]));
  const char *names[] = {"w.f32", "w.f64", "w.f16", "w.bf16",
                         "w.i32", "w.i64", "w.u8",  "mask",
                         "0dim",  "empty", "view",  "on_sim"};
  const char *mk[] = {"format", "note"};
  const char *mv[] = {"pt", "ünïcode and \"quotes\""};
  const int n = (int)(sizeof t / sizeof *t);
  assert_ok(torc_safetensors_save(tpath("a.safetensors"), names,
                                  (const torc_tensor *const *)t, n, mk, mv, 2));
  torc_safetensors *st = torc_safetensors_open(tpath("a.safetensors"));
  assert_torc(st);
  assert_int_equal(torc_safetensors_count(st), n);
  for (int i = 1; i < n; i++) /* names sorted */
    assert_true(strcmp(torc_safetensors_name(st, i - 1),
                       torc_safetensors_name(st, i)) < 0);
  torc_device devs[2] = {TORC_CPU, sim()};
  for (int i = 0; i < n; i++) {
    torc_dtype dt;
    int nd = -1;
    int64_t shape[TORC_MAX_DIMS];
    assert_ok(torc_safetensors_info(st, names[i], &dt, &nd, shape));
    assert_int_equal(dt, torc_dtype_of(t[i]));
    assert_int_equal(nd, torc_ndim(t[i]));
    for (int d = 0; d < nd; d++)
      assert_int_equal(shape[d], torc_shape(t[i])[d]);
    for (int k = 0; k < 2; k++) {
      torc_tensor *g = torc_safetensors_get(st, names[i], devs[k]);
      assert_torc(g);
      assert_true(torc_device_eq(torc_device_of(g), devs[k]));
      assert_same_tensor(g, t[i]);
    }
  }
  assert_string_equal(torc_safetensors_metadata(st, "format"), "pt");
  assert_string_equal(torc_safetensors_metadata(st, "note"), mv[1]);
  assert_null(torc_safetensors_metadata(st, "missing"));
  assert_int_equal(torc_safetensors_metadata_count(st), 2);
  assert_string_equal(torc_safetensors_metadata_key(st, 0), "format");
  assert_string_equal(torc_safetensors_metadata_key(st, 1), "note");
  torc_clear_error();
  assert_null(torc_safetensors_metadata_key(st, 2));
  assert_error(TORC_ERR_RANGE, "2 metadata entries");
  /* A tensor read on cpu outlives the handle (it is a copy). */
  torc_tensor *keep = torc_safetensors_get(st, "w.i64", TORC_CPU);
  assert_torc(keep);
  torc_safetensors_close(st);
  assert_same_tensor(keep, t[5]);
}

/* No tensors and no metadata; metadata only. */
static void test_round_trip_empty_file(void **state) {
  (void)state;
  assert_ok(torc_safetensors_save(tpath("e.st"), NULL, NULL, 0, NULL, NULL, 0));
  torc_safetensors *st = torc_safetensors_open(tpath("e.st"));
  assert_torc(st);
  assert_int_equal(torc_safetensors_count(st), 0);
  assert_int_equal(torc_safetensors_metadata_count(st), 0);
  torc_clear_error();
  assert_null(torc_safetensors_get(st, "x", TORC_CPU));
  assert_error(TORC_ERR_INVALID, "no tensor named 'x' (it has 0: none)");
  torc_safetensors_close(st);
}

/* A plain state dict — tensors and no "__metadata__", as most files
 * written by other tools are — has no metadata: lookups say so without
 * searching an array that does not exist (a NULL array given to bsearch
 * trips UBSan). */
static void test_no_metadata_section(void **state) {
  (void)state;
  write_st(tpath("plain.st"),
           "{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
           2);
  torc_safetensors *st = torc_safetensors_open(tpath("plain.st"));
  assert_torc(st);
  assert_int_equal(torc_safetensors_count(st), 1);
  assert_int_equal(torc_safetensors_metadata_count(st), 0);
  assert_null(torc_safetensors_metadata(st, "format"));
  assert_null(torc_safetensors_metadata(st, ""));
  torc_clear_error();
  assert_null(torc_safetensors_metadata_key(st, 0));
  assert_error(TORC_ERR_RANGE, "0 metadata entries");
  torc_safetensors_close(st);

  /* Neither tensors nor metadata: "{}". */
  write_st(tpath("none.st"), "{}", 0);
  st = torc_safetensors_open(tpath("none.st"));
  assert_torc(st);
  assert_null(torc_safetensors_metadata(st, "format"));
  torc_clear_error();
  assert_int_equal(torc_safetensors_info(st, "w", NULL, NULL, NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "it has 0: none");
  torc_safetensors_close(st);
}

/* ---- the Python library's byte layout ---- */

/* The bytes the format's reference writer produces (its own unit tests in
 * safetensors/src/tensor.rs: test_empty, test_serialization_forced_
 * alignement): a compact header padded with spaces to 8 bytes. */
static void test_reference_layout(void **state) {
  (void)state;
  size_t n;
  unsigned char *b;
  assert_ok(torc_safetensors_save(tpath("0.st"), NULL, NULL, 0, NULL, NULL, 0));
  b = test_read_file(tpath("0.st"), &n);
  assert_int_equal(n, 16);
  assert_memory_equal(b, "\x08\0\0\0\0\0\0\0{}      ", 16);
  free(b);

  const char *k = "framework", *v = "pt";
  assert_ok(torc_safetensors_save(tpath("1.st"), NULL, NULL, 0, &k, &v, 1));
  b = test_read_file(tpath("1.st"), &n);
  const char *h1 = "{\"__metadata__\":{\"framework\":\"pt\"}}     ";
  assert_int_equal(n, 8 + 40);
  assert_int_equal(b[0], 40);
  assert_memory_equal(b + 8, h1, 40);
  free(b);

  float vals[6] = {0, 1, 2, 3, 4, 5};
  torc_tensor *t =
      torc_from_host(vals, TORC_SHAPE(1, 1, 2, 3), TORC_F32, TORC_CPU);
  const char *name = "attn0";
  assert_ok(torc_safetensors_save(
      tpath("2.st"), &name, (const torc_tensor *const *)&t, 1, NULL, NULL, 0));
  b = test_read_file(tpath("2.st"), &n);
  const char *h2 = "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],"
                   "\"data_offsets\":[0,24]}}       ";
  assert_int_equal(strlen(h2), 72);
  assert_int_equal(n, 8 + 72 + 24);
  assert_int_equal(b[0], 72);
  assert_memory_equal(b + 8, h2, 72);
  assert_memory_equal(b + 80, vals, 24);
  free(b);

  /* Order: dtype by the reference's enum, descending (I64 F64 F32 I32
   * BF16 F16 U8 BOOL), then name; offsets packed. */
  torc_tensor *ts[] = {torc_zeros(TORC_SHAPE(1), TORC_BOOL, TORC_CPU),
                       torc_zeros(TORC_SHAPE(1), TORC_F32, TORC_CPU),
                       torc_zeros(TORC_SHAPE(1), TORC_I64, TORC_CPU),
                       torc_zeros(TORC_SHAPE(1), TORC_F32, TORC_CPU),
                       torc_zeros(TORC_SHAPE(1), TORC_F16, TORC_CPU)};
  const char *nm[] = {"a", "z", "m", "b", "c"};
  assert_ok(torc_safetensors_save(
      tpath("3.st"), nm, (const torc_tensor *const *)ts, 5, NULL, NULL, 0));
  b = test_read_file(tpath("3.st"), &n);
  const char *order[] = {"\"m\":{\"dtype\":\"I64\"", "\"b\":{\"dtype\":\"F32\"",
                         "\"z\":{\"dtype\":\"F32\"", "\"c\":{\"dtype\":\"F16\"",
                         "\"a\":{\"dtype\":\"BOOL\""};
  size_t hl = (size_t)b[0] | (size_t)b[1] << 8;
  assert_true(8 + hl <= n);
  char *hdr = calloc(1, hl + 1);
  assert_non_null(hdr);
  memcpy(hdr, b + 8, hl);
  const char *prev = hdr;
  for (int i = 0; i < 5; i++) {
    const char *at = strstr(hdr, order[i]);
    assert_non_null(at);
    assert_true(at >= prev);
    prev = at;
  }
  assert_contains(hdr, "\"data_offsets\":[8,12]}");  /* b */
  assert_contains(hdr, "\"data_offsets\":[18,19]}"); /* a */
  free(hdr);
  free(b);
}

/* ---- a file written on the PyTorch side ---- */

static void test_torch_written_file(void **state) {
  (void)state;
  const char *src = getenv("TORC_TOP_SRCDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/tests/fixtures/torch_dtypes.safetensors",
           src ? src : ".");
  torc_safetensors *st = torc_safetensors_open(path);
  assert_torc(st);
  assert_int_equal(torc_safetensors_count(st), 11);
  assert_string_equal(torc_safetensors_metadata(st, "format"), "pt");

  /* The values gen_dtypes.py wrote, recomputed here. */
  float f32[6], f32s[5] = {INFINITY, -INFINITY, NAN, -0.0f, 1e-45f};
  double f64[5];
  uint16_t f16[4], bf16[4];
  const float bfv[4] = {1.0f, -2.5f, 256.0f, 0.0078125f};
  for (int i = 0; i < 6; i++)
    f32[i] = (float)(i - 2) * 0.375f;
  for (int i = 0; i < 5; i++)
    f64[i] = (double)(i - 2) * 0.1;
  for (int i = 0; i < 4; i++) {
    f16[i] = torc_f32_to_f16((float)i * 0.5f - 1.0f);
    bf16[i] = torc_f32_to_bf16(bfv[i]);
  }
  int32_t i32[4] = {INT32_MIN, -1, 0, INT32_MAX};
  int64_t i64[4] = {INT64_MIN, -1, 0, INT64_MAX};
  uint8_t u8[4] = {0, 1, 127, 255}, bl[3] = {1, 0, 1};
  double scalar = 3.5;
  struct {
    const char *name;
    const void *data;
    int ndim;
    int64_t shape[2];
    torc_dtype dt;
  } want[] = {
      {"f32", f32, 2, {2, 3}, TORC_F32},
      {"f32_special", f32s, 1, {5}, TORC_F32},
      {"f64", f64, 1, {5}, TORC_F64},
      {"f16", f16, 2, {2, 2}, TORC_F16},
      {"bf16", bf16, 1, {4}, TORC_BF16},
      {"i32", i32, 1, {4}, TORC_I32},
      {"i64", i64, 2, {2, 2}, TORC_I64},
      {"u8", u8, 1, {4}, TORC_U8},
      {"bool", bl, 1, {3}, TORC_BOOL},
      {"scalar", &scalar, 0, {0}, TORC_F64},
      {"empty", NULL, 2, {0, 3}, TORC_F32},
  };
  const int nw = (int)(sizeof want / sizeof *want);
  torc_tensor *got[16];
  const char *names[16];
  for (int i = 0; i < nw; i++) {
    torc_tensor *e = torc_from_host(want[i].data, want[i].shape, want[i].ndim,
                                    want[i].dt, TORC_CPU);
    assert_torc(e);
    got[i] = torc_safetensors_get(st, want[i].name, i % 2 ? sim() : TORC_CPU);
    assert_torc(got[i]);
    names[i] = want[i].name;
    assert_same_tensor(got[i], e);
  }
  /* torc writes the same bytes from the same tensors and metadata. */
  const char *mk[] = {"producer", "format"};
  const char *mv[] = {torc_safetensors_metadata(st, "producer"), "pt"};
  assert_non_null(mv[0]);
  assert_ok(torc_safetensors_save(tpath("again.st"), names,
                                  (const torc_tensor *const *)got, nw, mk, mv,
                                  2));
  size_t n0, n1;
  unsigned char *b0 = test_read_file(path, &n0),
                *b1 = test_read_file(tpath("again.st"), &n1);
  assert_int_equal(n0, n1);
  assert_memory_equal(b0, b1, n0);
  free(b0);
  free(b1);
  torc_safetensors_close(st);
}

/* ---- bad files: one per error the reader reports ---- */

typedef struct bad_case {
  const char *header;
  size_t data_len;
  torc_status status;
  const char *needle;
} bad_case;

static const bad_case bad_cases[] = {
    {"{\"a\": {", 0, TORC_ERR_INVALID, "malformed at line 1, column"},
    {"{\"a\":1,}", 0, TORC_ERR_INVALID, "malformed at line 1"},
    {"[1, 2]", 0, TORC_ERR_INVALID, "must be an object"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
     8, TORC_ERR_INVALID, "duplicate object key"},
    {"{\"a\":[1]}", 0, TORC_ERR_INVALID,
     "tensor 'a': the entry must be an object"},
    {"{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, TORC_ERR_INVALID,
     "tensor 'w' has no \"dtype\""},
    {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, TORC_ERR_INVALID,
     "tensor 'w' has no \"shape\""},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, TORC_ERR_INVALID,
     "tensor 'w' has no \"data_offsets\""},
    {"{\"w\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
     TORC_ERR_INVALID, "tensor 'w': dtype \"I8\" is not one torc supports"},
    {"{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
     TORC_ERR_INVALID, "dtype (not a string)"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
     TORC_ERR_INVALID, "tensor 'w': shape[0] is -2"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,1.5],\"data_offsets\":[0,8]}}", 8,
     TORC_ERR_INVALID, "shape[1] is 1.5"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
     TORC_ERR_INVALID, "shape[0] is \"2\""},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8,
     TORC_ERR_INVALID, "shape must be an array"},
    {"{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],"
     "\"data_offsets\":[0,1]}}",
     1, TORC_ERR_INVALID, "has 9 dimensions; torc supports at most 8"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8,
     TORC_ERR_INVALID,
     "data_offsets [0, 4] span 4 bytes, but shape [2] of F32 needs 8"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
     "\"data_offsets\":[0,8]}}",
     8, TORC_ERR_INVALID, "needs more bytes than the file's 8-byte data area"},
    /* An empty shape whose other dimensions multiply past 2^63. */
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[0,4294967296,4294967296],"
     "\"data_offsets\":[0,0]}}",
     0, TORC_ERR_INVALID, "has more than 2^63 elements"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 8,
     TORC_ERR_INVALID, "run past the end of the data area (8 bytes)"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
     TORC_ERR_INVALID, "data_offsets is [8,0]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8,
     TORC_ERR_INVALID, "data_offsets is [0]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8,
     TORC_ERR_INVALID, "data_offsets is [-8,0]"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
     16, TORC_ERR_INVALID,
     "tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a' ([0, 8])"},
    {"{\"__metadata__\":{\"k\":1}}", 0, TORC_ERR_INVALID,
     "metadata 'k' is 1; metadata values must be strings"},
    {"{\"__metadata__\":[\"k\"]}", 0, TORC_ERR_INVALID,
     "\"__metadata__\" must be an object"},
};

static void test_bad_headers(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
    char name[32];
    snprintf(name, sizeof name, "bad%zu.st", i);
    write_st(tpath(name), bad_cases[i].header, bad_cases[i].data_len);
    torc_clear_error();
    torc_safetensors *st = torc_safetensors_open(tpath(name));
    if (st != NULL) {
      print_error("case %zu (%s) opened\n", i, bad_cases[i].header);
      torc_safetensors_close(st);
      fail();
    }
    assert_error(bad_cases[i].status, bad_cases[i].needle);
    assert_contains(torc_last_error(), name); /* the path */
  }
}

static void test_bad_framing(void **state) {
  (void)state;
  torc_clear_error();
  assert_null(torc_safetensors_open(tpath("nonexistent.st")));
  assert_error(TORC_ERR_IO, "nonexistent.st: cannot open");

  test_write_file(tpath("short.st"), "\x05\0\0\0\0", 5);
  assert_null(torc_safetensors_open(tpath("short.st")));
  assert_error(TORC_ERR_IO, "the file has 5 bytes");

  /* Header length 1000 in a 20-byte file. */
  test_write_file(tpath("past.st"), "\xe8\x03\0\0\0\0\0\0{}          ", 20);
  assert_null(torc_safetensors_open(tpath("past.st")));
  assert_error(TORC_ERR_IO, "header length is 1000 bytes, past the end");

  /* An absurd length (2^63). */
  test_write_file(tpath("huge.st"), "\0\0\0\0\0\0\0\x80{}      ", 16);
  assert_null(torc_safetensors_open(tpath("huge.st")));
  assert_error(TORC_ERR_IO, "9223372036854775808 bytes");

  assert_null(torc_safetensors_open(tmpdir));
  assert_error(TORC_ERR_IO, "it is a folder");

  torc_clear_error();
  assert_null(torc_safetensors_open(NULL));
  assert_int_equal(torc_last_status(), TORC_ERR_NULL);
}

/* A BOOL tensor holding 2 opens (the header is fine) but cannot be read. */
static void test_bad_bool_bytes(void **state) {
  (void)state;
  write_st(tpath("b.st"),
           "{\"m\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]}}",
           3); /* bytes 0, 1, 2 */
  torc_safetensors *st = torc_safetensors_open(tpath("b.st"));
  assert_torc(st);
  torc_clear_error();
  assert_null(torc_safetensors_get(st, "m", TORC_CPU));
  assert_error(TORC_ERR_INVALID, "holds the byte 2 at element 2");
  torc_safetensors_close(st);
}

static void test_lookup_errors(void **state) {
  (void)state;
  torc_tensor *t[] = {torc_zeros(TORC_SHAPE(2), TORC_F32, TORC_CPU),
                      torc_ones(TORC_SHAPE(1), TORC_I64, TORC_CPU)};
  const char *names[] = {"layer.weight", "layer.bias"};
  assert_ok(torc_safetensors_save(
      tpath("l.st"), names, (const torc_tensor *const *)t, 2, NULL, NULL, 0));
  torc_safetensors *st = torc_safetensors_open(tpath("l.st"));
  assert_torc(st);
  torc_clear_error();
  assert_null(torc_safetensors_get(st, "layer.wieght", TORC_CPU));
  assert_error(TORC_ERR_INVALID, "no tensor named 'layer.wieght'");
  assert_contains(torc_last_error(), "'layer.bias', 'layer.weight'");
  assert_int_equal(torc_safetensors_info(st, "nope", NULL, NULL, NULL),
                   TORC_ERR_INVALID);
  assert_null(torc_safetensors_name(st, 2));
  assert_error(TORC_ERR_RANGE, "index 2 is out of range");
  assert_null(torc_safetensors_name(st, -1));
  assert_int_equal(torc_safetensors_count(NULL), 0);
  torc_safetensors_close(st);
  torc_safetensors_close(NULL);
}

/* A small deterministic fuzz: the PyTorch-written file with a few bytes of
 * its header or length changed, or cut short. Every variant must either
 * open (and then every tensor reads or fails cleanly) or fail with an
 * IO/INVALID error and a message — never crash, leak or read out of
 * bounds (valgrind and ASan runs check the last two). */
static void test_mutated_files(void **state) {
  (void)state;
  const char *src = getenv("TORC_TOP_SRCDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/tests/fixtures/torch_dtypes.safetensors",
           src ? src : ".");
  size_t n;
  unsigned char *orig = test_read_file(path, &n);
  unsigned char *b = malloc(n);
  assert_non_null(b);
  const size_t hend = 8 + ((size_t)orig[0] | (size_t)orig[1] << 8);
  static const unsigned char interesting[] = {'"',  '{', '}', '[', ']', ',',
                                              ':',  '-', '9', '0', ' ', 0,
                                              0xff, '.', 'e', '\\'};
  uint32_t x = 12345;
  int opened = 0, refused = 0;
  for (int iter = 0; iter < 600; iter++) {
    memcpy(b, orig, n);
    size_t len = n;
    int edits = 1 + iter % 3;
    for (int e = 0; e < edits; e++) {
      x = x * 1664525u + 1013904223u;
      size_t at = (x >> 8) % hend;
      x = x * 1664525u + 1013904223u;
      b[at] = (x >> 28) & 1 ? interesting[(x >> 8) % sizeof interesting]
                            : (unsigned char)(x >> 16);
    }
    if (iter % 10 == 9) { /* truncated */
      x = x * 1664525u + 1013904223u;
      len = (x >> 8) % n;
    }
    test_write_file(tpath("m.st"), b, len);
    torc_clear_error();
    torc_safetensors *st = torc_safetensors_open(tpath("m.st"));
    if (st == NULL) {
      refused++;
      torc_status s = torc_last_status();
      assert_true(s == TORC_ERR_IO || s == TORC_ERR_INVALID);
      assert_true(strlen(torc_last_error()) > 0);
      continue;
    }
    opened++;
    for (int i = 0; i < torc_safetensors_count(st); i++) {
      torc_tensor *t =
          torc_safetensors_get(st, torc_safetensors_name(st, i), TORC_CPU);
      torc_release(torc_scope_keep(t));
    }
    torc_safetensors_close(st);
  }
  /* Both outcomes occur (a changed digit in a value often still opens). */
  assert_true(refused > 0);
  assert_true(opened > 0);
  free(orig);
  free(b);
}

/* ---- save's argument errors ---- */

static void test_save_argument_errors(void **state) {
  (void)state;
  torc_tensor *a = torc_zeros(TORC_SHAPE(2), TORC_F32, TORC_CPU);
  torc_tensor *ts[] = {a, a};
  const char *p = tpath("x.st");
  const char *dup[] = {"w", "w"};
  torc_clear_error();
  assert_int_equal(torc_safetensors_save(p, dup, (const torc_tensor *const *)ts,
                                         2, NULL, NULL, 0),
                   TORC_ERR_INVALID);
  assert_contains(torc_last_error(),
                  "'w' is used twice (names[0] and names[1])");
  const char *meta[] = {"__metadata__"};
  assert_int_equal(torc_safetensors_save(p, meta,
                                         (const torc_tensor *const *)ts, 1,
                                         NULL, NULL, 0),
                   TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "reserves for metadata");
  const char *k[] = {"a", "a"}, *v[] = {"1", "2"};
  assert_int_equal(torc_safetensors_save(p, NULL, NULL, 0, k, v, 2),
                   TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "metadata key 'a' is used twice");
  assert_int_equal(torc_safetensors_save(p, NULL, NULL, -1, NULL, NULL, 0),
                   TORC_ERR_INVALID);
  /* A NULL tensor from a failed call keeps that call's error. */
  torc_tensor *bad = torc_reshape(a, TORC_SHAPE(3));
  assert_null(bad);
  torc_status first = torc_last_status();
  const char *one[] = {"x"};
  assert_int_equal(torc_safetensors_save(p, one,
                                         (const torc_tensor *const *)&bad, 1,
                                         NULL, NULL, 0),
                   TORC_ERR_NULL);
  assert_int_equal(torc_last_status(), first);
  assert_int_equal(access(p, F_OK), -1); /* nothing written */
  assert_int_equal(count_temps(), 0);
}

/* ---- atomic save ---- */

/* A file named `name` in tmpdir, last changed `age` seconds ago. */
static void write_aged(const char *name, time_t age) {
  test_write_file(tpath(name), "partial", 7);
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= age;
  t[1] = t[0];
  assert_int_equal(utimensat(AT_FDCWD, tpath(name), t, 0), 0);
}

static int exists(const char *name) {
  struct stat sb;
  return stat(tpath(name), &sb) == 0;
}

/* A save killed before its rename leaves ".NAME.tmp.PID.N": the next save
 * of NAME removes it when its process is gone and it is older than this
 * process, and leaves every other file. */
static void test_stale_temps_removed(void **state) {
  (void)state;
  long dead = 4000000; /* a PID no process has */
  while (dead > 2 && !(kill((pid_t)dead, 0) != 0 && errno == ESRCH))
    dead--;
  char stale[64], fresh[64], other[64], live[64], mine[64];
  snprintf(stale, sizeof stale, ".w.st.tmp.%ld.0", dead);
  snprintf(fresh, sizeof fresh, ".w.st.tmp.%ld.1", dead);
  snprintf(other, sizeof other, ".v.st.tmp.%ld.0", dead);
  snprintf(live, sizeof live, ".w.st.tmp.%ld.0", (long)getppid());
  snprintf(mine, sizeof mine, ".w.st.tmp.%ld.77", (long)getpid());
  write_aged(stale, 3600);
  write_aged(fresh, -5); /* changed after this process started */
  write_aged(other, 3600);
  write_aged(live, 3600);
  write_aged(mine, 3600); /* an earlier process with this PID */
  write_aged("w.st.tmp", 3600);
  write_aged(".w.st.tmp.x.0", 3600);
  torc_tensor *a = torc_zeros(TORC_SHAPE(2), TORC_F32, TORC_CPU);
  const char *names[] = {"a"};
  assert_ok(torc_safetensors_save(tpath("w.st"), names,
                                  (const torc_tensor *const *)&a, 1, NULL,
                                  NULL, 0));
  assert_false(exists(stale));
  assert_false(exists(mine));
  assert_true(exists(fresh));
  assert_true(exists(other));
  assert_true(exists(live));
  assert_true(exists("w.st.tmp"));
  assert_true(exists(".w.st.tmp.x.0"));
  assert_true(exists("w.st"));
}

static void test_atomic_save(void **state) {
  (void)state;
  char p[512];
  snprintf(p, sizeof p, "%s", tpath("model.st"));
  torc_tensor *a = torc_full(TORC_SHAPE(3), 1.0, TORC_F32, TORC_CPU);
  torc_tensor *b = torc_full(TORC_SHAPE(4), 2.0, TORC_F64, TORC_CPU);
  const char *name = "w";
  assert_ok(torc_safetensors_save(p, &name, (const torc_tensor *const *)&a, 1,
                                  NULL, NULL, 0));
  size_t n0;
  unsigned char *before = test_read_file(p, &n0);

  /* A crash between writing the temporary file and the rename. */
  torc__safetensors_fail_before_rename(1);
  torc_clear_error();
  assert_int_equal(torc_safetensors_save(p, &name,
                                         (const torc_tensor *const *)&b, 1,
                                         NULL, NULL, 0),
                   TORC_ERR_IO);
  assert_contains(torc_last_error(), "simulated failure before renaming");
  torc__safetensors_fail_before_rename(0);
  size_t n1;
  unsigned char *after = test_read_file(p, &n1);
  assert_int_equal(n0, n1);
  assert_memory_equal(before, after, n0);
  free(after);
  assert_int_equal(count_temps(), 0);
  torc_safetensors *st = torc_safetensors_open(p);
  assert_torc(st);
  torc_tensor *g = torc_safetensors_get(st, "w", TORC_CPU);
  assert_same_tensor(g, a);
  torc_safetensors_close(st);

  /* A rename that really fails: the destination is a folder. */
  const char *d = tpath("adir");
  assert_int_equal(mkdir(d, 0700), 0);
  torc_clear_error();
  assert_int_equal(torc_safetensors_save(d, &name,
                                         (const torc_tensor *const *)&b, 1,
                                         NULL, NULL, 0),
                   TORC_ERR_IO);
  assert_contains(torc_last_error(), "cannot rename");
  assert_contains(torc_last_error(), "adir");
  struct stat sb;
  assert_int_equal(stat(d, &sb), 0);
  assert_true(S_ISDIR(sb.st_mode));
  assert_int_equal(count_temps(), 0);

  /* A folder that does not exist: no temporary file can be made. */
  assert_int_equal(torc_safetensors_save(tpath("no/such/x.st"), &name,
                                         (const torc_tensor *const *)&b, 1,
                                         NULL, NULL, 0),
                   TORC_ERR_IO);
  assert_contains(torc_last_error(), "cannot create the temporary file");

  /* And a successful save replaces the old file. */
  assert_ok(torc_safetensors_save(p, &name, (const torc_tensor *const *)&b, 1,
                                  NULL, NULL, 0));
  st = torc_safetensors_open(p);
  assert_torc(st);
  g = torc_safetensors_get(st, "w", TORC_CPU);
  assert_same_tensor(g, b);
  torc_safetensors_close(st);
  assert_int_equal(count_temps(), 0);
  free(before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
      T(test_round_trip_every_dtype),
      T(test_round_trip_empty_file),
      T(test_no_metadata_section),
      T(test_reference_layout),
      T(test_torch_written_file),
      T(test_bad_headers),
      T(test_bad_framing),
      T(test_bad_bool_bytes),
      T(test_lookup_errors),
      T(test_mutated_files),
      T(test_save_argument_errors),
      T(test_atomic_save),
      T(test_stale_temps_removed),
#undef T
  };
  return cmocka_run_group_tests_name("safetensors", tests, NULL,
                                     test_teardown_all);
}
