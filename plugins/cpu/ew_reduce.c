/* plugins/cpu/ew_reduce.c — the cpu plugin's reductions (sum, mean, amax,
 * amin over any dims; f32, f64 and bf16, accumulated in double and rounded
 * once) and softmax / log_softmax over one dim (f32, f64), on the walk of
 * ew_walk.h; semantics are ref's.
 */
#include "ew_walk.h"

/* ---- reductions: sum, mean, amax, amin over the dims of a mask ----
 * The input's dims (size-1 dropped) merge when they are alike (both
 * reduced or both kept) and step evenly in the input and in a contiguous
 * double accumulator of the output's shape; the innermost dim then either
 * reduces a run into one accumulator (isa->reduce) or adds a row into a
 * run of accumulators (isa->colreduce), for each index of the outer dims.
 */

typedef struct red_plan {
  int nd, op;
  int32_t dt;
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  int64_t xs[TORC_KERNEL_MAX_DIMS]; /* input strides */
  int64_t as[TORC_KERNEL_MAX_DIMS]; /* accumulator strides (0: reduced) */
  int red[TORC_KERNEL_MAX_DIMS];
  const char *x;
  double *acc;
  int64_t outer; /* product of shape[0 .. nd-2] */
} red_plan;

/* Outer indices [b, e) of the plan. */
static void red_task(void *c, int64_t b, int64_t e) {
  const red_plan *r = c;
  const cpu_isa *isa = torc_cpu__isa;
  int last = r->nd - 1;
  size_t es = cpu_esize(r->dt);
  int64_t n = r->shape[last], xs = r->xs[last];
  for (int64_t o = b; o < e; o++) {
    int64_t rem = o, xo = 0, ao = 0;
    for (int d = last - 1; d >= 0; d--) {
      int64_t i = rem % r->shape[d];
      rem /= r->shape[d];
      xo += i * r->xs[d];
      ao += i * r->as[d];
    }
    const char *x = r->x + xo * (int64_t)es;
    double *acc = r->acc + ao;
    if (r->red[last]) {
      if (xs == 1) {
        isa->reduce(r->dt, r->op, x, n, acc);
      } else {
        double buf[EW_BLK];
        for (int64_t i = 0; i < n; i += EW_BLK) {
          int64_t m = n - i < EW_BLK ? n - i : EW_BLK;
          gather(buf, x + i * xs * (int64_t)es, xs, m, es);
          isa->reduce(r->dt, r->op, buf, m, acc);
        }
      }
    } else {
      if (xs == 1) {
        isa->colreduce(r->dt, r->op, x, n, acc);
      } else {
        double buf[EW_BLK];
        for (int64_t i = 0; i < n; i += EW_BLK) {
          int64_t m = n - i < EW_BLK ? n - i : EW_BLK;
          gather(buf, x + i * xs * (int64_t)es, xs, m, es);
          isa->colreduce(r->dt, r->op, buf, m, acc + i);
        }
      }
    }
  }
}

/* Rows of the plan by the index of its kept dims: a plan whose kept
 * outer dims come first, each kept index owning `per` consecutive rows
 * (the reduced outer dims'), so slices of kept indices write disjoint
 * accumulators and each accumulator sums its rows in the serial order. */
typedef struct kept_ctx {
  const red_plan *r;
  int64_t per;
} kept_ctx;

static void kept_task(void *c, int64_t b, int64_t e) {
  const kept_ctx *k = c;
  red_task((void *)k->r, b * k->per, e * k->per);
}

/* Reorders the outer dims of r (all but the last) kept ones first, in
 * their order, then the reduced ones; returns the product of the reduced
 * outer dims' sizes. */
static int64_t kept_first(red_plan *r) {
  red_plan o = *r;
  int m = 0, last = r->nd - 1;
  int64_t per = 1;
  for (int pass = 0; pass < 2; pass++)
    for (int d = 0; d < last; d++)
      if (o.red[d] == pass) {
        r->shape[m] = o.shape[d], r->xs[m] = o.xs[d];
        r->as[m] = o.as[d], r->red[m] = o.red[d];
        m++;
        if (pass)
          per *= o.shape[d];
      }
  return per;
}

/* A whole contiguous input into one value: partial results per slice. */
typedef struct full_ctx {
  int32_t dt;
  int op;
  const char *x;
  double part[64];
  int64_t n, slice;
} full_ctx;

static void full_task(void *c, int64_t b, int64_t e) {
  full_ctx *f = c;
  size_t es = cpu_esize(f->dt);
  for (int64_t s = b; s < e; s++) {
    int64_t lo = s * f->slice, hi = lo + f->slice;
    if (hi > f->n)
      hi = f->n;
    torc_cpu__isa->reduce(f->dt, f->op, f->x + lo * (int64_t)es, hi - lo,
                          &f->part[s]);
  }
}

static int reduce(const torc_kernel_args *a, int op, int mean) {
  if (a->n_in != 1 || a->n_out != 1)
    return bad_args(a, 1, 1);
  const torc_reduce_params *p = params_of(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int nd = x->ndim;
  int ok = y->ndim == nd && (p->dims_mask >> nd) == 0 && y->dtype == x->dtype;
  int64_t count = 1, n_out = 1;
  for (int d = 0; ok && d < nd; d++) {
    int red = (p->dims_mask >> d) & 1u;
    ok = y->shape[d] == (red ? 1 : x->shape[d]);
    if (red)
      count *= x->shape[d];
    n_out *= y->shape[d];
  }
  if (!ok)
    return shape_error(a);
  if (n_out == 0)
    return TORC_OK;
  if (count == 0 && op != CPU_R_SUM)
    return torc_cpu__set_error(TORC_ERR_INVALID,
                               "%s over an empty dimension has no identity; "
                               "reduce over non-empty dims",
                               a->op);
  double init = op == CPU_R_SUM ? 0.0 : op == CPU_R_MAX ? -INFINITY : INFINITY;
  double one, *acc = n_out == 1 ? &one : malloc((size_t)n_out * sizeof *acc);
  if (acc == NULL)
    return torc_cpu__set_error(TORC_ERR_OOM,
                               "cpu kernel '%s': out of memory for %lld "
                               "accumulators",
                               a->op, (long long)n_out);
  for (int64_t i = 0; i < n_out; i++)
    acc[i] = init;
  /* The plan: contiguous accumulator strides of y's shape. */
  red_plan r = {.op = op, .dt = x->dtype, .acc = acc};
  r.x = (const char *)x->data + (size_t)x->offset * cpu_esize(x->dtype);
  int64_t cs[TORC_KERNEL_MAX_DIMS], s = 1;
  for (int d = nd - 1; d >= 0; d--) {
    cs[d] = s;
    s *= y->shape[d];
  }
  r.nd = 0;
  for (int d = 0; d < nd && count > 0; d++) {
    if (x->shape[d] == 1)
      continue;
    int red = (p->dims_mask >> d) & 1u;
    int64_t as = red ? 0 : cs[d];
    int m = r.nd;
    if (m > 0 && r.red[m - 1] == red &&
        r.xs[m - 1] == x->strides[d] * x->shape[d] &&
        r.as[m - 1] == as * x->shape[d]) {
      r.shape[m - 1] *= x->shape[d];
      r.xs[m - 1] = x->strides[d];
      r.as[m - 1] = as;
      continue;
    }
    r.shape[m] = x->shape[d];
    r.xs[m] = x->strides[d];
    r.as[m] = as;
    r.red[m] = red;
    r.nd++;
  }
  if (count > 0 && r.nd == 0) { /* one element */
    r.nd = 1;
    r.shape[0] = 1;
    r.xs[0] = 1;
    r.as[0] = 0;
    r.red[0] = 1;
  }
  if (count > 0) {
    int last = r.nd - 1;
    r.outer = 1;
    int outer_kept = 1;
    for (int d = 0; d < last; d++) {
      r.outer *= r.shape[d];
      outer_kept = outer_kept && !r.red[d];
    }
    int64_t total = r.outer * r.shape[last];
    int par = a->n_threads > 1 && total >= TORC_CPU_PAR_MIN;
    if (par && r.nd == 1 && r.red[0] && r.xs[0] == 1) {
      full_ctx f = {.dt = r.dt, .op = op, .x = r.x, .n = total};
      int k = a->n_threads < 64 ? a->n_threads : 64;
      f.slice = (total + k - 1) / k;
      int n_sl = (int)((total + f.slice - 1) / f.slice);
      for (int i = 0; i < n_sl; i++)
        f.part[i] = init;
      torc_cpu__parallel_for(n_sl, n_sl, 1, full_task, &f);
      for (int i = 0; i < n_sl; i++) {
        double v = f.part[i], c = acc[0];
        if (op == CPU_R_SUM)
          acc[0] = c + v;
        else
          acc[0] = c != c                                        ? c
                   : v != v || (op == CPU_R_MAX ? v > c : v < c) ? v
                                                                 : c;
      }
    } else if (par && outer_kept && r.outer > 1 && r.red[last]) {
      torc_cpu__parallel_for(a->n_threads, r.outer,
                             1 + TORC_CPU_PAR_MIN / 2 / r.shape[last], red_task,
                             &r);
    } else if (par && r.red[last] && r.outer > 1) {
      /* kept dims among reduced ones (a conv bias's gradient: [N, C, HW]
       * summed over N and HW): slices of the kept indices */
      kept_ctx k = {&r, kept_first(&r)};
      int64_t n_kept = r.outer / k.per;
      if (n_kept > 1)
        torc_cpu__parallel_for(
            a->n_threads, n_kept,
            1 + TORC_CPU_PAR_MIN / 2 / (k.per * r.shape[last]), kept_task, &k);
      else
        red_task(&r, 0, r.outer);
    } else {
      red_task(&r, 0, r.outer);
    }
  }
  /* Store (mean divides by the count; over nothing 0/0 = NaN). */
  char *yp = (char *)y->data + (size_t)y->offset * cpu_esize(y->dtype);
  int contiguous = 1;
  for (int d = 0; d < nd; d++)
    contiguous = contiguous && (y->shape[d] == 1 || y->strides[d] == cs[d]);
  for (int64_t i = 0; i < n_out; i++) {
    double v = mean ? acc[i] / (double)count : acc[i];
    int64_t off = i;
    if (!contiguous) {
      int64_t rem = i;
      off = 0;
      for (int d = nd - 1; d >= 0; d--) {
        off += (rem % y->shape[d]) * y->strides[d];
        rem /= y->shape[d];
      }
    }
    if (y->dtype == TORC_F32)
      ((float *)yp)[off] = (float)v;
    else if (y->dtype == TORC_BF16) /* double -> f32 -> bf16, as ref */
      ((uint16_t *)yp)[off] = torc_f32_to_bf16((float)v);
    else
      ((double *)yp)[off] = v;
  }
  if (acc != &one)
    free(acc);
  return TORC_OK;
}

static int k_sum(const torc_kernel_args *a) { return reduce(a, CPU_R_SUM, 0); }
static int k_mean(const torc_kernel_args *a) { return reduce(a, CPU_R_SUM, 1); }
static int k_amax(const torc_kernel_args *a) { return reduce(a, CPU_R_MAX, 0); }
static int k_amin(const torc_kernel_args *a) { return reduce(a, CPU_R_MIN, 0); }

/* ---- softmax, log_softmax over one dim ---- */

typedef struct sm_ctx {
  int32_t dt;
  int log_form;
  int64_t len, xs, ys; /* the line's length and strides */
  double *buf;         /* 2 len elements for strided lines, else NULL */
} sm_ctx;

/* Runs of line starts (x, y). */
static void sm_inner(void *c, char **p, const int64_t *st, int64_t n) {
  const sm_ctx *s = c;
  const cpu_isa *isa = torc_cpu__isa;
  size_t es = cpu_esize(s->dt);
  for (int64_t i = 0; i < n; i++) {
    const char *x = p[0] + i * st[0] * (int64_t)es;
    char *y = p[1] + i * st[1] * (int64_t)es;
    if (s->buf == NULL) {
      isa->softmax(s->dt, s->log_form, x, y, s->len);
    } else {
      double *by = s->buf + s->len;
      gather(s->buf, x, s->xs, s->len, es);
      isa->softmax(s->dt, s->log_form, s->buf, by, s->len);
      scatter(y, s->ys, by, s->len, es);
    }
  }
}

/* Lines along dim; contiguous lines (the last dim) run across the pool,
 * strided ones through one buffer on the calling thread. */
static int softmax(const torc_kernel_args *a, int log_form) {
  if (a->n_in != 1 || a->n_out != 1)
    return bad_args(a, 1, 1);
  const torc_dim_params *p = params_of(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  if (!same_shape(x, y) || x->dtype != y->dtype)
    return shape_error(a);
  int nd = x->ndim, dim = p->dim;
  if (nd > 0 && (dim < 0 || dim >= nd))
    return shape_error(a);
  sm_ctx s = {x->dtype, log_form, 1, 1, 1, NULL};
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  for (int d = 0; d < nd; d++)
    shape[d] = x->shape[d];
  if (nd > 0) {
    s.len = x->shape[dim];
    s.xs = x->strides[dim];
    s.ys = y->strides[dim];
    shape[dim] = 1;
    if (s.len == 1)
      s.xs = s.ys = 1;
  }
  if (s.len == 0)
    return TORC_OK;
  const torc_ktensor *t[2] = {x, y};
  ew_iter it;
  iter_init(&it, nd, shape, t, 2);
  if (it.numel == 0)
    return TORC_OK;
  if (s.xs != 1 || s.ys != 1) {
    s.buf = malloc((size_t)s.len * 2 * sizeof *s.buf);
    if (s.buf == NULL)
      return torc_cpu__set_error(TORC_ERR_OOM,
                                 "cpu kernel '%s': out of memory for a line "
                                 "of %lld elements",
                                 a->op, (long long)s.len);
    iter_run(&it, 0, it.numel, sm_inner, &s);
    free(s.buf);
  } else if (it.numel * s.len >= TORC_CPU_PAR_MIN && a->n_threads > 1) {
    par_ctx pc = {&it, sm_inner, &s};
    int64_t grain = 1 + TORC_CPU_PAR_MIN / 2 / s.len;
    torc_cpu__parallel_for(a->n_threads, it.numel, grain, par_task, &pc);
  } else {
    iter_run(&it, 0, it.numel, sm_inner, &s);
  }
  return TORC_OK;
}

static int k_softmax(const torc_kernel_args *a) { return softmax(a, 0); }
static int k_log_softmax(const torc_kernel_args *a) { return softmax(a, 1); }

const torc_cpu_kernel torc_cpu__ew_reduce_kernels[] = {
    {"sum", k_sum, 0},
    {"mean", k_mean, 0},
    {"amax", k_amax, 0},
    {"amin", k_amin, 0},
    {"softmax", k_softmax, 0},
    {"log_softmax", k_log_softmax, 0},
};
const size_t torc_cpu__n_ew_reduce_kernels =
    sizeof torc_cpu__ew_reduce_kernels / sizeof torc_cpu__ew_reduce_kernels[0];
const size_t torc_cpu__n_ew_reduce_bf16 = 4; /* sum, mean, amax, amin */
