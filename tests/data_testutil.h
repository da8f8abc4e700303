/* tests/data_testutil.h — helpers shared by the data plugin's tests
 * (test_sources, test_data_hostile): a temporary folder and paths in it,
 * the fixtures, opening a source, and IDX and .npy writers. Included after
 * testutil.h, once per program. */
#ifndef TORC_DATA_TESTUTIL_H
#define TORC_DATA_TESTUTIL_H

#include <ftw.h>
#include <sys/stat.h>

#include <zlib.h>

#include "testutil.h"

#include "torc/data.h"

/* ---- the temporary folder and paths in it ---- */

static char tmp_root[512];

/* "$tmp_root/name" in one of eight rotating buffers. */
static inline const char *P(const char *name) {
  static char bufs[8][1024];
  static int next;
  char *b = bufs[next++ % 8];
  snprintf(b, sizeof bufs[0], "%s/%s", tmp_root, name);
  return b;
}

/* test_write_file of a string (without its NUL). */
static inline void write_text(const char *path, const char *text) {
  test_write_file(path, text, strlen(text));
}

static inline void make_dir(const char *path) {
  assert_int_equal(mkdir(path, 0755), 0);
}

/* nftw's callback removing the tree (made readable first: a test may have
 * taken the permissions away). */
static inline int rm_entry(const char *path, const struct stat *sb, int flag,
                           struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  chmod(path, 0700);
  return remove(path);
}

/* ---- fixtures ---- */

/* Group teardown: removes tmp_root and all in it. */
static inline int data_tmp_teardown(void **state) {
  (void)state;
  if (tmp_root[0])
    nftw(tmp_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}

/* Per-test setup: loads the data plugin, then test_live_setup; the
 * teardown checks for leaked tensors and shuts torc down. */
static inline int data_setup(void **state) {
  if (torc_plugin_load("data", NULL) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return test_live_setup(state);
}

static inline int data_teardown(void **state) {
  int rc = test_live_teardown(state);
  torc_shutdown();
  return rc;
}

/* ---- opening a source ---- */

/* Opens source with n key/value pairs given as k1, v1, k2, v2, ... */
static inline torc_dataset *open_ds(const char *source, int n, ...) {
  const char *keys[8], *values[8];
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n && i < 8; i++) {
    keys[i] = va_arg(ap, const char *);
    values[i] = va_arg(ap, const char *);
  }
  va_end(ap);
  torc_clear_error();
  return torc_dataset_open(source, keys, values, n);
}

/* Opens idx with only its two keys. */
static inline torc_dataset *open_idx(const char *images, const char *labels) {
  return open_ds("idx", 2, "images", images, "labels", labels);
}

/* Asserts an open failed (ds is NULL) with status st; the callers then
 * check the message's key words with assert_contains. */
#define assert_open_fails(ds, st)                                            \
  do {                                                                       \
    torc_dataset *d_ = (ds);                                                 \
    if (d_ != NULL) {                                                        \
      print_error("open unexpectedly succeeded: %s\n",                      \
                  torc_dataset_describe(d_));                                \
      torc_dataset_close(d_);                                                \
      fail();                                                                \
    }                                                                        \
    assert_int_equal(torc_last_status(), (st));                              \
  } while (0)

/* ---- idx ---- */

/* An IDX header (magic, then the dims, big-endian) into head; its length. */
static inline size_t idx_head(uint8_t *head, uint32_t magic,
                              const uint32_t *dims, int ndim) {
  size_t hl = 0;
  for (int s = 24; s >= 0; s -= 8)
    head[hl++] = (uint8_t)(magic >> s);
  for (int d = 0; d < ndim; d++)
    for (int s = 24; s >= 0; s -= 8)
      head[hl++] = (uint8_t)(dims[d] >> s);
  return hl;
}

/* Writes an IDX file: magic, dims, then data (n bytes); gzip or raw. */
static inline void write_idx(const char *path, uint32_t magic,
                             const uint32_t *dims, int ndim,
                             const uint8_t *data, size_t n, int gzip) {
  uint8_t head[16];
  size_t hl = idx_head(head, magic, dims, ndim);
  if (gzip) {
    gzFile gz = gzopen(path, "wb9");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, head, (unsigned)hl), (int)hl);
    if (n)
      assert_int_equal(gzwrite(gz, data, (unsigned)n), (int)n);
    assert_int_equal(gzclose(gz), Z_OK);
  } else {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(head, 1, hl, f), hl);
    if (n)
      assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
  }
}

/* Three 2x4 images (pixel (i, y, x) = 40 i + 4 y + x + 1) and labels
 * 2, 0, 7. */
static uint8_t idx_pixels[3 * 2 * 4];
static const uint8_t idx_labels[3] = {2, 0, 7};

static inline void write_idx_pair(const char *images, const char *labels,
                                  int gzip) {
  for (int i = 0; i < 24; i++)
    idx_pixels[i] = (uint8_t)(40 * (i / 8) + i % 8 + 1);
  const uint32_t idims[3] = {3, 2, 4}, ldims[1] = {3};
  write_idx(images, 0x803, idims, 3, idx_pixels, 24, gzip);
  write_idx(labels, 0x801, ldims, 1, idx_labels, 3, gzip);
}

/* ---- npy ---- */

/* Writes a .npy file of format `version` with the header dict `dict`
 * (padded as numpy pads it) followed by n bytes of data. */
static inline void write_npy_raw(const char *path, int version,
                                 const char *dict, const void *data,
                                 size_t n) {
  size_t pre = version == 1 ? 10 : 12;
  size_t hl = strlen(dict) + 1;
  size_t total = (pre + hl + 63) / 64 * 64;
  size_t hlen = total - pre;
  unsigned char *b = malloc(total + n);
  assert_non_null(b);
  memcpy(b, "\x93NUMPY", 6);
  b[6] = (unsigned char)version;
  b[7] = 0;
  if (version == 1) {
    b[8] = (unsigned char)hlen;
    b[9] = (unsigned char)(hlen >> 8);
  } else {
    for (int i = 0; i < 4; i++)
      b[8 + i] = (unsigned char)(hlen >> (8 * i));
  }
  memset(b + pre, ' ', hlen);
  memcpy(b + pre, dict, strlen(dict));
  b[total - 1] = '\n';
  if (n)
    memcpy(b + total, data, n);
  test_write_file(path, b, total + n);
  free(b);
}

/* A .npy file whose dict has the dtype `descr` and the shape `shape` (a
 * Python tuple, as text), C order. */
static inline void write_npy(const char *path, int version, const char *descr,
                             const char *shape, const void *data, size_t n) {
  char dict[256];
  snprintf(dict, sizeof dict,
           "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
           shape);
  write_npy_raw(path, version, dict, data, n);
}

#endif /* TORC_DATA_TESTUTIL_H */
