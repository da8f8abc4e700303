/* plugins/cpu/attention.c — the fused forward of
 * "scaled_dot_product_attention" for f32 and f64, flash-attention style:
 * each task takes a block of query rows of one (batch, head) and walks
 * the keys in blocks, the block's scores a GEMM, folded into a running
 * maximum, sum and output per row (the online softmax), so no [L, S]
 * score matrix exists: scratch is one block of scores per thread. Under
 * is_causal the walk stops at the block's last query. It declines dropout
 * and strided q, k, v (ref serves those), and leaves the backward to ref,
 * which recomputes the weights row by row from the saved log-sum-exp.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

enum { BQ = 64, BK = 256 };

/* 1 if t is row-major contiguous from its offset. */
static int rowmajor(const torc_ktensor *t) {
  int64_t want = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] != 1 && t->strides[d] != want)
      return 0;
    want *= t->shape[d];
  }
  return 1;
}

typedef struct att_job {
  const torc_kernel_args *a;
  const torc_attention_kparams *p;
  int nb;
  int64_t L, S, E, Ev, nqb;
  _Atomic int oom;
} att_job;

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

#define DEFINE_SDPA(SUF, T, EXP, LOG)                                          \
  static void sdpa_task_##SUF(void *ctx, int64_t begin, int64_t end) {         \
    att_job *j = ctx;                                                          \
    const torc_kernel_args *a = j->a;                                          \
    const torc_attention_kparams *p = j->p;                                    \
    const torc_ktensor *m = p->has_mask && a->n_in == 4 ? &a->in[3] : NULL;    \
    int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev;                          \
    T *s = malloc(sizeof(T) * (size_t)(BQ * BK + BQ * Ev + 2 * BQ));          \
    if (s == NULL) {                                                           \
      atomic_store(&j->oom, 1);                                                \
      return;                                                                  \
    }                                                                          \
    T *acc = s + BQ * BK, *mx = acc + BQ * Ev, *sum = mx + BQ;                 \
    const T *qd = cpu_ptr(&a->in[0], 0), *kd = cpu_ptr(&a->in[1], 0);          \
    const T *vd = cpu_ptr(&a->in[2], 0);                                       \
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
          int64_t i = i0 + r;                                                  \
          int64_t mr = m ? mask_row(m, j->nb, b, i) : 0;                       \
          int64_t ms = m ? m->strides[j->nb + 1] : 0;                          \
          for (int64_t c = 0; c < nk; c++) {                                   \
            int64_t jj = j0 + c;                                               \
            if (p->is_causal && jj > i)                                        \
              row[c] = -INFINITY;                                              \
            else if (m && m->dtype == TORC_BOOL)                               \
              row[c] = ((const uint8_t *)m->data)[mr + jj * ms]                \
                           ? row[c]                                            \
                           : -INFINITY;                                        \
            else if (m)                                                        \
              row[c] += ((const T *)m->data)[mr + jj * ms];                    \
            bm = row[c] > bm ? row[c] : bm;                                    \
          }                                                                    \
          T nm = bm > mx[r] ? bm : mx[r];                                      \
          if (nm == -INFINITY) { /* nothing yet in this row */                 \
            memset(row, 0, sizeof(T) * (size_t)nk);                            \
            continue;                                                          \
          }                                                                    \
          T corr = EXP(mx[r] - nm), add = 0;                                   \
          for (int64_t c = 0; c < nk; c++) {                                   \
            row[c] = EXP(row[c] - nm);                                         \
            add += row[c];                                                     \
          }                                                                    \
          sum[r] = sum[r] * corr + add;                                        \
          mx[r] = nm;                                                          \
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
        for (int64_t e = 0; e < Ev; e++)                                       \
          orow[e] = none ? (S ? (T)NAN : 0) : acc[r * Ev + e] / sum[r];        \
        ld[b * L + i0 + r] = none ? (T)-INFINITY : mx[r] + LOG(sum[r]);        \
      }                                                                        \
    }                                                                          \
    free(s);                                                                   \
  }

DEFINE_SDPA(f32, float, expf, logf)
DEFINE_SDPA(f64, double, exp, log)

/* in q, k, v (+ mask); out o, lse (the contract in torc/plugin.h). */
static int k_sdpa(const torc_kernel_args *a) {
  const torc_attention_kparams *p = a->params;
  if (a->n_in < 3 || a->n_out != 2 || p == NULL ||
      a->params_size < sizeof *p || p->dropout_p > 0)
    return TORC_KERNEL_DECLINED;
  const torc_ktensor *q = &a->in[0];
  int32_t dt = q->dtype;
  if ((dt != TORC_F32 && dt != TORC_F64) || q->ndim < 2)
    return TORC_KERNEL_DECLINED;
  for (int i = 0; i < 3; i++)
    if (a->in[i].dtype != dt || !rowmajor(&a->in[i]))
      return TORC_KERNEL_DECLINED;
  if (!rowmajor(&a->out[0]) || !rowmajor(&a->out[1]) ||
      a->out[1].dtype != dt)
    return TORC_KERNEL_DECLINED;
  if (p->has_mask && a->n_in == 4 && a->in[3].dtype != TORC_BOOL &&
      a->in[3].dtype != dt)
    return TORC_KERNEL_DECLINED;
  att_job j = {.a = a, .p = p, .nb = q->ndim - 2};
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
  };
  static const int32_t dtypes[] = {TORC_F32, TORC_F64};
  return torc_cpu__register_table(host, self, kernels, 1, dtypes, 2);
}
