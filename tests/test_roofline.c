/* tests/test_roofline.c — the roofline profile's pieces: the FLOP and byte
 * counts of kernel calls (torc_kernel_cost_of) for each op with a formula
 * and "none" for one without, the measured fp32 FMA peak
 * (torc_cpu_peak_gflops: a figure and its ISA, remembered), and
 * torc_profile_roofline over a profiled matmul (its exact FLOPs per step,
 * a percentage of the peak, "-" with no peak). */
#include "testutil.h"

#include "torc/plugin.h"

/* A contiguous f32 kernel tensor of the given shape (no data). */
static torc_ktensor kt(int ndim, const int64_t *shape) {
  torc_ktensor t;
  memset(&t, 0, sizeof t);
  t.dtype = TORC_F32;
  t.ndim = ndim;
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    t.shape[d] = shape[d];
    t.strides[d] = stride;
    stride *= shape[d];
  }
  return t;
}

#define KT(...)                                                                \
  kt((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),               \
     (int64_t[]){__VA_ARGS__})

/* The cost of op with inputs in[0..n_in) and outputs out[0..n_out). */
static torc_kernel_cost cost(const char *op, const torc_ktensor *in, int n_in,
                             const torc_ktensor *out, int n_out,
                             const void *params, size_t params_size) {
  torc_kernel_args a = {.struct_size = sizeof a,
                        .op = op,
                        .n_in = n_in,
                        .n_out = n_out,
                        .in = in,
                        .out = out,
                        .params = params,
                        .params_size = params_size,
                        .n_threads = 1};
  return torc_kernel_cost_of(&a);
}

static void test_matmul(void **state) {
  (void)state;
  /* a linear 784 -> 256 at batch 64 */
  torc_ktensor in[2] = {KT(64, 784), KT(784, 256)}, out[1] = {KT(64, 256)};
  torc_kernel_cost c = cost("matmul", in, 2, out, 1, NULL, 0);
  assert_int_equal(c.flops, 2LL * 64 * 784 * 256);
  assert_int_equal(c.bytes, 4LL * (64 * 784 + 784 * 256 + 64 * 256));
  assert_int_equal(c.memory_bound, 0);
  /* batched: 2 * B * M * N * K */
  torc_ktensor bi[2] = {KT(2, 3, 4, 5), KT(2, 3, 5, 6)}, bo[1] = {
                                                           KT(2, 3, 4, 6)};
  assert_int_equal(cost("matmul", bi, 2, bo, 1, NULL, 0).flops,
                   2LL * 2 * 3 * 4 * 6 * 5);
  torc_linear_act_kparams lp = {.act = TORC_ACT_RELU};
  torc_ktensor li[3] = {KT(8, 16), KT(16, 32), KT(32)}, lo[1] = {KT(8, 32)};
  c = cost("linear_act", li, 3, lo, 1, &lp, sizeof lp);
  assert_int_equal(c.flops, 2LL * 8 * 32 * 16);
  assert_int_equal(c.memory_bound, 0);
}

static void test_conv(void **state) {
  (void)state;
  torc_conv_kparams p = {.stride = {1, 1}, .dilation = {1, 1}, .groups = 1};
  /* x [2, 3, 8, 8], w [4, 3, 3, 3] -> y [2, 4, 6, 6] */
  torc_ktensor x = KT(2, 3, 8, 8), w = KT(4, 3, 3, 3), y = KT(2, 4, 6, 6);
  int64_t want = 2LL * 2 * 4 * 6 * 6 * 3 * 3 * 3;
  torc_ktensor fin[2] = {x, w};
  assert_int_equal(cost("conv2d", fin, 2, &y, 1, &p, sizeof p).flops, want);
  torc_ktensor bin[2] = {y, w}; /* gy, w -> gx */
  assert_int_equal(
      cost("conv2d_backward_input", bin, 2, &x, 1, &p, sizeof p).flops, want);
  torc_ktensor win[2] = {x, y}; /* x, gy -> gw */
  assert_int_equal(
      cost("conv2d_backward_weight", win, 2, &w, 1, &p, sizeof p).flops,
      want);
  /* groups 2: x [1, 4, 5, 5], w [6, 2, 3, 3] -> [1, 6, 3, 3] */
  p.groups = 2;
  torc_ktensor gin[2] = {KT(1, 4, 5, 5), KT(6, 2, 3, 3)}, gy = KT(1, 6, 3, 3);
  assert_int_equal(cost("conv2d", gin, 2, &gy, 1, &p, sizeof p).flops,
                   2LL * 1 * 6 * 3 * 3 * (4 / 2) * 3 * 3);
  /* transposed: x [1, 4, 5, 5], w [C_in 4, C_out 2, 3, 3] -> [1, 2, 7, 7]:
   * the backward_input of a conv from 2 to 4 channels */
  p.groups = 1;
  torc_ktensor tin[2] = {KT(1, 4, 5, 5), KT(4, 2, 3, 3)}, ty = KT(1, 2, 7, 7);
  assert_int_equal(
      cost("conv_transpose2d", tin, 2, &ty, 1, &p, sizeof p).flops,
      2LL * 1 * 4 * 5 * 5 * 2 * 3 * 3);
  /* conv2d_act with a 2x2 max pool after a padded 3x3 conv: the conv's
   * output is 8x8, the pool's 4x4 */
  torc_conv_act_kparams ap = {
      .conv = {.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1},
               .groups = 1},
      .act = TORC_ACT_RELU,
      .has_pool = 1,
      .pool = {.kernel = {2, 2}, .stride = {2, 2}, .dilation = {1, 1}}};
  torc_ktensor ain[2] = {KT(1, 3, 8, 8), KT(4, 3, 3, 3)}, ay = KT(1, 4, 4, 4);
  torc_kernel_cost c = cost("conv2d_act", ain, 2, &ay, 1, &ap, sizeof ap);
  assert_int_equal(c.flops, 2LL * 1 * 4 * 8 * 8 * 3 * 3 * 3);
  assert_int_equal(c.memory_bound, 0);
}

static void test_attention_and_cells(void **state) {
  (void)state;
  torc_attention_kparams p = {.scale = 0.125};
  /* q [2, 4, 10, 8], k [2, 4, 12, 8], v [2, 4, 12, 16] */
  torc_ktensor q = KT(2, 4, 10, 8), k = KT(2, 4, 12, 8), v = KT(2, 4, 12, 16);
  torc_ktensor o = KT(2, 4, 10, 16), lse = KT(2, 4, 10);
  torc_ktensor fin[3] = {q, k, v}, fout[2] = {o, lse};
  int64_t bls = 2LL * 4 * 10 * 12;
  assert_int_equal(cost("scaled_dot_product_attention", fin, 3, fout, 2, &p,
                        sizeof p)
                       .flops,
                   2 * bls * (8 + 16));
  torc_ktensor bin[6] = {o, q, k, v, o, lse}, bout[3] = {q, k, v};
  assert_int_equal(cost("scaled_dot_product_attention_backward", bin, 6,
                        bout, 3, &p, sizeof p)
                       .flops,
                   2 * bls * (3 * 8 + 2 * 16));
  /* the fused cells, state [3, 5] */
  torc_ktensor s = KT(3, 5), g4 = KT(3, 20), g3 = KT(3, 15);
  torc_ktensor lin[2] = {g4, s}, lout[4] = {s, s, g4, s};
  torc_kernel_cost c = cost("lstm_cell", lin, 2, lout, 4, NULL, 0);
  assert_int_equal(c.flops, 9 * 15);
  assert_int_equal(c.memory_bound, 1);
  torc_ktensor lbin[5] = {s, s, g4, s, s}, lbout[2] = {g4, s};
  assert_int_equal(cost("lstm_cell_backward", lbin, 5, lbout, 2, NULL, 0).flops,
                   22 * 15);
  torc_ktensor gin[3] = {g3, g3, s}, gout[2] = {s, g3};
  assert_int_equal(cost("gru_cell", gin, 3, gout, 2, NULL, 0).flops, 11 * 15);
  torc_ktensor gbin[4] = {s, g3, g3, s}, gbout[3] = {g3, g3, s};
  assert_int_equal(cost("gru_cell_backward", gbin, 4, gbout, 3, NULL, 0).flops,
                   16 * 15);
}

static void test_elementwise_and_none(void **state) {
  (void)state;
  /* add of [4, 5] and a row [5] broadcast (stride 0 along dim 0) */
  torc_ktensor a = KT(4, 5), b = KT(4, 5), y = KT(4, 5);
  b.strides[0] = 0;
  torc_ktensor in[2] = {a, b};
  torc_kernel_cost c = cost("add", in, 2, &y, 1, NULL, 0);
  assert_int_equal(c.flops, 20);
  assert_int_equal(c.bytes, 4 * (20 + 5 + 20));
  assert_int_equal(c.memory_bound, 1);
  assert_int_equal(cost("relu", &a, 1, &y, 1, NULL, 0).flops, 20);
  torc_reduce_params rp = {0};
  torc_ktensor r = KT(1, 1);
  assert_int_equal(cost("sum", &a, 1, &r, 1, &rp, sizeof rp).flops, 20);
  /* no formula: -1 FLOPs, the bytes still counted */
  c = cost("copy", &a, 1, &y, 1, NULL, 0);
  assert_int_equal(c.flops, -1);
  assert_int_equal(c.bytes, 4 * 40);
  assert_int_equal(c.memory_bound, 1);
  /* an unknown op, NULL */
  c = cost("no_such_op", &a, 1, &y, 1, NULL, 0);
  assert_int_equal(c.flops, -1);
  assert_int_equal(c.bytes, -1);
  c = torc_kernel_cost_of(NULL);
  assert_int_equal(c.flops, -1);
  assert_int_equal(c.bytes, -1);
}

static void test_peak(void **state) {
  (void)state;
  const char *isa = NULL;
  int used = 0;
  double g = torc_cpu_peak_gflops(1, &isa, &used);
  assert_non_null(isa);
  assert_int_equal(used, 1);
  if (strcmp(isa, "none") == 0) {
    assert_true(g == 0);
  } else {
    assert_true(strcmp(isa, "avx2") == 0 || strcmp(isa, "avx512") == 0);
    assert_true(g > 0);
  }
  /* measured once per thread count: the same figure again */
  const char *isa2 = NULL;
  assert_true(torc_cpu_peak_gflops(1, &isa2, NULL) == g);
  assert_string_equal(isa2, isa);
  /* <= 0: the library's thread count */
  assert_true(torc_cpu_peak_gflops(0, NULL, &used) >= 0);
  assert_int_equal(used, torc_get_num_threads());
}

static void test_report(void **state) {
  (void)state;
  test_load_plugin("ref");
  int scope = torc_scope_begin();
  torc_tensor *a = torc_randn(TORC_SHAPE(8, 16), TORC_F32, TORC_CPU, NULL);
  torc_tensor *b = torc_randn(TORC_SHAPE(16, 4), TORC_F32, TORC_CPU, NULL);
  torc_profile_enable(1);
  for (int i = 0; i < 2; i++) /* two "steps" of one matmul and one copy */
    assert_torc(torc_contiguous(torc_transpose(torc_matmul(a, b), 0, 1)));
  char *rep = torc_profile_roofline(0, 2, 100.0);
  char *none = torc_profile_roofline(0, 2, 0);
  torc_profile_enable(0);
  assert_torc(rep);
  assert_torc(none);
  /* matmul: 2 * 8 * 4 * 16 FLOPs per step, a % of the peak; copy: "-" */
  const char *m = strstr(rep, "\n  matmul ");
  assert_non_null(m);
  char op[32], dev[16], prov[16], flops[32], ms[16], rate[16], pct[16];
  unsigned long long calls;
  assert_int_equal(sscanf(m + 1, "%31s %15s %15s %llu %31s %15s %15s %15s",
                          op, dev, prov, &calls, flops, ms, rate, pct),
                   8);
  assert_int_equal(calls, 2);
  assert_string_equal(flops, "1,024");
  assert_true(pct[strlen(pct) - 1] == '%');
  const char *cp = strstr(rep, "\n  copy ");
  assert_non_null(cp);
  assert_int_equal(sscanf(cp + 1, "%31s %15s %15s %llu %31s", op, dev, prov,
                          &calls, flops),
                   5);
  assert_string_equal(flops, "-");
  assert_contains(rep, "step: 1,024+ FLOP/step in");
  assert_contains(rep, "of the 100.0 GFLOP/s peak");
  /* no peak: no percentages */
  m = strstr(none, "\n  matmul ");
  assert_non_null(m);
  assert_int_equal(sscanf(m + 1, "%31s %15s %15s %llu %31s %15s %15s %15s",
                          op, dev, prov, &calls, flops, ms, rate, pct),
                   8);
  assert_string_equal(pct, "-");
  assert_contains(none, "(no peak to compare with)");
  free(rep);
  free(none);
  torc_scope_end(scope);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_conv),
      cmocka_unit_test(test_attention_and_cells),
      cmocka_unit_test(test_elementwise_and_none),
      cmocka_unit_test(test_peak),
      cmocka_unit_test(test_report),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  torc_shutdown();
  return rc;
}
