/* plugins/cuda/dnn_plan.h — how dnn.c maps the convolution ops onto cuDNN:
 * the geometry of a call (which tensor is the convolution's x, w and y,
 * checked against the output-size rule), the data, compute and math types
 * per dtype and [plugin.cuda] tf32, the algorithm-cache key and its
 * fixed-size table, and the policy that picks an algorithm from cuDNN's
 * ranked candidates (benchmark, deterministic). Plain C with no cuDNN
 * types (the cuDNN enum values it mirrors are checked in dnn.c), so that
 * tests/test_cuda_dnn_plan.c checks it on the CPU.
 */
#ifndef TORC_CUDA_DNN_PLAN_H
#define TORC_CUDA_DNN_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "torc/plugin.h"

/* The ops, as the cuDNN call each becomes. conv_transpose2d is the
 * backward-data call with its input in gy's place. */
enum {
  TORC_CUDA_CONV_FWD = 0,         /* conv2d: x, w -> y */
  TORC_CUDA_CONV_BWD_DATA = 1,    /* conv2d_backward_input: gy, w -> gx */
  TORC_CUDA_CONV_BWD_FILTER = 2,  /* conv2d_backward_weight: x, gy -> gw */
  TORC_CUDA_CONV_TRANSPOSE = 3    /* conv_transpose2d: as BWD_DATA */
};

/* cuDNN's cudnnMathType_t values (dnn.c checks they match). */
enum {
  TORC_CUDA_MATH_DEFAULT = 0,
  TORC_CUDA_MATH_TENSOR_OP = 1,
  TORC_CUDA_MATH_TENSOR_OP_ALLOW_CONVERSION = 2,
  TORC_CUDA_MATH_FMA = 3
};

/* The convolution a call computes, in the forward convolution's terms:
 * x [N, C, H, W], w [O, C/G, kH, kW], y [N, O, OH, OW]. */
typedef struct torc_cuda_conv_geo {
  int64_t N, C, H, W, O, kH, kW, OH, OW, G;
  int64_t stride[2], pad[2], dil[2];
} torc_cuda_conv_geo;

/* The op kind of an op name; -1 for another op. */
static inline int torc_cuda_conv_kind(const char *op) {
  if (strcmp(op, "conv2d") == 0)
    return TORC_CUDA_CONV_FWD;
  if (strcmp(op, "conv2d_backward_input") == 0)
    return TORC_CUDA_CONV_BWD_DATA;
  if (strcmp(op, "conv2d_backward_weight") == 0)
    return TORC_CUDA_CONV_BWD_FILTER;
  if (strcmp(op, "conv_transpose2d") == 0)
    return TORC_CUDA_CONV_TRANSPOSE;
  return -1;
}

/* The cuDNN call a kind becomes (transpose: backward data). */
static inline int torc_cuda_conv_call(int kind) {
  return kind == TORC_CUDA_CONV_TRANSPOSE ? TORC_CUDA_CONV_BWD_DATA : kind;
}

/* The forward output size along one dim: floor((I + 2p - d (k - 1) - 1)
 * / s) + 1, or 0 when the dilated kernel is wider than the padded input. */
static inline int64_t torc_cuda_conv_out(int64_t I, int64_t k, int64_t s,
                                         int64_t p, int64_t d) {
  int64_t span = I + 2 * p - d * (k - 1) - 1;
  return span < 0 ? 0 : span / s + 1;
}

/* Which tensors of a call of `kind` are the convolution's x, w and y:
 * indices into in[] (0..2) or, offset by 8, into out[]. */
static inline void torc_cuda_conv_roles(int kind, int *xi, int *wi,
                                        int *yi) {
  switch (kind) {
  case TORC_CUDA_CONV_FWD: *xi = 0, *wi = 1, *yi = 8; break;
  case TORC_CUDA_CONV_BWD_FILTER: *xi = 0, *wi = 8, *yi = 1; break;
  default: *xi = 8, *wi = 1, *yi = 0; break; /* gy or the transpose's x */
  }
}

/* Whether a call of `kind` adds a bias (its optional third input: conv2d,
 * conv_transpose2d and, as ref, conv2d_backward_input). */
static inline int torc_cuda_conv_has_bias(int kind, int n_in) {
  return kind != TORC_CUDA_CONV_BWD_FILTER && n_in == 3;
}

/* Fills *g from the call's tensors and params; 1 if they form a
 * convolution cuDNN's 2-d descriptors can express (every size and
 * parameter in int range, the tensors under 2^31 elements), else 0 with
 * *why one of: "shape" (the tensors do not fit together or the output
 * size rule), "params" (a stride or dilation < 1, a negative padding,
 * groups < 1), "size" (past int range: the caller declines). A bias must
 * be [y's channels] for FWD, [x's channels] for the backward-data
 * kinds. */
static inline int torc_cuda_conv_geo_of(int kind, const torc_ktensor *in,
                                        int n_in, const torc_ktensor *out,
                                        const torc_conv_kparams *p,
                                        torc_cuda_conv_geo *g,
                                        const char **why) {
  int xi, wi, yi;
  torc_cuda_conv_roles(kind, &xi, &wi, &yi);
  const torc_ktensor *x = xi >= 8 ? &out[xi - 8] : &in[xi];
  const torc_ktensor *w = wi >= 8 ? &out[wi - 8] : &in[wi];
  const torc_ktensor *y = yi >= 8 ? &out[yi - 8] : &in[yi];
  memset(g, 0, sizeof *g);
  *why = "params";
  if (p->groups < 1)
    return 0;
  for (int d = 0; d < 2; d++)
    if (p->stride[d] < 1 || p->dilation[d] < 1 || p->padding[d] < 0)
      return 0;
  *why = "shape";
  if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4)
    return 0;
  g->N = x->shape[0], g->C = x->shape[1], g->H = x->shape[2];
  g->W = x->shape[3], g->O = w->shape[0], g->kH = w->shape[2];
  g->kW = w->shape[3], g->OH = y->shape[2], g->OW = y->shape[3];
  g->G = p->groups;
  for (int d = 0; d < 2; d++) {
    g->stride[d] = p->stride[d];
    g->pad[d] = p->padding[d];
    g->dil[d] = p->dilation[d];
  }
  if (y->shape[0] != g->N || y->shape[1] != g->O || g->C % g->G ||
      g->O % g->G || w->shape[1] * g->G != g->C ||
      g->OH != torc_cuda_conv_out(g->H, g->kH, g->stride[0], g->pad[0],
                                  g->dil[0]) ||
      g->OW != torc_cuda_conv_out(g->W, g->kW, g->stride[1], g->pad[1],
                                  g->dil[1]))
    return 0;
  if (torc_cuda_conv_has_bias(kind, n_in)) {
    int64_t want = kind == TORC_CUDA_CONV_FWD ? g->O : g->C;
    if (in[2].ndim != 1 || in[2].shape[0] != want)
      return 0;
  }
  *why = "size";
  const int64_t lim = INT32_MAX;
  const int64_t v[] = {g->N,      g->C,      g->H,      g->W,
                       g->O,      g->kH,     g->kW,     g->OH,
                       g->OW,     g->G,      g->pad[0], g->pad[1],
                       g->stride[0], g->stride[1], g->dil[0], g->dil[1]};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (v[i] > lim)
      return 0;
  if (g->N * g->C > lim || g->N * g->C * g->H > lim ||
      g->N * g->C * g->H * g->W > lim || g->N * g->O * g->OH > lim ||
      g->N * g->O * g->OH * g->OW > lim || g->O * w->shape[1] * g->kH > lim ||
      g->O * w->shape[1] * g->kH * g->kW > lim)
    return 0;
  *why = NULL;
  return 1;
}

/* The element counts of x, w (the per-group filter: O x C/G x kH x kW)
 * and y. */
static inline int64_t torc_cuda_conv_numel_x(const torc_cuda_conv_geo *g) {
  return g->N * g->C * g->H * g->W;
}
static inline int64_t torc_cuda_conv_numel_w(const torc_cuda_conv_geo *g) {
  return g->O * (g->C / g->G) * g->kH * g->kW;
}
static inline int64_t torc_cuda_conv_numel_y(const torc_cuda_conv_geo *g) {
  return g->N * g->O * g->OH * g->OW;
}

/* Whether the output of `kind` is an empty sum (every element 0 before a
 * bias): the reduced extent has no element though the output has some. */
static inline int torc_cuda_conv_empty_sum(int kind,
                                           const torc_cuda_conv_geo *g) {
  switch (kind) {
  case TORC_CUDA_CONV_FWD:
    return torc_cuda_conv_numel_w(g) == 0 || torc_cuda_conv_numel_x(g) == 0;
  case TORC_CUDA_CONV_BWD_FILTER:
    return torc_cuda_conv_numel_x(g) == 0 || torc_cuda_conv_numel_y(g) == 0;
  default:
    return torc_cuda_conv_numel_w(g) == 0 || torc_cuda_conv_numel_y(g) == 0;
  }
}

/* The math type a convolution of dtype dt runs with: f32 uses TF32 tensor
 * cores (cuDNN's default math) only when tf32 is on, IEEE f32 FMA
 * otherwise; f16 and bf16 use tensor ops; f64 the default (exact). */
static inline int torc_cuda_conv_math(int dt, int tf32) {
  switch (dt) {
  case TORC_F32: return tf32 ? TORC_CUDA_MATH_DEFAULT : TORC_CUDA_MATH_FMA;
  case TORC_F16:
  case TORC_BF16: return TORC_CUDA_MATH_TENSOR_OP;
  default: return TORC_CUDA_MATH_DEFAULT;
  }
}

/* The dtype a convolution of dtype dt accumulates in (cuDNN's compute
 * type): f64 for f64, f32 for the others (bf16 needs it). */
static inline int torc_cuda_conv_compute(int dt) {
  return dt == TORC_F64 ? TORC_F64 : TORC_F32;
}

/* Whether a candidate's math type may run under the call's: none under
 * FMA may use tensor cores; nothing converts f32 data down to f16. */
static inline int torc_cuda_math_allowed(int call_math, int cand_math) {
  if (cand_math == TORC_CUDA_MATH_TENSOR_OP_ALLOW_CONVERSION)
    return 0;
  if (call_math == TORC_CUDA_MATH_FMA)
    return cand_math == TORC_CUDA_MATH_FMA;
  if (call_math == TORC_CUDA_MATH_DEFAULT)
    return cand_math == TORC_CUDA_MATH_DEFAULT ||
           cand_math == TORC_CUDA_MATH_FMA;
  return 1;
}

/* The algorithms cuDNN documents as non-deterministic whatever their perf
 * result says: backward data ALGO_0, backward filter ALGO_0 and ALGO_3. */
static inline int torc_cuda_algo_nondeterministic(int call, int algo) {
  if (call == TORC_CUDA_CONV_BWD_DATA)
    return algo == 0;
  if (call == TORC_CUDA_CONV_BWD_FILTER)
    return algo == 0 || algo == 3;
  return 0;
}

/* One candidate as cuDNN's perf results give it (ranked by cuDNN: by the
 * heuristic's expectation, or by measured time). */
typedef struct torc_cuda_algo_cand {
  int algo;
  int ok;            /* its status was CUDNN_STATUS_SUCCESS */
  int deterministic; /* its determinism was CUDNN_DETERMINISTIC */
  int math;          /* its mathType */
  size_t memory;     /* the workspace it needs, in bytes */
} torc_cuda_algo_cand;

/* The choice policy: the first candidate (in cuDNN's order) that
 * succeeded, needs at most ws_limit bytes and, under deterministic, is
 * reproducible (by its perf result and not on the non-deterministic
 * list), preferring one whose math type the call allows (*math: its math
 * type, to set on the descriptor before running it). When cuDNN reports
 * only math types the call does not allow, the first otherwise fitting
 * candidate runs under the call's own math type (*math = call_math), so
 * that FMA and no-conversion hold either way. Its index, or -1. */
static inline int torc_cuda_algo_pick(const torc_cuda_algo_cand *c, int n,
                                      int call, int call_math,
                                      int deterministic, size_t ws_limit,
                                      int *math) {
  int fallback = -1;
  for (int i = 0; i < n; i++) {
    if (!c[i].ok || c[i].memory > ws_limit)
      continue;
    if (deterministic &&
        (!c[i].deterministic ||
         torc_cuda_algo_nondeterministic(call, c[i].algo)))
      continue;
    if (torc_cuda_math_allowed(call_math, c[i].math)) {
      *math = c[i].math;
      return i;
    }
    if (fallback < 0)
      fallback = i;
  }
  *math = call_math;
  return fallback;
}

/* The most workspace a chosen algorithm may use (1 GiB). */
#define TORC_CUDA_DNN_WS_LIMIT ((size_t)1 << 30)

/* ---- the algorithm cache ---- */

/* What a choice depends on: the cuDNN call, the dtype, the geometry, and
 * the settings that change the candidates (tf32 via the math type,
 * deterministic, benchmark). Zeroed before filling, so bytes compare. */
typedef struct torc_cuda_algo_key {
  int32_t call, dtype, math, deterministic, benchmark, reserved;
  torc_cuda_conv_geo geo;
} torc_cuda_algo_key;

static inline torc_cuda_algo_key
torc_cuda_algo_key_of(int call, int dt, const torc_cuda_conv_geo *g,
                      int math, int deterministic, int benchmark) {
  torc_cuda_algo_key k;
  memset(&k, 0, sizeof k);
  k.call = call;
  k.dtype = dt;
  k.math = math;
  k.deterministic = deterministic != 0;
  k.benchmark = benchmark != 0;
  k.geo = *g;
  return k;
}

/* A cached choice: the algorithm, the math type to set and the workspace
 * it needs. */
typedef struct torc_cuda_algo_choice {
  int algo, math;
  size_t workspace;
} torc_cuda_algo_choice;

/* Entries per device. A cache past three quarters full is emptied before
 * the next insertion (its choices are made again on their next use): no
 * tombstones, and probe chains stay short. */
#define TORC_CUDA_ALGO_CACHE_SIZE 256

/* One device's cache: open addressing on the key's hash. */
typedef struct torc_cuda_algo_cache {
  struct {
    int used;
    torc_cuda_algo_key key;
    torc_cuda_algo_choice choice;
  } e[TORC_CUDA_ALGO_CACHE_SIZE];
  int count;   /* used entries */
  int flushes; /* times it was emptied */
} torc_cuda_algo_cache;

/* FNV-1a over the key's bytes. */
static inline uint64_t torc_cuda_algo_hash(const torc_cuda_algo_key *k) {
  const unsigned char *b = (const unsigned char *)k;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < sizeof *k; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* The slot holding k, or -1. */
static inline int torc_cuda_algo_slot(const torc_cuda_algo_cache *c,
                                      const torc_cuda_algo_key *k) {
  size_t h = (size_t)(torc_cuda_algo_hash(k) % TORC_CUDA_ALGO_CACHE_SIZE);
  for (size_t i = 0; i < TORC_CUDA_ALGO_CACHE_SIZE; i++) {
    size_t s = (h + i) % TORC_CUDA_ALGO_CACHE_SIZE;
    if (!c->e[s].used)
      return -1;
    if (memcmp(&c->e[s].key, k, sizeof *k) == 0)
      return (int)s;
  }
  return -1;
}

/* 1 and *out if k is cached, else 0. */
static inline int torc_cuda_algo_find(const torc_cuda_algo_cache *c,
                                      const torc_cuda_algo_key *k,
                                      torc_cuda_algo_choice *out) {
  int s = torc_cuda_algo_slot(c, k);
  if (s < 0)
    return 0;
  *out = c->e[s].choice;
  return 1;
}

/* Caches k -> ch (replacing k's entry if there is one; emptying the
 * cache first when it is past three quarters full). */
static inline void torc_cuda_algo_insert(torc_cuda_algo_cache *c,
                                         const torc_cuda_algo_key *k,
                                         const torc_cuda_algo_choice *ch) {
  int s = torc_cuda_algo_slot(c, k);
  if (s >= 0) {
    c->e[s].choice = *ch;
    return;
  }
  if (c->count >= TORC_CUDA_ALGO_CACHE_SIZE * 3 / 4) {
    memset(c->e, 0, sizeof c->e);
    c->count = 0;
    c->flushes++;
  }
  size_t h = (size_t)(torc_cuda_algo_hash(k) % TORC_CUDA_ALGO_CACHE_SIZE);
  for (size_t i = 0; i < TORC_CUDA_ALGO_CACHE_SIZE; i++) {
    size_t t = (h + i) % TORC_CUDA_ALGO_CACHE_SIZE;
    if (!c->e[t].used) {
      c->e[t].used = 1;
      c->e[t].key = *k;
      c->e[t].choice = *ch;
      c->count++;
      return;
    }
  }
}

#endif /* TORC_CUDA_DNN_PLAN_H */
