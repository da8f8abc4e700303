/* tests/test_reduce.c — the reductions and ops along a dim: var,
 * std, logsumexp, norm, max/min with indices, argmax/argmin, cumsum,
 * softmax, log_softmax, and linear: values against PyTorch, edge cases,
 * errors, gradcheck and the sim device. */
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

/* x = torch.tensor([[1., 4, -2], [0.5, 3, 3]], dtype=torch.float64) */
static const double XV[] = {1, 4, -2, 0.5, 3, 3};

static torc_tensor *xs(torc_dtype dt) {
  torc_tensor *f = torc_from_host(XV, TORC_SHAPE(2, 3), TORC_F64, TORC_CPU);
  torc_tensor *t = torc_to_dtype(f, dt);
  assert_torc(t);
  return t;
}

static const int D0[] = {0}, D1[] = {1}, DM1[] = {-1};

static void test_var_std(void **state) {
  (void)state;
  int s = torc_scope_begin();
  /* torch.var(x, 1); torch.var(x, 0, correction=0); torch.var(x);
   * torch.std(x, 1); torch.std(x, (0, 1), correction=0);
   * torch.var(x, 0, correction=2) */
  const double v1[] = {9.0, 2.0833333333333335}, v0[] = {0.0625, 0.25, 6.25},
               va[] = {4.841666666666666}, s1[] = {3.0, 1.4433756729740645},
               sa[] = {2.008661798865658},
               vc2[] = {INFINITY, INFINITY, INFINITY};
  const torc_dtype dts[] = {TORC_F64, TORC_F32};
  for (int d = 0; d < 2; d++) {
    double tol = d ? 1e-6 : 1e-14;
    torc_tensor *x = xs(dts[d]);
    torc_tensor *r = torc_var(x, D1, 1, 1, 0);
    assert_int_equal(torc_dtype_of(r), dts[d]);
    expect_values(r, v1, 2, tol);
    expect_values(torc_var(x, D0, 1, 0, 0), v0, 3, tol);
    expect_values(torc_var(x, NULL, 0, 1, 0), va, 1, tol);
    expect_values(torc_std(x, DM1, 1, 1, 0), s1, 2, tol);
    expect_values(torc_std(x, (const int[]){0, 1}, 2, 0, 0), sa, 1, tol);
    expect_values(torc_var(x, D0, 1, 2, 0), vc2, 3, 0);
    torc_tensor *k = torc_std(x, D1, 1, 1, 1);
    assert_int_equal(torc_ndim(k), 2);
    assert_int_equal(torc_shape(k)[1], 1);
  }
  /* empty dim: NaN; ints are an error */
  torc_tensor *e = torc_zeros(TORC_SHAPE(2, 0), TORC_F64, TORC_CPU);
  double *ev = test_values(torc_var(e, D1, 1, 1, 0));
  assert_true(isnan(ev[0]) && isnan(ev[1]));
  free(ev);
  torc_tensor *i = torc_ones(TORC_SHAPE(3), TORC_I32, TORC_CPU);
  assert_null(torc_var(i, NULL, 0, 1, 0));
  assert_error(TORC_ERR_DTYPE, "the input is i32");
  assert_null(torc_std(xs(TORC_F32), (const int[]){2}, 1, 1, 0));
  assert_error(TORC_ERR_RANGE, "dim 2 is out of range");
  torc_scope_end(s);
}

static void test_logsumexp_norm(void **state) {
  (void)state;
  int s = torc_scope_begin();
  /* torch.logsumexp(x, 1); torch.logsumexp(x, (0, 1));
   * torch.linalg.vector_norm(x, 1, dim=1), (x, 2, dim=1),
   * (x, inf, dim=0), (x) */
  const double l1[] = {4.050945763522998, 3.7333697948272113},
               la[] = {4.5978591479807225}, n1[] = {7.0, 6.5},
               n2[] = {4.58257569495584, 4.272001872658765},
               ni[] = {1.0, 4.0, 3.0}, n2a[] = {6.264982043070834};
  torc_tensor *x = xs(TORC_F64);
  expect_values(torc_logsumexp(x, D1, 1, 0), l1, 2, 1e-14);
  expect_values(torc_logsumexp(x, NULL, 0, 0), la, 1, 1e-14);
  expect_values(torc_norm(x, 1, D1, 1, 0), n1, 2, 1e-14);
  expect_values(torc_norm(x, 2, D1, 1, 0), n2, 2, 1e-14);
  expect_values(torc_norm(x, INFINITY, D0, 1, 0), ni, 3, 0);
  expect_values(torc_norm(x, 2, NULL, 0, 0), n2a, 1, 1e-14);
  expect_values(torc_norm(xs(TORC_F32), 2, D1, 1, 1), n2, 2, 1e-6);
  /* stability: torch.logsumexp(torch.tensor([1000., 1001., 999.]), 0) */
  const double big[] = {1000, 1001, 999};
  torc_tensor *b = torc_from_host(big, TORC_SHAPE(3), TORC_F64, TORC_CPU);
  const double lb[] = {1001.4076059644443};
  expect_values(torc_logsumexp(b, NULL, 0, 0), lb, 1, 1e-14);
  expect_values(torc_logsumexp(torc_to_dtype(b, TORC_F32), NULL, 0, 0),
                     lb, 1, 1e-7);
  /* all -inf, and empty: -inf (torch.logsumexp(torch.empty(0), 0)) */
  const double ninf[] = {-INFINITY, -INFINITY};
  torc_tensor *mi = torc_from_host(ninf, TORC_SHAPE(2), TORC_F64, TORC_CPU);
  expect_values(torc_logsumexp(mi, NULL, 0, 0), ninf, 1, 0);
  torc_tensor *e = torc_zeros(TORC_SHAPE(0), TORC_F64, TORC_CPU);
  expect_values(torc_logsumexp(e, D0, 1, 0), ninf, 1, 0);
  expect_values(torc_norm(e, 2, NULL, 0, 0), (const double[]){0}, 1, 0);
  /* a 2-norm of huge values does not overflow (more accurate than
   * PyTorch, which gives inf here) */
  const double h[] = {1e200, 1e200};
  torc_tensor *ht = torc_from_host(h, TORC_SHAPE(2), TORC_F64, TORC_CPU);
  expect_values(torc_norm(ht, 2, NULL, 0, 0),
                     (const double[]){1.4142135623730951e200}, 1, 1e-15);
  /* errors */
  assert_null(torc_norm(x, 3, NULL, 0, 0));
  assert_error(TORC_ERR_INVALID, "p = 3 is not supported");
  assert_null(torc_norm(e, INFINITY, NULL, 0, 0));
  assert_error(TORC_ERR_SHAPE, "size 0");
  assert_null(torc_logsumexp(torc_ones(TORC_SHAPE(2), TORC_BOOL, TORC_CPU),
                             NULL, 0, 0));
  assert_error(TORC_ERR_DTYPE, "the input is bool");
  torc_scope_end(s);
}

static void test_max_min_dim(void **state) {
  (void)state;
  int s = torc_scope_begin();
  /* torch.max(x, 1) -> ([4, 3], [1, 1]) (a tie in row 2: the first);
   * torch.min(x, 0) -> ([0.5, 3, -2], [1, 1, 0]) */
  const torc_dtype dts[] = {TORC_F64, TORC_F32, TORC_I32, TORC_BF16};
  for (int d = 0; d < 4; d++) {
    torc_tensor *x = xs(dts[d]), *v = NULL, *i = NULL;
    if (dts[d] == TORC_I32) {
      x = torc_mul_scalar(xs(TORC_F64), 2);
      x = torc_to_dtype(x, TORC_I32);
    }
    double f = dts[d] == TORC_I32 ? 2 : 1;
    assert_ok(torc_max_dim(x, 1, 0, &v, &i));
    assert_int_equal(torc_dtype_of(v), dts[d]);
    assert_int_equal(torc_dtype_of(i), TORC_I64);
    expect_values(v, (const double[]){4 * f, 3 * f}, 2, 0);
    expect_values(i, (const double[]){1, 1}, 2, 0);
    assert_ok(torc_min_dim(x, 0, 1, &v, &i));
    assert_int_equal(torc_ndim(v), 2);
    assert_int_equal(torc_shape(i)[0], 1);
    expect_values(v, (const double[]){0.5 * f, 3 * f, -2 * f}, 3, 0);
    expect_values(i, (const double[]){1, 1, 0}, 3, 0);
  }
  /* NaN wins, the first one:
   * torch.max(torch.tensor([[1., nan, 5, nan]]), 1) -> (nan, 1) */
  const double nv[] = {1, NAN, 5, NAN};
  torc_tensor *n = torc_from_host(nv, TORC_SHAPE(1, 4), TORC_F64, TORC_CPU);
  torc_tensor *v, *i;
  assert_ok(torc_max_dim(n, -1, 0, &v, &i));
  double *vv = test_values(v);
  assert_true(isnan(vv[0]));
  free(vv);
  expect_values(i, (const double[]){1}, 1, 0);
  /* only the indices wanted */
  assert_ok(torc_max_dim(n, 0, 0, NULL, &i));
  expect_values(i, (const double[]){0, 0, 0, 0}, 4, 0);
  /* argmax/argmin: torch.argmax(x) -> 1, torch.argmin(x) -> 2,
   * torch.argmax(x, 1, keepdim=True) -> [[1], [1]] */
  torc_tensor *x = xs(TORC_F32);
  torc_tensor *a = torc_argmax(x, NULL, 0);
  assert_int_equal(torc_ndim(a), 0);
  assert_int_equal(torc_dtype_of(a), TORC_I64);
  expect_values(a, (const double[]){1}, 1, 0);
  expect_values(torc_argmin(x, NULL, 0), (const double[]){2}, 1, 0);
  a = torc_argmax(x, D1, 1);
  assert_int_equal(torc_ndim(a), 2);
  expect_values(a, (const double[]){1, 1}, 2, 0);
  a = torc_argmin(x, NULL, 1);
  assert_int_equal(torc_ndim(a), 2);
  expect_values(a, (const double[]){2}, 1, 0);
  /* a 0-dim input */
  torc_tensor *z = torc_full(NULL, 0, 7, TORC_F32, TORC_CPU);
  assert_ok(torc_max_dim(z, 0, 0, &v, &i));
  expect_values(v, (const double[]){7}, 1, 0);
  expect_values(i, (const double[]){0}, 1, 0);
  /* errors */
  assert_int_equal(torc_max_dim(x, 2, 0, &v, &i), TORC_ERR_RANGE);
  assert_error(TORC_ERR_RANGE, "torc_max_dim: dim 2 is out of range");
  assert_null(v);
  torc_tensor *e = torc_zeros(TORC_SHAPE(2, 0), TORC_F32, TORC_CPU);
  assert_int_equal(torc_min_dim(e, 1, 0, &v, &i), TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "dim 1 of the input (shape [2, 0]) has size 0");
  assert_null(torc_argmax(e, NULL, 0));
  assert_error(TORC_ERR_SHAPE, "no elements");
  /* a 0-size non-reduced dim is fine */
  assert_ok(torc_max_dim(e, 0, 0, &v, &i));
  assert_int_equal(torc_numel(v), 0);
  torc_scope_end(s);
}

static void test_cumsum_softmax(void **state) {
  (void)state;
  int s = torc_scope_begin();
  /* torch.cumsum(x, 1); torch.cumsum(x, 0) */
  const double c1[] = {1.0, 5.0, 3.0, 0.5, 3.5, 6.5},
               c0[] = {1.0, 4.0, -2.0, 1.5, 7.0, 1.0};
  torc_tensor *x = xs(TORC_F64);
  expect_values(torc_cumsum(x, 1), c1, 6, 1e-15);
  expect_values(torc_cumsum(x, -2), c0, 6, 1e-15);
  expect_values(torc_cumsum(torc_transpose(x, 0, 1), 1),
                     (const double[]){1, 1.5, 4, 7, -2, 1}, 6, 1e-15);
  /* integers and bool give i64 (torch.cumsum of int32 is int64) */
  const int32_t iv[] = {1, 2, 3};
  torc_tensor *xi = torc_from_host(iv, TORC_SHAPE(3), TORC_I32, TORC_CPU);
  torc_tensor *ci = torc_cumsum(xi, 0);
  assert_int_equal(torc_dtype_of(ci), TORC_I64);
  expect_values(ci, (const double[]){1, 3, 6}, 3, 0);
  torc_tensor *cb = torc_cumsum(torc_ones(TORC_SHAPE(3), TORC_BOOL, TORC_CPU), 0);
  assert_int_equal(torc_dtype_of(cb), TORC_I64);
  expect_values(cb, (const double[]){1, 2, 3}, 3, 0);
  /* F.softmax(x, 1); F.log_softmax(x, 0) */
  const double sm[] = {0.04731415522182404, 0.9503302116973794,
                       0.0023556330807966803, 0.039424422479462075,
                       0.48028778876026895, 0.48028778876026895};
  const double lsm[] = {-0.4740769841801067, -0.31326168751822286,
                        -5.006715348489118, -0.9740769841801067,
                        -1.3132616875182228, -0.006715348489117967};
  expect_values(torc_softmax(x, 1), sm, 6, 1e-15);
  expect_values(torc_log_softmax(x, 0), lsm, 6, 1e-14);
  expect_values(torc_softmax(xs(TORC_F32), -1), sm, 6, 1e-7);
  expect_values(torc_log_softmax(xs(TORC_F16), 0), lsm, 6, 2e-3);
  /* stability: F.log_softmax(torch.tensor([1000., 1001., 999.]), 0) */
  const double big[] = {1000, 1001, 999};
  torc_tensor *b = torc_to_dtype(
      torc_from_host(big, TORC_SHAPE(3), TORC_F64, TORC_CPU), TORC_F32);
  const double lb[] = {-1.4076059644443801, -0.40760596444438, -2.40760596444438};
  expect_values(torc_log_softmax(b, 0), lb, 3, 1e-7);
  expect_values(torc_sum(torc_softmax(b, 0), NULL, 0, 0),
                     (const double[]){1}, 1, 1e-7);
  /* F.softmax(torch.tensor([inf, 1.]), 0) -> [nan, nan], as PyTorch */
  const double iv2[] = {INFINITY, 1};
  torc_tensor *it = torc_from_host(iv2, TORC_SHAPE(2), TORC_F64, TORC_CPU);
  expect_values(torc_softmax(it, 0), (const double[]){NAN, NAN}, 2, 0);
  /* an empty dim gives an empty result */
  torc_tensor *e = torc_zeros(TORC_SHAPE(0, 2), TORC_F32, TORC_CPU);
  assert_int_equal(torc_numel(torc_log_softmax(e, 0)), 0);
  assert_int_equal(torc_numel(torc_cumsum(e, 0)), 0);
  /* errors */
  assert_null(torc_softmax(xi, 0));
  assert_error(TORC_ERR_DTYPE, "torc_softmax: the input is i32");
  assert_null(torc_cumsum(x, 2));
  assert_error(TORC_ERR_RANGE, "torc_cumsum: dim 2 is out of range");
  assert_null(torc_log_softmax(x, -3));
  assert_error(TORC_ERR_RANGE, "dim -3");
  torc_scope_end(s);
}

static void test_linear(void **state) {
  (void)state;
  int s = torc_scope_begin();
  /* w = [[1, 2, 3], [0, -1, 0.5]], b = [0.25, -1]:
   * F.linear(x, w, b) -> [[3.25, -6], [15.75, -2.5]];
   * F.linear(x[0], w) -> [3, -5] */
  const double wv[] = {1, 2, 3, 0, -1, 0.5}, bv[] = {0.25, -1};
  torc_tensor *x = xs(TORC_F64);
  torc_tensor *w = torc_from_host(wv, TORC_SHAPE(2, 3), TORC_F64, TORC_CPU);
  torc_tensor *b = torc_from_host(bv, TORC_SHAPE(2), TORC_F64, TORC_CPU);
  expect_values(torc_linear(x, w, b),
                     (const double[]){3.25, -6, 15.75, -2.5}, 4, 1e-15);
  torc_tensor *r = torc_linear(torc_select(x, 0, 0), w, NULL);
  assert_int_equal(torc_ndim(r), 1);
  expect_values(r, (const double[]){3, -5}, 2, 1e-15);
  torc_tensor *x3 = torc_reshape(x, TORC_SHAPE(1, 2, 3));
  torc_tensor *r3 = torc_linear(x3, w, b);
  assert_int_equal(torc_ndim(r3), 3);
  expect_values(r3, (const double[]){3.25, -6, 15.75, -2.5}, 4, 1e-15);
  /* errors */
  assert_null(torc_linear(x, torc_transpose(w, 0, 1), b));
  assert_error(TORC_ERR_SHAPE, "input of shape [2, 3] and weight of shape [3, 2]");
  assert_null(torc_linear(x, w, torc_ones(TORC_SHAPE(3), TORC_F64, TORC_CPU)));
  assert_error(TORC_ERR_SHAPE, "bias of shape [3]");
  torc_clear_error();
  assert_null(torc_linear(x, NULL, b));
  assert_int_equal(torc_last_status(), TORC_ERR_NULL);
  /* autograd: LinearBackward, and hand gradients of sum(linear):
   * dx = column sums of w, dw = column sums of x, db = rows */
  assert_ok(torc_set_requires_grad(x, 1));
  assert_ok(torc_set_requires_grad(w, 1));
  assert_ok(torc_set_requires_grad(b, 1));
  torc_tensor *y = torc_linear(x, w, b);
  assert_string_equal(torc_grad_fn_name(y), "LinearBackward");
  assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
  expect_values(torc_grad_of(x), (const double[]){1, 1, 3.5, 1, 1, 3.5},
                     6, 1e-15);
  expect_values(torc_grad_of(w),
                     (const double[]){1.5, 7, 1, 1.5, 7, 1}, 6, 1e-15);
  expect_values(torc_grad_of(b), (const double[]){2, 2}, 2, 1e-15);
  torc_scope_end(s);
}

/* ---- gradcheck ---- */

typedef struct rop {
  const char *name;
  int which, dim, keep;
  double c;
} rop;

static torc_tensor *apply(const rop *o, const torc_tensor *x) {
  const int d[] = {o->dim};
  int nd = o->dim == 9 ? 0 : 1;
  torc_tensor *v = NULL;
  switch (o->which) {
  case 0: return torc_var(x, d, nd, o->c, o->keep);
  case 1: return torc_std(x, d, nd, o->c, o->keep);
  case 2: return torc_logsumexp(x, d, nd, o->keep);
  case 3: return torc_norm(x, o->c, d, nd, o->keep);
  case 4: return torc_cumsum(x, o->dim);
  case 5: return torc_softmax(x, o->dim);
  case 6: return torc_log_softmax(x, o->dim);
  case 7:
    torc_max_dim(x, o->dim, o->keep, &v, NULL);
    return v;
  case 8:
    torc_min_dim(x, o->dim, o->keep, &v, NULL);
    return v;
  }
  return NULL;
}

static const rop ROPS[] = {
    {"var", 0, 1, 0, 1},        {"var_all_c0", 0, 9, 0, 0},
    {"std", 1, 0, 1, 1},        {"std_all", 1, 9, 0, 1},
    {"logsumexp", 2, 1, 0, 0},  {"logsumexp_all", 2, 9, 1, 0},
    {"norm1", 3, 1, 0, 1},      {"norm2", 3, 0, 1, 2},
    {"norm_inf", 3, 9, 0, INFINITY},
    {"cumsum0", 4, 0, 0, 0},    {"cumsum1", 4, 1, 0, 0},
    {"softmax", 5, 1, 0, 0},    {"softmax0", 5, 0, 0, 0},
    {"log_softmax", 6, -1, 0, 0},
    {"max_dim", 7, 1, 0, 0},    {"min_dim", 8, 0, 1, 0}};

static torc_tensor *call_rop(torc_tensor *const *in, int n, void *user) {
  (void)n;
  return apply(user, in[0]);
}

static void test_gradcheck_all(void **state) {
  (void)state;
  const double v[] = {0.3, -1.2, 2.1, 0.7, 1.9, -0.4, 1.1, -2.6};
  for (size_t k = 0; k < sizeof ROPS / sizeof ROPS[0]; k++) {
    torc_tensor *x = torc_from_host(v, TORC_SHAPE(2, 4), TORC_F64, TORC_CPU);
    assert_ok(torc_set_requires_grad(x, 1));
    if (torc_gradcheck(call_rop, (void *)&ROPS[k], &x, 1, 1e-6, 1e-7, 1e-5)) {
      print_error("%s: %s\n", ROPS[k].name, torc_last_error());
      fail();
    }
    torc_release(x);
  }
}

static torc_tensor *lin_fn(torc_tensor *const *in, int n, void *user) {
  (void)user;
  return torc_linear(in[0], in[1], n > 2 ? in[2] : NULL);
}

static void test_gradcheck_linear_and_names(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_generator *g = torc_generator_new(5);
  torc_tensor *in[3] = {torc_randn(TORC_SHAPE(2, 3, 4), TORC_F64, TORC_CPU, g),
                        torc_randn(TORC_SHAPE(5, 4), TORC_F64, TORC_CPU, g),
                        torc_randn(TORC_SHAPE(5), TORC_F64, TORC_CPU, g)};
  torc_generator_free(g);
  for (int i = 0; i < 3; i++)
    assert_ok(torc_set_requires_grad(in[i], 1));
  assert_ok(torc_gradcheck(lin_fn, NULL, in, 3, 1e-6, 1e-7, 1e-5));
  assert_ok(torc_gradcheck(lin_fn, NULL, in, 2, 1e-6, 1e-7, 1e-5));
  torc_tensor *v1 = torc_select(in[0], 0, 0);
  torc_tensor *one[3] = {torc_select(v1, 0, 1), in[1], in[2]};
  assert_ok(torc_gradcheck(lin_fn, NULL, one, 3, 1e-6, 1e-7, 1e-5));
  /* names */
  const char *names[] = {"VarBackward", "VarBackward", "StdBackward",
                         "StdBackward", "LogsumexpBackward",
                         "LogsumexpBackward", "NormBackward", "NormBackward",
                         "NormBackward", "CumsumBackward", "CumsumBackward",
                         "SoftmaxBackward", "SoftmaxBackward",
                         "LogSoftmaxBackward", "MaxBackward", "MinBackward"};
  torc_tensor *x = torc_from_host((const double[]){1, 2, 3, 4, 5, 6, 7, 8},
                                  TORC_SHAPE(2, 4), TORC_F64, TORC_CPU);
  assert_ok(torc_set_requires_grad(x, 1));
  for (size_t k = 0; k < sizeof ROPS / sizeof ROPS[0]; k++) {
    torc_tensor *y = apply(&ROPS[k], x);
    assert_string_equal(torc_grad_fn_name(y), names[k]);
  }
  /* max_dim's indices are not differentiable; the gradient goes to one
   * winner on ties (torch.max(x, 1) backward) */
  torc_tensor *t = torc_from_host((const double[]){2, 5, 5, 1}, TORC_SHAPE(1, 4),
                                  TORC_F64, TORC_CPU);
  assert_ok(torc_set_requires_grad(t, 1));
  torc_tensor *v = NULL, *i = NULL;
  assert_ok(torc_max_dim(t, 1, 0, &v, &i));
  assert_false(torc_requires_grad(i));
  assert_ok(torc_backward(torc_sum(v, NULL, 0, 0), NULL, 0));
  expect_values(torc_grad_of(t), (const double[]){0, 1, 0, 0}, 4, 0);
  /* norm 2 at zero: gradient 0, not NaN */
  torc_tensor *z = torc_zeros(TORC_SHAPE(3), TORC_F64, TORC_CPU);
  assert_ok(torc_set_requires_grad(z, 1));
  assert_ok(torc_backward(torc_norm(z, 2, NULL, 0, 0), NULL, 0));
  expect_values(torc_grad_of(z), (const double[]){0, 0, 0}, 3, 0);
  /* softmax's gradient stays finite for large inputs */
  torc_tensor *bg = torc_from_host((const double[]){1000, 1001, 999},
                                   TORC_SHAPE(3), TORC_F64, TORC_CPU);
  assert_ok(torc_set_requires_grad(bg, 1));
  assert_ok(torc_backward(torc_select(torc_log_softmax(bg, 0), 0, 1), NULL, 0));
  double *gv = test_values(torc_grad_of(bg));
  for (int k = 0; k < 3; k++)
    assert_true(isfinite(gv[k]));
  free(gv);
  torc_scope_end(s);
}

/* ---- the sim device gives exactly the cpu result ---- */

static void same(const torc_tensor *c, const torc_tensor *s) {
  assert_torc(c);
  assert_torc(s);
  assert_int_equal(torc_dtype_of(c), torc_dtype_of(s));
  assert_int_equal(torc_ndim(c), torc_ndim(s));
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
  const torc_dtype dts[] = {TORC_F32, TORC_F64, TORC_BF16};
  for (int d = 0; d < 3; d++) {
    torc_tensor *c = xs(dts[d]), *g = torc_to(c, sim);
    for (size_t k = 0; k < sizeof ROPS / sizeof ROPS[0]; k++)
      same(apply(&ROPS[k], c), apply(&ROPS[k], g));
    torc_tensor *ic, *ig, *vc, *vg;
    assert_ok(torc_max_dim(c, 0, 1, &vc, &ic));
    assert_ok(torc_max_dim(g, 0, 1, &vg, &ig));
    same(ic, ig);
    same(torc_argmin(c, NULL, 0), torc_argmin(g, NULL, 0));
    same(torc_argmax(c, D1, 0), torc_argmax(g, D1, 0));
    torc_tensor *w = torc_ones(TORC_SHAPE(4, 3), dts[d], TORC_CPU);
    torc_tensor *b = torc_full(TORC_SHAPE(4), 0.5, dts[d], TORC_CPU);
    same(torc_linear(c, w, b), torc_linear(g, torc_to(w, sim), torc_to(b, sim)));
  }
  const int32_t iv[] = {1, -2, 3};
  torc_tensor *xi = torc_from_host(iv, TORC_SHAPE(3), TORC_I32, TORC_CPU);
  same(torc_cumsum(xi, 0), torc_cumsum(torc_to(xi, sim), 0));
  /* backward on sim */
  torc_tensor *xc = xs(TORC_F64), *xg = torc_to(xc, sim);
  assert_ok(torc_set_requires_grad(xc, 1));
  assert_ok(torc_set_requires_grad(xg, 1));
  assert_ok(torc_backward(torc_sum(torc_log_softmax(xc, 1), (const int[]){0}, 1,
                                   0),
                          torc_ones(TORC_SHAPE(3), TORC_F64, TORC_CPU), 0));
  assert_ok(torc_backward(torc_sum(torc_log_softmax(xg, 1), (const int[]){0}, 1,
                                   0),
                          torc_ones(TORC_SHAPE(3), TORC_F64, sim), 0));
  same(torc_grad_of(xc), torc_grad_of(xg));
  torc_scope_end(s);
}


int main(void) {
#define T(name)                                                                \
  cmocka_unit_test_setup_teardown(name, test_live_setup, test_live_teardown)
  const struct CMUnitTest tests[] = {
      T(test_var_std),       T(test_logsumexp_norm),
      T(test_max_min_dim),   T(test_cumsum_softmax),
      T(test_linear),        T(test_gradcheck_all),
      T(test_gradcheck_linear_and_names), T(test_sim_matches_cpu),
  };
#undef T
  return cmocka_run_group_tests_name("reduce", tests, test_setup_ref_sim,
                                     test_teardown_all);
}
