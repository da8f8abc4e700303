/* plugins/data/image_decode.c — PNG (libpng) and JPEG (libjpeg) for the
 * image_folder source: a cheap header probe (signature, size) done at open,
 * and the full decode to u8 [H, W, C] with C = 1 or 3 done at get().
 * Both libraries report errors by longjmp; each call owns its structs, so
 * calls on different threads are independent.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include "data_internal.h"

/* Largest decoded image, in bytes (a corrupt header asking for more is
 * reported as such rather than as an allocation failure). */
#define IMG_MAX_BYTES ((uint64_t)1 << 31)

static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G',
                                         '\r', '\n', 0x1a, '\n'};

/* What one decode works on. Reached through a pointer after setjmp, so
 * nothing here needs to be volatile. */
typedef struct img_ctx {
  FILE *f;
  uint8_t *pixels;
  uint8_t **rows;
  char msg[JMSG_LENGTH_MAX > 200 ? JMSG_LENGTH_MAX : 200];
} img_ctx;

static void img_ctx_free(img_ctx *c) {
  if (c->f)
    fclose(c->f);
  free(c->rows);
  free(c->pixels);
  c->f = NULL;
  c->rows = NULL;
  c->pixels = NULL;
}

/* Opens path and identifies it by its first bytes. */
static int img_open(img_ctx *c, const char *path, int *format) {
  c->f = fopen(path, "rb");
  if (c->f == NULL) {
    snprintf(c->msg, sizeof c->msg, "cannot open it: %s", strerror(errno));
    return -1;
  }
  unsigned char head[8];
  size_t got = fread(head, 1, sizeof head, c->f);
  rewind(c->f);
  if (got == sizeof head && memcmp(head, png_sig, 8) == 0) {
    *format = DSRC_IMG_PNG;
    return 0;
  }
  if (got >= 3 && head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff) {
    *format = DSRC_IMG_JPEG;
    return 0;
  }
  if (got == 0)
    snprintf(c->msg, sizeof c->msg, "the file is empty");
  else
    snprintf(c->msg, sizeof c->msg,
             "it is neither PNG nor JPEG (its first bytes are %02x %02x "
             "%02x %02x)",
             head[0], got > 1 ? head[1] : 0, got > 2 ? head[2] : 0,
             got > 3 ? head[3] : 0);
  return -1;
}

static int img_size_ok(img_ctx *c, uint32_t w, uint32_t h) {
  if (w == 0 || h == 0 || (uint64_t)w * h * 3 > IMG_MAX_BYTES) {
    snprintf(c->msg, sizeof c->msg,
             "its header gives an implausible size %ux%u", (unsigned)w,
             (unsigned)h);
    return 0;
  }
  return 1;
}

/* ---- PNG ---- */

static void png_fail(png_structp png, png_const_charp msg) {
  img_ctx *c = png_get_error_ptr(png);
  snprintf(c->msg, sizeof c->msg, "PNG: %s", msg);
  png_longjmp(png, 1);
}

static void png_warn(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg; /* ancillary-chunk complaints (iCCP, sRGB) are not errors */
}

/* Reads the header (probe) or the whole image (decode, channels > 0). */
static int png_run(img_ctx *c, int channels, uint32_t *w, uint32_t *h) {
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, c, png_fail, png_warn);
  if (png == NULL) {
    snprintf(c->msg, sizeof c->msg, "out of memory");
    return -1;
  }
  png_infop info = png_create_info_struct(png);
  if (info == NULL) {
    png_destroy_read_struct(&png, NULL, NULL);
    snprintf(c->msg, sizeof c->msg, "out of memory");
    return -1;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, NULL);
    return -1;
  }
  png_init_io(png, c->f);
  png_read_info(png, info);
  png_uint_32 pw, ph;
  int depth, color, interlace;
  png_get_IHDR(png, info, &pw, &ph, &depth, &color, &interlace, NULL, NULL);
  if (!img_size_ok(c, pw, ph)) {
    png_destroy_read_struct(&png, &info, NULL);
    return -1;
  }
  *w = pw;
  *h = ph;
  if (channels > 0) {
    if (color == PNG_COLOR_TYPE_PALETTE)
      png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8)
      png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16)
      png_set_scale_16(png);
    if (color & PNG_COLOR_MASK_ALPHA)
      png_set_strip_alpha(png); /* dropped, as PIL's convert("RGB") */
    int is_color = (color & PNG_COLOR_MASK_COLOR) != 0;
    if (channels == 3 && !is_color)
      png_set_gray_to_rgb(png);
    if (channels == 1 && is_color) /* ITU-R 601 luma, as PIL's "L" */
      png_set_rgb_to_gray_fixed(png, PNG_ERROR_ACTION_NONE, 29900, 58700);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    if (rowbytes != (size_t)pw * (size_t)channels) {
      snprintf(c->msg, sizeof c->msg,
               "PNG: unexpected row size %zu after conversion to %d "
               "channel(s)",
               rowbytes, channels);
      png_destroy_read_struct(&png, &info, NULL);
      return -1;
    }
    c->pixels = malloc(rowbytes * ph);
    c->rows = malloc(sizeof *c->rows * ph);
    if (c->pixels == NULL || c->rows == NULL) {
      snprintf(c->msg, sizeof c->msg, "out of memory (%zu bytes)",
               rowbytes * ph);
      png_destroy_read_struct(&png, &info, NULL);
      return -1;
    }
    for (png_uint_32 y = 0; y < ph; y++)
      c->rows[y] = c->pixels + rowbytes * y;
    png_read_image(png, c->rows);
    png_read_end(png, NULL);
  }
  png_destroy_read_struct(&png, &info, NULL);
  return 0;
}

/* ---- JPEG ---- */

typedef struct jpeg_err {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
  img_ctx *c;
  int truncated; /* libjpeg warned that the data ended early */
} jpeg_err;

static void jpeg_fail(j_common_ptr cinfo) {
  jpeg_err *e = (jpeg_err *)cinfo->err;
  char buf[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, buf);
  snprintf(e->c->msg, sizeof e->c->msg, "JPEG: %s", buf);
  longjmp(e->jb, 1);
}

/* Warnings (level -1) are corrupt-data notices: a truncated file is an
 * error (libjpeg would fill the rest with gray); others are tolerated, as
 * PIL does. Trace messages (level >= 0) are dropped. */
static void jpeg_notice(j_common_ptr cinfo, int level) {
  jpeg_err *e = (jpeg_err *)cinfo->err;
  if (level < 0) {
    cinfo->err->num_warnings++;
    if (cinfo->err->msg_code == JWRN_JPEG_EOF)
      e->truncated = 1;
  }
}

static int jpeg_run(img_ctx *c, int channels, uint32_t *w, uint32_t *h) {
  struct jpeg_decompress_struct cinfo;
  jpeg_err err;
  memset(&cinfo, 0, sizeof cinfo);
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = jpeg_fail;
  err.pub.emit_message = jpeg_notice;
  err.c = c;
  err.truncated = 0;
  if (setjmp(err.jb)) {
    jpeg_destroy_decompress(&cinfo);
    return -1;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_stdio_src(&cinfo, c->f);
  jpeg_read_header(&cinfo, TRUE);
  if (!img_size_ok(c, cinfo.image_width, cinfo.image_height)) {
    jpeg_destroy_decompress(&cinfo);
    return -1;
  }
  *w = cinfo.image_width;
  *h = cinfo.image_height;
  if (channels > 0) {
    cinfo.out_color_space = channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_components != channels ||
        cinfo.output_width != *w || cinfo.output_height != *h) {
      snprintf(c->msg, sizeof c->msg,
               "JPEG: decoded to %d channel(s) %ux%u, expected %d",
               cinfo.output_components, (unsigned)cinfo.output_width,
               (unsigned)cinfo.output_height, channels);
      jpeg_destroy_decompress(&cinfo);
      return -1;
    }
    size_t rowbytes = (size_t)*w * (size_t)channels;
    c->pixels = malloc(rowbytes * *h);
    if (c->pixels == NULL) {
      snprintf(c->msg, sizeof c->msg, "out of memory (%zu bytes)",
               rowbytes * *h);
      jpeg_destroy_decompress(&cinfo);
      return -1;
    }
    while (cinfo.output_scanline < cinfo.output_height) {
      JSAMPROW row = c->pixels + rowbytes * cinfo.output_scanline;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    if (err.truncated) {
      snprintf(c->msg, sizeof c->msg,
               "JPEG: the data ends early (the file is truncated)");
      jpeg_destroy_decompress(&cinfo);
      return -1;
    }
  }
  jpeg_destroy_decompress(&cinfo);
  return 0;
}

/* ---- the entry points ---- */

int dsrc_image_probe(const char *path, int *format, uint32_t *w, uint32_t *h,
                     char *why, size_t why_size) {
  img_ctx c;
  memset(&c, 0, sizeof c);
  int rc = img_open(&c, path, format);
  if (rc == 0)
    rc = *format == DSRC_IMG_PNG ? png_run(&c, 0, w, h)
                                 : jpeg_run(&c, 0, w, h);
  if (rc != 0)
    snprintf(why, why_size, "%s", c.msg);
  img_ctx_free(&c);
  return rc;
}

int dsrc_image_decode(const char *path, int channels, uint8_t **pixels,
                      uint32_t *w, uint32_t *h, char *why, size_t why_size) {
  img_ctx c;
  memset(&c, 0, sizeof c);
  int format = 0;
  *pixels = NULL;
  int rc = img_open(&c, path, &format);
  if (rc == 0)
    rc = format == DSRC_IMG_PNG ? png_run(&c, channels, w, h)
                                : jpeg_run(&c, channels, w, h);
  if (rc != 0) {
    snprintf(why, why_size, "%s", c.msg);
  } else {
    *pixels = c.pixels;
    c.pixels = NULL;
  }
  img_ctx_free(&c);
  return rc;
}
