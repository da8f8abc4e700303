/* plugins/cpu/ew.c — the cpu plugin's elementwise ops for f32, f64 and
 * bf16 (bf16 computed in f32, ew_kern.h; copy for every dtype; reductions
 * and softmax in ew_reduce.c, the walk in ew_walk.h): one strided N-d walk
 * that drops size-1 dims and merges the dims every operand walks evenly,
 * so a contiguous op becomes one run, a bias add [N, C] + [C] N runs with
 * a broadcast (stride 0) operand, and anything else runs of the innermost
 * dim; each run goes to the selected ISA's loops (ew_kern.h), gathering
 * strided operands into small blocks. Large ops split across the pool.
 * Semantics (NaN propagation, comparisons to bool) are ref's.
 */
#include "ew_walk.h"

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
      (x->dtype != TORC_F32 && x->dtype != TORC_F64 && x->dtype != TORC_BF16) ||
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
  } else if (es == 2) {
    const uint16_t *x = (const uint16_t *)p[1], *w = (const uint16_t *)p[2];
    uint16_t *y = (uint16_t *)p[3];
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
    *(float *)p = torc_i64_to_f32(v);
    break;
  case TORC_F64:
    *(double *)p = (double)v;
    break;
  case TORC_F16:
    *(uint16_t *)p = torc_f32_to_f16(torc_i64_to_f32(v));
    break;
  case TORC_BF16:
    *(uint16_t *)p = torc_f32_to_bf16(torc_i64_to_f32(v));
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

/* f32 -> bf16 over n elements at strides xs, ys (the casts autocast
 * makes of every weight, activation and gradient); the contiguous case
 * has its own loop, which vectorizes. */
static void f32_to_bf16_n(const float *x, int64_t xs, uint16_t *y, int64_t ys,
                          int64_t n) {
  uint32_t u;
  if (xs == 1 && ys == 1) {
    for (int64_t i = 0; i < n; i++) {
      memcpy(&u, x + i, sizeof u);
      y[i] = cpu_bf16_round(u);
    }
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    memcpy(&u, x + i * xs, sizeof u);
    y[i * ys] = cpu_bf16_round(u);
  }
}

/* bf16 -> f32 (exact) over n elements at strides xs, ys. */
static void bf16_to_f32_n(const uint16_t *x, int64_t xs, float *y,
                          int64_t ys, int64_t n) {
  if (xs == 1 && ys == 1) {
    for (int64_t i = 0; i < n; i++) {
      uint32_t u = (uint32_t)x[i] << 16;
      memcpy(y + i, &u, sizeof u);
    }
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)x[i * xs] << 16;
    memcpy(y + i * ys, &u, sizeof u);
  }
}

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
  if (s == TORC_F32 && d == TORC_BF16) {
    f32_to_bf16_n((const float *)p[0], st[0], (uint16_t *)p[1], st[1], n);
    return;
  }
  if (s == TORC_BF16 && d == TORC_F32) {
    bf16_to_f32_n((const uint16_t *)p[0], st[0], (float *)p[1], st[1], n);
    return;
  }
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

/* ---- fill_ (f32, f64, bf16) ---- */

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
  } else if (f->dt == TORC_BF16) { /* double -> f32 -> bf16, as ref */
    uint16_t *y = (uint16_t *)f->p, v = torc_f32_to_bf16((float)f->v);
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
};

static const torc_cpu_kernel copy_kernel[] = {{"copy", k_copy, 0}};

int torc_cpu__register_ew(const torc_host *host, torc_plugin *self) {
  static const int32_t floats[] = {TORC_F32, TORC_F64};
  static const int32_t ew_floats[] = {TORC_F32, TORC_F64, TORC_BF16};
  static const int32_t bf16[] = {TORC_BF16};
  static const int32_t all[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16,
                                TORC_I32, TORC_I64, TORC_U8,  TORC_BOOL};
  torc_cpu__isa_select();
  int st = torc_cpu__register_table(host, self, ew_kernels,
                                    sizeof ew_kernels / sizeof ew_kernels[0],
                                    ew_floats, 3);
  if (st == TORC_OK)
    st = torc_cpu__register_table(host, self, torc_cpu__ew_reduce_kernels,
                                  torc_cpu__n_ew_reduce_kernels, floats, 2);
  if (st == TORC_OK)
    st = torc_cpu__register_table(host, self, torc_cpu__ew_reduce_kernels,
                                  torc_cpu__n_ew_reduce_bf16, bf16, 1);
  if (st == TORC_OK)
    st = torc_cpu__register_table(host, self, copy_kernel, 1, all,
                                  sizeof all / sizeof all[0]);
  return st;
}
