/* tests/test_cuda_bodies.c — the per-element bodies of the cuda plugin's
 * f32 elementwise kernels (plugins/cuda/ew_body.h), compiled for the host,
 * against the ref kernels (plugins/ref) on the same inputs: bit-identical
 * where both round one exact operation (add, mul, max, ...), within a
 * stated ulp bound (or an absolute one, where float cancels) for the
 * transcendental ones. Needs no GPU: what only a GPU checks is docs/cuda.md.
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

#include "torc/plugin.h"

#include "../plugins/cuda/ew_body.h"
#include "../plugins/ref/ref_kernels.h"
#include "cuda_testutil.h"

/* ---- inputs ---- */

#define N_GRID 4001
static float in_x[N_GRID + 64], in_y[N_GRID + 64];
static int64_t n_in;

/* Special values first (NaN, infinities, zeros, denormals, exp's overflow
 * and underflow edges, large magnitudes), then a grid over [-8, 8]; y is
 * the same set in another order, so a binary op meets every pairing kind. */
static void make_inputs(void) {
  static const float sp[] = {NAN,     INFINITY, -INFINITY, 0.0f,   -0.0f,
                             1e-40f,  -1e-40f,  1e-45f,    88.7f,  88.8f,
                             -87.3f,  -103.9f,  -104.5f,   -150.f, 200.f,
                             0.6249f, 0.6251f,  -0.6251f,  9.1f,   -9.1f,
                             1e-30f,  3.4e38f,  -3.4e38f,  0.5f,   2.0f,
                             -3.0f,   3.0f,     1.0f,      -1.0f,  -0.75f};
  int64_t n = 0;
  for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++)
    in_x[n++] = sp[i];
  for (int64_t i = 0; i < N_GRID; i++)
    in_x[n++] = -8.0f + 16.0f * (float)i / (float)(N_GRID - 1);
  n_in = n;
  for (int64_t i = 0; i < n; i++)
    in_y[i] = in_x[(i * 7919 + 13) % n];
}

/* ---- the ref side ---- */

static torc_kernel_fn ref_kernel(const char *op) {
  return cuda_test_ref_kernel(op, TORC_F32);
}

static torc_ktensor kt(float *p, int64_t n) {
  torc_ktensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.dtype = TORC_F32;
  t.ndim = 1;
  t.shape[0] = n;
  t.strides[0] = 1;
  return t;
}

/* Runs ref's kernel for op over x (and y when n_args is 2) into out. */
static void run_ref(const char *op, int n_args, const torc_scalar_params *p,
                    float *out) {
  torc_ktensor in[2] = {kt(in_x, n_in), kt(in_y, n_in)};
  torc_ktensor o = kt(out, n_in);
  torc_kernel_args a;
  cuda_test_args(&a, op, in, n_args, &o, 1, p, p ? sizeof *p : 0);
  assert_int_equal(ref_kernel(op)(&a), TORC_OK);
}

/* ---- comparing ---- */

/* Floats in order as integers: the distance of two is their ulp gap. */
static int64_t ordered(float f) {
  int32_t k;
  memcpy(&k, &f, sizeof k);
  return k < 0 ? (int64_t)INT32_MIN - k : k;
}

typedef struct tol {
  int64_t ulps; /* 0: bit-identical */
  double abs;   /* or |got - want| <= abs (cancellation near 0) ... */
  int by_x;     /* ... times max(1, |x|) (x scales the result) */
} tol;

/* Checks got against want element by element; prints the worst gap. */
static void compare(const char *what, const float *got, const float *want,
                    tol t) {
  int64_t worst = 0;
  for (int64_t i = 0; i < n_in; i++) {
    float g = got[i], w = want[i];
    if (isnan(w) || isnan(g)) {
      if (!(isnan(w) && isnan(g)))
        fail_msg("%s: element %lld (x = %.9g, y = %.9g): got %.9g, ref %.9g",
                 what, (long long)i, in_x[i], in_y[i], g, w);
      continue;
    }
    if (t.ulps == 0) {
      if (memcmp(&g, &w, sizeof g) != 0)
        fail_msg("%s: element %lld (x = %.9g, y = %.9g): got %a, ref %a "
                 "(expected bit-identical)",
                 what, (long long)i, in_x[i], in_y[i], g, w);
      continue;
    }
    int64_t d = llabs(ordered(g) - ordered(w));
    double gap = fabs((double)g - (double)w);
    double abs_bound = t.abs * (t.by_x && fabs(in_x[i]) > 1 ? fabs(in_x[i]) : 1);
    /* Subnormal results have fewer bits: there the bound is ulps times
     * the smallest normal float, not ulps of the result. */
    int subnormal = fabs((double)w) < FLT_MIN && gap <= t.ulps * FLT_MIN;
    if (d > t.ulps && !(gap <= abs_bound) && !subnormal)
      fail_msg("%s: element %lld (x = %.9g, y = %.9g): got %.9g, ref %.9g: "
               "%lld ulps apart, more than %lld",
               what, (long long)i, in_x[i], in_y[i], g, w, (long long)d,
               (long long)t.ulps);
    if (d > worst && d <= t.ulps)
      worst = d;
  }
  printf("%-28s %lld elements, worst %lld ulp%s (bound %lld)\n", what,
         (long long)n_in, (long long)worst, worst == 1 ? "" : "s",
         (long long)t.ulps);
}

static torc_cuda_sp sp_of(const torc_scalar_params *p) {
  torc_cuda_sp s = {(float)p->a, (float)p->b, p->flags};
  return s;
}

/* ---- the ops ---- */

/* The bounds: 0 where body and ref round the same exact result; for
 * libm's float functions against ref's double ones rounded, the gap of a
 * few ulps the host's libm leaves (glibc: under 1 ulp for expf, logf,
 * sinf, cosf; 1-2 for tanhf, log1pf, expm1f, erff, powf), one more per
 * rounding the float formula adds. */
typedef struct unary_case {
  const char *op;
  float (*f)(float);
  tol t;
} unary_case;

static void test_unary(void **state) {
  (void)state;
  static const unary_case cases[] = {
      {"neg", torc_cuda_b_neg, {0, 0, 0}},
      {"abs", torc_cuda_b_abs, {0, 0, 0}},
      {"sign", torc_cuda_b_sign, {0, 0, 0}},
      {"square", torc_cuda_b_square, {0, 0, 0}},
      {"relu", torc_cuda_b_relu, {0, 0, 0}},
      {"sqrt", torc_cuda_b_sqrt, {0, 0, 0}},
      {"reciprocal", torc_cuda_b_reciprocal, {0, 0, 0}},
      {"exp", torc_cuda_b_exp, {1, 0, 0}},
      {"log", torc_cuda_b_log, {1, 0, 0}},
      {"sin", torc_cuda_b_sin, {1, 0, 0}},
      {"cos", torc_cuda_b_cos, {1, 0, 0}},
      {"tanh", torc_cuda_b_tanh, {2, 0, 0}},
      {"log1p", torc_cuda_b_log1p, {2, 0, 0}},
      {"rsqrt", torc_cuda_b_rsqrt, {1, 0, 0}},
      {"sigmoid", torc_cuda_b_sigmoid, {3, 0, 0}},
      {"silu", torc_cuda_b_silu, {4, 0, 0}},
      {"hardswish", torc_cuda_b_hardswish, {1, 0, 0}},
      {"hardsigmoid", torc_cuda_b_hardsigmoid, {1, 0, 0}},
      {"softsign", torc_cuda_b_softsign, {1, 0, 0}},
      {"selu", torc_cuda_b_selu, {2, 0, 0}},
      {"mish", torc_cuda_b_mish, {4, 0, 0}},
      {"erf", torc_cuda_b_erf, {2, 0, 0}},
  };
  float got[sizeof in_x / sizeof in_x[0]], want[sizeof in_x / sizeof in_x[0]];
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    run_ref(cases[c].op, 1, NULL, want);
    for (int64_t i = 0; i < n_in; i++)
      got[i] = cases[c].f(in_x[i]);
    compare(cases[c].op, got, want, cases[c].t);
  }
}

typedef struct unary_p_case {
  const char *what, *op;
  float (*f)(float, torc_cuda_sp);
  torc_scalar_params p;
  tol t;
} unary_p_case;

static void test_unary_params(void **state) {
  (void)state;
  static const unary_p_case cases[] = {
      {"leaky_relu 0.01", "leaky_relu", torc_cuda_b_leaky_relu,
       {.a = 0.01}, {1, 0, 0}},
      {"leaky_relu 0.25", "leaky_relu", torc_cuda_b_leaky_relu,
       {.a = 0.25}, {0, 0, 0}},
      {"elu 1", "elu", torc_cuda_b_elu, {.a = 1.0}, {2, 0, 0}},
      {"elu 0.5", "elu", torc_cuda_b_elu, {.a = 0.5}, {2, 0, 0}},
      /* 1 + erf(x / sqrt 2) cancels for x below -3: an absolute bound. */
      {"gelu erf", "gelu", torc_cuda_b_gelu, {.flags = 0}, {4, 1e-6, 0}},
      {"gelu tanh", "gelu", torc_cuda_b_gelu, {.flags = 1}, {4, 1e-6, 0}},
      {"softplus 1 20", "softplus", torc_cuda_b_softplus,
       {.a = 1.0, .b = 20.0}, {3, 0, 0}},
      {"softplus 2 10", "softplus", torc_cuda_b_softplus,
       {.a = 2.0, .b = 10.0}, {3, 0, 0}},
      {"clamp -0.5 0.75", "clamp", torc_cuda_b_clamp,
       {.a = -0.5, .b = 0.75, .flags = 3}, {0, 0, 0}},
      {"clamp min 1", "clamp", torc_cuda_b_clamp, {.a = 1.0, .flags = 1},
       {0, 0, 0}},
      {"clamp max -2", "clamp", torc_cuda_b_clamp, {.b = -2.0, .flags = 2},
       {0, 0, 0}},
      {"clamp NaN bound", "clamp", torc_cuda_b_clamp,
       {.a = NAN, .b = 1.0, .flags = 3}, {0, 0, 0}},
  };
  float got[sizeof in_x / sizeof in_x[0]], want[sizeof in_x / sizeof in_x[0]];
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    run_ref(cases[c].op, 1, &cases[c].p, want);
    torc_cuda_sp s = sp_of(&cases[c].p);
    for (int64_t i = 0; i < n_in; i++)
      got[i] = cases[c].f(in_x[i], s);
    compare(cases[c].what, got, want, cases[c].t);
  }
}

typedef struct binary_case {
  const char *op;
  float (*f)(float, float);
  tol t;
} binary_case;

static void test_binary(void **state) {
  (void)state;
  static const binary_case cases[] = {
      {"add", torc_cuda_b_add, {0, 0, 0}},
      {"sub", torc_cuda_b_sub, {0, 0, 0}},
      {"mul", torc_cuda_b_mul, {0, 0, 0}},
      {"div", torc_cuda_b_div, {0, 0, 0}},
      {"maximum", torc_cuda_b_maximum, {0, 0, 0}},
      {"minimum", torc_cuda_b_minimum, {0, 0, 0}},
      {"relu_backward", torc_cuda_b_relu_backward, {0, 0, 0}},
      {"pow", torc_cuda_b_pow, {2, 0, 0}},
  };
  float got[sizeof in_x / sizeof in_x[0]], want[sizeof in_x / sizeof in_x[0]];
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    run_ref(cases[c].op, 2, NULL, want);
    for (int64_t i = 0; i < n_in; i++)
      got[i] = cases[c].f(in_x[i], in_y[i]);
    compare(cases[c].op, got, want, cases[c].t);
  }
}

static void test_binary_params(void **state) {
  (void)state;
  static const struct {
    const char *what;
    torc_scalar_params p;
  } cases[] = {{"gelu_backward erf", {.flags = 0}},
               {"gelu_backward tanh", {.flags = 1}}};
  float got[sizeof in_x / sizeof in_x[0]], want[sizeof in_x / sizeof in_x[0]];
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    run_ref("gelu_backward", 2, &cases[c].p, want);
    torc_cuda_sp s = sp_of(&cases[c].p);
    for (int64_t i = 0; i < n_in; i++)
      got[i] = torc_cuda_b_gelu_backward(in_x[i], in_y[i], s);
    /* Phi(x) + x phi(x) cancels near x = -0.75 and below -3. */
    compare(cases[c].what, got, want, (tol){6, 1e-6, 1});
  }
}

/* Every op ew.cu registers has a case above (the lists are ew_body.h's). */
static void test_every_op_covered(void **state) {
  (void)state;
  static const char *const covered =
      " neg abs sign square relu sqrt reciprocal exp log sin cos tanh log1p "
      "rsqrt sigmoid silu hardswish hardsigmoid softsign selu mish erf leaky_relu elu gelu softplus clamp add "
      "sub mul div maximum minimum relu_backward pow gelu_backward ";
#define CHECK_COVERED(name, set)                                               \
  assert_non_null(strstr(covered, " " #name " "));
  TORC_CUDA_UNARY_OPS(CHECK_COVERED)
  TORC_CUDA_UNARY_P_OPS(CHECK_COVERED)
  TORC_CUDA_BINARY_OPS(CHECK_COVERED)
  TORC_CUDA_BINARY_P_OPS(CHECK_COVERED)
#undef CHECK_COVERED
}

int main(void) {
  make_inputs();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unary),
      cmocka_unit_test(test_unary_params),
      cmocka_unit_test(test_binary),
      cmocka_unit_test(test_binary_params),
      cmocka_unit_test(test_every_op_covered),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
