/* plugins/cuda/optim_body.h — the per-element updates of the cuda plugin's
 * optimizer steps (sgd_step_, adam_step_ and their foreach forms) and the
 * chunking plan of its multi-tensor launches, as inline functions callable
 * from device code and from host C, so that tests/test_cuda_nn_bodies.c
 * checks them against the ref kernels on the CPU.
 *
 * The updates follow ref's (and the composed elementwise ops') exact order
 * of operations, every intermediate rounded to the parameter's dtype: the
 * f32, f16 and bf16 forms compute each operation in f32, correctly rounded
 * (on the device __fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn, which nvcc
 * never contracts into a fused multiply-add), then round to f16 or bf16;
 * the f64 form the same in f64. Since f32 holds every product and sum of
 * two f16 or bf16 values to within one rounding that the final rounding
 * does not disturb, this gives ref's bits in every dtype.
 */
#ifndef TORC_CUDA_OPTIM_BODY_H
#define TORC_CUDA_OPTIM_BODY_H

#include <stdint.h>
#include <string.h>

#include "torc/dtype.h"
#include "torc/optim.h"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define TORC_CUDA_OHD __host__ __device__
#else
#define TORC_CUDA_OHD
#endif

/* Correctly rounded operations that are never fused. */
#ifdef __CUDA_ARCH__
#define TORC_CUDA_FMUL(a, b) __fmul_rn(a, b)
#define TORC_CUDA_FADD(a, b) __fadd_rn(a, b)
#define TORC_CUDA_FDIV(a, b) __fdiv_rn(a, b)
#define TORC_CUDA_FSQRT(a) __fsqrt_rn(a)
#define TORC_CUDA_DMUL(a, b) __dmul_rn(a, b)
#define TORC_CUDA_DADD(a, b) __dadd_rn(a, b)
#define TORC_CUDA_DDIV(a, b) __ddiv_rn(a, b)
#define TORC_CUDA_DSQRT(a) __dsqrt_rn(a)
#else
#include <math.h>
#define TORC_CUDA_FMUL(a, b) ((float)((a) * (b)))
#define TORC_CUDA_FADD(a, b) ((float)((a) + (b)))
#define TORC_CUDA_FDIV(a, b) ((float)((a) / (b)))
#define TORC_CUDA_FSQRT(a) sqrtf(a)
#define TORC_CUDA_DMUL(a, b) ((double)((a) * (b)))
#define TORC_CUDA_DADD(a, b) ((double)((a) + (b)))
#define TORC_CUDA_DDIV(a, b) ((double)((a) / (b)))
#define TORC_CUDA_DSQRT(a) sqrt(a)
#endif

/* An f32 value rounded to dtype dt (f16, bf16; f32 as is). */
TORC_CUDA_OHD static inline float torc_cuda_o_round(int dt, float x) {
#ifdef __CUDA_ARCH__
  if (dt == TORC_F16)
    return __half2float(__float2half_rn(x));
  if (dt == TORC_BF16)
    return __bfloat162float(__float2bfloat16_rn(x));
  return x;
#else
  if (dt == TORC_F16)
    return torc_f16_to_f32(torc_f32_to_f16(x));
  if (dt == TORC_BF16)
    return torc_bf16_to_f32(torc_f32_to_bf16(x));
  return x;
#endif
}

/* A hyper-parameter as ref rounds it to the parameter's dtype (host). */
static inline double torc_cuda_o_scalar(int dt, double v) {
  switch (dt) {
  case TORC_F32: return (float)v;
  case TORC_F16: return torc_f16_to_f32(torc_f32_to_f16((float)v));
  case TORC_BF16: return torc_bf16_to_f32(torc_f32_to_bf16((float)v));
  default: return v;
  }
}

/* The scalars of one SGD step, rounded to the dtype (torc_cuda_o_scalar):
 * weight_decay, momentum, 1 - dampening, -lr; and its switches. */
typedef struct torc_cuda_sgd_k {
  double wd, mom, damp, alr;
  int32_t has_wd, has_buf, first_step, nesterov, maximize;
} torc_cuda_sgd_k;

/* The scalars of one Adam/AdamW step, rounded to the dtype: beta1,
 * 1 - beta1, beta2, 1 - beta2, weight_decay, 1 - lr * weight_decay,
 * sqrt(bc2), eps, -lr / bc1; and its switches. */
typedef struct torc_cuda_adam_k {
  double b1, omb1, b2, omb2, wd, decay, bc2s, eps, nss;
  int32_t has_wd, decoupled, amsgrad, maximize;
} torc_cuda_adam_k;

/* The kernel's scalars of an SGD step on a parameter of dtype dt (host). */
static inline torc_cuda_sgd_k
torc_cuda_sgd_k_of(int dt, const torc_sgd_step_params *p) {
  torc_cuda_sgd_k k;
  memset(&k, 0, sizeof k);
  k.wd = torc_cuda_o_scalar(dt, p->weight_decay);
  k.mom = torc_cuda_o_scalar(dt, p->momentum);
  k.damp = torc_cuda_o_scalar(dt, 1 - p->dampening);
  k.alr = torc_cuda_o_scalar(dt, -p->lr);
  k.has_wd = p->weight_decay != 0;
  k.has_buf = p->momentum != 0;
  k.first_step = p->first_step != 0;
  k.nesterov = p->nesterov != 0;
  k.maximize = p->maximize != 0;
  return k;
}

/* The kernel's scalars of an Adam/AdamW step (host). */
static inline torc_cuda_adam_k
torc_cuda_adam_k_of(int dt, const torc_adam_step_kparams *kp) {
  const torc_adam_step_params *p = &kp->p;
  torc_cuda_adam_k k;
  memset(&k, 0, sizeof k);
  k.b1 = torc_cuda_o_scalar(dt, p->beta1);
  k.omb1 = torc_cuda_o_scalar(dt, 1 - p->beta1);
  k.b2 = torc_cuda_o_scalar(dt, p->beta2);
  k.omb2 = torc_cuda_o_scalar(dt, 1 - p->beta2);
  k.wd = torc_cuda_o_scalar(dt, p->weight_decay);
  k.decay = torc_cuda_o_scalar(dt, 1 - p->lr * p->weight_decay);
  k.bc2s = torc_cuda_o_scalar(dt, kp->bias_correction2_sqrt);
  k.eps = torc_cuda_o_scalar(dt, p->eps);
  k.nss = torc_cuda_o_scalar(dt, -kp->step_size);
  k.has_wd = p->weight_decay != 0;
  k.decoupled = p->decoupled != 0;
  k.amsgrad = p->amsgrad != 0;
  k.maximize = p->maximize != 0;
  return k;
}

/* One set of updates over the computing type T: MUL, ADD, DIV, SQRT its
 * unfused operations, R(dt, x) the rounding to the dtype. */
#define TORC_CUDA_OPTIM_BODIES(T, sfx, MUL, ADD, DIV, SQRT, R)                 \
  /* SGD on one element: returns the new param; *buf (has_buf only) is the   \
   * momentum buffer, read and written. */                                    \
  TORC_CUDA_OHD static inline T torc_cuda_sgd_##sfx(                          \
      int dt, const torc_cuda_sgd_k *k, T p, T g, T *buf) {                    \
    T d = k->maximize ? -g : g;                                                \
    if (k->has_wd)                                                             \
      d = R(dt, ADD(d, R(dt, MUL((T)k->wd, p))));                              \
    if (k->has_buf) {                                                          \
      T b = d;                                                                 \
      if (!k->first_step)                                                      \
        b = R(dt, ADD(R(dt, MUL(*buf, (T)k->mom)),                             \
                      R(dt, MUL((T)k->damp, d))));                             \
      *buf = b;                                                                \
      d = k->nesterov ? R(dt, ADD(d, R(dt, MUL((T)k->mom, b)))) : b;           \
    }                                                                          \
    return R(dt, ADD(p, R(dt, MUL((T)k->alr, d))));                            \
  }                                                                            \
  /* Adam/AdamW on one element: returns the new param; *m, *v and (amsgrad)  \
   * *vmax are the moments, read and written. */                              \
  TORC_CUDA_OHD static inline T torc_cuda_adam_##sfx(                         \
      int dt, const torc_cuda_adam_k *k, T p, T g, T *m, T *v, T *vmax) {      \
    if (k->maximize)                                                           \
      g = -g;                                                                  \
    if (k->decoupled)                                                          \
      p = R(dt, MUL(p, (T)k->decay));                                          \
    else if (k->has_wd)                                                        \
      g = R(dt, ADD(g, R(dt, MUL((T)k->wd, p))));                              \
    T mm = R(dt, ADD(R(dt, MUL(*m, (T)k->b1)), R(dt, MUL((T)k->omb1, g))));    \
    T vv = R(dt, ADD(R(dt, MUL(*v, (T)k->b2)),                                 \
                     R(dt, MUL(R(dt, MUL((T)k->omb2, g)), g))));               \
    *m = mm;                                                                   \
    *v = vv;                                                                   \
    if (k->amsgrad) {                                                          \
      T vm = *vmax;                                                            \
      vm = vm != vm || vv != vv ? R(dt, ADD(vm, vv)) : vm > vv ? vm : vv;      \
      *vmax = vm;                                                              \
      vv = vm;                                                                 \
    }                                                                          \
    T den = R(dt, ADD(R(dt, DIV(R(dt, SQRT(vv)), (T)k->bc2s)), (T)k->eps));    \
    return R(dt, ADD(p, R(dt, DIV(R(dt, MUL((T)k->nss, mm)), den))));          \
  }

/* foreach_add_ and foreach_mul_ on one element: x + y and x * s, one
 * rounding to the dtype (the store's), as ref's add and mul. */
#define TORC_CUDA_FOREACH_BODIES(T, sfx, MUL, ADD, R)                          \
  TORC_CUDA_OHD static inline T torc_cuda_fe_add_##sfx(int dt, T x, T y) {    \
    return R(dt, ADD(x, y));                                                   \
  }                                                                            \
  TORC_CUDA_OHD static inline T torc_cuda_fe_mul_##sfx(int dt, T x, T s) {    \
    return R(dt, MUL(x, s));                                                   \
  }

#define TORC_CUDA_O_NOROUND(dt, x) ((void)(dt), (x))
TORC_CUDA_FOREACH_BODIES(float, f, TORC_CUDA_FMUL, TORC_CUDA_FADD,
                         torc_cuda_o_round)
TORC_CUDA_FOREACH_BODIES(double, d, TORC_CUDA_DMUL, TORC_CUDA_DADD,
                         TORC_CUDA_O_NOROUND)
TORC_CUDA_OPTIM_BODIES(float, f, TORC_CUDA_FMUL, TORC_CUDA_FADD,
                       TORC_CUDA_FDIV, TORC_CUDA_FSQRT, torc_cuda_o_round)
TORC_CUDA_OPTIM_BODIES(double, d, TORC_CUDA_DMUL, TORC_CUDA_DADD,
                       TORC_CUDA_DDIV, TORC_CUDA_DSQRT, TORC_CUDA_O_NOROUND)

/* ---- the multi-tensor launch plan ----
 * A list call covers its tensors in launches of at most max_entries
 * entries and max_blocks blocks; an entry is a run of whole chunks of one
 * tensor (chunk elements each, the last one shorter), so a tensor larger
 * than what is left of a launch continues in the next. Empty tensors take
 * no entry. Block b of a launch serves the entry e whose blocks
 * [bstart[e], bstart[e + 1]) hold b, and chunk chunk0[e] + b - bstart[e]
 * of its tensor. */
typedef struct torc_cuda_mt_entry {
  int32_t tensor;  /* index in the list */
  int64_t chunk0;  /* its first chunk */
  int64_t nchunks; /* how many */
} torc_cuda_mt_entry;

/* The chunks of a tensor of n elements. */
TORC_CUDA_OHD static inline int64_t torc_cuda_mt_chunks(int64_t n,
                                                        int64_t chunk) {
  return (n + chunk - 1) / chunk;
}

/* Fills out[] with the next launch's entries, from the cursor (*ct, the
 * tensor; *cc, its next chunk; both 0 at the start), and advances it;
 * returns how many (0: the list is done). */
static inline int torc_cuda_mt_next(const int64_t *numel, int n,
                                    int64_t chunk, int max_entries,
                                    int64_t max_blocks, int *ct, int64_t *cc,
                                    torc_cuda_mt_entry *out) {
  int ne = 0;
  int64_t blocks = 0;
  while (*ct < n && ne < max_entries && blocks < max_blocks) {
    int64_t total = torc_cuda_mt_chunks(numel[*ct], chunk);
    if (*cc >= total) { /* empty, or done */
      (*ct)++;
      *cc = 0;
      continue;
    }
    int64_t take = total - *cc;
    if (take > max_blocks - blocks)
      take = max_blocks - blocks;
    out[ne].tensor = *ct;
    out[ne].chunk0 = *cc;
    out[ne].nchunks = take;
    ne++;
    blocks += take;
    *cc += take;
  }
  return ne;
}

/* The entry of block b: the last e with bstart[e] <= b (bstart ascending,
 * bstart[0] = 0, n entries). */
TORC_CUDA_OHD static inline int torc_cuda_mt_locate(const int32_t *bstart,
                                                    int n, int32_t b) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (bstart[mid] <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* ---- foreach_norm ----
 * Each chunk folds its elements in f64 (|x| for p = 1, x^2 for p = 2, max
 * |x| for p = inf, NaN propagating) into one partial; the partials of a
 * tensor then fold in chunk order. f64 tensors take p = 2 in two rounds,
 * as ref: first max |x| = m, then the sum of (x / m)^2 (so it neither
 * overflows nor underflows); the others sum x^2 directly (f64 holds the
 * square of every f32). */
enum { TORC_CUDA_FN_SUM = 0, TORC_CUDA_FN_MAX = 1 };

/* What an element adds: kind 1 (p = 1) |x|; 2 x^2, or (x / scale)^2 when
 * scale is not 0; 0 (inf, and f64's first round) |x|. */
TORC_CUDA_OHD static inline double torc_cuda_fn_term(int kind, double x,
                                                     double scale) {
  if (kind == 2) {
    double q = scale != 0 ? x / scale : x;
    return q * q;
  }
  return fabs(x);
}
/* The fold: a sum (kinds 1, 2), or the maximum with NaN winning (0). */
TORC_CUDA_OHD static inline double torc_cuda_fn_step(int kind, double acc,
                                                     double t) {
  if (kind == 0)
    return (t != t || t > acc) ? t : acc;
  return acc + t;
}
/* The norm from the tensor's folded value r: p = 2 takes its root (times
 * the scale m of f64's two rounds, m itself when 0, infinite or NaN). */
TORC_CUDA_OHD static inline double torc_cuda_fn_final(int kind, double r,
                                                      int scaled, double m) {
  if (kind != 2)
    return r;
  if (!scaled)
    return sqrt(r);
  if (m == 0 || m != m || m - m != 0)
    return m;
  return m * sqrt(r);
}

#endif /* TORC_CUDA_OPTIM_BODY_H */
