/* tests/test_autograd.c — the tape and the engine: gradients of chains,
 * broadcasting and matmul against hand values; gradcheck of every
 * differentiable op; retain_graph, torc_grad, hooks, retain_grad,
 * zero_grad; the in-place, detach and anomaly errors; grad modes; and a
 * 1,000-step loop that must not grow memory. */
#include <math.h>

#include "testutil.h"

static torc_tensor *param(const double *v, const int64_t *shape, int ndim) {
  torc_tensor *t = torc_from_host(v, shape, ndim, TORC_F64, TORC_CPU);
  assert_torc(t);
  assert_ok(torc_set_requires_grad(t, 1));
  return t;
}

static void expect_grad(const torc_tensor *t, const double *e, int64_t n) {
  torc_tensor *g = torc_grad_of(t);
  if (g == NULL) {
    print_error("no gradient\n");
    fail();
  }
  test_assert_values(g, e, n, 1e-12);
}

static void test_chain_and_broadcast(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double xv[] = {1, 2, 3, 4, 5, 6}, bv[] = {10, 20, 30};
  torc_tensor *x = param(xv, TORC_SHAPE(2, 3));
  torc_tensor *b = param(bv, TORC_SHAPE(3));
  /* loss = sum((x * x + b) * 2): dx = 4x, db = 2 * 2 rows = 4 */
  torc_tensor *two = torc_full(NULL, 0, 2, TORC_F64, TORC_CPU);
  torc_tensor *loss = torc_sum(torc_mul(torc_add(torc_mul(x, x), b), two),
                               NULL, 0, 0);
  assert_torc(loss);
  assert_string_equal(torc_grad_fn_name(loss), "SumBackward");
  assert_false(torc_is_leaf(loss));
  assert_true(torc_is_leaf(x));
  assert_string_equal(torc_grad_fn_name(x), "AccumulateGrad");
  assert_ok(torc_backward(loss, NULL, 0));
  const double ex[] = {4, 8, 12, 16, 20, 24}, eb[] = {4, 4, 4};
  expect_grad(x, ex, 6);
  expect_grad(b, eb, 3);
  assert_null(torc_grad_of(two));
  torc_scope_end(s);
}

static void test_matmul_shapes(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double av[] = {1, 2, 3, 4, 5, 6}, bv[] = {1, 0, -1, 2, 0.5, 3};
  torc_tensor *a = param(av, TORC_SHAPE(2, 3));
  torc_tensor *b = param(bv, TORC_SHAPE(3, 2));
  /* d sum(a @ b) / da[i,k] = sum_j b[k,j]; / db[k,j] = sum_i a[i,k] */
  assert_ok(torc_backward(torc_sum(torc_matmul(a, b), NULL, 0, 0), NULL, 0));
  const double ea[] = {1, 1, 3.5, 1, 1, 3.5}, eb[] = {5, 5, 7, 7, 9, 9};
  expect_grad(a, ea, 6);
  expect_grad(b, eb, 6);
  /* 1-D @ 1-D: a dot product; vector @ batched matrix broadcasts */
  const double v[] = {1, 2, 3};
  torc_tensor *u = param(v, TORC_SHAPE(3));
  torc_tensor *w = param(v, TORC_SHAPE(3));
  assert_ok(torc_backward(torc_matmul(u, w), NULL, 0));
  expect_grad(u, v, 3);
  torc_tensor *bat = torc_ones(TORC_SHAPE(4, 3, 2), TORC_F64, TORC_CPU);
  assert_ok(torc_set_requires_grad(bat, 1));
  torc_tensor *vm = torc_matmul(u, bat); /* [4, 2] */
  assert_int_equal(torc_ndim(vm), 2);
  assert_ok(torc_zero_grad(u, 1));
  assert_ok(torc_backward(torc_sum(vm, NULL, 0, 0), NULL, 0));
  const double eu[] = {8, 8, 8}; /* 4 batches x 2 columns of ones */
  expect_grad(u, eu, 3);
  torc_scope_end(s);
}

/* ---- gradcheck of every differentiable op ---- */

typedef torc_tensor *(*unary_fn)(const torc_tensor *);
typedef torc_tensor *(*binary_fn)(const torc_tensor *, const torc_tensor *);

static torc_tensor *call_unary(torc_tensor *const *in, int n, void *user) {
  return ((unary_fn)user)(in[0]);
}

static torc_tensor *call_binary(torc_tensor *const *in, int n, void *user) {
  return ((binary_fn)user)(in[0], in[1]);
}

/* Inputs away from kinks and domain edges: positive, distinct. */
static torc_tensor *input(int64_t a, int64_t b, double lo, uint64_t seed) {
  torc_generator *g = torc_generator_new(seed);
  torc_tensor *r = torc_rand((const int64_t[]){a, b}, 2, TORC_F64, TORC_CPU, g);
  torc_tensor *k = torc_full(NULL, 0, lo, TORC_F64, TORC_CPU);
  torc_tensor *x = torc_add(r, k);
  torc_release(r);
  torc_release(k);
  torc_generator_free(g);
  assert_ok(torc_set_requires_grad(x, 1));
  return x;
}

static void test_gradcheck_unary(void **state) {
  (void)state;
  static const struct {
    const char *name;
    unary_fn fn;
  } ops[] = {{"neg", torc_neg},     {"abs", torc_abs},
             {"square", torc_square}, {"relu", torc_relu},
             {"exp", torc_exp},     {"log", torc_log},
             {"sqrt", torc_sqrt},   {"sin", torc_sin},
             {"cos", torc_cos},     {"tanh", torc_tanh},
             {"sigmoid", torc_sigmoid}, {"reciprocal", torc_reciprocal},
             {"sign", torc_sign}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    torc_tensor *x = input(3, 4, 0.5, i);
    torc_status st =
        torc_gradcheck(call_unary, (void *)ops[i].fn, &x, 1, 1e-6, 1e-7, 1e-5);
    if (st != TORC_OK) {
      print_error("%s: %s\n", ops[i].name, torc_last_error());
      fail();
    }
    torc_release(x);
  }
}

static void test_gradcheck_binary(void **state) {
  (void)state;
  static const struct {
    const char *name;
    binary_fn fn;
  } ops[] = {{"add", torc_add},         {"sub", torc_sub},
             {"mul", torc_mul},         {"div", torc_div},
             {"pow", torc_pow},         {"maximum", torc_maximum},
             {"minimum", torc_minimum}, {"matmul", torc_matmul}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    /* broadcasting: [3, 4] with [4] (matmul: [3, 4] with [4, 1]) */
    torc_tensor *in[2] = {input(3, 4, 0.5, 10 + i), NULL};
    torc_tensor *row = input(4, 1, 0.7, 20 + i);
    in[1] = ops[i].fn == torc_matmul ? torc_retain(row)
                                     : torc_reshape(row, TORC_SHAPE(4));
    torc_status st =
        torc_gradcheck(call_binary, (void *)ops[i].fn, in, 2, 1e-6, 1e-7, 1e-5);
    if (st != TORC_OK) {
      print_error("%s: %s\n", ops[i].name, torc_last_error());
      fail();
    }
    torc_release(in[0]), torc_release(in[1]), torc_release(row);
  }
}

typedef struct red {
  torc_tensor *(*fn)(const torc_tensor *, const int *, int, int);
  int dims[2], n, keep;
} red;

static torc_tensor *call_reduce(torc_tensor *const *in, int n, void *user) {
  const red *r = user;
  return r->fn(in[0], r->dims, r->n, r->keep);
}

static void test_gradcheck_reductions(void **state) {
  (void)state;
  red cases[] = {{torc_sum, {1}, 1, 0},  {torc_sum, {0}, 0, 1},
                 {torc_mean, {0}, 1, 1}, {torc_mean, {0, 1}, 2, 0},
                 {torc_prod, {1}, 1, 0}, {torc_amax, {0}, 1, 0},
                 {torc_amin, {1}, 1, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    torc_tensor *x = input(3, 4, 0.5, 30 + i);
    if (torc_gradcheck(call_reduce, &cases[i], &x, 1, 1e-6, 1e-7, 1e-5)) {
      print_error("reduction case %zu: %s\n", i, torc_last_error());
      fail();
    }
    torc_release(x);
  }
  /* prod with zeros: exact, not NaN */
  const double v[] = {2, 0, 3, 0, 0, 5};
  torc_tensor *x = param(v, TORC_SHAPE(2, 3));
  torc_tensor *p = torc_prod(x, (const int[]){1}, 1, 0);
  torc_tensor *l = torc_sum(p, NULL, 0, 0);
  assert_ok(torc_backward(l, NULL, 0));
  const double e[] = {0, 6, 0, 0, 0, 0}; /* row 2 has two zeros */
  expect_grad(x, e, 6);
  torc_release(x), torc_release(p), torc_release(l);
  /* amax with a tie: the gradient is split */
  const double t[] = {1, 3, 3};
  x = param(t, TORC_SHAPE(3));
  l = torc_amax(x, NULL, 0, 0);
  assert_ok(torc_backward(l, NULL, 0));
  const double et[] = {0, 0.5, 0.5};
  expect_grad(x, et, 3);
  torc_release(x), torc_release(l);
}

static torc_tensor *views_fn(torc_tensor *const *in, int n, void *user) {
  int s = torc_scope_begin();
  torc_tensor *x = in[0]; /* [3, 4] */
  torc_tensor *a = torc_transpose(x, 0, 1);            /* [4, 3] */
  torc_tensor *b = torc_slice(a, 0, 1, TORC_END, 2);   /* [2, 3] */
  torc_tensor *c = torc_permute(torc_unsqueeze(b, 0), (const int[]){2, 1, 0},
                                3);                    /* [3, 2, 1] */
  torc_tensor *d = torc_expand(c, TORC_SHAPE(3, 2, 5));
  torc_tensor *e = torc_reshape(d, TORC_SHAPE(6, 5));
  torc_tensor *f = torc_select(x, 1, 2);               /* [3] */
  torc_tensor *g = torc_narrow(torc_flatten(x, 0, -1), 0, 2, 5);
  torc_tensor *h = torc_mul(torc_sum(torc_square(e), NULL, 0, 0),
                            torc_sum(torc_mul(f, f), NULL, 0, 0));
  torc_tensor *out = torc_add(h, torc_sum(torc_exp(g), NULL, 0, 0));
  torc_scope_keep(out);
  torc_scope_end(s);
  return out;
}

static void test_gradcheck_views(void **state) {
  (void)state;
  torc_tensor *x = input(3, 4, 0.1, 40);
  if (torc_gradcheck(views_fn, NULL, &x, 1, 1e-6, 1e-6, 1e-5)) {
    print_error("views: %s\n", torc_last_error());
    fail();
  }
  torc_release(x);
}

/* ---- engine features ---- */

static void test_retain_graph_and_second_backward(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double v[] = {1, 2};
  torc_tensor *x = param(v, TORC_SHAPE(2));
  torc_tensor *y = torc_sum(torc_exp(x), NULL, 0, 0);
  assert_ok(torc_backward(y, NULL, 1));
  assert_ok(torc_backward(y, NULL, 0)); /* accumulates */
  const double e[] = {2 * exp(1.0), 2 * exp(2.0)};
  expect_grad(x, e, 2);
  assert_int_equal(torc_backward(y, NULL, 0), TORC_ERR_AUTOGRAD);
  assert_error(TORC_ERR_AUTOGRAD, "a second time");
  assert_contains(torc_last_error(), "retain_graph");
  torc_scope_end(s);
}

static void test_backward_errors(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *c = torc_ones(TORC_SHAPE(2), TORC_F64, TORC_CPU);
  assert_int_equal(torc_backward(c, NULL, 0), TORC_ERR_AUTOGRAD);
  assert_error(TORC_ERR_AUTOGRAD, "does not require grad");
  torc_tensor *x = torc_ones(TORC_SHAPE(2), TORC_F64, TORC_CPU);
  assert_ok(torc_set_requires_grad(x, 1));
  torc_tensor *y = torc_exp(x);
  assert_int_equal(torc_backward(y, NULL, 0), TORC_ERR_AUTOGRAD);
  assert_error(TORC_ERR_AUTOGRAD, "shape [2]; a gradient can be implied only");
  assert_int_equal(torc_set_requires_grad(y, 0), TORC_ERR_AUTOGRAD);
  assert_error(TORC_ERR_AUTOGRAD, "not a leaf");
  torc_tensor *i = torc_ones(TORC_SHAPE(2), TORC_I64, TORC_CPU);
  assert_int_equal(torc_set_requires_grad(i, 1), TORC_ERR_DTYPE);
  torc_scope_end(s);
}

static void test_torc_grad_and_unused(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double v[] = {3};
  torc_tensor *x = param(v, TORC_SHAPE(1));
  torc_tensor *z = param(v, TORC_SHAPE(1));
  torc_tensor *y = torc_sum(torc_mul(torc_mul(x, x), x), NULL, 0, 0);
  torc_tensor *h = torc_mul(x, x); /* a non-leaf input */
  torc_tensor *y2 = torc_sum(torc_mul(h, h), NULL, 0, 0);
  torc_tensor *g[2];
  torc_tensor *ins[2] = {x, z};
  assert_int_equal(torc_grad(&y, NULL, 1, ins, 2, g, 1, 0), TORC_ERR_AUTOGRAD);
  assert_error(TORC_ERR_AUTOGRAD, "input 1 was not used");
  assert_ok(torc_grad(&y, NULL, 1, ins, 2, g, 1, 1));
  const double e[] = {27};
  test_assert_values(g[0], e, 1, 1e-12);
  assert_null(g[1]);
  assert_null(torc_grad_of(x)); /* .grad untouched */
  torc_tensor *gh;
  assert_ok(torc_grad(&y2, NULL, 1, &h, 1, &gh, 0, 0));
  const double eh[] = {18}; /* d(h^2)/dh = 2h = 18 */
  test_assert_values(gh, eh, 1, 1e-12);
  torc_scope_end(s);
}

static torc_tensor *times_ten(const torc_tensor *g, void *user) {
  (*(int *)user)++;
  torc_tensor *k = torc_full(NULL, 0, 10, TORC_F64, TORC_CPU);
  torc_tensor *r = torc_mul(g, k);
  torc_release(k);
  return r;
}

static void test_hooks_retain_zero_grad(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double v[] = {1, 2};
  torc_tensor *x = param(v, TORC_SHAPE(2));
  torc_tensor *h = torc_mul(x, x);
  int calls = 0;
  int id = torc_register_hook(h, times_ten, &calls);
  assert_true(id > 0);
  assert_ok(torc_retain_grad(h));
  assert_ok(torc_backward(torc_sum(h, NULL, 0, 0), NULL, 0));
  assert_int_equal(calls, 1);
  const double eh[] = {10, 10}, ex[] = {20, 40};
  expect_grad(h, eh, 2);
  expect_grad(x, ex, 2);
  assert_ok(torc_zero_grad(x, 0));
  const double z[] = {0, 0};
  expect_grad(x, z, 2);
  assert_ok(torc_zero_grad(x, 1));
  assert_null(torc_grad_of(x));
  assert_ok(torc_remove_hook(h, id));
  assert_int_equal(torc_remove_hook(h, id), TORC_ERR_INVALID);
  torc_scope_end(s);
}

/* Post-accumulate hooks see the complete .grad, once per leaf per
 * backward, after every contribution was summed; a queued end-of-backward
 * callback runs once, after all of them. */
typedef struct post_log {
  int calls, cb_calls, order[8], n;
  double seen[8];
  torc_tensor *leaves[2];
} post_log;

static torc_status end_cb(void *user) {
  post_log *l = user;
  l->cb_calls++;
  l->order[l->n++] = -1;
  return TORC_OK;
}

static torc_status post_hook(torc_tensor *t, void *user) {
  post_log *l = user;
  double v = 0;
  torc_tensor *g = torc_grad_of(t);
  assert_non_null(g);
  torc_tensor *s = torc_sum(g, NULL, 0, 0);
  assert_ok(torc_item(s, &v));
  torc_release(s);
  l->seen[l->calls++] = v;
  l->order[l->n++] = t == l->leaves[0] ? 0 : 1;
  return torc_autograd_queue_callback(end_cb, l);
}

static torc_status failing_post_hook(torc_tensor *t, void *user) {
  (void)t, (void)user;
  return torc_set_error(TORC_ERR_INVALID, "the hook refuses");
}

static void test_post_accumulate_hooks(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double va[] = {1, 2}, vb[] = {3, 4};
  torc_tensor *a = param(va, TORC_SHAPE(2)), *b = param(vb, TORC_SHAPE(2));
  post_log l = {.leaves = {a, b}};
  int ia = torc_register_post_accumulate_grad_hook(a, post_hook, &l);
  int ib = torc_register_post_accumulate_grad_hook(b, post_hook, &l);
  assert_true(ia > 0 && ib > 0);
  /* a is used twice: its hook runs once, with both contributions. */
  torc_tensor *y = torc_add(torc_mul(a, b), torc_mul(a, a));
  assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
  assert_int_equal(l.calls, 2);
  assert_int_equal(l.cb_calls, 1);
  assert_int_equal(l.order[2], -1); /* the callback came last */
  /* d/da = b + 2a = {5, 8}: 13; d/db = a = {1, 2}: 3 */
  for (int i = 0; i < 2; i++)
    assert_true(l.seen[i] == (l.order[i] == 0 ? 13.0 : 3.0));
  /* torc_grad leaves .grad alone and runs no post-accumulate hook. */
  torc_tensor *ga = NULL;
  torc_tensor *y2 = torc_sum(torc_mul(a, b), NULL, 0, 0);
  assert_ok(torc_grad(&y2, NULL, 1, &a, 1, &ga, 0, 0));
  assert_int_equal(l.calls, 2);
  assert_non_null(ga);
  /* removed hooks are not called; a failing hook stops backward */
  assert_ok(torc_remove_hook(a, ia));
  assert_ok(torc_remove_hook(b, ib));
  assert_true(torc_register_post_accumulate_grad_hook(a, failing_post_hook,
                                                      NULL) > 0);
  assert_int_equal(
      torc_backward(torc_sum(torc_mul(a, b), NULL, 0, 0), NULL, 0),
      TORC_ERR_INVALID);
  assert_int_equal(l.calls, 2);
  /* Errors: a non-leaf, NULL, a callback queued outside backward. */
  torc_tensor *h = torc_mul(a, b);
  assert_int_equal(torc_register_post_accumulate_grad_hook(h, post_hook, &l),
                   -1);
  assert_non_null(strstr(torc_last_error(), "not a leaf"));
  assert_int_equal(torc_register_post_accumulate_grad_hook(a, NULL, &l), -1);
  assert_int_equal(torc_autograd_queue_callback(end_cb, &l),
                   TORC_ERR_AUTOGRAD);
  assert_non_null(strstr(torc_last_error(), "no backward is running"));
  torc_scope_end(s);
}

/* ---- the safety rules ---- */

static void test_inplace_on_leaf_is_refused(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *w = torc_ones(TORC_SHAPE(3), TORC_F32, TORC_CPU);
  assert_ok(torc_set_requires_grad(w, 1));
  torc_tensor *d = torc_ones(TORC_SHAPE(3), TORC_F32, TORC_CPU);
  assert_int_equal(torc_sub_(w, d), TORC_ERR_AUTOGRAD);
  assert_error(TORC_ERR_AUTOGRAD, "torc_sub_: the target is a leaf tensor "
                                  "that requires grad");
  assert_contains(torc_last_error(), "TORC_NO_GRAD");
  /* the optimizer's way: under no-grad it is allowed */
  torc_grad_mode m = torc_set_grad_mode(TORC_NO_GRAD);
  assert_ok(torc_sub_(w, d));
  torc_set_grad_mode(m);
  /* in-place through a view of w is refused too */
  torc_tensor *v = torc_slice(w, 0, 0, 2, 1);
  assert_int_equal(torc_fill_(v, 3), TORC_ERR_AUTOGRAD);
  assert_error(TORC_ERR_AUTOGRAD, "view");
  torc_scope_end(s);
}

static void test_modified_after_save_is_caught(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double v[] = {1, 2, 3};
  torc_tensor *x = param(v, TORC_SHAPE(3));
  torc_tensor *h = torc_exp(x); /* exp saves its output h */
  torc_tensor *y = torc_sum(torc_mul(h, h), NULL, 0, 0);
  /* a detached alias shares h's memory and version counter */
  torc_tensor *alias = torc_detach(h);
  assert_ok(torc_fill_(alias, 0));
  assert_int_equal(torc_backward(y, NULL, 0), TORC_ERR_AUTOGRAD);
  assert_error(TORC_ERR_AUTOGRAD, "saved by op 'mul' (MulBackward) was "
                                  "modified in place");
  assert_contains(torc_last_error(), "version 0 and is now at version 1");
  torc_scope_end(s);
}

static void test_inplace_on_nonleaf_is_tracked(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double v[] = {1, 2}, w[] = {3, 4};
  torc_tensor *x = param(v, TORC_SHAPE(2));
  torc_tensor *y = param(w, TORC_SHAPE(2));
  torc_tensor *h = torc_mul(x, x); /* h = x^2 */
  assert_ok(torc_add_(h, y));      /* h = x^2 + y */
  assert_ok(torc_mul_(h, y));      /* h = (x^2 + y) y */
  assert_string_equal(torc_grad_fn_name(h), "MulBackward");
  assert_ok(torc_backward(torc_sum(h, NULL, 0, 0), NULL, 0));
  const double ex[] = {2 * 1 * 3, 2 * 2 * 4};   /* 2x y */
  const double ey[] = {1 + 2 * 3, 4 + 2 * 4};   /* x^2 + 2y */
  expect_grad(x, ex, 2);
  expect_grad(y, ey, 2);
  torc_scope_end(s);
}

static void test_anomaly_names_the_op(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double v[] = {0, 1};
  torc_tensor *x = param(v, TORC_SHAPE(2));
  torc_tensor *y = torc_sum(torc_sqrt(x), NULL, 0, 0); /* d/dx at 0: inf */
  torc_set_anomaly_mode(1);
  assert_int_equal(torc_backward(y, NULL, 1), TORC_ERR_AUTOGRAD);
  assert_error(TORC_ERR_AUTOGRAD, "anomaly");
  assert_contains(torc_last_error(), "op 'sqrt'");
  torc_set_anomaly_mode(0);
  assert_ok(torc_backward(y, NULL, 0)); /* without: an inf gradient */
  double g0;
  torc_tensor *g = torc_select(torc_grad_of(x), 0, 0);
  assert_ok(torc_item(g, &g0));
  assert_true(isinf(g0));
  torc_scope_end(s);
}

static void test_modes(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *x = torc_ones(TORC_SHAPE(2), TORC_F32, TORC_CPU);
  assert_ok(torc_set_requires_grad(x, 1));
  assert_int_equal(torc_get_grad_mode(), TORC_GRAD_ENABLED);
  torc_grad_mode m = torc_set_grad_mode(TORC_NO_GRAD);
  torc_tensor *y = torc_exp(x);
  assert_false(torc_requires_grad(y));
  assert_null(torc_grad_fn_name(y));
  torc_set_grad_mode(TORC_INFERENCE);
  torc_tensor *z = torc_zeros(TORC_SHAPE(2), TORC_F32, TORC_CPU);
  uint64_t v = torc_version(z);
  assert_ok(torc_add_(z, y));
  assert_int_equal(torc_version(z), v); /* no version bump */
  torc_set_grad_mode(m);
  assert_ok(torc_add_(z, y));
  assert_int_equal(torc_version(z), v + 1);
  torc_scope_end(s);
}

/* 1,000 steps of forward, backward and an update: live tensors and bytes
 * allocated return to the same values every step. */
static void test_training_loop_memory_is_flat(void **state) {
  (void)state;
  torc_generator *g = torc_generator_new(1);
  torc_tensor *w = torc_randn(TORC_SHAPE(8, 4), TORC_F32, TORC_CPU, g);
  torc_tensor *x = torc_randn(TORC_SHAPE(16, 8), TORC_F32, TORC_CPU, g);
  assert_ok(torc_set_requires_grad(w, 1));
  torc_tensor *lr = torc_full(NULL, 0, 0.01, TORC_F32, TORC_CPU);
  int64_t live = 0;
  size_t bytes = 0;
  for (int step = 0; step < 1000; step++) {
    int s = torc_scope_begin();
    torc_tensor *loss = torc_mean(torc_square(torc_tanh(torc_matmul(x, w))),
                                  NULL, 0, 0);
    assert_ok(torc_backward(loss, NULL, 0));
    torc_grad_mode m = torc_set_grad_mode(TORC_NO_GRAD);
    assert_ok(torc_sub_(w, torc_mul(torc_grad_of(w), lr)));
    torc_set_grad_mode(m);
    assert_ok(torc_zero_grad(w, 1));
    torc_scope_end(s);
    if (step == 1) {
      live = torc_tensor_live_count();
      bytes = torc_device_memory_allocated(TORC_CPU);
    } else if (step > 1) {
      assert_int_equal(torc_tensor_live_count(), live);
      assert_int_equal(torc_device_memory_allocated(TORC_CPU), bytes);
    }
  }
  torc_release(w), torc_release(x), torc_release(lr);
  torc_generator_free(g);
}

/* A sequence read step by step: 200 selects of x [200, 3], each step
 * scaled by its index, stacked (a node of 200 inputs) and summed. The
 * selects' gradients go into their rows in place; dx[t] = t. */
static void test_long_sequence_of_views(void **state) {
  (void)state;
  enum { L = 200 };
  int s = torc_scope_begin();
  double xv[L * 3];
  for (int i = 0; i < L * 3; i++)
    xv[i] = 0.5 * i;
  torc_tensor *x = param(xv, TORC_SHAPE(L, 3));
  const torc_tensor *steps[L];
  for (int t = 0; t < L; t++)
    steps[t] = torc_mul_scalar(torc_select(x, 0, t), (double)t);
  /* every other row also through a slice, so both view kinds meet in
   * one gradient */
  torc_tensor *y = torc_add(torc_sum(torc_stack(steps, L, 0), NULL, 0, 0),
                            torc_sum(torc_slice(x, 0, 0, L, 2), NULL, 0, 0));
  assert_torc(y);
  assert_ok(torc_backward(y, NULL, 0));
  double ex[L * 3];
  for (int t = 0; t < L; t++)
    for (int j = 0; j < 3; j++)
      ex[t * 3 + j] = t + (t % 2 == 0 ? 1 : 0);
  expect_grad(x, ex, L * 3);
  torc_scope_end(s);
}

static int setup(void **state) {
  (void)state;
  return torc_plugin_load("ref", NULL) == TORC_OK ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_and_broadcast),
      cmocka_unit_test(test_matmul_shapes),
      cmocka_unit_test(test_gradcheck_unary),
      cmocka_unit_test(test_gradcheck_binary),
      cmocka_unit_test(test_gradcheck_reductions),
      cmocka_unit_test(test_gradcheck_views),
      cmocka_unit_test(test_retain_graph_and_second_backward),
      cmocka_unit_test(test_backward_errors),
      cmocka_unit_test(test_torc_grad_and_unused),
      cmocka_unit_test(test_hooks_retain_zero_grad),
      cmocka_unit_test(test_post_accumulate_hooks),
      cmocka_unit_test(test_inplace_on_leaf_is_refused),
      cmocka_unit_test(test_modified_after_save_is_caught),
      cmocka_unit_test(test_inplace_on_nonleaf_is_tracked),
      cmocka_unit_test(test_anomaly_names_the_op),
      cmocka_unit_test(test_modes),
      cmocka_unit_test(test_training_loop_memory_is_flat),
      cmocka_unit_test(test_long_sequence_of_views),
  };
  return cmocka_run_group_tests(tests, setup, test_teardown_all);
}
