/* tests/test_cuda_ew2_bodies.c — the cuda plugin's elementwise kernels
 * for every dtype (plugins/cuda/ew_body.h), compiled for the host, against
 * the ref kernels (plugins/ref) on the same inputs: each (op, dtype) pair
 * the plugin registers — driven by the same dtype sets ew.cu and ew2.cu
 * register from — runs its body the way the kernel does (f16/bf16 loaded
 * to float and rounded back, integers in int64 with the low bits stored,
 * bool as v != 0) and is compared with ref: bit-identical for integer,
 * bool and exact float ops, copy, fill_ and where; within a stated ulp
 * bound for the transcendental ones. Also the host-side helpers: the
 * dtype sets against ref's registrations, the collapsed strided walk
 * against ref's iterator, and the vector path's eligibility. Needs no GPU.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "torc/dtype.h"
#include "torc/plugin.h"

#include "../plugins/cuda/ew_body.h"
#include "../plugins/ref/ref_util.h"
#include "cuda_testutil.h"

static const char *const dt_names[TORC_DTYPE_COUNT] = {
    "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"};

static int is_float_dt(int dt) { return torc_dtype_is_float((torc_dtype)dt); }

/* ---- inputs: per dtype, x and y (the same values in another order) ---- */

#define N_MAX 4200
static unsigned char in_x[TORC_DTYPE_COUNT][N_MAX * 8];
static unsigned char in_y[TORC_DTYPE_COUNT][N_MAX * 8];
static int64_t n_of[TORC_DTYPE_COUNT];

/* Element i of dtype dt's buffer as a double (for messages). */
static double as_double(int dt, const void *buf, int64_t i) {
  return ref_load_f(dt, (const char *)buf + i * (int64_t)torc_dtype_size(dt));
}

/* Floats: the special values (NaN, infinities, zeros, denormals, exp's
 * overflow edges, large magnitudes) and a grid over [-8, 8], rounded to
 * each floating dtype; f64 adds its own extremes. Integers: the edges of
 * every width (INT32_MIN, INT64_MIN, 255, 256, ...) and a grid over
 * [-300, 300], wrapped to each integer dtype; bool 0/1 and a few other
 * nonzero bytes (true, as every kernel loads them). */
static void make_inputs(void) {
  static const float fsp[] = {
      NAN,     INFINITY, -INFINITY, 0.0f,    -0.0f,   1e-40f, -1e-40f,
      1e-45f,  88.7f,    88.8f,     -87.3f,  -103.9f, -104.5f, -150.f,
      200.f,   0.6249f,  0.6251f,   -0.6251f, 9.1f,   -9.1f,  1e-30f,
      3.4e38f, -3.4e38f, 0.5f,      2.0f,    -3.0f,   3.0f,   1.0f,
      -1.0f,   -0.75f,   65504.f,   65520.f, 6e-8f,   -6e-5f, 1e5f};
  static const double dsp[] = {1e300, -1e300, 1e-310, -4.9e-324, DBL_MAX,
                               710.0, -745.5, 1e-17,  0.1};
  static const int64_t isp[] = {0,
                                1,
                                -1,
                                2,
                                -2,
                                3,
                                7,
                                -7,
                                31,
                                32,
                                63,
                                64,
                                127,
                                128,
                                -128,
                                -129,
                                255,
                                256,
                                46341,
                                65536,
                                INT32_MAX,
                                INT32_MIN,
                                (int64_t)INT32_MAX + 1,
                                (int64_t)INT32_MIN - 1,
                                3037000499LL,
                                (int64_t)1 << 40,
                                -((int64_t)1 << 40),
                                ((int64_t)1 << 60) + ((int64_t)1 << 36) + 1,
                                INT64_MAX,
                                INT64_MIN,
                                INT64_MIN + 1};
  float fv[N_MAX];
  int64_t nf = 0;
  for (size_t i = 0; i < sizeof fsp / sizeof fsp[0]; i++)
    fv[nf++] = fsp[i];
  for (int64_t i = 0; i < 4001; i++)
    fv[nf++] = -8.0f + 16.0f * (float)i / 4000.0f;
  int64_t iv[N_MAX], ni = 0;
  for (size_t i = 0; i < sizeof isp / sizeof isp[0]; i++)
    iv[ni++] = isp[i];
  for (int64_t v = -300; v <= 300; v++)
    iv[ni++] = v;
  for (int dt = 0; dt < TORC_DTYPE_COUNT; dt++) {
    int64_t n = 0;
    size_t es = torc_dtype_size(dt);
    unsigned char *x = in_x[dt];
    if (is_float_dt(dt)) {
      for (int64_t i = 0; i < nf; i++, n++)
        ref_store_f(dt, x + n * es, fv[i]);
      if (dt == TORC_F64)
        for (size_t i = 0; i < sizeof dsp / sizeof dsp[0]; i++, n++)
          ref_store_f(dt, x + n * es, dsp[i]);
    } else if (dt == TORC_BOOL) {
      for (; n < 64; n++) /* 0/1, and a few other nonzero bytes */
        x[n] = (unsigned char)(n % 11 == 5   ? 2
                               : n % 13 == 7 ? 255
                                             : (n * 5 + n / 7) % 2);
    } else {
      for (int64_t i = 0; i < ni; i++, n++)
        ref_store_i(dt, x + n * es, iv[i]);
    }
    n_of[dt] = n;
    for (int64_t i = 0; i < n; i++)
      memcpy(in_y[dt] + i * es, x + ((i * 7919 + 13) % n) * es, es);
  }
}

/* ---- the ref side ---- */

/* ref's kernel for (op, dt): the exact dtype's, else its ANY one. */
static torc_kernel_fn ref_kernel(const char *op, int dt) {
  return cuda_test_ref_kernel(op, dt);
}

static torc_ktensor kt(void *p, int dt, int64_t n) {
  torc_ktensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.dtype = dt;
  t.ndim = 1;
  t.shape[0] = n;
  t.strides[0] = 1;
  return t;
}

/* Runs ref's kernel for op over n_args inputs of dtype dt (x, y, then
 * a third when given) into out of dtype odt. */
static void run_ref(const char *op, int kdt, int n_args, torc_ktensor *in,
                    void *out, int odt, int64_t n, const void *params,
                    size_t psize) {
  torc_ktensor o = kt(out, odt, n);
  torc_kernel_args a;
  cuda_test_args(&a, op, in, n_args, &o, 1, params, psize);
  assert_int_equal(ref_kernel(op, kdt)(&a), TORC_OK);
}

/* ---- the kernel side, as ew_launch.h's element types do it ---- */

/* Element i of dtype dt in the compute type: float for f32/f16/bf16,
 * double for f64, int64 for the rest (bool: nonzero is 1). */
static float load_f(int dt, const void *b, int64_t i) {
  const char *p = (const char *)b;
  uint16_t h;
  switch (dt) {
  case TORC_F32: {
    float f;
    memcpy(&f, p + i * 4, 4);
    return f;
  }
  case TORC_F16: memcpy(&h, p + i * 2, 2); return torc_f16_to_f32(h);
  default: memcpy(&h, p + i * 2, 2); return torc_bf16_to_f32(h);
  }
}
static double load_d(const void *b, int64_t i) {
  double d;
  memcpy(&d, (const char *)b + i * 8, 8);
  return d;
}
static int64_t load_i(int dt, const void *b, int64_t i) {
  const char *p = (const char *)b;
  switch (dt) {
  case TORC_I32: {
    int32_t v;
    memcpy(&v, p + i * 4, 4);
    return v;
  }
  case TORC_I64: {
    int64_t v;
    memcpy(&v, p + i * 8, 8);
    return v;
  }
  case TORC_U8: return (uint8_t)p[i];
  default: return p[i] != 0;
  }
}
/* Stores a float result rounded to dt (f32, f16, bf16). */
static void store_f(int dt, void *b, int64_t i, float v) {
  char *p = (char *)b;
  uint16_t h;
  switch (dt) {
  case TORC_F32: memcpy(p + i * 4, &v, 4); break;
  case TORC_F16: h = torc_f32_to_f16(v); memcpy(p + i * 2, &h, 2); break;
  default: h = torc_f32_to_bf16(v); memcpy(p + i * 2, &h, 2); break;
  }
}
static void store_d(void *b, int64_t i, double v) {
  memcpy((char *)b + i * 8, &v, 8);
}
/* Stores an int64 result as dt keeps it (low bits; bool v != 0). */
static void store_i(int dt, void *b, int64_t i, int64_t v) {
  char *p = (char *)b;
  switch (dt) {
  case TORC_I32: {
    int32_t w = torc_cuda_to_i32(v);
    memcpy(p + i * 4, &w, 4);
    break;
  }
  case TORC_I64: memcpy(p + i * 8, &v, 8); break;
  case TORC_U8: p[i] = (char)torc_cuda_to_u8(v); break;
  default: p[i] = (char)torc_cuda_to_bool(v); break;
  }
}

/* ---- comparing ---- */

typedef struct tol {
  int64_t ulps; /* 0: bit-identical */
  double abs;   /* or |got - want| <= abs (cancellation near 0) ... */
  int by_x;     /* ... times max(1, |x|) */
} tol;

/* A float's bits in order as an integer, for a width of 16, 32 or 64. */
static int64_t ordered_bits(int dt, const void *p) {
  if (dt == TORC_F64) {
    int64_t k;
    memcpy(&k, p, 8);
    return k < 0 ? INT64_MIN - k : k;
  }
  if (dt == TORC_F32) {
    int32_t k;
    memcpy(&k, p, 4);
    return k < 0 ? (int64_t)INT32_MIN - k : k;
  }
  int16_t k;
  memcpy(&k, p, 2);
  return k < 0 ? (int64_t)INT16_MIN - k : k;
}

static double min_normal(int dt) {
  switch (dt) {
  case TORC_F64: return DBL_MIN;
  case TORC_F16: return 6.103515625e-05;
  default: return FLT_MIN;
  }
}

/* Checks got against want (n elements of dtype dt); x is the first input
 * (dtype xdt), for messages and by_x. Prints the worst gap. */
static void compare(const char *what, int dt, const void *got,
                    const void *want, int64_t n, tol t, int xdt,
                    const void *x, const void *y) {
  size_t es = torc_dtype_size(dt);
  int64_t worst = 0;
  for (int64_t i = 0; i < n; i++) {
    const char *g = (const char *)got + i * (int64_t)es;
    const char *w = (const char *)want + i * (int64_t)es;
    double xv = as_double(xdt, x, i), yv = y ? as_double(xdt, y, i) : 0;
    if (!is_float_dt(dt) || t.ulps == 0) {
      double gd = as_double(dt, got, i), wd = as_double(dt, want, i);
      if (is_float_dt(dt) && isnan(gd) && isnan(wd))
        continue;
      if (memcmp(g, w, es) != 0)
        fail_msg("%s: element %lld (x = %.17g, y = %.17g): got %.17g, ref "
                 "%.17g (expected bit-identical)",
                 what, (long long)i, xv, yv, gd, wd);
      continue;
    }
    double gd = as_double(dt, got, i), wd = as_double(dt, want, i);
    if (isnan(gd) || isnan(wd)) {
      if (!(isnan(gd) && isnan(wd)))
        fail_msg("%s: element %lld (x = %.17g, y = %.17g): got %.17g, ref "
                 "%.17g",
                 what, (long long)i, xv, yv, gd, wd);
      continue;
    }
    int64_t og = ordered_bits(dt, g), ow = ordered_bits(dt, w);
    int64_t d = og > ow ? og - ow : ow - og;
    double gap = fabs(gd - wd);
    double ab = t.abs * (t.by_x && fabs(xv) > 1 ? fabs(xv) : 1);
    int sub = fabs(wd) < min_normal(dt) && gap <= t.ulps * min_normal(dt);
    if (d > t.ulps && !(gap <= ab) && !sub)
      fail_msg("%s: element %lld (x = %.17g, y = %.17g): got %.17g, ref "
               "%.17g: %lld ulps apart, more than %lld",
               what, (long long)i, xv, yv, gd, wd, (long long)d,
               (long long)t.ulps);
    if (d > worst && d <= t.ulps)
      worst = d;
  }
  printf("%-30s %5lld elements, worst %lld ulp%s (bound %lld)\n", what,
         (long long)n, (long long)worst, worst == 1 ? "" : "s",
         (long long)t.ulps);
}

/* ---- the ops: adapters of every body to one signature ---- */

typedef float (*body_f)(float, float, const torc_scalar_params *);
typedef double (*body_d)(double, double, const torc_scalar_params *);
typedef int64_t (*body_i)(int64_t, int64_t, const torc_scalar_params *);

/* The params in the kernels' three forms (ew.cu's with_params). */
static torc_cuda_sp sp_f(const torc_scalar_params *p) {
  torc_cuda_sp s = {(float)p->a, (float)p->b, p->flags};
  return s;
}
static torc_cuda_spd sp_d(const torc_scalar_params *p) {
  torc_cuda_spd s = {p->a, p->b, p->flags};
  return s;
}
static torc_cuda_spi sp_i(const torc_scalar_params *p) {
  torc_cuda_spi s = {p->ia, p->ib, p->flags};
  return s;
}

#define INT_FLOATS(decl)
#define INT_NUMERIC(decl) decl
#define INT_ALL(decl) decl
#define IPTR_FLOATS(name) NULL
#define IPTR_NUMERIC(name) ai_##name
#define IPTR_ALL(name) ai_##name

/* UNARY, UNARY_P, BINARY, CMP (binary, bool out) and LNOT (unary, bool
 * out) adapters; ARGSF, ARGSD, ARGSI are the float, double and int64
 * bodies' arguments. */
#define ADAPT(name, set, ARGSF, ARGSD, ARGSI)                                  \
  static float af_##name(float x, float y, const torc_scalar_params *p) {      \
    (void)x;                                                                   \
    (void)y;                                                                   \
    (void)p;                                                                   \
    return (float)torc_cuda_b_##name ARGSF;                                    \
  }                                                                            \
  static double ad_##name(double x, double y, const torc_scalar_params *p) {   \
    (void)x;                                                                   \
    (void)y;                                                                   \
    (void)p;                                                                   \
    return (double)torc_cuda_bd_##name ARGSD;                                  \
  }                                                                            \
  INT_##set(static int64_t ai_##name(int64_t x, int64_t y,                     \
                                     const torc_scalar_params *p) {            \
    (void)x;                                                                   \
    (void)y;                                                                   \
    (void)p;                                                                   \
    return torc_cuda_bi_##name ARGSI;                                          \
  })
#define AD_U(name, set) ADAPT(name, set, (x), (x), (x))
#define AD_UP(name, set)                                                       \
  ADAPT(name, set, (x, sp_f(p)), (x, sp_d(p)), (x, sp_i(p)))
#define AD_B(name, set) ADAPT(name, set, (x, y), (x, y), (x, y))
TORC_CUDA_UNARY_OPS(AD_U)
TORC_CUDA_UNARY_P_OPS(AD_UP)
TORC_CUDA_BINARY_OPS(AD_B)
TORC_CUDA_CMP_OPS(AD_B)
TORC_CUDA_LNOT_OPS(AD_U)
/* gelu_backward has no integer body: its adapter is the float ones only. */
static float af_gelu_backward(float x, float y, const torc_scalar_params *p) {
  return torc_cuda_b_gelu_backward(x, y, sp_f(p));
}
static double ad_gelu_backward(double x, double y,
                               const torc_scalar_params *p) {
  return torc_cuda_bd_gelu_backward(x, y, sp_d(p));
}

enum { K_UNARY, K_BINARY, K_CMP, K_LNOT };

typedef struct ew_op {
  const char *name;
  int kind, params;
  uint32_t set;
  body_f f;
  body_d d;
  body_i i;
} ew_op;

#define ROW_U(name, set)                                                       \
  {#name, K_UNARY, 0, TORC_CUDA_DT_##set, af_##name, ad_##name,                \
   IPTR_##set(name)},
#define ROW_UP(name, set)                                                      \
  {#name, K_UNARY, 1, TORC_CUDA_DT_##set, af_##name, ad_##name,                \
   IPTR_##set(name)},
#define ROW_B(name, set)                                                       \
  {#name, K_BINARY, 0, TORC_CUDA_DT_##set, af_##name, ad_##name,               \
   IPTR_##set(name)},
#define ROW_BP(name, set)                                                      \
  {#name, K_BINARY, 1, TORC_CUDA_DT_##set, af_##name, ad_##name, NULL},
#define ROW_CMP(name, set)                                                     \
  {#name, K_CMP, 0, TORC_CUDA_DT_##set, af_##name, ad_##name, IPTR_##set(name)},
#define ROW_LNOT(name, set)                                                    \
  {#name, K_LNOT, 0, TORC_CUDA_DT_##set, af_##name, ad_##name,                 \
   IPTR_##set(name)},
static const ew_op ops[] = {
    TORC_CUDA_UNARY_OPS(ROW_U) TORC_CUDA_UNARY_P_OPS(ROW_UP)
        TORC_CUDA_BINARY_OPS(ROW_B) TORC_CUDA_BINARY_P_OPS(ROW_BP)
            TORC_CUDA_CMP_OPS(ROW_CMP) TORC_CUDA_LNOT_OPS(ROW_LNOT)};
#define N_OPS (sizeof ops / sizeof ops[0])

/* The params each op with params is tried with (clamp: the float bounds
 * and the integer ones). */
static const struct {
  const char *op, *what;
  torc_scalar_params p;
} param_cases[] = {
    {"leaky_relu", "0.01", {.a = 0.01}},
    {"leaky_relu", "0.25", {.a = 0.25}},
    {"elu", "1", {.a = 1.0}},
    {"elu", "0.5", {.a = 0.5}},
    {"gelu", "erf", {.flags = 0}},
    {"gelu", "tanh", {.flags = 1}},
    {"softplus", "1 20", {.a = 1.0, .b = 20.0}},
    {"softplus", "2 10", {.a = 2.0, .b = 10.0}},
    {"clamp", "both", {.a = -0.5, .b = 0.75, .ia = -5, .ib = 100, .flags = 3}},
    {"clamp", "min", {.a = 1.0, .ia = 0, .flags = 1}},
    {"clamp", "max", {.b = -2.0, .ib = -3, .flags = 2}},
    {"clamp", "NaN bound / empty range",
     {.a = NAN, .b = 1.0, .ia = 200, .ib = 7, .flags = 3}},
    {"gelu_backward", "erf", {.flags = 0}},
    {"gelu_backward", "tanh", {.flags = 1}},
};

/* The bound of op on dtype dt: 0 (bit-identical) where body and ref round
 * the same exact result (and for every integer or bool result); for the
 * transcendental ones in f32 the gaps of test_cuda_bodies (the host's
 * float libm against ref's double one, plus the float formula's
 * roundings), in f64 the few ulps a formula written otherwise than ref's
 * may move (hardswish's x where the clamp is 6), in f16 and bf16 one ulp
 * of theirs (a float result a few float ulps off rounds at most one half
 * ulp away), with f32's absolute bound where the formula cancels. */
static tol tol_for(const char *op, const char *what, int dt) {
  static const struct {
    const char *op;
    int64_t ulps32;
    double abs;
    int by_x;
  } t[] = {{"exp", 1, 0, 0},        {"log", 1, 0, 0},
           {"sin", 1, 0, 0},        {"cos", 1, 0, 0},
           {"tanh", 2, 0, 0},       {"log1p", 2, 0, 0},
           {"rsqrt", 1, 0, 0},      {"sigmoid", 3, 0, 0},
           {"silu", 4, 0, 0},       {"hardswish", 1, 0, 0},
           {"hardsigmoid", 1, 0, 0}, {"softsign", 1, 0, 0},
           {"selu", 2, 0, 0},       {"mish", 4, 0, 0},
           {"erf", 2, 0, 0},
           {"elu", 2, 0, 0},        {"gelu", 4, 1e-6, 0},
           {"softplus", 3, 0, 0},   {"pow", 2, 0, 0},
           {"gelu_backward", 6, 1e-6, 1}};
  tol r = {0, 0, 0};
  if (!is_float_dt(dt))
    return r;
  if (strcmp(op, "leaky_relu") == 0 && strcmp(what, "0.01") == 0) {
    r.ulps = dt == TORC_F64 ? 0 : 1;
    return r;
  }
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(t[i].op, op) == 0) {
      r.ulps = dt == TORC_F32   ? t[i].ulps32
               : dt == TORC_F64 ? (strcmp(op, "hardswish") == 0 ? 1 : 0)
                                : 1;
      r.abs = dt == TORC_F64 ? 0 : t[i].abs;
      r.by_x = t[i].by_x;
    }
  return r;
}

/* Runs op on dtype dt with params p over the inputs, the kernel's way and
 * ref's, and compares. */
static void run_op(const ew_op *op, int dt, const torc_scalar_params *p,
                   const char *what) {
  static unsigned char got[N_MAX * 8], want[N_MAX * 8];
  int64_t n = n_of[dt];
  int n_args = op->kind == K_BINARY || op->kind == K_CMP ? 2 : 1;
  int odt = op->kind == K_CMP || op->kind == K_LNOT ? TORC_BOOL : dt;
  const void *x = in_x[dt], *y = in_y[dt];
  torc_ktensor in[2] = {kt(in_x[dt], dt, n), kt(in_y[dt], dt, n)};
  run_ref(op->name, dt, n_args, in, want, odt, n, op->params ? p : NULL,
          op->params ? sizeof *p : 0);
  for (int64_t i = 0; i < n; i++) {
    if (dt == TORC_F64) {
      double r = op->d(load_d(x, i), n_args == 2 ? load_d(y, i) : 0, p);
      if (odt == TORC_BOOL)
        store_i(odt, got, i, r != 0);
      else
        store_d(got, i, r);
    } else if (is_float_dt(dt)) {
      float r = op->f(load_f(dt, x, i), n_args == 2 ? load_f(dt, y, i) : 0, p);
      if (odt == TORC_BOOL)
        store_i(odt, got, i, r != 0);
      else
        store_f(odt, got, i, r);
    } else {
      assert_non_null(op->i);
      int64_t r =
          op->i(load_i(dt, x, i), n_args == 2 ? load_i(dt, y, i) : 0, p);
      store_i(odt, got, i, r);
    }
  }
  char label[96];
  snprintf(label, sizeof label, "%s%s%s %s", op->name, what[0] ? " " : "",
           what, dt_names[dt]);
  compare(label, odt, got, want, n, tol_for(op->name, what, dt), dt, x,
          n_args == 2 ? y : NULL);
}

/* Every (op, dtype) of the registered sets: the body against ref. */
static void test_ops_every_dtype(void **state) {
  (void)state;
  for (size_t k = 0; k < N_OPS; k++)
    for (int dt = 0; dt < TORC_DTYPE_COUNT; dt++) {
      if (!((ops[k].set >> dt) & 1u))
        continue;
      if (!is_float_dt(dt) && ops[k].i == NULL)
        fail_msg("%s is registered for %s but has no integer body",
                 ops[k].name, dt_names[dt]);
      if (!ops[k].params) {
        torc_scalar_params none;
        memset(&none, 0, sizeof none);
        run_op(&ops[k], dt, &none, "");
        continue;
      }
      int tried = 0;
      for (size_t c = 0; c < sizeof param_cases / sizeof param_cases[0]; c++)
        if (strcmp(param_cases[c].op, ops[k].name) == 0) {
          run_op(&ops[k], dt, &param_cases[c].p, param_cases[c].what);
          tried++;
        }
      if (tried == 0)
        fail_msg("%s takes params but has no param case", ops[k].name);
    }
}

/* ---- copy, fill_, where ---- */

/* copy's conversion as ew2.cu's from/to types do it: floats through
 * double, integers and bool through int64, then the destination's store
 * (one rounding; truncation, NaN 0, saturation and wrapping into
 * integers; bool v != 0). The same dtype copies the bits (bool: through
 * its load and store). */
static void copy_elem(int s, int d, const void *src, int64_t i, void *dst) {
  size_t es = torc_dtype_size(s), ed = torc_dtype_size(d);
  if (s == d && s != TORC_BOOL) {
    memcpy((char *)dst + i * (int64_t)ed, (const char *)src + i * (int64_t)es,
           es);
    return;
  }
  if (is_float_dt(s)) {
    double v = s == TORC_F64 ? load_d(src, i) : (double)load_f(s, src, i);
    switch (d) {
    case TORC_F64: store_d(dst, i, v); break;
    case TORC_F32:
    case TORC_F16:
    case TORC_BF16: store_f(d, dst, i, (float)v); break;
    case TORC_BOOL: store_i(d, dst, i, v != 0); break;
    default: store_i(d, dst, i, torc_cuda_f2i(v)); break;
    }
  } else {
    int64_t v = load_i(s, src, i);
    switch (d) {
    case TORC_F64: store_d(dst, i, (double)v); break;
    case TORC_F32:
    case TORC_F16:
    case TORC_BF16: store_f(d, dst, i, torc_cuda_i2f(v)); break;
    default: store_i(d, dst, i, v); break;
    }
  }
}

static void test_copy_every_pair(void **state) {
  (void)state;
  static unsigned char got[N_MAX * 8], want[N_MAX * 8];
  assert_int_equal(torc_cuda_ew_dtypes("copy"), TORC_CUDA_DT_ANY);
  for (int s = 0; s < TORC_DTYPE_COUNT; s++)
    for (int d = 0; d < TORC_DTYPE_COUNT; d++) {
      int64_t n = n_of[s];
      torc_ktensor in = kt(in_x[s], s, n);
      run_ref("copy", s, 1, &in, want, d, n, NULL, 0);
      for (int64_t i = 0; i < n; i++)
        copy_elem(s, d, in_x[s], i, got);
      char label[64];
      snprintf(label, sizeof label, "copy %s -> %s", dt_names[s],
               dt_names[d]);
      compare(label, d, got, want, n, (tol){0, 0, 0}, s, in_x[s], NULL);
    }
}

static void test_fill_bits(void **state) {
  (void)state;
  static const struct {
    double v;
    int64_t iv;
  } vals[] = {{0.0, 0},          {-0.0, 0},        {1.5, 1},
              {-1.5, -1},        {NAN, 0},         {INFINITY, 256},
              {65520.0, 255},    {3.0000001, 3},   {1e10, (int64_t)1 << 40},
              {-1e-40, INT64_MIN}, {1.0 / 3, INT64_MAX}, {0.1, -129}};
  for (int dt = 0; dt < TORC_DTYPE_COUNT; dt++)
    for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
      unsigned char want[8 * 3] = {0};
      torc_fill_params p = {vals[k].v, vals[k].iv};
      torc_ktensor o = kt(want, dt, 3);
      torc_kernel_args a;
      cuda_test_args(&a, "fill_", NULL, 0, &o, 1, &p, sizeof p);
      assert_int_equal(ref_kernel("fill_", dt)(&a), TORC_OK);
      uint64_t bits = torc_cuda_fill_bits(dt, p.value, p.ivalue);
      size_t es = torc_dtype_size(dt);
      for (int i = 0; i < 3; i++) {
        uint64_t got = 0;
        memcpy(&got, want + i * es, es); /* little-endian low bytes */
        if (got != bits)
          fail_msg("fill_ %s value %g ivalue %lld: ref wrote 0x%llx, the "
                   "kernel's bits are 0x%llx",
                   dt_names[dt], vals[k].v, (long long)vals[k].iv,
                   (unsigned long long)got, (unsigned long long)bits);
      }
    }
}

static void test_where_every_dtype(void **state) {
  (void)state;
  static unsigned char got[N_MAX * 8], want[N_MAX * 8], cond[N_MAX];
  for (int dt = 0; dt < TORC_DTYPE_COUNT; dt++) {
    int64_t n = n_of[dt];
    size_t es = torc_dtype_size(dt);
    for (int64_t i = 0; i < n; i++)
      cond[i] = (unsigned char)(i % 3 == 0);
    torc_ktensor in[3] = {kt(cond, TORC_BOOL, n), kt(in_x[dt], dt, n),
                          kt(in_y[dt], dt, n)};
    run_ref("where", dt, 3, in, want, dt, n, NULL, 0);
    for (int64_t i = 0; i < n; i++)
      memcpy(got + i * (int64_t)es,
             (cond[i] ? in_x[dt] : in_y[dt]) + i * (int64_t)es, es);
    char label[32];
    snprintf(label, sizeof label, "where %s", dt_names[dt]);
    compare(label, dt, got, want, n, (tol){0, 0, 0}, dt, in_x[dt], NULL);
  }
}

/* ---- the host-side helpers ---- */

/* Each op's dtype set is the set ref registers it for (so that the
 * conformance suite finds no pair without a cuda kernel), and the family
 * serves every elementwise op ref has. */
static void test_dtype_sets_match_ref(void **state) {
  (void)state;
  static const char *const family[] = {
      "neg", "abs", "sign", "square", "relu", "exp", "log", "sqrt", "sin",
      "cos", "tanh", "sigmoid", "reciprocal", "log1p", "rsqrt", "silu",
      "hardswish", "hardsigmoid", "softsign", "selu", "mish", "erf",
      "leaky_relu", "elu", "gelu", "softplus", "clamp", "add",
      "sub", "mul", "div", "pow", "maximum", "minimum", "relu_backward",
      "gelu_backward", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
      "logical_or", "logical_not", "copy", "fill_", "where"};
  for (size_t k = 0; k < sizeof family / sizeof family[0]; k++) {
    uint32_t want = 0;
    for (size_t i = 0; i < torc_ref_n_kernels; i++)
      if (strcmp(torc_ref_kernels[i].op, family[k]) == 0)
        want |= torc_ref_kernels[i].dtype == TORC_DTYPE_ANY
                    ? TORC_CUDA_DT_ANY
                    : 1u << torc_ref_kernels[i].dtype;
    uint32_t got = torc_cuda_ew_dtypes(family[k]);
    if (got != want)
      fail_msg("%s: cuda registers dtype mask 0x%x, ref 0x%x", family[k],
               got, want);
  }
  assert_int_equal(torc_cuda_ew_dtypes("matmul"), 0);
}

/* A small deterministic generator for the walk cases. */
static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* The collapsed walk gives every operand's offsets in ref's iterator's
 * order, with 64- and 32-bit index arithmetic, for random shapes (sizes
 * 1..4, up to 8 dims) and strides (contiguous, permuted, broadcast 0,
 * negative, padded). */
static void test_walk_matches_ref_iter(void **state) {
  (void)state;
  for (int c = 0; c < 3000; c++) {
    int ndim = (int)(next_rand() % 9), n_ops = 1 + (int)(next_rand() % 4);
    int64_t shape[8], st[4][8];
    for (int d = 0; d < ndim; d++)
      shape[d] = 1 + (int64_t)(next_rand() % 4);
    for (int k = 0; k < n_ops; k++) {
      int mode = (int)(next_rand() % 4);
      int64_t run = 1 + (mode == 3 ? 3 : 0);
      for (int d = ndim - 1; d >= 0; d--) {
        switch (mode) {
        case 0:
        case 3: /* rows, padded in mode 3 */
          st[k][d] = run;
          run *= shape[d];
          break;
        case 1: /* rows with broadcast dims */
          st[k][d] = next_rand() % 3 == 0 ? 0 : run;
          run *= shape[d];
          break;
        default: /* anything in -3..3 */
          st[k][d] = (int64_t)(next_rand() % 7) - 3;
          break;
        }
      }
    }
    const int64_t *sp[4] = {st[0], st[1], st[2], st[3]};
    torc_cuda_walk w;
    torc_cuda_walk_init(&w, ndim, shape, n_ops, sp);
    assert_true(w.ndim <= ndim);
    ref_iter it;
    ref_iter_init(&it, ndim, shape);
    for (int k = 0; k < n_ops; k++)
      ref_iter_add(&it, 0, st[k]);
    int all_unit = 1; /* every operand row-major contiguous */
    for (int k = 0; k < n_ops; k++) {
      int64_t want = 1;
      for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] != 1 && st[k][d] != want)
          all_unit = 0;
        want *= shape[d];
      }
    }
    assert_int_equal(torc_cuda_walk_contiguous(&w), all_unit);
    for (int64_t i = 0; !ref_iter_done(&it); ref_iter_next(&it), i++) {
      int64_t o[4], o32[4];
      torc_cuda_walk_at(&w, n_ops, i, o);
      torc_cuda_walk_at32(&w, n_ops, (uint32_t)i, o32);
      for (int k = 0; k < n_ops; k++)
        if (o[k] != it.pos[k] || o32[k] != it.pos[k])
          fail_msg("walk case %d (ndim %d, %d operands), element %lld, "
                   "operand %d: offset %lld (32-bit %lld), ref's %lld",
                   c, ndim, n_ops, (long long)i, k, (long long)o[k],
                   (long long)o32[k], (long long)it.pos[k]);
    }
  }
}

/* Collapsing: a contiguous call is one dim, a row broadcast two, and
 * size-1 dims go whatever their strides. */
static void test_walk_collapse(void **state) {
  (void)state;
  int64_t shape[3] = {2, 3, 4};
  int64_t c[3] = {12, 4, 1}, bc[3] = {0, 4, 1}, t[3] = {1, 2, 6};
  const int64_t *contig[2] = {c, c}, *bcast[3] = {bc, c, c}, *tr[2] = {t, c};
  torc_cuda_walk w;
  torc_cuda_walk_init(&w, 3, shape, 2, contig);
  assert_int_equal(w.ndim, 1);
  assert_int_equal(w.shape[0], 24);
  assert_true(torc_cuda_walk_contiguous(&w));
  torc_cuda_walk_init(&w, 3, shape, 3, bcast);
  assert_int_equal(w.ndim, 2);
  assert_int_equal(w.shape[0], 2);
  assert_int_equal(w.shape[1], 12);
  assert_int_equal(w.st[0][0], 0);
  assert_false(torc_cuda_walk_contiguous(&w));
  torc_cuda_walk_init(&w, 3, shape, 2, tr);
  assert_int_equal(w.ndim, 3);
  assert_false(torc_cuda_walk_contiguous(&w));
  int64_t s1[4] = {1, 5, 1, 7}, st1[4] = {99, 7, -3, 1};
  const int64_t *ones[1] = {st1};
  torc_cuda_walk_init(&w, 4, s1, 1, ones);
  assert_int_equal(w.ndim, 1);
  assert_int_equal(w.shape[0], 35);
  assert_true(torc_cuda_walk_contiguous(&w));
  torc_cuda_walk_init(&w, 0, shape, 1, ones); /* a 0-dim tensor */
  assert_int_equal(w.ndim, 0);
  assert_true(torc_cuda_walk_contiguous(&w));
}

/* The vector path: 16 bytes of the widest operand per step; taken from
 * TORC_CUDA_VEC_MIN_N elements when every pointer is aligned to its own
 * width * element size. */
static void test_vec_eligibility(void **state) {
  (void)state;
  assert_int_equal(torc_cuda_vec_width(4), 4);  /* f32: float4 */
  assert_int_equal(torc_cuda_vec_width(2), 8);  /* f16/bf16: 8 halves */
  assert_int_equal(torc_cuda_vec_width(8), 2);  /* f64 */
  assert_int_equal(torc_cuda_vec_width(1), 16); /* u8, bool */
  assert_int_equal(torc_cuda_vec_width(0), 1);
  assert_int_equal(torc_cuda_vec_width(32), 1);
  int64_t big = TORC_CUDA_VEC_MIN_N;
  uintptr_t a3[3] = {0x1000, 0x2000, 0x3000};
  size_t e4[3] = {4, 4, 4};
  assert_true(torc_cuda_vec_ok(big, 4, 3, a3, e4));
  assert_false(torc_cuda_vec_ok(big - 1, 4, 3, a3, e4)); /* small n */
  assert_false(torc_cuda_vec_ok(big, 1, 3, a3, e4));     /* width 1 */
  a3[1] = 0x2004; /* an input offset by one f32 */
  assert_false(torc_cuda_vec_ok(big, 4, 3, a3, e4));
  a3[1] = 0x2010;
  assert_true(torc_cuda_vec_ok(big, 4, 3, a3, e4));
  /* f32 in, bool out (width 4): the output needs 4-byte alignment only. */
  uintptr_t c3[3] = {0x1000, 0x2000, 0x3004};
  size_t ec[3] = {4, 4, 1};
  assert_true(torc_cuda_vec_ok(big, 4, 3, c3, ec));
  c3[2] = 0x3002;
  assert_false(torc_cuda_vec_ok(big, 4, 3, c3, ec));
  /* f16 (width 8): 16-byte alignment. */
  uintptr_t h2[2] = {0x1008, 0x2000};
  size_t e2[2] = {2, 2};
  assert_false(torc_cuda_vec_ok(big, 8, 2, h2, e2));
  h2[0] = 0x1010;
  assert_true(torc_cuda_vec_ok(big, 8, 2, h2, e2));
}

/* The conversions the kernels share: int64 to float in one rounding (as
 * ref), float to int64 truncating with NaN 0 and saturation, the integer
 * stores' wraparound. */
static void test_conversions(void **state) {
  (void)state;
  static const int64_t v[] = {0,
                              1,
                              -1,
                              16777217,
                              -16777217,
                              ((int64_t)1 << 60) + ((int64_t)1 << 36) + 1,
                              INT64_MAX,
                              INT64_MIN,
                              123456789123LL};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    float want = ref_i64_to_f32(v[i]);
    assert_memory_equal(&(float){torc_cuda_i2f(v[i])}, &want, sizeof want);
  }
  static const double f[] = {NAN, 1e19, -1e19, 9.223372036854775807e18,
                             -9.223372036854775808e18, -1.9, 1.9, -0.0, 255.5};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    assert_int_equal(torc_cuda_f2i(f[i]), ref_f2i(f[i]));
  assert_int_equal(torc_cuda_to_i32((int64_t)INT32_MAX + 1), INT32_MIN);
  assert_int_equal(torc_cuda_to_i32(-1), -1);
  assert_int_equal(torc_cuda_to_u8(-1), 255);
  assert_int_equal(torc_cuda_to_u8(256), 0);
  assert_int_equal(torc_cuda_to_bool(256), 1);
  assert_int_equal(torc_cuda_wrap(UINT64_MAX), -1);
  assert_int_equal(torc_cuda_wrap((uint64_t)INT64_MAX + 1), INT64_MIN);
  assert_int_equal(torc_cuda_bi_abs(INT64_MIN), INT64_MIN);
  assert_int_equal(torc_cuda_bi_neg(INT64_MIN), INT64_MIN);
}

int main(void) {
  make_inputs();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtype_sets_match_ref),
      cmocka_unit_test(test_ops_every_dtype),
      cmocka_unit_test(test_copy_every_pair),
      cmocka_unit_test(test_fill_bits),
      cmocka_unit_test(test_where_every_dtype),
      cmocka_unit_test(test_walk_matches_ref_iter),
      cmocka_unit_test(test_walk_collapse),
      cmocka_unit_test(test_vec_eligibility),
      cmocka_unit_test(test_conversions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
