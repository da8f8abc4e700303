/* plugins/ref/kernels_matmul.c — "matmul": batched matrix product with the
 * plain triple loop, the oracle for BLAS/cuBLAS backends.
 */
#include "ref_util.h"

/* in[0] a: [B..., M, K], in[1] b: [B..., K, N] (equal batch dims, stride 0
 * where broadcast), out c: [B..., M, N].
 *   c[..., m, n] = sum_k a[..., m, k] * b[..., k, n]
 * Floating dtypes accumulate in double and round once (PyTorch/BLAS
 * accumulate f32 in f32, so fast backends match this to a tolerance that
 * grows with K); integers accumulate in int64, wrapping, which is exactly
 * the i32/u8 wrapping result after the store. K = 0 gives zeros. */
int torc_ref_k_matmul(const torc_kernel_args *a) {
  int st = ref_check_args(a, 2, 1);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  int nd = y->ndim;
  int ok = nd >= 2 && x->ndim == nd && w->ndim == nd;
  for (int d = 0; ok && d < nd - 2; d++)
    ok = x->shape[d] == y->shape[d] && w->shape[d] == y->shape[d];
  if (ok)
    ok = x->shape[nd - 2] == y->shape[nd - 2] &&
         w->shape[nd - 1] == y->shape[nd - 1] &&
         x->shape[nd - 1] == w->shape[nd - 2];
  if (!ok) {
    char s1[128], s2[128], s3[128];
    return ref_error(TORC_ERR_SHAPE,
                     "ref kernel 'matmul' got shapes %s x %s -> %s (expected "
                     "[B..., M, K] x [B..., K, N] -> [B..., M, N])",
                     ref_shape_str(x, s1, sizeof s1),
                     ref_shape_str(w, s2, sizeof s2),
                     ref_shape_str(y, s3, sizeof s3));
  }
  if (x->dtype != w->dtype || x->dtype == TORC_BOOL)
    return ref_error(TORC_ERR_DTYPE,
                     "ref kernel 'matmul' is not defined for %s x %s (one "
                     "non-bool dtype expected)",
                     ref_dtype_name(x->dtype), ref_dtype_name(w->dtype));
  int64_t M = y->shape[nd - 2], N = y->shape[nd - 1], K = x->shape[nd - 1];
  int64_t xs_m = x->strides[nd - 2], xs_k = x->strides[nd - 1];
  int64_t ws_k = w->strides[nd - 2], ws_n = w->strides[nd - 1];
  int64_t ys_m = y->strides[nd - 2], ys_n = y->strides[nd - 1];
  int is_float = torc_dtype_is_float((torc_dtype)x->dtype);

  ref_iter batch; /* over B... (no dims for plain 2-D) */
  ref_iter_init(&batch, nd - 2, y->shape);
  ref_iter_add_t(&batch, x);
  ref_iter_add_t(&batch, w);
  ref_iter_add_t(&batch, y);
  for (; !ref_iter_done(&batch); ref_iter_next(&batch)) {
    for (int64_t m = 0; m < M; m++) {
      for (int64_t n = 0; n < N; n++) {
        int64_t px = batch.pos[0] + m * xs_m, pw = batch.pos[1] + n * ws_n;
        void *dst = ref_ptr(y, batch.pos[2] + m * ys_m + n * ys_n);
        if (is_float) {
          double acc = 0;
          for (int64_t k = 0; k < K; k++)
            acc += ref_load_f(x->dtype, ref_ptr(x, px + k * xs_k)) *
                   ref_load_f(w->dtype, ref_ptr(w, pw + k * ws_k));
          ref_store_f(y->dtype, dst, acc);
        } else {
          int64_t acc = 0;
          for (int64_t k = 0; k < K; k++) {
            int64_t xv = ref_load_i(x->dtype, ref_ptr(x, px + k * xs_k));
            int64_t wv = ref_load_i(w->dtype, ref_ptr(w, pw + k * ws_k));
            acc = ref_iadd(acc, ref_imul(xv, wv));
          }
          ref_store_i(y->dtype, dst, acc);
        }
      }
    }
  }
  return TORC_OK;
}
