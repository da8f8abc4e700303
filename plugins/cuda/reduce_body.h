/* plugins/cuda/reduce_body.h — the combine and finalize steps of the cuda
 * plugin's reductions (sum, prod, mean, amax, amin) and softmax, in f32, as
 * inline functions callable from device code and from host C, so that
 * tests/test_cuda_reduce_bodies.c replays a block's order on the CPU.
 */
#ifndef TORC_CUDA_REDUCE_BODY_H
#define TORC_CUDA_REDUCE_BODY_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TORC_CUDA_RHD __host__ __device__
#else
#define TORC_CUDA_RHD
#endif

/* Every input dtype (f32, f16, bf16) is loaded to f32 and folded in f32;
 * the result is rounded once to the output's dtype. The order every
 * kernel of reduce.cu folds in: one block of
 * TORC_CUDA_R_BLOCK threads per output (or per softmax line); thread t
 * folds elements t, t + BLOCK, t + 2 BLOCK, ... of the reduced set (in
 * row-major order) into its accumulator, from the identity, with step();
 * then a tree in shared memory: for s = BLOCK/2, ..., 1, thread t < s
 * sets v[t] = step(v[t], v[t + s]). v[0] is the block's result. */
#define TORC_CUDA_R_BLOCK 256

enum {
  TORC_CUDA_R_SUM = 0,
  TORC_CUDA_R_PROD = 1,
  TORC_CUDA_R_MEAN = 2,
  TORC_CUDA_R_AMAX = 3,
  TORC_CUDA_R_AMIN = 4
};

/* The ops, for reduce.cu's kernels and registrations: X(name, id). */
#define TORC_CUDA_REDUCE_OPS(X)                                                \
  X(sum, TORC_CUDA_R_SUM) X(prod, TORC_CUDA_R_PROD)                            \
  X(mean, TORC_CUDA_R_MEAN) X(amax, TORC_CUDA_R_AMAX)                          \
  X(amin, TORC_CUDA_R_AMIN)

/* The accumulator's start: 0 for sums, 1 for products, -inf/+inf for the
 * extremes (an idle thread of a small reduction holds it; amax over an
 * empty set is rejected by the core before a kernel runs). */
TORC_CUDA_RHD static inline float torc_cuda_r_init(int op) {
  switch (op) {
  case TORC_CUDA_R_PROD: return 1.0f;
  case TORC_CUDA_R_AMAX: return -INFINITY;
  case TORC_CUDA_R_AMIN: return INFINITY;
  default: return 0.0f;
  }
}

/* One fold, for an element and for two partial results alike. The
 * extremes propagate NaN from either side, as ref's: once acc is NaN no
 * comparison replaces it, and a NaN x replaces acc. */
TORC_CUDA_RHD static inline float torc_cuda_r_step(int op, float acc,
                                                   float x) {
  switch (op) {
  case TORC_CUDA_R_PROD: return acc * x;
  case TORC_CUDA_R_AMAX: return (x != x || x > acc) ? x : acc;
  case TORC_CUDA_R_AMIN: return (x != x || x < acc) ? x : acc;
  default: return acc + x;
  }
}

/* The block's result as the output holds it: mean divides by the count
 * (0/0 = NaN over an empty set, as ref). */
TORC_CUDA_RHD static inline float torc_cuda_r_final(int op, float acc,
                                                    int64_t count) {
  return op == TORC_CUDA_R_MEAN ? acc / (float)count : acc;
}

/* ---- two-pass reductions: logsumexp, var, std, norm ---- */

/* Pass 1 folds first(x) with op1 (as above, a block's order); mid() turns
 * its result into what pass 2 needs (the maximum, the mean, max |x|);
 * when two_pass() says so, pass 2 sums second(x, mid) from 0 in the same
 * order; final() gives the output. As ref: NaN propagates, logsumexp of
 * an infinite maximum is that maximum, var divides by max(n - correction,
 * 0), the 2-norm is scaled by max |x| (so it neither overflows nor
 * underflows) and is max |x| itself when that is 0 or infinite. */
enum {
  TORC_CUDA_R2_LSE = 0,
  TORC_CUDA_R2_VAR = 1,
  TORC_CUDA_R2_STD = 2,
  TORC_CUDA_R2_NORM1 = 3,
  TORC_CUDA_R2_NORM2 = 4,
  TORC_CUDA_R2_NORMINF = 5
};

TORC_CUDA_RHD static inline int torc_cuda_r2_op1(int kind) {
  return kind == TORC_CUDA_R2_LSE || kind == TORC_CUDA_R2_NORM2 ||
                 kind == TORC_CUDA_R2_NORMINF
             ? TORC_CUDA_R_AMAX
             : TORC_CUDA_R_SUM;
}
TORC_CUDA_RHD static inline float torc_cuda_r2_first(int kind, float x) {
  return kind >= TORC_CUDA_R2_NORM1 ? fabsf(x) : x;
}
TORC_CUDA_RHD static inline float torc_cuda_r2_mid(int kind, float r1,
                                                   int64_t count) {
  return kind == TORC_CUDA_R2_VAR || kind == TORC_CUDA_R2_STD
             ? r1 / (float)count
             : r1;
}
TORC_CUDA_RHD static inline int torc_cuda_r2_two_pass(int kind, float mid) {
  switch (kind) {
  case TORC_CUDA_R2_VAR:
  case TORC_CUDA_R2_STD: return 1;
  case TORC_CUDA_R2_LSE: return !isinf(mid) && mid == mid;
  case TORC_CUDA_R2_NORM2: return mid != 0.0f && !isinf(mid) && mid == mid;
  default: return 0;
  }
}
TORC_CUDA_RHD static inline float torc_cuda_r2_second(int kind, float x,
                                                      float mid) {
  switch (kind) {
  case TORC_CUDA_R2_LSE: return expf(x - mid);
  case TORC_CUDA_R2_NORM2: {
    float q = x / mid;
    return q * q;
  }
  default: {
    float d = x - mid;
    return d * d;
  }
  }
}
/* r2 is pass 2's sum (unused when there was none); extra is var's and
 * std's correction. */
TORC_CUDA_RHD static inline float torc_cuda_r2_final(int kind, float mid,
                                                     float r2, int64_t count,
                                                     double extra) {
  double div = (double)count - extra;
  switch (kind) {
  case TORC_CUDA_R2_LSE:
    return torc_cuda_r2_two_pass(kind, mid) ? mid + logf(r2) : mid;
  case TORC_CUDA_R2_VAR: return r2 / (float)(div > 0 ? div : 0);
  case TORC_CUDA_R2_STD: return sqrtf(r2 / (float)(div > 0 ? div : 0));
  case TORC_CUDA_R2_NORM2:
    return torc_cuda_r2_two_pass(kind, mid) ? mid * sqrtf(r2) : mid;
  default: return mid; /* NORM1: the sum; NORMINF: the maximum */
  }
}

/* ---- max_dim / min_dim: the extreme and its index along a dim ---- */

/* A candidate: its value and index along the dim. Picking is a total
 * order, so any fold order gives ref's answer exactly: a NaN beats every
 * number (the first NaN wins), then the larger value (smaller for
 * min_dim), then the smaller index (the first of equal values, -0 and
 * +0 included). An idle thread holds index -1, which loses to any. */
typedef struct torc_cuda_arg {
  float v;
  int64_t i;
} torc_cuda_arg;

TORC_CUDA_RHD static inline torc_cuda_arg torc_cuda_arg_pick(torc_cuda_arg a,
                                                            torc_cuda_arg b,
                                                            int is_min) {
  if (a.i < 0)
    return b;
  if (b.i < 0)
    return a;
  int an = a.v != a.v, bn = b.v != b.v;
  if (an || bn) {
    if (an && bn)
      return a.i < b.i ? a : b;
    return an ? a : b;
  }
  if (a.v != b.v)
    return (is_min ? b.v < a.v : b.v > a.v) ? b : a;
  return a.i < b.i ? a : b;
}

/* ---- softmax and log_softmax along a dim: three passes over a line ---- */

/* Pass 1, the maximum (NaN propagates, as amax), from -inf. Pass 2, the
 * sum of e^(x - m), from 0, with torc_cuda_r_step(SUM). Pass 3, each
 * output. An infinite or NaN maximum makes every output NaN, as ref (it
 * subtracts the maximum anyway, as PyTorch). */
TORC_CUDA_RHD static inline float torc_cuda_sm_exp(float x, float m) {
  return expf(x - m);
}
TORC_CUDA_RHD static inline float torc_cuda_sm_out(float x, float m, float s,
                                                   int log_form) {
  return log_form ? (x - m) - logf(s) : expf(x - m) / s;
}

#endif /* TORC_CUDA_REDUCE_BODY_H */
