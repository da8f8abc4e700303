/* plugins/cuda/reduce_body.h — the combine and finalize steps of the cuda
 * plugin's reductions (sum, prod, mean, amax, amin, the two-pass ones,
 * max_dim / min_dim) and softmax, in float, double and int64, as inline
 * functions callable from device code and from host C, so that
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

/* f32, f16 and bf16 are loaded to f32 and folded in f32, f64 in f64,
 * integers and bool in int64 (below); the result is rounded once to the
 * output's dtype. The order every
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

/* The floating bodies, once per accumulator type T (float: no suffix, for
 * f32/f16/bf16; double: suffix _d, for f64), with T's exp, log, sqrt and
 * fabs. Each is described where the family is stamped out below. */
#define TORC_CUDA_R_FLOAT_BODIES(T, SFX, EXP, LOG, SQRT, FABS)                 \
  /* The accumulator's start: 0 for sums, 1 for products, -inf/+inf for    \
   * the extremes (an idle thread of a small reduction holds it; amax     \
   * over an empty set is rejected by the core before a kernel runs). */  \
  TORC_CUDA_RHD static inline T torc_cuda_r_init##SFX(int op) {                \
    switch (op) {                                                              \
    case TORC_CUDA_R_PROD: return (T)1;                                        \
    case TORC_CUDA_R_AMAX: return -(T)INFINITY;                                \
    case TORC_CUDA_R_AMIN: return (T)INFINITY;                                 \
    default: return (T)0;                                                      \
    }                                                                          \
  }                                                                            \
  /* One fold, for an element and for two partial results alike. The       \
   * extremes propagate NaN from either side, as ref's: once acc is NaN no  \
   * comparison replaces it, and a NaN x replaces acc. */                   \
  TORC_CUDA_RHD static inline T torc_cuda_r_step##SFX(int op, T acc, T x) {    \
    switch (op) {                                                              \
    case TORC_CUDA_R_PROD: return acc * x;                                     \
    case TORC_CUDA_R_AMAX: return (x != x || x > acc) ? x : acc;               \
    case TORC_CUDA_R_AMIN: return (x != x || x < acc) ? x : acc;               \
    default: return acc + x;                                                   \
    }                                                                          \
  }                                                                            \
  /* The block's result as the output holds it: mean divides by the count \
   * (0/0 = NaN over an empty set, as ref). */                              \
  TORC_CUDA_RHD static inline T torc_cuda_r_final##SFX(int op, T acc,          \
                                                       int64_t count) {        \
    return op == TORC_CUDA_R_MEAN ? acc / (T)count : acc;                      \
  }                                                                            \
  /* Two-pass steps: see the enum above. */                                 \
  TORC_CUDA_RHD static inline T torc_cuda_r2_first##SFX(int kind, T x) {       \
    return kind >= TORC_CUDA_R2_NORM1 ? FABS(x) : x;                           \
  }                                                                            \
  TORC_CUDA_RHD static inline T torc_cuda_r2_mid##SFX(int kind, T r1,          \
                                                      int64_t count) {         \
    return kind == TORC_CUDA_R2_VAR || kind == TORC_CUDA_R2_STD                \
               ? r1 / (T)count                                                 \
               : r1;                                                           \
  }                                                                            \
  TORC_CUDA_RHD static inline int torc_cuda_r2_two_pass##SFX(int kind,         \
                                                             T mid) {          \
    switch (kind) {                                                            \
    case TORC_CUDA_R2_VAR:                                                     \
    case TORC_CUDA_R2_STD: return 1;                                           \
    case TORC_CUDA_R2_LSE: return !isinf(mid) && mid == mid;                   \
    case TORC_CUDA_R2_NORM2:                                                   \
      return mid != (T)0 && !isinf(mid) && mid == mid;                         \
    default: return 0;                                                         \
    }                                                                          \
  }                                                                            \
  TORC_CUDA_RHD static inline T torc_cuda_r2_second##SFX(int kind, T x,        \
                                                         T mid) {              \
    switch (kind) {                                                            \
    case TORC_CUDA_R2_LSE: return EXP(x - mid);                                \
    case TORC_CUDA_R2_NORM2: {                                                 \
      T q = x / mid;                                                           \
      return q * q;                                                            \
    }                                                                          \
    default: {                                                                 \
      T d = x - mid;                                                           \
      return d * d;                                                            \
    }                                                                          \
    }                                                                          \
  }                                                                            \
  /* r2 is pass 2's sum (unused when there was none); extra is var's and  \
   * std's correction. */                                                   \
  TORC_CUDA_RHD static inline T torc_cuda_r2_final##SFX(                       \
      int kind, T mid, T r2, int64_t count, double extra) {                    \
    double div = (double)count - extra;                                        \
    switch (kind) {                                                            \
    case TORC_CUDA_R2_LSE:                                                     \
      return torc_cuda_r2_two_pass##SFX(kind, mid) ? mid + LOG(r2) : mid;      \
    case TORC_CUDA_R2_VAR: return r2 / (T)(div > 0 ? div : 0);                 \
    case TORC_CUDA_R2_STD: return SQRT(r2 / (T)(div > 0 ? div : 0));           \
    case TORC_CUDA_R2_NORM2:                                                   \
      return torc_cuda_r2_two_pass##SFX(kind, mid) ? mid * SQRT(r2) : mid;     \
    default: return mid; /* NORM1: the sum; NORMINF: the maximum */           \
    }                                                                          \
  }                                                                            \
  /* max_dim / min_dim's candidate and pick: see below. */                  \
  typedef struct torc_cuda_arg##SFX {                                          \
    T v;                                                                       \
    int64_t i;                                                                 \
  } torc_cuda_arg##SFX;                                                        \
  TORC_CUDA_RHD static inline torc_cuda_arg##SFX torc_cuda_arg_pick##SFX(      \
      torc_cuda_arg##SFX a, torc_cuda_arg##SFX b, int is_min) {                \
    if (a.i < 0)                                                               \
      return b;                                                                \
    if (b.i < 0)                                                               \
      return a;                                                                \
    int an = a.v != a.v, bn = b.v != b.v;                                      \
    if (an || bn) {                                                            \
      if (an && bn)                                                            \
        return a.i < b.i ? a : b;                                              \
      return an ? a : b;                                                       \
    }                                                                          \
    if (a.v != b.v)                                                            \
      return (is_min ? b.v < a.v : b.v > a.v) ? b : a;                         \
    return a.i < b.i ? a : b;                                                  \
  }                                                                            \
  /* softmax's e^(x - m) and its output: see below. */                      \
  TORC_CUDA_RHD static inline T torc_cuda_sm_exp##SFX(T x, T m) {              \
    return EXP(x - m);                                                         \
  }                                                                            \
  TORC_CUDA_RHD static inline T torc_cuda_sm_out##SFX(T x, T m, T s,           \
                                                      int log_form) {          \
    return log_form ? (x - m) - LOG(s) : EXP(x - m) / s;                       \
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

/* Pass 1's op: the maximum for logsumexp and the 2- and inf-norms, else
 * the sum. */
TORC_CUDA_RHD static inline int torc_cuda_r2_op1(int kind) {
  return kind == TORC_CUDA_R2_LSE || kind == TORC_CUDA_R2_NORM2 ||
                 kind == TORC_CUDA_R2_NORMINF
             ? TORC_CUDA_R_AMAX
             : TORC_CUDA_R_SUM;
}

/* ---- max_dim / min_dim: the extreme and its index along a dim ---- */

/* A candidate: its value and index along the dim. Picking is a total
 * order, so any fold order gives ref's answer exactly: a NaN beats every
 * number (the first NaN wins), then the larger value (smaller for
 * min_dim), then the smaller index (the first of equal values, -0 and
 * +0 included). An idle thread holds index -1, which loses to any. */

/* ---- softmax and log_softmax along a dim: three passes over a line ---- */

/* Pass 1, the maximum (NaN propagates, as amax), from -inf. Pass 2, the
 * sum of e^(x - m), from 0, with torc_cuda_r_step(SUM). Pass 3, each
 * output. An infinite or NaN maximum makes every output NaN, as ref (it
 * subtracts the maximum anyway, as PyTorch). */

/* f32, f16, bf16 fold in float; f64 folds in double. */
TORC_CUDA_R_FLOAT_BODIES(float, , expf, logf, sqrtf, fabsf)
TORC_CUDA_R_FLOAT_BODIES(double, _d, exp, log, sqrt, fabs)

/* ---- integers and bool: exact, in int64 ---- */

/* i32, i64, u8 and bool load to int64 (bool as 0 or 1, any nonzero byte
 * being true, as ref) and fold in int64: sums and products wrap (done in
 * uint64, so no signed overflow), the extremes compare exactly, so every
 * fold order gives ref's result bit for bit. The result is written to
 * the output's dtype keeping its low bits (bool: nonzero), as ref. The
 * start: 0, 1, INT64_MIN for amax (bool: any), INT64_MAX for amin (bool:
 * all). mean and the two-pass ops take floats only. */
TORC_CUDA_RHD static inline int64_t torc_cuda_r_init_i(int op) {
  switch (op) {
  case TORC_CUDA_R_PROD: return 1;
  case TORC_CUDA_R_AMAX: return INT64_MIN;
  case TORC_CUDA_R_AMIN: return INT64_MAX;
  default: return 0;
  }
}

/* One exact fold, for an element and two partial results alike. */
TORC_CUDA_RHD static inline int64_t torc_cuda_r_step_i(int op, int64_t acc,
                                                       int64_t x) {
  switch (op) {
  case TORC_CUDA_R_PROD: return (int64_t)((uint64_t)acc * (uint64_t)x);
  case TORC_CUDA_R_AMAX: return x > acc ? x : acc;
  case TORC_CUDA_R_AMIN: return x < acc ? x : acc;
  default: return (int64_t)((uint64_t)acc + (uint64_t)x);
  }
}

/* max_dim / min_dim over integers: the larger (smaller) value, then the
 * first index; an idle thread holds index -1. */
typedef struct torc_cuda_arg_i {
  int64_t v;
  int64_t i;
} torc_cuda_arg_i;

TORC_CUDA_RHD static inline torc_cuda_arg_i
torc_cuda_arg_pick_i(torc_cuda_arg_i a, torc_cuda_arg_i b, int is_min) {
  if (a.i < 0)
    return b;
  if (b.i < 0)
    return a;
  if (a.v != b.v)
    return (is_min ? b.v < a.v : b.v > a.v) ? b : a;
  return a.i < b.i ? a : b;
}

#endif /* TORC_CUDA_REDUCE_BODY_H */
