/* plugins/ref/kernels_reduce.c — reductions over a set of dims ("sum",
 * "prod", "mean", "amax", "amin"): one table row per op (start value and
 * step in double and in int64) and one loop over output elements, each
 * walking the reduced dims of the input.
 */
#include "ref_util.h"

/* Accumulation: floating inputs accumulate in double (f32/f16/bf16 sums
 * and products are then rounded once, more accurate than PyTorch's float
 * accumulator); integers and bool accumulate exactly in int64, wrapping,
 * and are written to the output's dtype (i64 for sum/prod, as the core
 * allocates it). amax/amin start from the first element and propagate
 * NaN; over an empty set they are an error (the core rejects it first). */
typedef struct reduce_op {
  double f_init;
  int64_t i_init;
  double (*f)(double acc, double x);
  int64_t (*i)(int64_t acc, int64_t x); /* NULL = floats only (mean) */
  int from_first;                       /* start from the first element */
  int mean;                             /* divide the sum by the count */
} reduce_op;

static double f_add(double acc, double x) { return acc + x; }
static double f_mul(double acc, double x) { return acc * x; }
/* Once acc is NaN it stays NaN (comparisons with NaN are false). */
static double f_max(double acc, double x) {
  return isnan(x) || x > acc ? x : acc;
}
static double f_min(double acc, double x) {
  return isnan(x) || x < acc ? x : acc;
}
static int64_t i_max(int64_t acc, int64_t x) { return x > acc ? x : acc; }
static int64_t i_min(int64_t acc, int64_t x) { return x < acc ? x : acc; }

/* out has in's ndim with size 1 on every reduced dim (bit d of dims_mask
 * set) and in's size elsewhere. For each output element (the outer walk,
 * over out's shape with in's strides) the inner walk covers the reduced
 * dims (in's sizes there, 1 elsewhere) from that element's position. */
static int reduce(const torc_kernel_args *a, const reduce_op *op) {
  int st = ref_check_args(a, 1, 1);
  if (st != TORC_OK)
    return st;
  const torc_reduce_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int nd = x->ndim;
  int64_t inner_shape[TORC_KERNEL_MAX_DIMS];
  int shape_ok = y->ndim == nd && (p->dims_mask >> nd) == 0;
  for (int d = 0; shape_ok && d < nd; d++) {
    int reduced = (p->dims_mask >> d) & 1u;
    inner_shape[d] = reduced ? x->shape[d] : 1;
    shape_ok = y->shape[d] == (reduced ? 1 : x->shape[d]);
  }
  if (!shape_ok) {
    char s1[128], s2[128];
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel '%s': output shape %s does not match input "
                     "shape %s reduced over dims mask 0x%x",
                     a->op, ref_shape_str(y, s1, sizeof s1),
                     ref_shape_str(x, s2, sizeof s2), (unsigned)p->dims_mask);
  }
  int is_float = torc_dtype_is_float((torc_dtype)x->dtype);
  if (!is_float && op->i == NULL)
    return ref_error(TORC_ERR_DTYPE, "ref kernel '%s' is not defined for %s",
                     a->op, ref_dtype_name(x->dtype));
  int64_t count = ref_numel(nd, inner_shape);
  if (count == 0 && op->from_first && ref_numel(nd, y->shape) > 0) {
    char s1[128];
    return ref_error(TORC_ERR_INVALID,
                     "%s over an empty dimension of a tensor of shape %s has "
                     "no identity; reduce over non-empty dims",
                     a->op, ref_shape_str(x, s1, sizeof s1));
  }
  ref_iter outer;
  ref_iter_init(&outer, nd, y->shape);
  ref_iter_add_t(&outer, x);
  ref_iter_add_t(&outer, y);
  for (; !ref_iter_done(&outer); ref_iter_next(&outer)) {
    ref_iter in;
    ref_iter_init(&in, nd, inner_shape);
    ref_iter_add(&in, outer.pos[0], x->strides);
    void *dst = ref_ptr(y, outer.pos[1]);
    int first = op->from_first;
    if (is_float) {
      double acc = op->f_init;
      for (; !ref_iter_done(&in); ref_iter_next(&in)) {
        double v = ref_load_f(x->dtype, ref_ptr(x, in.pos[0]));
        acc = first ? v : op->f(acc, v);
        first = 0;
      }
      ref_store_f(y->dtype, dst, op->mean ? acc / (double)count : acc);
    } else {
      int64_t acc = op->i_init;
      for (; !ref_iter_done(&in); ref_iter_next(&in)) {
        int64_t v = ref_load_i(x->dtype, ref_ptr(x, in.pos[0]));
        acc = first ? v : op->i(acc, v);
        first = 0;
      }
      ref_store_i(y->dtype, dst, acc);
    }
  }
  return TORC_OK;
}

/* One kernel per op: its row, then the shared loop. Over zero elements:
 * sum 0, prod 1, mean 0/0 = NaN. */
#define REDUCE(name, f_init, i_init, fexpr, iexpr, from_first, mean)           \
  int torc_ref_k_##name(const torc_kernel_args *a) {                           \
    static const reduce_op op = {f_init, i_init, fexpr, iexpr, from_first,     \
                                 mean};                                        \
    return reduce(a, &op);                                                     \
  }

REDUCE(sum, 0.0, 0, f_add, ref_iadd, 0, 0)
REDUCE(prod, 1.0, 1, f_mul, ref_imul, 0, 0)
REDUCE(mean, 0.0, 0, f_add, NULL, 0, 1)
REDUCE(amax, 0.0, 0, f_max, i_max, 1, 0)
REDUCE(amin, 0.0, 0, f_min, i_min, 1, 0)
