/* plugins/ref/kernels_copy.c — "copy" (any dtype to any dtype, strided
 * input, C-cast semantics) and "fill_" (a constant into every element).
 */
#include "ref_util.h"

/* copy: in[0] and out[0] have the same shape, any two dtypes.
 * out[i] = (out dtype) in[i]: floats read as double and integers/bool as
 * int64, so every conversion rounds exactly once (an i64 beyond 2^53 goes
 * to f32 in one rounding, not through double). To bool: v != 0 (NaN is
 * true); from bool: 0/1; float to integer truncates toward zero, NaN gives
 * 0, out-of-range values saturate at int64 and then wrap to the target
 * width (so -1.0 to u8 is 255, as PyTorch on x86). */
int torc_ref_k_copy(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 1);
  if (st == TORC_OK)
    st = ref_check_same_shape(a, &a->in[0], &a->out[0]);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int from_float = torc_dtype_is_float((torc_dtype)x->dtype);
  ref_iter it;
  ref_iter_init(&it, y->ndim, y->shape);
  ref_iter_add_t(&it, x);
  ref_iter_add_t(&it, y);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    const void *src = ref_ptr(x, it.pos[0]);
    void *dst = ref_ptr(y, it.pos[1]);
    if (from_float)
      ref_store_f(y->dtype, dst, ref_load_f(x->dtype, src));
    else
      ref_store_i(y->dtype, dst, ref_load_i(x->dtype, src));
  }
  return TORC_OK;
}

/* fill_: out[i] = value (floating dtypes, rounded once) or ivalue
 * (integers wrap to their width, bool is ivalue != 0). */
int torc_ref_k_fill(const torc_kernel_args *a) {
  int st = ref_check_args(a, 0, 1);
  if (st != TORC_OK)
    return st;
  const torc_fill_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *y = &a->out[0];
  int is_float = torc_dtype_is_float((torc_dtype)y->dtype);
  ref_iter it;
  ref_iter_init(&it, y->ndim, y->shape);
  ref_iter_add_t(&it, y);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    void *dst = ref_ptr(y, it.pos[0]);
    if (is_float)
      ref_store_f(y->dtype, dst, p->value);
    else
      ref_store_i(y->dtype, dst, p->ivalue);
  }
  return TORC_OK;
}
