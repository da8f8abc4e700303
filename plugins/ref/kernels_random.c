/* plugins/ref/kernels_random.c — "uniform_", "normal_", "randint_": element
 * i (row-major) of the output is a pure function of (seed, offset + i)
 * through torc/philox.h, so every backend draws the very same numbers.
 */
#include "ref_util.h"
#include "torc/philox.h"

/* v as the output dtype would hold it. */
static double round_to(int dt, double v) {
  switch (dt) {
  case TORC_F32: return (float)v;
  case TORC_F16: return torc_f16_to_f32(torc_f32_to_f16((float)v));
  case TORC_BF16: return torc_bf16_to_f32(torc_f32_to_bf16((float)v));
  default: return v;
  }
}

/* The next 16-bit float encoding below the value v it encodes (sign and
 * magnitude: positive values step down, negative ones grow in magnitude,
 * zero goes to the smallest negative subnormal). */
static uint16_t bits16_below(uint16_t bits, double v) {
  if (v > 0)
    return (uint16_t)(bits - 1u);
  if (v == 0)
    return 0x8001u;
  return (uint16_t)(bits + 1u);
}

/* The largest value of dtype dt below v (v is a finite value of dt). */
static double next_below(int dt, double v) {
  switch (dt) {
  case TORC_F32: return nextafterf((float)v, -INFINITY);
  case TORC_F16:
    return torc_f16_to_f32(bits16_below(torc_f32_to_f16((float)v), v));
  case TORC_BF16:
    return torc_bf16_to_f32(bits16_below(torc_f32_to_bf16((float)v), v));
  default: return nextafter(v, -INFINITY);
  }
}

static int check_float_out(const torc_kernel_args *a) {
  int st = ref_check_args(a, 0, 1);
  if (st == TORC_OK && !torc_dtype_is_float((torc_dtype)a->out[0].dtype))
    st = ref_error(TORC_ERR_DTYPE,
                   "ref kernel '%s' draws floating values; got dtype %s",
                   a->op, ref_dtype_name(a->out[0].dtype));
  return st;
}

/* uniform_: out[i] = a + (b - a) * u_i, u_i in [0, 1) from
 * torc_philox_uniform_f32 for f32/f16/bf16 and torc_philox_uniform for
 * f64, computed in double and rounded once to the dtype. Rounding can
 * land on b itself (for bf16, with [0, 1), one draw in 512); such a value
 * becomes the dtype's largest value below b, so the result always lies in
 * [a, b) as documented. */
int torc_ref_k_uniform(const torc_kernel_args *a) {
  int st = check_float_out(a);
  if (st != TORC_OK)
    return st;
  const torc_random_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *y = &a->out[0];
  ref_iter it;
  ref_iter_init(&it, y->ndim, y->shape);
  ref_iter_add_t(&it, y);
  for (uint64_t i = 0; !ref_iter_done(&it); ref_iter_next(&it), i++) {
    uint64_t n = p->offset + i;
    double u = y->dtype == TORC_F64 ? torc_philox_uniform(p->seed, n)
                                    : torc_philox_uniform_f32(p->seed, n);
    double v = round_to(y->dtype, p->a + (p->b - p->a) * u);
    for (int k = 0; k < 4 && v >= p->b && p->b > p->a; k++)
      v = next_below(y->dtype, v);
    ref_store_f(y->dtype, ref_ptr(y, it.pos[0]), v);
  }
  return TORC_OK;
}

/* normal_: out[i] = a + b * z_i, z_i = torc_philox_normal (Box-Muller, in
 * double), rounded once to the dtype. */
int torc_ref_k_normal(const torc_kernel_args *a) {
  int st = check_float_out(a);
  if (st != TORC_OK)
    return st;
  const torc_random_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *y = &a->out[0];
  ref_iter it;
  ref_iter_init(&it, y->ndim, y->shape);
  ref_iter_add_t(&it, y);
  for (uint64_t i = 0; !ref_iter_done(&it); ref_iter_next(&it), i++)
    ref_store_f(y->dtype, ref_ptr(y, it.pos[0]),
                p->a + p->b * torc_philox_normal(p->seed, p->offset + i));
  return TORC_OK;
}

/* randint_: out[i] = torc_philox_randint(seed, offset + i, low, high), in
 * [low, high), stored into any non-bool dtype (floats round once). */
int torc_ref_k_randint(const torc_kernel_args *a) {
  int st = ref_check_args(a, 0, 1);
  if (st != TORC_OK)
    return st;
  const torc_random_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *y = &a->out[0];
  if (y->dtype == TORC_BOOL)
    return ref_error(TORC_ERR_DTYPE, "ref kernel 'randint_' is not defined "
                                     "for bool");
  if (p->high <= p->low)
    return ref_error(TORC_ERR_INVALID,
                     "randint_ needs low < high; got low %lld, high %lld",
                     (long long)p->low, (long long)p->high);
  ref_iter it;
  ref_iter_init(&it, y->ndim, y->shape);
  ref_iter_add_t(&it, y);
  for (uint64_t i = 0; !ref_iter_done(&it); ref_iter_next(&it), i++)
    ref_store_i(y->dtype, ref_ptr(y, it.pos[0]),
                torc_philox_randint(p->seed, p->offset + i, p->low, p->high));
  return TORC_OK;
}
