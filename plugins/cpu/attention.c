/* plugins/cpu/attention.c — the fused forward of
 * "scaled_dot_product_attention" for f32 and f64, flash-attention style:
 * each task takes a block of query rows of one (batch, head) and walks
 * the keys in blocks, the block's scores a GEMM, folded into a running
 * maximum, sum and output per row (the online softmax), so no [L, S]
 * score matrix exists: scratch is one block of scores per thread. Under
 * is_causal the walk stops at the block's last query. The backward
 * recomputes the blocks' weights from the saved log-sum-exp (below). The
 * per-score work of a block row (the mask, the exponentials through the
 * ISA's exp_sum) is vector loops.
 *
 * Dropout (0 < dropout_p < 1) keeps weight (row r of the flattened
 * [B..., L], key j) when Philox's uniform at offset + r S + j is >= p, as
 * ref: the forward draws each block row's bits after the softmax sums
 * (the sum is over every weight, the dropped ones too), the backward draws
 * the same bits again, so no [L, S] mask is stored. Both decline
 * dropout_p >= 1 and strided q, k, v (ref serves those).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

enum { BQ = 64, BK = 256 };

/* From this many (batch, head)s on, the backward runs one task per
 * (batch, head) that computes each block's P and dS once for gq, gk and gv
 * (enough tasks for the pool); below it, two passes (by query block, then
 * by key block) that compute them twice but split a long sequence. A
 * constant, so the choice never depends on the thread count. */
enum { BW_ONE_MIN = 16 };

typedef struct att_job {
  const torc_kernel_args *a;
  const torc_attention_kparams *p;
  int nb;
  int64_t L, S, E, Ev, nqb;
  int drop;        /* dropout on: keep bits per block row */
  uint64_t thresh; /* torc_cpu__keep_threshold(dropout_p) */
  double kscale;   /* 1 / (1 - dropout_p), or 1 */
  _Atomic int oom;
} att_job;

/* The keep bits of row (b, i)'s keys j0 .. j0 + n (n clipped to the causal
 * limit by the caller) into kb. */
static void keep_row(const torc_attention_kparams *p, uint64_t thresh,
                     int64_t L, int64_t S, int64_t b, int64_t i, int64_t j0,
                     int64_t n, uint8_t *kb) {
  uint64_t off = p->offset + (uint64_t)((b * L + i) * S + j0);
  torc_cpu__isa->philox_keep(p->seed, off, thresh, kb, n);
}

/* The keys of row i that a block j0 .. j0 + nk can keep: under is_causal
 * those up to i. */
static int64_t row_keys(const torc_attention_kparams *p, int64_t i,
                        int64_t j0, int64_t nk) {
  if (p->is_causal && i - j0 + 1 < nk)
    return i - j0 + 1 > 0 ? i - j0 + 1 : 0;
  return nk;
}

/* The element offset of mask row (b, i). */
static int64_t mask_row(const torc_ktensor *m, int nb, int64_t b, int64_t i) {
  int64_t pos = m->offset;
  for (int d = nb - 1; d >= 0; d--) {
    int64_t n = m->shape[d] ? m->shape[d] : 1;
    pos += (b % n) * m->strides[d];
    b /= n;
  }
  return pos + i * m->strides[nb];
}

/* Row i's scores row[0..nk) of keys j0..: the mask applied to the keys
 * below lim (the causal limit), -inf from lim on. */
#define DEFINE_MASK(SUF, T)                                                    \
  static void mask_scores_##SUF(const torc_ktensor *m, int nb, int64_t b,      \
                                int64_t i, int64_t j0, int64_t lim,            \
                                int64_t nk, T *row) {                          \
    if (m) {                                                                   \
      int64_t mr = mask_row(m, nb, b, i) + j0 * m->strides[nb + 1];            \
      int64_t ms = m->strides[nb + 1];                                         \
      if (m->dtype == TORC_BOOL) {                                             \
        const uint8_t *mb = (const uint8_t *)m->data + mr;                     \
        for (int64_t c = 0; c < lim; c++)                                      \
          row[c] = mb[c * ms] ? row[c] : -INFINITY;                            \
      } else {                                                                 \
        const T *mf = (const T *)m->data + mr;                                 \
        for (int64_t c = 0; c < lim; c++)                                      \
          row[c] += mf[c * ms];                                                \
      }                                                                        \
    }                                                                          \
    for (int64_t c = lim; c < nk; c++)                                         \
      row[c] = -INFINITY;                                                      \
  }

DEFINE_MASK(f32, float)
DEFINE_MASK(f64, double)

#define DEFINE_SDPA(SUF, T, EXP, LOG)                                          \
  static void sdpa_task_##SUF(void *ctx, int64_t begin, int64_t end) {         \
    att_job *j = ctx;                                                          \
    const torc_kernel_args *a = j->a;                                          \
    const torc_attention_kparams *p = j->p;                                    \
    const torc_ktensor *m = p->has_mask && a->n_in == 4 ? &a->in[3] : NULL;    \
    int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev;                          \
    T *s = malloc(sizeof(T) * (size_t)(BQ * BK + BQ * Ev + 2 * BQ) + BK);      \
    if (s == NULL) {                                                           \
      atomic_store(&j->oom, 1);                                                \
      return;                                                                  \
    }                                                                          \
    T *acc = s + BQ * BK, *mx = acc + BQ * Ev, *sum = mx + BQ;                 \
    uint8_t *kb = (uint8_t *)(sum + BQ);                                       \
    const T *qd = cpu_ptr(&a->in[0], 0), *kd = cpu_ptr(&a->in[1], 0);          \
    const T *vd = cpu_ptr(&a->in[2], 0);                                       \
    int32_t dt = a->in[0].dtype;                                               \
    T *od = cpu_ptr(&a->out[0], 0), *ld = cpu_ptr(&a->out[1], 0);              \
    for (int64_t t = begin; t < end; t++) {                                    \
      int64_t b = t / j->nqb, i0 = (t % j->nqb) * BQ;                          \
      int64_t nq = L - i0 < BQ ? L - i0 : BQ;                                  \
      const T *qb = qd + (b * L + i0) * E;                                     \
      for (int64_t r = 0; r < nq; r++) {                                       \
        mx[r] = -INFINITY;                                                     \
        sum[r] = 0;                                                            \
      }                                                                        \
      memset(acc, 0, sizeof(T) * (size_t)(nq * Ev));                           \
      int64_t send = p->is_causal && i0 + nq < S ? i0 + nq : S;                \
      for (int64_t j0 = 0; j0 < send; j0 += BK) {                              \
        int64_t nk = send - j0 < BK ? send - j0 : BK;                          \
        torc_cpu__gemm(a->in[0].dtype, 0, 1, nq, nk, E, p->scale, qb, E,       \
                       kd + (b * S + j0) * E, E, 0, s, nk);                    \
        for (int64_t r = 0; r < nq; r++) {                                     \
          T *row = s + r * nk, bm = -INFINITY;                                 \
          int64_t i = i0 + r, lim = row_keys(p, i, j0, nk);                    \
          mask_scores_##SUF(m, j->nb, b, i, j0, lim, nk, row);                 \
          for (int64_t c = 0; c < nk; c++)                                     \
            bm = row[c] > bm ? row[c] : bm;                                    \
          T nm = bm > mx[r] ? bm : mx[r];                                      \
          if (nm == -INFINITY) { /* nothing yet in this row */                 \
            memset(row, 0, sizeof(T) * (size_t)nk);                            \
            continue;                                                          \
          }                                                                    \
          T corr = EXP(mx[r] - nm);                                            \
          T add = (T)torc_cpu__isa->exp_sum(dt, row, row, nk, nm);             \
          sum[r] = sum[r] * corr + add;                                        \
          mx[r] = nm;                                                          \
          if (j->drop) { /* the dropped weights leave the sum as they are */   \
            keep_row(p, j->thresh, L, S, b, i, j0, lim, kb);                   \
            for (int64_t c = 0; c < lim; c++)                                  \
              row[c] = kb[c] ? row[c] : 0;                                     \
          }                                                                    \
          if (corr != 1)                                                       \
            for (int64_t e = 0; e < Ev; e++)                                   \
              acc[r * Ev + e] *= corr;                                         \
        }                                                                      \
        torc_cpu__gemm(a->in[0].dtype, 0, 0, nq, Ev, nk, 1, s, nk,             \
                       vd + (b * S + j0) * Ev, Ev, 1, acc, Ev);                \
      }                                                                        \
      for (int64_t r = 0; r < nq; r++) {                                       \
        T *orow = od + (b * L + i0 + r) * Ev;                                  \
        int none = mx[r] == -INFINITY; /* every key masked: NaN, as ref */     \
        T inv = (T)(j->kscale / (double)sum[r]);                               \
        for (int64_t e = 0; e < Ev; e++)                                       \
          orow[e] = none     ? (S ? (T)NAN : 0)                                \
                    : j->drop ? acc[r * Ev + e] * inv                          \
                              : acc[r * Ev + e] / sum[r];                      \
        ld[b * L + i0 + r] = none ? (T)-INFINITY : mx[r] + LOG(sum[r]);        \
      }                                                                        \
    }                                                                          \
    free(s);                                                                   \
  }

DEFINE_SDPA(f32, float, expf, logf)
DEFINE_SDPA(f64, double, exp, log)

/* ---- the backward, blockwise ----
 * For a (query block, key block) pair: S = scale q k^T (masked), P =
 * exp(S - lse), dP = gy v^T, dS = P (dP - D) scale with D = gy . o per
 * row. Two passes keep every output written by one task: by query block
 * gq = sum over key blocks of dS k; by key block gv = sum of P^T gy and
 * gk = sum of dS^T q. Each recomputes its blocks of P; scratch is three
 * blocks per thread. */

typedef struct att_bw_job {
  const torc_kernel_args *a;
  const torc_attention_kparams *p;
  int nb;
  int64_t L, S, E, Ev, nqb, nkb;
  int drop; /* as att_job's */
  uint64_t thresh;
  double kscale;
  _Atomic int oom;
} att_bw_job;

#define DEFINE_SDPA_BW(SUF, T)                                                 \
  /* P M and dS = P (M dP - D) scale of block (b, i0.., j0..) into pb and      \
   * ds ([nq, nk]); M the dropout factors (1 without). */                      \
  static void bw_block_##SUF(const att_bw_job *j, int64_t b, int64_t i0,       \
                             int64_t nq, int64_t j0, int64_t nk, T *pb,        \
                             T *ds, const T *drow, uint8_t *kb) {              \
    const torc_kernel_args *a = j->a;                                          \
    const torc_attention_kparams *p = j->p;                                    \
    const torc_ktensor *m = p->has_mask && a->n_in == 7 ? &a->in[6] : NULL;    \
    const T *gyd = cpu_ptr(&a->in[0], 0), *qd = cpu_ptr(&a->in[1], 0);         \
    const T *kd = cpu_ptr(&a->in[2], 0), *vd = cpu_ptr(&a->in[3], 0);          \
    const T *ld = cpu_ptr(&a->in[5], 0);                                       \
    int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev;                          \
    torc_cpu__gemm(a->in[1].dtype, 0, 1, nq, nk, E, p->scale,                  \
                   qd + (b * L + i0) * E, E, kd + (b * S + j0) * E, E, 0, pb,  \
                   nk);                                                        \
    torc_cpu__gemm(a->in[1].dtype, 0, 1, nq, nk, Ev, 1,                        \
                   gyd + (b * L + i0) * Ev, Ev, vd + (b * S + j0) * Ev, Ev, 0, \
                   ds, nk);                                                    \
    T ks = (T)j->kscale, sc = (T)p->scale;                                     \
    for (int64_t r = 0; r < nq; r++) {                                         \
      int64_t i = i0 + r, lim = row_keys(p, i, j0, nk);                        \
      T l = ld[b * L + i], *pr = pb + r * nk, *dr = ds + r * nk, d = drow[r];  \
      mask_scores_##SUF(m, j->nb, b, i, j0, lim, nk, pr);                      \
      if (l == -INFINITY) /* a row with no key: NaN weights, as ref */        \
        for (int64_t c = 0; c < nk; c++)                                       \
          pr[c] = (T)NAN;                                                      \
      else                                                                     \
        torc_cpu__isa->exp_sum(a->in[1].dtype, pr, pr, nk, l);                 \
      if (!j->drop) {                                                          \
        for (int64_t c = 0; c < nk; c++)                                       \
          dr[c] = pr[c] * (dr[c] - d) * sc;                                    \
        continue;                                                              \
      }                                                                        \
      /* M: 0 or 1 / (1 - p) (0 past the causal limit, where w is 0 too) */   \
      keep_row(p, j->thresh, L, S, b, i, j0, lim, kb);                         \
      for (int64_t c = lim; c < nk; c++)                                       \
        kb[c] = 0;                                                             \
      for (int64_t c = 0; c < nk; c++) {                                       \
        T mk = kb[c] ? ks : (T)0;                                              \
        dr[c] = pr[c] * (mk * dr[c] - d) * sc;                                 \
        pr[c] *= mk;                                                           \
      }                                                                        \
    }                                                                          \
  }                                                                            \
                                                                               \
  /* D = gy . o for rows i0.. of batch b. */                                   \
  static void bw_d_##SUF(const att_bw_job *j, int64_t b, int64_t i0,           \
                         int64_t nq, T *drow) {                                \
    const T *gyd = cpu_ptr(&j->a->in[0], 0), *od = cpu_ptr(&j->a->in[4], 0);   \
    for (int64_t r = 0; r < nq; r++) {                                         \
      const T *g = gyd + (b * j->L + i0 + r) * j->Ev;                          \
      const T *o = od + (b * j->L + i0 + r) * j->Ev;                           \
      T d = 0;                                                                 \
      for (int64_t e = 0; e < j->Ev; e++)                                      \
        d += g[e] * o[e];                                                      \
      drow[r] = d;                                                             \
    }                                                                          \
  }                                                                            \
                                                                               \
  static void bw_q_task_##SUF(void *ctx, int64_t begin, int64_t end) {         \
    att_bw_job *j = ctx;                                                       \
    T *pb = malloc(sizeof(T) * (size_t)(2 * BQ * BK + BQ) + BK);               \
    if (pb == NULL) {                                                          \
      atomic_store(&j->oom, 1);                                                \
      return;                                                                  \
    }                                                                          \
    T *ds = pb + BQ * BK, *drow = ds + BQ * BK;                                \
    uint8_t *kb = (uint8_t *)(drow + BQ);                                      \
    const T *kd = cpu_ptr(&j->a->in[2], 0);                                    \
    T *gq = cpu_ptr(&j->a->out[0], 0);                                         \
    for (int64_t t = begin; t < end; t++) {                                    \
      int64_t b = t / j->nqb, i0 = (t % j->nqb) * BQ;                          \
      int64_t nq = j->L - i0 < BQ ? j->L - i0 : BQ;                            \
      T *gqb = gq + (b * j->L + i0) * j->E;                                    \
      memset(gqb, 0, sizeof(T) * (size_t)(nq * j->E));                         \
      bw_d_##SUF(j, b, i0, nq, drow);                                          \
      int64_t send = j->p->is_causal && i0 + nq < j->S ? i0 + nq : j->S;       \
      for (int64_t j0 = 0; j0 < send; j0 += BK) {                              \
        int64_t nk = send - j0 < BK ? send - j0 : BK;                          \
        bw_block_##SUF(j, b, i0, nq, j0, nk, pb, ds, drow, kb);                \
        torc_cpu__gemm(j->a->in[1].dtype, 0, 0, nq, j->E, nk, 1, ds, nk,       \
                       kd + (b * j->S + j0) * j->E, j->E, 1, gqb, j->E);       \
      }                                                                        \
    }                                                                          \
    free(pb);                                                                  \
  }                                                                            \
                                                                               \
  static void bw_kv_task_##SUF(void *ctx, int64_t begin, int64_t end) {        \
    att_bw_job *j = ctx;                                                       \
    T *pb = malloc(sizeof(T) * (size_t)(2 * BQ * BK + BQ) + BK);               \
    if (pb == NULL) {                                                          \
      atomic_store(&j->oom, 1);                                                \
      return;                                                                  \
    }                                                                          \
    T *ds = pb + BQ * BK, *drow = ds + BQ * BK;                                \
    uint8_t *kb = (uint8_t *)(drow + BQ);                                      \
    const T *qd = cpu_ptr(&j->a->in[1], 0), *gyd = cpu_ptr(&j->a->in[0], 0);   \
    T *gk = cpu_ptr(&j->a->out[1], 0), *gv = cpu_ptr(&j->a->out[2], 0);        \
    for (int64_t t = begin; t < end; t++) {                                    \
      int64_t b = t / j->nkb, j0 = (t % j->nkb) * BK;                          \
      int64_t nk = j->S - j0 < BK ? j->S - j0 : BK;                            \
      T *gkb = gk + (b * j->S + j0) * j->E;                                    \
      T *gvb = gv + (b * j->S + j0) * j->Ev;                                   \
      memset(gkb, 0, sizeof(T) * (size_t)(nk * j->E));                         \
      memset(gvb, 0, sizeof(T) * (size_t)(nk * j->Ev));                        \
      int64_t qbeg = j->p->is_causal ? j0 / BQ * BQ : 0;                       \
      for (int64_t i0 = qbeg; i0 < j->L; i0 += BQ) {                           \
        int64_t nq = j->L - i0 < BQ ? j->L - i0 : BQ;                          \
        bw_d_##SUF(j, b, i0, nq, drow);                                        \
        bw_block_##SUF(j, b, i0, nq, j0, nk, pb, ds, drow, kb);                \
        torc_cpu__gemm(j->a->in[1].dtype, 1, 0, nk, j->Ev, nq, 1, pb, nk,      \
                       gyd + (b * j->L + i0) * j->Ev, j->Ev, 1, gvb, j->Ev);   \
        torc_cpu__gemm(j->a->in[1].dtype, 1, 0, nk, j->E, nq, 1, ds, nk,       \
                       qd + (b * j->L + i0) * j->E, j->E, 1, gkb, j->E);       \
      }                                                                        \
    }                                                                          \
    free(pb);                                                                  \
  }                                                                            \
                                                                               \
  /* Both passes in one, for whole (batch, head)s [begin, end): each block's \
   * P and dS are computed once and feed gq, gk and gv, the pairs of blocks  \
   * and the order of the sums being the two passes' (the same bits). */      \
  static void bw_one_task_##SUF(void *ctx, int64_t begin, int64_t end) {       \
    att_bw_job *j = ctx;                                                       \
    T *pb = malloc(sizeof(T) * (size_t)(2 * BQ * BK + BQ) + BK);               \
    if (pb == NULL) {                                                          \
      atomic_store(&j->oom, 1);                                                \
      return;                                                                  \
    }                                                                          \
    T *ds = pb + BQ * BK, *drow = ds + BQ * BK;                                \
    uint8_t *kb = (uint8_t *)(drow + BQ);                                      \
    int32_t dt = j->a->in[1].dtype;                                            \
    const T *qd = cpu_ptr(&j->a->in[1], 0), *kd = cpu_ptr(&j->a->in[2], 0);    \
    const T *gyd = cpu_ptr(&j->a->in[0], 0);                                   \
    T *gq = cpu_ptr(&j->a->out[0], 0), *gk = cpu_ptr(&j->a->out[1], 0);        \
    T *gv = cpu_ptr(&j->a->out[2], 0);                                         \
    int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev;                          \
    for (int64_t b = begin; b < end; b++) {                                    \
      memset(gk + b * S * E, 0, sizeof(T) * (size_t)(S * E));                  \
      memset(gv + b * S * Ev, 0, sizeof(T) * (size_t)(S * Ev));                \
      for (int64_t i0 = 0; i0 < L; i0 += BQ) {                                 \
        int64_t nq = L - i0 < BQ ? L - i0 : BQ;                                \
        T *gqb = gq + (b * L + i0) * E;                                        \
        memset(gqb, 0, sizeof(T) * (size_t)(nq * E));                         \
        bw_d_##SUF(j, b, i0, nq, drow);                                        \
        /* the q pass's keys end at the block's last query, the kv pass's  \
         * at the next BQ boundary (blocks of zeros past L) */                 \
        int64_t qend = j->p->is_causal && i0 + nq < S ? i0 + nq : S;           \
        int64_t kend = j->p->is_causal && i0 + BQ < S ? i0 + BQ : S;           \
        for (int64_t j0 = 0; j0 < kend; j0 += BK) {                            \
          int64_t nk = S - j0 < BK ? S - j0 : BK;                              \
          bw_block_##SUF(j, b, i0, nq, j0, nk, pb, ds, drow, kb);              \
          if (j0 < qend) {                                                     \
            int64_t nkq = qend - j0 < BK ? qend - j0 : BK;                     \
            torc_cpu__gemm(dt, 0, 0, nq, E, nkq, 1, ds, nk,                    \
                           kd + (b * S + j0) * E, E, 1, gqb, E);               \
          }                                                                    \
          torc_cpu__gemm(dt, 1, 0, nk, Ev, nq, 1, pb, nk,                      \
                         gyd + (b * L + i0) * Ev, Ev, 1,                       \
                         gv + (b * S + j0) * Ev, Ev);                          \
          torc_cpu__gemm(dt, 1, 0, nk, E, nq, 1, ds, nk,                       \
                         qd + (b * L + i0) * E, E, 1, gk + (b * S + j0) * E,   \
                         E);                                                   \
        }                                                                      \
      }                                                                        \
    }                                                                          \
    free(pb);                                                                  \
  }

DEFINE_SDPA_BW(f32, float)
DEFINE_SDPA_BW(f64, double)

/* in gy, q, k, v, o, lse (+ mask); out gq, gk, gv. */
static int k_sdpa_backward(const torc_kernel_args *a) {
  const torc_attention_kparams *p = a->params;
  if (a->n_in < 6 || a->n_out != 3 || p == NULL ||
      a->params_size < sizeof *p || !(p->dropout_p < 1))
    return TORC_KERNEL_DECLINED;
  const torc_ktensor *q = &a->in[1];
  int32_t dt = q->dtype;
  if ((dt != TORC_F32 && dt != TORC_F64) || q->ndim < 2)
    return TORC_KERNEL_DECLINED;
  for (int i = 0; i < 6; i++)
    if (a->in[i].dtype != dt || !cpu_rowmajor(&a->in[i]))
      return TORC_KERNEL_DECLINED;
  for (int i = 0; i < 3; i++)
    if (a->out[i].dtype != dt || !cpu_rowmajor(&a->out[i]))
      return TORC_KERNEL_DECLINED;
  if (p->has_mask && a->n_in == 7 && a->in[6].dtype != TORC_BOOL &&
      a->in[6].dtype != dt)
    return TORC_KERNEL_DECLINED;
  att_bw_job j = {.a = a, .p = p, .nb = q->ndim - 2};
  j.drop = p->dropout_p > 0;
  j.thresh = torc_cpu__keep_threshold(p->dropout_p);
  j.kscale = j.drop ? 1.0 / (1.0 - p->dropout_p) : 1.0;
  int64_t B = 1;
  for (int d = 0; d < j.nb; d++)
    B *= q->shape[d];
  j.L = q->shape[j.nb];
  j.E = q->shape[j.nb + 1];
  j.S = a->in[2].shape[j.nb];
  j.Ev = a->in[3].shape[j.nb + 1];
  j.nqb = (j.L + BQ - 1) / BQ;
  j.nkb = (j.S + BK - 1) / BK;
  atomic_init(&j.oom, 0);
  torc_cpu__threads(a->n_threads > 0 ? a->n_threads : 1);
  if (B >= BW_ONE_MIN) /* a task per (batch, head): P and dS once */
    torc_cpu__parallel_for(a->n_threads, B, 1,
                           dt == TORC_F32 ? bw_one_task_f32 : bw_one_task_f64,
                           &j);
  else {
    if (B * j.nqb > 0)
      torc_cpu__parallel_for(a->n_threads, B * j.nqb, 1,
                             dt == TORC_F32 ? bw_q_task_f32 : bw_q_task_f64,
                             &j);
    if (B * j.nkb > 0) /* also zeroes gk, gv when L is 0 */
      torc_cpu__parallel_for(
          a->n_threads, B * j.nkb, 1,
          dt == TORC_F32 ? bw_kv_task_f32 : bw_kv_task_f64, &j);
  }
  if (atomic_load(&j.oom))
    return torc_cpu__set_error(
        TORC_ERR_OOM,
        "cpu kernel 'scaled_dot_product_attention_backward': out of memory "
        "for blocks of %d x %d scores",
        BQ, BK);
  return TORC_OK;
}

/* in q, k, v (+ mask); out o, lse (the contract in torc/plugin.h). */
static int k_sdpa(const torc_kernel_args *a) {
  const torc_attention_kparams *p = a->params;
  if (a->n_in < 3 || a->n_out != 2 || p == NULL ||
      a->params_size < sizeof *p || !(p->dropout_p < 1))
    return TORC_KERNEL_DECLINED;
  const torc_ktensor *q = &a->in[0];
  int32_t dt = q->dtype;
  if ((dt != TORC_F32 && dt != TORC_F64) || q->ndim < 2)
    return TORC_KERNEL_DECLINED;
  for (int i = 0; i < 3; i++)
    if (a->in[i].dtype != dt || !cpu_rowmajor(&a->in[i]))
      return TORC_KERNEL_DECLINED;
  if (!cpu_rowmajor(&a->out[0]) || !cpu_rowmajor(&a->out[1]) ||
      a->out[1].dtype != dt)
    return TORC_KERNEL_DECLINED;
  if (p->has_mask && a->n_in == 4 && a->in[3].dtype != TORC_BOOL &&
      a->in[3].dtype != dt)
    return TORC_KERNEL_DECLINED;
  att_job j = {.a = a, .p = p, .nb = q->ndim - 2};
  j.drop = p->dropout_p > 0;
  j.thresh = torc_cpu__keep_threshold(p->dropout_p);
  j.kscale = j.drop ? 1.0 / (1.0 - p->dropout_p) : 1.0;
  int64_t B = 1;
  for (int d = 0; d < j.nb; d++)
    B *= q->shape[d];
  j.L = q->shape[j.nb];
  j.E = q->shape[j.nb + 1];
  j.S = a->in[1].shape[j.nb];
  j.Ev = a->in[2].shape[j.nb + 1];
  j.nqb = (j.L + BQ - 1) / BQ;
  atomic_init(&j.oom, 0);
  if (B * j.nqb == 0)
    return TORC_OK;
  torc_cpu__threads(a->n_threads > 0 ? a->n_threads : 1);
  torc_cpu__parallel_for(a->n_threads, B * j.nqb, 1,
                         dt == TORC_F32 ? sdpa_task_f32 : sdpa_task_f64, &j);
  if (atomic_load(&j.oom))
    return torc_cpu__set_error(
        TORC_ERR_OOM,
        "cpu kernel 'scaled_dot_product_attention': out of memory for a "
        "block of %d x %d scores",
        BQ, BK);
  return TORC_OK;
}

int torc_cpu__register_attention(const torc_host *host, torc_plugin *self) {
  static const torc_cpu_kernel kernels[] = {
      {"scaled_dot_product_attention", k_sdpa, 0},
      {"scaled_dot_product_attention_backward", k_sdpa_backward, 0},
  };
  static const int32_t dtypes[] = {TORC_F32, TORC_F64};
  return torc_cpu__register_table(host, self, kernels, 2, dtypes, 2);
}
