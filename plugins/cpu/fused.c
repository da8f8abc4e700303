/* plugins/cpu/fused.c — fast f32/f64 kernels of the fused ops:
 * "cross_entropy" and "cross_entropy_backward" (torc/nn.h) and the
 * optimizer steps "sgd_step_" and "adam_step_" (torc/optim.h), each one
 * pass over contiguous memory, split across the pool when large.
 *
 * The optimizer steps evaluate the float operations of ref's kernels (and
 * of the elementwise ops those replace) in the same order, each rounded to
 * the dtype, so they give the same bits: this file must not contract a * b
 * + c into an FMA (one rounding instead of two), hence fp-contract=off
 * below whatever flags it is built with. sqrt and the four operations are
 * correctly rounded in float as in double-then-float, so computing in the
 * dtype itself matches ref's double-then-round. The flag combinations are
 * specialised (always-inline bodies called with constants) so that each
 * loop is branch-free and vectorises (vect-cost-model=dynamic below: at
 * -O2 GCC 12 vectorises only loops of a known trip count;
 * no-trapping-math lets it turn amsgrad's NaN-aware max into blends; it
 * changes no value); Adam's square roots go through SSE2 (sqrtf is a libm
 * call per element unless built with -fno-math-errno).
 *
 * cross_entropy works in the dtype with expf/exp, accumulating each row's
 * sum of exponentials and the reduction in double.
 */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off", "vect-cost-model=dynamic", \
                     "no-trapping-math")
#endif

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cpu_internal.h"
#include "torc/nn.h"
#include "torc/optim.h"

#define FZ_INLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------------------
 * SGD
 * ---------------------------------------------------------------------- */

typedef struct sgd_job {
  int32_t dt;
  void *w, *b;
  const void *g;
  double gs, wd, mom, damp, alr; /* gs: -1 to maximize, else 1 */
  int has_wd, mode, nesterov;    /* mode: 0 no momentum, 1 first, 2 next */
} sgd_job;

/* One body per dtype T; the flags are constants at each call. Multiplying
 * by gs = +-1 is exact, as negation. */
#define SGD_BODY(T, SFX)                                                       \
  FZ_INLINE void sgd_run_##SFX(int64_t lo, int64_t hi, T *restrict w,          \
                               const T *restrict g, T *restrict b, T gs, T wd, \
                               T mom, T damp, T alr, int has_wd, int mode,     \
                               int nesterov) {                                 \
    for (int64_t i = lo; i < hi; i++) {                                        \
      T d = g[i] * gs;                                                         \
      if (has_wd)                                                              \
        d = d + wd * w[i];                                                     \
      if (mode) {                                                              \
        T bv = mode == 1 ? d : b[i] * mom + damp * d;                          \
        b[i] = bv;                                                             \
        d = nesterov ? d + mom * bv : bv;                                      \
      }                                                                        \
      w[i] = w[i] + alr * d;                                                   \
    }                                                                          \
  }                                                                            \
  static void sgd_span_##SFX(const sgd_job *j, int64_t lo, int64_t hi) {       \
    T *w = j->w, *b = j->b;                                                    \
    const T *g = j->g;                                                         \
    T gs = (T)j->gs, wd = (T)j->wd, mom = (T)j->mom, damp = (T)j->damp;        \
    T alr = (T)j->alr;                                                         \
    switch (j->has_wd | j->mode << 1 | j->nesterov << 3) {                     \
    SGD_CASES(SFX)                                                             \
    default:                                                                   \
      sgd_run_##SFX(lo, hi, w, g, b, gs, wd, mom, damp, alr, j->has_wd,        \
                    j->mode, j->nesterov);                                     \
    }                                                                          \
  }

#define SGD_CASE(SFX, WD, MODE, NES)                                           \
  case WD | MODE << 1 | NES << 3:                                              \
    sgd_run_##SFX(lo, hi, w, g, b, gs, wd, mom, damp, alr, WD, MODE, NES);     \
    break;
#define SGD_CASES(SFX)                                                         \
  SGD_CASE(SFX, 0, 0, 0) SGD_CASE(SFX, 1, 0, 0) SGD_CASE(SFX, 0, 1, 0)         \
  SGD_CASE(SFX, 1, 1, 0) SGD_CASE(SFX, 0, 2, 0) SGD_CASE(SFX, 1, 2, 0)         \
  SGD_CASE(SFX, 0, 1, 1) SGD_CASE(SFX, 1, 1, 1) SGD_CASE(SFX, 0, 2, 1)         \
  SGD_CASE(SFX, 1, 2, 1)

SGD_BODY(float, f32)
SGD_BODY(double, f64)

static void sgd_task(void *ctx, int64_t lo, int64_t hi) {
  const sgd_job *j = ctx;
  if (j->dt == TORC_F64)
    sgd_span_f64(j, lo, hi);
  else
    sgd_span_f32(j, lo, hi);
}

/* Checks a step's operands: one input, n_out outputs of one numel, f32 or
 * f64; returns the numel through *n. */
static int step_check(const torc_kernel_args *a, int n_out, int64_t *n) {
  if (a->n_in != 1 || a->n_out != n_out)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel '%s': expected 1 input and %d "
                               "outputs, got %d and %d",
                               a->op, n_out, (int)a->n_in, (int)a->n_out);
  int64_t m = 1;
  for (int d = 0; d < a->out[0].ndim; d++)
    m *= a->out[0].shape[d];
  for (int i = 0; i <= n_out; i++) {
    const torc_ktensor *t = i < n_out ? &a->out[i] : &a->in[0];
    int64_t k = 1;
    for (int d = 0; d < t->ndim; d++)
      k *= t->shape[d];
    if (k != m || t->dtype != a->out[0].dtype)
      return torc_cpu__set_error(TORC_ERR_INTERNAL,
                                 "cpu kernel '%s': operands differ in size "
                                 "or dtype",
                                 a->op);
  }
  *n = m;
  return TORC_OK;
}

static int k_sgd_step(const torc_kernel_args *a) {
  const torc_sgd_step_params *p = a->params;
  if (p == NULL || a->params_size < sizeof *p)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel 'sgd_step_': missing params");
  int has_mom = p->momentum != 0;
  int64_t n;
  int st = step_check(a, has_mom ? 2 : 1, &n);
  if (st)
    return st;
  sgd_job j = {
      .dt = a->out[0].dtype,
      .w = cpu_ptr(&a->out[0], 0),
      .b = has_mom ? cpu_ptr(&a->out[1], 0) : NULL,
      .g = cpu_ptr(&a->in[0], 0),
      .gs = p->maximize ? -1.0 : 1.0,
      .wd = p->weight_decay,
      .mom = p->momentum,
      .damp = 1 - p->dampening,
      .alr = -p->lr,
      .has_wd = p->weight_decay != 0,
      .mode = has_mom ? (p->first_step ? 1 : 2) : 0,
      .nesterov = has_mom && p->nesterov,
  };
  torc_cpu__parallel_for(a->n_threads, n, TORC_CPU_PAR_MIN / 2, sgd_task, &j);
  return TORC_OK;
}

/* ------------------------------------------------------------------------
 * Adam, AdamW
 * ---------------------------------------------------------------------- */

typedef struct adam_job {
  int32_t dt;
  void *w, *m, *v, *vm;
  const void *g;
  double gs, b1, omb1, b2, omb2, wd, decay, bc2s, eps, nss;
  int wd_mode, amsgrad; /* wd_mode: 0 none, 1 L2 on the gradient, 2 AdamW */
} adam_job;

/* sqrt of n elements in place, correctly rounded (the same bits as
 * sqrtf/sqrt): SSE2's sqrtps/sqrtpd on x86-64, where the compiler leaves
 * a libm call per element (errno) unless built with -fno-math-errno. */
static void sqrt_f32(float *x, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i + 4 <= n; i += 4)
    _mm_storeu_ps(x + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
  for (; i < n; i++)
    x[i] = sqrtf(x[i]);
}

static void sqrt_f64(double *x, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i + 2 <= n; i += 2)
    _mm_storeu_pd(x + i, _mm_sqrt_pd(_mm_loadu_pd(x + i)));
#endif
  for (; i < n; i++)
    x[i] = sqrt(x[i]);
}

/* Elements per block: the moments' pass, the square roots, the update. */
enum { ADAM_BLOCK = 256 };

/* One body per dtype; each block runs three loops so that the two around
 * the square roots vectorise. */
#define ADAM_BODY(T, SFX)                                                      \
  FZ_INLINE void adam_run_##SFX(int64_t lo, int64_t hi, const adam_job *j,     \
                                int wd_mode, int ams) {                        \
    T *restrict w = j->w, *restrict m = j->m, *restrict v = j->v;              \
    T *restrict vm = j->vm;                                                    \
    const T *restrict g = j->g;                                                \
    T gs = (T)j->gs, b1 = (T)j->b1, omb1 = (T)j->omb1, b2 = (T)j->b2;          \
    T omb2 = (T)j->omb2, wd = (T)j->wd, decay = (T)j->decay;                   \
    T bc2s = (T)j->bc2s, eps = (T)j->eps, nss = (T)j->nss;                     \
    T root[ADAM_BLOCK];                                                        \
    for (int64_t b0 = lo; b0 < hi; b0 += ADAM_BLOCK) {                         \
      int64_t nb = hi - b0 < ADAM_BLOCK ? hi - b0 : ADAM_BLOCK;                \
      for (int64_t k = 0; k < nb; k++) {                                       \
        int64_t i = b0 + k;                                                    \
        T gi = g[i] * gs;                                                      \
        if (wd_mode == 1)                                                      \
          gi = gi + wd * w[i];                                                 \
        T mv = m[i] * b1 + omb1 * gi;                                          \
        T vv = v[i] * b2 + (omb2 * gi) * gi;                                   \
        m[i] = mv;                                                             \
        v[i] = vv;                                                             \
        if (ams) {                                                             \
          /* quiet comparisons (no FE_INVALID): they vectorise */              \
          T x = vm[i], hi_ = __builtin_isgreater(x, vv) ? x : vv;              \
          x = __builtin_isunordered(x, vv) ? x + vv : hi_;                     \
          vm[i] = x;                                                           \
          vv = x;                                                              \
        }                                                                      \
        root[k] = vv;                                                          \
      }                                                                        \
      sqrt_##SFX(root, nb);                                                    \
      for (int64_t k = 0; k < nb; k++) {                                       \
        int64_t i = b0 + k;                                                    \
        T pv = wd_mode == 2 ? w[i] * decay : w[i];                             \
        T den = root[k] / bc2s + eps;                                          \
        w[i] = pv + (nss * m[i]) / den;                                        \
      }                                                                        \
    }                                                                          \
  }                                                                            \
  static void adam_span_##SFX(const adam_job *j, int64_t lo, int64_t hi) {     \
    switch (j->wd_mode | j->amsgrad << 2) {                                    \
    case 0: adam_run_##SFX(lo, hi, j, 0, 0); break;                            \
    case 1: adam_run_##SFX(lo, hi, j, 1, 0); break;                            \
    case 2: adam_run_##SFX(lo, hi, j, 2, 0); break;                            \
    case 4: adam_run_##SFX(lo, hi, j, 0, 1); break;                            \
    case 5: adam_run_##SFX(lo, hi, j, 1, 1); break;                            \
    default: adam_run_##SFX(lo, hi, j, 2, 1); break;                           \
    }                                                                          \
  }

ADAM_BODY(float, f32)
ADAM_BODY(double, f64)

static void adam_task(void *ctx, int64_t lo, int64_t hi) {
  const adam_job *j = ctx;
  if (j->dt == TORC_F64)
    adam_span_f64(j, lo, hi);
  else
    adam_span_f32(j, lo, hi);
}

static int k_adam_step(const torc_kernel_args *a) {
  const torc_adam_step_kparams *k = a->params;
  if (k == NULL || a->params_size < sizeof *k)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel 'adam_step_': missing params");
  const torc_adam_step_params *p = &k->p;
  int64_t n;
  int st = step_check(a, p->amsgrad ? 4 : 3, &n);
  if (st)
    return st;
  adam_job j = {
      .dt = a->out[0].dtype,
      .w = cpu_ptr(&a->out[0], 0),
      .m = cpu_ptr(&a->out[1], 0),
      .v = cpu_ptr(&a->out[2], 0),
      .vm = p->amsgrad ? cpu_ptr(&a->out[3], 0) : NULL,
      .g = cpu_ptr(&a->in[0], 0),
      .gs = p->maximize ? -1.0 : 1.0,
      .b1 = p->beta1,
      .omb1 = 1 - p->beta1,
      .b2 = p->beta2,
      .omb2 = 1 - p->beta2,
      .wd = p->weight_decay,
      .decay = 1 - p->lr * p->weight_decay,
      .bc2s = k->bias_correction2_sqrt,
      .eps = p->eps,
      .nss = -k->step_size,
      .wd_mode = p->decoupled ? 2 : p->weight_decay != 0 ? 1 : 0,
      .amsgrad = p->amsgrad != 0,
  };
  torc_cpu__parallel_for(a->n_threads, n, TORC_CPU_PAR_MIN / 2, adam_task,
                         &j);
  return TORC_OK;
}

/* ------------------------------------------------------------------------
 * cross_entropy
 * ---------------------------------------------------------------------- */

typedef struct ce_job {
  const torc_cross_entropy_params *p;
  int32_t dt;
  int64_t N, C, S;
  double W;                /* sum of the class weights (C without) */
  const void *x, *w;       /* logits [N, C, S], weight [C] or NULL */
  const int64_t *t;        /* target [N, S] */
  void *mx, *ls;           /* row max, logsum [N, S]: the stats dtype */
  double *row;             /* forward: each row's loss */
  const void *gy;          /* backward: [] or [N, S] */
  double g0;               /* backward: the scalar gradient (reduced) */
  void *gx;
  _Atomic int64_t bad;     /* first out-of-range row + 1, or 0 */
} ce_job;

/* Class weight c (1 without weights) in double. */
static inline double ce_w(const ce_job *j, int64_t c) {
  if (j->w == NULL)
    return 1;
  return j->dt == TORC_F64 ? ((const double *)j->w)[c]
                           : ((const float *)j->w)[c];
}

/* Rows [lo, hi) of the forward: lse and each row's loss. */
#define CE_FWD(T, SFX, EXP)                                               \
  static void ce_fwd_##SFX(ce_job *j, int64_t lo, int64_t hi) {                \
    const T *x = j->x;                                                         \
    T *mx = j->mx, *lsum = j->ls;                                              \
    int64_t C = j->C, S = j->S;                                                \
    double eps = j->p->label_smoothing;                                        \
    for (int64_t r = lo; r < hi; r++) {                                        \
      const T *xr = x + (r / S) * C * S + r % S;                               \
      T m = -INFINITY;                                                         \
      for (int64_t c = 0; c < C; c++) {                                        \
        T v = xr[c * S];                                                       \
        m = v > m || v != v ? v : m;                                           \
      }                                                                        \
      double ls = 0; /* -inf rows: logsum 0; NaN, +inf: NaN */               \
      if (m == m && !isinf(m)) {                                               \
        double e = 0;                                                          \
        for (int64_t c = 0; c < C; c++)                                        \
          e += (double)EXP(xr[c * S] - m);                                     \
        ls = log(e);                                                           \
      } else if (m == m && m > 0) {                                            \
        ls = NAN;                                                              \
      }                                                                        \
      mx[r] = m;                                                               \
      lsum[r] = (T)ls;                                                         \
      int64_t k = j->t[r];                                                     \
      double val = 0;                                                          \
      if (k != j->p->ignore_index) {                                           \
        if (k < 0 || k >= C) {                                                 \
          int64_t z = 0;                                                       \
          atomic_compare_exchange_strong(&j->bad, &z, r + 1);                  \
          continue;                                                            \
        }                                                                      \
        double wt = ce_w(j, k);                                                \
        val = -wt * (((double)xr[k * S] - m) - ls);                            \
        if (eps > 0) {                                                         \
          double sm = 0;                                                       \
          for (int64_t c = 0; c < C; c++)                                      \
            sm -= ce_w(j, c) * (((double)xr[c * S] - m) - ls);                 \
          val = (1 - eps) * val + eps / (double)C * sm;                        \
        }                                                                      \
      }                                                                        \
      j->row[r] = val;                                                         \
    }                                                                          \
  }

/* Rows [lo, hi) of the backward. */
#define CE_BWD(T, SFX, EXP)                                                    \
  static void ce_bwd_##SFX(ce_job *j, int64_t lo, int64_t hi) {                \
    const T *x = j->x, *mx = j->mx, *lsum = j->ls, *gy = j->gy;                \
    T *gx = j->gx;                                                             \
    int64_t C = j->C, S = j->S;                                                \
    double eps = j->p->label_smoothing;                                        \
    int none = j->p->reduction == TORC_REDUCTION_NONE;                         \
    for (int64_t r = lo; r < hi; r++) {                                        \
      int64_t off = (r / S) * C * S + r % S;                                   \
      const T *xr = x + off;                                                   \
      T *gr = gx + off;                                                        \
      int64_t k = j->t[r];                                                     \
      if (k == j->p->ignore_index) {                                           \
        for (int64_t c = 0; c < C; c++)                                        \
          gr[c * S] = 0;                                                       \
        continue;                                                              \
      }                                                                        \
      double g = none ? (double)gy[r] : j->g0, wt = ce_w(j, k);                \
      /* gx_c = g ((1 - eps) wt (p_c - [c = k]) + eps / C (W p_c - w_c)) */  \
      T ca = (T)(g * ((1 - eps) * wt + eps / (double)C * j->W));               \
      T cb = (T)(g * (1 - eps) * wt), cc = (T)(g * eps / (double)C);           \
      T m = mx[r], l = lsum[r];                                                \
      if (j->w == NULL && S == 1) {                                            \
        for (int64_t c = 0; c < C; c++)                                        \
          gr[c] = ca * EXP((xr[c] - m) - l) - cc;                              \
      } else {                                                                 \
        for (int64_t c = 0; c < C; c++)                                        \
          gr[c * S] = ca * EXP((xr[c * S] - m) - l) - cc * (T)ce_w(j, c);      \
      }                                                                        \
      gr[k * S] -= cb;                                                         \
    }                                                                          \
  }

CE_FWD(float, f32, expf)
CE_FWD(double, f64, exp)
CE_BWD(float, f32, expf)
CE_BWD(double, f64, exp)

static void ce_fwd_task(void *ctx, int64_t lo, int64_t hi) {
  ce_job *j = ctx;
  if (j->dt == TORC_F64)
    ce_fwd_f64(j, lo, hi);
  else
    ce_fwd_f32(j, lo, hi);
}

static void ce_bwd_task(void *ctx, int64_t lo, int64_t hi) {
  ce_job *j = ctx;
  if (j->dt == TORC_F64)
    ce_bwd_f64(j, lo, hi);
  else
    ce_bwd_f32(j, lo, hi);
}

/* Fills the job's geometry from x (a->in[xi]) and the weight (present when
 * n_in is n_fixed + 1). */
static int ce_setup(const torc_kernel_args *a, int n_fixed, int n_out,
                    int xi, ce_job *j) {
  memset(j, 0, sizeof *j);
  atomic_init(&j->bad, 0);
  j->p = a->params;
  if (j->p == NULL || a->params_size < sizeof *j->p ||
      (a->n_in != n_fixed && a->n_in != n_fixed + 1) || a->n_out != n_out ||
      a->in[xi].ndim != 3)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel '%s': bad arguments (%d inputs, "
                               "%d outputs)",
                               a->op, (int)a->n_in, (int)a->n_out);
  const torc_ktensor *x = &a->in[xi];
  j->dt = x->dtype;
  j->N = x->shape[0], j->C = x->shape[1], j->S = x->shape[2];
  j->x = cpu_ptr(x, 0);
  j->t = (const int64_t *)a->in[xi + 1].data + a->in[xi + 1].offset;
  j->w = a->n_in == n_fixed + 1 ? cpu_ptr(&a->in[n_fixed], 0) : NULL;
  j->W = (double)j->C;
  if (j->w) {
    j->W = 0;
    for (int64_t c = 0; c < j->C; c++)
      j->W += ce_w(j, c);
  }
  return TORC_OK;
}

/* The grain of a row loop: about TORC_CPU_PAR_MIN elements a slice. */
static int64_t ce_grain(const ce_job *j) {
  int64_t per = j->C > 0 ? j->C : 1;
  return TORC_CPU_PAR_MIN / per > 1 ? TORC_CPU_PAR_MIN / per : 1;
}

/* Stores v into element i of an f32/f64 tensor. */
static void ce_store(const torc_ktensor *t, int64_t i, double v) {
  if (t->dtype == TORC_F64)
    *(double *)cpu_ptr(t, i) = v;
  else
    *(float *)cpu_ptr(t, i) = (float)v;
}

static int k_cross_entropy(const torc_kernel_args *a) {
  ce_job j;
  int st = ce_setup(a, 2, 4, 0, &j);
  if (st)
    return st;
  int64_t R = j.N * j.S;
  j.mx = cpu_ptr(&a->out[1], 0);
  j.ls = cpu_ptr(&a->out[2], 0);
  j.row = malloc(sizeof(double) * (size_t)(R ? R : 1));
  if (j.row == NULL)
    return torc_cpu__set_error(TORC_ERR_OOM,
                               "cpu kernel 'cross_entropy': out of memory "
                               "for %lld row losses",
                               (long long)R);
  torc_cpu__parallel_for(a->n_threads, R, ce_grain(&j), ce_fwd_task, &j);
  int64_t bad = atomic_load(&j.bad);
  if (bad) {
    int64_t k = j.t[bad - 1];
    free(j.row);
    return torc_cpu__set_error(TORC_ERR_RANGE,
                               "cross_entropy: target %lld (element %lld) is "
                               "out of range for %lld classes",
                               (long long)k, (long long)(bad - 1),
                               (long long)j.C);
  }
  const torc_cross_entropy_params *p = j.p;
  double total = 0, wsum = 0;
  for (int64_t r = 0; r < R; r++) {
    total += j.row[r];
    if (j.t[r] != p->ignore_index)
      wsum += ce_w(&j, j.t[r]);
  }
  if (p->reduction == TORC_REDUCTION_NONE)
    for (int64_t r = 0; r < R; r++)
      ce_store(&a->out[0], r, j.row[r]);
  else
    ce_store(&a->out[0], 0,
             p->reduction == TORC_REDUCTION_MEAN ? total / wsum : total);
  ce_store(&a->out[3], 0, wsum);
  free(j.row);
  return TORC_OK;
}

static int k_cross_entropy_backward(const torc_kernel_args *a) {
  ce_job j;
  int st = ce_setup(a, 6, 1, 1, &j);
  if (st)
    return st;
  /* the statistics have the stats dtype: f64 for f64, else f32 */
  const torc_ktensor *tw = &a->in[5];
  double total = tw->dtype == TORC_F64 ? *(const double *)cpu_ptr(tw, 0)
                                       : *(const float *)cpu_ptr(tw, 0);
  j.mx = cpu_ptr(&a->in[3], 0);
  j.ls = cpu_ptr(&a->in[4], 0);
  j.gy = cpu_ptr(&a->in[0], 0);
  j.gx = cpu_ptr(&a->out[0], 0);
  if (j.p->reduction != TORC_REDUCTION_NONE) {
    j.g0 = j.dt == TORC_F64 ? *(const double *)j.gy : *(const float *)j.gy;
    if (j.p->reduction == TORC_REDUCTION_MEAN)
      j.g0 /= total;
  }
  torc_cpu__parallel_for(a->n_threads, j.N * j.S, ce_grain(&j), ce_bwd_task,
                         &j);
  return TORC_OK;
}

int torc_cpu__register_fused(const torc_host *host, torc_plugin *self) {
  static const torc_cpu_kernel fused_kernels[] = {
      {"cross_entropy", k_cross_entropy, TORC_KERNEL_CONTIGUOUS},
      {"cross_entropy_backward", k_cross_entropy_backward,
       TORC_KERNEL_CONTIGUOUS},
      {"sgd_step_", k_sgd_step, TORC_KERNEL_CONTIGUOUS},
      {"adam_step_", k_adam_step, TORC_KERNEL_CONTIGUOUS},
  };
  static const int32_t dtypes[] = {TORC_F32, TORC_F64};
  return torc_cpu__register_table(
      host, self, fused_kernels, sizeof fused_kernels / sizeof fused_kernels[0],
      dtypes, 2);
}
