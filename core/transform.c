/* core/transform.c — per-sample transform pipelines: the INI syntax
 * ("scale(0.0039), random_crop(28, 4), cast(f32)") parsed strictly, and
 * the stages run as plain loops over contiguous host memory (no kernels,
 * no scope: they run on loader threads). Random stages draw from Philox
 * keyed by (seed, epoch) at counter index * 2^32 + draw, nothing else.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "torc/philox.h"
#include "data_internal.h"
#include "internal.h"

enum {
  ST_SCALE,
  ST_NORMALIZE,
  ST_RANDOM_CROP,
  ST_RANDOM_HFLIP,
  ST_CENTER_CROP,
  ST_RESIZE,
  ST_CAST,
  ST_RANDOM_VFLIP
};

typedef struct stage_info {
  const char *name;
  const char *usage; /* for messages */
} stage_info;

static const stage_info stage_infos[] = {
    [ST_SCALE] = {"scale", "scale(c): x * c"},
    [ST_NORMALIZE] = {"normalize",
                      "normalize(mean, std) for every channel, or "
                      "normalize(m1, .., mk, s1, .., sk) for k channels "
                      "(dim 0 of a sample)"},
    [ST_RANDOM_CROP] = {"random_crop",
                        "random_crop(size), random_crop(size, padding) or "
                        "random_crop(h, w, padding)"},
    [ST_RANDOM_HFLIP] = {"random_hflip", "random_hflip(p) with 0 <= p <= 1, "
                                         "or random_hflip (p = 0.5)"},
    [ST_CENTER_CROP] = {"center_crop", "center_crop(size) or "
                                       "center_crop(h, w)"},
    [ST_RESIZE] = {"resize", "resize(h, w) (bilinear)"},
    [ST_CAST] = {"cast", "cast(dtype) with dtype one of f32, f64, f16, bf16, "
                         "i32, i64, u8, bool"},
    [ST_RANDOM_VFLIP] = {"random_vflip", "random_vflip(p) with 0 <= p <= 1, "
                                         "or random_vflip (p = 0.5)"},
};

#define N_STAGE_KINDS ((int)(sizeof stage_infos / sizeof stage_infos[0]))

typedef struct stage {
  int kind;
  int n;             /* normalize: channels (k) */
  double *mean, *std; /* normalize */
  double c;           /* scale; random_hflip, random_vflip: p */
  int64_t h, w, pad;  /* crops, resize */
  torc_dtype dtype;   /* cast */
  char text[96];      /* the stage as written, for messages */
} stage;

struct torc_transform {
  int n;
  stage *st;
  int random;
};

/* ---- host memory helpers ---- */

static void *host_ptr(const torc_tensor *t) {
  return (char *)t->storage->ptr +
         (size_t)t->offset * torc_dtype_size(t->dtype);
}

/* t as a contiguous cpu tensor: t retained, or a strided copy made on the
 * host (no kernel needed). */
static torc_tensor *host_contiguous(const torc_tensor *t) {
  if (torc_is_contiguous(t))
    return torc_retain((torc_tensor *)t);
  torc_tensor *out = torc__empty(t->shape, t->ndim, t->dtype, TORC_CPU);
  if (out == NULL)
    return NULL;
  size_t es = torc_dtype_size(t->dtype);
  int64_t n = torc__numel(t->shape, t->ndim);
  int64_t idx[TORC_MAX_DIMS] = {0};
  const char *src = t->storage->ptr;
  char *dst = out->storage->ptr;
  for (int64_t i = 0; i < n; i++) {
    int64_t off = t->offset;
    for (int d = 0; d < t->ndim; d++)
      off += idx[d] * t->strides[d];
    memcpy(dst + (size_t)i * es, src + (size_t)off * es, es);
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->shape[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

torc_tensor *torc__host_contiguous(const torc_tensor *t) {
  return host_contiguous(t);
}

void *torc__host_data(const torc_tensor *t) { return host_ptr(t); }

/* ---- parsing ---- */

static void free_stages(stage *st, int n) {
  for (int i = 0; i < n; i++) {
    torc__free(st[i].mean);
    torc__free(st[i].std);
  }
  torc__free(st);
}

void torc_transform_free(torc_transform *t) {
  if (t == NULL)
    return;
  free_stages(t->st, t->n);
  torc__free(t);
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  size_t l = strlen(s);
  while (l > 0 && isspace((unsigned char)s[l - 1]))
    s[--l] = '\0';
  return s;
}

/* Error prefix: transform "SPEC": stage N 'TEXT': */
static torc_status stage_error(const char *spec, int pos, const char *text,
                               const char *fmt, ...) TORC_PRINTF(4, 5);
static torc_status stage_error(const char *spec, int pos, const char *text,
                               const char *fmt, ...) {
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return torc_set_error(TORC_ERR_INVALID,
                        "transform \"%s\": stage %d '%s': %s", spec, pos,
                        text, msg);
}

static int parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v))
    return 0;
  *out = v;
  return 1;
}

static int parse_int(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end != '\0' || errno == ERANGE)
    return 0;
  *out = v;
  return 1;
}

/* Argument names per stage (and arity), for messages. */
static const char *arg_name(int kind, int n_args, int i) {
  switch (kind) {
  case ST_SCALE: return "c";
  case ST_RANDOM_HFLIP:
  case ST_RANDOM_VFLIP: return "p";
  case ST_CAST: return "dtype";
  case ST_RESIZE: return i == 0 ? "h" : "w";
  case ST_CENTER_CROP: return n_args == 1 ? "size" : i == 0 ? "h" : "w";
  case ST_RANDOM_CROP:
    if (n_args == 3)
      return i == 0 ? "h" : i == 1 ? "w" : "padding";
    return i == 0 ? "size" : "padding";
  case ST_NORMALIZE:
    if (n_args == 2)
      return i == 0 ? "mean" : "std";
    return i < n_args / 2 ? "a mean" : "a std";
  }
  return "?";
}

/* An integer argument >= lo. */
static torc_status int_arg(const char *spec, int pos, stage *s, int n_args,
                           int i, const char *v, int64_t lo, int64_t *out) {
  if (!parse_int(v, out))
    return stage_error(spec, pos, s->text,
                       "argument %d (%s) = '%s' is not an integer; %s", i + 1,
                       arg_name(s->kind, n_args, i), v,
                       stage_infos[s->kind].usage);
  if (*out < lo || *out > (int64_t)1 << 31)
    return stage_error(spec, pos, s->text,
                       "argument %d (%s) = %lld is out of range; it must be "
                       "from %lld to 2147483648",
                       i + 1, arg_name(s->kind, n_args, i), (long long)*out,
                       (long long)lo);
  return TORC_OK;
}

static torc_status num_arg(const char *spec, int pos, stage *s, int n_args,
                           int i, const char *v, double *out) {
  if (!parse_double(v, out))
    return stage_error(spec, pos, s->text,
                       "argument %d (%s) = '%s' is not a finite number; %s",
                       i + 1, arg_name(s->kind, n_args, i), v,
                       stage_infos[s->kind].usage);
  return TORC_OK;
}

static torc_status arity_error(const char *spec, int pos, stage *s,
                               int n_args, const char *want) {
  return stage_error(spec, pos, s->text, "takes %s argument%s, got %d; %s",
                     want, strcmp(want, "1") == 0 ? "" : "s", n_args,
                     stage_infos[s->kind].usage);
}

static torc_status parse_args(const char *spec, int pos, stage *s,
                              char **args, int n_args) {
  torc_status st;
  switch (s->kind) {
  case ST_SCALE:
    if (n_args != 1)
      return arity_error(spec, pos, s, n_args, "1");
    return num_arg(spec, pos, s, n_args, 0, args[0], &s->c);
  case ST_RANDOM_HFLIP:
  case ST_RANDOM_VFLIP:
    /* torchvision's RandomHorizontalFlip / RandomVerticalFlip: p = 0.5. */
    if (n_args > 1)
      return arity_error(spec, pos, s, n_args, "0 or 1");
    s->c = 0.5;
    if (n_args == 1 && (st = num_arg(spec, pos, s, n_args, 0, args[0], &s->c)))
      return st;
    if (s->c < 0 || s->c > 1)
      return stage_error(spec, pos, s->text,
                         "argument 1 (p) = %g is not a probability; use a "
                         "value from 0 to 1",
                         s->c);
    return TORC_OK;
  case ST_CAST:
    if (n_args != 1)
      return arity_error(spec, pos, s, n_args, "1");
    if (torc_dtype_parse(args[0], &s->dtype) != TORC_OK)
      return stage_error(spec, pos, s->text,
                         "argument 1 (dtype) = '%s' is not a dtype; use one "
                         "of f32, f64, f16, bf16, i32, i64, u8, bool",
                         args[0]);
    return TORC_OK;
  case ST_RESIZE:
    if (n_args != 2)
      return arity_error(spec, pos, s, n_args, "2");
    if ((st = int_arg(spec, pos, s, n_args, 0, args[0], 1, &s->h)) ||
        (st = int_arg(spec, pos, s, n_args, 1, args[1], 1, &s->w)))
      return st;
    return TORC_OK;
  case ST_CENTER_CROP:
    if (n_args != 1 && n_args != 2)
      return arity_error(spec, pos, s, n_args, "1 or 2");
    if ((st = int_arg(spec, pos, s, n_args, 0, args[0], 1, &s->h)))
      return st;
    s->w = s->h;
    if (n_args == 2 && (st = int_arg(spec, pos, s, n_args, 1, args[1], 1,
                                     &s->w)))
      return st;
    return TORC_OK;
  case ST_RANDOM_CROP:
    if (n_args < 1 || n_args > 3)
      return arity_error(spec, pos, s, n_args, "1, 2 or 3");
    if ((st = int_arg(spec, pos, s, n_args, 0, args[0], 1, &s->h)))
      return st;
    s->w = s->h;
    s->pad = 0;
    if (n_args == 2 &&
        (st = int_arg(spec, pos, s, n_args, 1, args[1], 0, &s->pad)))
      return st;
    if (n_args == 3 &&
        ((st = int_arg(spec, pos, s, n_args, 1, args[1], 1, &s->w)) ||
         (st = int_arg(spec, pos, s, n_args, 2, args[2], 0, &s->pad))))
      return st;
    return TORC_OK;
  case ST_NORMALIZE:
    if (n_args < 2 || n_args % 2 != 0)
      return arity_error(spec, pos, s, n_args, "an even number (2 or more) of");
    s->n = n_args / 2;
    s->mean = torc__calloc((size_t)s->n, sizeof *s->mean);
    s->std = torc__calloc((size_t)s->n, sizeof *s->std);
    if (s->mean == NULL || s->std == NULL)
      return torc_set_error(TORC_ERR_OOM, "out of memory parsing a transform");
    for (int i = 0; i < n_args; i++) {
      double *dst = i < s->n ? &s->mean[i] : &s->std[i - s->n];
      if ((st = num_arg(spec, pos, s, n_args, i, args[i], dst)))
        return st;
      if (i >= s->n && !(*dst > 0))
        return stage_error(spec, pos, s->text,
                           "argument %d (%s) = %g must be > 0 (it divides)",
                           i + 1, arg_name(s->kind, n_args, i), *dst);
    }
    return TORC_OK;
  }
  return TORC_OK;
}

/* Parses one "name(args)" from `text` (trimmed, NUL-terminated). */
static torc_status parse_stage(const char *spec, int pos, char *text,
                               stage *s) {
  snprintf(s->text, sizeof s->text, "%s", text);
  char *open = strchr(text, '(');
  char name[64];
  size_t nl = open ? (size_t)(open - text) : strlen(text);
  while (nl > 0 && isspace((unsigned char)text[nl - 1]))
    nl--;
  if (nl >= sizeof name)
    nl = sizeof name - 1;
  memcpy(name, text, nl);
  name[nl] = '\0';
  s->kind = -1;
  for (int k = 0; k < N_STAGE_KINDS; k++)
    if (strcmp(name, stage_infos[k].name) == 0)
      s->kind = k;
  if (s->kind < 0) {
    const char *names[N_STAGE_KINDS];
    char list[300] = "", hint[96];
    size_t len = 0;
    for (int k = 0; k < N_STAGE_KINDS; k++) {
      names[k] = stage_infos[k].name;
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                              k ? ", " : "", names[k]);
    }
    torc__suggest(name, names, N_STAGE_KINDS, hint, sizeof hint);
    return stage_error(spec, pos, s->text,
                       "unknown stage '%s'%s; the stages are: %s", name, hint,
                       list);
  }
  /* The flips' one argument has a default: the bare name is enough. */
  if (open == NULL &&
      (s->kind == ST_RANDOM_HFLIP || s->kind == ST_RANDOM_VFLIP))
    return parse_args(spec, pos, s, NULL, 0);
  if (open == NULL)
    return stage_error(spec, pos, s->text,
                       "the arguments must follow in parentheses: %s",
                       stage_infos[s->kind].usage);
  /* The ')' matching the '(' (the splitter saw balanced parentheses). */
  char *close = open;
  for (int depth = 0; *close; close++) {
    if (*close == '(')
      depth++;
    else if (*close == ')' && --depth == 0)
      break;
  }
  if (*close == '\0')
    close = NULL;
  if (close == NULL)
    return stage_error(spec, pos, s->text, "'(' is never closed; %s",
                       stage_infos[s->kind].usage);
  if (*trim(close + 1) != '\0')
    return stage_error(spec, pos, s->text,
                       "unexpected text '%s' after ')'; separate stages "
                       "with ','",
                       trim(close + 1));
  *close = '\0';
  enum { MAX_ARGS = 64 }; /* normalize of 32 features */
  char *args[MAX_ARGS];
  int n_args = 0;
  char *inner = trim(open + 1);
  if (*inner) {
    for (char *p = inner;;) {
      char *comma = strchr(p, ',');
      if (comma)
        *comma = '\0';
      if (n_args == MAX_ARGS)
        return stage_error(spec, pos, s->text, "more than %d arguments; %s",
                           MAX_ARGS, stage_infos[s->kind].usage);
      args[n_args] = trim(p);
      if (*args[n_args] == '\0')
        return stage_error(spec, pos, s->text, "argument %d is empty; %s",
                           n_args + 1, stage_infos[s->kind].usage);
      n_args++;
      if (!comma)
        break;
      p = comma + 1;
    }
  }
  return parse_args(spec, pos, s, args, n_args);
}

torc_transform *torc_transform_parse(const char *spec) {
  torc_transform *t = torc__calloc(1, sizeof *t);
  char *buf = torc__strdup(spec ? spec : "");
  if (t == NULL || buf == NULL) {
    torc__free(t), torc__free(buf);
    torc_set_error(TORC_ERR_OOM, "out of memory parsing a transform");
    return NULL;
  }
  torc_status st = TORC_OK;
  int cap = 0;
  /* Stages are separated by commas outside parentheses. */
  char *p = buf;
  int pos = 1;
  while (st == TORC_OK) {
    while (isspace((unsigned char)*p))
      p++;
    if (*p == '\0' && t->n == 0 && pos == 1)
      break; /* empty spec: identity */
    char *q = p;
    int depth = 0;
    while (*q && !(*q == ',' && depth == 0)) {
      if (*q == '(')
        depth++;
      else if (*q == ')' && --depth < 0) {
        st = stage_error(spec, pos, trim(p), "')' without '('");
        break;
      }
      q++;
    }
    if (st)
      break;
    int last = *q == '\0';
    *q = '\0';
    char *text = trim(p);
    if (*text == '\0') {
      st = torc_set_error(TORC_ERR_INVALID,
                          "transform \"%s\": stage %d is empty; separate "
                          "stages with single commas and leave no comma at "
                          "the end",
                          spec, pos);
      break;
    }
    if (t->n == cap) {
      int nc = cap ? cap * 2 : 4;
      stage *ns = torc__realloc(t->st, (size_t)nc * sizeof *ns);
      if (ns == NULL) {
        st = torc_set_error(TORC_ERR_OOM, "out of memory parsing a "
                                          "transform");
        break;
      }
      t->st = ns;
      cap = nc;
    }
    stage *s = &t->st[t->n++];
    memset(s, 0, sizeof *s);
    st = parse_stage(spec, pos, text, s);
    if (st == TORC_OK &&
        (s->kind == ST_RANDOM_CROP || s->kind == ST_RANDOM_HFLIP ||
         s->kind == ST_RANDOM_VFLIP))
      t->random = 1;
    if (last)
      break;
    p = q + 1;
    pos++;
  }
  torc__free(buf);
  if (st != TORC_OK) {
    torc_transform_free(t);
    return NULL;
  }
  return t;
}

int torc_transform_is_random(const torc_transform *t) {
  return t ? t->random : 0;
}

/* ---- applying ---- */

typedef struct rng {
  uint64_t key;
  uint64_t base; /* index << 32 */
  uint32_t draw;
} rng;

static double rng_uniform(rng *r) {
  return torc_philox_uniform(r->key, r->base + r->draw++);
}

/* Uniform integer in [0, n). */
static int64_t rng_int(rng *r, int64_t n) {
  return torc_philox_randint(r->key, r->base + r->draw++, 0, n);
}

static torc_dtype float_out(torc_dtype in) {
  return in == TORC_F64 ? TORC_F64 : TORC_F32;
}

static torc_status need_dims(const stage *s, const torc_tensor *x, int min) {
  if (x->ndim >= min)
    return TORC_OK;
  char sh[96];
  torc__shape_str(x->shape, x->ndim, sh, sizeof sh);
  return torc_set_error(TORC_ERR_SHAPE,
                        "transform stage '%s' needs a sample with at least %d "
                        "dims (%s), got shape %s",
                        s->text, min,
                        min == 1 ? "[..., W]" : "[..., H, W]", sh);
}

/* Elementwise stages on a contiguous x: scale and normalize. */
static torc_tensor *apply_affine(const stage *s, const torc_tensor *x) {
  int64_t n = torc__numel(x->shape, x->ndim);
  int64_t per = n; /* elements per channel */
  int k = 1;
  if (s->kind == ST_NORMALIZE && s->n > 1) {
    if (x->ndim < 1 || x->shape[0] != s->n) {
      char sh[96];
      torc__shape_str(x->shape, x->ndim, sh, sizeof sh);
      torc_set_error(TORC_ERR_SHAPE,
                     "transform stage '%s' has %d channels of mean and std, "
                     "but the sample has shape %s (channels are dim 0); give "
                     "one mean and one std, or one per channel",
                     s->text, s->n, sh);
      return NULL;
    }
    k = s->n;
    per = n / k;
  }
  torc_dtype odt = float_out(x->dtype);
  torc_tensor *out = torc__empty(x->shape, x->ndim, odt, TORC_CPU);
  if (out == NULL)
    return NULL;
  const char *src = host_ptr(x);
  size_t es = torc_dtype_size(x->dtype);
  if (odt == TORC_F32) {
    float *dst = host_ptr(out);
    int scale = s->kind == ST_SCALE;
    for (int c = 0; c < k; c++) {
      float a = scale ? (float)s->c : (float)s->mean[c];
      float b = scale ? 1.0f : (float)s->std[c];
      int64_t i0 = c * per, i1 = (c + 1) * per;
      /* The common inputs (u8 images, f32 features) without the generic
       * per-element load. */
      if (x->dtype == TORC_U8) { /* loops split so that they vectorise */
        const uint8_t *u = (const uint8_t *)src;
        if (scale)
          for (int64_t i = i0; i < i1; i++)
            dst[i] = (float)u[i] * a;
        else
          for (int64_t i = i0; i < i1; i++)
            dst[i] = ((float)u[i] - a) / b;
      } else if (x->dtype == TORC_F32) {
        const float *f = (const float *)src;
        if (scale)
          for (int64_t i = i0; i < i1; i++)
            dst[i] = f[i] * a;
        else
          for (int64_t i = i0; i < i1; i++)
            dst[i] = (f[i] - a) / b;
      } else {
        for (int64_t i = i0; i < i1; i++) {
          float v = (float)torc__load_f64(x->dtype, src + (size_t)i * es);
          dst[i] = scale ? v * a : (v - a) / b;
        }
      }
    }
  } else {
    double *dst = host_ptr(out);
    for (int c = 0; c < k; c++) {
      double a = s->kind == ST_SCALE ? s->c : s->mean[c];
      double b = s->kind == ST_SCALE ? 1.0 : s->std[c];
      for (int64_t i = c * per; i < (c + 1) * per; i++) {
        double v = torc__load_f64(x->dtype, src + (size_t)i * es);
        dst[i] = s->kind == ST_SCALE ? v * a : (v - a) / b;
      }
    }
  }
  return out;
}

/* scale(c) then normalize(mean, std) in one pass, the pipeline of every
 * image data set: per element ((float)x * c - mean) / std, rounded to f32
 * after each operation exactly as the two stages one after the other
 * would (the same results, bit for bit), without the intermediate tensor.
 * The loops are vectorised, cloned per ISA, and never contracted to FMAs
 * (a fused multiply-add rounds once, the two stages twice). */
/* Not under the sanitizers: an ifunc resolver runs while the library is
 * relocated, before their runtime is up, and crashes when instrumented. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&        \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define AFFINE_CLONES                                                          \
  __attribute__((target_clones("avx512f", "avx2", "default"),                  \
                 optimize("tree-vectorize", "vect-cost-model=dynamic",   \
                          "fp-contract=off")))
#else
#define AFFINE_CLONES
#endif

AFFINE_CLONES
static void scale_normalize_u8(float *restrict dst,
                               const uint8_t *restrict u, int64_t n, float c,
                               float m, float sd) {
  for (int64_t i = 0; i < n; i++) {
    float v = (float)u[i] * c;
    dst[i] = (v - m) / sd;
  }
}

AFFINE_CLONES
static void scale_normalize_f32(float *restrict dst, const float *restrict f,
                                int64_t n, float c, float m, float sd) {
  for (int64_t i = 0; i < n; i++) {
    float v = f[i] * c;
    dst[i] = (v - m) / sd;
  }
}

/* scale (s1) then normalize (s2) on a contiguous u8 or f32 x whose output
 * is f32; NULL with no error set when this pair does not apply (the
 * caller runs the stages one by one). */
static torc_tensor *apply_scale_normalize(const stage *s1, const stage *s2,
                                          const torc_tensor *x) {
  if (s1->kind != ST_SCALE || s2->kind != ST_NORMALIZE ||
      (x->dtype != TORC_U8 && x->dtype != TORC_F32) ||
      float_out(x->dtype) != TORC_F32)
    return NULL;
  int64_t n = torc__numel(x->shape, x->ndim);
  int k = s2->n > 1 ? s2->n : 1;
  if (k > 1 && (x->ndim < 1 || x->shape[0] != k))
    return NULL; /* normalize's own message, from the one-by-one path */
  int64_t per = n / k;
  torc_tensor *out = torc__empty(x->shape, x->ndim, TORC_F32, TORC_CPU);
  if (out == NULL)
    return NULL;
  float *dst = host_ptr(out);
  const char *src = host_ptr(x);
  for (int c = 0; c < k; c++) {
    int64_t i0 = c * per;
    if (x->dtype == TORC_U8)
      scale_normalize_u8(dst + i0, (const uint8_t *)src + i0, per,
                         (float)s1->c, (float)s2->mean[c],
                         (float)s2->std[c]);
    else
      scale_normalize_f32(dst + i0, (const float *)src + i0, per,
                          (float)s1->c, (float)s2->mean[c],
                          (float)s2->std[c]);
  }
  return out;
}

/* out[..., i, j] = x[..., top + i, left + j], zero outside x (a crop of a
 * zero-padded x when top/left are negative or the window overhangs). */
static torc_tensor *crop(const torc_tensor *x, int64_t top, int64_t left,
                         int64_t h, int64_t w) {
  int nd = x->ndim;
  int64_t shape[TORC_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)nd);
  int64_t H = shape[nd - 2], W = shape[nd - 1];
  shape[nd - 2] = h;
  shape[nd - 1] = w;
  torc_tensor *out = torc__empty(shape, nd, x->dtype, TORC_CPU);
  if (out == NULL)
    return NULL;
  int64_t planes = torc__numel(x->shape, nd - 2);
  size_t es = torc_dtype_size(x->dtype);
  const char *src = host_ptr(x);
  char *dst = host_ptr(out);
  for (int64_t p = 0; p < planes; p++)
    for (int64_t i = 0; i < h; i++) {
      char *row = dst + (size_t)((p * h + i) * w) * es;
      int64_t si = top + i;
      if (si < 0 || si >= H) {
        memset(row, 0, (size_t)w * es);
        continue;
      }
      for (int64_t j = 0; j < w; j++) {
        int64_t sj = left + j;
        if (sj < 0 || sj >= W)
          memset(row + (size_t)j * es, 0, es);
        else
          memcpy(row + (size_t)j * es,
                 src + (size_t)((p * H + si) * W + sj) * es, es);
      }
    }
  return out;
}

static torc_tensor *hflip(const torc_tensor *x) {
  torc_tensor *out = torc__empty(x->shape, x->ndim, x->dtype, TORC_CPU);
  if (out == NULL)
    return NULL;
  int64_t W = x->shape[x->ndim - 1];
  int64_t rows = W ? torc__numel(x->shape, x->ndim) / W : 0;
  size_t es = torc_dtype_size(x->dtype);
  const char *src = host_ptr(x);
  char *dst = host_ptr(out);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < W; j++)
      memcpy(dst + (size_t)(r * W + j) * es,
             src + (size_t)(r * W + (W - 1 - j)) * es, es);
  return out;
}

/* The rows of each plane in reverse order (the last two dims are H, W). */
static torc_tensor *vflip(const torc_tensor *x) {
  torc_tensor *out = torc__empty(x->shape, x->ndim, x->dtype, TORC_CPU);
  if (out == NULL)
    return NULL;
  int64_t H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1];
  int64_t plane = H * W;
  int64_t planes = plane > 0 ? torc__numel(x->shape, x->ndim) / plane : 0;
  size_t row = (size_t)W * torc_dtype_size(x->dtype);
  const char *src = host_ptr(x);
  char *dst = host_ptr(out);
  for (int64_t p = 0; p < planes; p++)
    for (int64_t i = 0; i < H; i++)
      memcpy(dst + (size_t)(p * H + i) * row,
             src + (size_t)(p * H + (H - 1 - i)) * row, row);
  return out;
}

/* Bilinear resize of the last two dims, as torch.nn.functional.interpolate
 * (mode="bilinear", align_corners=False, no antialias). */
static torc_tensor *resize(const torc_tensor *x, int64_t oh, int64_t ow) {
  int nd = x->ndim;
  int64_t shape[TORC_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)nd);
  int64_t H = shape[nd - 2], W = shape[nd - 1];
  shape[nd - 2] = oh;
  shape[nd - 1] = ow;
  torc_dtype odt = float_out(x->dtype);
  torc_tensor *out = torc__empty(shape, nd, odt, TORC_CPU);
  if (out == NULL)
    return NULL;
  int64_t planes = torc__numel(x->shape, nd - 2);
  size_t es = torc_dtype_size(x->dtype), os = torc_dtype_size(odt);
  const char *src = host_ptr(x);
  char *dst = host_ptr(out);
  double sh = (double)H / (double)oh, sw = (double)W / (double)ow;
  for (int64_t p = 0; p < planes; p++)
    for (int64_t i = 0; i < oh; i++) {
      double fy = ((double)i + 0.5) * sh - 0.5;
      if (fy < 0)
        fy = 0;
      int64_t y0 = (int64_t)fy;
      int64_t y1 = y0 + (y0 < H - 1);
      double ly = fy - (double)y0;
      for (int64_t j = 0; j < ow; j++) {
        double fx = ((double)j + 0.5) * sw - 0.5;
        if (fx < 0)
          fx = 0;
        int64_t x0 = (int64_t)fx;
        int64_t x1 = x0 + (x0 < W - 1);
        double lx = fx - (double)x0;
        const char *b = src + (size_t)(p * H * W) * es;
#define AT(yy, xx) torc__load_f64(x->dtype, b + (size_t)((yy) * W + (xx)) * es)
        double v = (1 - ly) * ((1 - lx) * AT(y0, x0) + lx * AT(y0, x1)) +
                   ly * ((1 - lx) * AT(y1, x0) + lx * AT(y1, x1));
#undef AT
        torc__store_f64(odt, dst + (size_t)((p * oh + i) * ow + j) * os, v);
      }
    }
  return out;
}

static torc_tensor *cast(const torc_tensor *x, torc_dtype dt) {
  if (x->dtype == dt)
    return torc_retain((torc_tensor *)x);
  torc_tensor *out = torc__empty(x->shape, x->ndim, dt, TORC_CPU);
  if (out == NULL)
    return NULL;
  int64_t n = torc__numel(x->shape, x->ndim);
  size_t es = torc_dtype_size(x->dtype), os = torc_dtype_size(dt);
  const char *src = host_ptr(x);
  char *dst = host_ptr(out);
  int from_float = torc_dtype_is_float(x->dtype);
  for (int64_t i = 0; i < n; i++) {
    const void *a = src + (size_t)i * es;
    void *b = dst + (size_t)i * os;
    if (dt == TORC_BOOL)
      *(uint8_t *)b = torc__load_f64(x->dtype, a) != 0;
    else if (torc_dtype_is_float(dt) || from_float)
      torc__store_f64(dt, b, torc__load_f64(x->dtype, a));
    else
      torc__store_i64(dt, b, torc__load_i64(x->dtype, a));
  }
  return out;
}

static torc_tensor *apply_stage(const stage *s, const torc_tensor *x,
                                rng *r) {
  switch (s->kind) {
  case ST_SCALE:
  case ST_NORMALIZE:
    return apply_affine(s, x);
  case ST_CAST:
    return cast(x, s->dtype);
  case ST_RANDOM_HFLIP: {
    if (need_dims(s, x, 1))
      return NULL;
    /* One draw whatever p is, so later stages see the same counters. */
    double u = rng_uniform(r);
    if (u < s->c)
      return hflip(x);
    return torc_retain((torc_tensor *)x);
  }
  case ST_RANDOM_VFLIP: {
    if (need_dims(s, x, 2))
      return NULL;
    double u = rng_uniform(r); /* one draw, as random_hflip */
    if (u < s->c)
      return vflip(x);
    return torc_retain((torc_tensor *)x);
  }
  case ST_RANDOM_CROP: {
    if (need_dims(s, x, 2))
      return NULL;
    int64_t H = x->shape[x->ndim - 2] + 2 * s->pad;
    int64_t W = x->shape[x->ndim - 1] + 2 * s->pad;
    if (s->h > H || s->w > W) {
      torc_set_error(TORC_ERR_SHAPE,
                     "transform stage '%s' crops %lld x %lld from a sample "
                     "of %lld x %lld (with padding %lld: %lld x %lld); use "
                     "a smaller size or more padding",
                     s->text, (long long)s->h, (long long)s->w,
                     (long long)x->shape[x->ndim - 2],
                     (long long)x->shape[x->ndim - 1], (long long)s->pad,
                     (long long)H, (long long)W);
      return NULL;
    }
    int64_t top = rng_int(r, H - s->h + 1);
    int64_t left = rng_int(r, W - s->w + 1);
    return crop(x, top - s->pad, left - s->pad, s->h, s->w);
  }
  case ST_CENTER_CROP: {
    if (need_dims(s, x, 2))
      return NULL;
    int64_t H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1];
    if (s->h > H || s->w > W) {
      torc_set_error(TORC_ERR_SHAPE,
                     "transform stage '%s' crops %lld x %lld from a sample "
                     "of %lld x %lld; use a smaller size (or resize first)",
                     s->text, (long long)s->h, (long long)s->w, (long long)H,
                     (long long)W);
      return NULL;
    }
    /* torchvision: int(round((H - h) / 2)), round half to even. */
    int64_t top = (int64_t)nearbyint((double)(H - s->h) / 2.0);
    int64_t left = (int64_t)nearbyint((double)(W - s->w) / 2.0);
    return crop(x, top, left, s->h, s->w);
  }
  case ST_RESIZE:
    if (need_dims(s, x, 2))
      return NULL;
    return resize(x, s->h, s->w);
  }
  torc_set_error(TORC_ERR_INTERNAL, "transform: unknown stage kind %d",
                 s->kind);
  return NULL;
}

torc_tensor *torc__transform_run(const torc_transform *t,
                                 const torc_tensor *x, uint64_t seed,
                                 int64_t epoch, int64_t index) {
  if (x == NULL) {
    torc__null_input("torc_transform_apply");
    return NULL;
  }
  if (x->storage->device.type != TORC_CPU.type) {
    torc_set_error(TORC_ERR_DEVICE,
                   "torc_transform_apply: the sample is on %s; transforms "
                   "run on cpu samples (before the loader moves batches)",
                   torc__devname(x->storage->device));
    return NULL;
  }
  if (t == NULL || t->n == 0)
    return torc_retain((torc_tensor *)x);
  rng r = {torc__data_key(seed, epoch, 1), (uint64_t)index << 32, 0};
  torc_tensor *cur = host_contiguous(x);
  for (int i = 0; i < t->n && cur; i++) {
    torc_tensor *next = NULL;
    if (i + 1 < t->n &&
        (next = apply_scale_normalize(&t->st[i], &t->st[i + 1], cur)))
      i++; /* both stages done */
    else /* one stage (also after the pair failed to allocate: it retries) */
      next = apply_stage(&t->st[i], cur, &r);
    torc_release(cur);
    cur = next;
  }
  return cur;
}

torc_tensor *torc_transform_apply(const torc_transform *t,
                                  const torc_tensor *x, uint64_t seed,
                                  int64_t epoch, int64_t index) {
  return torc__ret(torc__transform_run(t, x, seed, epoch, index));
}

/* ---- the list of stages (`torc transforms`) ---- */

int torc_transform_stage_count(void) { return N_STAGE_KINDS; }

const char *torc_transform_stage_name(int i) {
  return i >= 0 && i < N_STAGE_KINDS ? stage_infos[i].name : NULL;
}

const char *torc_transform_stage_usage(int i) {
  return i >= 0 && i < N_STAGE_KINDS ? stage_infos[i].usage : NULL;
}
