/* tests/test_elementwise.c — the newer elementwise ops: log1p, rsqrt, the
 * activations, clamp and the in-place relu_/clamp_, the logical ops, where
 * and the scalar ops (PyTorch's promotion): values against PyTorch in
 * several dtypes, edge cases, errors, gradcheck and the sim device. */
#include <math.h>

#include "testutil.h"

/* As test_assert_values, but equal values (infinities included) always
 * match. */
static void expect_values(const torc_tensor *t, const double *expect,
                          int64_t n, double tol) {
  assert_torc(t);
  assert_int_equal(torc_numel(t), n);
  double *v = test_values(t);
  assert_non_null(v);
  for (int64_t i = 0; i < n; i++) {
    double e = expect[i], d = v[i] - e, lim = tol * (1 + fabs(e));
    if (v[i] == e || (isnan(v[i]) && isnan(e)) || (d <= lim && -d <= lim))
      continue;
    print_error("element %lld: got %.17g, expected %.17g\n", (long long)i,
                v[i], e);
    free(v);
    fail();
  }
  free(v);
}

static const double XV[] = {-3, -0.5, 0, 0.5, 2, 25};

static torc_tensor *xs(torc_dtype dt) {
  torc_tensor *f = torc_from_host(XV, TORC_SHAPE(6), TORC_F64, TORC_CPU);
  torc_tensor *t = torc_to_dtype(f, dt);
  assert_torc(t);
  return t;
}

/* The unary ops under test, as one signature. */
typedef struct uop {
  const char *name;
  int which;
  double a, b;
} uop;

static torc_tensor *apply(const uop *u, const torc_tensor *x) {
  switch (u->which) {
  case 0: return torc_log1p(x);
  case 1: return torc_rsqrt(x);
  case 2: return torc_silu(x);
  case 3: return torc_leaky_relu(x, u->a);
  case 4: return torc_elu(x, u->a);
  case 5: return torc_gelu(x, (int)u->a);
  case 6: return torc_softplus(x, u->a, u->b);
  case 7: return torc_clamp(x, !isnan(u->a), u->a, !isnan(u->b), u->b);
  }
  return NULL;
}

static const uop UOPS[] = {
    {"log1p", 0, 0, 0},          {"rsqrt", 1, 0, 0},
    {"silu", 2, 0, 0},           {"leaky_relu", 3, 0.1, 0},
    {"elu", 4, 1.5, 0},          {"gelu", 5, 0, 0},
    {"gelu_tanh", 5, 1, 0},      {"softplus", 6, 1, 20},
    {"softplus_b2", 6, 2, 1},    {"clamp", 7, -1, 1},
    {"clamp_min", 7, 0.25, NAN}, {"clamp_max", 7, NAN, 0.25}};

/* /usr/bin/python3 -c 'import torch, torch.nn.functional as F;
 * x = torch.tensor([-3, -0.5, 0, 0.5, 2, 25], dtype=torch.float64);
 * print(torch.log1p(x), torch.rsqrt(x), F.silu(x), F.leaky_relu(x, 0.1),
 * F.elu(x, 1.5), F.gelu(x), F.gelu(x, approximate="tanh"), F.softplus(x),
 * F.softplus(x, beta=2, threshold=1), torch.clamp(x, -1, 1),
 * torch.clamp(x, min=0.25), torch.clamp(x, max=0.25))' */
static const double EXPECT[][6] = {
    {NAN, -0.6931471805599453, 0.0, 0.4054651081081644, 1.0986122886681098,
     3.258096538021482},
    {NAN, NAN, INFINITY, 1.414213562373095, 0.7071067811865475, 0.2},
    {-0.14227761953270035, -0.1887703343990727, 0.0, 0.3112296656009273,
     1.7615941559557646, 24.9999999996528},
    {-0.30000000000000004, -0.05, 0.0, 0.5, 2.0, 25.0},
    {-1.4253193974482041, -0.5902040104310499, 0.0, 0.5, 2.0, 25.0},
    {-0.00404969409489031, -0.15426876936299344, 0.0, 0.34573123063700656,
     1.9544997361036416, 25.0},
    {-0.0036373920817729943, -0.15428599017485606, 0.0, 0.34571400982514394,
     1.954597694087775, 25.0},
    {0.04858735157374206, 0.4740769841801067, 0.6931471805599453,
     0.9740769841801067, 2.1269280110429727, 25.0},
    {0.0012378425688652247, 0.15663084375911143, 0.34657359027997264,
     0.6566308437591114, 2.0, 25.0},
    {-1.0, -0.5, 0.0, 0.5, 1.0, 1.0},
    {0.25, 0.25, 0.25, 0.5, 2.0, 25.0},
    {-3.0, -0.5, 0.0, 0.25, 0.25, 0.25}};

static void test_unary_values(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const torc_dtype dts[] = {TORC_F64, TORC_F32, TORC_BF16};
  const double tol[] = {1e-14, 1e-6, 1e-2};
  for (size_t d = 0; d < 3; d++) {
    torc_tensor *x = xs(dts[d]);
    for (size_t i = 0; i < sizeof UOPS / sizeof UOPS[0]; i++) {
      torc_tensor *y = apply(&UOPS[i], x);
      if (y == NULL) {
        print_error("%s: %s\n", UOPS[i].name, torc_last_error());
        fail();
      }
      assert_int_equal(torc_dtype_of(y), dts[d]);
      double e[6];
      for (int k = 0; k < 6; k++) /* expected rounded to the dtype */
        e[k] = EXPECT[i][k];
      if (dts[d] != TORC_F64) {
        torc_tensor *et = torc_from_host(e, TORC_SHAPE(6), TORC_F64, TORC_CPU);
        double *r = test_values(torc_to_dtype(et, dts[d]));
        memcpy(e, r, sizeof e);
        free(r);
      }
      expect_values(y, e, 6, tol[d]);
    }
  }
  /* bf16 against PyTorch's own bf16 results:
   * F.gelu(x.to(torch.bfloat16)) */
  const double gelu_bf16[] = {-0.004058837890625, -0.154296875, 0.0,
                              0.345703125, 1.953125, 25.0};
  expect_values(torc_gelu(xs(TORC_BF16), 0), gelu_bf16, 6, 4e-3);
  /* integers reach log1p and rsqrt as f32 */
  const int32_t iv[] = {0, 3};
  torc_tensor *xi = torc_from_host(iv, TORC_SHAPE(2), TORC_I32, TORC_CPU);
  torc_tensor *l = torc_log1p(xi);
  assert_int_equal(torc_dtype_of(l), TORC_F32);
  const double el[] = {0, 1.3862943611198906};
  expect_values(l, el, 2, 1e-7);
  torc_scope_end(s);
}

/* F.softplus / F.gelu / F.elu / F.silu / torch.log1p of
 * [1000, -1000, inf, -inf, nan] (float64). */
static void test_unary_edges(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double bv[] = {1000, -1000, INFINITY, -INFINITY, NAN};
  torc_tensor *b = torc_from_host(bv, TORC_SHAPE(5), TORC_F64, TORC_CPU);
  const double sp[] = {1000, 0, INFINITY, 0, NAN};
  const double ge[] = {1000, -0.0, INFINITY, NAN, NAN};
  const double el[] = {1000, -1, INFINITY, -1, NAN};
  const double lp[] = {6.90875477931522, NAN, INFINITY, NAN, NAN};
  expect_values(torc_softplus(b, 1, 20), sp, 5, 1e-15);
  expect_values(torc_gelu(b, 0), ge, 5, 1e-15);
  expect_values(torc_elu(b, 1), el, 5, 1e-15);
  expect_values(torc_log1p(b), lp, 5, 1e-15);
  /* f32 softplus of a large input: linear above the threshold */
  expect_values(torc_softplus(torc_to_dtype(b, TORC_F32), 1, 20), sp, 5, 1e-6);
  /* clamp: NaN passes through, a NaN bound gives NaN, min > max gives max */
  const double cv[] = {NAN, -2, 5};
  torc_tensor *c = torc_from_host(cv, TORC_SHAPE(3), TORC_F64, TORC_CPU);
  const double c1[] = {NAN, -1, 1}, c2[] = {NAN, NAN, NAN}, c3[] = {0, 0, 0};
  expect_values(torc_clamp(c, 1, -1, 1, 1), c1, 3, 0);
  expect_values(torc_clamp(c, 1, NAN, 0, 0), c2, 3, 0);
  double m[3];
  double *r = test_values(torc_clamp(c, 1, 3, 1, 0));
  memcpy(m, r, sizeof m);
  free(r);
  assert_true(isnan(m[0]));
  assert_true(m[1] == c3[1] && m[2] == c3[2]);
  /* empty input */
  torc_tensor *e = torc_zeros(TORC_SHAPE(0, 3), TORC_F32, TORC_CPU);
  torc_tensor *ge0 = torc_gelu(e, 1);
  assert_torc(ge0);
  assert_int_equal(torc_numel(ge0), 0);
  torc_scope_end(s);
}

static void test_unary_errors(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const int32_t iv[] = {-5, 0, 7};
  torc_tensor *xi = torc_from_host(iv, TORC_SHAPE(3), TORC_I32, TORC_CPU);
  assert_null(torc_silu(xi));
  assert_error(TORC_ERR_DTYPE, "torc_silu: the input is i32");
  assert_null(torc_gelu(xi, 0));
  assert_error(TORC_ERR_DTYPE, "floating dtypes only");
  torc_tensor *x = xs(TORC_F32);
  assert_null(torc_gelu(x, 2));
  assert_error(TORC_ERR_INVALID, "approximate is 2");
  assert_null(torc_softplus(x, 0, 20));
  assert_error(TORC_ERR_INVALID, "beta is 0");
  assert_null(torc_clamp(x, 0, 1, 0, 2));
  assert_error(TORC_ERR_INVALID, "neither bound is set");
  torc_tensor *bl = torc_ones(TORC_SHAPE(2), TORC_BOOL, TORC_CPU);
  assert_null(torc_clamp(bl, 1, 0, 0, 0));
  assert_error(TORC_ERR_DTYPE, "torc_clamp: not defined for bool");
  torc_clear_error();
  assert_null(torc_leaky_relu(NULL, 0.1));
  assert_int_equal(torc_last_status(), TORC_ERR_NULL);
  /* clamp on integers: integral bounds keep i32, a fractional one -> f32
   * (torch.clamp(torch.tensor([-5, 0, 7], dtype=torch.int32), -2, 3) and
   * (..., min=0.5)) */
  torc_tensor *c = torc_clamp(xi, 1, -2, 1, 3);
  assert_int_equal(torc_dtype_of(c), TORC_I32);
  const double ec[] = {-2, 0, 3}, ef[] = {0.5, 0.5, 7};
  expect_values(c, ec, 3, 0);
  torc_tensor *cf = torc_clamp(xi, 1, 0.5, 0, 0);
  assert_int_equal(torc_dtype_of(cf), TORC_F32);
  expect_values(cf, ef, 3, 0);
  torc_scope_end(s);
}

static void test_inplace(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *x = xs(TORC_F32);
  uint64_t v0 = torc_version(x);
  assert_ok(torc_relu_(x));
  assert_true(torc_version(x) > v0);
  const double er[] = {0, 0, 0, 0.5, 2, 25};
  expect_values(x, er, 6, 0);
  assert_ok(torc_clamp_(x, 1, 0.25, 1, 3));
  const double ec[] = {0.25, 0.25, 0.25, 0.5, 2, 3};
  expect_values(x, ec, 6, 0);
  /* a strided view is written through */
  torc_tensor *m = torc_from_host(XV, TORC_SHAPE(2, 3), TORC_F64, TORC_CPU);
  assert_ok(torc_relu_(torc_transpose(m, 0, 1)));
  const double em[] = {0, 0, 0, 0.5, 2, 25};
  expect_values(m, em, 6, 0);
  /* errors */
  const int32_t iv[] = {-5, 0, 7};
  torc_tensor *xi = torc_from_host(iv, TORC_SHAPE(3), TORC_I32, TORC_CPU);
  assert_int_equal(torc_clamp_(xi, 1, 0.5, 0, 0), TORC_ERR_DTYPE);
  assert_error(TORC_ERR_DTYPE, "cannot be stored in place into a i32");
  assert_ok(torc_clamp_(xi, 1, -1, 1, 1));
  const double ei[] = {-1, 0, 1};
  expect_values(xi, ei, 3, 0);
  torc_tensor *ex = torc_expand(torc_ones(TORC_SHAPE(1), TORC_F32, TORC_CPU),
                                TORC_SHAPE(4));
  assert_int_equal(torc_relu_(ex), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "expanded view");
  torc_tensor *leaf = xs(TORC_F64);
  assert_ok(torc_set_requires_grad(leaf, 1));
  assert_int_equal(torc_relu_(leaf), TORC_ERR_AUTOGRAD);
  assert_error(TORC_ERR_AUTOGRAD, "leaf");
  /* autograd through in-place ops: y = 2 x; clamp_(y, max 10); relu_(y):
   * dy/dx = 2 where 0 < x and 2 x <= 10 */
  torc_tensor *y = torc_mul_scalar(leaf, 2);
  assert_ok(torc_clamp_(y, 0, 0, 1, 10));
  assert_string_equal(torc_grad_fn_name(y), "ClampBackward");
  assert_ok(torc_relu_(y));
  assert_string_equal(torc_grad_fn_name(y), "ReluBackward");
  /* relu_ saved its output: changing it again breaks backward, as in
   * PyTorch */
  torc_tensor *y2 = torc_mul_scalar(leaf, 1);
  assert_ok(torc_relu_(y2));
  assert_ok(torc_mul_scalar_(y2, 2));
  assert_int_equal(torc_backward(torc_sum(y2, NULL, 0, 0), NULL, 0),
                   TORC_ERR_AUTOGRAD);
  assert_error(TORC_ERR_AUTOGRAD, "modified in place");
  assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
  const double eg[] = {0, 0, 0, 2, 2, 0};
  expect_values(torc_grad_of(leaf), eg, 6, 0);
  torc_scope_end(s);
}

static void test_logical_where(void **state) {
  (void)state;
  int s = torc_scope_begin();
  /* torch.logical_and(torch.tensor([0., nan, 2., 0.]),
   *                   torch.tensor([1, 1, 0, 0])) -> [F, T, F, F] */
  const double av[] = {0, NAN, 2, 0};
  const int32_t bv[] = {1, 1, 0, 0};
  torc_tensor *a = torc_from_host(av, TORC_SHAPE(4), TORC_F64, TORC_CPU);
  torc_tensor *b = torc_from_host(bv, TORC_SHAPE(4), TORC_I32, TORC_CPU);
  torc_tensor *and_ = torc_logical_and(a, b), *or_ = torc_logical_or(a, b),
              *not_ = torc_logical_not(a);
  assert_int_equal(torc_dtype_of(and_), TORC_BOOL);
  const double e_and[] = {0, 1, 0, 0}, e_or[] = {1, 1, 1, 0},
               e_not[] = {1, 0, 0, 1};
  expect_values(and_, e_and, 4, 0);
  expect_values(or_, e_or, 4, 0);
  expect_values(not_, e_not, 4, 0);
  torc_tensor *bl = torc_logical_not(not_); /* bool in */
  expect_values(bl, (const double[]){0, 1, 1, 0}, 4, 0);
  /* broadcasting [2, 1] with [4] */
  torc_tensor *col = torc_from_host((const uint8_t[]){1, 0}, TORC_SHAPE(2, 1),
                                    TORC_BOOL, TORC_CPU);
  torc_tensor *bo = torc_logical_or(col, b);
  assert_int_equal(torc_ndim(bo), 2);
  const double e_bo[] = {1, 1, 1, 1, 1, 1, 0, 0};
  expect_values(bo, e_bo, 8, 0);
  /* torch.where(torch.tensor([[True], [False]]),
   *             torch.tensor([1, 2, 3], dtype=torch.int32),
   *             torch.tensor(0.5)) -> f32 [[1, 2, 3], [0.5, 0.5, 0.5]] */
  const int32_t tv[] = {1, 2, 3};
  torc_tensor *t3 = torc_from_host(tv, TORC_SHAPE(3), TORC_I32, TORC_CPU);
  torc_tensor *half = torc_full(NULL, 0, 0.5, TORC_F32, TORC_CPU);
  torc_tensor *w = torc_where(col, t3, half);
  assert_torc(w);
  assert_int_equal(torc_dtype_of(w), TORC_F32);
  const double ew[] = {1, 2, 3, 0.5, 0.5, 0.5};
  expect_values(w, ew, 6, 0);
  /* errors */
  assert_null(torc_where(b, t3, half));
  assert_error(TORC_ERR_DTYPE, "the condition is i32; it must be bool");
  torc_tensor *c3 = torc_ones(TORC_SHAPE(3), TORC_BOOL, TORC_CPU);
  assert_null(torc_where(c3, b, t3));
  assert_error(TORC_ERR_SHAPE, "do not broadcast");
  assert_contains(torc_last_error(), "[3] (cond), [4] (a) and [3] (b)");
  assert_null(torc_logical_and(a, t3));
  assert_error(TORC_ERR_SHAPE, "do not broadcast");
  torc_scope_end(s);
}

static void test_scalar_ops(void **state) {
  (void)state;
  int s = torc_scope_begin();
  /* print(torch.tensor([1,2],dtype=torch.int32)+2, ...+2.5,
   *       torch.tensor([True])*2, torch.tensor([1,2],dtype=torch.int32)/2,
   *       torch.tensor([3,2],dtype=torch.int32)**2,
   *       torch.tensor(3,dtype=torch.int32)+2,
   *       torch.tensor([200], dtype=torch.uint8)+100) */
  const int32_t iv[] = {1, 2};
  torc_tensor *xi = torc_from_host(iv, TORC_SHAPE(2), TORC_I32, TORC_CPU);
  torc_tensor *r = torc_add_scalar(xi, 2);
  assert_int_equal(torc_dtype_of(r), TORC_I32);
  expect_values(r, (const double[]){3, 4}, 2, 0);
  r = torc_add_scalar(xi, 2.5);
  assert_int_equal(torc_dtype_of(r), TORC_F32);
  expect_values(r, (const double[]){3.5, 4.5}, 2, 0);
  torc_tensor *bt = torc_ones(TORC_SHAPE(1), TORC_BOOL, TORC_CPU);
  r = torc_mul_scalar(bt, 2);
  assert_int_equal(torc_dtype_of(r), TORC_I64);
  expect_values(r, (const double[]){2}, 1, 0);
  r = torc_add_scalar(bt, 2.5);
  assert_int_equal(torc_dtype_of(r), TORC_F32);
  r = torc_div_scalar(xi, 2);
  assert_int_equal(torc_dtype_of(r), TORC_F32);
  expect_values(r, (const double[]){0.5, 1}, 2, 0);
  r = torc_pow_scalar(torc_add_scalar(xi, 1), 2);
  assert_int_equal(torc_dtype_of(r), TORC_I32);
  expect_values(r, (const double[]){4, 9}, 2, 0);
  r = torc_sub_scalar(xi, 1);
  expect_values(r, (const double[]){0, 1}, 2, 0);
  torc_tensor *z = torc_full(NULL, 0, 3, TORC_I32, TORC_CPU);
  r = torc_add_scalar(z, 2);
  assert_int_equal(torc_dtype_of(r), TORC_I32); /* 0-dim: still i32 */
  expect_values(r, (const double[]){5}, 1, 0);
  torc_tensor *u = torc_full(TORC_SHAPE(1), 200, TORC_U8, TORC_CPU);
  expect_values(torc_add_scalar(u, 100), (const double[]){44}, 1, 0);
  torc_tensor *h = torc_ones(TORC_SHAPE(2), TORC_F16, TORC_CPU);
  r = torc_mul_scalar(h, 0.5);
  assert_int_equal(torc_dtype_of(r), TORC_F16);
  expect_values(r, (const double[]){0.5, 0.5}, 2, 0);
  torc_tensor *f = xs(TORC_F64);
  const double ep[] = {9, 0.25, 0, 0.25, 4, 625};
  expect_values(torc_pow_scalar(f, 2), ep, 6, 1e-15);
  const double eq[] = {NAN, NAN, 0, 0.70710678118654757, 1.4142135623730951,
                       5};
  expect_values(torc_pow_scalar(f, 0.5), eq, 6, 1e-15);
  /* errors */
  assert_null(torc_pow_scalar(xi, -1));
  assert_error(TORC_ERR_INVALID, "negative integer power -1");
  assert_null(torc_sub(bt, bt));
  assert_error(TORC_ERR_DTYPE, "bool");
  /* in place */
  torc_tensor *xc = torc_clone(xi);
  assert_ok(torc_add_scalar_(xc, 3));
  expect_values(xc, (const double[]){4, 5}, 2, 0);
  assert_int_equal(torc_add_scalar_(xc, 0.5), TORC_ERR_DTYPE);
  assert_error(TORC_ERR_DTYPE, "result type f32 cannot be stored in place");
  torc_tensor *fc = torc_clone(f);
  assert_ok(torc_mul_scalar_(fc, -2));
  const double em[] = {6, 1, 0, -1, -4, -50};
  expect_values(fc, em, 6, 0);
  torc_scope_end(s);
}

/* ---- gradcheck ---- */

static torc_tensor *call_uop(torc_tensor *const *in, int n, void *user) {
  (void)n;
  return apply(user, in[0]);
}

/* v + shift as a leaf requiring grad, owned by the caller (or its
 * scope). */
static torc_tensor *gc_input(const double *v, int n, double shift) {
  int s = torc_scope_begin();
  torc_tensor *t = torc_from_host(v, TORC_SHAPE(n), TORC_F64, TORC_CPU);
  torc_tensor *x = torc_add_scalar(t, shift);
  assert_ok(torc_set_requires_grad(x, 1));
  torc_scope_keep(x);
  torc_scope_end(s);
  return x;
}

static void test_gradcheck_unary(void **state) {
  (void)state;
  /* away from kinks (0, the clamp bounds, softplus's threshold) */
  const double v[] = {-2.3, -0.7, -0.2, 0.3, 0.8, 1.7, 2.9};
  for (size_t i = 0; i < sizeof UOPS / sizeof UOPS[0]; i++) {
    double shift = UOPS[i].which <= 1 ? 3.5 : 0; /* log1p, rsqrt: x > 0 */
    torc_tensor *x = gc_input(v, 7, shift);
    if (torc_gradcheck(call_uop, (void *)&UOPS[i], &x, 1, 1e-6, 1e-7, 1e-5)) {
      print_error("%s: %s\n", UOPS[i].name, torc_last_error());
      fail();
    }
    torc_release(x);
  }
}

static torc_tensor *where_fn(torc_tensor *const *in, int n, void *user) {
  (void)n;
  return torc_where(user, in[0], in[1]);
}

typedef struct sop {
  torc_tensor *(*fn)(const torc_tensor *, double);
  double c;
} sop;

static torc_tensor *call_sop(torc_tensor *const *in, int n, void *user) {
  (void)n;
  const sop *o = user;
  return o->fn(in[0], o->c);
}

static void test_gradcheck_where_scalar(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double v[] = {0.5, 1.5, 2.5, 3.5};
  torc_tensor *in[2] = {gc_input(v, 4, 0), NULL};
  torc_tensor *b = torc_from_host(v, TORC_SHAPE(2, 1), TORC_F64, TORC_CPU);
  assert_ok(torc_set_requires_grad(b, 1));
  in[1] = b;
  torc_tensor *cond = torc_from_host((const uint8_t[]){1, 0, 0, 1},
                                     TORC_SHAPE(4), TORC_BOOL, TORC_CPU);
  assert_ok(torc_gradcheck(where_fn, cond, in, 2, 1e-6, 1e-7, 1e-5));
  torc_tensor *w = torc_where(cond, in[0], b);
  assert_string_equal(torc_grad_fn_name(w), "WhereBackward");
  const sop ops[] = {{torc_add_scalar, 2.5}, {torc_sub_scalar, -1},
                     {torc_mul_scalar, 3},   {torc_div_scalar, 0.5},
                     {torc_pow_scalar, 2.5}, {torc_pow_scalar, 3}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (torc_gradcheck(call_sop, (void *)&ops[i], in, 1, 1e-6, 1e-7, 1e-5)) {
      print_error("scalar op %zu: %s\n", i, torc_last_error());
      fail();
    }
  torc_scope_end(s);
}

static void test_grad_fn_names(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *x = xs(TORC_F64);
  assert_ok(torc_set_requires_grad(x, 1));
  const char *names[] = {"Log1pBackward", "RsqrtBackward", "SiluBackward",
                         "LeakyReluBackward", "EluBackward", "GeluBackward",
                         "GeluBackward", "SoftplusBackward", "SoftplusBackward",
                         "ClampBackward", "ClampBackward", "ClampBackward"};
  for (size_t i = 0; i < sizeof UOPS / sizeof UOPS[0]; i++)
    assert_string_equal(torc_grad_fn_name(apply(&UOPS[i], x)), names[i]);
  assert_false(torc_requires_grad(torc_logical_not(x)));
  torc_scope_end(s);
}

/* ---- the sim device gives exactly the cpu result ---- */

static void same(const torc_tensor *c, const torc_tensor *s) {
  assert_torc(c);
  assert_torc(s);
  assert_int_equal(torc_dtype_of(c), torc_dtype_of(s));
  assert_int_equal(torc_numel(c), torc_numel(s));
  double *a = test_values(c), *b = test_values(s);
  for (int64_t i = 0; i < torc_numel(c); i++)
    if (!(a[i] == b[i] || (isnan(a[i]) && isnan(b[i])))) {
      print_error("element %lld: cpu %.17g, sim %.17g\n", (long long)i, a[i],
                  b[i]);
      fail();
    }
  free(a), free(b);
}

static void test_sim_matches_cpu(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_device sim;
  assert_ok(torc_device_parse("sim:0", &sim));
  const torc_dtype dts[] = {TORC_F32, TORC_F64, TORC_F16};
  for (size_t d = 0; d < 3; d++) {
    torc_tensor *c = xs(dts[d]), *g = torc_to(c, sim);
    for (size_t i = 0; i < sizeof UOPS / sizeof UOPS[0]; i++)
      same(apply(&UOPS[i], c), apply(&UOPS[i], g));
    same(torc_logical_not(c), torc_logical_not(g));
    same(torc_add_scalar(c, 1.5), torc_add_scalar(g, 1.5));
    same(torc_mul_scalar(c, 3), torc_mul_scalar(g, 3));
    same(torc_pow_scalar(c, 2), torc_pow_scalar(g, 2));
    same(torc_div_scalar(c, 7), torc_div_scalar(g, 7));
    same(torc_sub_scalar(c, 7), torc_sub_scalar(g, 7));
    torc_tensor *cc = torc_gt(c, torc_full(NULL, 0, 0.2, dts[d], TORC_CPU));
    torc_tensor *cg = torc_to(cc, sim);
    same(torc_where(cc, c, torc_neg(c)), torc_where(cg, g, torc_neg(g)));
    same(torc_logical_and(cc, c), torc_logical_and(cg, g));
    same(torc_logical_or(cc, c), torc_logical_or(cg, g));
    torc_tensor *c2 = torc_clone(c), *g2 = torc_clone(g);
    assert_ok(torc_relu_(c2));
    assert_ok(torc_relu_(g2));
    same(c2, g2);
    assert_ok(torc_clamp_(c2, 1, 0.3, 1, 1));
    assert_ok(torc_clamp_(g2, 1, 0.3, 1, 1));
    same(c2, g2);
    assert_ok(torc_add_scalar_(c2, 2));
    assert_ok(torc_add_scalar_(g2, 2));
    assert_ok(torc_mul_scalar_(c2, 0.5));
    assert_ok(torc_mul_scalar_(g2, 0.5));
    same(c2, g2);
  }
  const int32_t iv[] = {-5, 0, 7};
  torc_tensor *xi = torc_from_host(iv, TORC_SHAPE(3), TORC_I32, TORC_CPU);
  torc_tensor *gi = torc_to(xi, sim);
  same(torc_clamp(xi, 1, -2, 1, 3), torc_clamp(gi, 1, -2, 1, 3));
  same(torc_add_scalar(xi, 2), torc_add_scalar(gi, 2));
  /* a backward on sim equals the cpu one */
  torc_tensor *xc = xs(TORC_F64), *xg = torc_to(xc, sim);
  assert_ok(torc_set_requires_grad(xc, 1));
  assert_ok(torc_set_requires_grad(xg, 1));
  assert_ok(torc_backward(torc_sum(torc_gelu(xc, 0), NULL, 0, 0), NULL, 0));
  assert_ok(torc_backward(torc_sum(torc_gelu(xg, 0), NULL, 0, 0), NULL, 0));
  same(torc_grad_of(xc), torc_grad_of(xg));
  torc_scope_end(s);
}


int main(void) {
#define T(name)                                                                \
  cmocka_unit_test_setup_teardown(name, test_live_setup, test_live_teardown)
  const struct CMUnitTest tests[] = {
      T(test_unary_values),     T(test_unary_edges),
      T(test_unary_errors),     T(test_inplace),
      T(test_logical_where),    T(test_scalar_ops),
      T(test_gradcheck_unary),  T(test_gradcheck_where_scalar),
      T(test_grad_fn_names),    T(test_sim_matches_cpu),
  };
#undef T
  return cmocka_run_group_tests_name("elementwise", tests, test_setup_ref_sim,
                                     test_teardown_all);
}
