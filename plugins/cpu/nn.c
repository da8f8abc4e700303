/* plugins/cpu/nn.c — the cpu plugin's f32/f64 kernels of the nn ops a
 * transformer's training step runs besides GEMMs and attention: "dropout"
 * (ref's Philox mask, bit for bit; bf16 too), "layer_norm" and its backward
 * (rows across the pool, each row's loops vectorised in nn_kern.h),
 * "gelu_backward" (the elementwise walk of ew_walk.h), "embedding" and
 * "embedding_backward", and "norm" over all elements. Every reduction has a
 * fixed order, so results do not depend on the thread count.
 */
#include <stdatomic.h>

#include "ew_walk.h"

/* f32 or f64, row-major: the kernels' common precondition (else they
 * decline: ref serves the rest). */
static int nn_plain(const torc_ktensor *t, int32_t dt) {
  return t->dtype == dt && (dt == TORC_F32 || dt == TORC_F64) &&
         cpu_rowmajor(t);
}

/* ------------------------------------------------------------------------
 * dropout: in x; out y = x M and the mask M (0 or 1 / (1 - p)), element i
 * kept when torc_philox_uniform(seed, offset + i) >= p (torc/plugin.h).
 * ---------------------------------------------------------------------- */

enum { DROP_BLK = 2048 };

typedef struct drop_job {
  int32_t dt;
  const void *x;
  void *y, *m;
  uint64_t seed, off, thresh;
  double scale;
} drop_job;

static void drop_task(void *ctx, int64_t lo, int64_t hi) {
  const drop_job *j = ctx;
  uint8_t kb[DROP_BLK];
  for (int64_t b0 = lo; b0 < hi; b0 += DROP_BLK) {
    int64_t n = hi - b0 < DROP_BLK ? hi - b0 : DROP_BLK;
    torc_cpu__isa->philox_keep(j->seed, j->off + (uint64_t)b0, j->thresh, kb,
                               n);
    if (j->dt == TORC_F32) {
      const float *x = (const float *)j->x + b0;
      float *y = (float *)j->y + b0, *m = (float *)j->m + b0;
      float s = (float)j->scale;
      for (int64_t i = 0; i < n; i++) {
        float k = kb[i] ? s : 0.0f;
        m[i] = k;
        y[i] = x[i] * k;
      }
    } else if (j->dt == TORC_BF16) {
      torc_cpu__isa->drop_bf16(kb, (const uint16_t *)j->x + b0, j->scale,
                               (uint16_t *)j->y + b0, (uint16_t *)j->m + b0, n);
    } else {
      const double *x = (const double *)j->x + b0;
      double *y = (double *)j->y + b0, *m = (double *)j->m + b0;
      for (int64_t i = 0; i < n; i++) {
        double k = kb[i] ? j->scale : 0.0;
        m[i] = k;
        y[i] = x[i] * k;
      }
    }
  }
}

static int k_dropout(const torc_kernel_args *a) {
  const torc_dropout_kparams *p = a->params;
  if (a->n_in != 1 || a->n_out != 2 || p == NULL || a->params_size < sizeof *p)
    return TORC_KERNEL_DECLINED;
  int32_t dt = a->in[0].dtype;
  int64_t n = cpu_numel(&a->in[0]);
  const torc_ktensor *t[3] = {&a->in[0], &a->out[0], &a->out[1]};
  for (int i = 0; i < 3; i++)
    if (t[i]->dtype != dt ||
        (dt != TORC_F32 && dt != TORC_F64 && dt != TORC_BF16) ||
        !cpu_rowmajor(t[i]))
      return TORC_KERNEL_DECLINED;
  if (cpu_numel(&a->out[0]) != n || cpu_numel(&a->out[1]) != n ||
      p->p != p->p)
    return TORC_KERNEL_DECLINED;
  drop_job j = {
      .dt = dt,
      .x = cpu_ptr(&a->in[0], 0),
      .y = cpu_ptr(&a->out[0], 0),
      .m = cpu_ptr(&a->out[1], 0),
      .seed = p->seed,
      .off = p->offset,
      .thresh = torc_cpu__keep_threshold(p->p),
      .scale = p->p >= 1 ? 0 : 1.0 / (1.0 - p->p),
  };
  if (n > 0)
    torc_cpu__parallel_for(a->n_threads, n, TORC_CPU_PAR_MIN / 4, drop_task,
                           &j);
  return TORC_OK;
}

/* ------------------------------------------------------------------------
 * layer_norm: in x (R rows of K), w, b [K]; out y, mean [R], rstd [R].
 * The backward: in gy, x, w, mean, rstd; out gx, gw, gb. gw and gb are
 * sums over the rows: each fixed chunk of rows (its size a function of R
 * alone) sums into its own double accumulators, and the chunks are added
 * in order at the end, whatever thread ran them.
 * ---------------------------------------------------------------------- */

typedef struct ln_job {
  const torc_kernel_args *a;
  int32_t dt;
  int64_t R, K, rc; /* rows, row length, rows per chunk (backward) */
  double eps;
  double *acc; /* backward: [chunks][2 K] */
} ln_job;

static void ln_fwd_task(void *ctx, int64_t lo, int64_t hi) {
  const ln_job *j = ctx;
  const torc_kernel_args *a = j->a;
  size_t es = cpu_esize(j->dt);
  const char *x = cpu_ptr(&a->in[0], 0);
  const void *w = cpu_ptr(&a->in[1], 0), *b = cpu_ptr(&a->in[2], 0);
  char *y = cpu_ptr(&a->out[0], 0);
  for (int64_t r = lo; r < hi; r++) {
    double m, rs;
    size_t off = (size_t)(r * j->K) * es;
    torc_cpu__isa->ln_row(j->dt, x + off, w, b, y + off, j->K, j->eps, &m, &rs);
    if (j->dt == TORC_F32) {
      ((float *)cpu_ptr(&a->out[1], 0))[r] = (float)m;
      ((float *)cpu_ptr(&a->out[2], 0))[r] = (float)rs;
    } else {
      ((double *)cpu_ptr(&a->out[1], 0))[r] = m;
      ((double *)cpu_ptr(&a->out[2], 0))[r] = rs;
    }
  }
}

/* The row geometry from x and w: K = numel(w), R = numel(x) / K; 0 when
 * it does not fit (the kernel declines). */
static int ln_geometry(const torc_ktensor *x, const torc_ktensor *w,
                       ln_job *j) {
  j->K = cpu_numel(w);
  int64_t n = cpu_numel(x);
  if (j->K == 0 || n % j->K)
    return 0;
  j->R = n / j->K;
  return 1;
}

static int k_layer_norm(const torc_kernel_args *a) {
  const torc_norm_kparams *p = a->params;
  if (a->n_in != 3 || a->n_out != 3 || p == NULL || a->params_size < sizeof *p)
    return TORC_KERNEL_DECLINED;
  int32_t dt = a->in[0].dtype;
  for (int i = 0; i < 3; i++)
    if (!nn_plain(&a->in[i], dt) || !nn_plain(&a->out[i], dt))
      return TORC_KERNEL_DECLINED;
  ln_job j = {.a = a, .dt = dt, .eps = p->eps};
  if (!ln_geometry(&a->in[0], &a->in[1], &j) || cpu_numel(&a->in[2]) != j.K ||
      cpu_numel(&a->out[0]) != j.R * j.K || cpu_numel(&a->out[1]) != j.R ||
      cpu_numel(&a->out[2]) != j.R)
    return TORC_KERNEL_DECLINED;
  int64_t grain = TORC_CPU_PAR_MIN / 2 / j.K;
  if (j.R > 0)
    torc_cpu__parallel_for(a->n_threads, j.R, grain > 1 ? grain : 1,
                           ln_fwd_task, &j);
  return TORC_OK;
}

/* Chunks [lo, hi) of the backward: gx rows, and each chunk's gw, gb. */
static void ln_bwd_task(void *ctx, int64_t lo, int64_t hi) {
  const ln_job *j = ctx;
  const torc_kernel_args *a = j->a;
  size_t es = cpu_esize(j->dt);
  const char *gy = cpu_ptr(&a->in[0], 0), *x = cpu_ptr(&a->in[1], 0);
  const void *w = cpu_ptr(&a->in[2], 0);
  char *gx = cpu_ptr(&a->out[0], 0);
  for (int64_t c = lo; c < hi; c++) {
    double *aw = j->acc + c * 2 * j->K, *ab = aw + j->K;
    memset(aw, 0, sizeof(double) * (size_t)(2 * j->K));
    int64_t r1 = (c + 1) * j->rc < j->R ? (c + 1) * j->rc : j->R;
    for (int64_t r = c * j->rc; r < r1; r++) {
      double m, rs;
      if (j->dt == TORC_F32) {
        m = ((const float *)cpu_ptr(&a->in[3], 0))[r];
        rs = ((const float *)cpu_ptr(&a->in[4], 0))[r];
      } else {
        m = ((const double *)cpu_ptr(&a->in[3], 0))[r];
        rs = ((const double *)cpu_ptr(&a->in[4], 0))[r];
      }
      size_t off = (size_t)(r * j->K) * es;
      torc_cpu__isa->ln_row_bw(j->dt, gy + off, x + off, w, m, rs, gx + off,
                               j->K, aw, ab);
    }
  }
}

/* Column sums of the chunks' accumulators [lo, hi) of 2 K into out. */
typedef struct ln_sum_job {
  const ln_job *j;
  int64_t n_chunks;
} ln_sum_job;

static void ln_sum_task(void *ctx, int64_t lo, int64_t hi) {
  const ln_sum_job *s = ctx;
  const ln_job *j = s->j;
  int64_t K = j->K;
  for (int64_t q = lo; q < hi; q++) {
    double t = 0;
    for (int64_t c = 0; c < s->n_chunks; c++)
      t += j->acc[c * 2 * K + q];
    const torc_ktensor *o = q < K ? &j->a->out[1] : &j->a->out[2];
    int64_t i = q < K ? q : q - K;
    if (j->dt == TORC_F32)
      ((float *)cpu_ptr(o, 0))[i] = (float)t;
    else
      ((double *)cpu_ptr(o, 0))[i] = t;
  }
}

static int k_layer_norm_backward(const torc_kernel_args *a) {
  if (a->n_in != 5 || a->n_out != 3)
    return TORC_KERNEL_DECLINED;
  int32_t dt = a->in[1].dtype;
  for (int i = 0; i < 5; i++)
    if (!nn_plain(&a->in[i], dt))
      return TORC_KERNEL_DECLINED;
  for (int i = 0; i < 3; i++)
    if (!nn_plain(&a->out[i], dt))
      return TORC_KERNEL_DECLINED;
  ln_job j = {.a = a, .dt = dt};
  if (!ln_geometry(&a->in[1], &a->in[2], &j) ||
      cpu_numel(&a->in[0]) != j.R * j.K || cpu_numel(&a->in[3]) != j.R ||
      cpu_numel(&a->in[4]) != j.R || cpu_numel(&a->out[0]) != j.R * j.K ||
      cpu_numel(&a->out[1]) != j.K || cpu_numel(&a->out[2]) != j.K)
    return TORC_KERNEL_DECLINED;
  /* At most 256 chunks of at least 16 rows: the partial sums stay small. */
  j.rc = (j.R + 255) / 256 > 16 ? (j.R + 255) / 256 : 16;
  int64_t n_chunks = (j.R + j.rc - 1) / j.rc;
  j.acc =
      malloc(sizeof(double) * (size_t)(2 * j.K * (n_chunks ? n_chunks : 1)));
  if (j.acc == NULL)
    return torc_cpu__set_error(TORC_ERR_OOM,
                               "cpu kernel 'layer_norm_backward': out of "
                               "memory for %lld partial sums of %lld",
                               (long long)n_chunks, (long long)(2 * j.K));
  if (n_chunks > 0) {
    int64_t grain = TORC_CPU_PAR_MIN / 2 / (j.rc * j.K);
    torc_cpu__parallel_for(a->n_threads, n_chunks, grain > 1 ? grain : 1,
                           ln_bwd_task, &j);
  }
  ln_sum_job s = {&j, n_chunks};
  int64_t grain = TORC_CPU_PAR_MIN / 2 / (n_chunks ? n_chunks : 1);
  torc_cpu__parallel_for(a->n_threads, 2 * j.K, grain > 1 ? grain : 1,
                         ln_sum_task, &s);
  free(j.acc);
  return TORC_OK;
}

/* ------------------------------------------------------------------------
 * gelu_backward: in g, x; out y = g gelu'(x) (params as gelu: flags bit 0
 * the tanh form). Any strides, through the elementwise walk.
 * ---------------------------------------------------------------------- */

typedef struct gelu_bw_ctx {
  int32_t dt;
  int tanh_form;
} gelu_bw_ctx;

static void gelu_bw_inner(void *c, char **p, const int64_t *st, int64_t n) {
  const gelu_bw_ctx *u = c;
  const cpu_isa *isa = torc_cpu__isa;
  if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
    isa->gelu_bw(u->dt, u->tanh_form, p[0], p[1], p[2], n);
    return;
  }
  size_t es = cpu_esize(u->dt);
  double bg[EW_BLK], bx[EW_BLK], by[EW_BLK];
  char *pg = p[0], *px = p[1], *py = p[2];
  while (n > 0) {
    int64_t m = n < EW_BLK ? n : EW_BLK;
    const void *g =
        st[0] == 1 ? (const void *)pg : gather(bg, pg, st[0], m, es);
    const void *x =
        st[1] == 1 ? (const void *)px : gather(bx, px, st[1], m, es);
    void *y = st[2] == 1 ? (void *)py : (void *)by;
    isa->gelu_bw(u->dt, u->tanh_form, g, x, y, m);
    if (st[2] != 1)
      scatter(py, st[2], by, m, es);
    pg += m * st[0] * (int64_t)es;
    px += m * st[1] * (int64_t)es;
    py += m * st[2] * (int64_t)es;
    n -= m;
  }
}

static int k_gelu_backward(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return bad_args(a, 2, 1);
  const torc_ktensor *g = &a->in[0], *x = &a->in[1], *y = &a->out[0];
  if (!same_shape(g, y) || !same_shape(x, y) || g->dtype != y->dtype ||
      x->dtype != y->dtype)
    return shape_error(a);
  const torc_scalar_params *p = params_of(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  gelu_bw_ctx u = {y->dtype, (p->flags & 1u) != 0};
  const torc_ktensor *t[3] = {g, x, y};
  ew_iter it;
  iter_init(&it, y->ndim, y->shape, t, 3);
  iter_exec(a, &it, gelu_bw_inner, &u);
  return TORC_OK;
}

/* ------------------------------------------------------------------------
 * embedding: in idx (i64 or i32, any shape), w [num, D]; out [idx..., D].
 * embedding_backward: in gy [idx..., D], idx; out gw [num, D], each row
 * the sum of the gy rows that index it, in index order in double (ref's
 * order, so the same bits): the indices are bucketed by row (a stable
 * counting sort) and the pool splits the rows.
 * ---------------------------------------------------------------------- */

static int64_t idx_at(const torc_ktensor *ix, int64_t i) {
  return ix->dtype == TORC_I64 ? ((const int64_t *)ix->data)[ix->offset + i]
                               : ((const int32_t *)ix->data)[ix->offset + i];
}

typedef struct emb_job {
  const torc_ktensor *ix, *w, *y;
  int64_t n, num, D;
  _Atomic int64_t bad;          /* first bad position + 1 */
  const int64_t *start, *order; /* backward: row r's positions */
} emb_job;

static void emb_task(void *ctx, int64_t lo, int64_t hi) {
  emb_job *j = ctx;
  size_t es = cpu_esize(j->w->dtype), row = (size_t)j->D * es;
  const char *w = cpu_ptr(j->w, 0);
  char *y = cpu_ptr(j->y, 0);
  for (int64_t i = lo; i < hi; i++) {
    int64_t k = idx_at(j->ix, i);
    if (k < 0 || k >= j->num) {
      int64_t z = 0;
      atomic_compare_exchange_strong(&j->bad, &z, i + 1);
      continue;
    }
    memcpy(y + (size_t)i * row, w + (size_t)k * row, row);
  }
}

static int emb_index_ok(const torc_ktensor *ix) {
  return (ix->dtype == TORC_I64 || ix->dtype == TORC_I32) && cpu_rowmajor(ix);
}

static int k_embedding(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return TORC_KERNEL_DECLINED;
  const torc_ktensor *ix = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  int32_t dt = w->dtype;
  if (!emb_index_ok(ix) || w->ndim != 2 || !nn_plain(w, dt) || !nn_plain(y, dt))
    return TORC_KERNEL_DECLINED;
  emb_job j = {.ix = ix,
               .w = w,
               .y = y,
               .n = cpu_numel(ix),
               .num = w->shape[0],
               .D = w->shape[1]};
  if (cpu_numel(y) != j.n * j.D)
    return TORC_KERNEL_DECLINED;
  atomic_init(&j.bad, 0);
  int64_t grain = TORC_CPU_PAR_MIN / (j.D > 0 ? j.D : 1);
  if (j.n > 0)
    torc_cpu__parallel_for(a->n_threads, j.n, grain > 1 ? grain : 1, emb_task,
                           &j);
  int64_t bad = atomic_load(&j.bad);
  if (bad) {
    int64_t k = idx_at(ix, bad - 1);
    return torc_cpu__set_error(TORC_ERR_RANGE,
                               "embedding: index %lld is out of range for "
                               "num_embeddings %lld (valid: 0..%lld)",
                               (long long)k, (long long)j.num,
                               (long long)j.num - 1);
  }
  return TORC_OK;
}

/* Rows [lo, hi) of gw. */
static void emb_bw_task(void *ctx, int64_t lo, int64_t hi) {
  emb_job *j = ctx;
  int64_t D = j->D;
  double *acc = malloc(sizeof(double) * (size_t)(D > 0 ? D : 1));
  if (acc == NULL) {
    atomic_store(&j->bad, -1);
    return;
  }
  const torc_ktensor *gy = j->w, *gw = j->y;
  for (int64_t r = lo; r < hi; r++) {
    memset(acc, 0, sizeof(double) * (size_t)D);
    for (int64_t s = j->start[r]; s < j->start[r + 1]; s++) {
      int64_t i = j->order[s];
      if (gy->dtype == TORC_F32) {
        const float *g = (const float *)cpu_ptr(gy, 0) + i * D;
        for (int64_t d = 0; d < D; d++)
          acc[d] += (double)g[d];
      } else {
        const double *g = (const double *)cpu_ptr(gy, 0) + i * D;
        for (int64_t d = 0; d < D; d++)
          acc[d] += g[d];
      }
    }
    if (gw->dtype == TORC_F32) {
      float *o = (float *)cpu_ptr(gw, 0) + r * D;
      for (int64_t d = 0; d < D; d++)
        o[d] = (float)acc[d];
    } else {
      double *o = (double *)cpu_ptr(gw, 0) + r * D;
      memcpy(o, acc, sizeof(double) * (size_t)D);
    }
  }
  free(acc);
}

static int k_embedding_backward(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return TORC_KERNEL_DECLINED;
  const torc_ktensor *gy = &a->in[0], *ix = &a->in[1], *gw = &a->out[0];
  int32_t dt = gw->dtype;
  if (!emb_index_ok(ix) || gw->ndim != 2 || !nn_plain(gy, dt) ||
      !nn_plain(gw, dt))
    return TORC_KERNEL_DECLINED;
  emb_job j = {.ix = ix,
               .w = gy,
               .y = gw,
               .n = cpu_numel(ix),
               .num = gw->shape[0],
               .D = gw->shape[1]};
  if (cpu_numel(gy) != j.n * j.D)
    return TORC_KERNEL_DECLINED;
  atomic_init(&j.bad, 0);
  for (int64_t i = 0; i < j.n; i++) {
    int64_t k = idx_at(ix, i);
    if (k < 0 || k >= j.num)
      return torc_cpu__set_error(TORC_ERR_RANGE,
                                 "embedding_backward: index %lld is out of "
                                 "range for num_embeddings %lld",
                                 (long long)k, (long long)j.num);
  }
  int64_t *start = calloc((size_t)(j.num + 2), sizeof(int64_t));
  int64_t *order = malloc(sizeof(int64_t) * (size_t)(j.n > 0 ? j.n : 1));
  if (start == NULL || order == NULL) {
    free(start);
    free(order);
    return torc_cpu__set_error(TORC_ERR_OOM,
                               "cpu kernel 'embedding_backward': out of "
                               "memory for %lld indices",
                               (long long)j.n);
  }
  /* A stable counting sort: start[r] .. start[r + 1] are row r's
   * positions, ascending. */
  for (int64_t i = 0; i < j.n; i++)
    start[idx_at(ix, i) + 2]++;
  for (int64_t r = 0; r < j.num; r++)
    start[r + 2] += start[r + 1];
  for (int64_t i = 0; i < j.n; i++)
    order[start[idx_at(ix, i) + 1]++] = i;
  j.start = start;
  j.order = order;
  int64_t per = j.num > 0 ? (j.n * j.D) / j.num + j.D : 1;
  int64_t grain = TORC_CPU_PAR_MIN / (per > 0 ? per : 1);
  if (j.num > 0)
    torc_cpu__parallel_for(a->n_threads, j.num, grain > 1 ? grain : 1,
                           emb_bw_task, &j);
  free(start);
  free(order);
  if (atomic_load(&j.bad) < 0)
    return torc_cpu__set_error(TORC_ERR_OOM,
                               "cpu kernel 'embedding_backward': out of "
                               "memory for a row of %lld",
                               (long long)j.D);
  return TORC_OK;
}

/* ------------------------------------------------------------------------
 * norm over every element (what clip_grad_norm asks of each gradient): p =
 * 1 sums |x|; p = 2 is m sqrt(sum (x / m)^2) with m = max |x| (no
 * overflow), NaN when any element is; p = inf is m (ref's fold_norm).
 * Sums in double over NORM_L lanes, one thread, so a fixed order. Other
 * dims masks decline to ref.
 * ---------------------------------------------------------------------- */

enum { NORM_L = 8 };

#define NORM_BODY(T)                                                           \
  do {                                                                         \
    const T *x = xv;                                                           \
    double l[NORM_L] = {0}, r = 0;                                             \
    int64_t i = 0;                                                             \
    if (p == 1) {                                                              \
      for (; i + NORM_L <= n; i += NORM_L)                                     \
        for (int q = 0; q < NORM_L; q++)                                       \
          l[q] += fabs((double)x[i + q]);                                      \
      for (int q = 0; q < NORM_L; q++)                                         \
        r += l[q];                                                             \
      for (; i < n; i++)                                                       \
        r += fabs((double)x[i]);                                               \
      return r;                                                                \
    }                                                                          \
    int nan = 0;                                                               \
    for (; i + NORM_L <= n; i += NORM_L)                                       \
      for (int q = 0; q < NORM_L; q++) {                                       \
        double v = fabs((double)x[i + q]);                                     \
        nan |= v != v;                                                         \
        l[q] = v > l[q] ? v : l[q];                                            \
      }                                                                        \
    double m = 0;                                                              \
    for (int q = 0; q < NORM_L; q++)                                           \
      m = l[q] > m ? l[q] : m;                                                 \
    for (; i < n; i++) {                                                       \
      double v = fabs((double)x[i]);                                           \
      nan |= v != v;                                                           \
      m = v > m ? v : m;                                                       \
    }                                                                          \
    if (nan)                                                                   \
      return NAN;                                                              \
    if (p != 2 || m == 0 || isinf(m))                                          \
      return m;                                                                \
    for (int q = 0; q < NORM_L; q++)                                           \
      l[q] = 0;                                                                \
    for (i = 0; i + NORM_L <= n; i += NORM_L)                                  \
      for (int q = 0; q < NORM_L; q++) {                                       \
        double v = (double)x[i + q] / m;                                       \
        l[q] += v * v;                                                         \
      }                                                                        \
    for (int q = 0; q < NORM_L; q++)                                           \
      r += l[q];                                                               \
    for (; i < n; i++) {                                                       \
      double v = (double)x[i] / m;                                             \
      r += v * v;                                                              \
    }                                                                          \
    return m * sqrt(r);                                                        \
  } while (0)

static double norm_f32(const void *xv, int64_t n, double p) {
  NORM_BODY(float);
}
static double norm_f64(const void *xv, int64_t n, double p) {
  NORM_BODY(double);
}

static int k_norm(const torc_kernel_args *a) {
  const torc_norm_params *p = a->params;
  if (a->n_in != 1 || a->n_out != 1 || p == NULL ||
      a->params_size < sizeof *p ||
      !(p->p == 1 || p->p == 2 || (isinf(p->p) && p->p > 0)))
    return TORC_KERNEL_DECLINED;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int32_t dt = x->dtype;
  if (!nn_plain(x, dt) || y->dtype != dt || cpu_numel(y) != 1 ||
      y->ndim != x->ndim)
    return TORC_KERNEL_DECLINED;
  for (int d = 0; d < x->ndim; d++)
    if (x->shape[d] != 1 && !((p->dims_mask >> d) & 1u))
      return TORC_KERNEL_DECLINED;
  int64_t n = cpu_numel(x);
  if (n == 0 && isinf(p->p))
    return TORC_KERNEL_DECLINED; /* ref's error */
  double r = dt == TORC_F32 ? norm_f32(cpu_ptr(x, 0), n, p->p)
                            : norm_f64(cpu_ptr(x, 0), n, p->p);
  if (dt == TORC_F32)
    *(float *)cpu_ptr(y, 0) = (float)r;
  else
    *(double *)cpu_ptr(y, 0) = r;
  return TORC_OK;
}

int torc_cpu__register_nn(const torc_host *host, torc_plugin *self) {
  static const torc_cpu_kernel kernels[] = {
      /* contiguous inputs, as ref's (a gradient is often an expanded
       * view); gelu_backward walks any strides */
      {"dropout", k_dropout, TORC_KERNEL_CONTIGUOUS},
      {"layer_norm", k_layer_norm, TORC_KERNEL_CONTIGUOUS},
      {"layer_norm_backward", k_layer_norm_backward, TORC_KERNEL_CONTIGUOUS},
      {"gelu_backward", k_gelu_backward, 0},
      {"embedding", k_embedding, TORC_KERNEL_CONTIGUOUS},
      {"embedding_backward", k_embedding_backward, TORC_KERNEL_CONTIGUOUS},
      {"norm", k_norm, TORC_KERNEL_CONTIGUOUS},
  };
  /* dropout of bf16 activations (mixed precision) */
  static const torc_cpu_kernel bf16_kernels[] = {
      {"dropout", k_dropout, TORC_KERNEL_CONTIGUOUS},
  };
  static const int32_t dtypes[] = {TORC_F32, TORC_F64}, bf16[] = {TORC_BF16};
  int st = torc_cpu__register_table(
      host, self, kernels, sizeof kernels / sizeof kernels[0], dtypes, 2);
  if (st == TORC_OK)
    st = torc_cpu__register_table(host, self, bf16_kernels, 1, bf16, 1);
  return st;
}
