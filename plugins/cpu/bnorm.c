/* plugins/cpu/bnorm.c — "batch_norm" and "batch_norm_backward" for a
 * contiguous f32 or bf16 x [N, C, *] (the channel's N runs of S inner
 * elements), with f32 arithmetic and double sums: the affine parameters
 * f32 (or x's dtype), the running statistics f32 or f64, the saved mean
 * and inverse standard deviation f32. Mixed precision's bf16 activations
 * with f32 parameters run here, as do plain f32 ones.
 *
 * The channels split across the pool; each channel's sums run in a fixed
 * order (its runs in n order, each run through the ISA's lanes), so the
 * results do not depend on the thread count. Training makes two passes
 * for the statistics (the mean, then the squared deviations from it, as
 * ref) and one to write y; the channel's data stays in cache between
 * them. An inner size below BN_MIN_S (a [N, C] batch norm) declines: its
 * runs are too short for the lanes, and the next provider serves it.
 */
#include <math.h>

#include "cpu_internal.h"

enum { BN_MIN_S = 8 };

/* Registered above a oneDNN plugin's batch norm (priority 20): oneDNN
 * 2.6 has only its generic loops for the plain [N, C, H, W] layout. */
enum { BN_PRIORITY = TORC_CPU_PRIORITY + 15 };

static double bn_ld(const torc_ktensor *t, int64_t i) {
  const void *p = cpu_ptr(t, i);
  switch (t->dtype) {
  case TORC_F32: return *(const float *)p;
  case TORC_F64: return *(const double *)p;
  default: return torc_bf16_to_f32(*(const uint16_t *)p);
  }
}

static void bn_st(const torc_ktensor *t, int64_t i, double v) {
  void *p = cpu_ptr(t, i);
  switch (t->dtype) {
  case TORC_F32: *(float *)p = (float)v; break;
  case TORC_F64: *(double *)p = v; break;
  default: *(uint16_t *)p = torc_f32_to_bf16((float)v); break;
  }
}

/* A [C] operand: contiguous, C elements, one of the dtypes allowed. */
static int bn_vec(const torc_ktensor *t, int64_t C, int32_t a, int32_t b) {
  return (t->dtype == a || t->dtype == b) && cpu_numel(t) == C &&
         cpu_rowmajor(t);
}

typedef struct bn_job {
  const torc_kernel_args *a;
  const torc_norm_kparams *p;
  int32_t dt;
  int64_t N, C, S;
} bn_job;

/* The geometry of x [N, C, *] (f32 or bf16, contiguous); 0 when the
 * kernel declines it. */
static int bn_geometry(const torc_kernel_args *a, const torc_ktensor *x,
                       bn_job *j) {
  j->a = a;
  j->p = a->params;
  if (j->p == NULL || a->params_size < sizeof *j->p || x->ndim < 2 ||
      (x->dtype != TORC_F32 && x->dtype != TORC_BF16) || !cpu_rowmajor(x))
    return 0;
  j->dt = x->dtype;
  j->N = x->shape[0], j->C = x->shape[1];
  j->S = 1;
  for (int d = 2; d < x->ndim; d++)
    j->S *= x->shape[d];
  return j->S >= BN_MIN_S;
}

/* The operand of x's shape and dtype, contiguous. */
static int bn_like(const torc_ktensor *t, const bn_job *j) {
  return t->dtype == j->dt && cpu_rowmajor(t) &&
         cpu_numel(t) == j->N * j->C * j->S;
}

static void bn_fwd_task(void *ctx, int64_t lo, int64_t hi) {
  const bn_job *j = ctx;
  const torc_kernel_args *a = j->a;
  const cpu_isa *isa = torc_cpu__isa;
  size_t es = cpu_esize(j->dt);
  const char *x = cpu_ptr(&a->in[0], 0);
  char *y = cpu_ptr(&a->out[0], 0);
  const torc_ktensor *rm = a->n_in == 5 ? &a->in[3] : NULL;
  const torc_ktensor *rv = a->n_in == 5 ? &a->in[4] : NULL;
  int64_t M = j->N * j->S;
  size_t run = (size_t)j->S * es, step = (size_t)(j->C * j->S) * es;
  for (int64_t c = lo; c < hi; c++) {
    const char *xc = x + (size_t)c * run;
    char *yc = y + (size_t)c * run;
    double mean, var;
    if (j->p->training) {
      double s = 0, ss = 0;
      for (int64_t n = 0; n < j->N; n++)
        isa->bn_stat(j->dt, xc + (size_t)n * step, j->S, 1, 0, &s);
      mean = M ? s / (double)M : 0;
      for (int64_t n = 0; n < j->N; n++)
        isa->bn_stat(j->dt, xc + (size_t)n * step, j->S, 2, mean, &ss);
      var = M ? ss / (double)M : 0;
      if (rm) {
        double unb = M > 1 ? ss / (double)(M - 1) : NAN, mo = j->p->momentum;
        bn_st(rm, c, (1 - mo) * bn_ld(rm, c) + mo * mean);
        bn_st(rv, c, (1 - mo) * bn_ld(rv, c) + mo * unb);
      }
    } else {
      mean = bn_ld(rm, c);
      var = bn_ld(rv, c);
    }
    double inv = 1.0 / sqrt(var + j->p->eps);
    float mf = (float)mean, sc = (float)(bn_ld(&a->in[1], c) * inv);
    float sh = (float)bn_ld(&a->in[2], c);
    for (int64_t n = 0; n < j->N; n++)
      isa->bn_apply(j->dt, xc + (size_t)n * step, yc + (size_t)n * step, j->S,
                    mf, sc, sh);
    ((float *)cpu_ptr(&a->out[1], 0))[c] = mf;
    ((float *)cpu_ptr(&a->out[2], 0))[c] = (float)inv;
  }
}

/* in x [N, C, *], w, b [C] (+ running mean, var [C]); out y, mean,
 * invstd [C]. */
static int k_batch_norm(const torc_kernel_args *a) {
  bn_job j;
  if ((a->n_in != 3 && a->n_in != 5) || a->n_out != 3 ||
      !bn_geometry(a, &a->in[0], &j) || !bn_like(&a->out[0], &j))
    return TORC_KERNEL_DECLINED;
  int64_t C = j.C;
  int32_t pdt = a->in[1].dtype;
  if (!bn_vec(&a->in[1], C, TORC_F32, j.dt) || a->in[2].dtype != pdt ||
      !bn_vec(&a->in[2], C, TORC_F32, j.dt) ||
      !bn_vec(&a->out[1], C, TORC_F32, TORC_F32) ||
      !bn_vec(&a->out[2], C, TORC_F32, TORC_F32))
    return TORC_KERNEL_DECLINED;
  for (int i = 3; i < a->n_in; i++)
    if (!bn_vec(&a->in[i], C, TORC_F32, TORC_F64))
      return TORC_KERNEL_DECLINED;
  if (!j.p->training && a->n_in != 5)
    return TORC_KERNEL_DECLINED; /* ref's message */
  int64_t per = j.N * j.S, grain = TORC_CPU_PAR_MIN / (per ? per : 1);
  if (C > 0)
    torc_cpu__parallel_for(a->n_threads, C, grain > 1 ? grain : 1,
                           bn_fwd_task, &j);
  return TORC_OK;
}

static void bn_bwd_task(void *ctx, int64_t lo, int64_t hi) {
  const bn_job *j = ctx;
  const torc_kernel_args *a = j->a;
  const cpu_isa *isa = torc_cpu__isa;
  size_t es = cpu_esize(j->dt);
  const char *g = cpu_ptr(&a->in[0], 0), *x = cpu_ptr(&a->in[1], 0);
  char *gx = cpu_ptr(&a->out[0], 0);
  int64_t M = j->N * j->S;
  size_t run = (size_t)j->S * es, step = (size_t)(j->C * j->S) * es;
  for (int64_t c = lo; c < hi; c++) {
    size_t at = (size_t)c * run;
    float mf = ((const float *)cpu_ptr(&a->in[3], 0))[c];
    double inv = ((const float *)cpu_ptr(&a->in[4], 0))[c];
    double w = bn_ld(&a->in[2], c), sg = 0, sgx = 0;
    for (int64_t n = 0; n < j->N; n++)
      isa->bn_bw_sums(j->dt, g + at + (size_t)n * step,
                      x + at + (size_t)n * step, j->S, mf, &sg, &sgx);
    double sgxh = sgx * inv; /* sum of g xh, xh = (x - mean) inv */
    bn_st(&a->out[1], c, sgxh);
    bn_st(&a->out[2], c, sg);
    /* training: gx = w inv (g - sg / M - xh sgxh / M); eval: w inv g */
    double k1 = w * inv, k2 = 0, k3 = 0;
    if (j->p->training && M > 0) {
      k2 = -k1 * inv * sgxh / (double)M;
      k3 = -k1 * sg / (double)M;
    }
    for (int64_t n = 0; n < j->N; n++)
      isa->bn_bw_apply(j->dt, g + at + (size_t)n * step,
                       x + at + (size_t)n * step, gx + at + (size_t)n * step,
                       j->S, mf, (float)k1, (float)k2, (float)k3);
  }
}

/* in gy, x, w, mean, invstd; out gx, gw, gb. */
static int k_batch_norm_backward(const torc_kernel_args *a) {
  bn_job j;
  if (a->n_in != 5 || a->n_out != 3 || !bn_geometry(a, &a->in[1], &j) ||
      !bn_like(&a->in[0], &j) || !bn_like(&a->out[0], &j))
    return TORC_KERNEL_DECLINED;
  int64_t C = j.C;
  int32_t pdt = a->in[2].dtype;
  if (!bn_vec(&a->in[2], C, TORC_F32, j.dt) ||
      !bn_vec(&a->in[3], C, TORC_F32, TORC_F32) ||
      !bn_vec(&a->in[4], C, TORC_F32, TORC_F32) ||
      a->out[1].dtype != pdt || a->out[2].dtype != pdt ||
      !bn_vec(&a->out[1], C, pdt, pdt) || !bn_vec(&a->out[2], C, pdt, pdt))
    return TORC_KERNEL_DECLINED;
  int64_t per = j.N * j.S, grain = TORC_CPU_PAR_MIN / (per ? per : 1);
  if (C > 0)
    torc_cpu__parallel_for(a->n_threads, C, grain > 1 ? grain : 1,
                           bn_bwd_task, &j);
  return TORC_OK;
}

int torc_cpu__register_bnorm(const torc_host *host, torc_plugin *self) {
  static const struct {
    const char *op;
    torc_kernel_fn fn;
  } table[] = {{"batch_norm", k_batch_norm},
               {"batch_norm_backward", k_batch_norm_backward}};
  static const int32_t dtypes[] = {TORC_F32, TORC_BF16};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
      torc_kernel_reg reg = {
          .struct_size = sizeof reg,
          .device_type = "cpu",
          .op = table[i].op,
          .dtype = dtypes[d],
          .priority = BN_PRIORITY,
          .fn = table[i].fn,
          .data = NULL,
          .flags = TORC_KERNEL_CONTIGUOUS,
      };
      int st = host->register_kernel(self, &reg);
      if (st != TORC_OK)
        return st;
    }
  return TORC_OK;
}
