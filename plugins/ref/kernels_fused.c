/* plugins/ref/kernels_fused.c — reference kernels of the fused ops:
 * "cross_entropy" and "cross_entropy_backward" (contracts in torc/nn.h),
 * "sgd_step_" and "adam_step_" (torc/optim.h) and their list forms
 * (torc/foreach.h). Registered with
 * TORC_KERNEL_CONTIGUOUS: element i of every operand is at offset + i.
 *
 * cross_entropy computes in double and rounds once per stored value. The
 * optimizer steps instead round every intermediate to the parameter's
 * dtype (fz_round), as the chain of elementwise ops they replace does, so
 * they give the same bits as those ops in every floating dtype.
 */
#include "ref_fused.h"

#include "torc/nn.h"
#include "torc/optim.h"

/* v rounded to dtype dt (and back to double): what storing an
 * intermediate of an elementwise op into a tensor of dt does. */
static inline double fz_round(int dt, double v) {
  switch (dt) {
  case TORC_F32: return (float)v;
  case TORC_F16: return torc_f16_to_f32(torc_f32_to_f16((float)v));
  case TORC_BF16: return torc_bf16_to_f32(torc_f32_to_bf16((float)v));
  default: return v;
  }
}

/* ---- cross_entropy ---- */

typedef struct ce_geom {
  int64_t N, C, S;
  double W; /* the sum of the class weights (C without weights) */
} ce_geom;

/* The forward's inputs (n_fixed 2: x, target) or the backward's (6: gy,
 * x, target, max, logsum, total), then the optional weight; n_out
 * outputs. */
static int ce_setup(const torc_kernel_args *a, int n_fixed, int n_out,
                    ce_geom *g, const torc_cross_entropy_params **p,
                    const torc_ktensor **x, const torc_ktensor **w) {
  int st = nn_check(a, n_fixed, n_fixed + 1, n_out);
  if (st)
    return st;
  *p = ref_params(a, sizeof **p);
  if (*p == NULL)
    return TORC_ERR_INTERNAL;
  *x = &a->in[n_fixed == 2 ? 0 : 1];
  *w = a->n_in == n_fixed + 1 ? &a->in[n_fixed] : NULL;
  if ((*x)->ndim != 3)
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel '%s': logits of %d dims, expected [N, C, S]",
                     a->op, (int)(*x)->ndim);
  g->N = (*x)->shape[0], g->C = (*x)->shape[1], g->S = (*x)->shape[2];
  g->W = (double)g->C;
  if (*w) {
    g->W = 0;
    for (int64_t c = 0; c < g->C; c++)
      g->W += nn_ld(*w, c);
  }
  return TORC_OK;
}

/* in x [N, C, S], target [N, S] (+ weight [C]); out loss, max, logsum,
 * total. log-softmax of element c is (x_c - max) - logsum. */
int torc_ref_k_cross_entropy(const torc_kernel_args *a) {
  const torc_cross_entropy_params *p;
  const torc_ktensor *x, *w;
  ce_geom g;
  int st = ce_setup(a, 2, 4, &g, &p, &x, &w);
  if (st)
    return st;
  const torc_ktensor *t = &a->in[1], *loss = &a->out[0];
  double eps = p->label_smoothing, total = 0, wsum = 0;
  int none = p->reduction == TORC_REDUCTION_NONE;
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t s = 0; s < g.S; s++) {
      int64_t base = n * g.C * g.S + s, r = n * g.S + s;
      double m = -INFINITY;
      for (int64_t c = 0; c < g.C; c++) {
        double v = nn_ld(x, base + c * g.S);
        if (v > m || v != v)
          m = v;
        if (m != m)
          break;
      }
      /* a row of -inf (or no classes) has max -inf and logsum 0; NaN or
       * +inf give NaN */
      double ls = 0;
      if (m == m && !isinf(m)) {
        double e = 0;
        for (int64_t c = 0; c < g.C; c++)
          e += exp(nn_ld(x, base + c * g.S) - m);
        ls = log(e);
      } else if (m == m && m > 0) {
        ls = NAN;
      }
      nn_st(&a->out[1], r, m);
      nn_st(&a->out[2], r, ls);
      int64_t k = nn_ldi(t, r);
      double v = 0;
      if (k != p->ignore_index) {
        if (k < 0 || k >= g.C)
          return ref_error(TORC_ERR_RANGE,
                           "cross_entropy: target %lld (element %lld) is "
                           "out of range for %lld classes",
                           (long long)k, (long long)r, (long long)g.C);
        double wt = w ? nn_ld(w, k) : 1;
        v = -wt * ((nn_ld(x, base + k * g.S) - m) - ls);
        if (eps > 0) {
          double sm = 0;
          for (int64_t c = 0; c < g.C; c++)
            sm -= (w ? nn_ld(w, c) : 1) *
                  ((nn_ld(x, base + c * g.S) - m) - ls);
          v = (1 - eps) * v + eps / (double)g.C * sm;
        }
        wsum += wt;
      }
      if (none)
        nn_st(loss, r, v);
      total += v;
    }
  nn_st(&a->out[3], 0, wsum);
  if (!none)
    nn_st(loss, 0, p->reduction == TORC_REDUCTION_MEAN ? total / wsum : total);
  return TORC_OK;
}

/* in gy, x, target, max, logsum, total (+ weight); out gx [N, C, S]. */
int torc_ref_k_cross_entropy_backward(const torc_kernel_args *a) {
  const torc_cross_entropy_params *p;
  const torc_ktensor *x, *w;
  ce_geom g;
  int st = ce_setup(a, 6, 1, &g, &p, &x, &w);
  if (st)
    return st;
  const torc_ktensor *gy = &a->in[0], *t = &a->in[2];
  const torc_ktensor *mt = &a->in[3], *lt = &a->in[4], *gx = &a->out[0];
  double eps = p->label_smoothing, tw = nn_ld(&a->in[5], 0);
  int none = p->reduction == TORC_REDUCTION_NONE;
  double g0 = none ? 0 : nn_ld(gy, 0);
  if (p->reduction == TORC_REDUCTION_MEAN)
    g0 /= tw;
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t s = 0; s < g.S; s++) {
      int64_t base = n * g.C * g.S + s, r = n * g.S + s;
      int64_t k = nn_ldi(t, r);
      if (k == p->ignore_index) {
        for (int64_t c = 0; c < g.C; c++)
          nn_st(gx, base + c * g.S, 0);
        continue;
      }
      double gr = none ? nn_ld(gy, r) : g0, m = nn_ld(mt, r);
      double ls = nn_ld(lt, r), wt = w ? nn_ld(w, k) : 1;
      for (int64_t c = 0; c < g.C; c++) {
        double pc = exp((nn_ld(x, base + c * g.S) - m) - ls);
        double d = (1 - eps) * wt * (pc - (c == k ? 1.0 : 0.0));
        if (eps > 0)
          d += eps / (double)g.C * (g.W * pc - (w ? nn_ld(w, c) : 1));
        nn_st(gx, base + c * g.S, gr * d);
      }
    }
  return TORC_OK;
}

/* ---- optimizer steps ---- */

/* Checks a step kernel's operands: one input, n_out outputs, all of the
 * output's numel; returns that numel through *n. */
static int step_check(const torc_kernel_args *a, int n_out, int64_t *n) {
  int st = ref_check_args(a, 1, n_out);
  if (st)
    return st;
  *n = ref_numel(a->out[0].ndim, a->out[0].shape);
  for (int i = 0; i < n_out; i++)
    if ((st = ref_check_same_shape(a, &a->out[i], &a->out[0])))
      return st;
  return ref_check_same_shape(a, &a->in[0], &a->out[0]);
}

/* in grad; out param (+ momentum_buffer). */
int torc_ref_k_sgd_step(const torc_kernel_args *a) {
  const torc_sgd_step_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  int64_t n;
  int st = step_check(a, p->momentum != 0 ? 2 : 1, &n);
  if (st)
    return st;
  const torc_ktensor *gt = &a->in[0], *pt = &a->out[0];
  const torc_ktensor *bt = p->momentum != 0 ? &a->out[1] : NULL;
  int dt = pt->dtype;
  double wd = fz_round(dt, p->weight_decay), mom = fz_round(dt, p->momentum);
  double damp = fz_round(dt, 1 - p->dampening), alr = fz_round(dt, -p->lr);
  for (int64_t i = 0; i < n; i++) {
    double pv = nn_ld(pt, i), d = nn_ld(gt, i);
    if (p->maximize)
      d = -d;
    if (p->weight_decay != 0)
      d = fz_round(dt, d + fz_round(dt, wd * pv));
    if (bt) {
      double b = d;
      if (!p->first_step)
        b = fz_round(dt, fz_round(dt, nn_ld(bt, i) * mom) +
                             fz_round(dt, damp * d));
      nn_st(bt, i, b);
      d = p->nesterov ? fz_round(dt, d + fz_round(dt, mom * b)) : b;
    }
    nn_st(pt, i, pv + fz_round(dt, alr * d));
  }
  return TORC_OK;
}

/* in grad; out param, exp_avg, exp_avg_sq (+ max_exp_avg_sq). */
int torc_ref_k_adam_step(const torc_kernel_args *a) {
  const torc_adam_step_kparams *k = ref_params(a, sizeof *k);
  if (k == NULL)
    return TORC_ERR_INTERNAL;
  const torc_adam_step_params *p = &k->p;
  int64_t n;
  int st = step_check(a, p->amsgrad ? 4 : 3, &n);
  if (st)
    return st;
  const torc_ktensor *gt = &a->in[0], *pt = &a->out[0], *mt = &a->out[1];
  const torc_ktensor *vt = &a->out[2], *vmt = p->amsgrad ? &a->out[3] : NULL;
  int dt = pt->dtype;
  double b1 = fz_round(dt, p->beta1), omb1 = fz_round(dt, 1 - p->beta1);
  double b2 = fz_round(dt, p->beta2), omb2 = fz_round(dt, 1 - p->beta2);
  double wd = fz_round(dt, p->weight_decay);
  double decay = fz_round(dt, 1 - p->lr * p->weight_decay);
  double bc2s = fz_round(dt, k->bias_correction2_sqrt);
  double eps = fz_round(dt, p->eps), nss = fz_round(dt, -k->step_size);
  for (int64_t i = 0; i < n; i++) {
    double pv = nn_ld(pt, i), g = nn_ld(gt, i);
    if (p->maximize)
      g = -g;
    if (p->decoupled)
      pv = fz_round(dt, pv * decay);
    else if (p->weight_decay != 0)
      g = fz_round(dt, g + fz_round(dt, wd * pv));
    double m = fz_round(dt, fz_round(dt, nn_ld(mt, i) * b1) +
                                fz_round(dt, omb1 * g));
    double v = fz_round(dt, fz_round(dt, nn_ld(vt, i) * b2) +
                                fz_round(dt, fz_round(dt, omb2 * g) * g));
    nn_st(mt, i, m);
    nn_st(vt, i, v);
    if (vmt) {
      double vm = nn_ld(vmt, i);
      vm = vm != vm || v != v ? vm + v : vm > v ? vm : v;
      nn_st(vmt, i, vm);
      v = vm;
    }
    double den = fz_round(dt, fz_round(dt, fz_round(dt, sqrt(v)) / bc2s) +
                                  eps);
    nn_st(pt, i, pv + fz_round(dt, fz_round(dt, nss * m) / den));
  }
  return TORC_OK;
}

/* ---- the list forms (torc/foreach.h) ----
 * in grads[n] (and a one-element bool: where false nothing is written);
 * out params[n], then each state list n long, in the single kernel's
 * order. Each parameter is stepped by the single-tensor kernel
 * above, so the bits are the same; the list is one kernel call. */

static int foreach_step(const torc_kernel_args *a, int per,
                        int (*one)(const torc_kernel_args *)) {
  int n = per > 0 ? a->n_out / per : 0;
  if (n < 1 || a->n_out != n * per || per > 4 ||
      (a->n_in != n && a->n_in != n + 1))
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel '%s': %d inputs and %d outputs; expected n "
                     "grads (and a flag) and %d lists of n",
                     a->op, (int)a->n_in, (int)a->n_out, per);
  if (a->n_in == n + 1) { /* the flag: step only where it is true */
    const torc_ktensor *f = &a->in[n];
    if (ref_load_f(f->dtype, ref_ptr(f, f->offset)) == 0)
      return TORC_OK;
  }
  for (int k = 0; k < n; k++) {
    torc_ktensor outs[4];
    for (int j = 0; j < per; j++)
      outs[j] = a->out[j * n + k];
    torc_kernel_args s = *a;
    s.n_in = 1;
    s.n_out = per;
    s.in = &a->in[k];
    s.out = outs;
    int st = one(&s);
    if (st)
      return st;
  }
  return TORC_OK;
}

int torc_ref_k_foreach_sgd_step(const torc_kernel_args *a) {
  const torc_sgd_step_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  return foreach_step(a, p->momentum != 0 ? 2 : 1, torc_ref_k_sgd_step);
}

int torc_ref_k_foreach_adam_step(const torc_kernel_args *a) {
  const torc_adam_step_kparams *k = ref_params(a, sizeof *k);
  if (k == NULL)
    return TORC_ERR_INTERNAL;
  return foreach_step(a, k->p.amsgrad ? 4 : 3, torc_ref_k_adam_step);
}
