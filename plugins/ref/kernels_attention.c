/* plugins/ref/kernels_attention.c — "tril", "triu", "masked_fill" and
 * "scaled_dot_product_attention" with its backward. The attention kernels
 * are the definition done directly: for each query row of each (batch,
 * head), the row's scores q k^T * scale (masked), their softmax, the
 * weighted sum of v; in double, one row of S scores at a time, so memory
 * stays linear in the sequence lengths. Every kernel walks any strides.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_util.h"
#include "torc/philox.h"

/* ---- tril, triu, masked_fill ---- */

static int is_floating(int dt) {
  return dt == TORC_F32 || dt == TORC_F64 || dt == TORC_F16 ||
         dt == TORC_BF16;
}

/* out = x, zeroed where (j - i) is above (upper 0) or below (upper 1) the
 * diagonal, i and j the last two indices. */
static int tri(const torc_kernel_args *a, int upper) {
  int st = ref_check_args(a, 1, 1);
  const torc_scalar_params *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  if (x->ndim < 2)
    return ref_error(TORC_ERR_SHAPE, "ref kernel '%s': x has %d dims",
                     upper ? "triu" : "tril", (int)x->ndim);
  size_t es = torc_dtype_size((torc_dtype)x->dtype);
  int nd = x->ndim;
  ref_iter it;
  ref_iter_init(&it, nd, x->shape);
  ref_iter_add_t(&it, x);
  ref_iter_add_t(&it, y);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    int64_t d = it.idx[nd - 1] - it.idx[nd - 2];
    int keep = upper ? d >= p->ia : d <= p->ia;
    if (keep)
      memcpy(ref_ptr(y, it.pos[1]), ref_ptr(x, it.pos[0]), es);
    else
      memset(ref_ptr(y, it.pos[1]), 0, es); /* zero bits: 0 in every dtype */
  }
  return TORC_OK;
}

int torc_ref_k_tril(const torc_kernel_args *a) { return tri(a, 0); }
int torc_ref_k_triu(const torc_kernel_args *a) { return tri(a, 1); }

/* in x, mask (any dtype, nonzero is set; stride 0 where broadcast); out y. */
int torc_ref_k_masked_fill(const torc_kernel_args *a) {
  int st = ref_check_args(a, 2, 1);
  const torc_fill_params *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *m = &a->in[1], *y = &a->out[0];
  size_t es = torc_dtype_size((torc_dtype)x->dtype);
  ref_iter it;
  ref_iter_init(&it, y->ndim, y->shape);
  ref_iter_add_t(&it, x);
  ref_iter_add_t(&it, m);
  ref_iter_add_t(&it, y);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    void *out = ref_ptr(y, it.pos[2]);
    if (ref_load_f(m->dtype, ref_ptr(m, it.pos[1])) == 0)
      memcpy(out, ref_ptr(x, it.pos[0]), es);
    else if (is_floating(y->dtype))
      ref_store_f(y->dtype, out, p->value);
    else
      ref_store_i(y->dtype, out, p->ivalue);
  }
  return TORC_OK;
}

/* ---- attention ---- */

/* The element offset of (batch b, i, j) in t, whose first nb dims are the
 * batch dims (b row-major over them) and whose next two (or one, for lse:
 * pass j = -1) are i and j. */
static int64_t at(const torc_ktensor *t, int nb, int64_t b, int64_t i,
                  int64_t j) {
  int64_t pos = t->offset;
  for (int d = nb - 1; d >= 0; d--) {
    int64_t n = t->shape[d] ? t->shape[d] : 1;
    pos += (b % n) * t->strides[d];
    b /= n;
  }
  pos += i * t->strides[nb];
  if (j >= 0)
    pos += j * t->strides[nb + 1];
  return pos;
}

static double ld(const torc_ktensor *t, int64_t pos) {
  return ref_load_f(t->dtype, ref_ptr(t, pos));
}

static void st_f(const torc_ktensor *t, int64_t pos, double v) {
  ref_store_f(t->dtype, ref_ptr(t, pos), v);
}

/* The shapes of one call. */
typedef struct att_dims {
  int nb;              /* batch dims */
  int64_t B, L, S, E, Ev;
} att_dims;

static int att_dims_of(const char *name, const torc_ktensor *q,
                       const torc_ktensor *k, const torc_ktensor *v,
                       att_dims *d) {
  if (q->ndim < 2 || k->ndim != q->ndim || v->ndim != q->ndim)
    return ref_error(TORC_ERR_SHAPE, "ref kernel '%s': q, k, v have %d, %d, "
                     "%d dims", name, (int)q->ndim, (int)k->ndim,
                     (int)v->ndim);
  d->nb = q->ndim - 2;
  d->B = ref_numel(d->nb, q->shape);
  d->L = q->shape[d->nb];
  d->E = q->shape[d->nb + 1];
  d->S = k->shape[d->nb];
  d->Ev = v->shape[d->nb + 1];
  return TORC_OK;
}

/* Row (b, i)'s scaled, masked scores into s[S]; returns their maximum. */
static double scores(const torc_attention_kparams *p, const att_dims *d,
                     const torc_ktensor *q, const torc_ktensor *k,
                     const torc_ktensor *m, int64_t b, int64_t i, double *s,
                     double *qrow) {
  for (int64_t e = 0; e < d->E; e++)
    qrow[e] = ld(q, at(q, d->nb, b, i, e));
  double mx = -INFINITY;
  for (int64_t j = 0; j < d->S; j++) {
    double v = -INFINITY;
    if (!(p->is_causal && j > i)) {
      double dot = 0;
      for (int64_t e = 0; e < d->E; e++)
        dot += qrow[e] * ld(k, at(k, d->nb, b, j, e));
      v = dot * p->scale;
      if (m) {
        double mv = ld(m, at(m, d->nb, b, i, j));
        if (m->dtype == TORC_BOOL)
          v = mv != 0 ? v : -INFINITY;
        else
          v += mv;
      }
    }
    s[j] = v;
    if (v > mx)
      mx = v;
  }
  return mx;
}

/* The dropout factor of weight (row r, key j): 1 without dropout. */
static double keep(const torc_attention_kparams *p, const att_dims *d,
                   int64_t r, int64_t j) {
  if (p->dropout_p <= 0)
    return 1;
  if (p->dropout_p >= 1)
    return 0;
  double u = torc_philox_uniform(p->seed,
                                 p->offset + (uint64_t)(r * d->S + j));
  return u >= p->dropout_p ? 1.0 / (1.0 - p->dropout_p) : 0;
}

/* in q, k, v (+ mask); out o, lse. */
int torc_ref_k_sdpa(const torc_kernel_args *a) {
  int st = ref_check_args(a, a->n_in == 4 ? 4 : 3, 2);
  const torc_attention_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *q = &a->in[0], *k = &a->in[1], *v = &a->in[2];
  const torc_ktensor *m = p->has_mask && a->n_in == 4 ? &a->in[3] : NULL;
  const torc_ktensor *o = &a->out[0], *lse = &a->out[1];
  att_dims d;
  if ((st = att_dims_of("scaled_dot_product_attention", q, k, v, &d)))
    return st;
  double *s = malloc(sizeof(double) * (size_t)(d.S + d.E + d.Ev + 1));
  if (s == NULL)
    return ref_error(TORC_ERR_OOM, "ref kernel 'scaled_dot_product_attention'"
                     ": out of memory for a row of %lld scores",
                     (long long)d.S);
  double *qrow = s + d.S, *acc = qrow + d.E;
  for (int64_t b = 0; b < d.B; b++)
    for (int64_t i = 0; i < d.L; i++) {
      double mx = scores(p, &d, q, k, m, b, i, s, qrow);
      double sum = 0;
      for (int64_t j = 0; j < d.S; j++)
        sum += s[j] == -INFINITY ? 0 : exp(s[j] - mx);
      /* a row with no key: -inf, and NaN weights, as softmax of -infs */
      double l = mx == -INFINITY ? -INFINITY : mx + log(sum);
      for (int64_t e = 0; e < d.Ev; e++)
        acc[e] = 0;
      for (int64_t j = 0; j < d.S; j++) {
        double w = mx == -INFINITY ? NAN : exp(s[j] - l);
        w *= keep(p, &d, b * d.L + i, j);
        if (w == 0)
          continue;
        for (int64_t e = 0; e < d.Ev; e++)
          acc[e] += w * ld(v, at(v, d.nb, b, j, e));
      }
      for (int64_t e = 0; e < d.Ev; e++)
        st_f(o, at(o, d.nb, b, i, e), acc[e]);
      st_f(lse, at(lse, d.nb, b, i, -1), l);
    }
  free(s);
  return TORC_OK;
}

/* in gy, q, k, v, o, lse (+ mask); out gq, gk, gv. With P the weights, M
 * the dropout factors and D = gy . o per row: gv += P M gy, dS = P (M gy
 * v^T - D), gq = scale dS k, gk += scale dS q. gk and gv accumulate in
 * double over the rows. */
int torc_ref_k_sdpa_backward(const torc_kernel_args *a) {
  int st = ref_check_args(a, a->n_in == 7 ? 7 : 6, 3);
  const torc_attention_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *gy = &a->in[0], *q = &a->in[1], *k = &a->in[2];
  const torc_ktensor *v = &a->in[3], *o = &a->in[4], *lse = &a->in[5];
  const torc_ktensor *m = p->has_mask && a->n_in == 7 ? &a->in[6] : NULL;
  const torc_ktensor *gq = &a->out[0], *gk = &a->out[1], *gv = &a->out[2];
  att_dims d;
  if ((st = att_dims_of("scaled_dot_product_attention_backward", q, k, v,
                        &d)))
    return st;
  size_t row = (size_t)(d.S + 2 * d.E + d.Ev);
  size_t acc = (size_t)(d.S * (d.E + d.Ev));
  double *s = malloc(sizeof(double) * (row + acc + 1));
  if (s == NULL)
    return ref_error(TORC_ERR_OOM, "ref kernel "
                     "'scaled_dot_product_attention_backward': out of memory "
                     "for %lld keys", (long long)d.S);
  double *qrow = s + d.S, *gqrow = qrow + d.E, *gyrow = gqrow + d.E;
  double *gkb = gyrow + d.Ev, *gvb = gkb + d.S * d.E;
  for (int64_t b = 0; b < d.B; b++) {
    memset(gkb, 0, sizeof(double) * acc);
    for (int64_t i = 0; i < d.L; i++) {
      scores(p, &d, q, k, m, b, i, s, qrow);
      double l = ld(lse, at(lse, d.nb, b, i, -1)), D = 0;
      for (int64_t e = 0; e < d.Ev; e++) {
        gyrow[e] = ld(gy, at(gy, d.nb, b, i, e));
        D += gyrow[e] * ld(o, at(o, d.nb, b, i, e));
      }
      for (int64_t e = 0; e < d.E; e++)
        gqrow[e] = 0;
      for (int64_t j = 0; j < d.S; j++) {
        double w = l == -INFINITY ? NAN : exp(s[j] - l);
        if (w == 0)
          continue;
        double mk = keep(p, &d, b * d.L + i, j), dp = 0;
        for (int64_t e = 0; e < d.Ev; e++) {
          double vv = ld(v, at(v, d.nb, b, j, e));
          dp += gyrow[e] * vv;
          gvb[j * d.Ev + e] += w * mk * gyrow[e];
        }
        double ds = w * (mk * dp - D) * p->scale;
        for (int64_t e = 0; e < d.E; e++) {
          gqrow[e] += ds * ld(k, at(k, d.nb, b, j, e));
          gkb[j * d.E + e] += ds * qrow[e];
        }
      }
      for (int64_t e = 0; e < d.E; e++)
        st_f(gq, at(gq, d.nb, b, i, e), gqrow[e]);
    }
    for (int64_t j = 0; j < d.S; j++) {
      for (int64_t e = 0; e < d.E; e++)
        st_f(gk, at(gk, d.nb, b, j, e), gkb[j * d.E + e]);
      for (int64_t e = 0; e < d.Ev; e++)
        st_f(gv, at(gv, d.nb, b, j, e), gvb[j * d.Ev + e]);
    }
  }
  free(s);
  return TORC_OK;
}
