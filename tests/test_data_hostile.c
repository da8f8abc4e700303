/* tests/test_data_hostile.c — the data plugin (plugins/data) against
 * hostile files: sizes that wrap, headers that claim more than the file
 * holds, devices and FIFOs as paths, size limits (a csv text column's vocab
 * file and max_len too), a damaged idx cache, and
 * JPEG/PNG decompression bombs and corrupt scans. Every file is made at run
 * time (libjpeg, libpng, zlib, raw bytes) in a temporary folder; each must
 * end in one error naming the file, the values and the key that fixes it,
 * without allocating what the file claims.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include "testutil.h"
#include "data_testutil.h"

#include "torc/data.h"
#include "torc/philox.h"

/* ---- fixtures (the others, and the file writers, are in
 * data_testutil.h) ---- */

static int group_setup(void **state) {
  (void)state;
  return test_make_tmpdir(tmp_root, sizeof tmp_root, "torc-hostile");
}

/* A FIFO at path (made once). */
static const char *make_fifo(const char *name) {
  const char *p = P(name);
  if (access(p, F_OK) != 0)
    assert_int_equal(mkfifo(p, 0600), 0);
  return p;
}

/* ======================================================================
 * npy
 * ==================================================================== */

/* Two 128-byte files whose shapes multiply to 2^64: that must not pass as
 * empty data (get() would then copy 2^32 bytes from a 128-byte buffer). */
static void test_npy_wrapping_shape(void **state) {
  (void)state;
  write_npy(P("wrap-x.npy"), 1, "|u1", "(4294967296, 4294967296)", NULL, 0);
  write_npy(P("wrap-y.npy"), 1, "<f4", "(4294967296, 4294967296)", NULL, 0);
  torc_dataset *ds = open_ds("npy", 2, "inputs", P("wrap-x.npy"), "targets",
                             P("wrap-y.npy"));
  if (ds != NULL) { /* the old code: show the out-of-bounds copy */
    torc_tensor *in = NULL, *tg = NULL;
    print_error("open succeeded (%s); get(0) reads past the buffer\n",
                torc_dataset_describe(ds));
    torc_dataset_close(ds);
    (void)in;
    (void)tg;
    fail();
  }
  assert_int_equal(torc_last_status(), TORC_ERR_IO);
  assert_contains(torc_last_error(), "wrap-x.npy");
  assert_contains(torc_last_error(), "[4294967296, 4294967296]");
  assert_contains(torc_last_error(), "more bytes than can be counted");
  /* A zero dimension does not hide an overflow of the others. */
  write_npy(P("wrap0-x.npy"), 1, "<f4", "(0, 4294967296, 4294967296)", NULL, 0);
  const int64_t y[1] = {0};
  write_npy(P("wrap0-y.npy"), 1, "<i8", "(0,)", y, 0);
  assert_open_fails(open_ds("npy", 2, "inputs", P("wrap0-x.npy"), "targets",
                            P("wrap0-y.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "more bytes than can be counted");
  /* 2^40 rows of nothing: refused, not 2^40 empty samples. */
  write_npy(P("empty-x.npy"), 1, "<f4", "(1099511627776, 0)", NULL, 0);
  write_npy(P("empty-y.npy"), 1, "<f4", "(1099511627776, 0)", NULL, 0);
  assert_open_fails(open_ds("npy", 2, "inputs", P("empty-x.npy"), "targets",
                            P("empty-y.npy")),
                    TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "0 elements");
}

/* ======================================================================
 * Paths that are not regular files, and size limits (every source)
 * ==================================================================== */

static void good_npy_pair(void) {
  const float x[4] = {1, 2, 3, 4};
  const int64_t y[2] = {0, 1};
  write_npy(P("ok-x.npy"), 1, "<f4", "(2, 2)", x, sizeof x);
  write_npy(P("ok-y.npy"), 1, "<i8", "(2,)", y, sizeof y);
}

static void test_not_regular_files(void **state) {
  (void)state;
  good_npy_pair();
  /* /dev/zero would be read until memory runs out. */
  assert_open_fails(open_ds("csv", 1, "path", "/dev/zero"), TORC_ERR_IO);
  assert_contains(torc_last_error(),
                  "'/dev/zero' is a character device, not a regular file");
  assert_contains(torc_last_error(), "key 'path'");
  assert_open_fails(open_ds("npy", 2, "inputs", "/dev/zero", "targets",
                            P("ok-y.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(),
                  "'/dev/zero' is a character device, not a regular file");
  assert_open_fails(open_idx("/dev/zero", "/dev/zero"), TORC_ERR_IO);
  assert_contains(torc_last_error(), "character device");
  /* A FIFO nobody writes to would block the open for ever. */
  const char *fifo = make_fifo("fifo");
  assert_open_fails(open_ds("csv", 1, "path", fifo), TORC_ERR_IO);
  assert_contains(torc_last_error(), "is a FIFO (named pipe), not a regular");
  assert_open_fails(open_ds("npy", 2, "inputs", P("ok-x.npy"), "targets",
                            fifo),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "targets file");
  assert_contains(torc_last_error(), "FIFO");
  assert_open_fails(open_idx(fifo, fifo), TORC_ERR_IO);
  assert_contains(torc_last_error(), "FIFO");
}

static void test_size_limits(void **state) {
  (void)state;
  /* A 2000-byte CSV under max_bytes = 1K. */
  char text[2001];
  memset(text, '1', sizeof text);
  for (int i = 0; i < 2000; i += 4)
    memcpy(text + i, "1,0\n", 4);
  text[2000] = '\0';
  test_write_file(P("big.csv"), text, 2000);
  assert_open_fails(open_ds("csv", 3, "path", P("big.csv"), "header", "no",
                            "max_bytes", "1K"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "is 2000 bytes, over the limit of 1024 "
                                     "bytes (key 'max_bytes')");
  assert_contains(torc_last_error(), "raise max_bytes");
  /* The same file under the default opens. */
  torc_dataset *ds = open_ds("csv", 2, "path", P("big.csv"), "header", "no");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 500);
  torc_dataset_close(ds);
  /* npy and idx take the key too. */
  good_npy_pair();
  assert_open_fails(open_ds("npy", 3, "inputs", P("ok-x.npy"), "targets",
                            P("ok-y.npy"), "max_bytes", "64"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "over the limit of 64 bytes");
  /* A bad value. */
  assert_open_fails(open_ds("csv", 2, "path", P("big.csv"), "max_bytes",
                            "lots"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "key 'max_bytes' = 'lots'");
  assert_open_fails(open_ds("csv", 2, "path", P("big.csv"), "max_bytes",
                            "0"),
                    TORC_ERR_INVALID);
  /* The keys are declared, with their defaults, for `torc sources`. */
  static const char *const names[] = {"csv", "npy", "idx", "image_folder"};
  for (int i = 0; i < 4; i++) {
    const torc_data_source_type *t = torc_data_source_find(names[i]);
    assert_non_null(t);
    int found = 0;
    for (const torc_data_key *k = t->keys; k->name; k++)
      if (strcmp(k->name, "max_bytes") == 0 && k->default_value &&
          k->help)
        found = 1;
    assert_true(found);
  }
}

/* The csv text column: the vocab file is opened as every data file (a
 * device or FIFO refused, its size checked against max_bytes before it is
 * read); max_len is bounded, and a large one costs one sample, not rows x
 * max_len (the padding is made when a sample is read). */
static void test_csv_text_limits(void **state) {
  (void)state;
  write_text(P("t.csv"), "text,label\nab,x\nba,y\n");
  assert_open_fails(open_ds("csv", 4, "path", P("t.csv"), "text_column",
                            "text", "max_len", "4", "vocab", "/dev/zero"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(),
                  "'/dev/zero' is a character device, not a regular file");
  assert_contains(torc_last_error(), "key 'vocab'");
  const char *fifo = make_fifo("vfifo");
  assert_open_fails(open_ds("csv", 4, "path", P("t.csv"), "text_column",
                            "text", "max_len", "4", "vocab", fifo),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "FIFO");
  /* A 2000-byte vocabulary under max_bytes = 1K (the CSV is smaller). */
  char big[2001];
  memcpy(big, "<pad>\n", 6);
  for (int i = 6; i < 2000; i++)
    big[i] = i % 2 ? '\n' : 'a';
  test_write_file(P("big.vocab"), big, 2000);
  assert_open_fails(open_ds("csv", 5, "path", P("t.csv"), "text_column",
                            "text", "max_len", "4", "vocab", P("big.vocab"),
                            "max_bytes", "1K"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "is 2000 bytes, over the limit of 1024 "
                                     "bytes (key 'max_bytes')");
  /* max_len: 1 to 2^20; at the limit, two rows cost their four tokens. */
  assert_open_fails(open_ds("csv", 3, "path", P("t.csv"), "text_column",
                            "text", "max_len", "1048577"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "key 'max_len' = '1048577' is not an "
                                     "integer in [1, 1048576]");
  assert_open_fails(open_ds("csv", 3, "path", P("t.csv"), "text_column",
                            "text", "max_len", "-1"),
                    TORC_ERR_INVALID);
  torc_dataset *ds = open_ds("csv", 3, "path", P("t.csv"), "text_column",
                             "text", "max_len", "1048576");
  assert_torc(ds);
  torc_tensor *in, *tg;
  assert_ok(torc_dataset_get(ds, 1, &in, &tg));
  assert_int_equal(torc_shape(in)[0], 1048576);
  const int64_t *v = torc_data(in);
  assert_int_equal(v[0], 2); /* b: <pad> a b */
  assert_int_equal(v[1], 1);
  assert_int_equal(v[2], 0);
  assert_int_equal(v[1048575], 0);
  torc_release(in);
  torc_release(tg);
  torc_dataset_close(ds);
}

/* ======================================================================
 * idx
 * ==================================================================== */

/* Each of write_idx_pair's three samples. */
static void check_idx_values(torc_dataset *ds) {
  assert_int_equal(torc_dataset_length(ds), 3);
  for (int64_t i = 0; i < 3; i++) {
    torc_tensor *in, *tg;
    assert_ok(torc_dataset_get(ds, i, &in, &tg));
    assert_memory_equal(torc_data(in), idx_pixels + 8 * i, 8);
    assert_int_equal(*(const int64_t *)torc_data(tg), idx_labels[i]);
    torc_release(in);
    torc_release(tg);
  }
}

/* Headers claiming 2^40 elements (1 TiB) over a few bytes of data: raw,
 * the file's length gives it away before anything is allocated; gzip, the
 * limit refuses it, and with the limit raised the buffer grows only with
 * the bytes that really arrive. */
static void test_idx_huge_headers(void **state) {
  (void)state;
  write_idx_pair(P("h-images"), P("h-labels"), 0);
  const uint32_t tib[3] = {1u << 20, 1u << 10, 1u << 10};
  uint8_t some[100] = {0};
  write_idx(P("tib-raw"), 0x803, tib, 3, some, sizeof some, 0);
  write_idx(P("tib.gz"), 0x803, tib, 3, some, sizeof some, 1);
  assert_open_fails(open_idx(P("tib-raw"), P("h-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "is truncated");
  assert_contains(torc_last_error(), "needs 1099511627776 bytes but only 100");
  assert_open_fails(open_idx(P("tib.gz"), P("h-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "declares 1099511627776 bytes of data");
  assert_contains(torc_last_error(), "key 'max_bytes'");
  /* Even with a limit that allows it, no TiB buffer is made. */
  assert_open_fails(open_ds("idx", 3, "images", P("tib.gz"), "labels",
                            P("h-labels"), "max_bytes", "2T"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "needs 1099511627776 bytes but only 100");
  /* Dimensions whose product overflows 64 bits. */
  const uint32_t wrap[3] = {0xffffffffu, 0xffffffffu, 0xffffffffu};
  write_idx(P("wrap-raw"), 0x803, wrap, 3, some, 8, 0);
  assert_open_fails(open_idx(P("wrap-raw"), P("h-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "more elements than can be counted");
}

/* A gzip stream must end where the header says and nothing may follow. */
static void test_idx_gzip_trailing(void **state) {
  (void)state;
  write_idx_pair(P("g-images.gz"), P("g-labels.gz"), 1);
  size_t n;
  unsigned char *b = test_read_file(P("g-images.gz"), &n);
  memcpy(b + n, "GARBAGE!", 8);
  test_write_file(P("g-garbage.gz"), b, n + 8);
  b[n - 6] ^= 0x40; /* the CRC-32 in the trailer */
  test_write_file(P("g-crc.gz"), b, n);
  /* Two gzip members, as `cat a.gz b.gz` makes: accepted, as gzip does. */
  const uint32_t idims[3] = {3, 2, 4};
  uint8_t head[16];
  size_t hl = idx_head(head, 0x803, idims, 3);
  gzFile gz = gzopen(P("g-two.gz"), "wb");
  assert_non_null(gz);
  assert_int_equal(gzwrite(gz, head, (unsigned)hl), (int)hl);
  assert_int_equal(gzwrite(gz, idx_pixels, 10), 10);
  assert_int_equal(gzclose(gz), Z_OK);
  gz = gzopen(P("g-two.gz"), "ab");
  assert_non_null(gz);
  assert_int_equal(gzwrite(gz, idx_pixels + 10, 14), 14);
  assert_int_equal(gzclose(gz), Z_OK);
  free(b);
  setenv("TORC_DATA_CACHE", "off", 1);
  assert_open_fails(open_idx(P("g-garbage.gz"), P("g-labels.gz")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "8 bytes of garbage after its gzip");
  assert_open_fails(open_idx(P("g-crc.gz"), P("g-labels.gz")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "is corrupt gzip data (incorrect data "
                                     "check");
  torc_dataset *ds = open_idx(P("g-two.gz"), P("g-labels.gz"));
  assert_torc(ds);
  check_idx_values(ds);
  torc_dataset_close(ds);
  /* A small gzip bomb: a header of 24 bytes over 64 MiB of zeros stops
   * counting the excess at 1 MiB. */
  gz = gzopen(P("g-bomb.gz"), "wb9");
  assert_non_null(gz);
  assert_int_equal(gzwrite(gz, head, (unsigned)hl), (int)hl);
  uint8_t *zeros = calloc(1, 1 << 20);
  assert_non_null(zeros);
  for (int i = 0; i < 64; i++)
    assert_int_equal(gzwrite(gz, zeros, 1 << 20), 1 << 20);
  free(zeros);
  assert_int_equal(gzclose(gz), Z_OK);
  assert_open_fails(open_idx(P("g-bomb.gz"), P("g-labels.gz")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "1048576+ bytes after the 24");
  unsetenv("TORC_DATA_CACHE");
}

/* The one cache file of `part` in dir, into out. */
static int cache_file(const char *dir, const char *part, char *out,
                      size_t size) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    if (strstr(e->d_name, part) && !strstr(e->d_name, ".tmp")) {
      snprintf(out, size, "%s/%s", dir, e->d_name);
      n++;
    }
  if (d)
    closedir(d);
  return n;
}

/* The decoded-data cache is a file too: a copy whose data was changed (same
 * size, same header) or a FIFO in its place is not trusted. */
static void test_idx_cache_validated(void **state) {
  (void)state;
  char cache[1024], cfile[1200];
  snprintf(cache, sizeof cache, "%s", P("vcache"));
  setenv("TORC_DATA_CACHE", cache, 1);
  write_idx_pair(P("v-images.gz"), P("v-labels.gz"), 1);
  torc_dataset *ds = open_idx(P("v-images.gz"), P("v-labels.gz"));
  assert_torc(ds);
  torc_dataset_close(ds);
  assert_int_equal(cache_file(cache, "v-images.gz", cfile, sizeof cfile), 1);
  /* Flip one pixel of the cached images. */
  size_t n;
  unsigned char *b = test_read_file(cfile, &n);
  b[16 + 5] ^= 0xff;
  test_write_file(cfile, b, n);
  free(b);
  ds = open_idx(P("v-images.gz"), P("v-labels.gz"));
  assert_torc(ds);
  check_idx_values(ds); /* the true pixels, decoded again */
  torc_dataset_close(ds);
  b = test_read_file(cfile, &n); /* and the copy rewritten */
  assert_int_equal(b[16 + 5], idx_pixels[5]);
  free(b);
  /* A FIFO where the copy was. */
  assert_int_equal(remove(cfile), 0);
  assert_int_equal(mkfifo(cfile, 0600), 0);
  ds = open_idx(P("v-images.gz"), P("v-labels.gz"));
  assert_torc(ds);
  check_idx_values(ds);
  torc_dataset_close(ds);
  struct stat sb;
  assert_int_equal(stat(cfile, &sb), 0);
  assert_true(S_ISREG(sb.st_mode)); /* replaced by a good copy */
  unsetenv("TORC_DATA_CACHE");
}

/* ======================================================================
 * Images
 * ==================================================================== */

/* A JPEG of w x h pixels of `comps` components (3: RGB, else JCS_UNKNOWN)
 * into a malloc'd buffer: baseline, simple progressive (prog 1), or with
 * the scan script `scans` of n_scans. */
static unsigned char *make_jpeg(int w, int h, int comps, int prog,
                                const jpeg_scan_info *scans, int n_scans,
                                size_t *size) {
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char *out = NULL;
  unsigned long out_size = 0;
  jpeg_mem_dest(&c, &out, &out_size);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = comps;
  c.in_color_space = comps == 3 ? JCS_RGB : JCS_UNKNOWN;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  if (prog)
    jpeg_simple_progression(&c);
  if (scans) {
    c.scan_info = scans;
    c.num_scans = n_scans;
  }
  jpeg_start_compress(&c, TRUE);
  unsigned char *row = malloc((size_t)w * comps);
  assert_non_null(row);
  while (c.next_scanline < c.image_height) {
    for (int i = 0; i < w * comps; i++)
      row[i] = (uint8_t)torc_philox_randint(
          5, (uint64_t)c.next_scanline * 4096 + (uint64_t)i, 0, 256);
    JSAMPROW r = row;
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  free(row);
  unsigned char *copy = malloc(out_size + 64);
  assert_non_null(copy);
  memcpy(copy, out, out_size);
  free(out);
  *size = out_size;
  return copy;
}

/* Offset of the first SOFn marker (baseline 0xC0 or progressive 0xC2). */
static size_t jpeg_sof(const unsigned char *b, size_t n) {
  for (size_t i = 2; i + 9 < n; i++)
    if (b[i] == 0xff && (b[i + 1] == 0xc0 || b[i + 1] == 0xc2))
      return i;
  fail_msg("no SOF marker");
  return 0;
}

/* Rewrites the SOF's height and width. */
static void jpeg_set_size(unsigned char *b, size_t n, int w, int h) {
  size_t at = jpeg_sof(b, n);
  b[at + 5] = (unsigned char)(h >> 8);
  b[at + 6] = (unsigned char)h;
  b[at + 7] = (unsigned char)(w >> 8);
  b[at + 8] = (unsigned char)w;
}

/* ROOT/a/<name> holding the n bytes, ROOT/b/ok.jpg a good 8x8 image; the
 * root's path. */
static const char *image_root(const char *root, const char *name,
                              const void *data, size_t n) {
  char p[1024];
  const char *r = P(root);
  make_dir(r);
  snprintf(p, sizeof p, "%s/a", r);
  make_dir(p);
  snprintf(p, sizeof p, "%s/b", r);
  make_dir(p);
  snprintf(p, sizeof p, "%s/a/%s", r, name);
  test_write_file(p, data, n);
  size_t gn;
  unsigned char *good = make_jpeg(8, 8, 3, 0, NULL, 0, &gn);
  snprintf(p, sizeof p, "%s/b/ok.jpg", r);
  test_write_file(p, good, gn);
  free(good);
  return r;
}

/* get(0) fails with TORC_ERR_IO and the message holds `want`. */
static void assert_get_fails(torc_dataset *ds, const char *want) {
  torc_tensor *in = NULL, *tg = NULL;
  int st = torc_dataset_get(ds, 0, &in, &tg);
  if (st == TORC_OK) {
    print_error("get(0) unexpectedly decoded a [%lld, %lld, %lld] image\n",
                (long long)torc_shape(in)[0], (long long)torc_shape(in)[1],
                (long long)torc_shape(in)[2]);
    torc_release(in);
    torc_release(tg);
    fail();
  }
  assert_int_equal(st, TORC_ERR_IO);
  assert_null(in);
  assert_contains(torc_last_error(), "cannot decode image");
  assert_contains(torc_last_error(), want);
}

/* Opens image_folder on root (which must succeed) and asserts get(0)
 * fails as assert_get_fails says; `also`, when not NULL, is a second part
 * of the message. */
static void assert_root_get_fails(const char *root, const char *want,
                                  const char *also) {
  torc_dataset *ds = open_ds("image_folder", 1, "root", root);
  assert_torc(ds);
  assert_get_fails(ds, want);
  if (also)
    assert_contains(torc_last_error(), also);
  torc_dataset_close(ds);
}

/* An 8x8 JPEG whose SOF claims 26000x26000 (676 Mpixel: 2 GB decoded, and
 * libjpeg's buffers on top): refused from the header, at open. */
static void test_jpeg_huge_header(void **state) {
  (void)state;
  size_t n;
  unsigned char *b = make_jpeg(8, 8, 3, 0, NULL, 0, &n);
  jpeg_set_size(b, n, 26000, 26000);
  const char *root = image_root("jbig", "huge.jpg", b, n);
  free(b);
  assert_open_fails(open_ds("image_folder", 1, "root", root), TORC_ERR_IO);
  assert_contains(torc_last_error(), "too large image");
  assert_contains(torc_last_error(), "huge.jpg");
  assert_contains(torc_last_error(), "26000x26000 = 676000000 pixels");
  assert_contains(torc_last_error(), "limit of 67108864 (key 'max_pixels')");
  /* on_error = skip leaves it out. */
  torc_dataset *ds = open_ds("image_folder", 2, "root", root, "on_error",
                             "skip");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 1);
  torc_dataset_close(ds);
  /* A smaller max_pixels refuses the good 8x8 one too. */
  assert_open_fails(open_ds("image_folder", 3, "root", root, "on_error",
                            "skip", "max_pixels", "63"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "every image failed");
}

/* A progressive JPEG of 10 components whose SOF claims 1000x1000: within
 * max_pixels = 1M, but its coefficient buffers (20 MB) exceed the
 * decoder's memory cap for that limit (16 MiB): refused at open. */
static void test_jpeg_progressive_buffer(void **state) {
  (void)state;
  size_t n;
  unsigned char *b = make_jpeg(8, 8, 10, 1, NULL, 0, &n);
  jpeg_set_size(b, n, 1000, 1000);
  const char *root = image_root("jprog", "tenc.jpg", b, n);
  free(b);
  assert_open_fails(open_ds("image_folder", 2, "root", root, "max_pixels",
                            "1M"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "tenc.jpg");
  assert_contains(torc_last_error(), "progressive 1000x1000 image of 10 "
                                     "components");
  assert_contains(torc_last_error(), "coefficient buffers");
  assert_contains(torc_last_error(), "max_pixels");
}

/* A valid progressive JPEG of 1152 scans (successive approximation of
 * every coefficient of each component): refused past 1000 scans. A normal
 * progressive JPEG decodes. */
static void test_jpeg_many_scans(void **state) {
  (void)state;
  enum { AL = 5, N = 3 * (AL + 1) * 64 };
  static jpeg_scan_info scans[N];
  int k = 0;
  for (int c = 0; c < 3; c++)
    for (int coef = 0; coef < 64; coef++)
      for (int al = AL; al >= 0; al--) {
        jpeg_scan_info *s = &scans[k++];
        s->comps_in_scan = 1;
        s->component_index[0] = c;
        s->Ss = s->Se = coef;
        s->Ah = al == AL ? 0 : al + 1;
        s->Al = al;
      }
  assert_int_equal(k, N);
  size_t n;
  unsigned char *b = make_jpeg(8, 8, 3, 0, scans, N, &n);
  const char *root = image_root("jscans", "scans.jpg", b, n);
  free(b);
  assert_root_get_fails(root, "more than 1000 scans", NULL);
  /* jpeg_simple_progression's 10 scans are fine. */
  char p[1024];
  b = make_jpeg(16, 16, 3, 1, NULL, 0, &n);
  snprintf(p, sizeof p, "%s/a/scans.jpg", root);
  test_write_file(p, b, n);
  free(b);
  torc_dataset *ds = open_ds("image_folder", 1, "root", root);
  assert_torc(ds);
  torc_tensor *in, *tg;
  assert_ok(torc_dataset_get(ds, 0, &in, &tg));
  assert_int_equal(torc_shape(in)[1], 16);
  torc_release(in);
  torc_release(tg);
  torc_dataset_close(ds);
}

/* Offset of marker FF <code>, from `from`. */
static size_t jpeg_marker(const unsigned char *b, size_t n, size_t from,
                          unsigned char code) {
  for (size_t i = from; i + 1 < n; i++)
    if (b[i] == 0xff && b[i + 1] == code)
      return i;
  fail_msg("no marker FF %02X", code);
  return 0;
}

/* Scans cut short but ended with EOI, and garbage before EOI: libjpeg only
 * warns and fills in gray; here each is an error naming libjpeg's
 * message. */
static void test_jpeg_corrupt_scans(void **state) {
  (void)state;
  size_t n;
  unsigned char *b = make_jpeg(64, 64, 3, 0, NULL, 0, &n);
  size_t sos = jpeg_marker(b, n, 2, 0xda);
  size_t seg = (size_t)b[sos + 2] << 8 | b[sos + 3];
  size_t cut = sos + 2 + seg + 40;
  assert_true(cut + 2 < n);
  unsigned char *c = malloc(cut + 2);
  assert_non_null(c);
  memcpy(c, b, cut);
  c[cut] = 0xff;
  c[cut + 1] = 0xd9;
  const char *root = image_root("jcut", "cut.jpg", c, cut + 2);
  free(c);
  /* The header is fine: the open succeeds, get(0) fails. */
  assert_root_get_fails(root, "cut.jpg", "JPEG: Corrupt JPEG data");
  /* 100 bytes of garbage before the EOI (libjpeg reads a few of them
   * ahead as entropy data and counts the rest). */
  unsigned char *g = malloc(n + 100);
  assert_non_null(g);
  memcpy(g, b, n - 2);
  memset(g + n - 2, 0x01, 100);
  g[n + 98] = 0xff;
  g[n + 99] = 0xd9;
  char p[1024];
  snprintf(p, sizeof p, "%s/a/cut.jpg", root);
  test_write_file(p, g, n + 100);
  free(g);
  assert_root_get_fails(root, "extraneous bytes before marker 0xd9", NULL);
  /* No EOI at all: truncated. */
  test_write_file(p, b, cut);
  assert_root_get_fails(root, "truncated", NULL);
  free(b);
}

/* ---- PNG ---- */

/* A gray PNG of w x h into a malloc'd buffer (written to a file and read
 * back). */
static unsigned char *make_png(int w, int h, size_t *size) {
  const char *path = P("tmp.png");
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  assert_non_null(info);
  if (setjmp(png_jmpbuf(png)))
    fail_msg("libpng failed writing %s", path);
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8,
               PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  uint8_t *row = malloc((size_t)w);
  assert_non_null(row);
  for (int y = 0; y < h; y++) {
    for (int x = 0; x < w; x++)
      row[x] = (uint8_t)torc_philox_randint(7, (uint64_t)(y * w + x), 0, 256);
    png_write_row(png, row);
  }
  free(row);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  fclose(f);
  unsigned char *b = test_read_file(path, size);
  remove(path);
  return b;
}

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

static void put_be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* Appends a chunk (with a correct CRC) to out at *len. */
static void png_chunk(unsigned char *out, size_t *len, const char *type,
                      const unsigned char *data, size_t n) {
  put_be32(out + *len, (uint32_t)n);
  memcpy(out + *len + 4, type, 4);
  if (n)
    memcpy(out + *len + 8, data, n);
  uLong crc = crc32(0, out + *len + 4, (uInt)(n + 4));
  put_be32(out + *len + 8 + n, (uint32_t)crc);
  *len += 12 + n;
}

/* An 8x8 PNG whose IHDR (CRC fixed) claims 26000x26000 (676 Mpixel). */
static void test_png_huge_header(void **state) {
  (void)state;
  size_t n;
  unsigned char *b = make_png(8, 8, &n);
  put_be32(b + 16, 26000);
  put_be32(b + 20, 26000);
  put_be32(b + 29, (uint32_t)crc32(0, b + 12, 17));
  const char *root = image_root("pbig", "huge.png", b, n);
  free(b);
  assert_open_fails(open_ds("image_folder", 1, "root", root), TORC_ERR_IO);
  assert_contains(torc_last_error(), "too large image");
  assert_contains(torc_last_error(), "huge.png");
  assert_contains(torc_last_error(), "676000000 pixels");
  assert_contains(torc_last_error(), "max_pixels");
}

/* IDAT data cut short (valid CRCs, then IEND), and extra data after the
 * zlib stream: errors at get(), not a partial image. */
static void test_png_bad_idat(void **state) {
  (void)state;
  size_t n;
  unsigned char *b = make_png(32, 32, &n);
  /* signature + IHDR, then the chunks */
  size_t at = 8 + 25;
  assert_int_equal(memcmp(b + at + 4, "IDAT", 4), 0);
  size_t idat = be32(b + at);
  unsigned char *out = malloc(n + 64);
  assert_non_null(out);
  size_t len = at;
  memcpy(out, b, at);
  png_chunk(out, &len, "IDAT", b + at + 8, idat / 2);
  png_chunk(out, &len, "IEND", NULL, 0);
  const char *root = image_root("pidat", "cut.png", out, len);
  assert_root_get_fails(root, "cut.png", "PNG: ");
  /* The whole IDAT and 16 bytes more in it. */
  unsigned char *more = malloc(idat + 16);
  assert_non_null(more);
  memcpy(more, b + at + 8, idat);
  memset(more + idat, 0x5a, 16);
  len = at;
  png_chunk(out, &len, "IDAT", more, idat + 16);
  png_chunk(out, &len, "IEND", NULL, 0);
  free(more);
  char p[1024];
  snprintf(p, sizeof p, "%s/a/cut.png", root);
  test_write_file(p, out, len);
  assert_root_get_fails(root, "PNG: ", NULL);
  /* The untouched file decodes. */
  test_write_file(p, b, n);
  torc_dataset *ds = open_ds("image_folder", 1, "root", root);
  assert_torc(ds);
  torc_tensor *in, *tg;
  assert_ok(torc_dataset_get(ds, 0, &in, &tg));
  torc_release(in);
  torc_release(tg);
  torc_dataset_close(ds);
  free(out);
  free(b);
}

/* max_bytes for images, and an image swapped for a FIFO after the open. */
static void test_image_files(void **state) {
  (void)state;
  size_t n;
  unsigned char *b = make_jpeg(32, 32, 3, 0, NULL, 0, &n);
  const char *root = image_root("ifiles", "x.jpg", b, n);
  free(b);
  assert_open_fails(open_ds("image_folder", 2, "root", root, "max_bytes",
                            "100"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "too large image");
  assert_contains(torc_last_error(), "over the limit of 100 bytes (key "
                                     "'max_bytes')");
  torc_dataset *ds = open_ds("image_folder", 1, "root", root);
  assert_torc(ds);
  char p[1024];
  snprintf(p, sizeof p, "%s/a/x.jpg", root);
  assert_int_equal(remove(p), 0);
  assert_int_equal(mkfifo(p, 0600), 0);
  assert_get_fails(ds, "FIFO");
  torc_dataset_close(ds);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, data_setup, data_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_npy_wrapping_shape),   T(test_not_regular_files),
      T(test_size_limits),          T(test_idx_huge_headers),
      T(test_idx_gzip_trailing),    T(test_idx_cache_validated),
      T(test_jpeg_huge_header),     T(test_jpeg_progressive_buffer),
      T(test_jpeg_many_scans),      T(test_jpeg_corrupt_scans),
      T(test_png_huge_header),      T(test_png_bad_idat),
      T(test_image_files),          T(test_csv_text_limits),
  };
  return cmocka_run_group_tests(tests, group_setup, data_tmp_teardown);
}
