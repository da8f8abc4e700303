/* tests/test_losses.c — the "losses" plugin: every case of
 * tests/fixtures/losses.safetensors (PyTorch's values and input gradients,
 * written by tests/fixtures/gen_losses.py) on cpu and sim, the
 * wrong-input errors, the extra-softmax warning and the key errors.
 */
#include <math.h>

#include "testutil.h"

/* Tolerances, as |torc - torch| / m where m is the largest |torch| in the
 * tensor (for a scalar loss: relative). Elementwise relative errors mean
 * nothing where a value comes from cancellation: the logit of the target
 * minus the log-sum-exp, sigmoid(x) - y, softmax - one_hot. There both
 * sides are off by a few ulp of the terms, not of the result: in f32, ref's
 * log_softmax (accumulated in double) gives 0.034674972 for a loss whose
 * f64 value is 0.034674970, PyTorch's f32 kernel 0.034675021.
 *  - f64: 1e-10.
 *  - f32: 1e-6, 8 ulp (2^-23 = 1.19e-7): both sides compute in f32 with
 *    their own summation orders and exp/log.
 * The test prints the largest deviation per dtype and where it was. */
static const double tol_f32 = 1e-6, tol_f64 = 1e-10;

typedef struct stats {
  double max_dev;
  char where[96];
  int64_t compared;
} stats;

static stats st_f32, st_f64;
static int n_failures;

#define FAILF(...)                                                             \
  do {                                                                         \
    fprintf(stderr, "FAIL " __VA_ARGS__);                                      \
    n_failures++;                                                              \
  } while (0)

/* ---- capturing the log ---- */

typedef struct log_capture {
  int n_warn;
  char last[1024];
} log_capture;

static void capture_cb(int level, const char *line, void *user) {
  log_capture *c = user;
  if (level == TORC_LOG_WARN)
    c->n_warn++;
  snprintf(c->last, sizeof c->last, "%s", line);
}

/* ---- helpers ---- */

/* A tensor of dtype dt from doubles, as ops return it (the caller's scope
 * owns it when one is open). */
static torc_tensor *tensor_f(const double *v, const int64_t *shape, int nd,
                             torc_dtype dt) {
  int scope = torc_scope_begin();
  torc_tensor *r =
      torc_to_dtype(torc_from_host(v, shape, nd, TORC_F64, TORC_CPU), dt);
  torc_scope_keep(r);
  torc_scope_end(scope);
  return r;
}

static torc_tensor *tensor_i64(const int64_t *v, const int64_t *shape,
                               int nd) {
  return torc_from_host(v, shape, nd, TORC_I64, TORC_CPU);
}

/* Builds `type` from `spec`, runs it on (x, y) and asserts it fails with
 * status st and a message containing each of the needles (NULL-ended). */
static void expect_forward_error(const char *type, const char *spec,
                                 const torc_tensor *x, const torc_tensor *y,
                                 torc_status st, ...) {
  torc_loss *loss = torc_loss_build(type, spec);
  assert_torc(loss);
  torc_clear_error();
  torc_tensor *out = torc_loss_forward(loss, x, y);
  if (out != NULL) {
    print_error("%s(%s) did not fail\n", type, spec);
    torc_release(out);
    torc_loss_free(loss);
    fail();
  }
  assert_int_equal(torc_last_status(), st);
  va_list ap;
  va_start(ap, st);
  for (const char *n = va_arg(ap, const char *); n;
       n = va_arg(ap, const char *))
    assert_contains(torc_last_error(), n);
  va_end(ap);
  torc_loss_free(loss);
  torc_clear_error();
}

/* Asserts building `type` from `spec` fails with TORC_ERR_INVALID and a
 * message containing `needle`. */
static void expect_build_error(const char *type, const char *spec,
                               const char *needle) {
  torc_clear_error();
  torc_loss *loss = torc_loss_build(type, spec);
  if (loss != NULL) {
    print_error("%s(%s) was built\n", type, spec);
    torc_loss_free(loss);
    fail();
  }
  assert_error(TORC_ERR_INVALID, needle);
  torc_clear_error();
}

/* ---- PyTorch parity ---- */

/* Compares got with the fixture's tensor `name` (dtype and shape exactly,
 * values within the tolerance). Appends got's values to *all. Called with
 * a scope open, which owns the fixture's tensor. */
static void compare(const torc_safetensors *st, const char *name,
                    const torc_tensor *got, const char *devname,
                    double **all, size_t *n_all) {
  torc_tensor *want = torc_safetensors_get(st, name, TORC_CPU);
  assert_torc(want);
  char bg[64], bw[64];
  if (torc_dtype_of(got) != torc_dtype_of(want) ||
      torc_ndim(got) != torc_ndim(want) ||
      memcmp(torc_shape(got), torc_shape(want),
             sizeof(int64_t) * (size_t)torc_ndim(got)) != 0) {
    FAILF("%s on %s: torc gives %s, torch %s\n", name, devname,
          torc_describe(got, bg, sizeof bg),
          torc_describe(want, bw, sizeof bw));
    return;
  }
  int64_t n = torc_numel(want);
  double *g = test_values(got), *w = test_values(want);
  assert_non_null(g);
  assert_non_null(w);
  int is32 = torc_dtype_of(want) == TORC_F32;
  stats *s = is32 ? &st_f32 : &st_f64;
  double tol = is32 ? tol_f32 : tol_f64, m = 0;
  for (int64_t i = 0; i < n; i++)
    m = fmax(m, fabs(w[i]));
  for (int64_t i = 0; i < n; i++) {
    double d = fabs(g[i] - w[i]);
    double dev = d == 0 ? 0 : d / (m > 0 ? m : 1);
    if (!(dev <= tol)) { /* NaN fails too */
      FAILF("%s on %s: element %lld is %.17g, torch %.17g (deviation %.3g "
            "> %g)\n",
            name, devname, (long long)i, g[i], w[i], dev, tol);
      break;
    }
    s->compared++;
    if (dev > s->max_dev) {
      s->max_dev = dev;
      snprintf(s->where, sizeof s->where, "%s[%lld]", name, (long long)i);
    }
  }
  *all = realloc(*all, (*n_all + (size_t)n + 1) * sizeof **all);
  assert_non_null(*all);
  memcpy(*all + *n_all, g, (size_t)n * sizeof *g);
  *n_all += (size_t)n;
  free(g);
  free(w);
}

/* Runs case `key` ("ce_ls_mean.f32", spec "TYPE|OPTIONS") on dev. */
static void run_case(const torc_safetensors *st, const char *key,
                     const char *spec, torc_device dev, double **all,
                     size_t *n_all) {
  char devname[32], name[160], type[32];
  torc_device_str(dev, devname, sizeof devname);
  const char *bar = strchr(spec, '|');
  if (bar == NULL || bar - spec >= (long)sizeof type) {
    FAILF("%s: bad spec \"%s\"\n", key, spec);
    return;
  }
  memcpy(type, spec, (size_t)(bar - spec));
  type[bar - spec] = '\0';
  torc_loss *loss = torc_loss_build(type, bar + 1);
  if (loss == NULL) {
    FAILF("%s: building %s(%s): %s\n", key, type, bar + 1, torc_last_error());
    return;
  }
  int scope = torc_scope_begin();
  snprintf(name, sizeof name, "%s.x", key);
  torc_tensor *x = torc_safetensors_get(st, name, dev);
  snprintf(name, sizeof name, "%s.y", key);
  torc_tensor *y = torc_safetensors_get(st, name, dev);
  assert_torc(x);
  assert_torc(y);
  assert_ok(torc_set_requires_grad(x, 1));
  torc_tensor *out = torc_loss_forward(loss, x, y);
  if (out == NULL) {
    FAILF("%s on %s: %s\n", key, devname, torc_last_error());
  } else {
    snprintf(name, sizeof name, "%s.out", key);
    compare(st, name, out, devname, all, n_all);
    torc_tensor *root = torc_ndim(out) ? torc_sum(out, NULL, 0, 0) : out;
    if (root == NULL || torc_backward(root, NULL, 0) != TORC_OK) {
      FAILF("%s on %s: backward: %s\n", key, devname, torc_last_error());
    } else if (torc_grad_of(x) == NULL) {
      FAILF("%s on %s: the input got no gradient\n", key, devname);
    } else {
      snprintf(name, sizeof name, "%s.grad", key);
      compare(st, name, torc_grad_of(x), devname, all, n_all);
    }
  }
  torc_clear_error();
  torc_scope_end(scope);
  torc_loss_free(loss);
}

static void test_pytorch_parity(void **state) {
  (void)state;
  const char *src = getenv("TORC_TOP_SRCDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/tests/fixtures/losses.safetensors",
           src ? src : ".");
  torc_safetensors *st = torc_safetensors_open(path);
  assert_torc(st);
  torc_device sim = TORC_CPU;
  assert_ok(torc_device_parse("sim", &sim));
  int n_cases = 0;
  for (int i = 0; i < torc_safetensors_metadata_count(st); i++) {
    const char *mk = torc_safetensors_metadata_key(st, i);
    if (strncmp(mk, "case:", 5) != 0)
      continue;
    const char *key = mk + 5, *spec = torc_safetensors_metadata(st, mk);
    double *on_cpu = NULL, *on_sim = NULL;
    size_t n_cpu = 0, n_sim = 0;
    int before = n_failures;
    run_case(st, key, spec, TORC_CPU, &on_cpu, &n_cpu);
    run_case(st, key, spec, sim, &on_sim, &n_sim);
    /* sim runs ref's kernels: the same bits. */
    if (n_failures == before &&
        (n_cpu != n_sim ||
         (n_cpu && memcmp(on_cpu, on_sim, n_cpu * sizeof(double)) != 0)))
      FAILF("%s: sim differs from cpu\n", key);
    free(on_cpu);
    free(on_sim);
    n_cases++;
  }
  torc_safetensors_close(st);
  printf("# %d PyTorch loss cases from %s, each on cpu and sim\n", n_cases,
         path);
  printf("# largest deviation from PyTorch (values and input gradients):\n"
         "#   f64: %.3g at %s (%lld elements; tolerance %g)\n"
         "#   f32: %.3g at %s (%lld elements; tolerance %g)\n",
         st_f64.max_dev, st_f64.where, (long long)st_f64.compared, tol_f64,
         st_f32.max_dev, st_f32.where, (long long)st_f32.compared, tol_f32);
  assert_true(n_cases >= 100);
  if (n_failures) {
    print_error("%d comparison(s) failed (listed above)\n", n_failures);
    fail();
  }
}

/* ---- registration ---- */

static void test_types_registered(void **state) {
  (void)state;
  static const char *const names[] = {
      "bce",   "bce_with_logits", "cross_entropy", "huber",    "kl_div",
      "l1",    "mse",             "nll",           "smooth_l1"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const torc_loss_type *t = torc_loss_type_find(names[i]);
    if (t == NULL) {
      print_error("loss type %s is not registered\n", names[i]);
      fail();
    }
    assert_string_equal(t->name, names[i]);
    assert_non_null(t->description);
    assert_non_null(t->keys);
    int has_reduction = 0;
    for (const torc_module_key *k = t->keys; k->name; k++)
      has_reduction |= strcmp(k->name, "reduction") == 0 &&
                       strcmp(k->default_value, "mean") == 0;
    assert_true(has_reduction);
  }
  torc_loss *l = torc_loss_build("cross_entropy", NULL);
  assert_torc(l);
  assert_string_equal(torc_loss_name(l), "cross_entropy");
  torc_loss_free(l);
}

/* ---- wrong inputs ---- */

static void test_cross_entropy_target_errors(void **state) {
  (void)state;
  double xv[20] = {0}, pv[20] = {0};
  for (int i = 0; i < 20; i++)
    xv[i] = (i % 7) * 0.3 - 1;
  const int64_t sx[2] = {4, 5}, s4[1] = {4}, s3[1] = {3};
  const int64_t tv[4] = {1, 0, 4, 2};
  torc_tensor *x = tensor_f(xv, sx, 2, TORC_F32);
  torc_tensor *tf = tensor_f(xv, s4, 1, TORC_F32);
  torc_tensor *t3 = tensor_i64(tv, s3, 1);
  torc_tensor *ti = tensor_i64(tv, s4, 1);
  torc_tensor *t32 = torc_to_dtype(ti, TORC_I32);
  torc_tensor *tfull = tensor_i64((int64_t[20]){0}, sx, 2);
  torc_tensor *p64 = tensor_f(pv, sx, 2, TORC_F64);
  torc_tensor *p32 = torc_to_dtype(p64, TORC_F32);
  torc_tensor *scalar = tensor_f(xv, NULL, 0, TORC_F32);
  torc_tensor *xi = torc_to_dtype(x, TORC_I64);
  const int64_t bad[4] = {1, 5, 0, 2}, neg[4] = {1, -1, 0, 2};
  torc_tensor *tbad = tensor_i64(bad, s4, 1), *tneg = tensor_i64(neg, s4, 1);

  expect_forward_error("cross_entropy", NULL, x, tf, TORC_ERR_DTYPE,
                       "cross_entropy: target [4] must be i64 class indices; "
                       "got f32",
                       "for probability targets give the input's shape [4, 5]",
                       NULL);
  expect_forward_error("cross_entropy", NULL, x, t3, TORC_ERR_SHAPE,
                       "target [3] does not fit input [4, 5]",
                       "class indices [4] (i64) or probabilities [4, 5] (f32)",
                       NULL);
  expect_forward_error("cross_entropy", NULL, x, t32, TORC_ERR_DTYPE,
                       "target [4] must be i64 class indices; got i32",
                       "torc_to_dtype", NULL);
  expect_forward_error("cross_entropy", NULL, x, tfull, TORC_ERR_DTYPE,
                       "target [4, 5] is i64",
                       "probability targets must be floating",
                       "for class indices give [4]", NULL);
  expect_forward_error("cross_entropy", NULL, x, p64, TORC_ERR_DTYPE,
                       "probability target [4, 5] is f64 but the input is f32",
                       NULL);
  expect_forward_error("cross_entropy", "ignore_index=1", x,
                       p32, TORC_ERR_INVALID,
                       "ignore_index = 1 applies to class-index targets only",
                       NULL);
  expect_forward_error("cross_entropy", "weight=1,2,3", x, ti, TORC_ERR_SHAPE,
                       "weight has 3 entries", "[4, 5] has 5 classes", NULL);
  expect_forward_error("cross_entropy", NULL, x, tbad, TORC_ERR_RANGE,
                       "a target class is out of range for the input's 5 "
                       "classes",
                       "[0, 5)", "ignore_index (= -100)", NULL);
  expect_forward_error("cross_entropy", NULL, x, tneg, TORC_ERR_RANGE,
                       "out of range", NULL);
  expect_forward_error("cross_entropy", NULL, scalar, ti, TORC_ERR_SHAPE,
                       "cross_entropy expects logits [N, C]", "scalar", NULL);
  expect_forward_error("cross_entropy", NULL, xi, ti, TORC_ERR_DTYPE,
                       "the input [4, 5] is i64; it must be floating", NULL);
  expect_forward_error("nll", NULL, x, tf, TORC_ERR_DTYPE,
                       "nll: target [4] must be i64 class indices [4]; got "
                       "f32",
                       NULL);
  expect_forward_error("nll", NULL, x, p32,
                       TORC_ERR_DTYPE, "nll: target [4, 5] must be i64", NULL);
  expect_forward_error("nll", "weight=1,1", x, ti, TORC_ERR_SHAPE,
                       "nll: weight has 2 entries", NULL);
  torc_release(x), torc_release(tf), torc_release(t3), torc_release(ti);
  torc_release(t32), torc_release(tfull), torc_release(p64);
  torc_release(scalar), torc_release(xi), torc_release(tbad);
  torc_release(tneg), torc_release(p32);
}

static void test_elementwise_errors(void **state) {
  (void)state;
  double v[12];
  for (int i = 0; i < 12; i++)
    v[i] = 0.05 + 0.07 * i;
  const int64_t s43[2] = {4, 3}, s42[2] = {4, 2};
  torc_tensor *x = tensor_f(v, s43, 2, TORC_F32);
  torc_tensor *y = tensor_f(v, s43, 2, TORC_F32);
  torc_tensor *y2 = tensor_f(v, s42, 2, TORC_F32);
  torc_tensor *y64 = tensor_f(v, s43, 2, TORC_F64);
  torc_tensor *xi = torc_to_dtype(x, TORC_I64);
  static const char *const same_shape[] = {
      "mse", "l1", "smooth_l1", "huber", "bce", "bce_with_logits", "kl_div"};
  for (size_t i = 0; i < sizeof same_shape / sizeof same_shape[0]; i++) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s: target [4, 2] does not match input [4, 3]",
             same_shape[i]);
    expect_forward_error(same_shape[i], NULL, x, y2, TORC_ERR_SHAPE, msg,
                         "of the input's shape [4, 3]", NULL);
    snprintf(msg, sizeof msg, "%s: target [4, 3] is f64 but the input is f32",
             same_shape[i]);
    expect_forward_error(same_shape[i], NULL, x, y64, TORC_ERR_DTYPE, msg,
                         NULL);
    expect_forward_error(same_shape[i], NULL, xi, y, TORC_ERR_DTYPE,
                         "the input [4, 3] is i64; it must be floating", NULL);
  }
  /* bce takes probabilities: logits are an error naming the fix. */
  torc_tensor *logits = torc_mul_scalar(x, 5);
  expect_forward_error("bce", NULL, logits, y, TORC_ERR_INVALID,
                       "bce: the input holds values in [0.25, 4.1]",
                       "outside [0, 1]", "use bce_with_logits", NULL);
  torc_tensor *negs = torc_neg(x);
  expect_forward_error("bce", NULL, negs, y, TORC_ERR_INVALID,
                       "use bce_with_logits", NULL);
  expect_forward_error("bce", "weight=1,2", x, y, TORC_ERR_SHAPE,
                       "bce: weight has 2 entries but the input [4, 3] has 3 "
                       "in its last dim",
                       NULL);
  expect_forward_error("bce_with_logits", "pos_weight=1,2,3,4", x, y,
                       TORC_ERR_SHAPE, "pos_weight has 4 entries", NULL);
  /* Devices: the target on sim, the input on cpu. */
  torc_device sim;
  assert_ok(torc_device_parse("sim", &sim));
  torc_tensor *ys = torc_to(y, sim);
  expect_forward_error("mse", NULL, x, ys, TORC_ERR_DEVICE,
                       "mse: the input and the target are on different "
                       "devices",
                       NULL);
  /* A NULL input (an earlier failure) gives an error, not a crash. */
  torc_loss *loss = torc_loss_build("mse", NULL);
  assert_torc(loss);
  torc_clear_error();
  assert_null(torc_loss_forward(loss, NULL, y));
  assert_int_equal(torc_last_status(), TORC_ERR_NULL);
  torc_clear_error();
  torc_loss_free(loss);
  torc_release(x), torc_release(y), torc_release(y2), torc_release(y64);
  torc_release(xi), torc_release(logits), torc_release(negs);
  torc_release(ys);
}

/* ---- the extra-softmax warning ---- */

static void test_extra_softmax_warning(void **state) {
  (void)state;
  double v[20];
  for (int i = 0; i < 20; i++)
    v[i] = sin(i * 1.7) * 3;
  const int64_t sx[2] = {4, 5}, s4[1] = {4};
  const int64_t tv[4] = {1, 0, 4, 2};
  torc_tensor *logits = tensor_f(v, sx, 2, TORC_F32);
  torc_tensor *probs = torc_softmax(logits, 1);
  torc_tensor *logp = torc_log_softmax(logits, 1);
  torc_tensor *t = tensor_i64(tv, s4, 1);
  log_capture cap = {0};
  torc_set_log_callback(capture_cb, &cap);

  torc_loss *ce = torc_loss_build("cross_entropy", NULL);
  assert_torc(ce);
  torc_tensor *out = torc_loss_forward(ce, logits, t);
  assert_torc(out);
  torc_release(out);
  assert_int_equal(cap.n_warn, 0); /* logits: nothing to say */
  for (int i = 0; i < 3; i++) {
    out = torc_loss_forward(ce, probs, t);
    assert_torc(out); /* a warning, not an error */
    torc_release(out);
  }
  assert_int_equal(cap.n_warn, 1); /* once per loss object */
  assert_contains(cap.last, "cross_entropy");
  assert_contains(cap.last, "expects logits");
  assert_contains(cap.last, "drop the softmax");
  /* Another loss object says it again; probability targets too. */
  torc_loss *ce2 = torc_loss_build("cross_entropy", "label_smoothing=0.1");
  assert_torc(ce2);
  out = torc_loss_forward(ce2, probs, probs);
  assert_torc(out);
  torc_release(out);
  assert_int_equal(cap.n_warn, 2);
  /* nll takes log-probabilities: never warns; nor do rows that are
   * log-probabilities given to cross_entropy. */
  torc_loss *nll = torc_loss_build("nll", NULL);
  assert_torc(nll);
  out = torc_loss_forward(nll, logp, t);
  assert_torc(out);
  torc_release(out);
  torc_loss *ce3 = torc_loss_build("cross_entropy", NULL);
  out = torc_loss_forward(ce3, logp, t);
  assert_torc(out);
  torc_release(out);
  assert_int_equal(cap.n_warn, 2);
  torc_set_log_callback(NULL, NULL);
  torc_loss_free(ce), torc_loss_free(ce2), torc_loss_free(ce3);
  torc_loss_free(nll);
  torc_release(logits), torc_release(probs), torc_release(logp);
  torc_release(t);
}

/* ---- keys ---- */

static void test_key_errors(void **state) {
  (void)state;
  expect_build_error("mse", "reduction=avg",
                     "mse: key 'reduction' = 'avg' is not one of mean, sum, "
                     "none");
  expect_build_error("mse", "reduction=batchmean",
                     "is not one of mean, sum, none");
  expect_build_error("kl_div", "reduction=avg",
                     "not one of mean, batchmean, sum, none");
  expect_build_error("cross_entropy", "label_smoothing=1.5",
                     "cross_entropy: key 'label_smoothing' = '1.5' is not a "
                     "number in [0, 1]; give one, e.g. label_smoothing=0.1");
  expect_build_error("cross_entropy", "ignore_index=abc",
                     "key 'ignore_index' = 'abc' is not an integer");
  expect_build_error("cross_entropy", "weight=1,x,3",
                     "key 'weight' = '1,x,3': entry 2 ('x') is not a finite "
                     "number");
  expect_build_error("smooth_l1", "beta=-1",
                     "smooth_l1: key 'beta' = '-1' is not a number >= 0");
  expect_build_error("huber", "delta=0",
                     "huber: key 'delta' = '0' is not a number > 0");
  expect_build_error("kl_div", "log_target=maybe",
                     "key 'log_target' = 'maybe' is not yes or no");
  expect_build_error("bce_with_logits", "pos_weight=2,inf",
                     "entry 2 ('inf') is not a finite number");
  /* The core's own: unknown keys and types, with the nearest name. */
  expect_build_error("cross_entropy", "label_smothing=0.1",
                     "label_smoothing");
  expect_build_error("mse", "beta=1", "unknown key 'beta'");
  torc_clear_error();
  assert_null(torc_loss_build("cross_entropi", NULL));
  assert_contains(torc_last_error(), "cross_entropy");
  torc_clear_error();
  /* "none" and spaces in lists are fine. */
  torc_loss *l = torc_loss_build("cross_entropy", "weight=none");
  assert_torc(l);
  torc_loss_free(l);
  l = torc_loss_build("cross_entropy", "weight=1, 2, 3, reduction=sum");
  assert_torc(l);
  torc_loss_free(l);
}

/* ---- behaviour beyond the fixture ---- */

/* Every target ignored: mean is 0/0 = NaN, as PyTorch; sum is 0. */
static void test_all_ignored(void **state) {
  (void)state;
  double xv[10] = {1, 2, 3, 4, 5, 5, 4, 3, 2, 1};
  const int64_t sx[2] = {2, 5}, s2[1] = {2}, tv[2] = {-100, -100};
  torc_tensor *x = tensor_f(xv, sx, 2, TORC_F64);
  torc_tensor *t = tensor_i64(tv, s2, 1);
  torc_loss *mean = torc_loss_build("cross_entropy", NULL);
  torc_loss *sum = torc_loss_build("cross_entropy", "reduction=sum");
  torc_tensor *a = torc_loss_forward(mean, x, t);
  torc_tensor *b = torc_loss_forward(sum, x, t);
  assert_torc(a);
  assert_torc(b);
  double va, vb;
  assert_ok(torc_item(a, &va));
  assert_ok(torc_item(b, &vb));
  assert_true(isnan(va));
  assert_true(vb == 0);
  torc_release(a), torc_release(b), torc_release(x), torc_release(t);
  torc_loss_free(mean), torc_loss_free(sum);
}

/* bce_with_logits and cross_entropy stay finite, with finite gradients, at
 * logits far beyond exp's range. */
static void test_huge_logits_f32(void **state) {
  (void)state;
  double xv[4] = {1e4, -1e4, 1e30, -1e30}, yv[4] = {0, 1, 0.5, 0};
  const int64_t s4[1] = {4}, s14[2] = {1, 4}, s1[1] = {1}, t0[1] = {1};
  torc_tensor *x = tensor_f(xv, s4, 1, TORC_F32);
  torc_tensor *y = tensor_f(yv, s4, 1, TORC_F32);
  assert_ok(torc_set_requires_grad(x, 1));
  torc_loss *l = torc_loss_build("bce_with_logits", "reduction=sum");
  torc_tensor *out = torc_loss_forward(l, x, y);
  assert_torc(out);
  double v;
  assert_ok(torc_item(out, &v));
  assert_true(isfinite(v));
  assert_ok(torc_backward(out, NULL, 0));
  double *g = test_values(torc_grad_of(x));
  assert_non_null(g);
  /* sigmoid(x) - y: 1, -1, 0.5, 0. */
  assert_true(g[0] == 1 && g[1] == -1 && g[2] == 0.5 && g[3] == 0);
  free(g);
  torc_release(out);
  torc_loss_free(l);

  torc_tensor *row = torc_reshape(x, s14, 2);
  torc_tensor *t = tensor_i64(t0, s1, 1);
  l = torc_loss_build("cross_entropy", NULL);
  out = torc_loss_forward(l, row, t);
  assert_torc(out);
  assert_ok(torc_item(out, &v));
  assert_true(isfinite(v));
  torc_release(out), torc_release(row), torc_release(t);
  torc_release(x), torc_release(y);
  torc_loss_free(l);
}

/* f16 and bf16 inputs run too (the math is the core's ops), close to f32. */
static void test_half_precision(void **state) {
  (void)state;
  static const char *const specs[][2] = {
      {"cross_entropy", "weight=1,2,0.5,1,1, label_smoothing=0.1"},
      {"nll", "ignore_index=0"},
      {"mse", NULL},
      {"smooth_l1", "beta=0.5"},
      {"huber", "delta=0.5"},
      {"bce", "weight=2"},
      {"bce_with_logits", "pos_weight=3"},
      {"kl_div", "reduction=batchmean"}};
  double v[20], w[20];
  for (int i = 0; i < 20; i++)
    v[i] = 0.1 + 0.8 * (0.5 + 0.5 * sin(i * 2.3)); /* in (0.1, 0.9) */
  for (int i = 0; i < 20; i++)
    w[i] = v[19 - i];
  const int64_t sx[2] = {4, 5}, s4[1] = {4}, tv[4] = {1, 0, 4, 2};
  torc_tensor *t = tensor_i64(tv, s4, 1);
  const torc_dtype half[2] = {TORC_F16, TORC_BF16};
  for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
    torc_loss *l = torc_loss_build(specs[k][0], specs[k][1]);
    assert_torc(l);
    int classes = strcmp(specs[k][0], "cross_entropy") == 0 ||
                  strcmp(specs[k][0], "nll") == 0;
    double ref = 0;
    for (int h = -1; h < 2; h++) {
      torc_dtype dt = h < 0 ? TORC_F32 : half[h];
      int scope = torc_scope_begin();
      torc_tensor *x = tensor_f(v, sx, 2, dt);
      torc_tensor *y = classes ? t : tensor_f(w, sx, 2, dt);
      assert_ok(torc_set_requires_grad(x, 1));
      torc_tensor *out = torc_loss_forward(l, x, y);
      if (out == NULL) {
        print_error("%s on %s: %s\n", specs[k][0], torc_dtype_name(dt),
                    torc_last_error());
        fail();
      }
      assert_int_equal(torc_dtype_of(out), dt);
      double val;
      assert_ok(torc_item(out, &val));
      assert_ok(torc_backward(out, NULL, 0));
      assert_non_null(torc_grad_of(x));
      if (h < 0)
        ref = val;
      else if (!(fabs(val - ref) <= 2e-2 * fmax(fabs(ref), 1))) {
        print_error("%s on %s: %g, f32 %g\n", specs[k][0],
                    torc_dtype_name(dt), val, ref);
        fail();
      }
      torc_scope_end(scope);
    }
    torc_loss_free(l);
  }
  torc_release(t);
}

static int group_setup(void **state) {
  if (test_setup_ref_sim(state) != 0)
    return -1;
  if (torc_plugin_load("losses", NULL) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, test_live_setup,            \
                                              test_live_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_pytorch_parity),
      T(test_types_registered),
      T(test_cross_entropy_target_errors),
      T(test_elementwise_errors),
      T(test_extra_softmax_warning),
      T(test_key_errors),
      T(test_all_ignored),
      T(test_huge_logits_f32),
      T(test_half_precision),
  };
  return cmocka_run_group_tests_name("losses", tests, group_setup,
                                     test_teardown_all);
}
