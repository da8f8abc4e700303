/* tests/test_cuda_coverage.c — the cuda plugin's kernel registry against
 * ref's, without a GPU: every (op, dtype) ref serves must have a cuda
 * kernel, apart from the few gaps listed below, each with its reason. This
 * is what `torc test-backend cuda` would list as "ops with no kernel" on a
 * GPU machine, checked in CI where no GPU runs. A gap that closes must
 * leave the list too (the list stays true). Skipped (77) when configure
 * did not build the cuda plugin.
 */
#include "testutil.h"

#include "torc/runtime.h"

/* (op, dtype) pairs ref serves that cuda leaves to `[torc] fallback = cpu`
 * on purpose. */
static const struct gap {
  const char *op;
  torc_dtype dtype;
  const char *why;
} gaps[] = {
#define GAP_FLOATS(op, why)                                                    \
  {op, TORC_F32, why}, {op, TORC_F64, why}, {op, TORC_F16, why},               \
      {op, TORC_BF16, why}
#define GAP_ALL(op, why)                                                       \
  GAP_FLOATS(op, why), {op, TORC_I32, why}, {op, TORC_I64, why},               \
      {op, TORC_U8, why}, {op, TORC_BOOL, why}
#define ATTN_WHY "attention ops are new: ref and the cpu plugin serve them"
    GAP_ALL("tril", ATTN_WHY),
    GAP_ALL("triu", ATTN_WHY),
    GAP_ALL("masked_fill", ATTN_WHY),
    GAP_FLOATS("scaled_dot_product_attention", ATTN_WHY),
    GAP_FLOATS("scaled_dot_product_attention_backward", ATTN_WHY),
#define INFER_WHY                                                              \
  "fused inference kernels: a plan on cuda runs the ops they fuse"
    GAP_FLOATS("linear_act", INFER_WHY),
    GAP_FLOATS("conv2d_act", INFER_WHY),
#define CELL_WHY                                                               \
  "fused rnn cells: the lstm and gru layers compose the step from ops cuda " \
  "serves where no cell kernel is registered"
    GAP_FLOATS("lstm_cell", CELL_WHY),
    GAP_FLOATS("lstm_cell_backward", CELL_WHY),
    GAP_FLOATS("gru_cell", CELL_WHY),
    GAP_FLOATS("gru_cell_backward", CELL_WHY),
    {NULL, TORC_F32, NULL}, /* the end */
};


static const torc_dtype all_dtypes[] = {TORC_F32, TORC_F64, TORC_F16,
                                        TORC_BF16, TORC_I32, TORC_I64,
                                        TORC_U8,  TORC_BOOL};
#define N_DT (sizeof all_dtypes / sizeof all_dtypes[0])

static int dt_index(torc_dtype d) {
  for (size_t i = 0; i < N_DT; i++)
    if (all_dtypes[i] == d)
      return (int)i;
  return -1;
}

/* The dtypes device type `dev` serves for `op`, one bit per all_dtypes
 * entry (TORC_DTYPE_ANY: all of them). */
static unsigned served(const char *op, const char *dev) {
  unsigned bits = 0;
  int n = torc_kernel_count();
  for (int i = 0; i < n; i++) {
    torc_kernel_summary k;
    assert_ok(torc_kernel_get(i, &k));
    if (strcmp(k.op, op) != 0 || strcmp(k.device_type, dev) != 0)
      continue;
    if (k.dtype == TORC_DTYPE_ANY)
      bits |= (1u << N_DT) - 1;
    else if (dt_index(k.dtype) >= 0)
      bits |= 1u << dt_index(k.dtype);
  }
  return bits;
}

static const struct gap *gap_of(const char *op, torc_dtype d) {
  for (const struct gap *g = gaps; g->op != NULL; g++)
    if (strcmp(g->op, op) == 0 && g->dtype == d)
      return g;
  return NULL;
}

/* Every op of the table: cuda serves each dtype ref serves, except the
 * listed gaps; and each listed gap is still a gap. */
static void test_cuda_serves_what_ref_serves(void **state) {
  (void)state;
  test_load_plugin("ref");
  test_load_plugin("cuda");
  const char *const *ops = torc_op_names();
  int missing = 0, pairs = 0;
  char list[8192];
  size_t used = 0;
  list[0] = '\0';
  for (int o = 0; ops[o] != NULL; o++) {
    unsigned want = served(ops[o], "cpu"), have = served(ops[o], "cuda");
    /* ref is the cpu's oracle; a cpu kernel from another plugin is not
     * loaded here, so "cpu" is ref's set. */
    for (size_t d = 0; d < N_DT; d++) {
      if (!(want & (1u << d)))
        continue;
      pairs++;
      const struct gap *g = gap_of(ops[o], all_dtypes[d]);
      if (have & (1u << d)) {
        if (g != NULL) {
          print_error("cuda now serves %s %s: remove it from the gaps in "
                      "tests/test_cuda_coverage.c\n",
                      ops[o], torc_dtype_name(all_dtypes[d]));
          missing++;
        }
        continue;
      }
      if (g != NULL)
        continue;
      missing++;
      int w = snprintf(list + used, sizeof list - used, " %s(%s)", ops[o],
                       torc_dtype_name(all_dtypes[d]));
      if (w > 0 && (size_t)w < sizeof list - used)
        used += (size_t)w;
    }
  }
  int n_gaps = 0;
  for (const struct gap *g = gaps; g->op != NULL; g++, n_gaps++)
    printf("  gap: %s %s: %s\n", g->op, torc_dtype_name(g->dtype), g->why);
  printf("cuda serves %d of the %d (op, dtype) pairs ref serves; %d listed "
         "gaps\n",
         pairs - missing - n_gaps, pairs, n_gaps);
  if (missing) {
    print_error("cuda has no kernel for%s\n", list);
    fail_msg("%d (op, dtype) pairs of ref's have no cuda kernel", missing);
  }
}

int main(void) {
  if (!test_plugin_built("cuda", "the CUDA toolkit with cuBLAS and cuDNN"))
    return TEST_SKIP_STATUS;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuda_serves_what_ref_serves),
  };
  return cmocka_run_group_tests_name("cuda_coverage", tests, NULL, NULL);
}
