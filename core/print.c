/* core/print.c — tensor printing in PyTorch 1.13's format (the rules of
 * torch/_tensor_str.py: precision 4, int/fixed/scientific mode, aligned
 * widths, 80-column wrapping, "..." summaries beyond 1000 elements), plus
 * the one-line torc_describe. Host tensors are read in place through their
 * strides; device tensors through the device's copy, edge items only.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* PyTorch's default print options (torch._tensor_str.PRINT_OPTS). */
enum {
  PRINT_PRECISION = 4,
  PRINT_THRESHOLD = 1000, /* summarise when numel > threshold */
  PRINT_EDGEITEMS = 3,    /* items kept at each end of a summarised dim */
  PRINT_LINEWIDTH = 80
};

/* "tensor(": its length is the indent of every continuation line. */
#define PRINT_PREFIX "tensor("
#define PRINT_INDENT ((int)(sizeof PRINT_PREFIX - 1))

/* ---- a growable string ---- */

typedef struct strbuf {
  char *s;
  size_t len, cap;
  int oom;
} strbuf;

static void sb_reserve(strbuf *b, size_t extra) {
  if (b->oom || b->len + extra + 1 <= b->cap)
    return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1)
    cap *= 2;
  char *s = torc__realloc(b->s, cap);
  if (s == NULL) {
    b->oom = 1;
    return;
  }
  b->s = s;
  b->cap = cap;
}

static void sb_putn(strbuf *b, const char *s, size_t n) {
  sb_reserve(b, n);
  if (b->oom)
    return;
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
}

static void sb_puts(strbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_repeat(strbuf *b, char c, int n) {
  if (n <= 0)
    return;
  sb_reserve(b, (size_t)n);
  if (b->oom)
    return;
  memset(b->s + b->len, c, (size_t)n);
  b->len += (size_t)n;
  b->s[b->len] = '\0';
}

/* ---- element formatting (torch._tensor_str._Formatter) ---- */

/* Longest formatted element: "%.0f" is used only below 1e8 and "%.4e" is
 * short, but keep room for any double. */
#define ELEM_MAX 400

typedef struct formatter {
  int floating; /* else integer or bool */
  int is_bool;
  int int_mode; /* floats that are all integers: "1.", "-2." */
  int sci_mode; /* "1.0000e+05" */
  int width;    /* every element is padded to this width */
} formatter;

/* One double as Python's "{:.Nf}" / "{:.Ne}" / "{:.0f}" would write it:
 * C's printf rounds the same way (exactly, ties to even); only NaN (never
 * signed in Python) and infinities need care. */
static int fmt_float_raw(char *buf, double v, int sci, int int_mode) {
  if (isnan(v))
    return snprintf(buf, ELEM_MAX, "nan");
  if (isinf(v))
    return snprintf(buf, ELEM_MAX, v < 0 ? "-inf" : "inf");
  if (sci)
    return snprintf(buf, ELEM_MAX, "%.*e", PRINT_PRECISION, v);
  if (int_mode)
    return snprintf(buf, ELEM_MAX, "%.0f", v);
  return snprintf(buf, ELEM_MAX, "%.*f", PRINT_PRECISION, v);
}

static int fmt_int_raw(char *buf, int64_t v, int is_bool) {
  if (is_bool)
    return snprintf(buf, ELEM_MAX, "%s", v ? "True" : "False");
  return snprintf(buf, ELEM_MAX, "%lld", (long long)v);
}

/* Chooses the mode and width from the values shown (n of them: all of the
 * tensor, or only the edge items when it is summarised). */
static void formatter_init(formatter *f, torc_dtype dt, const double *fv,
                           const int64_t *iv, int64_t n) {
  char buf[ELEM_MAX];
  memset(f, 0, sizeof *f);
  f->floating = torc_dtype_is_float(dt);
  f->is_bool = dt == TORC_BOOL;
  f->int_mode = 1;
  f->width = 1;
  if (!f->floating) {
    for (int64_t i = 0; i < n; i++) {
      int len = fmt_int_raw(buf, iv[i], f->is_bool);
      if (len > f->width)
        f->width = len;
    }
    return;
  }
  /* Only the nonzero finite values decide the mode and the width. */
  double amin = 0, amax = 0;
  int64_t n_valid = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = fv[i];
    if (!isfinite(v) || v == 0)
      continue;
    double a = fabs(v);
    if (n_valid == 0 || a < amin)
      amin = a;
    if (n_valid == 0 || a > amax)
      amax = a;
    if (v != ceil(v))
      f->int_mode = 0;
    n_valid++;
  }
  if (n_valid == 0)
    return;
  int sci = amax / amin > 1000.0 || amax > 1.0e8;
  if (!f->int_mode && amin < 1.0e-4)
    sci = 1;
  f->sci_mode = sci;
  for (int64_t i = 0; i < n; i++) {
    double v = fv[i];
    if (!isfinite(v) || v == 0)
      continue;
    int len;
    if (sci)
      len = fmt_float_raw(buf, v, 1, 0);
    else if (f->int_mode)
      len = fmt_float_raw(buf, v, 0, 1) + 1; /* the "." appended */
    else
      len = fmt_float_raw(buf, v, 0, 0);
    if (len > f->width)
      f->width = len;
  }
}

/* Appends one element padded on the left to the formatter's width. */
static void formatter_put(strbuf *b, const formatter *f, double fv,
                          int64_t iv) {
  char buf[ELEM_MAX + 2];
  int len;
  if (f->floating) {
    len = fmt_float_raw(buf, fv, f->sci_mode, f->int_mode && !f->sci_mode);
    if (f->int_mode && !f->sci_mode && isfinite(fv)) {
      buf[len++] = '.';
      buf[len] = '\0';
    }
  } else {
    len = fmt_int_raw(buf, iv, f->is_bool);
  }
  sb_repeat(b, ' ', f->width - len);
  sb_putn(b, buf, (size_t)len);
}

/* ---- reading the values shown ---- */

/* The values printed, gathered on the host: along each summarised dim only
 * the first and last PRINT_EDGEITEMS indices are kept (as PyTorch's
 * get_summarized_data), so a huge device tensor is never copied whole. */
typedef struct gathered {
  int ndim;
  int64_t shape[TORC_MAX_DIMS];   /* the tensor's shape */
  int64_t gshape[TORC_MAX_DIMS];  /* the gathered shape */
  int64_t gstride[TORC_MAX_DIMS]; /* contiguous strides of gshape */
  int summarised[TORC_MAX_DIMS];  /* dim shows edge items and "..." */
  int64_t n;                      /* numel of gshape */
  double *fv;                     /* floating dtypes */
  int64_t *iv;                    /* integer and bool dtypes */
} gathered;

static void gathered_free(gathered *g) {
  torc__free(g->fv);
  torc__free(g->iv);
}

/* Copies the block of `t` starting at `start` (shape `bshape`) to the host
 * and stores it in g at gathered position `gpos`. */
static torc_status gather_block(const torc_tensor *t, gathered *g,
                                const int64_t *start, const int64_t *bshape,
                                const int64_t *gpos, void *host) {
  int ndim = g->ndim;
  torc_dtype dt = torc_dtype_of(t);
  size_t esize = torc_dtype_size(dt);
  const int64_t *strides = torc_strides(t);
  int64_t offset = torc_storage_offset(t);
  int64_t bn = 1;
  for (int d = 0; d < ndim; d++) {
    offset += start[d] * strides[d];
    bn *= bshape[d];
  }
  torc_tensor *view = torc__view_of(t, bshape, strides, ndim, offset);
  if (view == NULL)
    return torc_last_status();
  torc_tensor *c = torc__contiguous(view);
  torc_release(view);
  if (c == NULL)
    return torc_last_status();
  torc_status st = torc_to_host(c, host, (size_t)bn * esize);
  torc_release(c);
  if (st != TORC_OK)
    return st;

  /* Scatter the block (row-major) into the gathered array. */
  int64_t idx[TORC_MAX_DIMS] = {0};
  for (int64_t i = 0; i < bn; i++) {
    int64_t gi = 0;
    for (int d = 0; d < ndim; d++)
      gi += (gpos[d] + idx[d]) * g->gstride[d];
    const char *p = (const char *)host + (size_t)i * esize;
    if (g->fv != NULL)
      g->fv[gi] = torc__load_f64(dt, p);
    else
      g->iv[gi] = torc__load_i64(dt, p);
    for (int d = ndim - 1; d >= 0; d--) {
      if (++idx[d] < bshape[d])
        break;
      idx[d] = 0;
    }
  }
  return TORC_OK;
}

/* The gathered values of a tensor in host memory, read through its
 * strides: gathered index k of a summarised dim maps to k for the head and
 * size - 2 * EDGEITEMS + k for the tail. */
static void gather_host(const torc_tensor *t, gathered *g) {
  torc_dtype dt = torc_dtype_of(t);
  size_t esize = torc_dtype_size(dt);
  const char *base = torc_data(t); /* the first element */
  const int64_t *strides = torc_strides(t);
  int64_t idx[TORC_MAX_DIMS] = {0};
  for (int64_t gi = 0; gi < g->n; gi++) {
    int64_t off = 0;
    for (int d = 0; d < g->ndim; d++) {
      int64_t src = idx[d];
      if (g->summarised[d] && src >= PRINT_EDGEITEMS)
        src += g->shape[d] - 2 * PRINT_EDGEITEMS;
      off += src * strides[d];
    }
    const char *p = base + off * (int64_t)esize;
    if (g->fv != NULL)
      g->fv[gi] = torc__load_f64(dt, p);
    else
      g->iv[gi] = torc__load_i64(dt, p);
    for (int d = g->ndim - 1; d >= 0; d--) {
      if (++idx[d] < g->gshape[d])
        break;
      idx[d] = 0;
    }
  }
}

static torc_status gather(const torc_tensor *t, int summarise, gathered *g) {
  memset(g, 0, sizeof *g);
  g->ndim = torc_ndim(t);
  const int64_t *shape = torc_shape(t);
  int n_summ = 0;
  int summ_dims[TORC_MAX_DIMS];
  g->n = 1;
  for (int d = 0; d < g->ndim; d++) {
    g->shape[d] = shape[d];
    g->summarised[d] = summarise && shape[d] > 2 * PRINT_EDGEITEMS;
    g->gshape[d] = g->summarised[d] ? 2 * PRINT_EDGEITEMS : shape[d];
    if (g->summarised[d])
      summ_dims[n_summ++] = d;
    g->n *= g->gshape[d];
  }
  torc__contiguous_strides(g->gshape, g->ndim, g->gstride);

  torc_dtype dt = torc_dtype_of(t);
  size_t n_alloc = (size_t)(g->n > 0 ? g->n : 1);
  if (torc_dtype_is_float(dt))
    g->fv = torc__malloc(n_alloc * sizeof *g->fv);
  else
    g->iv = torc__malloc(n_alloc * sizeof *g->iv);
  if (g->fv == NULL && g->iv == NULL)
    return torc_set_error(TORC_ERR_OOM,
                          "torc_fprint: cannot allocate %zu bytes to print a "
                          "tensor of %lld elements",
                          n_alloc * sizeof(double), (long long)g->n);

  /* Host memory is read in place through the strides: no copy, no kernel
   * (so printing works before any plugin is loaded). */
  if (torc_device_is_host(torc_device_of(t))) {
    gather_host(t, g);
    return TORC_OK;
  }

  /* The largest block is the whole gathered array (no summarised dim). */
  void *host = torc__malloc(n_alloc * torc_dtype_size(dt));
  if (host == NULL) {
    gathered_free(g);
    return torc_set_error(TORC_ERR_OOM,
                          "torc_fprint: cannot allocate %zu bytes to copy a "
                          "tensor of %lld elements from %s",
                          n_alloc * torc_dtype_size(dt), (long long)g->n,
                          torc__devname(torc_device_of(t)));
  }

  /* One block per choice of head or tail along each summarised dim. */
  torc_status st = TORC_OK;
  for (unsigned mask = 0; mask < (1u << n_summ) && st == TORC_OK; mask++) {
    int64_t start[TORC_MAX_DIMS], bshape[TORC_MAX_DIMS], gpos[TORC_MAX_DIMS];
    for (int d = 0; d < g->ndim; d++) {
      start[d] = 0;
      gpos[d] = 0;
      bshape[d] = g->gshape[d];
    }
    for (int k = 0; k < n_summ; k++) {
      int d = summ_dims[k];
      bshape[d] = PRINT_EDGEITEMS;
      if (mask & (1u << k)) {
        start[d] = shape[d] - PRINT_EDGEITEMS;
        gpos[d] = PRINT_EDGEITEMS;
      }
    }
    st = gather_block(t, g, start, bshape, gpos, host);
  }
  torc__free(host);
  if (st != TORC_OK)
    gathered_free(g);
  return st;
}

/* ---- layout (torch._tensor_str._tensor_str_with_formatter) ---- */

static void put_elem(strbuf *b, const formatter *f, const gathered *g,
                     int64_t gi) {
  formatter_put(b, f, g->fv ? g->fv[gi] : 0, g->iv ? g->iv[gi] : 0);
}

/* The last dim as PyTorch's _vector_str: elements (and " ...") joined by
 * ", ", as many per line as fit in linewidth - indent. */
static void put_vector(strbuf *b, const formatter *f, const gathered *g,
                       int dim, int64_t base, int indent) {
  int elem_len = f->width + 2;
  int per_line = (PRINT_LINEWIDTH - indent) / elem_len;
  if (per_line < 1)
    per_line = 1;
  int64_t n_items = g->summarised[dim] ? 2 * PRINT_EDGEITEMS + 1
                                       : g->gshape[dim];
  sb_puts(b, "[");
  for (int64_t k = 0; k < n_items; k++) {
    if (k > 0) {
      if (k % per_line == 0) {
        sb_puts(b, ",\n");
        sb_repeat(b, ' ', indent + 1);
      } else {
        sb_puts(b, ", ");
      }
    }
    int64_t gi = k;
    if (g->summarised[dim]) {
      if (k == PRINT_EDGEITEMS) {
        sb_puts(b, " ...");
        continue;
      }
      if (k > PRINT_EDGEITEMS)
        gi = k - 1;
    }
    put_elem(b, f, g, base + gi * g->gstride[dim]);
  }
  sb_puts(b, "]");
}

static void put_dims(strbuf *b, const formatter *f, const gathered *g,
                     int dim, int64_t base, int indent) {
  if (g->ndim == 0) {
    put_elem(b, f, g, 0);
    return;
  }
  if (dim == g->ndim - 1) {
    put_vector(b, f, g, dim, base, indent);
    return;
  }
  int64_t n_items = g->summarised[dim] ? 2 * PRINT_EDGEITEMS + 1
                                       : g->gshape[dim];
  int rest = g->ndim - dim; /* dims from here on: blank lines between slices */
  sb_puts(b, "[");
  for (int64_t k = 0; k < n_items; k++) {
    if (k > 0) {
      sb_puts(b, ",");
      sb_repeat(b, '\n', rest - 1);
      sb_repeat(b, ' ', indent + 1);
    }
    int64_t gi = k;
    if (g->summarised[dim]) {
      if (k == PRINT_EDGEITEMS) {
        sb_puts(b, "...");
        continue;
      }
      if (k > PRINT_EDGEITEMS)
        gi = k - 1;
    }
    put_dims(b, f, g, dim + 1, base + gi * g->gstride[dim], indent + 1);
  }
  sb_puts(b, "]");
}

/* ---- suffixes (torch._tensor_str._add_suffixes) ---- */

static void put_suffixes(strbuf *b, char suffixes[][96], int n) {
  /* Length of the last line, plus 2 as PyTorch counts it. */
  size_t line_start = 0;
  for (size_t i = 0; i < b->len; i++)
    if (b->s[i] == '\n')
      line_start = i + 1;
  size_t last = b->oom ? 0 : b->len - line_start + 2;
  for (int i = 0; i < n; i++) {
    size_t slen = strlen(suffixes[i]);
    if (last + slen + 2 > PRINT_LINEWIDTH) {
      sb_puts(b, ",\n");
      sb_repeat(b, ' ', PRINT_INDENT);
      last = (size_t)PRINT_INDENT + slen;
    } else {
      sb_puts(b, ", ");
      last += slen + 2;
    }
    sb_puts(b, suffixes[i]);
  }
  sb_puts(b, ")");
}

/* ---- public functions ---- */

/* Builds the whole text into b (which the caller frees). */
static torc_status render(const torc_tensor *t, strbuf *b) {
  char suffixes[3][96];
  int n_suffix = 0;
  torc_dtype dt = torc_dtype_of(t);
  torc_device dev = torc_device_of(t);
  int64_t numel = torc_numel(t);
  int ndim = torc_ndim(t);

  /* Device first, as PyTorch: shown unless it is the cpu. */
  if (!torc_device_is_host(dev)) {
    char name[TORC_DEVICE_TYPE_MAX + 16];
    torc_device_str(dev, name, sizeof name);
    snprintf(suffixes[n_suffix++], sizeof suffixes[0], "device='%s'", name);
  }

  sb_puts(b, PRINT_PREFIX);
  if (numel == 0) {
    /* No element tells the dtype, so only f32 (the default) is implied;
     * a size other than (0,) is spelt out, as NumPy does. */
    sb_puts(b, "[]");
    if (ndim != 1) {
      char *s = suffixes[n_suffix++];
      size_t len = (size_t)snprintf(s, sizeof suffixes[0], "size=(");
      for (int d = 0; d < ndim && len < sizeof suffixes[0]; d++)
        len += (size_t)snprintf(s + len, sizeof suffixes[0] - len, "%s%lld",
                                d ? ", " : "", (long long)torc_shape(t)[d]);
      if (len < sizeof suffixes[0])
        snprintf(s + len, sizeof suffixes[0] - len, ")");
    }
    if (dt != TORC_F32)
      snprintf(suffixes[n_suffix++], sizeof suffixes[0], "dtype=%s",
               torc_dtype_name(dt));
  } else {
    if (dt != TORC_F32 && dt != TORC_I64 && dt != TORC_BOOL)
      snprintf(suffixes[n_suffix++], sizeof suffixes[0], "dtype=%s",
               torc_dtype_name(dt));
    gathered g;
    torc_status st = gather(t, numel > PRINT_THRESHOLD, &g);
    if (st != TORC_OK)
      return st;
    formatter f;
    formatter_init(&f, dt, g.fv, g.iv, g.n);
    put_dims(b, &f, &g, 0, 0, PRINT_INDENT);
    gathered_free(&g);
  }
  put_suffixes(b, suffixes, n_suffix);
  if (b->oom)
    return torc_set_error(TORC_ERR_OOM,
                          "torc_fprint: out of memory building the text of a "
                          "tensor of %lld elements",
                          (long long)numel);
  return TORC_OK;
}

TORC_API char *torc_to_string(const torc_tensor *t) {
  if (t == NULL) {
    torc__null_input("torc_to_string");
    return NULL;
  }
  strbuf b = {0};
  if (render(t, &b) != TORC_OK) {
    torc__free(b.s);
    return NULL;
  }
  return b.s;
}

TORC_API torc_status torc_fprint(FILE *f, const torc_tensor *t) {
  if (f == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_fprint: the FILE pointer is NULL; pass stdout, "
                          "stderr or an open file");
  char *s = torc_to_string(t);
  if (s == NULL)
    return t == NULL ? TORC_ERR_NULL : torc_last_status();
  int bad = fputs(s, f) == EOF;
  torc__free(s);
  if (bad)
    return torc_set_error(TORC_ERR_IO,
                          "torc_fprint: writing the tensor's text failed "
                          "(stream error or disk full)");
  return TORC_OK;
}

TORC_API torc_status torc_print(const torc_tensor *t) {
  torc_status st = torc_fprint(stdout, t);
  if (st != TORC_OK)
    return st;
  if (fputc('\n', stdout) == EOF)
    return torc_set_error(TORC_ERR_IO,
                          "torc_print: writing to stdout failed");
  return TORC_OK;
}

TORC_API char *torc_describe(const torc_tensor *t, char *buf, size_t size) {
  if (buf == NULL || size == 0)
    return buf;
  if (t == NULL) {
    snprintf(buf, size, "(null tensor)");
    return buf;
  }
  char shape[TORC_MAX_DIMS * 24 + 4];
  char dev[TORC_DEVICE_TYPE_MAX + 16];
  torc__shape_str(torc_shape(t), torc_ndim(t), shape, sizeof shape);
  torc_device_str(torc_device_of(t), dev, sizeof dev);
  snprintf(buf, size, "%s%s on %s", torc_dtype_name(torc_dtype_of(t)), shape,
           dev);
  return buf;
}
