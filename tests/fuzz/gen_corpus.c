/* tests/fuzz/gen_corpus.c — writes the binary seeds of the fuzzers' corpora
 * (tests/fuzz/corpus/NAME): safetensors state dicts and a checkpoint
 * written by torc, IDX raw and gzip, .npy v1 and v2, 4x4 PNGs and JPEGs
 * (baseline and progressive), each in its harness's input layout. Run by
 * hand when a layout changes (docs/fuzzing.md):
 *   make -C _build tests/fuzz/gen_corpus && _build/tests/fuzz/gen_corpus DIR
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include "torc/torc.h"

static const char *out;

static void die(const char *what) {
  fprintf(stderr, "gen_corpus: %s: %s\n", what,
          torc_last_error()[0] ? torc_last_error() : strerror(errno));
  exit(1);
}

/* "$out/dir/name" (dir created) in a static buffer. */
static const char *P(const char *dir, const char *name) {
  static char buf[2048];
  snprintf(buf, sizeof buf, "%s/%s", out, dir);
  mkdir(buf, 0755);
  snprintf(buf, sizeof buf, "%s/%s/%s", out, dir, name);
  return buf;
}

/* Writes a file made of parts: {pointer, length} pairs ending at NULL. */
static void write_parts(const char *path, ...) {
  FILE *f = fopen(path, "wb");
  if (f == NULL)
    die(path);
  va_list ap;
  va_start(ap, path);
  for (;;) {
    const void *p = va_arg(ap, const void *);
    if (p == NULL)
      break;
    size_t n = va_arg(ap, size_t);
    if (fwrite(p, 1, n, f) != n)
      die(path);
  }
  va_end(ap);
  if (fclose(f) != 0)
    die(path);
}

static void le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static void be32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (24 - 8 * i));
}

/* ---- safetensors (fuzz_safetensors: the file itself) ---- */

static void gen_safetensors(void) {
  torc_module *m = torc_sequential_new();
  if (m == NULL || torc_sequential_append(m, torc_linear_new(4, 3, 1)) ||
      torc_sequential_append(m, torc_linear_new(3, 2, 1)))
    die("model");
  if (torc_module_save(m, P("safetensors", "state_dict.safetensors")))
    die("torc_module_save");
  torc_state_dict *ck = torc_checkpoint_new();
  if (ck == NULL || torc_checkpoint_add_module(ck, m) ||
      torc_checkpoint_add_rng(ck, "default", NULL) ||
      torc_state_dict_set_i64(ck, "epoch", 3) ||
      torc_state_dict_set_i64(ck, "step", 42) ||
      torc_state_dict_save(ck, P("safetensors", "checkpoint.safetensors")))
    die("checkpoint");
  torc_state_dict_free(ck);
  torc_module_free(m);

  /* One tensor of every dtype, with metadata, and none at all. */
  const char *names[8];
  torc_tensor *ts[8];
  static const char *const dn[8] = {"f32", "f64", "f16", "bf16",
                                    "i32", "i64", "u8",  "bool"};
  for (int i = 0; i < 8; i++) {
    names[i] = dn[i];
    ts[i] = torc_zeros(TORC_SHAPE(2, i % 3 + 1), (torc_dtype)i, TORC_CPU);
    if (ts[i] == NULL)
      die("torc_zeros");
  }
  const char *mk[] = {"format", "note"}, *mv[] = {"pt", "fuzz seed"};
  if (torc_safetensors_save(P("safetensors", "dtypes.safetensors"), names,
                            (const torc_tensor *const *)ts, 8, mk, mv, 2) ||
      torc_safetensors_save(P("safetensors", "scalar.safetensors"), names,
                            (const torc_tensor *const *)ts, 1, NULL, NULL,
                            0) ||
      torc_safetensors_save(P("safetensors", "empty.safetensors"), NULL, NULL,
                            0, NULL, NULL, 0))
    die("torc_safetensors_save");
  for (int i = 0; i < 8; i++)
    torc_release(ts[i]);
}

/* ---- idx (fuzz_idx: flags, u32 labels length, labels, images) ---- */

static size_t gz_bytes(const uint8_t *in, size_t n, uint8_t *outb,
                       size_t cap) {
  z_stream z = {0};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    die("deflateInit2");
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)n;
  z.next_out = outb;
  z.avail_out = (uInt)cap;
  if (deflate(&z, Z_FINISH) != Z_STREAM_END)
    die("deflate");
  size_t got = z.total_out;
  deflateEnd(&z);
  return got;
}

static void gen_idx(void) {
  enum { N = 3, H = 4, W = 4 };
  uint8_t labels[8 + N], images[16 + N * H * W];
  be32(labels, 0x801);
  be32(labels + 4, N);
  for (int i = 0; i < N; i++)
    labels[8 + i] = (uint8_t)(i % 2);
  be32(images, 0x803);
  be32(images + 4, N);
  be32(images + 8, H);
  be32(images + 12, W);
  for (int i = 0; i < N * H * W; i++)
    images[16 + i] = (uint8_t)(i * 7);
  uint8_t len[4];
  le32(len, sizeof labels);
  for (uint8_t flags = 0; flags < 4; flags++) {
    char name[32];
    snprintf(name, sizeof name, "raw-flags%u", flags);
    write_parts(P("idx", name), &flags, (size_t)1, len, (size_t)4, labels,
                sizeof labels, images, sizeof images, NULL);
  }
  /* gzip streams in the input itself. */
  uint8_t gl[256], gi[256], gl_len[4], zero = 0;
  size_t nl = gz_bytes(labels, sizeof labels, gl, sizeof gl);
  size_t ni = gz_bytes(images, sizeof images, gi, sizeof gi);
  le32(gl_len, (uint32_t)nl);
  write_parts(P("idx", "gzip-files"), &zero, (size_t)1, gl_len, (size_t)4,
              gl, nl, gi, ni, NULL);
}

/* ---- npy (fuzz_npy: u32 inputs length, inputs, targets) ---- */

/* A .npy file of version major (1 or 2) into buf; returns its length. */
static size_t npy(uint8_t *buf, int major, const char *descr,
                  const char *shape, const void *data, size_t n) {
  char dict[128];
  int dl = snprintf(dict, sizeof dict,
                    "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                    descr, shape);
  size_t pre = major == 1 ? 10 : 12;
  size_t hl = (size_t)dl + 1;
  while ((pre + hl) % 64)
    hl++;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (uint8_t)major;
  buf[7] = 0;
  if (major == 1) {
    buf[8] = (uint8_t)hl;
    buf[9] = (uint8_t)(hl >> 8);
  } else {
    le32(buf + 8, (uint32_t)hl);
  }
  memset(buf + pre, ' ', hl);
  memcpy(buf + pre, dict, (size_t)dl);
  buf[pre + hl - 1] = '\n';
  memcpy(buf + pre + hl, data, n);
  return pre + hl + n;
}

static void npy_pair(const char *name, const uint8_t *a, size_t na,
                     const uint8_t *b, size_t nb) {
  uint8_t len[4];
  le32(len, (uint32_t)na);
  write_parts(P("npy", name), len, (size_t)4, a, na, b, nb, NULL);
}

static void gen_npy(void) {
  uint8_t a[256], b[256];
  float x[6] = {0, 1, 2, 3, 4.5f, -1};
  int64_t y[2] = {0, 1};
  int32_t y4[2] = {1, 0};
  double yr[4] = {0.5, 1, 2, 3};
  uint8_t u[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  size_t na = npy(a, 1, "<f4", "(2, 3)", x, sizeof x);
  size_t nb = npy(b, 1, "<i8", "(2,)", y, sizeof y);
  npy_pair("v1-f4-i8", a, na, b, nb);
  na = npy(a, 2, "|u1", "(2, 2, 2)", u, sizeof u);
  nb = npy(b, 2, "<i4", "(2,)", y4, sizeof y4);
  npy_pair("v2-u1-i4", a, na, b, nb);
  na = npy(a, 1, "<f8", "(2, 2)", yr, sizeof yr);
  nb = npy(b, 1, "<f8", "(2, 2)", yr, sizeof yr);
  npy_pair("v1-f8-regression", a, na, b, nb);
}

/* ---- images (fuzz_image: flags, then the file) ---- */

static void gen_png(const char *name, int color, int depth, uint8_t flags) {
  const char *path = P("image", name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(&flags, 1, 1, f) != 1)
    die(path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL,
                                            NULL, NULL);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png)))
    die("libpng");
  png_init_io(png, f);
  png_set_IHDR(png, info, 4, 4, depth, color, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (color == PNG_COLOR_TYPE_PALETTE) {
    png_color pal[4] = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
    png_set_PLTE(png, info, pal, 4);
  }
  png_write_info(png, info);
  int ch = color == PNG_COLOR_TYPE_RGB ? 3
           : color == PNG_COLOR_TYPE_RGBA ? 4
           : color == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                                                : 1;
  uint8_t row[32];
  for (int y = 0; y < 4; y++) {
    for (int i = 0; i < 4 * ch * (depth / 8 ? depth / 8 : 1); i++)
      row[i] = (uint8_t)(color == PNG_COLOR_TYPE_PALETTE ? (i + y) % 4
                                                         : 40 * y + 9 * i);
    if (depth < 8)
      row[0] = 0x5a;
    png_write_row(png, row);
  }
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  if (fclose(f) != 0)
    die(path);
}

static void gen_jpeg(const char *name, int channels, int progressive,
                     uint8_t flags) {
  const char *path = P("image", name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(&flags, 1, 1, f) != 1)
    die(path);
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = 4;
  c.image_height = 4;
  c.input_components = channels;
  c.in_color_space = channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 50, TRUE);
  if (progressive)
    jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  uint8_t row[12];
  for (int y = 0; y < 4; y++) {
    for (int i = 0; i < 4 * channels; i++)
      row[i] = (uint8_t)(30 * y + 17 * i);
    JSAMPROW r = row;
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  if (fclose(f) != 0)
    die(path);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_corpus DIR\n");
    return 2;
  }
  out = argv[1];
  mkdir(out, 0755);
  if (torc_plugin_load("ref", NULL) != TORC_OK)
    die("loading the ref plugin");
  gen_safetensors();
  gen_idx();
  gen_npy();
  gen_png("gray.png", PNG_COLOR_TYPE_GRAY, 8, 0);
  gen_png("gray2.png", PNG_COLOR_TYPE_GRAY, 2, 1);
  gen_png("rgb.png", PNG_COLOR_TYPE_RGB, 8, 0);
  gen_png("rgb16.png", PNG_COLOR_TYPE_RGB, 16, 1);
  gen_png("rgba.png", PNG_COLOR_TYPE_RGBA, 8, 2);
  gen_png("graya.png", PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0);
  gen_png("palette.png", PNG_COLOR_TYPE_PALETTE, 8, 0);
  gen_jpeg("baseline.jpg", 3, 0, 0);
  gen_jpeg("progressive.jpg", 3, 1, 0);
  gen_jpeg("gray.jpg", 1, 0, 1);
  gen_jpeg("gray-progressive.jpg", 1, 1, 3);
  torc_shutdown();
  return 0;
}
