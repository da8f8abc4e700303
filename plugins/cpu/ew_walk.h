/* plugins/cpu/ew_walk.h — the strided N-d walk the cpu plugin's
 * elementwise ops, reductions and softmax share (ew.c, ew_reduce.c): size-1
 * dims dropped, evenly stepping dims merged, runs handed to the ISA's
 * loops, large walks split across the pool; and the kernels' argument
 * checks.
 */
#ifndef TORC_CPU_EW_WALK_H
#define TORC_CPU_EW_WALK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "torc/dtype.h"

enum { EW_MAX_OPS = 4, EW_BLK = 512 };

static inline size_t esz(int32_t dt) {
  return torc_dtype_size((torc_dtype)dt);
}

/* The walk: operand k's element at index idx is
 * base[k] + sum(idx[d] * st[k][d]) * es[k]. */
typedef struct ew_iter {
  int nd, nops;
  int64_t numel;
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  int64_t st[EW_MAX_OPS][TORC_KERNEL_MAX_DIMS];
  char *base[EW_MAX_OPS];
  size_t es[EW_MAX_OPS];
} ew_iter;

/* A run of n elements: p[k] the operands' first elements, st[k] their
 * strides (elements). */
typedef void (*ew_inner)(void *ctx, char **p, const int64_t *st, int64_t n);

/* Builds the walk over `shape` (nd dims) for operands t[0..nops). */
static inline void iter_init(ew_iter *it, int nd, const int64_t *shape,
                             const torc_ktensor *const *t, int nops) {
  it->nops = nops;
  it->nd = 0;
  it->numel = 1;
  for (int k = 0; k < nops; k++) {
    it->es[k] = esz(t[k]->dtype);
    it->base[k] = (char *)t[k]->data + (size_t)t[k]->offset * it->es[k];
  }
  for (int d = 0; d < nd; d++) {
    it->numel *= shape[d];
    if (shape[d] == 1)
      continue;
    int m = it->nd;
    /* Merge into the previous kept dim when every operand steps evenly. */
    int merge = m > 0;
    for (int k = 0; merge && k < nops; k++)
      merge = it->st[k][m - 1] == t[k]->strides[d] * shape[d];
    if (merge) {
      it->shape[m - 1] *= shape[d];
      for (int k = 0; k < nops; k++)
        it->st[k][m - 1] = t[k]->strides[d];
      continue;
    }
    it->shape[m] = shape[d];
    for (int k = 0; k < nops; k++)
      it->st[k][m] = t[k]->strides[d];
    it->nd++;
  }
  if (it->nd == 0) { /* a scalar: one run of one element */
    it->nd = 1;
    it->shape[0] = 1;
    for (int k = 0; k < nops; k++)
      it->st[k][0] = 1;
  }
}

/* Walks elements [b, e) of the row-major order in runs of the innermost
 * dim. */
static inline void iter_run(const ew_iter *it, int64_t b, int64_t e,
                            ew_inner fn, void *ctx) {
  int nd = it->nd, last = nd - 1;
  int64_t idx[TORC_KERNEL_MAX_DIMS];
  char *p[EW_MAX_OPS];
  int64_t inner_st[EW_MAX_OPS];
  int64_t rem = b;
  for (int d = last; d >= 0; d--) {
    idx[d] = rem % it->shape[d];
    rem /= it->shape[d];
  }
  for (int k = 0; k < it->nops; k++) {
    int64_t off = 0;
    for (int d = 0; d < nd; d++)
      off += idx[d] * it->st[k][d];
    p[k] = it->base[k] + off * (int64_t)it->es[k];
    inner_st[k] = it->st[k][last];
  }
  int64_t pos = b;
  while (pos < e) {
    int64_t run = it->shape[last] - idx[last];
    if (run > e - pos)
      run = e - pos;
    fn(ctx, p, inner_st, run);
    pos += run;
    if (pos >= e)
      break;
    /* Advance: the innermost dim by run, carrying outward. */
    for (int k = 0; k < it->nops; k++)
      p[k] += run * inner_st[k] * (int64_t)it->es[k];
    idx[last] += run;
    for (int d = last; d > 0 && idx[d] == it->shape[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
      for (int k = 0; k < it->nops; k++)
        p[k] += (it->st[k][d - 1] - it->st[k][d] * it->shape[d]) *
                (int64_t)it->es[k];
    }
  }
}

typedef struct par_ctx {
  const ew_iter *it;
  ew_inner fn;
  void *ctx;
} par_ctx;

static inline void par_task(void *c, int64_t b, int64_t e) {
  const par_ctx *pc = c;
  iter_run(pc->it, b, e, pc->fn, pc->ctx);
}

/* Runs the walk, across the pool when it is big enough. */
static inline void iter_exec(const torc_kernel_args *a, const ew_iter *it,
                             ew_inner fn, void *ctx) {
  if (it->numel >= TORC_CPU_PAR_MIN && a->n_threads > 1) {
    par_ctx pc = {it, fn, ctx};
    torc_cpu__parallel_for(a->n_threads, it->numel, TORC_CPU_PAR_MIN / 2,
                           par_task, &pc);
  } else if (it->numel > 0) {
    iter_run(it, 0, it->numel, fn, ctx);
  }
}

/* Copies n strided elements of size es into buf (stride 0 repeats). */
static inline void *gather(void *buf, const char *p, int64_t st, int64_t n,
                           size_t es) {
  if (es == 4) {
    float *d = buf;
    const float *s = (const float *)p;
    for (int64_t i = 0; i < n; i++)
      d[i] = s[i * st];
  } else if (es == 8) {
    double *d = buf;
    const double *s = (const double *)p;
    for (int64_t i = 0; i < n; i++)
      d[i] = s[i * st];
  } else if (es == 2) {
    uint16_t *d = buf;
    const uint16_t *s = (const uint16_t *)p;
    for (int64_t i = 0; i < n; i++)
      d[i] = s[i * st];
  } else {
    for (int64_t i = 0; i < n; i++)
      memcpy((char *)buf + (size_t)i * es, p + i * st * (int64_t)es, es);
  }
  return buf;
}

static inline void scatter(char *p, int64_t st, const void *buf,
                           int64_t n, size_t es) {
  if (es == 4) {
    float *d = (float *)p;
    const float *s = buf;
    for (int64_t i = 0; i < n; i++)
      d[i * st] = s[i];
  } else if (es == 8) {
    double *d = (double *)p;
    const double *s = buf;
    for (int64_t i = 0; i < n; i++)
      d[i * st] = s[i];
  } else if (es == 2) {
    uint16_t *d = (uint16_t *)p;
    const uint16_t *s = buf;
    for (int64_t i = 0; i < n; i++)
      d[i * st] = s[i];
  } else {
    for (int64_t i = 0; i < n; i++)
      memcpy(p + i * st * (int64_t)es, (const char *)buf + (size_t)i * es, es);
  }
}

static inline int bad_args(const torc_kernel_args *a, int n_in, int n_out) {
  return torc_cpu__set_error(TORC_ERR_INTERNAL,
                             "cpu kernel '%s' got %d inputs and %d outputs "
                             "(expected %d and %d)",
                             a->op, (int)a->n_in, (int)a->n_out, n_in, n_out);
}

static inline int same_shape(const torc_ktensor *x, const torc_ktensor *y) {
  if (x->ndim != y->ndim)
    return 0;
  for (int d = 0; d < x->ndim; d++)
    if (x->shape[d] != y->shape[d])
      return 0;
  return 1;
}

static inline int shape_error(const torc_kernel_args *a) {
  return torc_cpu__set_error(TORC_ERR_SHAPE,
                             "cpu kernel '%s': operand shapes differ from the "
                             "output's (the core should have broadcast them)",
                             a->op);
}

static inline const void *params_of(const torc_kernel_args *a, size_t size) {
  if (a->params == NULL || a->params_size < size) {
    torc_cpu__set_error(TORC_ERR_INTERNAL,
                        "cpu kernel '%s' needs %zu bytes of parameters, got "
                        "%zu",
                        a->op, size, a->params ? a->params_size : 0);
    return NULL;
  }
  return a->params;
}

/* The reductions' and softmax's kernels (ew_reduce.c), registered for f32
 * and f64 after ew.c's; the first torc_cpu__n_ew_reduce_bf16 of them (the
 * reductions) for bf16 too. */
extern const torc_cpu_kernel torc_cpu__ew_reduce_kernels[];
extern const size_t torc_cpu__n_ew_reduce_kernels;
extern const size_t torc_cpu__n_ew_reduce_bf16;

#endif /* TORC_CPU_EW_WALK_H */
