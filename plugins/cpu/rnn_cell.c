/* plugins/cpu/rnn_cell.c — the fused recurrent cells of the cpu plugin:
 * "lstm_cell", "gru_cell" and their backwards (contracts in torc/nn.h),
 * f32 and f64. Each is one pass over the N x H elements: rows split
 * across the pool, each row's columns in the selected ISA's vectorised
 * loop (ew_kern.h's cell bodies).
 */
#include "cpu_internal.h"

typedef struct cell_job {
  int32_t dt;
  int op;
  int64_t H;
  void *p[7];
} cell_job;

static void cell_task(void *ctx, int64_t begin, int64_t end) {
  const cell_job *j = ctx;
  torc_cpu__isa->cell(j->dt, j->op, j->p, begin, end, j->H);
}

/* Checks the operand count and dtypes (the core validated the shapes) and
 * runs op over the rows of the state operand in[state_at]. */
static int run_cell(const torc_kernel_args *a, int op, int n_in, int n_out,
                    int state_at) {
  if (a->n_in != n_in || a->n_out != n_out || n_in + n_out > 7)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel '%s' expects %d inputs and %d "
                               "outputs, got %d and %d",
                               a->op, n_in, n_out, (int)a->n_in,
                               (int)a->n_out);
  const torc_ktensor *s = &a->in[state_at];
  if (s->ndim != 2)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel '%s': the state has %d dims, "
                               "expected [N, H]",
                               a->op, (int)s->ndim);
  cell_job j = {s->dtype, op, s->shape[1], {0}};
  for (int i = 0; i < n_in + n_out; i++) {
    const torc_ktensor *t = i < n_in ? &a->in[i] : &a->out[i - n_in];
    if (t->dtype != s->dtype)
      return torc_cpu__set_error(TORC_ERR_INTERNAL,
                                 "cpu kernel '%s': operands of two dtypes",
                                 a->op);
    j.p[i] = cpu_ptr(t, 0);
  }
  int64_t N = s->shape[0];
  if (N == 0 || j.H == 0)
    return TORC_OK;
  /* a slice of at least ~8192 gate elements: each costs an exp or two */
  int64_t grain = 8192 / (4 * j.H);
  torc_cpu__parallel_for(a->n_threads, N, grain < 1 ? 1 : grain, cell_task,
                         &j);
  return TORC_OK;
}

static int k_lstm_cell(const torc_kernel_args *a) {
  return run_cell(a, CPU_CELL_LSTM, 2, 4, 1);
}

static int k_lstm_cell_backward(const torc_kernel_args *a) {
  return run_cell(a, CPU_CELL_LSTM_BW, 5, 2, 3);
}

static int k_gru_cell(const torc_kernel_args *a) {
  return run_cell(a, CPU_CELL_GRU, 3, 2, 2);
}

static int k_gru_cell_backward(const torc_kernel_args *a) {
  return run_cell(a, CPU_CELL_GRU_BW, 4, 3, 3);
}

int torc_cpu__register_rnn_cell(const torc_host *host, torc_plugin *self) {
  static const torc_cpu_kernel kernels[] = {
      {"lstm_cell", k_lstm_cell, TORC_KERNEL_CONTIGUOUS},
      {"lstm_cell_backward", k_lstm_cell_backward, TORC_KERNEL_CONTIGUOUS},
      {"gru_cell", k_gru_cell, TORC_KERNEL_CONTIGUOUS},
      {"gru_cell_backward", k_gru_cell_backward, TORC_KERNEL_CONTIGUOUS},
  };
  static const int32_t dtypes[] = {TORC_F32, TORC_F64};
  return torc_cpu__register_table(host, self, kernels,
                                  sizeof kernels / sizeof kernels[0], dtypes,
                                  2);
}
