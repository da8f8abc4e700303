/* plugins/onednn/bf16.c — the bf16 kernels: "matmul" through oneDNN's
 * matmul primitive (bf16 x bf16 -> bf16, accumulating in f32 as PyTorch),
 * and the registrations of conv2d, max/avg_pool2d and batch_norm (whose
 * kernels in conv.c, pool.c and bnorm.c take bf16 operands too) for
 * inference, and of the convolution's and max pool's backward kernels
 * (conv.c, pool.c) for training under autocast. Registered only when
 * oneDNN's effective ISA has native bf16
 * (AVX-512 BF16 or AMX): elsewhere oneDNN emulates it, no faster than ref.
 *
 * matmul takes its operands as strided views: [B..., M, K] x [B..., K, N]
 * with any strides in the matrix dims (a transposed weight is one), batch
 * dims that fold into one stride, and a weight broadcast over the whole
 * batch (stride 0, as linear's). Other layouts, and shapes oneDNN has no
 * primitive for, are declined: ref serves them.
 */
#include <string.h>

#include "onednn_internal.h"

int torc_dnn__bf16;

/* The matmul's geometry: x [B, M, K], w [Bw, K, N] (Bw 1 or B), y
 * [B, M, N] contiguous; strides in elements. */
typedef struct mgeo {
  int64_t B, M, K, N, Bw;
  int64_t xs[3], ws[3];
} mgeo;

/* Folds dims [0, nb) of t into one: *n their product, *stride theirs.
 * Returns 0 when they do not fold (size-1 dims are free; a broadcast dim
 * counts as stride 0 only when every batch dim is one). */
static int fold_batch(const torc_ktensor *t, int nb, int64_t *n,
                      int64_t *stride) {
  int64_t count = 1, s = -1, expect = 0;
  int bcast = 1;
  for (int d = nb - 1; d >= 0; d--) {
    if (t->shape[d] == 1)
      continue;
    count *= t->shape[d];
    if (t->strides[d] != 0)
      bcast = 0;
    if (s < 0)
      s = t->strides[d], expect = s * t->shape[d];
    else if (t->strides[d] != expect)
      return 0;
    else
      expect *= t->shape[d];
  }
  if (s < 0) { /* no batch dims */
    *n = 1, *stride = 0;
    return 1;
  }
  if (bcast) {
    *n = 1, *stride = 0;
    return 1;
  }
  if (s == 0)
    return 0;
  *n = count, *stride = s;
  return 1;
}

static int mm_build(dnn_entry *e, const void *vctx) {
  const mgeo *g = vctx;
  /* Size-1 dims get a stride oneDNN's plain-layout checks accept. */
  int64_t xs[3] = {g->xs[0], g->xs[1], g->xs[2]};
  int64_t ws[3] = {g->ws[0], g->ws[1], g->ws[2]};
  if (g->K == 1)
    xs[2] = 1, ws[1] = g->N;
  if (g->M == 1)
    xs[1] = g->K * xs[2];
  if (g->N == 1)
    ws[2] = 1;
  if (g->B == 1)
    xs[0] = g->M * g->K;
  if (g->Bw == 1)
    ws[0] = g->K * g->N;
  int64_t xd[3] = {g->B, g->M, g->K}, wd[3] = {g->Bw, g->K, g->N};
  int64_t yd[3] = {g->B, g->M, g->N}, ys[3] = {g->M * g->N, g->N, 1};
  dnnl_memory_desc_t xm, wm, ym;
  if (torc_dnn__md(&xm, 3, xd, xs, dnnl_bf16) != TORC_OK ||
      torc_dnn__md(&wm, 3, wd, ws, dnnl_bf16) != TORC_OK ||
      torc_dnn__md(&ym, 3, yd, ys, dnnl_bf16) != TORC_OK)
    return TORC_ERR_UNSUPPORTED;
  dnnl_primitive_attr_t attr;
  dnnl_status_t s = dnnl_primitive_attr_create(&attr);
  if (s != dnnl_success)
    return torc_dnn__fail("matmul", "creating an attribute", s);
  s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  dnnl_matmul_desc_t md;
  if (s == dnnl_success)
    s = dnnl_matmul_desc_init(&md, &xm, &wm, NULL, &ym);
  if (s == dnnl_success)
    s = dnnl_primitive_desc_create(&e->pd, &md, attr, torc_dnn__engine, NULL);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success)
    return TORC_ERR_UNSUPPORTED; /* ref serves it: no error recorded */
  int st = torc_dnn__entry_arg(e, DNNL_ARG_SRC, &xm, 0);
  if (st == TORC_OK)
    st = torc_dnn__entry_arg(e, DNNL_ARG_WEIGHTS, &wm, 0);
  if (st == TORC_OK)
    st = torc_dnn__entry_arg(e, DNNL_ARG_DST, &ym, 1);
  return st == TORC_OK ? torc_dnn__entry_finish(e) : st;
}

/* in x [B..., M, K], w [B..., K, N] (bf16); out y [B..., M, N]. */
int torc_dnn__k_matmul(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return torc_dnn__set_error(TORC_ERR_INTERNAL,
                               "onednn kernel 'matmul' got %d inputs and %d "
                               "outputs (expected 2 and 1)",
                               a->n_in, a->n_out);
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  int nd = y->ndim, nb = nd - 2;
  int ok = nd >= 2 && x->ndim == nd && w->ndim == nd &&
           x->dtype == TORC_BF16 && w->dtype == TORC_BF16 &&
           y->dtype == TORC_BF16;
  for (int d = 0; ok && d < nb; d++)
    ok = x->shape[d] == y->shape[d] && w->shape[d] == y->shape[d];
  if (ok)
    ok = x->shape[nd - 2] == y->shape[nd - 2] &&
         w->shape[nd - 1] == y->shape[nd - 1] &&
         x->shape[nd - 1] == w->shape[nd - 2];
  if (!ok)
    return torc_dnn__set_error(TORC_ERR_SHAPE,
                               "onednn kernel 'matmul' got operands of %d, %d "
                               "and %d dims that are not bf16 [B..., M, K] x "
                               "[B..., K, N] -> [B..., M, N]",
                               x->ndim, w->ndim, y->ndim);
  mgeo g;
  memset(&g, 0, sizeof g);
  g.M = y->shape[nd - 2], g.N = y->shape[nd - 1], g.K = x->shape[nd - 1];
  g.B = 1;
  for (int d = 0; d < nb; d++)
    g.B *= y->shape[d];
  if (g.B == 0 || g.M == 0 || g.N == 0)
    return TORC_OK;
  if (g.K == 0) {
    memset(dnn_at(y, 0), 0, (size_t)(g.B * g.M * g.N) * 2);
    return TORC_OK;
  }
  int64_t bx;
  if (!fold_batch(x, nb, &bx, &g.xs[0]) || bx != g.B ||
      !fold_batch(w, nb, &g.Bw, &g.ws[0]) || (g.Bw != 1 && g.Bw != g.B))
    return TORC_KERNEL_DECLINED;
  g.xs[1] = x->strides[nd - 2], g.xs[2] = x->strides[nd - 1];
  g.ws[1] = w->strides[nd - 2], g.ws[2] = w->strides[nd - 1];
  dnn_key key;
  memset(&key, 0, sizeof key);
  key.op = DNN_OP_MATMUL;
  key.n_threads = torc_dnn__threads(a->n_threads);
  int64_t v[] = {g.B,     g.M,     g.K,     g.N,     g.Bw,    g.xs[0],
                 g.xs[1], g.xs[2], g.ws[0], g.ws[1], g.ws[2]};
  memcpy(key.v, v, sizeof v);
  torc_dnn__lock();
  dnn_entry *e = torc_dnn__cache_get(&key, mm_build, &g);
  int st = e == NULL        ? TORC_ERR_PLUGIN
           : e->unsupported ? TORC_KERNEL_DECLINED
                            : torc_dnn__run(e, (void *const[]){dnn_at(x, 0),
                                                               dnn_at(w, 0),
                                                               dnn_at(y, 0)});
  torc_dnn__unlock();
  return st;
}

/* The bf16 kernels: the forward ops, and the convolution's and max
 * pool's backward ones for training under autocast. */
static const struct {
  const char *op;
  torc_kernel_fn fn;
  unsigned flags;
} bf16_kernels[] = {
    {"matmul", torc_dnn__k_matmul, 0},
    {"conv2d", torc_dnn__k_conv2d, TORC_KERNEL_CONTIGUOUS},
    {"conv2d_backward_input", torc_dnn__k_conv2d_backward_input,
     TORC_KERNEL_CONTIGUOUS},
    {"conv2d_backward_weight", torc_dnn__k_conv2d_backward_weight,
     TORC_KERNEL_CONTIGUOUS},
    {"max_pool2d", torc_dnn__k_max_pool2d, TORC_KERNEL_CONTIGUOUS},
    {"max_pool2d_backward", torc_dnn__k_max_pool2d_backward,
     TORC_KERNEL_CONTIGUOUS},
    {"avg_pool2d", torc_dnn__k_avg_pool2d, TORC_KERNEL_CONTIGUOUS},
    {"batch_norm", torc_dnn__k_batch_norm, TORC_KERNEL_CONTIGUOUS},
};

int torc_dnn__register_bf16(const torc_host *host, torc_plugin *self) {
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  torc_dnn__bf16 = (isa & dnnl_cpu_isa_avx512_core_bf16) ==
                   dnnl_cpu_isa_avx512_core_bf16;
  for (size_t i = 0; torc_dnn__bf16 && i < sizeof bf16_kernels /
                                               sizeof bf16_kernels[0];
       i++) {
    torc_kernel_reg reg = {
        .struct_size = sizeof reg,
        .device_type = "cpu",
        .op = bf16_kernels[i].op,
        .dtype = TORC_BF16,
        .priority = TORC_DNN_PRIORITY,
        .fn = bf16_kernels[i].fn,
        .data = NULL,
        .flags = bf16_kernels[i].flags,
    };
    int st = host->register_kernel(self, &reg);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}
