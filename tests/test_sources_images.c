/* tests/test_sources_images.c — the data plugin's image_folder source
 * (plugins/data), opened through torc_dataset_open: class folders of PNG
 * (libpng) and JPEG (libjpeg) files written at run time into a temporary
 * folder; the values, the layout keys and corrupt or unreadable images.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include "testutil.h"
#include "data_testutil.h"
#include "sources_testutil.h"

#include "torc/data.h"
#include "torc/philox.h"

/* ======================================================================
 * image_folder
 * ==================================================================== */

/* Writes a PNG with libpng: color_type PNG_COLOR_TYPE_*, 8 bits, rows of
 * w * channels bytes. */
static void write_png(const char *path, int w, int h, int color_type,
                      const uint8_t *pix) {
  int ch = color_type == PNG_COLOR_TYPE_RGB          ? 3
           : color_type == PNG_COLOR_TYPE_RGB_ALPHA  ? 4
           : color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                                                     : 1;
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  assert_non_null(info);
  if (setjmp(png_jmpbuf(png)))
    fail_msg("libpng failed writing %s", path);
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, color_type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; y++)
    png_write_row(png, pix + (size_t)y * w * ch);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  fclose(f);
}

/* Writes an RGB JPEG (quality 100) with libjpeg. */
static void write_jpeg(const char *path, int w, int h, const uint8_t *rgb) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 100, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * w * 3);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  fclose(f);
}

/* ROOT/cat/a.png (RGB 3x2), ROOT/cat/b.jpg (8x8 of (200, 100, 50)),
 * ROOT/dog/c.png (gray 2x2), ROOT/dog/d.png (RGBA 2x1), and a text file
 * that is ignored. */
static uint8_t img_a[2 * 3 * 3];

static void make_image_tree(const char *root) {
  char p[1024];
  make_dir(root);
  snprintf(p, sizeof p, "%s/cat", root);
  make_dir(p);
  snprintf(p, sizeof p, "%s/dog", root);
  make_dir(p);
  for (int y = 0; y < 2; y++)
    for (int x = 0; x < 3; x++) {
      uint8_t *px = img_a + (y * 3 + x) * 3;
      px[0] = (uint8_t)(10 * y + x);
      px[1] = (uint8_t)(100 + x);
      px[2] = (uint8_t)(200 - y);
    }
  snprintf(p, sizeof p, "%s/cat/a.png", root);
  write_png(p, 3, 2, PNG_COLOR_TYPE_RGB, img_a);
  uint8_t solid[8 * 8 * 3];
  for (int i = 0; i < 64; i++) {
    solid[3 * i] = 200;
    solid[3 * i + 1] = 100;
    solid[3 * i + 2] = 50;
  }
  snprintf(p, sizeof p, "%s/cat/b.jpg", root);
  write_jpeg(p, 8, 8, solid);
  const uint8_t gray[4] = {0, 50, 100, 255};
  snprintf(p, sizeof p, "%s/dog/c.png", root);
  write_png(p, 2, 2, PNG_COLOR_TYPE_GRAY, gray);
  const uint8_t rgba[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  snprintf(p, sizeof p, "%s/dog/d.png", root);
  write_png(p, 2, 1, PNG_COLOR_TYPE_RGB_ALPHA, rgba);
  snprintf(p, sizeof p, "%s/dog/notes.txt", root);
  write_text(p, "not an image\n");
}

static void test_image_folder_values(void **state) {
  (void)state;
  const char *root = P("imgs");
  make_image_tree(root);
  torc_dataset *ds = open_ds("image_folder", 1, "root", root);
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 4);
  assert_int_equal(torc_dataset_num_classes(ds), 2);
  assert_string_equal(torc_dataset_describe(ds),
                      "4 samples, input [3, H, W] u8 (H 1 to 8, W 2 to 8), "
                      "2 classes (cat, dog)");
  char name[32];
  assert_ok(torc_dataset_class_name(ds, 1, name, sizeof name));
  assert_string_equal(name, "dog");
  assert_contains(log_buf, "ignored 1 entry");
  assert_contains(log_buf, "notes.txt");
  torc_tensor *in, *tg;
  /* a.png: RGB, exact, [3, 2, 3] channel-major. */
  get_sample(ds, 0, TORC_U8, (const int64_t[3]){3, 2, 3}, 3, &in, &tg);
  const uint8_t *v = torc_data(in);
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 6; i++)
      assert_int_equal(v[c * 6 + i], img_a[i * 3 + c]);
  assert_class(tg, 0);
  release2(in, tg);
  /* b.jpg: lossy, close to (200, 100, 50). */
  get_sample(ds, 1, TORC_U8, (const int64_t[3]){3, 8, 8}, 3, &in, &tg);
  v = torc_data(in);
  const int want[3] = {200, 100, 50};
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 64; i++)
      assert_in_range(v[c * 64 + i], want[c] - 3, want[c] + 3);
  assert_class(tg, 0);
  release2(in, tg);
  /* c.png: gray replicated to three channels. */
  get_sample(ds, 2, TORC_U8, (const int64_t[3]){3, 2, 2}, 3, &in, &tg);
  v = torc_data(in);
  const uint8_t g[4] = {0, 50, 100, 255};
  for (int c = 0; c < 3; c++)
    assert_memory_equal(v + 4 * c, g, 4);
  assert_class(tg, 1);
  release2(in, tg);
  /* d.png: alpha dropped. */
  get_sample(ds, 3, TORC_U8, (const int64_t[3]){3, 1, 2}, 3, &in, &tg);
  v = torc_data(in);
  const uint8_t rgb[6] = {1, 5, 2, 6, 3, 7};
  assert_memory_equal(v, rgb, 6);
  assert_class(tg, 1);
  release2(in, tg);
  torc_dataset_close(ds);
  /* channels = 1: ITU-R 601 luma. */
  ds = open_ds("image_folder", 2, "root", root, "channels", "1");
  assert_torc(ds);
  get_sample(ds, 0, TORC_U8, (const int64_t[3]){1, 2, 3}, 3, &in, &tg);
  v = torc_data(in);
  for (int i = 0; i < 6; i++) {
    double l = 0.299 * img_a[3 * i] + 0.587 * img_a[3 * i + 1] +
               0.114 * img_a[3 * i + 2];
    assert_in_range(v[i], (int)l - 1, (int)l + 2);
  }
  release2(in, tg);
  get_sample(ds, 1, TORC_U8, (const int64_t[3]){1, 8, 8}, 3, &in, &tg);
  v = torc_data(in);
  int l = (int)(0.299 * 200 + 0.587 * 100 + 0.114 * 50);
  assert_in_range(v[10], l - 3, l + 3);
  release2(in, tg);
  torc_dataset_close(ds);
  assert_open_fails(open_ds("image_folder", 2, "root", root, "channels",
                            "4"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "not 1 or 3");
  assert_open_fails(open_ds("image_folder", 2, "root", root, "on_error",
                            "ignore"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "error or skip");
}

static void test_image_folder_layout(void **state) {
  (void)state;
  char p[1024];
  /* Images directly in the root. */
  const char *flat = P("flat");
  make_dir(flat);
  snprintf(p, sizeof p, "%s/x.png", flat);
  write_png(p, 2, 1, PNG_COLOR_TYPE_RGB, img_a);
  assert_open_fails(open_ds("image_folder", 1, "root", flat), TORC_ERR_IO);
  assert_contains(torc_last_error(), "unknown class folder layout");
  assert_contains(torc_last_error(), "directly in the root folder");
  assert_contains(torc_last_error(), "x.png");
  assert_contains(torc_last_error(), "ROOT/CLASS/IMAGE");
  /* An empty root, and one holding only non-image files. */
  const char *empty = P("empty-root");
  make_dir(empty);
  assert_open_fails(open_ds("image_folder", 1, "root", empty), TORC_ERR_IO);
  assert_contains(torc_last_error(), "unknown class folder layout: no class "
                                     "folders");
  snprintf(p, sizeof p, "%s/README", empty);
  write_text(p, "readme\n");
  assert_open_fails(open_ds("image_folder", 1, "root", empty), TORC_ERR_IO);
  assert_contains(torc_last_error(), "no class folders");
  /* An empty class folder. */
  const char *hole = P("hole");
  make_dir(hole);
  snprintf(p, sizeof p, "%s/a", hole);
  make_dir(p);
  snprintf(p, sizeof p, "%s/a/1.png", hole);
  write_png(p, 2, 1, PNG_COLOR_TYPE_RGB, img_a);
  snprintf(p, sizeof p, "%s/b", hole);
  make_dir(p);
  assert_open_fails(open_ds("image_folder", 1, "root", hole), TORC_ERR_IO);
  assert_contains(torc_last_error(), "unknown class folder layout: class "
                                     "folder 'b' holds no PNG or JPEG");
  /* A missing root; a file as the root. */
  assert_open_fails(open_ds("image_folder", 1, "root", P("no-root")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "does not exist");
  snprintf(p, sizeof p, "%s/a/1.png", hole);
  assert_open_fails(open_ds("image_folder", 1, "root", p), TORC_ERR_IO);
  assert_contains(torc_last_error(), "is a file, not a folder");
}

/* Position of `tag` in b, or -1. */
static long find_tag(const unsigned char *b, size_t n, const char *tag,
                     size_t tl) {
  for (size_t i = 0; i + tl <= n; i++)
    if (memcmp(b + i, tag, tl) == 0)
      return (long)i;
  return -1;
}

/* ROOT/ok/{good.png, good.jpg}, ROOT/bad/{hdr.png, hdr.jpg} (header
 * corrupt: a text file and a JPEG whose markers are garbage) and
 * ROOT/late/{data.png, data.jpg} (header fine, data corrupt: an IDAT byte
 * flipped, a JPEG cut after its scan header). */
static void make_corrupt_tree(const char *root) {
  char p[1024];
  make_dir(root);
  static const char *const dirs[] = {"bad", "late", "ok"};
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
    make_dir(p);
  }
  uint8_t noise[16 * 16 * 3];
  for (int i = 0; i < (int)sizeof noise; i++)
    noise[i] = (uint8_t)torc_philox_randint(3, (uint64_t)i, 0, 256);
  snprintf(p, sizeof p, "%s/ok/good.png", root);
  write_png(p, 16, 16, PNG_COLOR_TYPE_RGB, noise);
  snprintf(p, sizeof p, "%s/ok/good.jpg", root);
  write_jpeg(p, 16, 16, noise);
  snprintf(p, sizeof p, "%s/bad/hdr.png", root);
  write_text(p, "this is not a PNG at all\n");
  snprintf(p, sizeof p, "%s/bad/hdr.jpg", root);
  test_write_file(p, "\xFF\xD8\xFF\xE0\x00\x04xx\xFF\xC0\x00\x02zzzz", 16);
  /* data.png: the good PNG with one IDAT data byte flipped (CRC error). */
  size_t n;
  snprintf(p, sizeof p, "%s/ok/good.png", root);
  unsigned char *b = test_read_file(p, &n);
  long at = find_tag(b, n, "IDAT", 4);
  assert_true(at > 0);
  b[at + 6] ^= 0x55;
  snprintf(p, sizeof p, "%s/late/data.png", root);
  test_write_file(p, b, n);
  free(b);
  /* data.jpg: cut a few bytes into the entropy-coded data. */
  snprintf(p, sizeof p, "%s/ok/good.jpg", root);
  b = test_read_file(p, &n);
  at = find_tag(b, n, "\xFF\xDA", 2);
  assert_true(at > 0);
  size_t seg = (size_t)b[at + 2] << 8 | b[at + 3];
  snprintf(p, sizeof p, "%s/late/data.jpg", root);
  test_write_file(p, b, (size_t)at + 2 + seg + 8);
  free(b);
}

static void test_image_folder_corrupt(void **state) {
  (void)state;
  const char *root = P("corrupt");
  make_corrupt_tree(root);
  /* on_error = error: the first bad header stops the open, naming it. */
  assert_open_fails(open_ds("image_folder", 1, "root", root), TORC_ERR_IO);
  char want[1024];
  snprintf(want, sizeof want, "corrupt image '%s/bad/hdr.jpg'", root);
  assert_contains(torc_last_error(), want);
  assert_contains(torc_last_error(), "on_error = skip");
  /* Only the PNG with a bad signature. */
  char p[1024], q[1024];
  snprintf(p, sizeof p, "%s/bad/hdr.jpg", root);
  snprintf(q, sizeof q, "%s/hdr.jpg.off", root);
  assert_int_equal(rename(p, q), 0);
  assert_open_fails(open_ds("image_folder", 1, "root", root), TORC_ERR_IO);
  snprintf(want, sizeof want, "corrupt image '%s/bad/hdr.png'", root);
  assert_contains(torc_last_error(), want);
  assert_contains(torc_last_error(), "neither PNG nor JPEG");
  assert_int_equal(rename(q, p), 0);
  /* on_error = skip: both are left out, one warning each. */
  log_buf[0] = '\0';
  torc_dataset *ds = open_ds("image_folder", 2, "root", root, "on_error",
                             "skip");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 4);
  assert_int_equal(torc_dataset_num_classes(ds), 3);
  assert_int_equal(count_substr(log_buf, "skipping corrupt image"), 2);
  assert_contains(log_buf, "hdr.png");
  assert_contains(log_buf, "hdr.jpg");
  assert_contains(log_buf, "class 0 ('bad') has no samples");
  assert_contains(torc_dataset_describe(ds), "2 corrupt skipped");
  /* Samples: late/data.jpg, late/data.png, ok/good.jpg, ok/good.png.
   * Corrupt data is an error at get(), naming the file. */
  torc_tensor *in, *tg;
  assert_int_equal(torc_dataset_get(ds, 0, &in, &tg), TORC_ERR_IO);
  assert_null(in);
  snprintf(want, sizeof want, "cannot decode image '%s/late/data.jpg'", root);
  assert_contains(torc_last_error(), want);
  assert_contains(torc_last_error(), "truncated");
  assert_int_equal(torc_dataset_get(ds, 1, &in, &tg), TORC_ERR_IO);
  snprintf(want, sizeof want, "cannot decode image '%s/late/data.png'", root);
  assert_contains(torc_last_error(), want);
  assert_contains(torc_last_error(), "PNG: IDAT");
  for (int64_t i = 2; i < 4; i++) {
    get_sample(ds, i, TORC_U8, (const int64_t[3]){3, 16, 16}, 3, &in, &tg);
    assert_class(tg, 2);
    release2(in, tg);
  }
  torc_dataset_close(ds);
  /* The same get() errors with on_error = error once the headers pass. */
  snprintf(p, sizeof p, "%s/bad", root);
  nftw(p, rm_entry, 4, FTW_DEPTH | FTW_PHYS);
  ds = open_ds("image_folder", 1, "root", root);
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 4);
  assert_int_equal(torc_dataset_get(ds, 1, &in, &tg), TORC_ERR_IO);
  assert_contains(torc_last_error(), "late/data.png");
  torc_dataset_close(ds);
  /* Every image corrupt with skip: nothing left. */
  const char *allbad = P("allbad");
  make_dir(allbad);
  snprintf(p, sizeof p, "%s/x", allbad);
  make_dir(p);
  snprintf(p, sizeof p, "%s/x/1.png", allbad);
  write_text(p, "no");
  assert_open_fails(open_ds("image_folder", 2, "root", allbad, "on_error",
                            "skip"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "every image failed");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_image_folder_values),
      T(test_image_folder_layout),
      T(test_image_folder_corrupt),
  };
  return cmocka_run_group_tests(tests, group_setup, data_tmp_teardown);
}
