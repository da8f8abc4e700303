/* plugins/ref/kernels_foreach.c — reference kernels of the list ops
 * "foreach_add_", "foreach_mul_" and "foreach_norm" (torc/foreach.h):
 * each tensor of the list goes through the single-tensor kernel ("add",
 * "mul", "norm"), so the bits are those of the per-tensor ops, in one
 * kernel call for the list. Registered with TORC_KERNEL_CONTIGUOUS.
 */
#include "ref_fused.h"

/* The single kernel on one tensor: args a with these operands. */
static int one(const torc_kernel_args *a, int (*fn)(const torc_kernel_args *),
               const torc_ktensor *in, int n_in, const torc_ktensor *out,
               const void *params, size_t params_size) {
  torc_kernel_args s = *a;
  s.n_in = n_in;
  s.n_out = 1;
  s.in = in;
  s.out = out;
  s.params = params;
  s.params_size = params_size;
  return fn(&s);
}

/* in ys[n]; out xs[n]: x += y. */
int torc_ref_k_foreach_add(const torc_kernel_args *a) {
  if (a->n_in < 1 || a->n_out != a->n_in)
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel 'foreach_add_': %d inputs and %d outputs; "
                     "expected n and n",
                     (int)a->n_in, (int)a->n_out);
  for (int k = 0; k < a->n_in; k++) {
    torc_ktensor in[2] = {a->out[k], a->in[k]};
    int st = one(a, torc_ref_k_add, in, 2, &a->out[k], NULL, 0);
    if (st)
      return st;
  }
  return TORC_OK;
}

/* in s (one element); out xs[n]: x *= s, s broadcast over x. */
int torc_ref_k_foreach_mul(const torc_kernel_args *a) {
  if (a->n_in != 1 || a->n_out < 1)
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel 'foreach_mul_': %d inputs and %d outputs; "
                     "expected 1 and n",
                     (int)a->n_in, (int)a->n_out);
  for (int k = 0; k < a->n_out; k++) {
    const torc_ktensor *x = &a->out[k];
    torc_ktensor s = a->in[0];
    s.ndim = x->ndim;
    for (int d = 0; d < TORC_KERNEL_MAX_DIMS; d++) {
      s.shape[d] = d < x->ndim ? x->shape[d] : 1;
      s.strides[d] = 0;
    }
    torc_ktensor in[2] = {*x, s};
    int st = one(a, torc_ref_k_mul, in, 2, x, NULL, 0);
    if (st)
      return st;
  }
  return TORC_OK;
}

/* in xs[n]; out [n]: out[i] = the p-norm of xs[i] over all its dims. */
int torc_ref_k_foreach_norm(const torc_kernel_args *a) {
  const torc_norm_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  if (a->n_in < 1 || a->n_out != 1 ||
      ref_numel(a->out[0].ndim, a->out[0].shape) != a->n_in)
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel 'foreach_norm': %d inputs and %d outputs; "
                     "expected n and one of n elements",
                     (int)a->n_in, (int)a->n_out);
  for (int k = 0; k < a->n_in; k++) {
    /* Element k, shaped as the single kernel's keepdim result. */
    torc_ktensor y = a->out[0];
    y.offset += k;
    y.ndim = a->in[k].ndim;
    for (int d = 0; d < TORC_KERNEL_MAX_DIMS; d++)
      y.shape[d] = 1, y.strides[d] = 0;
    torc_norm_params q = *p;
    q.dims_mask = a->in[k].ndim ? (uint32_t)((1u << a->in[k].ndim) - 1) : 0;
    int st = one(a, torc_ref_k_norm, &a->in[k], 1, &y, &q, sizeof q);
    if (st)
      return st;
  }
  return TORC_OK;
}
