/* plugins/cpu/ew.c — the cpu plugin's elementwise ops, reductions and
 * softmax for f32 and f64 (copy for every dtype): one strided N-d walk
 * that drops size-1 dims and merges the dims every operand walks evenly,
 * so a contiguous op becomes one run, a bias add [N, C] + [C] N runs with
 * a broadcast (stride 0) operand, and anything else runs of the innermost
 * dim; each run goes to the selected ISA's loops (ew_kern.h), gathering
 * strided operands into small blocks. Large ops split across the pool.
 * Semantics (NaN propagation, comparisons to bool) are ref's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "torc/dtype.h"

enum { EW_MAX_OPS = 4, EW_BLK = 512 };

static size_t esz(int32_t dt) { return torc_dtype_size((torc_dtype)dt); }

/* The walk: operand k's element at index idx is
 * base[k] + sum(idx[d] * st[k][d]) * es[k]. */
typedef struct ew_iter {
  int nd, nops;
  int64_t numel;
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  int64_t st[EW_MAX_OPS][TORC_KERNEL_MAX_DIMS];
  char *base[EW_MAX_OPS];
  size_t es[EW_MAX_OPS];
} ew_iter;

/* A run of n elements: p[k] the operands' first elements, st[k] their
 * strides (elements). */
typedef void (*ew_inner)(void *ctx, char **p, const int64_t *st, int64_t n);

/* Builds the walk over `shape` (nd dims) for operands t[0..nops). */
static void iter_init(ew_iter *it, int nd, const int64_t *shape,
                      const torc_ktensor *const *t, int nops) {
  it->nops = nops;
  it->nd = 0;
  it->numel = 1;
  for (int k = 0; k < nops; k++) {
    it->es[k] = esz(t[k]->dtype);
    it->base[k] = (char *)t[k]->data + (size_t)t[k]->offset * it->es[k];
  }
  for (int d = 0; d < nd; d++) {
    it->numel *= shape[d];
    if (shape[d] == 1)
      continue;
    int m = it->nd;
    /* Merge into the previous kept dim when every operand steps evenly. */
    int merge = m > 0;
    for (int k = 0; merge && k < nops; k++)
      merge = it->st[k][m - 1] == t[k]->strides[d] * shape[d];
    if (merge) {
      it->shape[m - 1] *= shape[d];
      for (int k = 0; k < nops; k++)
        it->st[k][m - 1] = t[k]->strides[d];
      continue;
    }
    it->shape[m] = shape[d];
    for (int k = 0; k < nops; k++)
      it->st[k][m] = t[k]->strides[d];
    it->nd++;
  }
  if (it->nd == 0) { /* a scalar: one run of one element */
    it->nd = 1;
    it->shape[0] = 1;
    for (int k = 0; k < nops; k++)
      it->st[k][0] = 1;
  }
}

/* Walks elements [b, e) of the row-major order in runs of the innermost
 * dim. */
static void iter_run(const ew_iter *it, int64_t b, int64_t e, ew_inner fn,
                     void *ctx) {
  int nd = it->nd, last = nd - 1;
  int64_t idx[TORC_KERNEL_MAX_DIMS];
  char *p[EW_MAX_OPS];
  int64_t inner_st[EW_MAX_OPS];
  int64_t rem = b;
  for (int d = last; d >= 0; d--) {
    idx[d] = rem % it->shape[d];
    rem /= it->shape[d];
  }
  for (int k = 0; k < it->nops; k++) {
    int64_t off = 0;
    for (int d = 0; d < nd; d++)
      off += idx[d] * it->st[k][d];
    p[k] = it->base[k] + off * (int64_t)it->es[k];
    inner_st[k] = it->st[k][last];
  }
  int64_t pos = b;
  while (pos < e) {
    int64_t run = it->shape[last] - idx[last];
    if (run > e - pos)
      run = e - pos;
    fn(ctx, p, inner_st, run);
    pos += run;
    if (pos >= e)
      break;
    /* Advance: the innermost dim by run, carrying outward. */
    for (int k = 0; k < it->nops; k++)
      p[k] += run * inner_st[k] * (int64_t)it->es[k];
    idx[last] += run;
    for (int d = last; d > 0 && idx[d] == it->shape[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
      for (int k = 0; k < it->nops; k++)
        p[k] += (it->st[k][d - 1] - it->st[k][d] * it->shape[d]) *
                (int64_t)it->es[k];
    }
  }
}

typedef struct par_ctx {
  const ew_iter *it;
  ew_inner fn;
  void *ctx;
} par_ctx;

static void par_task(void *c, int64_t b, int64_t e) {
  const par_ctx *pc = c;
  iter_run(pc->it, b, e, pc->fn, pc->ctx);
}

/* Runs the walk, across the pool when it is big enough. */
static void iter_exec(const torc_kernel_args *a, const ew_iter *it, ew_inner fn,
                      void *ctx) {
  if (it->numel >= TORC_CPU_PAR_MIN && a->n_threads > 1) {
    par_ctx pc = {it, fn, ctx};
    torc_cpu__parallel_for(a->n_threads, it->numel, TORC_CPU_PAR_MIN / 2,
                           par_task, &pc);
  } else if (it->numel > 0) {
    iter_run(it, 0, it->numel, fn, ctx);
  }
}

/* Copies n strided elements of size es into buf (stride 0 repeats). */
static void *gather(void *buf, const char *p, int64_t st, int64_t n,
                    size_t es) {
  if (es == 4) {
    float *d = buf;
    const float *s = (const float *)p;
    for (int64_t i = 0; i < n; i++)
      d[i] = s[i * st];
  } else if (es == 8) {
    double *d = buf;
    const double *s = (const double *)p;
    for (int64_t i = 0; i < n; i++)
      d[i] = s[i * st];
  } else {
    for (int64_t i = 0; i < n; i++)
      memcpy((char *)buf + (size_t)i * es, p + i * st * (int64_t)es, es);
  }
  return buf;
}

static void scatter(char *p, int64_t st, const void *buf, int64_t n,
                    size_t es) {
  if (es == 4) {
    float *d = (float *)p;
    const float *s = buf;
    for (int64_t i = 0; i < n; i++)
      d[i * st] = s[i];
  } else if (es == 8) {
    double *d = (double *)p;
    const double *s = buf;
    for (int64_t i = 0; i < n; i++)
      d[i * st] = s[i];
  } else {
    for (int64_t i = 0; i < n; i++)
      memcpy(p + i * st * (int64_t)es, (const char *)buf + (size_t)i * es, es);
  }
}

static int bad_args(const torc_kernel_args *a, int n_in, int n_out) {
  return torc_cpu__set_error(TORC_ERR_INTERNAL,
                             "cpu kernel '%s' got %d inputs and %d outputs "
                             "(expected %d and %d)",
                             a->op, (int)a->n_in, (int)a->n_out, n_in, n_out);
}

static int same_shape(const torc_ktensor *x, const torc_ktensor *y) {
  if (x->ndim != y->ndim)
    return 0;
  for (int d = 0; d < x->ndim; d++)
    if (x->shape[d] != y->shape[d])
      return 0;
  return 1;
}

static int shape_error(const torc_kernel_args *a) {
  return torc_cpu__set_error(TORC_ERR_SHAPE,
                             "cpu kernel '%s': operand shapes differ from the "
                             "output's (the core should have broadcast them)",
                             a->op);
}

static const void *params_of(const torc_kernel_args *a, size_t size) {
  if (a->params == NULL || a->params_size < size) {
    torc_cpu__set_error(TORC_ERR_INTERNAL,
                        "cpu kernel '%s' needs %zu bytes of parameters, got "
                        "%zu",
                        a->op, size, a->params ? a->params_size : 0);
    return NULL;
  }
  return a->params;
}

/* ---- unary ---- */

typedef struct unary_ctx {
  int32_t dt;
  int op;
  const void *p;
} unary_ctx;

static void unary_inner(void *c, char **p, const int64_t *st, int64_t n) {
  const unary_ctx *u = c;
  const cpu_isa *isa = torc_cpu__isa;
  if (st[0] == 1 && st[1] == 1) {
    isa->unary(u->dt, u->op, p[0], p[1], n, u->p);
    return;
  }
  size_t es = cpu_esize(u->dt);
  double bx[EW_BLK], by[EW_BLK];
  char *px = p[0], *py = p[1];
  while (n > 0) {
    int64_t m = n < EW_BLK ? n : EW_BLK;
    const void *x =
        st[0] == 1 ? (const void *)px : gather(bx, px, st[0], m, es);
    void *y = st[1] == 1 ? (void *)py : (void *)by;
    isa->unary(u->dt, u->op, x, y, m, u->p);
    if (st[1] != 1)
      scatter(py, st[1], by, m, es);
    px += m * st[0] * (int64_t)es;
    py += m * st[1] * (int64_t)es;
    n -= m;
  }
}

static int unary(const torc_kernel_args *a, int op, int with_params) {
  if (a->n_in != 1 || a->n_out != 1)
    return bad_args(a, 1, 1);
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  if (!same_shape(x, y) || x->dtype != y->dtype)
    return shape_error(a);
  unary_ctx u = {y->dtype, op, NULL};
  if (with_params && (u.p = params_of(a, sizeof(torc_scalar_params))) == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *t[2] = {x, y};
  ew_iter it;
  iter_init(&it, y->ndim, y->shape, t, 2);
  iter_exec(a, &it, unary_inner, &u);
  return TORC_OK;
}

#define UNARY_K(name, code, prm)                                               \
  static int k_##name(const torc_kernel_args *a) { return unary(a, code, prm); }
UNARY_K(neg, CPU_U_NEG, 0)
UNARY_K(abs, CPU_U_ABS, 0)
UNARY_K(sign, CPU_U_SIGN, 0)
UNARY_K(square, CPU_U_SQUARE, 0)
UNARY_K(relu, CPU_U_RELU, 0)
UNARY_K(exp, CPU_U_EXP, 0)
UNARY_K(log, CPU_U_LOG, 0)
UNARY_K(sqrt, CPU_U_SQRT, 0)
UNARY_K(tanh, CPU_U_TANH, 0)
UNARY_K(sigmoid, CPU_U_SIGMOID, 0)
UNARY_K(reciprocal, CPU_U_RECIPROCAL, 0)
UNARY_K(rsqrt, CPU_U_RSQRT, 0)
UNARY_K(silu, CPU_U_SILU, 0)
UNARY_K(leaky_relu, CPU_U_LEAKY_RELU, 1)
UNARY_K(gelu, CPU_U_GELU, 1)
UNARY_K(clamp, CPU_U_CLAMP, 1)

/* ---- binary ---- */

typedef struct binary_ctx {
  int32_t dt;
  int op;
  size_t oes; /* output element size: 1 for comparisons */
} binary_ctx;

static void binary_inner(void *c, char **p, const int64_t *st, int64_t n) {
  const binary_ctx *b = c;
  const cpu_isa *isa = torc_cpu__isa;
  int sa = st[0] == 1 ? 1 : st[0] == 0 ? 0 : -1;
  int sb = st[1] == 1 ? 1 : st[1] == 0 ? 0 : -1;
  if (st[2] == 1 && sa >= 0 && sb >= 0 && (sa || sb)) {
    isa->binary(b->dt, b->op, p[0], sa, p[1], sb, p[2], n);
    return;
  }
  size_t es = cpu_esize(b->dt);
  double ba[EW_BLK], bb[EW_BLK], by[EW_BLK];
  char *pa = p[0], *pb = p[1], *py = p[2];
  while (n > 0) {
    int64_t m = n < EW_BLK ? n : EW_BLK;
    int ua = sa, ub = sb;
    const void *xa = pa, *xb = pb;
    if (ua < 0 || (ua == 0 && ub == 0))
      xa = gather(ba, pa, st[0], m, es), ua = 1;
    if (ub < 0)
      xb = gather(bb, pb, st[1], m, es), ub = 1;
    void *y = st[2] == 1 ? (void *)py : (void *)by;
    isa->binary(b->dt, b->op, xa, ua, xb, ub, y, m);
    if (st[2] != 1)
      scatter(py, st[2], by, m, b->oes);
    pa += m * st[0] * (int64_t)es;
    pb += m * st[1] * (int64_t)es;
    py += m * st[2] * (int64_t)b->oes;
    n -= m;
  }
}

static int binary(const torc_kernel_args *a, int op) {
  if (a->n_in != 2 || a->n_out != 1)
    return bad_args(a, 2, 1);
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  int cmp = op >= CPU_B_EQ;
  if (!same_shape(x, y) || !same_shape(w, y) || x->dtype != w->dtype ||
      (x->dtype != TORC_F32 && x->dtype != TORC_F64) ||
      y->dtype != (cmp ? TORC_BOOL : x->dtype))
    return shape_error(a);
  binary_ctx b = {x->dtype, op, esz(y->dtype)};
  const torc_ktensor *t[3] = {x, w, y};
  ew_iter it;
  iter_init(&it, y->ndim, y->shape, t, 3);
  iter_exec(a, &it, binary_inner, &b);
  return TORC_OK;
}

#define BINARY_K(name, code)                                                   \
  static int k_##name(const torc_kernel_args *a) { return binary(a, code); }
BINARY_K(add, CPU_B_ADD)
BINARY_K(sub, CPU_B_SUB)
BINARY_K(mul, CPU_B_MUL)
BINARY_K(div, CPU_B_DIV)
BINARY_K(maximum, CPU_B_MAX)
BINARY_K(relu_backward, CPU_B_RELU_BW)
BINARY_K(minimum, CPU_B_MIN)
BINARY_K(eq, CPU_B_EQ)
BINARY_K(ne, CPU_B_NE)
BINARY_K(lt, CPU_B_LT)
BINARY_K(le, CPU_B_LE)
BINARY_K(gt, CPU_B_GT)
BINARY_K(ge, CPU_B_GE)

/* ---- where: cond (bool), a, b -> out ---- */

static void where_inner(void *c, char **p, const int64_t *st, int64_t n) {
  size_t es = *(const size_t *)c;
  const uint8_t *cd = (const uint8_t *)p[0];
  if (es == 4) {
    const float *x = (const float *)p[1], *w = (const float *)p[2];
    float *y = (float *)p[3];
    for (int64_t i = 0; i < n; i++)
      y[i * st[3]] = cd[i * st[0]] ? x[i * st[1]] : w[i * st[2]];
  } else {
    const double *x = (const double *)p[1], *w = (const double *)p[2];
    double *y = (double *)p[3];
    for (int64_t i = 0; i < n; i++)
      y[i * st[3]] = cd[i * st[0]] ? x[i * st[1]] : w[i * st[2]];
  }
}

static int k_where(const torc_kernel_args *a) {
  if (a->n_in != 3 || a->n_out != 1)
    return bad_args(a, 3, 1);
  const torc_ktensor *y = &a->out[0];
  const torc_ktensor *t[4] = {&a->in[0], &a->in[1], &a->in[2], y};
  for (int i = 0; i < 3; i++)
    if (!same_shape(t[i], y))
      return shape_error(a);
  if (t[0]->dtype != TORC_BOOL || t[1]->dtype != y->dtype ||
      t[2]->dtype != y->dtype)
    return shape_error(a);
  size_t es = cpu_esize(y->dtype);
  ew_iter it;
  iter_init(&it, y->ndim, y->shape, t, 4);
  iter_exec(a, &it, where_inner, &es);
  return TORC_OK;
}

/* ---- copy (any dtypes, C-cast semantics as ref's) ---- */

static int64_t f2i(double v) {
  if (v != v)
    return 0;
  if (v >= 9223372036854775808.0)
    return INT64_MAX;
  if (v < -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)v;
}

/* An int64 to the nearest float in one rounding (see ref_i64_to_f32). */
static float i64_to_f32(int64_t v) {
  uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  int bits = 0;
  while (bits < 64 && (m >> bits) != 0)
    bits++;
  if (bits > 24) {
    int drop = bits - 24;
    uint64_t keep = m >> drop, rem = m & ((UINT64_C(1) << drop) - 1);
    uint64_t half = UINT64_C(1) << (drop - 1);
    if (rem > half || (rem == half && (keep & 1)))
      keep++;
    m = keep << drop;
  }
  float f = (float)(double)m;
  return v < 0 ? -f : f;
}

static double load_f(int dt, const void *p) {
  switch (dt) {
  case TORC_F32:
    return *(const float *)p;
  case TORC_F64:
    return *(const double *)p;
  case TORC_F16:
    return torc_f16_to_f32(*(const uint16_t *)p);
  case TORC_BF16:
    return torc_bf16_to_f32(*(const uint16_t *)p);
  default:
    return 0;
  }
}

static int64_t load_i(int dt, const void *p) {
  switch (dt) {
  case TORC_I32:
    return *(const int32_t *)p;
  case TORC_I64:
    return *(const int64_t *)p;
  case TORC_U8:
    return *(const uint8_t *)p;
  case TORC_BOOL:
    return *(const uint8_t *)p != 0;
  default:
    return 0;
  }
}

static void store_i(int dt, void *p, int64_t v) {
  switch (dt) {
  case TORC_I32:
    *(uint32_t *)p = (uint32_t)(uint64_t)v;
    break;
  case TORC_I64:
    *(int64_t *)p = v;
    break;
  case TORC_U8:
    *(uint8_t *)p = (uint8_t)(uint64_t)v;
    break;
  case TORC_BOOL:
    *(uint8_t *)p = v != 0;
    break;
  case TORC_F32:
    *(float *)p = i64_to_f32(v);
    break;
  case TORC_F64:
    *(double *)p = (double)v;
    break;
  case TORC_F16:
    *(uint16_t *)p = torc_f32_to_f16(i64_to_f32(v));
    break;
  case TORC_BF16:
    *(uint16_t *)p = torc_f32_to_bf16(i64_to_f32(v));
    break;
  default:
    break;
  }
}

static void store_f(int dt, void *p, double v) {
  switch (dt) {
  case TORC_F32:
    *(float *)p = (float)v;
    break;
  case TORC_F64:
    *(double *)p = v;
    break;
  case TORC_F16:
    *(uint16_t *)p = torc_f32_to_f16((float)v);
    break;
  case TORC_BF16:
    *(uint16_t *)p = torc_f32_to_bf16((float)v);
    break;
  case TORC_BOOL:
    *(uint8_t *)p = v != 0;
    break;
  default:
    store_i(dt, p, f2i(v));
    break;
  }
}

typedef struct copy_ctx {
  int32_t sdt, ddt;
} copy_ctx;

static void copy_inner(void *c, char **p, const int64_t *st, int64_t n) {
  const copy_ctx *cc = c;
  int32_t s = cc->sdt, d = cc->ddt;
  if (s == d) {
    size_t es = esz(s);
    if (st[0] == 1 && st[1] == 1)
      memcpy(p[1], p[0], (size_t)n * es);
    else if (es == 4) {
      const uint32_t *x = (const uint32_t *)p[0];
      uint32_t *y = (uint32_t *)p[1];
      for (int64_t i = 0; i < n; i++)
        y[i * st[1]] = x[i * st[0]];
    } else if (es == 8) {
      const uint64_t *x = (const uint64_t *)p[0];
      uint64_t *y = (uint64_t *)p[1];
      for (int64_t i = 0; i < n; i++)
        y[i * st[1]] = x[i * st[0]];
    } else if (es == 2) {
      const uint16_t *x = (const uint16_t *)p[0];
      uint16_t *y = (uint16_t *)p[1];
      for (int64_t i = 0; i < n; i++)
        y[i * st[1]] = x[i * st[0]];
    } else {
      const uint8_t *x = (const uint8_t *)p[0];
      uint8_t *y = (uint8_t *)p[1];
      if (d == TORC_BOOL) /* bool stays 0/1 */
        for (int64_t i = 0; i < n; i++)
          y[i * st[1]] = x[i * st[0]] != 0;
      else
        for (int64_t i = 0; i < n; i++)
          y[i * st[1]] = x[i * st[0]];
    }
    return;
  }
  /* The common conversions, contiguous (vectorised) or strided. */
  int contig = st[0] == 1 && st[1] == 1;
#define CONV(ST, DT, E)                                                        \
  do {                                                                         \
    const ST *x = (const ST *)p[0];                                            \
    DT *y = (DT *)p[1];                                                        \
    if (contig)                                                                \
      for (int64_t i = 0; i < n; i++) {                                        \
        ST v = x[i];                                                           \
        y[i] = (DT)(E);                                                        \
      }                                                                        \
    else                                                                       \
      for (int64_t i = 0; i < n; i++) {                                        \
        ST v = x[i * st[0]];                                                   \
        y[i * st[1]] = (DT)(E);                                                \
      }                                                                        \
    return;                                                                    \
  } while (0)
  if (s == TORC_F32 && d == TORC_F64)
    CONV(float, double, v);
  if (s == TORC_F64 && d == TORC_F32)
    CONV(double, float, v);
  if (s == TORC_BOOL && d == TORC_F32)
    CONV(uint8_t, float, v != 0);
  if (s == TORC_BOOL && d == TORC_F64)
    CONV(uint8_t, double, v != 0);
  if (s == TORC_U8 && d == TORC_F32)
    CONV(uint8_t, float, v);
  if (s == TORC_U8 && d == TORC_F64)
    CONV(uint8_t, double, v);
  if (s == TORC_I32 && d == TORC_F64)
    CONV(int32_t, double, v);
  if ((s == TORC_F32 || s == TORC_F64) && d == TORC_BOOL) {
    if (s == TORC_F32)
      CONV(float, uint8_t, v != 0);
    CONV(double, uint8_t, v != 0);
  }
#undef CONV
  size_t se = esz(s), de = esz(d);
  int from_float = torc_dtype_is_float((torc_dtype)s);
  for (int64_t i = 0; i < n; i++) {
    const char *x = p[0] + i * st[0] * (int64_t)se;
    char *y = p[1] + i * st[1] * (int64_t)de;
    if (from_float)
      store_f(d, y, load_f(s, x));
    else
      store_i(d, y, load_i(s, x));
  }
}

static int k_copy(const torc_kernel_args *a) {
  if (a->n_in != 1 || a->n_out != 1)
    return bad_args(a, 1, 1);
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  if (!same_shape(x, y) || !torc_dtype_valid((torc_dtype)x->dtype) ||
      !torc_dtype_valid((torc_dtype)y->dtype))
    return shape_error(a);
  copy_ctx c = {x->dtype, y->dtype};
  const torc_ktensor *t[2] = {x, y};
  ew_iter it;
  iter_init(&it, y->ndim, y->shape, t, 2);
  iter_exec(a, &it, copy_inner, &c);
  return TORC_OK;
}

/* ---- fill_ (f32, f64; out contiguous) ---- */

typedef struct fill_ctx {
  int32_t dt;
  double v;
  char *p;
} fill_ctx;

static void fill_task(void *c, int64_t b, int64_t e) {
  const fill_ctx *f = c;
  if (f->dt == TORC_F32) {
    float *y = (float *)f->p, v = (float)f->v;
    for (int64_t i = b; i < e; i++)
      y[i] = v;
  } else {
    double *y = (double *)f->p;
    for (int64_t i = b; i < e; i++)
      y[i] = f->v;
  }
}

static void fill_inner(void *c, char **p, const int64_t *st, int64_t n) {
  fill_ctx f = *(const fill_ctx *)c;
  if (st[0] == 1) {
    f.p = p[0];
    fill_task(&f, 0, n);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    store_f(f.dt, p[0] + i * st[0] * (int64_t)cpu_esize(f.dt), f.v);
}

static int k_fill(const torc_kernel_args *a) {
  if (a->n_in != 0 || a->n_out != 1)
    return bad_args(a, 0, 1);
  const torc_fill_params *p = params_of(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *y = &a->out[0];
  fill_ctx f = {y->dtype, p->value, NULL};
  const torc_ktensor *t[1] = {y};
  ew_iter it;
  iter_init(&it, y->ndim, y->shape, t, 1);
  iter_exec(a, &it, fill_inner, &f);
  return TORC_OK;
}

/* ---- reductions: sum, mean, amax, amin over the dims of a mask ----
 * The input's dims (size-1 dropped) merge when they are alike (both
 * reduced or both kept) and step evenly in the input and in a contiguous
 * double accumulator of the output's shape; the innermost dim then either
 * reduces a run into one accumulator (isa->reduce) or adds a row into a
 * run of accumulators (isa->colreduce), for each index of the outer dims.
 */

typedef struct red_plan {
  int nd, op;
  int32_t dt;
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  int64_t xs[TORC_KERNEL_MAX_DIMS]; /* input strides */
  int64_t as[TORC_KERNEL_MAX_DIMS]; /* accumulator strides (0: reduced) */
  int red[TORC_KERNEL_MAX_DIMS];
  const char *x;
  double *acc;
  int64_t outer; /* product of shape[0 .. nd-2] */
} red_plan;

/* Outer indices [b, e) of the plan. */
static void red_task(void *c, int64_t b, int64_t e) {
  const red_plan *r = c;
  const cpu_isa *isa = torc_cpu__isa;
  int last = r->nd - 1;
  size_t es = cpu_esize(r->dt);
  int64_t n = r->shape[last], xs = r->xs[last];
  for (int64_t o = b; o < e; o++) {
    int64_t rem = o, xo = 0, ao = 0;
    for (int d = last - 1; d >= 0; d--) {
      int64_t i = rem % r->shape[d];
      rem /= r->shape[d];
      xo += i * r->xs[d];
      ao += i * r->as[d];
    }
    const char *x = r->x + xo * (int64_t)es;
    double *acc = r->acc + ao;
    if (r->red[last]) {
      if (xs == 1) {
        isa->reduce(r->dt, r->op, x, n, acc);
      } else {
        double buf[EW_BLK];
        for (int64_t i = 0; i < n; i += EW_BLK) {
          int64_t m = n - i < EW_BLK ? n - i : EW_BLK;
          gather(buf, x + i * xs * (int64_t)es, xs, m, es);
          isa->reduce(r->dt, r->op, buf, m, acc);
        }
      }
    } else {
      if (xs == 1) {
        isa->colreduce(r->dt, r->op, x, n, acc);
      } else {
        double buf[EW_BLK];
        for (int64_t i = 0; i < n; i += EW_BLK) {
          int64_t m = n - i < EW_BLK ? n - i : EW_BLK;
          gather(buf, x + i * xs * (int64_t)es, xs, m, es);
          isa->colreduce(r->dt, r->op, buf, m, acc + i);
        }
      }
    }
  }
}

/* A whole contiguous input into one value: partial results per slice. */
typedef struct full_ctx {
  int32_t dt;
  int op;
  const char *x;
  double part[64];
  int64_t n, slice;
} full_ctx;

static void full_task(void *c, int64_t b, int64_t e) {
  full_ctx *f = c;
  size_t es = cpu_esize(f->dt);
  for (int64_t s = b; s < e; s++) {
    int64_t lo = s * f->slice, hi = lo + f->slice;
    if (hi > f->n)
      hi = f->n;
    torc_cpu__isa->reduce(f->dt, f->op, f->x + lo * (int64_t)es, hi - lo,
                          &f->part[s]);
  }
}

static int reduce(const torc_kernel_args *a, int op, int mean) {
  if (a->n_in != 1 || a->n_out != 1)
    return bad_args(a, 1, 1);
  const torc_reduce_params *p = params_of(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int nd = x->ndim;
  int ok = y->ndim == nd && (p->dims_mask >> nd) == 0 && y->dtype == x->dtype;
  int64_t count = 1, n_out = 1;
  for (int d = 0; ok && d < nd; d++) {
    int red = (p->dims_mask >> d) & 1u;
    ok = y->shape[d] == (red ? 1 : x->shape[d]);
    if (red)
      count *= x->shape[d];
    n_out *= y->shape[d];
  }
  if (!ok)
    return shape_error(a);
  if (n_out == 0)
    return TORC_OK;
  if (count == 0 && op != CPU_R_SUM)
    return torc_cpu__set_error(TORC_ERR_INVALID,
                               "%s over an empty dimension has no identity; "
                               "reduce over non-empty dims",
                               a->op);
  double init = op == CPU_R_SUM ? 0.0 : op == CPU_R_MAX ? -INFINITY : INFINITY;
  double one, *acc = n_out == 1 ? &one : malloc((size_t)n_out * sizeof *acc);
  if (acc == NULL)
    return torc_cpu__set_error(TORC_ERR_OOM,
                               "cpu kernel '%s': out of memory for %lld "
                               "accumulators",
                               a->op, (long long)n_out);
  for (int64_t i = 0; i < n_out; i++)
    acc[i] = init;
  /* The plan: contiguous accumulator strides of y's shape. */
  red_plan r = {.op = op, .dt = x->dtype, .acc = acc};
  r.x = (const char *)x->data + (size_t)x->offset * cpu_esize(x->dtype);
  int64_t cs[TORC_KERNEL_MAX_DIMS], s = 1;
  for (int d = nd - 1; d >= 0; d--) {
    cs[d] = s;
    s *= y->shape[d];
  }
  r.nd = 0;
  for (int d = 0; d < nd && count > 0; d++) {
    if (x->shape[d] == 1)
      continue;
    int red = (p->dims_mask >> d) & 1u;
    int64_t as = red ? 0 : cs[d];
    int m = r.nd;
    if (m > 0 && r.red[m - 1] == red &&
        r.xs[m - 1] == x->strides[d] * x->shape[d] &&
        r.as[m - 1] == as * x->shape[d]) {
      r.shape[m - 1] *= x->shape[d];
      r.xs[m - 1] = x->strides[d];
      r.as[m - 1] = as;
      continue;
    }
    r.shape[m] = x->shape[d];
    r.xs[m] = x->strides[d];
    r.as[m] = as;
    r.red[m] = red;
    r.nd++;
  }
  if (count > 0 && r.nd == 0) { /* one element */
    r.nd = 1;
    r.shape[0] = 1;
    r.xs[0] = 1;
    r.as[0] = 0;
    r.red[0] = 1;
  }
  if (count > 0) {
    int last = r.nd - 1;
    r.outer = 1;
    int outer_kept = 1;
    for (int d = 0; d < last; d++) {
      r.outer *= r.shape[d];
      outer_kept = outer_kept && !r.red[d];
    }
    int64_t total = r.outer * r.shape[last];
    int par = a->n_threads > 1 && total >= TORC_CPU_PAR_MIN;
    if (par && r.nd == 1 && r.red[0] && r.xs[0] == 1) {
      full_ctx f = {.dt = r.dt, .op = op, .x = r.x, .n = total};
      int k = a->n_threads < 64 ? a->n_threads : 64;
      f.slice = (total + k - 1) / k;
      int n_sl = (int)((total + f.slice - 1) / f.slice);
      for (int i = 0; i < n_sl; i++)
        f.part[i] = init;
      torc_cpu__parallel_for(n_sl, n_sl, 1, full_task, &f);
      for (int i = 0; i < n_sl; i++) {
        double v = f.part[i], c = acc[0];
        if (op == CPU_R_SUM)
          acc[0] = c + v;
        else
          acc[0] = c != c                                        ? c
                   : v != v || (op == CPU_R_MAX ? v > c : v < c) ? v
                                                                 : c;
      }
    } else if (par && outer_kept && r.outer > 1 && r.red[last]) {
      torc_cpu__parallel_for(a->n_threads, r.outer,
                             1 + TORC_CPU_PAR_MIN / 2 / r.shape[last], red_task,
                             &r);
    } else {
      red_task(&r, 0, r.outer);
    }
  }
  /* Store (mean divides by the count; over nothing 0/0 = NaN). */
  char *yp = (char *)y->data + (size_t)y->offset * cpu_esize(y->dtype);
  int contiguous = 1;
  for (int d = 0; d < nd; d++)
    contiguous = contiguous && (y->shape[d] == 1 || y->strides[d] == cs[d]);
  for (int64_t i = 0; i < n_out; i++) {
    double v = mean ? acc[i] / (double)count : acc[i];
    int64_t off = i;
    if (!contiguous) {
      int64_t rem = i;
      off = 0;
      for (int d = nd - 1; d >= 0; d--) {
        off += (rem % y->shape[d]) * y->strides[d];
        rem /= y->shape[d];
      }
    }
    if (y->dtype == TORC_F32)
      ((float *)yp)[off] = (float)v;
    else
      ((double *)yp)[off] = v;
  }
  if (acc != &one)
    free(acc);
  return TORC_OK;
}

static int k_sum(const torc_kernel_args *a) { return reduce(a, CPU_R_SUM, 0); }
static int k_mean(const torc_kernel_args *a) { return reduce(a, CPU_R_SUM, 1); }
static int k_amax(const torc_kernel_args *a) { return reduce(a, CPU_R_MAX, 0); }
static int k_amin(const torc_kernel_args *a) { return reduce(a, CPU_R_MIN, 0); }

/* ---- softmax, log_softmax over one dim ---- */

typedef struct sm_ctx {
  int32_t dt;
  int log_form;
  int64_t len, xs, ys; /* the line's length and strides */
  double *buf;         /* 2 len elements for strided lines, else NULL */
} sm_ctx;

/* Runs of line starts (x, y). */
static void sm_inner(void *c, char **p, const int64_t *st, int64_t n) {
  const sm_ctx *s = c;
  const cpu_isa *isa = torc_cpu__isa;
  size_t es = cpu_esize(s->dt);
  for (int64_t i = 0; i < n; i++) {
    const char *x = p[0] + i * st[0] * (int64_t)es;
    char *y = p[1] + i * st[1] * (int64_t)es;
    if (s->buf == NULL) {
      isa->softmax(s->dt, s->log_form, x, y, s->len);
    } else {
      double *by = s->buf + s->len;
      gather(s->buf, x, s->xs, s->len, es);
      isa->softmax(s->dt, s->log_form, s->buf, by, s->len);
      scatter(y, s->ys, by, s->len, es);
    }
  }
}

/* Lines along dim; contiguous lines (the last dim) run across the pool,
 * strided ones through one buffer on the calling thread. */
static int softmax(const torc_kernel_args *a, int log_form) {
  if (a->n_in != 1 || a->n_out != 1)
    return bad_args(a, 1, 1);
  const torc_dim_params *p = params_of(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  if (!same_shape(x, y) || x->dtype != y->dtype)
    return shape_error(a);
  int nd = x->ndim, dim = p->dim;
  if (nd > 0 && (dim < 0 || dim >= nd))
    return shape_error(a);
  sm_ctx s = {x->dtype, log_form, 1, 1, 1, NULL};
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  for (int d = 0; d < nd; d++)
    shape[d] = x->shape[d];
  if (nd > 0) {
    s.len = x->shape[dim];
    s.xs = x->strides[dim];
    s.ys = y->strides[dim];
    shape[dim] = 1;
    if (s.len == 1)
      s.xs = s.ys = 1;
  }
  if (s.len == 0)
    return TORC_OK;
  const torc_ktensor *t[2] = {x, y};
  ew_iter it;
  iter_init(&it, nd, shape, t, 2);
  if (it.numel == 0)
    return TORC_OK;
  if (s.xs != 1 || s.ys != 1) {
    s.buf = malloc((size_t)s.len * 2 * sizeof *s.buf);
    if (s.buf == NULL)
      return torc_cpu__set_error(TORC_ERR_OOM,
                                 "cpu kernel '%s': out of memory for a line "
                                 "of %lld elements",
                                 a->op, (long long)s.len);
    iter_run(&it, 0, it.numel, sm_inner, &s);
    free(s.buf);
  } else if (it.numel * s.len >= TORC_CPU_PAR_MIN && a->n_threads > 1) {
    par_ctx pc = {&it, sm_inner, &s};
    int64_t grain = 1 + TORC_CPU_PAR_MIN / 2 / s.len;
    torc_cpu__parallel_for(a->n_threads, it.numel, grain, par_task, &pc);
  } else {
    iter_run(&it, 0, it.numel, sm_inner, &s);
  }
  return TORC_OK;
}

static int k_softmax(const torc_kernel_args *a) { return softmax(a, 0); }
static int k_log_softmax(const torc_kernel_args *a) { return softmax(a, 1); }

/* ---- registration ---- */

static const torc_cpu_kernel ew_kernels[] = {
    {"fill_", k_fill, 0},
    {"neg", k_neg, 0},
    {"abs", k_abs, 0},
    {"sign", k_sign, 0},
    {"square", k_square, 0},
    {"relu", k_relu, 0},
    {"exp", k_exp, 0},
    {"log", k_log, 0},
    {"sqrt", k_sqrt, 0},
    {"tanh", k_tanh, 0},
    {"sigmoid", k_sigmoid, 0},
    {"reciprocal", k_reciprocal, 0},
    {"rsqrt", k_rsqrt, 0},
    {"silu", k_silu, 0},
    {"leaky_relu", k_leaky_relu, 0},
    {"gelu", k_gelu, 0},
    {"clamp", k_clamp, 0},
    {"add", k_add, 0},
    {"sub", k_sub, 0},
    {"mul", k_mul, 0},
    {"div", k_div, 0},
    {"maximum", k_maximum, 0},
    {"relu_backward", k_relu_backward, 0},
    {"minimum", k_minimum, 0},
    {"eq", k_eq, 0},
    {"ne", k_ne, 0},
    {"lt", k_lt, 0},
    {"le", k_le, 0},
    {"gt", k_gt, 0},
    {"ge", k_ge, 0},
    {"where", k_where, 0},
    {"sum", k_sum, 0},
    {"mean", k_mean, 0},
    {"amax", k_amax, 0},
    {"amin", k_amin, 0},
    {"softmax", k_softmax, 0},
    {"log_softmax", k_log_softmax, 0},
};

static const torc_cpu_kernel copy_kernel[] = {{"copy", k_copy, 0}};

int torc_cpu__register_ew(const torc_host *host, torc_plugin *self) {
  static const int32_t floats[] = {TORC_F32, TORC_F64};
  static const int32_t all[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16,
                                TORC_I32, TORC_I64, TORC_U8,  TORC_BOOL};
  torc_cpu__isa_select();
  int st = torc_cpu__register_table(host, self, ew_kernels,
                                    sizeof ew_kernels / sizeof ew_kernels[0],
                                    floats, 2);
  if (st == TORC_OK)
    st = torc_cpu__register_table(host, self, copy_kernel, 1, all,
                                  sizeof all / sizeof all[0]);
  return st;
}
