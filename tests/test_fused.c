/* tests/test_fused.c — the fused ops of core/ops_fused.def:
 *  - torc_sgd_step_ and torc_adam_step_ give the same bits as the chains
 *    of elementwise ops they replace (torch.optim's single-tensor order,
 *    composed here of public ops), in f32, f64, f16 and bf16, for every
 *    hyper-parameter combination the optim plugin passes; the cpu
 *    plugin's kernels give ref's bits; non-contiguous tensors update
 *    through copies;
 *  - torc_cross_entropy's loss and gradient against a double-precision
 *    host computation, for each reduction, class weights, label
 *    smoothing, ignore_index, [N, C, d] and [C] logits, on ref and on the
 *    cpu plugin;
 *  - their errors.
 */
#include <math.h>

#include "testutil.h"

#include "torc/optim.h"

static int have_cpu; /* the cpu plugin (built with OpenBLAS) is loaded */

static int group_setup(void **state) {
  (void)state;
  if (torc_plugin_load("ref", NULL) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  have_cpu = torc_plugin_load("cpu", NULL) == TORC_OK;
  torc_clear_error();
  if (!have_cpu)
    printf("# the cpu plugin is not built: its kernels are not checked\n");
  return 0;
}

/* Gaussian values times `scale` (plus `shift`) of dtype dt, shape s. */
static torc_tensor *randt(const int64_t *s, int nd, torc_dtype dt,
                          double scale, double shift) {
  torc_tensor *t = torc_randn(s, nd, TORC_F64, TORC_CPU, NULL);
  t = torc_add_scalar(torc_mul_scalar(t, scale), shift);
  return torc_to_dtype(t, dt);
}

/* Asserts a and b hold the same values exactly (what = where). */
static void assert_same(const torc_tensor *a, const torc_tensor *b,
                        const char *what) {
  assert_int_equal(torc_numel(a), torc_numel(b));
  double *va = test_values(a), *vb = test_values(b);
  assert_non_null(va);
  assert_non_null(vb);
  for (int64_t i = 0; i < torc_numel(a); i++)
    if (!(va[i] == vb[i] || (va[i] != va[i] && vb[i] != vb[i]))) {
      print_error("%s: element %lld is %.17g, expected %.17g\n", what,
                  (long long)i, va[i], vb[i]);
      free(va);
      free(vb);
      fail();
    }
  free(va);
  free(vb);
}

/* ---- the composed updates (plugins/optim/optimizers.c before fusion) --- */

/* x + alpha * y, as torch's x.add(y, alpha=alpha) */
static torc_tensor *axpy(const torc_tensor *x, const torc_tensor *y,
                         double alpha) {
  if (alpha == 1)
    return torc_add(x, y);
  if (alpha == -1)
    return torc_sub(x, y);
  return torc_add(x, torc_mul_scalar(y, alpha));
}

static void axpy_(torc_tensor *x, const torc_tensor *y, double alpha) {
  if (alpha == 1)
    assert_ok(torc_add_(x, y));
  else if (alpha == -1)
    assert_ok(torc_sub_(x, y));
  else
    assert_ok(torc_add_(x, torc_mul_scalar(y, alpha)));
}

static void sgd_composed(torc_tensor *param, const torc_tensor *grad,
                         torc_tensor *buf, const torc_sgd_step_params *h) {
  int scope = torc_scope_begin();
  const torc_tensor *d_p = grad;
  if (h->maximize)
    d_p = torc_neg(grad);
  if (h->weight_decay != 0)
    d_p = axpy(d_p, param, h->weight_decay);
  if (h->momentum != 0) {
    if (h->first_step) {
      assert_ok(torc_copy_(buf, d_p));
    } else {
      assert_ok(torc_mul_scalar_(buf, h->momentum));
      axpy_(buf, d_p, 1 - h->dampening);
    }
    d_p = h->nesterov ? axpy(d_p, buf, h->momentum) : buf;
  }
  axpy_(param, d_p, -h->lr);
  torc_scope_end(scope);
}

static void adam_composed(torc_tensor *param, const torc_tensor *grad,
                          torc_tensor *m, torc_tensor *v, torc_tensor *vmax,
                          const torc_adam_step_params *h) {
  int scope = torc_scope_begin();
  const torc_tensor *g = grad;
  if (h->maximize)
    g = torc_neg(grad);
  if (h->decoupled)
    assert_ok(torc_mul_scalar_(param, 1 - h->lr * h->weight_decay));
  else if (h->weight_decay != 0)
    g = axpy(g, param, h->weight_decay);
  assert_ok(torc_mul_scalar_(m, h->beta1));
  axpy_(m, g, 1 - h->beta1);
  assert_ok(torc_mul_scalar_(v, h->beta2));
  const torc_tensor *a =
      1 - h->beta2 == 1 ? g : torc_mul_scalar(g, 1 - h->beta2);
  assert_ok(torc_add_(v, torc_mul(a, g)));
  double bc1 = 1 - pow(h->beta1, (double)h->step);
  double bc2 = 1 - pow(h->beta2, (double)h->step);
  double step_size = h->lr / bc1;
  const torc_tensor *vv = v;
  if (h->amsgrad) {
    assert_ok(torc_copy_(vmax, torc_maximum(vmax, v)));
    vv = vmax;
  }
  torc_tensor *denom = torc_div_scalar(torc_sqrt(vv), sqrt(bc2));
  assert_ok(torc_add_scalar_(denom, h->eps));
  const torc_tensor *num =
      -step_size == 1 ? m : torc_mul_scalar(m, -step_size);
  assert_ok(torc_add_(param, torc_div(num, denom)));
  torc_scope_end(scope);
}

static const torc_dtype all_floats[4] = {TORC_F32, TORC_F64, TORC_F16,
                                         TORC_BF16};

static void test_sgd_matches_composed(void **state) {
  (void)state;
  static const torc_sgd_step_params cases[] = {
      /* lr, momentum, dampening, wd, nesterov, maximize */
      {0.1, 0, 0, 0, 0, 0, 0, 0},
      {0.05, 0, 0, 0.01, 0, 1, 0, 0},
      {0.01, 0.9, 0, 0, 0, 0, 0, 0},
      {0.01, 0.9, 0.1, 1e-3, 0, 0, 0, 0},
      {0.3, 0.5, 0, 0.25, 1, 0, 0, 0},
      {1.0, 1.0, 0, 1.0, 1, 1, 0, 0}, /* the alpha = +-1 paths */
      {0.02, 0.9, 2.0, 0, 0, 1, 0, 0}, /* 1 - dampening = -1 */
      {0.02, 0.7, 0.3, 0.05, 0, 0, 0, 0},
  };
  const int64_t s[2] = {7, 33};
  torc_manual_seed(7);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int d = 0; d < 4; d++) {
      int scope = torc_scope_begin();
      torc_dtype dt = all_floats[d];
      torc_tensor *p0 = randt(s, 2, dt, 1, 0);
      torc_tensor *pf = torc_clone(p0), *pc = torc_clone(p0);
      torc_tensor *bf = torc_zeros(s, 2, dt, TORC_CPU);
      torc_tensor *bc = torc_zeros(s, 2, dt, TORC_CPU);
      for (int step = 1; step <= 3; step++) {
        torc_tensor *g = randt(s, 2, dt, 0.5, 0.1);
        torc_sgd_step_params p = cases[c];
        p.first_step = step == 1;
        assert_ok(torc_sgd_step_(pf, g, p.momentum != 0 ? bf : NULL, &p));
        sgd_composed(pc, g, bc, &p);
      }
      char what[96];
      snprintf(what, sizeof what, "sgd case %zu %s param", c,
               torc_dtype_name(dt));
      assert_same(pf, pc, what);
      assert_same(bf, bc, what);
      torc_scope_end(scope);
    }
}

static void test_adam_matches_composed(void **state) {
  (void)state;
  static const torc_adam_step_params cases[] = {
      /* lr, beta1, beta2, eps, wd, step, amsgrad, maximize, decoupled */
      {1e-3, 0.9, 0.999, 1e-8, 0, 1, 0, 0, 0, 0},
      {1e-2, 0.9, 0.999, 1e-8, 0.1, 1, 0, 0, 0, 0},
      {1e-2, 0.8, 0.99, 1e-6, 0.01, 1, 1, 0, 1, 0},
      {3e-3, 0.5, 0.9, 1e-4, 0.2, 1, 1, 1, 0, 0},
      {1e-3, 0, 0, 1e-8, 0, 1, 0, 1, 1, 0}, /* 1 - beta = 1 */
      {0.5, 0.95, 0.95, 0.1, 0.5, 1, 0, 0, 1, 0},
  };
  const int64_t s[1] = {129};
  torc_manual_seed(11);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int d = 0; d < 4; d++) {
      int scope = torc_scope_begin();
      torc_dtype dt = all_floats[d];
      torc_tensor *p0 = randt(s, 1, dt, 1, 0);
      torc_tensor *t[2][4];
      for (int k = 0; k < 2; k++) {
        t[k][0] = torc_clone(p0);
        for (int i = 1; i < 4; i++)
          t[k][i] = torc_zeros(s, 1, dt, TORC_CPU);
      }
      for (int step = 1; step <= 4; step++) {
        torc_tensor *g = randt(s, 1, dt, 0.5, 0.05);
        torc_adam_step_params p = cases[c];
        p.step = step;
        assert_ok(torc_adam_step_(t[0][0], g, t[0][1], t[0][2],
                                  p.amsgrad ? t[0][3] : NULL, &p));
        adam_composed(t[1][0], g, t[1][1], t[1][2], t[1][3], &p);
      }
      char what[96];
      for (int i = 0; i < 4; i++) {
        snprintf(what, sizeof what, "adam case %zu %s tensor %d", c,
                 torc_dtype_name(dt), i);
        assert_same(t[0][i], t[1][i], what);
      }
      torc_scope_end(scope);
    }
}

/* The cpu plugin's step kernels give ref's bits (f32, f64), on a size
 * large enough to split across threads. */
static void test_steps_cpu_equals_ref(void **state) {
  (void)state;
  if (!have_cpu)
    skip();
  const int64_t s[1] = {70001};
  torc_manual_seed(3);
  for (int d = 0; d < 2; d++) {
    int scope = torc_scope_begin();
    torc_dtype dt = all_floats[d];
    torc_tensor *g = randt(s, 1, dt, 0.5, 0.05);
    torc_tensor *p0 = randt(s, 1, dt, 1, 0);
    torc_tensor *r[5], *c[5];
    for (int i = 0; i < 5; i++) {
      r[i] = i ? torc_zeros(s, 1, dt, TORC_CPU) : torc_clone(p0);
      c[i] = i ? torc_zeros(s, 1, dt, TORC_CPU) : torc_clone(p0);
    }
    for (int step = 1; step <= 2; step++) {
      torc_sgd_step_params sp = {0.1, 0.9, 0.1, 0.01, 0, 1, step == 1, 0};
      torc_sgd_step_params np = {0.1, 0.9, 0, 0.01, 1, 0, step == 1, 0};
      torc_adam_step_params ap = {1e-2, 0.9, 0.999, 1e-8, 0.1, step,
                                  1, 0, 1, 0};
      torc_tensor **sides[2] = {r, c};
      for (int k = 0; k < 2; k++) {
        torc__dispatch_pin(k ? "cpu" : "ref");
        torc_tensor **t = sides[k];
        assert_ok(torc_sgd_step_(t[0], g, t[1], &sp));
        assert_ok(torc_sgd_step_(t[0], g, t[1], &np));
        assert_ok(torc_adam_step_(t[0], g, t[2], t[3], t[4], &ap));
        ap.amsgrad = 0, ap.decoupled = 0;
        assert_ok(torc_adam_step_(t[0], g, t[2], t[3], NULL, &ap));
        ap.amsgrad = 1, ap.decoupled = 1;
        torc__dispatch_pin(NULL);
      }
    }
    for (int i = 0; i < 5; i++)
      assert_same(c[i], r[i], torc_dtype_name(dt));
    torc_scope_end(scope);
  }
}

/* A non-contiguous parameter and buffer update as contiguous ones. */
static void test_step_noncontiguous(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  const int64_t s[2] = {5, 6};
  torc_manual_seed(5);
  torc_tensor *base = randt(s, 2, TORC_F32, 1, 0);
  torc_tensor *g = randt(s, 2, TORC_F32, 1, 0);
  torc_tensor *pv = torc_transpose(torc_clone(base), 0, 1);
  torc_tensor *pc = torc_contiguous(torc_transpose(base, 0, 1));
  torc_tensor *gt = torc_transpose(g, 0, 1);
  torc_tensor *bv = torc_transpose(torc_zeros(s, 2, TORC_F32, TORC_CPU), 0, 1);
  torc_tensor *bc = torc_contiguous(bv);
  assert_false(torc_is_contiguous(pv));
  uint64_t v0 = torc_version(pv);
  for (int step = 1; step <= 2; step++) {
    torc_sgd_step_params p = {0.1, 0.9, 0, 0, 0, 0, step == 1, 0};
    assert_ok(torc_sgd_step_(pv, gt, bv, &p));
    assert_ok(torc_sgd_step_(pc, gt, bc, &p));
  }
  assert_true(torc_version(pv) > v0);
  assert_same(pv, pc, "non-contiguous sgd");
  assert_same(bv, bc, "non-contiguous buffer");
  torc_scope_end(scope);
}

static void test_step_errors(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  const int64_t s[2] = {2, 3}, s2[1] = {6};
  torc_tensor *p = torc_zeros(s, 2, TORC_F32, TORC_CPU);
  torc_tensor *g = torc_ones(s, 2, TORC_F32, TORC_CPU);
  torc_tensor *g64 = torc_ones(s, 2, TORC_F64, TORC_CPU);
  torc_tensor *gbad = torc_ones(s2, 1, TORC_F32, TORC_CPU);
  torc_tensor *b64 = torc_zeros(s, 2, TORC_F64, TORC_CPU);
  torc_tensor *pi = torc_zeros(s, 2, TORC_I64, TORC_CPU);
  torc_sgd_step_params sp = {0.1, 0.9, 0, 0, 0, 0, 1, 0};
  assert_int_equal(torc_sgd_step_(p, g, NULL, &sp), TORC_ERR_NULL);
  assert_error(TORC_ERR_NULL, "momentum is 0.9 but momentum_buffer is NULL");
  assert_int_equal(torc_sgd_step_(p, gbad, p, &sp), TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE,
               "the gradient has shape [6] but the parameter has [2, 3]");
  assert_int_equal(torc_sgd_step_(p, g, b64, &sp), TORC_ERR_DTYPE);
  assert_error(TORC_ERR_DTYPE, "momentum_buffer is f64 but the parameter is "
                               "f32");
  sp.nesterov = 1, sp.dampening = 0.5;
  assert_int_equal(torc_sgd_step_(p, g, p, &sp), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "nesterov needs momentum > 0 and dampening");
  sp.nesterov = 0, sp.dampening = 0;
  assert_int_equal(torc_sgd_step_(pi, pi, pi, &sp), TORC_ERR_DTYPE);
  assert_error(TORC_ERR_DTYPE, "optimizers update floating tensors");
  assert_int_equal(torc_sgd_step_(NULL, g, p, &sp), TORC_ERR_NULL);
  /* a gradient of another dtype is cast */
  torc_tensor *buf = torc_zeros(s, 2, TORC_F32, TORC_CPU);
  assert_ok(torc_sgd_step_(p, g64, buf, &sp));
  /* grad mode on, a parameter that requires grad */
  torc_tensor *leaf = torc_zeros(s, 2, TORC_F32, TORC_CPU);
  assert_ok(torc_set_requires_grad(leaf, 1));
  assert_int_equal(torc_sgd_step_(leaf, g, buf, &sp), TORC_ERR_AUTOGRAD);
  assert_error(TORC_ERR_AUTOGRAD, "run it under no-grad");
  torc_grad_mode m = torc_set_grad_mode(TORC_NO_GRAD);
  assert_ok(torc_sgd_step_(leaf, g, buf, &sp));
  torc_set_grad_mode(m);

  torc_adam_step_params ap = {1e-3, 0.9, 0.999, 1e-8, 0, 1, 1, 0, 0, 0};
  assert_int_equal(torc_adam_step_(p, g, buf, buf, NULL, &ap),
                   TORC_ERR_NULL);
  assert_error(TORC_ERR_NULL, "amsgrad is on but max_exp_avg_sq is NULL");
  ap.amsgrad = 0, ap.beta2 = 1;
  assert_int_equal(torc_adam_step_(p, g, buf, buf, NULL, &ap),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "beta1 0.9 and beta2 1 must be in [0, 1)");
  ap.beta2 = 0.999, ap.step = 0;
  assert_int_equal(torc_adam_step_(p, g, buf, buf, NULL, &ap),
                   TORC_ERR_INVALID);
  assert_int_equal(torc_adam_step_(p, g, buf, buf, NULL, NULL),
                   TORC_ERR_NULL);
  torc_clear_error();
  torc_scope_end(scope);
}

/* ---- cross_entropy ---- */

/* The loss (and d loss / d x for upstream gradient gy, one per element of
 * the loss) in double on the host: x [N, C, S] row-major, t [N, S]. */
static void ce_host(const double *x, const int64_t *t, const double *w,
                    int64_t N, int64_t C, int64_t S,
                    const torc_cross_entropy_params *p, const double *gy,
                    double *loss, double *gx) {
  double eps = p->label_smoothing, total = 0, wsum = 0, W = 0;
  for (int64_t c = 0; c < C; c++)
    W += w ? w[c] : 1;
  double *rows = calloc((size_t)(N * S + 1), sizeof *rows);
  double *lse = calloc((size_t)(N * S + 1), sizeof *lse);
  for (int64_t n = 0; n < N; n++)
    for (int64_t s = 0; s < S; s++) {
      int64_t r = n * S + s;
      const double *xr = x + n * C * S + s;
      double m = -INFINITY, e = 0;
      for (int64_t c = 0; c < C; c++)
        m = fmax(m, xr[c * S]);
      for (int64_t c = 0; c < C; c++)
        e += exp(xr[c * S] - m);
      lse[r] = m + log(e);
      if (t[r] == p->ignore_index)
        continue;
      double wt = w ? w[t[r]] : 1, sm = 0;
      for (int64_t c = 0; c < C; c++)
        sm -= (w ? w[c] : 1) * (xr[c * S] - lse[r]);
      rows[r] = (1 - eps) * -wt * (xr[t[r] * S] - lse[r]) + eps / C * sm;
      total += rows[r];
      wsum += wt;
    }
  if (p->reduction == TORC_REDUCTION_NONE)
    memcpy(loss, rows, sizeof *rows * (size_t)(N * S));
  else
    loss[0] = p->reduction == TORC_REDUCTION_SUM ? total : total / wsum;
  for (int64_t n = 0; n < N; n++)
    for (int64_t s = 0; s < S; s++) {
      int64_t r = n * S + s;
      const double *xr = x + n * C * S + s;
      double *gr = gx + n * C * S + s;
      double g = p->reduction == TORC_REDUCTION_NONE ? gy[r] : gy[0];
      if (p->reduction == TORC_REDUCTION_MEAN)
        g /= wsum;
      for (int64_t c = 0; c < C; c++) {
        if (t[r] == p->ignore_index) {
          gr[c * S] = 0;
          continue;
        }
        double pc = exp(xr[c * S] - lse[r]), wt = w ? w[t[r]] : 1;
        gr[c * S] = g * ((1 - eps) * wt * (pc - (c == t[r])) +
                         eps / C * (W * pc - (w ? w[c] : 1)));
      }
    }
  free(rows);
  free(lse);
}

typedef struct ce_case {
  int nd;
  int64_t shape[3]; /* logits */
  int weighted;
  torc_cross_entropy_params p;
} ce_case;

/* Runs one case in dtype dt on the current provider; compares with the
 * host computation within tol. */
static void ce_run(const ce_case *k, torc_dtype dt, double tol,
                   const char *prov) {
  int scope = torc_scope_begin();
  int cd = k->nd == 1 ? 0 : 1;
  int64_t N = cd ? k->shape[0] : 1, C = k->shape[cd];
  int64_t S = k->nd == 3 ? k->shape[2] : 1;
  int64_t ts[2], tnd = 0;
  for (int i = 0; i < k->nd; i++)
    if (i != cd)
      ts[tnd++] = k->shape[i];
  torc_tensor *x = randt(k->shape, k->nd, dt, 3, 0);
  assert_ok(torc_set_requires_grad(x, 1));
  torc_tensor *t = torc_randint(0, C, ts, (int)tnd, TORC_I64, TORC_CPU, NULL);
  /* the first target is ignored when ignore_index is a class */
  if (k->p.ignore_index >= 0 && N * S > 0) {
    int64_t *tv = malloc(sizeof *tv * (size_t)(N * S));
    assert_ok(torc_to_host(t, tv, sizeof *tv * (size_t)(N * S)));
    tv[0] = k->p.ignore_index;
    t = torc_from_host(tv, ts, (int)tnd, TORC_I64, TORC_CPU);
    free(tv);
  }
  const int64_t cs[1] = {C};
  torc_tensor *w = k->weighted ? torc_add_scalar(torc_rand(cs, 1, dt, TORC_CPU,
                                                           NULL), 0.25)
                               : NULL;
  torc__dispatch_pin(prov);
  torc_tensor *loss = torc_cross_entropy(x, t, w, &k->p);
  assert_torc(loss);
  torc_tensor *gy = randt(torc_shape(loss), torc_ndim(loss), dt, 1, 1);
  assert_ok(torc_backward(loss, gy, 0));
  torc__dispatch_pin(NULL);
  assert_string_equal(torc_grad_fn_name(loss), "CrossEntropyBackward");
  double *xv = test_values(x), *wv = w ? test_values(w) : NULL;
  double *gyv = test_values(gy), *tvd = test_values(t);
  int64_t *tv = malloc(sizeof *tv * (size_t)(N * S + 1));
  for (int64_t i = 0; i < N * S; i++)
    tv[i] = (int64_t)tvd[i];
  double *want = malloc(sizeof(double) * (size_t)(N * S + 1));
  double *gwant = malloc(sizeof(double) * (size_t)(N * C * S + 1));
  ce_host(xv, tv, wv, N, C, S, &k->p, gyv, want, gwant);
  test_assert_values(loss, want, torc_numel(loss), tol);
  test_assert_values(torc_grad_of(x), gwant, N * C * S, tol);
  free(xv), free(wv), free(gyv), free(tvd), free(tv), free(want);
  free(gwant);
  torc_scope_end(scope);
}

static void test_cross_entropy_values(void **state) {
  (void)state;
  static const ce_case cases[] = {
      {2, {6, 5, 0}, 0, TORC_CROSS_ENTROPY_DEFAULTS},
      {2, {6, 5, 0}, 0, {-100, 0, TORC_REDUCTION_SUM, 0}},
      {2, {6, 5, 0}, 0, {-100, 0, TORC_REDUCTION_NONE, 0}},
      {2, {7, 4, 0}, 1, {2, 0.1, TORC_REDUCTION_MEAN, 0}},
      {2, {7, 4, 0}, 1, {-100, 0.3, TORC_REDUCTION_NONE, 0}},
      {2, {7, 4, 0}, 0, {1, 0.2, TORC_REDUCTION_SUM, 0}},
      {3, {3, 4, 5}, 0, TORC_CROSS_ENTROPY_DEFAULTS},
      {3, {3, 4, 5}, 1, {0, 0.05, TORC_REDUCTION_NONE, 0}},
      {1, {6, 0, 0}, 0, {-100, 0.1, TORC_REDUCTION_NONE, 0}},
      {1, {6, 0, 0}, 1, TORC_CROSS_ENTROPY_DEFAULTS},
      {2, {2000, 3, 0}, 0, {-100, 0.1, TORC_REDUCTION_MEAN, 0}},
      /* big enough for the cpu kernels to split rows across threads */
      {2, {4000, 16, 0}, 1, {3, 0.1, TORC_REDUCTION_MEAN, 0}},
      {3, {100, 16, 40}, 0, {-100, 0, TORC_REDUCTION_NONE, 0}},
      {2, {0, 3, 0}, 0, {-100, 0, TORC_REDUCTION_SUM, 0}},
  };
  const char *provs[2] = {"ref", "cpu"};
  torc_manual_seed(1);
  for (int pv = 0; pv < (have_cpu ? 2 : 1); pv++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      ce_run(&cases[c], TORC_F64, 1e-12, provs[pv]);
      ce_run(&cases[c], TORC_F32, 2e-6, provs[pv]);
    }
}

/* Large logits keep the gradient's precision (the kernel saves the row
 * max and log-sum apart, not their sum). */
static void test_cross_entropy_large_logits(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  const double xv[6] = {200, 199, -10, -200, 0, 150};
  const int64_t tv[2] = {1, 2}, xs[2] = {2, 3}, ts[1] = {2};
  torc_tensor *x = torc_from_host(xv, xs, 2, TORC_F64, TORC_CPU);
  torc_tensor *t = torc_from_host(tv, ts, 1, TORC_I64, TORC_CPU);
  assert_ok(torc_set_requires_grad(x, 1));
  torc_tensor *loss = torc_cross_entropy(x, t, NULL, NULL);
  assert_ok(torc_backward(loss, NULL, 0));
  /* (softmax - onehot) / 2, each row's max subtracted exactly first */
  double l0 = log1p(exp(-1.0) + exp(-210.0)), l1 = log1p(exp(-150.0));
  double want[6] = {exp(0 - l0) / 2,           (exp(-1 - l0) - 1) / 2,
                    exp(-210 - l0) / 2,        exp(-350 - l1) / 2,
                    exp(-150 - l1) / 2,        (exp(0 - l1) - 1) / 2};
  test_assert_values(torc_grad_of(x), want, 6, 1e-15);
  torc_scope_end(scope);
}

static void test_cross_entropy_errors(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  const int64_t xs[2] = {4, 5}, ts[1] = {4}, t3[1] = {3}, ws[1] = {4};
  const int64_t bad[4] = {1, 5, 0, 2}, ok[4] = {1, 4, 0, 2};
  torc_tensor *x = torc_zeros(xs, 2, TORC_F32, TORC_CPU);
  torc_tensor *t = torc_from_host(ok, ts, 1, TORC_I64, TORC_CPU);
  torc_tensor *tb = torc_from_host(bad, ts, 1, TORC_I64, TORC_CPU);
  assert_null(torc_cross_entropy(x, tb, NULL, NULL));
  assert_error(TORC_ERR_RANGE, "target 5 (element 1) is out of range for 5 "
                               "classes");
  if (have_cpu) {
    torc__dispatch_pin("cpu");
    assert_null(torc_cross_entropy(x, tb, NULL, NULL));
    torc__dispatch_pin(NULL);
    assert_error(TORC_ERR_RANGE, "target 5 (element 1) is out of range");
  }
  assert_null(torc_cross_entropy(x, torc_to_dtype(t, TORC_I32), NULL, NULL));
  assert_error(TORC_ERR_DTYPE, "class indices must be i64");
  assert_null(torc_cross_entropy(x, torc_zeros(t3, 1, TORC_I64, TORC_CPU),
                                 NULL, NULL));
  assert_error(TORC_ERR_SHAPE, "the target [3] does not fit the logits [4, 5]");
  assert_contains(torc_last_error(), "without the class dim 1: [4]");
  assert_null(torc_cross_entropy(torc_to_dtype(x, TORC_I64), t, NULL, NULL));
  assert_error(TORC_ERR_DTYPE, "they must be floating");
  assert_null(torc_cross_entropy(x, t, torc_ones(ws, 1, TORC_F32, TORC_CPU),
                                 NULL));
  assert_error(TORC_ERR_SHAPE, "the class weight [4] must be [5]");
  torc_cross_entropy_params p = {-100, 1.5, TORC_REDUCTION_MEAN, 0};
  assert_null(torc_cross_entropy(x, t, NULL, &p));
  assert_error(TORC_ERR_INVALID, "label_smoothing 1.5 must be in [0, 1]");
  p.label_smoothing = 0, p.reduction = 7;
  assert_null(torc_cross_entropy(x, t, NULL, &p));
  assert_error(TORC_ERR_INVALID, "reduction 7");
  const int64_t w5[1] = {5};
  torc_tensor *w = torc_ones(w5, 1, TORC_F32, TORC_CPU);
  assert_ok(torc_set_requires_grad(w, 1));
  assert_null(torc_cross_entropy(x, t, w, NULL));
  assert_error(TORC_ERR_AUTOGRAD, "the class weight requires grad");
  torc_clear_error();
  assert_null(torc_cross_entropy(NULL, t, NULL, NULL));
  assert_int_equal(torc_last_status(), TORC_ERR_NULL);
  /* every target ignored: mean is NaN, as PyTorch */
  const int64_t ign[4] = {-100, -100, -100, -100};
  double v = 0;
  assert_ok(torc_item(torc_cross_entropy(x, torc_from_host(ign, ts, 1,
                                                           TORC_I64, TORC_CPU),
                                         NULL, NULL),
                      &v));
  assert_true(isnan(v));
  torc_clear_error();
  torc_scope_end(scope);
}

#define T(f) cmocka_unit_test_setup_teardown(f, test_live_setup,              \
                                             test_live_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_sgd_matches_composed),
      T(test_adam_matches_composed),
      T(test_steps_cpu_equals_ref),
      T(test_step_noncontiguous),
      T(test_step_errors),
      T(test_cross_entropy_values),
      T(test_cross_entropy_large_logits),
      T(test_cross_entropy_errors),
  };
  return cmocka_run_group_tests_name("fused", tests, group_setup,
                                     test_teardown_all);
}
