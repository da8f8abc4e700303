/* tests/test_cuda_reduce_bodies.c — the cuda plugin's reductions (one- and
 * two-pass) and softmax (plugins/cuda/reduce_body.h) replayed on the CPU in a block's
 * order (256 per-thread strided folds, then the pairwise tree), against
 * the ref kernels on the same inputs. Needs no GPU.
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
  for (size_t i = 0; i < torc_ref_n_kernels; i++)
    if (strcmp(torc_ref_kernels[i].op, op) == 0 &&
        (torc_ref_kernels[i].dtype == TORC_F32 ||
         torc_ref_kernels[i].dtype == TORC_DTYPE_ANY))
      return torc_ref_kernels[i].fn;
  fail_msg("no ref kernel for %s f32", op);
  return NULL;
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
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.op = op;
  a.n_in = 1;
  a.n_out = 1;
  a.in = x;
  a.out = y;
  a.params = p;
  a.params_size = psize;
  a.n_threads = 1;
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
      memset(&a, 0, sizeof a);
      a.struct_size = sizeof a;
      a.op = name;
      a.n_in = 1;
      a.n_out = 2;
      a.in = &in;
      a.out = out;
      a.params = &p;
      a.params_size = sizeof p;
      a.n_threads = 1;
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
      cmocka_unit_test(test_every_op_has_ref),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
