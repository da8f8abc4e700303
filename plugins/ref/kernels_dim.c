/* plugins/ref/kernels_dim.c — the kernels that look at groups of
 * elements: the reductions var, std, logsumexp and norm (each group
 * gathered into a buffer of doubles, then folded), the ops along one dim
 * (cumsum, max_dim/min_dim with indices, softmax, log_softmax) and where.
 */
#include <stdlib.h>

#include "ref_util.h"

/* ---- reductions over a dims mask, folded in double ---- */

typedef double (*fold_fn)(const double *v, int64_t n, double extra);

/* Two passes: mean, then the squared deviations (more accurate than one). */
static double fold_var(const double *v, int64_t n, double correction) {
  double mean = 0, ss = 0;
  for (int64_t i = 0; i < n; i++)
    mean += v[i];
  mean /= (double)n;
  for (int64_t i = 0; i < n; i++)
    ss += (v[i] - mean) * (v[i] - mean);
  double div = (double)n - correction;
  return ss / (div > 0 ? div : 0);
}

static double fold_std(const double *v, int64_t n, double correction) {
  return sqrt(fold_var(v, n, correction));
}

/* max + log(sum e^(x - max)); an infinite max is the answer itself (all
 * -inf gives -inf, any +inf gives +inf); NaN propagates. */
static double fold_logsumexp(const double *v, int64_t n, double unused) {
  (void)unused;
  double m = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(v[i]))
      return v[i];
    if (v[i] > m)
      m = v[i];
  }
  if (isinf(m))
    return m;
  double s = 0;
  for (int64_t i = 0; i < n; i++)
    s += exp(v[i] - m);
  return m + log(s);
}

/* p = 1, 2 (scaled by the largest |x| so that it neither overflows nor
 * underflows) or inf; NaN propagates. */
static double fold_norm(const double *v, int64_t n, double p) {
  double r = 0;
  if (p == 1) {
    for (int64_t i = 0; i < n; i++)
      r += fabs(v[i]);
    return r;
  }
  double m = 0;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(v[i]))
      return v[i];
    if (fabs(v[i]) > m)
      m = fabs(v[i]);
  }
  if (isinf(p) || m == 0 || isinf(m))
    return m;
  for (int64_t i = 0; i < n; i++)
    r += (v[i] / m) * (v[i] / m);
  return m * sqrt(r);
}

static int fold_reduce(const torc_kernel_args *a, uint32_t mask, double extra,
                       fold_fn fold) {
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int nd = x->ndim;
  int64_t inner[TORC_KERNEL_MAX_DIMS];
  int ok = y->ndim == nd && (mask >> nd) == 0;
  for (int d = 0; ok && d < nd; d++) {
    int red = (mask >> d) & 1u;
    inner[d] = red ? x->shape[d] : 1;
    ok = y->shape[d] == (red ? 1 : x->shape[d]);
  }
  if (!ok) {
    char s1[128], s2[128];
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel '%s': output shape %s does not match input "
                     "shape %s reduced over dims mask 0x%x",
                     a->op, ref_shape_str(y, s1, sizeof s1),
                     ref_shape_str(x, s2, sizeof s2), (unsigned)mask);
  }
  if (!torc_dtype_is_float((torc_dtype)x->dtype))
    return ref_error(TORC_ERR_DTYPE, "ref kernel '%s' is not defined for %s",
                     a->op, ref_dtype_name(x->dtype));
  int64_t count = ref_numel(nd, inner);
  double *buf = malloc(sizeof(double) * (size_t)(count > 0 ? count : 1));
  if (buf == NULL)
    return ref_error(TORC_ERR_OOM, "ref kernel '%s': out of memory for %lld "
                     "elements", a->op, (long long)count);
  ref_iter outer;
  ref_iter_init(&outer, nd, y->shape);
  ref_iter_add_t(&outer, x);
  ref_iter_add_t(&outer, y);
  for (; !ref_iter_done(&outer); ref_iter_next(&outer)) {
    ref_iter in;
    ref_iter_init(&in, nd, inner);
    ref_iter_add(&in, outer.pos[0], x->strides);
    int64_t k = 0;
    for (; !ref_iter_done(&in); ref_iter_next(&in))
      buf[k++] = ref_load_f(x->dtype, ref_ptr(x, in.pos[0]));
    ref_store_f(y->dtype, ref_ptr(y, outer.pos[1]), fold(buf, count, extra));
  }
  free(buf);
  return TORC_OK;
}

static int reduce_kernel(const torc_kernel_args *a, fold_fn fold) {
  int st = ref_check_args(a, 1, 1);
  if (st != TORC_OK)
    return st;
  const torc_reduce_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  return fold_reduce(a, p->dims_mask, p->correction, fold);
}

int torc_ref_k_var(const torc_kernel_args *a) {
  return reduce_kernel(a, fold_var);
}
int torc_ref_k_std(const torc_kernel_args *a) {
  return reduce_kernel(a, fold_std);
}
int torc_ref_k_logsumexp(const torc_kernel_args *a) {
  return reduce_kernel(a, fold_logsumexp);
}
int torc_ref_k_norm(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 1);
  if (st != TORC_OK)
    return st;
  const torc_norm_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  if (!(p->p == 1 || p->p == 2 || (isinf(p->p) && p->p > 0)))
    return ref_error(TORC_ERR_INVALID, "ref kernel 'norm': p = %g (1, 2 or "
                     "inf only)", p->p);
  return fold_reduce(a, p->dims_mask, p->p, fold_norm);
}

/* ---- along one dim ----
 * A "line" is the elements of x along dim at one position of the other
 * dims. The outer walk covers x's shape with size 1 at dim; each out[k]
 * is walked with its own strides (size 1 at dim for max/min's outputs). */

typedef struct lines {
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  int nd, dim;
  int64_t len; /* elements per line */
} lines;

static int lines_init(const torc_kernel_args *a, lines *l) {
  const torc_dim_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0];
  l->nd = x->ndim;
  l->dim = p->dim;
  if ((x->ndim > 0 && (p->dim < 0 || p->dim >= x->ndim)) ||
      (x->ndim == 0 && p->dim != 0))
    return ref_error(TORC_ERR_INTERNAL, "ref kernel '%s': dim %d for %d dims",
                     a->op, (int)p->dim, (int)x->ndim);
  for (int d = 0; d < x->ndim; d++)
    l->shape[d] = d == p->dim ? 1 : x->shape[d];
  l->len = x->ndim ? x->shape[p->dim] : 1;
  return TORC_OK;
}

/* Stride along the line of t (0 for a 0-dim t). */
static int64_t line_stride(const lines *l, const torc_ktensor *t) {
  return l->nd ? t->strides[l->dim] : 0;
}

int torc_ref_k_cumsum(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 1);
  lines l;
  if (st == TORC_OK)
    st = ref_check_same_shape(a, &a->in[0], &a->out[0]);
  if (st == TORC_OK)
    st = lines_init(a, &l);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int is_float = torc_dtype_is_float((torc_dtype)x->dtype);
  int64_t sx = line_stride(&l, x), sy = line_stride(&l, y);
  ref_iter it;
  ref_iter_init(&it, l.nd, l.shape);
  ref_iter_add_t(&it, x);
  ref_iter_add_t(&it, y);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    double f = 0;
    int64_t i = 0;
    for (int64_t k = 0; k < l.len; k++) {
      const void *px = ref_ptr(x, it.pos[0] + k * sx);
      void *py = ref_ptr(y, it.pos[1] + k * sy);
      if (is_float) {
        f += ref_load_f(x->dtype, px);
        ref_store_f(y->dtype, py, f);
      } else {
        i = ref_iadd(i, ref_load_i(x->dtype, px));
        ref_store_i(y->dtype, py, i);
      }
    }
  }
  return TORC_OK;
}

/* max (sign 1) or min (sign -1) with the first index; a NaN wins (the
 * first one), as PyTorch. */
static int extreme_dim(const torc_kernel_args *a, int sign) {
  int st = ref_check_args(a, 1, 2);
  lines l;
  if (st == TORC_OK)
    st = lines_init(a, &l);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *x = &a->in[0], *v = &a->out[0], *ix = &a->out[1];
  int ok = v->ndim == l.nd && ix->ndim == l.nd && ix->dtype == TORC_I64 &&
           v->dtype == x->dtype;
  for (int d = 0; ok && d < l.nd; d++)
    ok = v->shape[d] == l.shape[d] && ix->shape[d] == l.shape[d];
  if (!ok || l.len == 0)
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel '%s': outputs must be values (%s) and i64 "
                     "indices of the input's shape with size 1 at dim %d, "
                     "over a non-empty dim",
                     a->op, ref_dtype_name(x->dtype), l.dim);
  int is_float = torc_dtype_is_float((torc_dtype)x->dtype);
  int64_t sx = line_stride(&l, x);
  ref_iter it;
  ref_iter_init(&it, l.nd, l.shape);
  ref_iter_add_t(&it, x);
  ref_iter_add_t(&it, v);
  ref_iter_add_t(&it, ix);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    int64_t best = 0;
    if (is_float) {
      double bv = ref_load_f(x->dtype, ref_ptr(x, it.pos[0]));
      for (int64_t k = 1; k < l.len && !isnan(bv); k++) {
        double c = ref_load_f(x->dtype, ref_ptr(x, it.pos[0] + k * sx));
        if (isnan(c) || (sign > 0 ? c > bv : c < bv))
          bv = c, best = k;
      }
      ref_store_f(v->dtype, ref_ptr(v, it.pos[1]), bv);
    } else {
      int64_t bv = ref_load_i(x->dtype, ref_ptr(x, it.pos[0]));
      for (int64_t k = 1; k < l.len; k++) {
        int64_t c = ref_load_i(x->dtype, ref_ptr(x, it.pos[0] + k * sx));
        if (sign > 0 ? c > bv : c < bv)
          bv = c, best = k;
      }
      ref_store_i(v->dtype, ref_ptr(v, it.pos[1]), bv);
    }
    ref_store_i(TORC_I64, ref_ptr(ix, it.pos[2]), best);
  }
  return TORC_OK;
}

int torc_ref_k_max_dim(const torc_kernel_args *a) { return extreme_dim(a, 1); }
int torc_ref_k_min_dim(const torc_kernel_args *a) { return extreme_dim(a, -1); }

/* softmax / log_softmax over each line, with the maximum subtracted. */
static int softmax(const torc_kernel_args *a, int log_form) {
  int st = ref_check_args(a, 1, 1);
  lines l;
  if (st == TORC_OK)
    st = ref_check_same_shape(a, &a->in[0], &a->out[0]);
  if (st == TORC_OK)
    st = lines_init(a, &l);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  if (!torc_dtype_is_float((torc_dtype)x->dtype))
    return ref_error(TORC_ERR_DTYPE, "ref kernel '%s' is not defined for %s",
                     a->op, ref_dtype_name(x->dtype));
  int64_t sx = line_stride(&l, x), sy = line_stride(&l, y);
  ref_iter it;
  ref_iter_init(&it, l.nd, l.shape);
  ref_iter_add_t(&it, x);
  ref_iter_add_t(&it, y);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    double m = -INFINITY, s = 0;
    for (int64_t k = 0; k < l.len; k++) {
      double v = ref_load_f(x->dtype, ref_ptr(x, it.pos[0] + k * sx));
      if (v > m || isnan(v))
        m = v;
      if (isnan(m))
        break;
    }
    /* An infinite maximum: subtracting it would give NaN for its own
     * element; PyTorch subtracts it anyway, so do the same. */
    for (int64_t k = 0; k < l.len; k++)
      s += exp(ref_load_f(x->dtype, ref_ptr(x, it.pos[0] + k * sx)) - m);
    double ls = log(s);
    for (int64_t k = 0; k < l.len; k++) {
      double d = ref_load_f(x->dtype, ref_ptr(x, it.pos[0] + k * sx)) - m;
      ref_store_f(y->dtype, ref_ptr(y, it.pos[1] + k * sy),
                  log_form ? d - ls : exp(d) / s);
    }
  }
  return TORC_OK;
}

int torc_ref_k_softmax(const torc_kernel_args *a) { return softmax(a, 0); }
int torc_ref_k_log_softmax(const torc_kernel_args *a) { return softmax(a, 1); }

/* ---- where: in[0] bool, in[1], in[2] and out of one dtype and shape ---- */

int torc_ref_k_where(const torc_kernel_args *a) {
  int st = ref_check_args(a, 3, 1);
  for (int i = 0; i < 3 && st == TORC_OK; i++)
    st = ref_check_same_shape(a, &a->in[i], &a->out[0]);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *c = &a->in[0], *x = &a->in[1], *y = &a->in[2],
                     *z = &a->out[0];
  if (c->dtype != TORC_BOOL || x->dtype != z->dtype || y->dtype != z->dtype)
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel 'where': dtypes %s, %s, %s -> %s (expected "
                     "bool and three equal dtypes)",
                     ref_dtype_name(c->dtype), ref_dtype_name(x->dtype),
                     ref_dtype_name(y->dtype), ref_dtype_name(z->dtype));
  size_t es = torc_dtype_size((torc_dtype)z->dtype);
  ref_iter it;
  ref_iter_init(&it, z->ndim, z->shape);
  ref_iter_add_t(&it, c);
  ref_iter_add_t(&it, x);
  ref_iter_add_t(&it, y);
  ref_iter_add_t(&it, z);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    int take = *(const uint8_t *)ref_ptr(c, it.pos[0]) != 0;
    memcpy(ref_ptr(z, it.pos[3]),
           take ? ref_ptr(x, it.pos[1]) : ref_ptr(y, it.pos[2]), es);
  }
  return TORC_OK;
}
