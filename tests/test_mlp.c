/* tests/test_mlp.c — end-to-end PyTorch parity: trains the 2-layer MLP of
 * tests/fixtures/gen_mlp.py (4 -> 16 -> 3, tanh, cross-entropy, plain SGD)
 * with torc ops alone, on cpu (ref) and on sim, from the same initial
 * weights and data, and compares the loss at every step and the final
 * weights with PyTorch's (tests/fixtures/mlp.safetensors). */
#include <math.h>

#include "testutil.h"

/* Tolerance, as |torc - torch| <= tol * max(|torch|, 1) (relative above 1,
 * absolute below; the losses lie in (0.1, 1.2) and the weights mostly below
 * 1, so this is at least as strict as a relative 1e-5 on the losses). 1e-5
 * is the requirement ("reaches the loss PyTorch reaches with the
 * same init and data, to 1e-5"). Why f32 can meet it: every step's forward
 * and backward differ from PyTorch's by a few ulp (2^-23 = 1.2e-7; PyTorch
 * sums its matmuls and reductions in another order and uses SLEEF's tanh
 * and exp), and plain SGD at this learning rate on a smooth loss damps such
 * perturbations rather than amplifying them, so after 100 steps the
 * difference stays near 1e-6 — the figure printed below. A divergence in
 * any op (forward or gradient) shows up as an error of 1e-3 or more. */
static const double tol = 1e-5;

#define N_PARAMS 4
static const char *const param_names[N_PARAMS] = {"w1", "b1", "w2", "b2"};

/* One full training run on dev; losses[steps] receives the loss of each
 * step and the final weights are compared with the fixture's.
 * Returns the largest deviation seen. */
static double train(const torc_safetensors *st, torc_device dev, double lr,
                    int steps, double *losses, double *final_vals,
                    int64_t *n_final) {
  int outer = torc_scope_begin();
  torc_tensor *x = torc_safetensors_get(st, "x", dev);
  torc_tensor *y = torc_safetensors_get(st, "y", dev);
  assert_torc(x);
  assert_torc(y);
  torc_tensor *y_col = torc_unsqueeze(y, 1); /* [N, 1] for gather */
  assert_torc(y_col);
  torc_tensor *p[N_PARAMS];
  for (int i = 0; i < N_PARAMS; i++) {
    p[i] = torc_safetensors_get(st, param_names[i], dev);
    assert_torc(p[i]);
    assert_ok(torc_set_requires_grad(p[i], 1));
  }
  for (int step = 0; step < steps; step++) {
    int scope = torc_scope_begin();
    torc_tensor *h = torc_tanh(torc_linear(x, p[0], p[1]));
    torc_tensor *z = torc_linear(h, p[2], p[3]);
    torc_tensor *lp = torc_log_softmax(z, 1);
    torc_tensor *picked = torc_gather(lp, 1, y_col);
    torc_tensor *loss = torc_neg(torc_mean(picked, NULL, 0, 0));
    assert_torc(loss);
    assert_ok(torc_backward(loss, NULL, 0));
    assert_ok(torc_item(loss, &losses[step]));
    torc_grad_mode m = torc_set_grad_mode(TORC_NO_GRAD);
    for (int i = 0; i < N_PARAMS; i++) {
      const torc_tensor *g = torc_grad_of(p[i]);
      assert_torc(g);
      torc_tensor *upd = torc_mul_scalar(g, lr);
      assert_torc(upd);
      assert_ok(torc_sub_(p[i], upd));
      assert_ok(torc_zero_grad(p[i], 1));
    }
    torc_set_grad_mode(m);
    torc_scope_end(scope);
  }
  double max_dev = 0;
  *n_final = 0;
  for (int i = 0; i < N_PARAMS; i++) {
    char name[32];
    snprintf(name, sizeof name, "%s_final", param_names[i]);
    torc_tensor *want = torc_safetensors_get(st, name, TORC_CPU);
    assert_torc(want);
    assert_int_equal(torc_numel(want), torc_numel(p[i]));
    double *g = test_values(p[i]), *w = test_values(want);
    assert_non_null(g);
    assert_non_null(w);
    for (int64_t k = 0; k < torc_numel(want); k++) {
      double dev_k = fabs(g[k] - w[k]) / fmax(fabs(w[k]), 1.0);
      if (!(dev_k <= tol)) {
        print_error("%s[%lld] after %d steps: torc %.9g, torch %.9g\n", name,
                    (long long)k, steps, g[k], w[k]);
        fail();
      }
      max_dev = fmax(max_dev, dev_k);
      final_vals[(*n_final)++] = g[k];
    }
    free(g);
    free(w);
  }
  torc_scope_end(outer);
  return max_dev;
}

static void test_mlp_matches_pytorch(void **state) {
  (void)state;
  const char *src = getenv("TORC_TOP_SRCDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/tests/fixtures/mlp.safetensors",
           src ? src : ".");
  torc_safetensors *st = torc_safetensors_open(path);
  assert_torc(st);
  int64_t live = torc_tensor_live_count();
  const char *lr_s = torc_safetensors_metadata(st, "lr");
  const char *steps_s = torc_safetensors_metadata(st, "steps");
  assert_non_null(lr_s);
  assert_non_null(steps_s);
  double lr = strtod(lr_s, NULL);
  int steps = atoi(steps_s);
  assert_true(steps > 0 && steps <= 1000);
  torc_tensor *want_loss = torc_safetensors_get(st, "losses", TORC_CPU);
  assert_torc(want_loss);
  assert_int_equal(torc_numel(want_loss), steps);
  double *want = test_values(want_loss);
  assert_non_null(want);
  torc_release(want_loss);

  torc_device sim = TORC_CPU;
  assert_ok(torc_device_parse("sim", &sim));
  torc_device devs[2] = {TORC_CPU, sim};
  double *loss[2], *fin[2];
  int64_t n_fin[2];
  for (int d = 0; d < 2; d++) {
    char dn[32];
    torc_device_str(devs[d], dn, sizeof dn);
    loss[d] = calloc((size_t)steps, sizeof(double));
    fin[d] = calloc(1024, sizeof(double));
    assert_non_null(loss[d]);
    assert_non_null(fin[d]);
    double wdev = train(st, devs[d], lr, steps, loss[d], fin[d], &n_fin[d]);
    double ldev = 0;
    int at = 0;
    for (int k = 0; k < steps; k++) {
      double dv = fabs(loss[d][k] - want[k]) / fmax(fabs(want[k]), 1.0);
      if (!(dv <= tol)) {
        print_error("%s: loss at step %d is %.9g, torch %.9g\n", dn, k,
                    loss[d][k], want[k]);
        fail();
      }
      if (dv > ldev) {
        ldev = dv;
        at = k;
      }
    }
    printf("# %s: loss %.6f -> %.6f in %d SGD steps (torch %.6f -> %.6f); "
           "largest deviation from PyTorch: loss %.3g (step %d), final "
           "weights %.3g (tolerance %g)\n",
           dn, loss[d][0], loss[d][steps - 1], steps, want[0], want[steps - 1],
           ldev, at, wdev, tol);
  }
  /* sim delegates to ref: the same bits. */
  assert_int_equal(n_fin[0], n_fin[1]);
  assert_memory_equal(loss[0], loss[1], (size_t)steps * sizeof(double));
  assert_memory_equal(fin[0], fin[1], (size_t)n_fin[0] * sizeof(double));
  /* the run learnt something: the check is not vacuous */
  assert_true(want[steps - 1] < 0.5 * want[0]);
  for (int d = 0; d < 2; d++) {
    free(loss[d]);
    free(fin[d]);
  }
  free(want);
  torc_safetensors_close(st);
  assert_int_equal(torc_tensor_live_count(), live);
}

int main(void) {
  if (test_setup_ref_sim(NULL) != 0)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mlp_matches_pytorch),
  };
  return cmocka_run_group_tests_name("mlp", tests, NULL, test_teardown_all);
}
