/* tests/test_onednn_bf16.c — the onednn plugin's bf16 kernels (matmul,
 * conv2d and its two backward kernels, max/avg_pool2d, max_pool2d's
 * backward, batch_norm in eval mode) on small shapes, each
 * computed twice on the cpu — the dispatcher pinned to ref's kernels, then
 * to the plugin's — and compared within bf16's tolerance; the profiler
 * checks the plugin's kernel served the second run (it did not decline to
 * ref). Skipped where the plugin was not built or the CPU has no native
 * bf16 (the plugin then registers no bf16 kernel).
 */
#include "testutil.h"

#include <math.h>

#define REF torc__dispatch_pin("ref")
#define DNN torc__dispatch_pin("onednn")
#define UNPIN torc__dispatch_pin(NULL)

/* bf16 keeps 8 mantissa bits: ref rounds its double sum once, oneDNN its
 * f32 sum; one or two bf16 ulps (2^-8 relative) apart. */
#define TOL 1.6e-2

static int setup(void **state) {
  (void)state;
  const char *vg = getenv("TORC_VALGRIND");
  int one = vg && strcmp(vg, "1") == 0;
#ifdef TORC_SANITIZE
  one = 1;
#endif
  return test_apply_ini(one ? "[torc]\nthreads = 1\n"
                              "[plugin.ref]\nmodule = ref\n"
                              "[plugin.onednn]\nmodule = onednn\n"
                            : "[torc]\nthreads = 2\n"
                              "[plugin.ref]\nmodule = ref\n"
                              "[plugin.onednn]\nmodule = onednn\n",
                        "onednn_bf16.ini");
}

/* A random bf16 tensor (scope-owned). */
static torc_tensor *rand_bf16(const int64_t *shape, int nd) {
  torc_tensor *t = torc_randn(shape, nd, TORC_F32, TORC_CPU, NULL);
  assert_torc(t);
  t = torc_to_dtype(t, TORC_BF16);
  assert_torc(t);
  return t;
}

/* Asserts the profiler's last call of `op` was served by onednn. */
static void assert_served(const char *op) {
  char *rep = torc_profile_report(0, 0);
  assert_non_null(rep);
  int ok = 0;
  for (char *line = strtok(rep, "\n"); line; line = strtok(NULL, "\n")) {
    while (*line == ' ')
      line++;
    size_t n = strlen(op);
    if (strncmp(line, op, n) == 0 && line[n] == ' ' &&
        strstr(line, "onednn"))
      ok = 1;
  }
  if (!ok)
    print_error("op '%s' was not served by onednn:\n%s\n", op,
                torc_profile_report(0, 0));
  free(rep);
  assert_true(ok);
}

/* y = op(in) under ref, then under onednn (profiled), compared. */
typedef torc_tensor *(*op_fn)(torc_tensor *const *in);

static void compare(const char *op, op_fn f, torc_tensor *const *in) {
  REF;
  torc_tensor *yc = f(in);
  torc_profile_enable(1);
  DNN;
  torc_tensor *yd = f(in);
  UNPIN;
  assert_torc(yc);
  assert_torc(yd);
  assert_int_equal(torc_dtype_of(yd), TORC_BF16);
  assert_served(op);
  torc_profile_enable(0);
  test_assert_close(yd, yc, TOL);
}

/* ---- matmul: batched, transposed weight, broadcast weight ---- */

static torc_tensor *f_matmul(torc_tensor *const *in) {
  return torc_matmul(in[0], in[1]);
}
static torc_tensor *f_matmul_t(torc_tensor *const *in) {
  return torc_matmul(in[0], torc_transpose(in[1], 0, 1));
}

static void test_matmul(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t a[3] = {3, 5, 40}, b[3] = {3, 40, 7};
  torc_tensor *in[2] = {rand_bf16(a, 3), rand_bf16(b, 3)};
  compare("matmul", f_matmul, in);
  int64_t x[2] = {9, 64}, w[2] = {10, 64}; /* linear: x w^T */
  torc_tensor *lin[2] = {rand_bf16(x, 2), rand_bf16(w, 2)};
  compare("matmul", f_matmul_t, lin);
  int64_t x3[3] = {2, 6, 33}, w2[2] = {33, 5}; /* w broadcast */
  torc_tensor *bc[2] = {rand_bf16(x3, 3), rand_bf16(w2, 2)};
  compare("matmul", f_matmul, bc);
  int64_t xt[3] = {2, 12, 4}, wt[3] = {2, 12, 3}; /* x^T batched */
  torc_tensor *tr[2] = {torc_transpose(rand_bf16(xt, 3), 1, 2),
                        rand_bf16(wt, 3)};
  compare("matmul", f_matmul, tr);
  torc_scope_end(scope);
}

/* ---- conv2d (with bias), pooling, batch norm ---- */

static torc_tensor *f_conv(torc_tensor *const *in) {
  torc_conv2d_params p = {{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1};
  return torc_conv2d(in[0], in[1], in[2], &p);
}
static torc_tensor *f_conv_s2(torc_tensor *const *in) {
  torc_conv2d_params p = {{2, 2}, {0, 0}, {1, 1}, {0, 0}, 1};
  return torc_conv2d(in[0], in[1], NULL, &p);
}

static void test_conv2d(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t x[4] = {2, 16, 9, 9}, w[4] = {32, 16, 3, 3}, b[1] = {32};
  torc_tensor *in[3] = {rand_bf16(x, 4), rand_bf16(w, 4), rand_bf16(b, 1)};
  compare("conv2d", f_conv, in);
  int64_t x1[4] = {3, 1, 12, 11}, w1[4] = {8, 1, 3, 3};
  torc_tensor *in1[3] = {rand_bf16(x1, 4), rand_bf16(w1, 4), NULL};
  compare("conv2d", f_conv_s2, in1);
  torc_scope_end(scope);
}

/* The convolution's backward (what autocast training runs): the gradient
 * of sum(conv(x, w) * g) with respect to x (in[3] = 0) or w (1), through
 * autograd, with x and w's gradients cleared first. */
static torc_tensor *conv_grad(torc_tensor *const *in, int which,
                              const torc_conv2d_params *p) {
  torc_set_grad(in[0], NULL);
  torc_set_grad(in[1], NULL);
  torc_tensor *y = torc_conv2d(in[0], in[1], NULL, p);
  torc_tensor *l = y ? torc_sum(torc_mul(y, in[2]), NULL, 0, 0) : NULL;
  if (l == NULL || torc_backward(l, NULL, 0) != TORC_OK)
    return NULL;
  return torc_clone(torc_grad_of(in[which]));
}
static torc_tensor *f_conv_gx(torc_tensor *const *in) {
  torc_conv2d_params p = {{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1};
  return conv_grad(in, 0, &p);
}
static torc_tensor *f_conv_gw(torc_tensor *const *in) {
  torc_conv2d_params p = {{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1};
  return conv_grad(in, 1, &p);
}
static torc_tensor *f_conv_gx_s2(torc_tensor *const *in) {
  torc_conv2d_params p = {{2, 2}, {0, 0}, {1, 1}, {0, 0}, 1};
  return conv_grad(in, 0, &p);
}
static torc_tensor *f_conv_gw_s2(torc_tensor *const *in) {
  torc_conv2d_params p = {{2, 2}, {0, 0}, {1, 1}, {0, 0}, 1};
  return conv_grad(in, 1, &p);
}

static void test_conv2d_backward(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t x[4] = {2, 16, 9, 9}, w[4] = {32, 16, 3, 3}, g[4] = {2, 32, 9, 9};
  torc_tensor *in[3] = {rand_bf16(x, 4), rand_bf16(w, 4), rand_bf16(g, 4)};
  assert_ok(torc_set_requires_grad(in[0], 1));
  assert_ok(torc_set_requires_grad(in[1], 1));
  compare("conv2d_backward_input", f_conv_gx, in);
  compare("conv2d_backward_weight", f_conv_gw, in);
  /* stride 2 leaves the last row and column out: their gradient is 0 */
  int64_t x1[4] = {3, 1, 12, 11}, w1[4] = {8, 1, 3, 3}, g1[4] = {3, 8, 5, 5};
  torc_tensor *in1[3] = {rand_bf16(x1, 4), rand_bf16(w1, 4),
                         rand_bf16(g1, 4)};
  assert_ok(torc_set_requires_grad(in1[0], 1));
  assert_ok(torc_set_requires_grad(in1[1], 1));
  compare("conv2d_backward_input", f_conv_gx_s2, in1);
  compare("conv2d_backward_weight", f_conv_gw_s2, in1);
  torc_set_grad(in[0], NULL), torc_set_grad(in[1], NULL);
  torc_set_grad(in1[0], NULL), torc_set_grad(in1[1], NULL);
  torc_scope_end(scope);
}

static torc_tensor *f_max(torc_tensor *const *in) {
  torc_pool2d_params p = {{2, 2}, {2, 2}, {0, 0}, {1, 1}, 0, 0, 0};
  return torc_max_pool2d(in[0], &p);
}
static torc_tensor *f_avg(torc_tensor *const *in) {
  torc_pool2d_params p = {{3, 3}, {2, 2}, {1, 1}, {1, 1}, 0, 0, 0};
  return torc_avg_pool2d(in[0], &p);
}

static torc_tensor *f_max3(torc_tensor *const *in) {
  torc_pool2d_params p = {{3, 3}, {1, 1}, {1, 1}, {1, 1}, 0, 0, 0};
  return torc_max_pool2d(in[0], &p);
}
/* The gradient of sum(maxpool(x) * r) with respect to x, in[0] x, in[1]
 * r; 3x3 windows of stride 1 overlap (a plane's sums). */
static torc_tensor *max_grad(torc_tensor *const *in, int three) {
  torc_set_grad(in[0], NULL);
  torc_tensor *y = three ? f_max3(in) : f_max(in);
  torc_tensor *l = y ? torc_sum(torc_mul(y, in[1]), NULL, 0, 0) : NULL;
  if (l == NULL || torc_backward(l, NULL, 0) != TORC_OK)
    return NULL;
  return torc_clone(torc_grad_of(in[0]));
}
static torc_tensor *f_max_g(torc_tensor *const *in) { return max_grad(in, 0); }
static torc_tensor *f_max3_g(torc_tensor *const *in) {
  return max_grad(in, 1);
}

static void test_pool2d(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t x[4] = {2, 16, 10, 9};
  torc_tensor *in[1] = {rand_bf16(x, 4)};
  compare("max_pool2d", f_max, in);
  compare("max_pool2d", f_max3, in);
  /* rows under four outputs, and a NaN (propagated, as ref) */
  int64_t xs[4] = {2, 3, 6, 6};
  torc_tensor *small = rand_bf16(xs, 4);
  compare("max_pool2d", f_max, &small);
  torc_tensor *nan = torc_full(NULL, 0, NAN, TORC_BF16, TORC_CPU);
  assert_ok(torc_copy_(torc_select(torc_select(torc_select(
                           torc_select(small, 0, 1), 0, 2), 0, 3), 0, 4),
                       nan));
  compare("max_pool2d", f_max, &small);
  /* the backward, 2x2 and overlapping 3x3 windows */
  int64_t gs[4] = {2, 16, 5, 4};
  torc_tensor *g2[2] = {rand_bf16(x, 4), rand_bf16(gs, 4)};
  assert_ok(torc_set_requires_grad(g2[0], 1));
  compare("max_pool2d_backward", f_max_g, g2);
  torc_tensor *g3[2] = {g2[0], rand_bf16(x, 4)};
  compare("max_pool2d_backward", f_max3_g, g3);
  torc_set_grad(g2[0], NULL);
  compare("avg_pool2d", f_avg, in);
  torc_scope_end(scope);
}

static torc_tensor *f_bn(torc_tensor *const *in) {
  return torc_batch_norm(in[0], in[3], in[4], in[1], in[2], 0, 0.1, 1e-5);
}

static void test_batch_norm(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t x[4] = {3, 8, 5, 6}, c[1] = {8};
  torc_tensor *rv = torc_to_dtype(
      torc_add_scalar(torc_rand(c, 1, TORC_F32, TORC_CPU, NULL), 0.5),
      TORC_BF16);
  assert_torc(rv);
  torc_tensor *in[5] = {rand_bf16(x, 4), rand_bf16(c, 1), rand_bf16(c, 1),
                        rand_bf16(c, 1), rv};
  compare("batch_norm", f_bn, in);
  /* f32 running statistics with bf16 activations */
  torc_tensor *rm32 = torc_to_dtype(in[3], TORC_F32);
  torc_tensor *rv32 = torc_to_dtype(rv, TORC_F32);
  assert_torc(rm32);
  assert_torc(rv32);
  in[3] = rm32, in[4] = rv32;
  compare("batch_norm", f_bn, in);
  torc_scope_end(scope);
}

/* 1 when onednn registered a bf16 kernel for cpu (native bf16 found). */
static int has_bf16(void) {
  int found = 0;
  for (int i = 0; i < torc_kernel_count(); i++) {
    torc_kernel_summary k;
    if (torc_kernel_get(i, &k) == TORC_OK &&
        strcmp(k.provider, "onednn") == 0 && k.dtype == TORC_BF16)
      found = 1;
  }
  return found;
}

int main(void) {
  if (!test_plugin_built("onednn", "libdnnl-dev"))
    return TEST_SKIP_STATUS;
  if (setup(NULL) != 0)
    return 1;
  if (!has_bf16()) {
    printf("SKIP: this CPU has no native bf16 (AVX-512 BF16 or AMX in "
           "oneDNN's effective ISA): onednn registers no bf16 kernels\n");
    torc_shutdown();
    return TEST_SKIP_STATUS;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_matmul, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_conv2d, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_conv2d_backward, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_pool2d, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_batch_norm, test_live_setup,
                                      test_live_teardown),
  };
  return cmocka_run_group_tests_name("onednn bf16 against ref", tests, NULL,
                                     test_teardown_all);
}
