/* tests/test_cuda_reduce_bodies.c — the cuda plugin's reductions (one- and
 * two-pass), max_dim / min_dim and softmax (plugins/cuda/reduce_body.h) in
 * f32, f64, the integers and bool, replayed on the CPU in a block's order
 * (256 per-thread strided folds, then the pairwise tree), against the ref
 * kernels on the same inputs. Needs no GPU.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "torc/plugin.h"

#include "../plugins/cuda/reduce_body.h"
#include "../plugins/ref/ref_kernels.h"
#include "cuda_testutil.h"

#define B TORC_CUDA_R_BLOCK

/* ---- the block, on the CPU ---- */

/* What reduce.cu's block computes from the n values of one output's
 * reduced set (in row-major order): thread t folds v[t], v[t + B], ...,
 * then the tree folds v[t] with v[t + s] for s = B/2 down to 1. */
static float block_fold(int op, const float *v, int64_t n) {
  float acc[B];
  for (int t = 0; t < B; t++) {
    acc[t] = torc_cuda_r_init(op);
    for (int64_t i = t; i < n; i += B)
      acc[t] = torc_cuda_r_step(op, acc[t], v[i]);
  }
  for (int s = B / 2; s > 0; s >>= 1)
    for (int t = 0; t < s; t++)
      acc[t] = torc_cuda_r_step(op, acc[t], acc[t + s]);
  return acc[0];
}

/* ---- the ref side ---- */

static torc_kernel_fn ref_kernel(const char *op) {
  return cuda_test_ref_kernel(op, TORC_F32);
}

static torc_ktensor kt(float *p, int nd, const int64_t *shape) {
  torc_ktensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.dtype = TORC_F32;
  t.ndim = nd;
  int64_t st = 1;
  for (int d = nd - 1; d >= 0; d--) {
    t.shape[d] = shape[d];
    t.strides[d] = st;
    st *= shape[d];
  }
  return t;
}

static void run_ref(const char *op, const torc_ktensor *x,
                    const torc_ktensor *y, const void *p, size_t psize) {
  torc_kernel_args a;
  cuda_test_args(&a, op, x, 1, y, 1, p, psize);
  assert_int_equal(ref_kernel(op)(&a), TORC_OK);
}

/* ---- inputs ---- */

static uint64_t lcg = 12345;
static float uniform(float lo, float hi) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (float)(lcg >> 40) / 16777216.0f;
}

/* ---- reductions ---- */

static const struct {
  const char *name;
  int op;
} reduce_ops[] = {
#define ROW(name, id) {#name, id},
    TORC_CUDA_REDUCE_OPS(ROW)
#undef ROW
};

/* One reduction of x [d0, d1, d2] over mask, the block replayed for every
 * output against ref. Tolerances: amax/amin pick an element, so they are
 * bit-identical; a sum folds each element through at most
 * ceil(n / 256) + 8 f32 roundings (its thread's run, then the tree's 8
 * levels), each of relative error <= 2^-24, so |got - ref| <= depth *
 * FLT_EPSILON * sum |x| (ref accumulates in double and rounds once); a
 * product's n - 1 roundings all scale the result, so its relative error
 * is within (n + 1) * 2^-24 whatever the order. mean is the sum's bound
 * over n, plus its one division. */
static void check_reduce(int op, const char *name, const int64_t *shape,
                         uint32_t mask, const float *x) {
  int64_t oshape[3], n = 1, nout = 1;
  for (int d = 0; d < 3; d++) {
    oshape[d] = (mask >> d) & 1u ? 1 : shape[d];
    if ((mask >> d) & 1u)
      n *= shape[d];
    nout *= oshape[d];
  }
  float *want = malloc((size_t)nout * sizeof *want);
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  double *absum = calloc((size_t)nout, sizeof *absum);
  assert_non_null(want);
  assert_non_null(v);
  assert_non_null(absum);
  torc_ktensor tx = kt((float *)x, 3, shape), ty = kt(want, 3, oshape);
  torc_reduce_params p = {.dims_mask = mask};
  run_ref(name, &tx, &ty, &p, sizeof p);
  for (int64_t o = 0; o < nout; o++) {
    int64_t oi[3] = {o / (oshape[1] * oshape[2]), (o / oshape[2]) % oshape[1],
                     o % oshape[2]};
    /* The reduced set in row-major order, as reduce.cu's inner walk. */
    int64_t k = 0;
    for (int64_t a = 0; a < ((mask & 1u) ? shape[0] : 1); a++)
      for (int64_t b = 0; b < ((mask & 2u) ? shape[1] : 1); b++)
        for (int64_t c = 0; c < ((mask & 4u) ? shape[2] : 1); c++) {
          int64_t i0 = (mask & 1u) ? a : oi[0], i1 = (mask & 2u) ? b : oi[1],
                  i2 = (mask & 4u) ? c : oi[2];
          v[k] = x[(i0 * shape[1] + i1) * shape[2] + i2];
          absum[o] += fabs((double)v[k]);
          k++;
        }
    float got = torc_cuda_r_final(op, block_fold(op, v, n), n);
    float w = want[o];
    if (isnan(w) || isnan(got)) {
      if (!(isnan(w) && isnan(got)))
        fail_msg("%s over mask 0x%x of [%lld, %lld, %lld], output %lld: got "
                 "%.9g, ref %.9g",
                 name, (unsigned)mask, (long long)shape[0],
                 (long long)shape[1], (long long)shape[2], (long long)o, got,
                 w);
      continue;
    }
    double depth = (double)((n + B - 1) / B) + 8.0;
    double bound = 0;
    if (op == TORC_CUDA_R_SUM)
      bound = depth * FLT_EPSILON * absum[o];
    else if (op == TORC_CUDA_R_MEAN)
      bound = depth * FLT_EPSILON * absum[o] / (double)n +
              FLT_EPSILON * fabs((double)w);
    else if (op == TORC_CUDA_R_PROD)
      bound = (double)(n + 1) * (FLT_EPSILON / 2) * fabs((double)w);
    if (isinf(w) || isinf(got) ? got != w
                               : fabs((double)got - (double)w) > bound)
      fail_msg("%s over mask 0x%x of [%lld, %lld, %lld], output %lld (%lld "
               "elements): got %.9g, ref %.9g, gap %.3g > bound %.3g",
               name, (unsigned)mask, (long long)shape[0],
               (long long)shape[1], (long long)shape[2], (long long)o,
               (long long)n, got, w, fabs((double)got - (double)w), bound);
  }
  free(want);
  free(v);
  free(absum);
}

static void test_reductions(void **state) {
  (void)state;
  static const int64_t shapes[][3] = {{1, 1, 1},   {1, 1, 7},  {1, 1, 255},
                                      {1, 1, 256}, {1, 1, 257}, {3, 4, 700},
                                      {2, 1, 40000}, {17, 33, 5}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const int64_t *sh = shapes[s];
    int64_t n = sh[0] * sh[1] * sh[2];
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (size_t r = 0; r < sizeof reduce_ops / sizeof reduce_ops[0]; r++) {
      int op = reduce_ops[r].op;
      /* Products near 1, so that 40000 factors neither overflow nor
       * vanish; the rest in [-2, 2]. */
      for (int64_t i = 0; i < n; i++)
        x[i] = op == TORC_CUDA_R_PROD ? uniform(0.999f, 1.001f)
                                      : uniform(-2.0f, 2.0f);
      for (uint32_t mask = 1; mask < 8; mask++)
        check_reduce(op, reduce_ops[r].name, sh, mask, x);
    }
    free(x);
  }
}

/* NaN and infinities: amax/amin propagate a NaN from any thread's run and
 * any tree level (NaN first, last, alone in a thread); an infinity wins. */
static void test_reduce_specials(void **state) {
  (void)state;
  const int64_t sh[3] = {1, 1, 1000};
  float x[1000];
  static const int64_t at[] = {0, 1, 255, 256, 511, 999};
  static const float sp[] = {NAN, INFINITY, -INFINITY};
  for (size_t r = 0; r < sizeof reduce_ops / sizeof reduce_ops[0]; r++)
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
      for (size_t j = 0; j < sizeof sp / sizeof sp[0]; j++) {
        for (int i = 0; i < 1000; i++)
          x[i] = uniform(0.5f, 1.5f);
        x[at[k]] = sp[j];
        check_reduce(reduce_ops[r].op, reduce_ops[r].name, sh, 4u, x);
      }
}

/* ---- two-pass reductions ---- */

/* reduce.cu's k_reduce2 on the n values of one output's reduced set. */
static float block2(int kind, const float *v, int64_t n, double extra) {
  float *t = malloc((size_t)(n ? n : 1) * sizeof *t);
  assert_non_null(t);
  for (int64_t i = 0; i < n; i++)
    t[i] = torc_cuda_r2_first(kind, v[i]);
  float mid = torc_cuda_r2_mid(kind, block_fold(torc_cuda_r2_op1(kind), t, n),
                               n);
  float r2 = 0.0f;
  if (torc_cuda_r2_two_pass(kind, mid)) {
    for (int64_t i = 0; i < n; i++)
      t[i] = torc_cuda_r2_second(kind, v[i], mid);
    r2 = block_fold(TORC_CUDA_R_SUM, t, n);
  }
  free(t);
  return torc_cuda_r2_final(kind, mid, r2, n, extra);
}

/* One two-pass kind over the last dim of x [rows, n], against ref.
 * Bounds from the exact (double) statistics of each row, with depth =
 * ceil(n / 256) + 8 roundings of a sum as above: logsumexp, max + log(s):
 * log turns s's relative error into an absolute one, plus e^(x - m)'s
 * 4 ulp and the final add; var: the mean's error dm (the sum's bound over
 * n) enters the squared deviations as 2 dm sum|x - mean| + n dm^2, their
 * sum adds depth + 4 roundings of ss, all over the divisor; std: the
 * square root of var's bound (sqrt(a + b) - sqrt(a) <= sqrt(b)) plus its
 * own rounding; 1-norm: a sum of |x|; inf-norm: bit-identical; 2-norm:
 * each (x / m)^2 rounds 3 times, the sum depth times, sqrt and m * once. */
static void check_two_pass(int kind, const char *name, const void *params,
                           size_t psize, int64_t rows, int64_t n,
                           const float *x, double extra) {
  int64_t shape[2] = {rows, n}, oshape[2] = {rows, 1};
  float *want = malloc((size_t)rows * sizeof *want);
  assert_non_null(want);
  torc_ktensor tx = kt((float *)x, 2, shape), ty = kt(want, 2, oshape);
  run_ref(name, &tx, &ty, params, psize);
  double depth = (double)((n + B - 1) / B) + 8.0, e = FLT_EPSILON;
  for (int64_t r = 0; r < rows; r++) {
    const float *v = x + r * n;
    float got = block2(kind, v, n, extra), w = want[r];
    double sabs = 0, mean = 0, ss = 0, sdev = 0, m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
      sabs += fabs((double)v[i]);
      mean += v[i];
      if (v[i] > m)
        m = v[i];
    }
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) {
      ss += ((double)v[i] - mean) * ((double)v[i] - mean);
      sdev += fabs((double)v[i] - mean);
    }
    double div = (double)n - extra;
    double dm = depth * e * sabs / (double)n + e * fabs(mean);
    double bvar = ((depth + 4) * e * ss + 2 * dm * sdev + (double)n * dm * dm) /
                  (div > 0 ? div : 0);
    double bound = 0;
    switch (kind) {
    case TORC_CUDA_R2_LSE:
      bound = 2 * e * fabs(m) + (depth + 8) * e + e * fabs((double)w);
      break;
    case TORC_CUDA_R2_VAR: bound = bvar + e * fabs((double)w); break;
    case TORC_CUDA_R2_STD: bound = sqrt(bvar) + 2 * e * fabs((double)w); break;
    case TORC_CUDA_R2_NORM1: bound = depth * e * sabs; break;
    case TORC_CUDA_R2_NORM2: bound = (depth + 6) * e * fabs((double)w); break;
    default: bound = 0; /* NORMINF */
    }
    int ok;
    if (isnan(w) || isnan(got))
      ok = isnan(w) && isnan(got);
    else if (isinf(w) || isinf(got))
      ok = got == w;
    else
      ok = fabs((double)got - (double)w) <= bound;
    if (!ok)
      fail_msg("%s of [%lld, %lld], row %lld: got %.9g, ref %.9g, gap %.3g > "
               "bound %.3g",
               name, (long long)rows, (long long)n, (long long)r, got, w,
               fabs((double)got - (double)w), bound);
  }
  free(want);
}

static void test_two_pass(void **state) {
  (void)state;
  static const int64_t lens[] = {1, 2, 7, 256, 257, 3000};
  for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
    int64_t n = lens[l], rows = 6;
    float *x = malloc((size_t)(rows * n) * sizeof *x);
    assert_non_null(x);
    for (int64_t k = 0; k < rows * n; k++)
      x[k] = uniform(-3.0f, 3.0f);
    /* Row 1 offset far from 0 (var's cancellation, logsumexp near 90),
     * row 2 zeros (the 2-norm's m = 0), row 3 a NaN, row 4 +inf, row 5
     * -inf everywhere (logsumexp -inf, var NaN). */
    for (int64_t k = 0; k < n; k++) {
      x[1 * n + k] = 90.0f + uniform(-1.0f, 1.0f);
      x[2 * n + k] = 0.0f;
      x[5 * n + k] = -INFINITY;
    }
    x[3 * n + n / 2] = NAN;
    x[4 * n + n - 1] = INFINITY;
    static const double corr[] = {0.0, 1.0};
    for (size_t c = 0; c < 2; c++) {
      torc_reduce_params p = {.dims_mask = 2u, .correction = corr[c]};
      check_two_pass(TORC_CUDA_R2_VAR, "var", &p, sizeof p, rows, n, x,
                     corr[c]);
      check_two_pass(TORC_CUDA_R2_STD, "std", &p, sizeof p, rows, n, x,
                     corr[c]);
    }
    torc_reduce_params p = {.dims_mask = 2u};
    check_two_pass(TORC_CUDA_R2_LSE, "logsumexp", &p, sizeof p, rows, n, x,
                   0);
    static const struct {
      double p;
      int kind;
    } norms[] = {{1, TORC_CUDA_R2_NORM1},
                 {2, TORC_CUDA_R2_NORM2},
                 {INFINITY, TORC_CUDA_R2_NORMINF}};
    for (size_t k = 0; k < 3; k++) {
      torc_norm_params q = {.dims_mask = 2u, .p = norms[k].p};
      check_two_pass(norms[k].kind, "norm", &q, sizeof q, rows, n, x, 0);
    }
    free(x);
  }
}

/* ---- max_dim / min_dim ---- */

/* reduce.cu's k_extreme on one line: per-thread picks, then the tree. */
static torc_cuda_arg block_pick(const float *v, int64_t n, int is_min) {
  torc_cuda_arg acc[B];
  for (int t = 0; t < B; t++) {
    acc[t].v = 0.0f;
    acc[t].i = -1;
    for (int64_t k = t; k < n; k += B) {
      torc_cuda_arg c = {v[k], k};
      acc[t] = torc_cuda_arg_pick(acc[t], c, is_min);
    }
  }
  for (int s = B / 2; s > 0; s >>= 1)
    for (int t = 0; t < s; t++)
      acc[t] = torc_cuda_arg_pick(acc[t], acc[t + s], is_min);
  return acc[0];
}

/* Bit-identical values and equal indices to ref's, over lines of few
 * distinct values (ties across threads and tree levels), signed zeros,
 * NaNs at different places and infinities. */
static void test_extreme_dim(void **state) {
  (void)state;
  static const int64_t lens[] = {1, 3, 256, 257, 1000};
  for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
    int64_t n = lens[l], rows = 6, shape[2] = {rows, n},
            oshape[2] = {rows, 1};
    float *x = malloc((size_t)(rows * n) * sizeof *x);
    assert_non_null(x);
    for (int64_t k = 0; k < rows * n; k++)
      x[k] = (float)(int)uniform(-4.0f, 4.0f); /* many ties */
    for (int64_t k = 0; k < n; k++)
      x[1 * n + k] = (k % 3) ? 0.0f : -0.0f;
    x[2 * n + n / 2] = NAN;
    x[2 * n + n - 1] = NAN;
    x[3 * n + n - 1] = INFINITY;
    x[4 * n] = -INFINITY;
    x[5 * n + (n > 300 ? 300 : 0)] = NAN;
    for (int is_min = 0; is_min < 2; is_min++) {
      const char *name = is_min ? "min_dim" : "max_dim";
      float vals[6];
      int64_t idx[6];
      torc_ktensor in = kt(x, 2, shape);
      torc_ktensor out[2] = {kt(vals, 2, oshape), kt(NULL, 2, oshape)};
      out[1].data = idx;
      out[1].dtype = TORC_I64;
      torc_dim_params p = {.dim = 1};
      torc_kernel_args a;
      cuda_test_args(&a, name, &in, 1, out, 2, &p, sizeof p);
      torc_kernel_fn fn = NULL;
      for (size_t i = 0; i < torc_ref_n_kernels; i++)
        if (strcmp(torc_ref_kernels[i].op, name) == 0 &&
            torc_ref_kernels[i].dtype == TORC_F32)
          fn = torc_ref_kernels[i].fn;
      assert_non_null(fn);
      assert_int_equal(fn(&a), TORC_OK);
      for (int64_t r = 0; r < rows; r++) {
        torc_cuda_arg got = block_pick(x + r * n, n, is_min);
        float gv = x[r * n + got.i]; /* the kernel copies the element */
        if (got.i != idx[r] || memcmp(&gv, &vals[r], sizeof gv) != 0)
          fail_msg("%s of [%lld, %lld], row %lld: got %.9g at %lld, ref "
                   "%.9g at %lld",
                   name, (long long)rows, (long long)n, (long long)r, gv,
                   (long long)got.i, vals[r], (long long)idx[r]);
      }
    }
    free(x);
  }
}

/* ---- softmax ---- */

/* softmax / log_softmax of x [rows, len] along dim 1: the three passes of
 * reduce.cu's block replayed per row against ref. Tolerance: the sum s
 * carries depth = ceil(len / 256) + 8 roundings and each e^(x - m) up to
 * 4 ulp (CUDA's expf is within 2 ulp, glibc's within 1; x - m rounds
 * once), so softmax is within (depth + 8) * FLT_EPSILON relative; for
 * log_softmax, (x - m) - log(s) adds log's error, absolute:
 * |got - ref| <= 2 FLT_EPSILON |x - m| + (depth + 8) FLT_EPSILON. */
static void check_softmax(int log_form, int64_t rows, int64_t len,
                          const float *x) {
  const char *name = log_form ? "log_softmax" : "softmax";
  int64_t shape[2] = {rows, len};
  float *want = malloc((size_t)(rows * len) * sizeof *want);
  assert_non_null(want);
  torc_ktensor tx = kt((float *)x, 2, shape), ty = kt(want, 2, shape);
  torc_dim_params p = {.dim = 1};
  run_ref(name, &tx, &ty, &p, sizeof p);
  double depth = (double)((len + B - 1) / B) + 8.0;
  for (int64_t r = 0; r < rows; r++) {
    const float *line = x + r * len;
    float m = block_fold(TORC_CUDA_R_AMAX, line, len);
    float *e = malloc((size_t)len * sizeof *e);
    assert_non_null(e);
    for (int64_t k = 0; k < len; k++)
      e[k] = torc_cuda_sm_exp(line[k], m);
    float s = block_fold(TORC_CUDA_R_SUM, e, len);
    free(e);
    for (int64_t k = 0; k < len; k++) {
      float got = torc_cuda_sm_out(line[k], m, s, log_form);
      float w = want[r * len + k];
      int ok;
      if (isnan(w) || isnan(got))
        ok = isnan(w) && isnan(got);
      else if (isinf(w) || isinf(got))
        ok = got == w;
      else if (log_form)
        ok = fabs((double)got - (double)w) <=
             2 * FLT_EPSILON * fabs((double)line[k] - (double)m) +
                 (depth + 8) * FLT_EPSILON;
      else
        ok = fabs((double)got - (double)w) <=
             (depth + 8) * FLT_EPSILON * fabs((double)w) + 1e-45;
      if (!ok)
        fail_msg("%s of [%lld, %lld], row %lld element %lld (x = %.9g): got "
                 "%.9g, ref %.9g",
                 name, (long long)rows, (long long)len, (long long)r,
                 (long long)k, line[k], got, w);
    }
  }
  free(want);
}

static void test_softmax(void **state) {
  (void)state;
  static const int64_t lens[] = {1, 5, 255, 256, 257, 3000};
  for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
    int64_t len = lens[l], rows = 6;
    float *x = malloc((size_t)(rows * len) * sizeof *x);
    assert_non_null(x);
    for (int64_t k = 0; k < rows * len; k++)
      x[k] = uniform(-8.0f, 8.0f);
    /* Row 1 near 90: e^x alone overflows f32, the maximum's subtraction
     * keeps it finite. Row 2 holds -inf, row 3 a NaN, row 4 +inf, row 5
     * only -inf (every output NaN, as ref). */
    for (int64_t k = 0; k < len; k++) {
      x[1 * len + k] = uniform(85.0f, 95.0f);
      x[5 * len + k] = -INFINITY;
    }
    x[2 * len + len / 2] = -INFINITY;
    x[3 * len + len - 1] = NAN;
    x[4 * len] = INFINITY;
    check_softmax(0, rows, len, x);
    check_softmax(1, rows, len, x);
    free(x);
  }
}

/* ---- f64, and integers and bool ---- */

/* The ref kernel of op for dtype dt. */
static torc_kernel_fn ref_kernel_dt(const char *op, int dt) {
  return cuda_test_ref_kernel(op, dt);
}

/* A contiguous ktensor of dtype dt over p. */
static torc_ktensor ktd(void *p, int dt, int nd, const int64_t *shape) {
  torc_ktensor t = kt((float *)p, nd, shape);
  t.dtype = dt;
  return t;
}

/* ref's op on x into the n_out outputs y. */
static void run_ref_n(const char *op, const torc_ktensor *x,
                      const torc_ktensor *y, int n_out, const void *p,
                      size_t psize) {
  torc_kernel_args a;
  cuda_test_args(&a, op, x, 1, y, n_out, p, psize);
  assert_int_equal(ref_kernel_dt(op, x->dtype)(&a), TORC_OK);
}

static uint64_t next_u64(void) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return lcg ^ (lcg >> 29);
}
static double uniform_d(double lo, double hi) {
  return lo + (hi - lo) * (double)(next_u64() >> 11) / 9007199254740992.0;
}

/* block_fold in double (f64's kernels). */
static double block_fold_d(int op, const double *v, int64_t n) {
  double acc[B];
  for (int t = 0; t < B; t++) {
    acc[t] = torc_cuda_r_init_d(op);
    for (int64_t i = t; i < n; i += B)
      acc[t] = torc_cuda_r_step_d(op, acc[t], v[i]);
  }
  for (int s = B / 2; s > 0; s >>= 1)
    for (int t = 0; t < s; t++)
      acc[t] = torc_cuda_r_step_d(op, acc[t], acc[t + s]);
  return acc[0];
}

/* block_fold in int64 (the integer and bool kernels). */
static int64_t block_fold_i(int op, const int64_t *v, int64_t n) {
  int64_t acc[B];
  for (int t = 0; t < B; t++) {
    acc[t] = torc_cuda_r_init_i(op);
    for (int64_t i = t; i < n; i += B)
      acc[t] = torc_cuda_r_step_i(op, acc[t], v[i]);
  }
  for (int s = B / 2; s > 0; s >>= 1)
    for (int t = 0; t < s; t++)
      acc[t] = torc_cuda_r_step_i(op, acc[t], acc[t + s]);
  return acc[0];
}

/* Element k of p (dtype dt) as the kernels load it: bool is 0 or 1 (any
 * nonzero byte true), the rest exactly. */
static int64_t load_i(int dt, const void *p, int64_t k) {
  switch (dt) {
  case TORC_I32: return ((const int32_t *)p)[k];
  case TORC_I64: return ((const int64_t *)p)[k];
  case TORC_U8: return ((const uint8_t *)p)[k];
  default: return ((const uint8_t *)p)[k] != 0;
  }
}

/* reduce.cu's e_int::put: v to dtype dt at p[o], keeping its low bits
 * (bool: nonzero). */
static void put_i(int dt, void *p, int64_t o, int64_t v) {
  switch (dt) {
  case TORC_I32: ((uint32_t *)p)[o] = (uint32_t)(uint64_t)v; break;
  case TORC_U8: ((uint8_t *)p)[o] = (uint8_t)(uint64_t)v; break;
  case TORC_BOOL: ((uint8_t *)p)[o] = v != 0; break;
  default: ((int64_t *)p)[o] = v;
  }
}

/* Fills x (n elements of dtype dt) for integer tests: extremes
 * (INT32_MIN / INT64_MIN, the maxima, 0, -1) among random values over the
 * whole range, so that sums and products wrap; bool bytes of any value,
 * a third of them 0. Row r of [rows, len] is all zero for r == 1 and all
 * nonzero for r == 2 (bool amax = any, amin = all). */
static void fill_int(int dt, void *x, int64_t rows, int64_t len) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t k = 0; k < len; k++) {
      int64_t i = r * len + k;
      uint64_t u = next_u64();
      int special = (int)(u % 7);
      switch (dt) {
      case TORC_I32: {
        static const int32_t sp[] = {INT32_MIN, INT32_MAX, 0, -1};
        ((int32_t *)x)[i] = special < 4 ? sp[special] : (int32_t)(u >> 32);
        break;
      }
      case TORC_I64: {
        static const int64_t sp[] = {INT64_MIN, INT64_MAX, 0, -1};
        ((int64_t *)x)[i] = special < 4 ? sp[special] : (int64_t)(u >> 3);
        if (special == 6)
          ((int64_t *)x)[i] = -(int64_t)(u >> 3);
        break;
      }
      case TORC_U8: ((uint8_t *)x)[i] = (uint8_t)(u >> 40); break;
      default:
        ((uint8_t *)x)[i] = (u % 3 == 0) ? 0 : (uint8_t)(1 + (u >> 40) % 255);
      }
      if (r == 1 && dt == TORC_BOOL)
        ((uint8_t *)x)[i] = 0;
      if (r == 2 && dt == TORC_BOOL)
        ((uint8_t *)x)[i] = (uint8_t)(2 + k % 250);
    }
}

static const int int_dts[] = {TORC_I32, TORC_I64, TORC_U8, TORC_BOOL};

/* sum, prod, amax, amin of integers and bool over each dims mask of
 * [rows, len], against ref: bit-identical (the int64 fold is exact and
 * wraps as ref's, whatever the order). sum and prod write i64 (as the
 * core allocates); sum is also written to the input's own dtype, which
 * keeps the low bits. */
static void test_int_reductions(void **state) {
  (void)state;
  static const int64_t shapes[][2] = {{1, 1},   {1, 7},   {1, 256},
                                      {1, 257}, {3, 700}, {4, 3000}};
  static const int ops[] = {TORC_CUDA_R_SUM, TORC_CUDA_R_PROD,
                            TORC_CUDA_R_AMAX, TORC_CUDA_R_AMIN};
  static const char *names[] = {"sum", "prod", "amax", "amin"};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (size_t d = 0; d < 4; d++) {
      int dt = int_dts[d];
      int64_t rows = shapes[s][0], len = shapes[s][1], n = rows * len;
      int64_t shape[2] = {rows, len};
      void *x = malloc((size_t)n * 8);
      int64_t *v = malloc((size_t)n * sizeof *v);
      int64_t *want = malloc((size_t)n * 8), *got = malloc((size_t)n * 8);
      assert_true(x && v && want && got);
      fill_int(dt, x, rows, len);
      for (size_t o = 0; o < 4; o++)
        for (int out_same = 0; out_same < 2; out_same++) {
          int op = ops[o];
          int odt = op == TORC_CUDA_R_AMAX || op == TORC_CUDA_R_AMIN || out_same
                        ? dt
                        : TORC_I64;
          if (out_same && op != TORC_CUDA_R_SUM)
            continue;
          for (uint32_t mask = 1; mask < 4; mask++) {
            int64_t oshape[2] = {(mask & 1u) ? 1 : rows,
                                 (mask & 2u) ? 1 : len};
            int64_t nout = oshape[0] * oshape[1];
            size_t es = odt == TORC_I64 ? 8 : odt == TORC_I32 ? 4 : 1;
            memset(want, 0xa5, (size_t)n * 8);
            memset(got, 0x5a, (size_t)n * 8);
            torc_ktensor tx = ktd(x, dt, 2, shape),
                         ty = ktd(want, odt, 2, oshape);
            torc_reduce_params p = {.dims_mask = mask};
            run_ref_n(names[o], &tx, &ty, 1, &p, sizeof p);
            for (int64_t q = 0; q < nout; q++) {
              int64_t r0 = oshape[0] == 1 ? 0 : q / oshape[1];
              int64_t c0 = oshape[1] == 1 ? 0 : q % oshape[1];
              int64_t k = 0;
              for (int64_t a = 0; a < ((mask & 1u) ? rows : 1); a++)
                for (int64_t b = 0; b < ((mask & 2u) ? len : 1); b++) {
                  int64_t i0 = (mask & 1u) ? a : r0, i1 = (mask & 2u) ? b : c0;
                  v[k++] = load_i(dt, x, i0 * len + i1);
                }
              put_i(odt, got, q, block_fold_i(op, v, k));
            }
            if (memcmp(got, want, (size_t)nout * es) != 0)
              fail_msg("%s of dtype %d over mask 0x%x of [%lld, %lld] into "
                       "dtype %d differs from ref",
                       names[o], dt, (unsigned)mask, (long long)rows,
                       (long long)len, odt);
          }
        }
      free(x);
      free(v);
      free(want);
      free(got);
    }
}

/* The wraparound and extremes, spelled out: i64 sum of INT64_MAX + 1
 * wraps to INT64_MIN, i32 prod of 65536 * 65536 is 2^32 in i64 (no
 * wrap in the accumulator), u8 sums into u8 keep the low byte, INT_MIN
 * and INT64_MIN win amin, bool 0x80 and 0x01 are both true. */
static void test_int_extremes(void **state) {
  (void)state;
  const int64_t a64[2] = {INT64_MAX, 1};
  assert_true(block_fold_i(TORC_CUDA_R_SUM, a64, 2) == INT64_MIN);
  const int64_t m64[3] = {INT64_MIN, -1, INT64_MAX};
  assert_true(block_fold_i(TORC_CUDA_R_AMIN, m64, 3) == INT64_MIN);
  assert_true(block_fold_i(TORC_CUDA_R_AMAX, m64, 3) == INT64_MAX);
  assert_true(block_fold_i(TORC_CUDA_R_PROD, m64, 2) == INT64_MIN);
  const int64_t p32[2] = {65536, 65536};
  assert_true(block_fold_i(TORC_CUDA_R_PROD, p32, 2) == (int64_t)1 << 32);
  uint8_t u[300], ub;
  for (int i = 0; i < 300; i++)
    u[i] = 255;
  int64_t v[300];
  for (int i = 0; i < 300; i++)
    v[i] = load_i(TORC_U8, u, i);
  put_i(TORC_U8, &ub, 0, block_fold_i(TORC_CUDA_R_SUM, v, 300));
  assert_int_equal(ub, (uint8_t)(300 * 255));
  const uint8_t bb[3] = {0x80, 0x01, 0x00};
  assert_true(load_i(TORC_BOOL, bb, 0) == 1 && load_i(TORC_BOOL, bb, 1) == 1);
  int32_t i32[2] = {INT32_MIN, INT32_MAX};
  int64_t w[2] = {load_i(TORC_I32, i32, 0), load_i(TORC_I32, i32, 1)};
  assert_true(block_fold_i(TORC_CUDA_R_AMIN, w, 2) == INT32_MIN);
}

/* f64 sum, prod, mean, amax, amin over dim 1 of [rows, len], against ref
 * (which folds in order, in double). amax/amin are bit-identical (NaN
 * included); a sum's error is now on both sides: ref's n - 1 roundings and
 * the block's depth = ceil(n / 256) + 8, each <= 2^-53 relative, so
 * |got - ref| <= (n + depth) * DBL_EPSILON * sum |x|; a product within
 * (2n + 2) * 2^-53 relative; mean the sum's bound over n plus a division. */
static void test_f64_reductions(void **state) {
  (void)state;
  static const int64_t lens[] = {1, 7, 256, 257, 3000, 40000};
  for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
    for (size_t r = 0; r < sizeof reduce_ops / sizeof reduce_ops[0]; r++) {
      int op = reduce_ops[r].op;
      int64_t n = lens[l], rows = 4, shape[2] = {rows, n},
              oshape[2] = {rows, 1};
      double *x = malloc((size_t)(rows * n) * sizeof *x), want[4];
      assert_non_null(x);
      for (int64_t k = 0; k < rows * n; k++)
        x[k] = op == TORC_CUDA_R_PROD ? uniform_d(0.999, 1.001)
                                      : uniform_d(-2.0, 2.0);
      /* Row 1 holds a NaN, row 2 +inf and -inf (sum NaN), row 3 -0.0. */
      x[1 * n + n / 2] = NAN;
      x[2 * n] = INFINITY;
      x[2 * n + n - 1] = n > 1 ? -INFINITY : INFINITY;
      x[3 * n + n - 1] = -0.0;
      torc_ktensor tx = ktd(x, TORC_F64, 2, shape),
                   ty = ktd(want, TORC_F64, 2, oshape);
      torc_reduce_params p = {.dims_mask = 2u};
      run_ref_n(reduce_ops[r].name, &tx, &ty, 1, &p, sizeof p);
      for (int64_t q = 0; q < rows; q++) {
        const double *line = x + q * n;
        double got = torc_cuda_r_final_d(op, block_fold_d(op, line, n), n);
        double w = want[q], absum = 0;
        for (int64_t k = 0; k < n; k++)
          absum += fabs(line[k]);
        double depth = (double)((n + B - 1) / B) + 8.0 + (double)n, bound = 0;
        if (op == TORC_CUDA_R_SUM)
          bound = depth * DBL_EPSILON * absum;
        else if (op == TORC_CUDA_R_MEAN)
          bound = depth * DBL_EPSILON * absum / (double)n +
                  DBL_EPSILON * fabs(w);
        else if (op == TORC_CUDA_R_PROD)
          bound = (double)(2 * n + 2) * (DBL_EPSILON / 2) * fabs(w);
        int ok;
        if (isnan(w) || isnan(got))
          ok = isnan(w) && isnan(got);
        else if (isinf(w) || isinf(got))
          ok = got == w;
        else if (bound == 0)
          ok = memcmp(&got, &w, sizeof w) == 0;
        else
          ok = fabs(got - w) <= bound;
        if (!ok)
          fail_msg("f64 %s of [%lld, %lld], row %lld: got %.17g, ref %.17g, "
                   "bound %.3g",
                   reduce_ops[r].name, (long long)rows, (long long)n,
                   (long long)q, got, w, bound);
      }
      free(x);
    }
}

/* block2 in double. */
static double block2_d(int kind, const double *v, int64_t n, double extra) {
  double *t = malloc((size_t)(n ? n : 1) * sizeof *t);
  assert_non_null(t);
  for (int64_t i = 0; i < n; i++)
    t[i] = torc_cuda_r2_first_d(kind, v[i]);
  double mid = torc_cuda_r2_mid_d(
      kind, block_fold_d(torc_cuda_r2_op1(kind), t, n), n);
  double r2 = 0.0;
  if (torc_cuda_r2_two_pass_d(kind, mid)) {
    for (int64_t i = 0; i < n; i++)
      t[i] = torc_cuda_r2_second_d(kind, v[i], mid);
    r2 = block_fold_d(TORC_CUDA_R_SUM, t, n);
  }
  free(t);
  return torc_cuda_r2_final_d(kind, mid, r2, n, extra);
}

/* check_two_pass for f64: both ref and the block now round in double, so
 * the bound is twice check_two_pass's with e = DBL_EPSILON and depth =
 * n + ceil(n / 256) + 8 (ref's sequential roundings and the block's,
 * each side within one such bound of the exact value); the inf-norm is
 * bit-identical. */
static void check_two_pass_d(int kind, const char *name, const void *params,
                             size_t psize, int64_t rows, int64_t n,
                             const double *x, double extra) {
  int64_t shape[2] = {rows, n}, oshape[2] = {rows, 1};
  double *want = malloc((size_t)rows * sizeof *want);
  assert_non_null(want);
  torc_ktensor tx = ktd((void *)x, TORC_F64, 2, shape),
               ty = ktd(want, TORC_F64, 2, oshape);
  run_ref_n(name, &tx, &ty, 1, params, psize);
  double depth = (double)((n + B - 1) / B) + 8.0 + (double)n, e = DBL_EPSILON;
  for (int64_t r = 0; r < rows; r++) {
    const double *v = x + r * n;
    double got = block2_d(kind, v, n, extra), w = want[r];
    double sabs = 0, mean = 0, ss = 0, sdev = 0, m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
      sabs += fabs(v[i]);
      mean += v[i];
      if (v[i] > m)
        m = v[i];
    }
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) {
      ss += (v[i] - mean) * (v[i] - mean);
      sdev += fabs(v[i] - mean);
    }
    double div = (double)n - extra;
    double dm = depth * e * sabs / (double)n + e * fabs(mean);
    double bvar = ((depth + 4) * e * ss + 2 * dm * sdev + (double)n * dm * dm) /
                  (div > 0 ? div : 0);
    double bound = 0;
    switch (kind) {
    case TORC_CUDA_R2_LSE:
      bound = 2 * e * fabs(m) + (depth + 8) * e + e * fabs(w);
      break;
    case TORC_CUDA_R2_VAR: bound = bvar + e * fabs(w); break;
    case TORC_CUDA_R2_STD: bound = sqrt(bvar) + 2 * e * fabs(w); break;
    case TORC_CUDA_R2_NORM1: bound = depth * e * sabs; break;
    case TORC_CUDA_R2_NORM2: bound = (depth + 6) * e * fabs(w); break;
    default: bound = 0; /* NORMINF */
    }
    bound *= 2;
    int ok;
    if (isnan(w) || isnan(got))
      ok = isnan(w) && isnan(got);
    else if (isinf(w) || isinf(got))
      ok = got == w;
    else
      ok = fabs(got - w) <= bound;
    if (!ok)
      fail_msg("f64 %s of [%lld, %lld], row %lld: got %.17g, ref %.17g, gap "
               "%.3g > bound %.3g",
               name, (long long)rows, (long long)n, (long long)r, got, w,
               fabs(got - w), bound);
  }
  free(want);
}

/* test_two_pass's rows, in f64. */
static void test_f64_two_pass(void **state) {
  (void)state;
  static const int64_t lens[] = {1, 2, 7, 256, 257, 3000};
  for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
    int64_t n = lens[l], rows = 6;
    double *x = malloc((size_t)(rows * n) * sizeof *x);
    assert_non_null(x);
    for (int64_t k = 0; k < rows * n; k++)
      x[k] = uniform_d(-3.0, 3.0);
    for (int64_t k = 0; k < n; k++) {
      x[1 * n + k] = 700.0 + uniform_d(-1.0, 1.0); /* e^700 near overflow */
      x[2 * n + k] = 0.0;
      x[5 * n + k] = -INFINITY;
    }
    x[3 * n + n / 2] = NAN;
    x[4 * n + n - 1] = INFINITY;
    static const double corr[] = {0.0, 1.0};
    for (size_t c = 0; c < 2; c++) {
      torc_reduce_params p = {.dims_mask = 2u, .correction = corr[c]};
      check_two_pass_d(TORC_CUDA_R2_VAR, "var", &p, sizeof p, rows, n, x,
                       corr[c]);
      check_two_pass_d(TORC_CUDA_R2_STD, "std", &p, sizeof p, rows, n, x,
                       corr[c]);
    }
    torc_reduce_params p = {.dims_mask = 2u};
    check_two_pass_d(TORC_CUDA_R2_LSE, "logsumexp", &p, sizeof p, rows, n, x,
                     0);
    static const struct {
      double p;
      int kind;
    } norms[] = {{1, TORC_CUDA_R2_NORM1},
                 {2, TORC_CUDA_R2_NORM2},
                 {INFINITY, TORC_CUDA_R2_NORMINF}};
    for (size_t k = 0; k < 3; k++) {
      torc_norm_params q = {.dims_mask = 2u, .p = norms[k].p};
      check_two_pass_d(norms[k].kind, "norm", &q, sizeof q, rows, n, x, 0);
    }
    free(x);
  }
}

/* f64 softmax / log_softmax, as check_softmax: twice its bounds with
 * e = DBL_EPSILON and depth = len + ceil(len / 256) + 8, as ref's sum now
 * rounds in double too. */
static void check_softmax_d(int log_form, int64_t rows, int64_t len,
                            const double *x) {
  const char *name = log_form ? "log_softmax" : "softmax";
  int64_t shape[2] = {rows, len};
  double *want = malloc((size_t)(rows * len) * sizeof *want);
  double *e = malloc((size_t)len * sizeof *e);
  assert_true(want && e);
  torc_ktensor tx = ktd((void *)x, TORC_F64, 2, shape),
               ty = ktd(want, TORC_F64, 2, shape);
  torc_dim_params p = {.dim = 1};
  run_ref_n(name, &tx, &ty, 1, &p, sizeof p);
  double depth = (double)((len + B - 1) / B) + 8.0 + (double)len;
  for (int64_t r = 0; r < rows; r++) {
    const double *line = x + r * len;
    double m = block_fold_d(TORC_CUDA_R_AMAX, line, len);
    for (int64_t k = 0; k < len; k++)
      e[k] = torc_cuda_sm_exp_d(line[k], m);
    double s = block_fold_d(TORC_CUDA_R_SUM, e, len);
    for (int64_t k = 0; k < len; k++) {
      double got = torc_cuda_sm_out_d(line[k], m, s, log_form);
      double w = want[r * len + k];
      int ok;
      if (isnan(w) || isnan(got))
        ok = isnan(w) && isnan(got);
      else if (isinf(w) || isinf(got))
        ok = got == w;
      else if (log_form)
        ok = fabs(got - w) <= 2 * (2 * DBL_EPSILON * fabs(line[k] - m) +
                                   (depth + 8) * DBL_EPSILON);
      else
        ok = fabs(got - w) <= 2 * (depth + 8) * DBL_EPSILON * fabs(w) + 1e-300;
      if (!ok)
        fail_msg("f64 %s of [%lld, %lld], row %lld element %lld: got %.17g, "
                 "ref %.17g",
                 name, (long long)rows, (long long)len, (long long)r,
                 (long long)k, got, w);
    }
  }
  free(want);
  free(e);
}

static void test_f64_softmax(void **state) {
  (void)state;
  static const int64_t lens[] = {1, 5, 256, 257, 3000};
  for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
    int64_t len = lens[l], rows = 6;
    double *x = malloc((size_t)(rows * len) * sizeof *x);
    assert_non_null(x);
    for (int64_t k = 0; k < rows * len; k++)
      x[k] = uniform_d(-8.0, 8.0);
    for (int64_t k = 0; k < len; k++) {
      x[1 * len + k] = uniform_d(705.0, 715.0); /* e^x alone overflows */
      x[5 * len + k] = -INFINITY;
    }
    x[2 * len + len / 2] = -INFINITY;
    x[3 * len + len - 1] = NAN;
    x[4 * len] = INFINITY;
    check_softmax_d(0, rows, len, x);
    check_softmax_d(1, rows, len, x);
    free(x);
  }
}

/* reduce.cu's k_extreme on one line, in double and in int64. */
static torc_cuda_arg_d block_pick_d(const double *v, int64_t n, int is_min) {
  torc_cuda_arg_d acc[B];
  for (int t = 0; t < B; t++) {
    acc[t].v = 0.0;
    acc[t].i = -1;
    for (int64_t k = t; k < n; k += B) {
      torc_cuda_arg_d c = {v[k], k};
      acc[t] = torc_cuda_arg_pick_d(acc[t], c, is_min);
    }
  }
  for (int s = B / 2; s > 0; s >>= 1)
    for (int t = 0; t < s; t++)
      acc[t] = torc_cuda_arg_pick_d(acc[t], acc[t + s], is_min);
  return acc[0];
}
static torc_cuda_arg_i block_pick_i(int dt, const void *x, int64_t off,
                                    int64_t n, int is_min) {
  torc_cuda_arg_i acc[B];
  for (int t = 0; t < B; t++) {
    acc[t].v = 0;
    acc[t].i = -1;
    for (int64_t k = t; k < n; k += B) {
      torc_cuda_arg_i c = {load_i(dt, x, off + k), k};
      acc[t] = torc_cuda_arg_pick_i(acc[t], c, is_min);
    }
  }
  for (int s = B / 2; s > 0; s >>= 1)
    for (int t = 0; t < s; t++)
      acc[t] = torc_cuda_arg_pick_i(acc[t], acc[t + s], is_min);
  return acc[0];
}

/* max_dim / min_dim in f64 (ties, signed zeros, NaNs, infinities) and in
 * every integer dtype and bool (full-range values with the extremes, bool
 * bytes other than 0 and 1): the kernel copies the picked element (bool
 * as 0 or 1, as ref's store), so the values are bit-identical to ref's
 * and the indices equal. */
static void test_extreme_dim_more(void **state) {
  (void)state;
  static const int64_t lens[] = {1, 3, 256, 257, 1000};
  for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
    int64_t n = lens[l], rows = 6, shape[2] = {rows, n},
            oshape[2] = {rows, 1};
    void *x = malloc((size_t)(rows * n) * 8);
    assert_non_null(x);
    for (int d = -1; d < 4; d++) {
      int dt = d < 0 ? TORC_F64 : int_dts[d];
      size_t es = dt == TORC_F64 || dt == TORC_I64 ? 8 : dt == TORC_I32 ? 4 : 1;
      if (dt == TORC_F64) {
        double *xd = x;
        for (int64_t k = 0; k < rows * n; k++)
          xd[k] = (double)(int)uniform_d(-4.0, 4.0); /* many ties */
        for (int64_t k = 0; k < n; k++)
          xd[1 * n + k] = (k % 3) ? 0.0 : -0.0;
        xd[2 * n + n / 2] = NAN;
        xd[2 * n + n - 1] = NAN;
        xd[3 * n + n - 1] = INFINITY;
        xd[4 * n] = -INFINITY;
        xd[5 * n + (n > 300 ? 300 : 0)] = NAN;
      } else {
        fill_int(dt, x, rows, n);
      }
      for (int is_min = 0; is_min < 2; is_min++) {
        const char *name = is_min ? "min_dim" : "max_dim";
        uint64_t vals[6];
        int64_t idx[6];
        torc_ktensor in = ktd(x, dt, 2, shape);
        torc_ktensor out[2] = {ktd(vals, dt, 2, oshape),
                               ktd(idx, TORC_I64, 2, oshape)};
        torc_dim_params p = {.dim = 1};
        run_ref_n(name, &in, out, 2, &p, sizeof p);
        for (int64_t r = 0; r < rows; r++) {
          int64_t gi = dt == TORC_F64
                           ? block_pick_d((const double *)x + r * n, n,
                                          is_min).i
                           : block_pick_i(dt, x, r * n, n, is_min).i;
          /* The picked element's bytes; bool written as 0 or 1. */
          char gv[8];
          memcpy(gv, (const char *)x + (size_t)(r * n + gi) * es, es);
          if (dt == TORC_BOOL)
            gv[0] = gv[0] != 0;
          if (gi != idx[r] || memcmp(gv, (const char *)vals + r * es, es) != 0)
            fail_msg("%s of dtype %d [%lld, %lld], row %lld: index %lld, "
                     "ref %lld (or the values differ)",
                     name, dt, (long long)rows, (long long)n, (long long)r,
                     (long long)gi, (long long)idx[r]);
        }
      }
    }
    free(x);
  }
}

/* Every op reduce.cu registers has a ref kernel (so a new row in
 * TORC_CUDA_REDUCE_OPS is checked here). */
static void test_every_op_has_ref(void **state) {
  (void)state;
  for (size_t r = 0; r < sizeof reduce_ops / sizeof reduce_ops[0]; r++)
    assert_non_null(ref_kernel(reduce_ops[r].name));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reductions),
      cmocka_unit_test(test_reduce_specials),
      cmocka_unit_test(test_two_pass),
      cmocka_unit_test(test_extreme_dim),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_int_reductions),
      cmocka_unit_test(test_int_extremes),
      cmocka_unit_test(test_f64_reductions),
      cmocka_unit_test(test_f64_two_pass),
      cmocka_unit_test(test_f64_softmax),
      cmocka_unit_test(test_extreme_dim_more),
      cmocka_unit_test(test_every_op_has_ref),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
