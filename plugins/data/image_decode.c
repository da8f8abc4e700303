/* plugins/data/image_decode.c — PNG (libpng) and JPEG (libjpeg) for the
 * image_folder source: a cheap header probe (signature, size) done at open,
 * and the full decode to u8 [H, W, C] with C = 1 or 3 done at get().
 * Both libraries report errors by longjmp; each call owns its structs, so
 * calls on different threads are independent. Hostile files are bounded:
 * the file's size and the image's pixels are checked (dsrc_img_limits)
 * before anything is decoded, libjpeg's working memory and a progressive
 * JPEG's scans are capped, and any warning about corrupt data is an error.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include "data_internal.h"
#include "torc/checked.h"

/* libjpeg's working memory, per allowed pixel: a progressive (or
 * multi-scan) JPEG keeps every DCT coefficient, 2 bytes per sample, so 4
 * full-resolution components (CMYK) take 8 bytes a pixel. */
#define IMG_JPEG_MEM_PER_PIXEL 8
#define IMG_JPEG_MEM_MIN ((uint64_t)16 << 20)

/* libpng's cap on one ancillary chunk (iCCP, zTXt, ...) once decompressed,
 * and on how many it keeps. */
#define IMG_PNG_CHUNK_MAX ((png_alloc_size_t)16 << 20)
#define IMG_PNG_CHUNK_CACHE 256

static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G',
                                         '\r', '\n', 0x1a, '\n'};

/* What one probe or decode works on. Reached through a pointer after
 * setjmp, so nothing here needs to be volatile. */
typedef struct img_ctx {
  const dsrc_img_limits *lim;
  FILE *f;            /* probe: the file, read as far as the header */
  char *data;         /* decode: the whole file */
  size_t size, pos;   /* decode: its size and the read position (PNG) */
  uint8_t *pixels;
  uint8_t **rows;
  int rc;             /* DSRC_IMG_CORRUPT or DSRC_IMG_TOO_LARGE on error */
  char msg[JMSG_LENGTH_MAX > 240 ? JMSG_LENGTH_MAX : 240];
} img_ctx;

static void img_ctx_free(img_ctx *c) {
  if (c->f)
    fclose(c->f);
  free(c->data);
  free(c->rows);
  free(c->pixels);
  c->f = NULL;
  c->data = NULL;
  c->rows = NULL;
  c->pixels = NULL;
}

/* Opens path (a regular file within max_bytes) and identifies it by its
 * first bytes: as a stream for a probe (whole = 0), or read whole. */
static int img_open(img_ctx *c, const char *path, int whole, int *format) {
  int fd, err;
  uint64_t size;
  const char *kind;
  c->rc = DSRC_IMG_CORRUPT;
  switch (dsrc_open_file(path, c->lim->max_bytes, &fd, &size, &err, &kind)) {
  case DSRC_OPEN_OK:
    break;
  case DSRC_OPEN_ERRNO:
    snprintf(c->msg, sizeof c->msg, "cannot open it: %s", strerror(err));
    return -1;
  case DSRC_OPEN_TOO_LARGE:
    c->rc = DSRC_IMG_TOO_LARGE;
    snprintf(c->msg, sizeof c->msg,
             "the file is %llu bytes, over the limit of %llu bytes (key "
             "'max_bytes'); raise max_bytes if the image is meant to be this "
             "large",
             (unsigned long long)size,
             (unsigned long long)c->lim->max_bytes);
    return -1;
  default:
    snprintf(c->msg, sizeof c->msg, "it is %s, not a regular file",
             kind ? kind : "a special file");
    return -1;
  }
  unsigned char head[8];
  size_t got;
  if (whole) {
    /* The probe's message sets no error; the caller reports why. */
    int st = dsrc_read_fd("image_folder", "image", path, fd, size, &c->data);
    close(fd);
    if (st != TORC_OK) {
      snprintf(c->msg, sizeof c->msg, "%s", dsrc_api->last_error());
      return -1;
    }
    c->size = (size_t)size;
    got = c->size < sizeof head ? c->size : sizeof head;
    memcpy(head, c->data, got);
  } else {
    c->f = fdopen(fd, "rb");
    if (c->f == NULL) {
      snprintf(c->msg, sizeof c->msg, "cannot open it: %s", strerror(errno));
      close(fd);
      return -1;
    }
    got = fread(head, 1, sizeof head, c->f);
    rewind(c->f);
  }
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

/* Checks the header's size against max_pixels (before any decoding). */
static int img_size_ok(img_ctx *c, uint32_t w, uint32_t h) {
  if (w == 0 || h == 0) {
    snprintf(c->msg, sizeof c->msg,
             "its header gives an impossible size %ux%u", (unsigned)w,
             (unsigned)h);
    return 0;
  }
  uint64_t px = (uint64_t)w * h;
  if (px > c->lim->max_pixels) {
    c->rc = DSRC_IMG_TOO_LARGE;
    snprintf(c->msg, sizeof c->msg,
             "its header gives %ux%u = %llu pixels, over the limit of %llu "
             "(key 'max_pixels'); raise max_pixels if the image is really "
             "that large",
             (unsigned)w, (unsigned)h, (unsigned long long)px,
             (unsigned long long)c->lim->max_pixels);
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

/* Reads the whole file from memory; running out is a truncated file. */
static void png_mem_read(png_structp png, png_bytep out, png_size_t n) {
  img_ctx *c = png_get_io_ptr(png);
  if (n > c->size - c->pos)
    png_error(png, "the file ends early (it is truncated)");
  memcpy(out, c->data + c->pos, n);
  c->pos += n;
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
  /* Each dimension at most max_pixels (the product is checked once the
   * IHDR is read, before anything is allocated for the image), and
   * bounded ancillary chunks. */
  png_uint_32 dim_max = c->lim->max_pixels < 0x7fffffffu
                            ? (png_uint_32)c->lim->max_pixels
                            : 0x7fffffffu;
  png_set_user_limits(png, dim_max, dim_max);
  png_set_chunk_malloc_max(png, IMG_PNG_CHUNK_MAX);
  png_set_chunk_cache_max(png, IMG_PNG_CHUNK_CACHE);
  if (c->data)
    png_set_read_fn(png, c, png_mem_read);
  else
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
    size_t rowbytes = png_get_rowbytes(png, info), total;
    if (rowbytes != (size_t)pw * (size_t)channels) {
      snprintf(c->msg, sizeof c->msg,
               "PNG: unexpected row size %zu after conversion to %d "
               "channel(s)",
               rowbytes, channels);
      png_destroy_read_struct(&png, &info, NULL);
      return -1;
    }
    if (torc_checked_mul_size(rowbytes, ph, &total)) {
      snprintf(c->msg, sizeof c->msg, "out of memory (%ux%u pixels)",
               (unsigned)pw, (unsigned)ph);
      png_destroy_read_struct(&png, &info, NULL);
      return -1;
    }
    c->pixels = malloc(total);
    c->rows = malloc(sizeof *c->rows * ph);
    if (c->pixels == NULL || c->rows == NULL) {
      snprintf(c->msg, sizeof c->msg, "out of memory (%zu bytes)", total);
      png_destroy_read_struct(&png, &info, NULL);
      return -1;
    }
    for (png_uint_32 y = 0; y < ph; y++)
      c->rows[y] = c->pixels + rowbytes * y;
    /* From here on libpng's "benign" errors (too much or too little image
     * data, extra compressed data) are errors: they mean the pixels are
     * not the ones the file was written with. */
    png_set_benign_errors(png, 0);
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
} jpeg_err;

static void jpeg_fail(j_common_ptr cinfo) {
  jpeg_err *e = (jpeg_err *)cinfo->err;
  char buf[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, buf);
  snprintf(e->c->msg, sizeof e->c->msg, "JPEG: %s", buf);
  longjmp(e->jb, 1);
}

/* Warnings (level -1) are corrupt-data notices (premature end of the
 * file, a scan cut short by a marker, extraneous bytes, bad Huffman
 * codes): libjpeg would go on and fill the damage with gray, so each is
 * an error here — except the three that concern metadata only (a JFIF
 * version above 1.x, an unknown Adobe transform code, a malformed ICC
 * profile chunk), which leave the pixels intact and which common writers
 * produce. Trace messages (level >= 0) are dropped. */
static void jpeg_notice(j_common_ptr cinfo, int level) {
  if (level >= 0)
    return;
  int code = cinfo->err->msg_code;
  if (code == JWRN_JFIF_MAJOR || code == JWRN_ADOBE_XFORM ||
      code == JWRN_BOGUS_ICC)
    return;
  jpeg_err *e = (jpeg_err *)cinfo->err;
  char buf[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, buf);
  snprintf(e->c->msg, sizeof e->c->msg, "JPEG: %s%s", buf,
           cinfo->err->msg_code == JWRN_JPEG_EOF
               ? " (the file is truncated)"
               : " (the data is corrupt)");
  longjmp(e->jb, 1);
}

/* Called by libjpeg as it reads: a progressive JPEG of more than
 * DSRC_JPEG_MAX_SCANS scans is refused (each scan is a pass over the whole
 * image, so thousands of tiny scans cost minutes). */
typedef struct jpeg_prog {
  struct jpeg_progress_mgr pub;
  img_ctx *c;
  jmp_buf *jb;
} jpeg_prog;

static void jpeg_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor)
    return;
  jpeg_prog *p = (jpeg_prog *)cinfo->progress;
  j_decompress_ptr d = (j_decompress_ptr)cinfo;
  if (d->input_scan_number > DSRC_JPEG_MAX_SCANS) {
    p->c->rc = DSRC_IMG_TOO_LARGE;
    snprintf(p->c->msg, sizeof p->c->msg,
             "JPEG: more than %d scans; a real progressive JPEG has about "
             "10, so the file is hostile or corrupt",
             DSRC_JPEG_MAX_SCANS);
    longjmp(*p->jb, 1);
  }
}

/* After the header: the size against max_pixels, and the whole-image
 * coefficient buffer a progressive or multi-scan JPEG needs against the
 * memory cap `mem`. */
static int jpeg_header_ok(img_ctx *c, j_decompress_ptr d, uint64_t mem) {
  if (!img_size_ok(c, d->image_width, d->image_height))
    return 0;
  if (!d->progressive_mode && d->comps_in_scan >= d->num_components)
    return 1;
  uint64_t coef = 0;
  for (int ci = 0; ci < d->num_components; ci++) {
    const jpeg_component_info *comp = &d->comp_info[ci];
    /* rows rounded up to the sampling factor, as libjpeg allocates */
    uint64_t rows = comp->height_in_blocks + (uint64_t)comp->v_samp_factor;
    coef += (uint64_t)comp->width_in_blocks * rows * DCTSIZE2 *
            sizeof(JCOEF);
  }
  if (coef > mem) {
    c->rc = DSRC_IMG_TOO_LARGE;
    snprintf(c->msg, sizeof c->msg,
             "JPEG: this %s %ux%u image of %d components needs %llu bytes "
             "of coefficient buffers, over the decoder's memory limit of "
             "%llu bytes (%d bytes per pixel of key 'max_pixels'); raise "
             "max_pixels if the image is real",
             d->progressive_mode ? "progressive" : "multi-scan",
             (unsigned)d->image_width, (unsigned)d->image_height,
             d->num_components, (unsigned long long)coef,
             (unsigned long long)mem, IMG_JPEG_MEM_PER_PIXEL);
    return 0;
  }
  return 1;
}

static int jpeg_run(img_ctx *c, int channels, uint32_t *w, uint32_t *h) {
  struct jpeg_decompress_struct cinfo;
  jpeg_err err;
  jpeg_prog prog;
  memset(&cinfo, 0, sizeof cinfo);
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = jpeg_fail;
  err.pub.emit_message = jpeg_notice;
  err.c = c;
  memset(&prog, 0, sizeof prog);
  prog.pub.progress_monitor = jpeg_progress;
  prog.c = c;
  prog.jb = &err.jb;
  if (setjmp(err.jb)) {
    jpeg_destroy_decompress(&cinfo);
    return -1;
  }
  jpeg_create_decompress(&cinfo);
  /* The memory cap: jpeg_header_ok refuses a whole-image coefficient
   * buffer over `mem`; libjpeg itself refuses (it has no backing store)
   * one over max_memory_to_use, set a little higher so that its own small
   * allocations never make a buffer that passed the check fail. */
  uint64_t mem;
  if (torc_checked_mul(c->lim->max_pixels, IMG_JPEG_MEM_PER_PIXEL, &mem) ||
      mem > (uint64_t)LONG_MAX / 2)
    mem = (uint64_t)LONG_MAX / 2;
  if (mem < IMG_JPEG_MEM_MIN)
    mem = IMG_JPEG_MEM_MIN;
  cinfo.mem->max_memory_to_use = (long)(mem + IMG_JPEG_MEM_MIN);
  cinfo.progress = &prog.pub;
  if (c->data)
    jpeg_mem_src(&cinfo, (const unsigned char *)c->data,
                 (unsigned long)c->size);
  else
    jpeg_stdio_src(&cinfo, c->f);
  jpeg_read_header(&cinfo, TRUE);
  if (!jpeg_header_ok(c, &cinfo, mem)) {
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
    size_t rowbytes = (size_t)*w * (size_t)channels, total;
    if (torc_checked_mul_size(rowbytes, *h, &total)) {
      snprintf(c->msg, sizeof c->msg, "out of memory (%ux%u pixels)",
               (unsigned)*w, (unsigned)*h);
      jpeg_destroy_decompress(&cinfo);
      return -1;
    }
    c->pixels = malloc(total);
    if (c->pixels == NULL) {
      snprintf(c->msg, sizeof c->msg, "out of memory (%zu bytes)", total);
      jpeg_destroy_decompress(&cinfo);
      return -1;
    }
    while (cinfo.output_scanline < cinfo.output_height) {
      JSAMPROW row = c->pixels + rowbytes * cinfo.output_scanline;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
  }
  jpeg_destroy_decompress(&cinfo);
  return 0;
}

/* ---- the entry points ---- */

int dsrc_image_probe(const char *path, const dsrc_img_limits *lim,
                     int *format, uint32_t *w, uint32_t *h, char *why,
                     size_t why_size) {
  img_ctx c;
  memset(&c, 0, sizeof c);
  c.lim = lim;
  int rc = img_open(&c, path, 0, format);
  if (rc == 0)
    rc = *format == DSRC_IMG_PNG ? png_run(&c, 0, w, h)
                                 : jpeg_run(&c, 0, w, h);
  if (rc != 0) {
    snprintf(why, why_size, "%s", c.msg);
    rc = c.rc;
  }
  img_ctx_free(&c);
  return rc;
}

int dsrc_image_decode(const char *path, int channels,
                      const dsrc_img_limits *lim, uint8_t **pixels,
                      uint32_t *w, uint32_t *h, char *why, size_t why_size) {
  img_ctx c;
  memset(&c, 0, sizeof c);
  c.lim = lim;
  int format = 0;
  *pixels = NULL;
  int rc = img_open(&c, path, 1, &format);
  if (rc == 0)
    rc = format == DSRC_IMG_PNG ? png_run(&c, channels, w, h)
                                : jpeg_run(&c, channels, w, h);
  if (rc != 0) {
    snprintf(why, why_size, "%s", c.msg);
    rc = c.rc;
  } else {
    *pixels = c.pixels;
    c.pixels = NULL;
  }
  img_ctx_free(&c);
  return rc;
}
