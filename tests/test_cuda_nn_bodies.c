/* tests/test_cuda_nn_bodies.c — the cuda plugin's normalisation layers,
 * cross-entropy, optimizer steps and multi-tensor plan
 * (plugins/cuda/nn_body.h, optim_body.h) compiled for the host and run in
 * their kernels' order (a block's per-thread strided runs then its tree, a
 * warp's lanes then its butterfly), against the ref kernels on the same
 * small random inputs: the norms and the loss within a stated tolerance
 * (ref accumulates in f64, the f32/f16/bf16 kernels in f32), the optimizer
 * steps bit for bit in every dtype, and the plan covering every element
 * of random lists (empty tensors included) exactly once. Needs no GPU.
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

#include "torc/nn.h"
#include "torc/optim.h"
#include "torc/plugin.h"

#include "../plugins/cuda/nn_body.h"
#include "../plugins/cuda/optim_body.h"
#include "../plugins/ref/ref_kernels.h"
#include "cuda_testutil.h"

#define B TORC_CUDA_NN_BLOCK

/* ---- storage of any floating dtype ---- */

static size_t dsize(int dt) {
  return dt == TORC_F64 ? 8 : dt == TORC_F32 ? 4 : dt == TORC_I64 ? 8 : 2;
}

static double ld(int dt, const void *p, int64_t i) {
  switch (dt) {
  case TORC_F32: return ((const float *)p)[i];
  case TORC_F64: return ((const double *)p)[i];
  case TORC_F16: return torc_f16_to_f32(((const uint16_t *)p)[i]);
  case TORC_BF16: return torc_bf16_to_f32(((const uint16_t *)p)[i]);
  default: return (double)((const int64_t *)p)[i];
  }
}

/* Stores v rounded as ref's stores round (f64 -> f32 -> f16/bf16). */
static void st(int dt, void *p, int64_t i, double v) {
  switch (dt) {
  case TORC_F32: ((float *)p)[i] = (float)v; break;
  case TORC_F64: ((double *)p)[i] = v; break;
  case TORC_F16: ((uint16_t *)p)[i] = torc_f32_to_f16((float)v); break;
  case TORC_BF16: ((uint16_t *)p)[i] = torc_f32_to_bf16((float)v); break;
  default: ((int64_t *)p)[i] = (int64_t)v; break;
  }
}

static void *buf(int dt, int64_t n) {
  void *p = calloc((size_t)(n > 0 ? n : 1), dsize(dt));
  assert_non_null(p);
  return p;
}

static torc_ktensor kt(int dt, void *p, int nd, const int64_t *shape) {
  torc_ktensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.dtype = dt;
  t.ndim = nd;
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; d--) {
    t.shape[d] = shape[d];
    t.strides[d] = s;
    s *= shape[d];
  }
  return t;
}

static int ref_err(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return status;
}

static torc_kernel_fn ref_kernel(const char *op, int dt) {
  return cuda_test_ref_kernel(op, dt);
}

static void run_ref(const char *op, int dt, const torc_ktensor *in, int n_in,
                    const torc_ktensor *out, int n_out, const void *p,
                    size_t psize) {
  torc_kernel_args a;
  cuda_test_args(&a, op, in, n_in, out, n_out, p, psize);
  torc_ref_set_error = ref_err;
  assert_int_equal(ref_kernel(op, dt)(&a), TORC_OK);
}

static uint64_t lcg = 12345;
static double uniform(double lo, double hi) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

static void fill(int dt, void *p, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++)
    st(dt, p, i, uniform(lo, hi));
}

/* |got - want| <= atol + rtol |want|, NaN only against NaN. */
static void expect_close(const char *what, int64_t i, double got, double want,
                         double rtol, double atol) {
  if (isnan(want) || isnan(got)) {
    if (!(isnan(want) && isnan(got)))
      fail_msg("%s[%lld]: got %.9g, ref %.9g", what, (long long)i, got, want);
    return;
  }
  if (isinf(want) || isinf(got)) {
    if (got != want)
      fail_msg("%s[%lld]: got %.9g, ref %.9g", what, (long long)i, got, want);
    return;
  }
  if (fabs(got - want) > atol + rtol * fabs(want))
    fail_msg("%s[%lld]: got %.9g, ref %.9g (|diff| %.3g > %.3g)", what,
             (long long)i, got, want, fabs(got - want),
             atol + rtol * fabs(want));
}

/* The tolerance of a stored value of dtype dt computed in f32/f64 against
 * ref's f64: a few ulps of the dtype. */
static double rtol_of(int dt) {
  switch (dt) {
  case TORC_F64: return 1e-12;
  case TORC_F32: return 2e-5;
  case TORC_F16: return 2.0 / 1024;
  default: return 2.0 / 128;
  }
}

/* ---- the kernels' orders, on the CPU, in both computing types ----
 * bsum: a block's sum of v[0..n) (thread t folds v[t], v[t + B], ...,
 * then the tree); team: the sum or maximum of a team of L lanes (lane l
 * folds v[l], v[l + L], ..., then the butterfly), lane 0's result. */
#define ORDERS(T, sfx)                                                         \
  static T bsum_##sfx(const T *v, int64_t n) {                                 \
    T acc[B];                                                                  \
    for (int t = 0; t < B; t++) {                                              \
      acc[t] = 0;                                                              \
      for (int64_t i = t; i < n; i += B)                                       \
        acc[t] += v[i];                                                        \
    }                                                                          \
    for (int s = B / 2; s > 0; s >>= 1)                                        \
      for (int t = 0; t < s; t++)                                              \
        acc[t] = acc[t] + acc[t + s];                                          \
    return acc[0];                                                             \
  }                                                                            \
  static T team_##sfx(const T *v, int64_t n, int is_max, int L) {          \
    T lane[32], nxt[32];                                                       \
    for (int l = 0; l < L; l++) {                                              \
      lane[l] = is_max ? (T)-INFINITY : (T)0;                                  \
      for (int64_t i = l; i < n; i += L)                                       \
        lane[l] = is_max ? torc_cuda_ce_max_##sfx(lane[l], v[i])               \
                         : lane[l] + v[i];                                     \
    }                                                                          \
    for (int o = L / 2; o > 0; o >>= 1) {                                      \
      for (int l = 0; l < L; l++)                                              \
        nxt[l] = is_max ? torc_cuda_ce_max_##sfx(lane[l], lane[l ^ o])         \
                        : lane[l] + lane[l ^ o];                               \
      memcpy(lane, nxt, sizeof(T) * (size_t)L);                                \
    }                                                                          \
    return lane[0];                                                            \
  }
ORDERS(float, f)
ORDERS(double, d)

/* ---- layer_norm / group_norm ---- */

/* nn.cu's forward and backward on rows of K (params w[(i/div) % mod]),
 * in computing type T; stats in T. */
#define NORM_REPLICA(T, sfx)                                                   \
  static void norm_fwd_##sfx(int dt, const void *x, const void *w,             \
                             const void *b, void *y, T *mo, T *ro, int64_t R, \
                             int64_t K, int64_t div, int64_t mod,              \
                             double eps) {                                     \
    T *v = malloc(sizeof(T) * (size_t)(K ? K : 1));                            \
    assert_non_null(v);                                                        \
    for (int64_t r = 0; r < R; r++) {                                          \
      for (int64_t j = 0; j < K; j++)                                          \
        v[j] = (T)ld(dt, x, r * K + j);                                        \
      T mean = torc_cuda_norm_mean_##sfx(bsum_##sfx(v, K), K);                 \
      for (int64_t j = 0; j < K; j++) {                                        \
        T d = (T)ld(dt, x, r * K + j) - mean;                                  \
        v[j] = d * d;                                                          \
      }                                                                        \
      T rstd = torc_cuda_norm_rstd_##sfx(bsum_##sfx(v, K), K, (T)eps);         \
      for (int64_t j = 0; j < K; j++) {                                        \
        int64_t i = r * K + j, q = torc_cuda_norm_qrow(r, j, K, div, mod);     \
        assert_int_equal(q, torc_cuda_norm_q(i, div, mod));                    \
        st(dt, y, i,                                                           \
           torc_cuda_norm_y_##sfx((T)ld(dt, x, i), mean, rstd,                 \
                                  (T)ld(dt, w, q), (T)ld(dt, b, q)));          \
      }                                                                        \
      mo[r] = mean;                                                            \
      ro[r] = rstd;                                                            \
    }                                                                          \
    free(v);                                                                   \
  }                                                                            \
  static void norm_bw_##sfx(int dt, const void *gy, const void *x,             \
                            const void *w, const T *mt, const T *rt,           \
                            void *gx, void *gw, void *gb, int64_t R,           \
                            int64_t K, int64_t div, int64_t mod) {             \
    int64_t total = R * K, per = mod ? total / mod : 0;                        \
    int64_t nv = K > per ? K : per;                                            \
    T *v1 = malloc(sizeof(T) * (size_t)(nv ? nv : 1));                         \
    T *v2 = malloc(sizeof(T) * (size_t)(nv ? nv : 1));                         \
    assert_non_null(v1);                                                       \
    assert_non_null(v2);                                                       \
    for (int64_t r = 0; r < R; r++) {                                          \
      for (int64_t j = 0; j < K; j++) {                                        \
        int64_t i = r * K + j;                                                 \
        T gh = (T)ld(dt, gy, i) *                                              \
               (T)ld(dt, w, torc_cuda_norm_qrow(r, j, K, div, mod));           \
        v1[j] = gh;                                                            \
        v2[j] = gh * (((T)ld(dt, x, i) - mt[r]) * rt[r]);                      \
      }                                                                        \
      T s1 = bsum_##sfx(v1, K), s2 = bsum_##sfx(v2, K);                        \
      for (int64_t j = 0; j < K; j++) {                                        \
        int64_t i = r * K + j;                                                 \
        st(dt, gx, i,                                                          \
           torc_cuda_norm_gx_##sfx(                                            \
               (T)ld(dt, gy, i), (T)ld(dt, x, i),                              \
               (T)ld(dt, w, torc_cuda_norm_qrow(r, j, K, div, mod)), mt[r],    \
               rt[r], s1,                                                      \
               s2, K));                                                        \
      }                                                                        \
    }                                                                          \
    if (div == 1 && mod == K && R > 0) { /* layer_norm: the tiles' order */  \
      int G = torc_cuda_ln_groups(R), TY = TORC_CUDA_LN_TY;                    \
      for (int64_t q = 0; q < K; q++) {                                        \
        T fw = 0, fb = 0;                                                      \
        for (int y = 0; y < G; y++) {                                          \
          T aw[TORC_CUDA_LN_TY], ab[TORC_CUDA_LN_TY];                          \
          for (int ty = 0; ty < TY; ty++) {                                    \
            aw[ty] = 0, ab[ty] = 0;                                            \
            for (int64_t r = (int64_t)y * TY + ty; r < R;                      \
                 r += (int64_t)TY * G) {                                       \
              T g = (T)ld(dt, gy, r * K + q);                                  \
              aw[ty] += g * (((T)ld(dt, x, r * K + q) - mt[r]) * rt[r]);       \
              ab[ty] += g;                                                     \
            }                                                                  \
          }                                                                    \
          for (int h = TY / 2; h > 0; h >>= 1)                                 \
            for (int ty = 0; ty < h; ty++) {                                   \
              aw[ty] = aw[ty] + aw[ty + h];                                    \
              ab[ty] = ab[ty] + ab[ty + h];                                    \
            }                                                                  \
          fw += aw[0];                                                         \
          fb += ab[0];                                                         \
        }                                                                      \
        st(dt, gw, q, fw);                                                     \
        st(dt, gb, q, fb);                                                     \
      }                                                                        \
      mod = 0; /* done */                                                      \
    }                                                                          \
    for (int64_t q = 0; q < mod; q++) {                                        \
      for (int64_t k = 0; k < per; k++) {                                      \
        int64_t i = torc_cuda_norm_qset(k, q, div, mod), row = i / K;          \
        assert_int_equal(torc_cuda_norm_q(i, div, mod), q);                    \
        T g = (T)ld(dt, gy, i);                                                \
        v1[k] = g * (((T)ld(dt, x, i) - mt[row]) * rt[row]);                   \
        v2[k] = g;                                                             \
      }                                                                        \
      st(dt, gw, q, bsum_##sfx(v1, per));                                      \
      st(dt, gb, q, bsum_##sfx(v2, per));                                      \
    }                                                                          \
    free(v1);                                                                  \
    free(v2);                                                                  \
  }
NORM_REPLICA(float, f)
NORM_REPLICA(double, d)

/* One layer_norm (group 0) or group_norm of x `shape` against ref,
 * forward and backward, in dtype dt. */
static void check_norm(int dt, int group, int nd, const int64_t *shape,
                       int64_t groups_or_k) {
  int64_t total = 1;
  for (int d = 0; d < nd; d++)
    total *= shape[d];
  int64_t R, K, div, mod, wshape[1];
  if (!group) {
    K = groups_or_k; /* numel of the trailing dims */
    R = total / K;
    div = 1;
    mod = K;
  } else {
    int64_t N = shape[0], C = shape[1], S = total / (N * C);
    R = N * groups_or_k;
    K = C / groups_or_k * S;
    div = S ? S : 1;
    mod = C;
  }
  wshape[0] = mod;
  int sd = dt == TORC_F64 ? TORC_F64 : TORC_F32;
  void *x = buf(dt, total), *w = buf(dt, mod), *b = buf(dt, mod);
  void *y = buf(dt, total), *mo = buf(sd, R), *ro = buf(sd, R);
  void *gy = buf(dt, total), *gx = buf(dt, total), *gw = buf(dt, mod),
       *gb = buf(dt, mod);
  void *y2 = buf(dt, total), *gx2 = buf(dt, total), *gw2 = buf(dt, mod),
       *gb2 = buf(dt, mod);
  fill(dt, x, total, -3, 3);
  fill(dt, w, mod, 0.5, 1.5);
  fill(dt, b, mod, -1, 1);
  fill(dt, gy, total, -1, 1);
  torc_norm_kparams p = {1e-5, 0, group ? groups_or_k : 0, 0, 0};
  int64_t sshape[1] = {R};
  torc_ktensor in[5] = {kt(dt, x, nd, shape), kt(dt, w, 1, wshape),
                        kt(dt, b, 1, wshape)};
  torc_ktensor out[3] = {kt(dt, y, nd, shape), kt(sd, mo, 1, sshape),
                         kt(sd, ro, 1, sshape)};
  const char *fw = group ? "group_norm" : "layer_norm";
  const char *bw = group ? "group_norm_backward" : "layer_norm_backward";
  run_ref(fw, dt, in, 3, out, 3, &p, sizeof p);
  torc_ktensor bin[5] = {kt(dt, gy, nd, shape), kt(dt, x, nd, shape),
                         kt(dt, w, 1, wshape), out[1], out[2]};
  torc_ktensor bout[3] = {kt(dt, gx, nd, shape), kt(dt, gw, 1, wshape),
                          kt(dt, gb, 1, wshape)};
  run_ref(bw, dt, bin, 5, bout, 3, &p, sizeof p);
  double rt = rtol_of(dt);
  if (dt == TORC_F64) {
    double *m2 = malloc(sizeof(double) * (size_t)R);
    double *r2 = malloc(sizeof(double) * (size_t)R);
    norm_fwd_d(dt, x, w, b, y2, m2, r2, R, K, div, mod, p.eps);
    for (int64_t r = 0; r < R; r++) {
      expect_close("mean", r, m2[r], ld(sd, mo, r), rt, 1e-12);
      expect_close("rstd", r, r2[r], ld(sd, ro, r), rt, 1e-12);
    }
    /* the backward from ref's statistics, as the kernel gets them */
    norm_bw_d(dt, gy, x, w, (const double *)mo, (const double *)ro, gx2, gw2,
              gb2, R, K, div, mod);
    free(m2);
    free(r2);
  } else {
    float *m2 = malloc(sizeof(float) * (size_t)R);
    float *r2 = malloc(sizeof(float) * (size_t)R);
    norm_fwd_f(dt, x, w, b, y2, m2, r2, R, K, div, mod, p.eps);
    for (int64_t r = 0; r < R; r++) {
      expect_close("mean", r, m2[r], ld(sd, mo, r), 2e-5, 1e-5);
      expect_close("rstd", r, r2[r], ld(sd, ro, r), 2e-5, 1e-5);
    }
    norm_bw_f(dt, gy, x, w, (const float *)mo, (const float *)ro, gx2, gw2,
              gb2, R, K, div, mod);
    free(m2);
    free(r2);
  }
  /* y and gx are O(1): beyond one rounding of the dtype (rt), f32
   * arithmetic's error (at) where the formula cancels; gw, gb sum
   * R * K / mod terms of O(1). */
  double at = dt == TORC_F64 ? 1e-11 : 1e-4;
  for (int64_t i = 0; i < total; i++) {
    expect_close("y", i, ld(dt, y2, i), ld(dt, y, i), rt, at);
    expect_close("gx", i, ld(dt, gx2, i), ld(dt, gx, i), rt, at);
  }
  double sat = at * (double)(mod ? total / mod : 0);
  for (int64_t q = 0; q < mod; q++) {
    expect_close("gw", q, ld(dt, gw2, q), ld(dt, gw, q), rt, sat);
    expect_close("gb", q, ld(dt, gb2, q), ld(dt, gb, q), rt, sat);
  }
  void *all[] = {x, w, b, y, mo, ro, gy, gx, gw, gb, y2, gx2, gw2, gb2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    free(all[i]);
}

static const int dtypes[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16};

static void test_layer_norm(void **state) {
  (void)state;
  for (size_t d = 0; d < 4; d++) {
    int64_t s1[2] = {5, 37}, s2[3] = {3, 2, 300}, s3[2] = {4, 1};
    check_norm(dtypes[d], 0, 2, s1, 37);
    check_norm(dtypes[d], 0, 3, s2, 600); /* two trailing dims, K > B */
    check_norm(dtypes[d], 0, 2, s3, 1);
    int64_t s4[2] = {300, 40}; /* several row groups of the gw tiles */
    check_norm(dtypes[d], 0, 2, s4, 40);
  }
}

static void test_group_norm(void **state) {
  (void)state;
  for (size_t d = 0; d < 4; d++) {
    int64_t s1[4] = {3, 6, 4, 5}, s2[2] = {2, 8}, s3[3] = {2, 4, 130};
    check_norm(dtypes[d], 1, 4, s1, 3);
    check_norm(dtypes[d], 1, 2, s2, 4); /* no spatial dims */
    check_norm(dtypes[d], 1, 3, s3, 1); /* K > B */
  }
}

/* ---- cross_entropy ---- */

#define CE_REPLICA(T, sfx)                                                     \
  /* nn.cu's forward: rows by teams, then the f64 fold of a block. */         \
  static void ce_fwd_##sfx(int dt, const void *x, const int64_t *tg,           \
                           const void *w, void *loss, T *mo, T *lo, T *tot,    \
                           int64_t N, int64_t C, int64_t S,                    \
                           const torc_cross_entropy_params *p) {               \
    int64_t R = N * S;                                                         \
    int none = p->reduction == TORC_REDUCTION_NONE;                            \
    T eps = (T)p->label_smoothing;                                             \
    int L = torc_cuda_ce_lanes(C, S);                                          \
    T *v = malloc(sizeof(T) * (size_t)(C ? C : 1));                            \
    double *rv = malloc(sizeof(double) * (size_t)(R ? R : 1));                 \
    double *rw = malloc(sizeof(double) * (size_t)(R ? R : 1));                 \
    for (int64_t r = 0; r < R; r++) {                                          \
      int64_t n = r / S, base = n * C * S + (r - n * S);                       \
      for (int64_t c = 0; c < C; c++)                                          \
        v[c] = (T)ld(dt, x, base + c * S);                                     \
      T m = team_##sfx(v, C, 1, L), e = 0;                                     \
      if (torc_cuda_ce_finite_##sfx(m)) {                                      \
        for (int64_t c = 0; c < C; c++)                                        \
          v[c] = torc_cuda_ce_exp_##sfx((T)ld(dt, x, base + c * S), m);        \
        e = team_##sfx(v, C, 0, L);                                            \
      }                                                                        \
      T ls = torc_cuda_ce_logsum_##sfx(m, e), val = 0, wt = 0;                 \
      int64_t t = tg[r];                                                       \
      assert_false(torc_cuda_ce_bad(t, p->ignore_index, C));                   \
      if (torc_cuda_ce_counted(t, p->ignore_index)) {                          \
        wt = w ? (T)ld(dt, w, t) : (T)1;                                       \
        T smooth = 0;                                                          \
        if (eps > 0) {                                                         \
          for (int64_t c = 0; c < C; c++)                                      \
            v[c] = (w ? (T)ld(dt, w, c) : (T)1) *                              \
                   torc_cuda_ce_logp_##sfx((T)ld(dt, x, base + c * S), m, ls); \
          smooth = -team_##sfx(v, C, 0, L);                                    \
        }                                                                      \
        val = torc_cuda_ce_loss_##sfx(                                         \
            torc_cuda_ce_logp_##sfx((T)ld(dt, x, base + t * S), m, ls), wt,    \
            eps, C, smooth);                                                   \
      }                                                                        \
      mo[r] = m;                                                               \
      lo[r] = ls;                                                              \
      if (none)                                                                \
        st(dt, loss, r, val);                                                  \
      rv[r] = (double)val;                                                     \
      rw[r] = (double)wt;                                                      \
    }                                                                          \
    double sv = bsum_d(rv, R), sw = bsum_d(rw, R);                             \
    tot[0] = (T)sw;                                                            \
    if (!none)                                                                 \
      st(dt, loss, 0,                                                          \
         (T)(p->reduction == TORC_REDUCTION_MEAN ? sv / sw : sv));             \
    free(v);                                                                   \
    free(rv);                                                                  \
    free(rw);                                                                  \
  }                                                                            \
  /* nn.cu's backward: one thread per logit. */                               \
  static void ce_bw_##sfx(int dt, const void *gy, const void *x,               \
                          const int64_t *tg, const T *mt, const T *lt,         \
                          const T *tw, const void *w, void *gx, int64_t N,     \
                          int64_t C, int64_t S,                                \
                          const torc_cross_entropy_params *p) {                \
    T eps = (T)p->label_smoothing, W = (T)C;                                   \
    if (w && eps > 0) {                                                        \
      T *v = malloc(sizeof(T) * (size_t)(C ? C : 1));                          \
      for (int64_t c = 0; c < C; c++)                                          \
        v[c] = (T)ld(dt, w, c);                                                \
      W = bsum_##sfx(v, C);                                                    \
      free(v);                                                                 \
    }                                                                          \
    for (int64_t i = 0; i < N * C * S; i++) {                                  \
      int64_t n = i / (C * S), rem = i - n * C * S, c = rem / S;               \
      int64_t r = n * S + (rem - c * S), t = tg[r];                            \
      if (!torc_cuda_ce_counted(t, p->ignore_index)) {                         \
        st(dt, gx, i, 0);                                                      \
        continue;                                                              \
      }                                                                        \
      T gr = p->reduction == TORC_REDUCTION_NONE ? (T)ld(dt, gy, r)            \
             : p->reduction == TORC_REDUCTION_MEAN                             \
                 ? (T)ld(dt, gy, 0) / tw[0]                                    \
                 : (T)ld(dt, gy, 0);                                           \
      T wt = w ? (T)ld(dt, w, t) : (T)1, wc = w ? (T)ld(dt, w, c) : (T)1;      \
      st(dt, gx, i,                                                            \
         torc_cuda_ce_grad_##sfx((T)ld(dt, x, i), mt[r], lt[r], gr, wt,        \
                                 c == t, eps, C, W, wc));                      \
    }                                                                          \
  }
CE_REPLICA(float, f)
CE_REPLICA(double, d)

static void check_ce(int dt, int64_t N, int64_t C, int64_t S, int weighted,
                     double eps, int reduction, int specials,
                     int ignore_all) {
  int64_t R = N * S, total = N * C * S;
  int sd = dt == TORC_F64 ? TORC_F64 : TORC_F32;
  int none = reduction == TORC_REDUCTION_NONE;
  int64_t nl = none ? R : 1;
  void *x = buf(dt, total), *w = buf(dt, C), *loss = buf(dt, nl);
  void *mo = buf(sd, R), *lo = buf(sd, R), *tot = buf(sd, 1);
  void *loss2 = buf(dt, nl), *mo2 = buf(sd, R), *lo2 = buf(sd, R),
       *tot2 = buf(sd, 1);
  void *gy = buf(dt, nl), *gx = buf(dt, total), *gx2 = buf(dt, total);
  int64_t *tg = buf(TORC_I64, R);
  fill(dt, x, total, -4, 4);
  fill(dt, w, C, 0.2, 2);
  fill(dt, gy, nl, -1, 1);
  for (int64_t r = 0; r < R; r++)
    tg[r] = r % 5 == 3 ? -100 : (int64_t)(uniform(0, (double)C));
  if (ignore_all)
    for (int64_t r = 0; r < R; r++)
      tg[r] = -100;
  if (specials) { /* S = 1: row 0 all -inf, row 1 one +inf, row 2 a NaN */
    assert_true(S == 1 && R >= 3 && C >= 2);
    for (int64_t c = 0; c < C; c++)
      st(dt, x, c, -INFINITY);
    st(dt, x, C, INFINITY);
    st(dt, x, 2 * C + 1, NAN);
  }
  torc_cross_entropy_params p = {-100, eps, reduction, 0};
  int64_t xs[3] = {N, C, S}, ts[2] = {N, S}, ws[1] = {C};
  torc_ktensor in[3] = {kt(dt, x, 3, xs), kt(TORC_I64, tg, 2, ts),
                        kt(dt, w, 1, ws)};
  torc_ktensor out[4] = {kt(dt, loss, none ? 2 : 0, ts), kt(sd, mo, 2, ts),
                         kt(sd, lo, 2, ts), kt(sd, tot, 0, NULL)};
  run_ref("cross_entropy", dt, in, weighted ? 3 : 2, out, 4, &p, sizeof p);
  torc_ktensor bin[7] = {kt(dt, gy, none ? 2 : 0, ts), in[0], in[1], out[1],
                         out[2], out[3], in[2]};
  torc_ktensor bout[1] = {kt(dt, gx, 3, xs)};
  run_ref("cross_entropy_backward", dt, bin, weighted ? 7 : 6, bout, 1, &p,
          sizeof p);
  const void *wp = weighted ? w : NULL;
  if (dt == TORC_F64) {
    ce_fwd_d(dt, x, tg, wp, loss2, mo2, lo2, tot2, N, C, S, &p);
    ce_bw_d(dt, gy, x, tg, mo, lo, tot, wp, gx2, N, C, S, &p);
  } else {
    ce_fwd_f(dt, x, tg, wp, loss2, mo2, lo2, tot2, N, C, S, &p);
    ce_bw_f(dt, gy, x, tg, mo, lo, tot, wp, gx2, N, C, S, &p);
  }
  double rt = rtol_of(dt), srt = dt == TORC_F64 ? 1e-12 : 2e-5;
  for (int64_t r = 0; r < R; r++) {
    expect_close("max", r, ld(sd, mo2, r), ld(sd, mo, r), 0, 0);
    expect_close("logsum", r, ld(sd, lo2, r), ld(sd, lo, r), srt, srt);
  }
  expect_close("total", 0, ld(sd, tot2, 0), ld(sd, tot, 0), srt, srt);
  /* f32 arithmetic's error on O(10) values, and the reduced loss sums R
   * of them; beyond it, one rounding of the dtype (rt) */
  double at = dt == TORC_F64 ? 1e-12 : 1e-5;
  for (int64_t i = 0; i < nl; i++)
    expect_close("loss", i, ld(dt, loss2, i), ld(dt, loss, i), rt,
                 10 * at * (none ? 1 : (double)R));
  for (int64_t i = 0; i < total; i++)
    expect_close("gx", i, ld(dt, gx2, i), ld(dt, gx, i), rt, at);
  void *all[] = {x,   w,    loss, mo, lo, tot, loss2,
                 mo2, lo2, tot2, gy, gx, gx2, tg};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    free(all[i]);
}

static void test_cross_entropy(void **state) {
  (void)state;
  for (size_t d = 0; d < 4; d++)
    for (int red = 0; red < 3; red++)
      for (int wt = 0; wt < 2; wt++) {
        check_ce(dtypes[d], 6, 7, 1, wt, 0.0, red, 0, 0);
        check_ce(dtypes[d], 6, 7, 1, wt, 0.1, red, 0, 0);
        check_ce(dtypes[d], 3, 70, 4, wt, 0.25, red, 0, 0); /* C > 32, S > 1 */
        check_ce(dtypes[d], 2, 5, 3, wt, 0.0, red, 0, 0);
        check_ce(dtypes[d], 5, 4, 1, wt, 0.1, red, 1, 0);
        check_ce(dtypes[d], 2, 1100, 2, wt, 0.1, red, 0, 0); /* a warp */
        check_ce(dtypes[d], 0, 4, 1, wt, 0.1, red, 0, 0); /* no rows */
      }
}

static void test_ce_targets(void **state) {
  (void)state;
  assert_true(torc_cuda_ce_counted(3, -100));
  assert_false(torc_cuda_ce_counted(-100, -100));
  assert_false(torc_cuda_ce_bad(-100, -100, 5));
  assert_false(torc_cuda_ce_bad(4, -100, 5));
  assert_true(torc_cuda_ce_bad(5, -100, 5));
  assert_true(torc_cuda_ce_bad(-1, -100, 5));
  assert_false(torc_cuda_ce_bad(7, 7, 5)); /* ignore_index beyond C */
  /* the mean over no counted target is NaN, as ref */
  check_ce(TORC_F32, 4, 3, 1, 0, 0.0, TORC_REDUCTION_MEAN, 0, 1);
  check_ce(TORC_F32, 4, 3, 1, 1, 0.2, TORC_REDUCTION_MEAN, 0, 1);
}

/* ---- optimizer steps: bit for bit ---- */

/* The values of an element of dtype dt, from the bits at p[i]. */
static int same_bits(int dt, const void *a, const void *b, int64_t i) {
  double x = ld(dt, a, i), y = ld(dt, b, i);
  if (isnan(x) && isnan(y))
    return 1;
  return memcmp((const char *)a + (size_t)i * dsize(dt),
                (const char *)b + (size_t)i * dsize(dt), dsize(dt)) == 0;
}

#define N_OPT 997

/* The kernel's element loop of op_sgd / op_adam, on the CPU. */
static void sgd_replica(int dt, const torc_sgd_step_params *sp, void *p,
                        const void *g, void *b, int64_t n) {
  torc_cuda_sgd_k k = torc_cuda_sgd_k_of(dt, sp);
  for (int64_t i = 0; i < n; i++) {
    if (dt == TORC_F64) {
      double bb = k.has_buf ? ld(dt, b, i) : 0;
      double np = torc_cuda_sgd_d(dt, &k, ld(dt, p, i), ld(dt, g, i), &bb);
      if (k.has_buf)
        st(dt, b, i, bb);
      st(dt, p, i, np);
    } else {
      float bb = k.has_buf ? (float)ld(dt, b, i) : 0;
      float np = torc_cuda_sgd_f(dt, &k, (float)ld(dt, p, i),
                                 (float)ld(dt, g, i), &bb);
      if (k.has_buf)
        st(dt, b, i, bb);
      st(dt, p, i, np);
    }
  }
}

static void adam_replica(int dt, const torc_adam_step_kparams *kp, void *p,
                         const void *g, void *m, void *v, void *vm,
                         int64_t n) {
  torc_cuda_adam_k k = torc_cuda_adam_k_of(dt, kp);
  for (int64_t i = 0; i < n; i++) {
    if (dt == TORC_F64) {
      double mm = ld(dt, m, i), vv = ld(dt, v, i);
      double vx = k.amsgrad ? ld(dt, vm, i) : 0;
      double np = torc_cuda_adam_d(dt, &k, ld(dt, p, i), ld(dt, g, i), &mm,
                                   &vv, &vx);
      st(dt, m, i, mm);
      st(dt, v, i, vv);
      if (k.amsgrad)
        st(dt, vm, i, vx);
      st(dt, p, i, np);
    } else {
      float mm = (float)ld(dt, m, i), vv = (float)ld(dt, v, i);
      float vx = k.amsgrad ? (float)ld(dt, vm, i) : 0;
      float np = torc_cuda_adam_f(dt, &k, (float)ld(dt, p, i),
                                  (float)ld(dt, g, i), &mm, &vv, &vx);
      st(dt, m, i, mm);
      st(dt, v, i, vv);
      if (k.amsgrad)
        st(dt, vm, i, vx);
      st(dt, p, i, np);
    }
  }
}

/* Random values with a few special ones (zeros, a tiny and a large one). */
static void fill_opt(int dt, void *p, int64_t n, double lo, double hi) {
  fill(dt, p, n, lo, hi);
  st(dt, p, 0, 0.0);
  st(dt, p, 1, lo < 0 ? -0.0 : 0.0);
  st(dt, p, 2, hi * 1e-3);
  st(dt, p, 3, hi * 30);
}

static void test_sgd(void **state) {
  (void)state;
  static const torc_sgd_step_params cfg[] = {
      {0.1, 0, 0, 0, 0, 0, 0, 0},        {0.01, 0.9, 0, 0, 0, 0, 0, 0},
      {0.01, 0.9, 0, 0, 0, 0, 1, 0},     {0.05, 0.9, 0.1, 1e-4, 0, 0, 0, 0},
      {0.03, 0.8, 0, 5e-4, 1, 0, 0, 0},  {0.02, 0.7, 0.3, 0.01, 0, 1, 0, 0},
      {0.1, 0, 0, 0.01, 0, 1, 0, 0},     {0.3, 0.99, 0, 0, 1, 1, 1, 0}};
  int64_t shape[1] = {N_OPT};
  for (size_t d = 0; d < 4; d++)
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
      int dt = dtypes[d];
      void *p = buf(dt, N_OPT), *g = buf(dt, N_OPT), *b = buf(dt, N_OPT);
      void *p2 = buf(dt, N_OPT), *b2 = buf(dt, N_OPT);
      fill_opt(dt, p, N_OPT, -2, 2);
      fill_opt(dt, g, N_OPT, -1, 1);
      fill_opt(dt, b, N_OPT, -1, 1);
      memcpy(p2, p, (size_t)N_OPT * dsize(dt));
      memcpy(b2, b, (size_t)N_OPT * dsize(dt));
      int has_buf = cfg[c].momentum != 0;
      torc_ktensor in[1] = {kt(dt, g, 1, shape)};
      torc_ktensor out[2] = {kt(dt, p, 1, shape), kt(dt, b, 1, shape)};
      run_ref("sgd_step_", dt, in, 1, out, has_buf ? 2 : 1, &cfg[c],
              sizeof cfg[c]);
      sgd_replica(dt, &cfg[c], p2, g, b2, N_OPT);
      for (int64_t i = 0; i < N_OPT; i++) {
        if (!same_bits(dt, p, p2, i))
          fail_msg("sgd %s config %zu param[%lld]: got %.9g, ref %.9g",
                   dt == TORC_F32 ? "f32" : dt == TORC_F64 ? "f64" : "f16/bf16",
                   c, (long long)i, ld(dt, p2, i), ld(dt, p, i));
        if (has_buf && !same_bits(dt, b, b2, i))
          fail_msg("sgd config %zu buf[%lld]: got %.9g, ref %.9g", c,
                   (long long)i, ld(dt, b2, i), ld(dt, b, i));
      }
      free(p), free(g), free(b), free(p2), free(b2);
    }
}

static void test_adam(void **state) {
  (void)state;
  /* lr, beta1, beta2, eps, weight_decay, step, amsgrad, maximize,
   * decoupled, reserved */
  static const torc_adam_step_params cfg[] = {
      {1e-3, 0.9, 0.999, 1e-8, 0, 1, 0, 0, 0, 0},
      {1e-3, 0.9, 0.999, 1e-8, 0, 7, 0, 0, 0, 0},
      {3e-4, 0.8, 0.99, 1e-6, 0.01, 3, 0, 0, 0, 0},
      {1e-2, 0.9, 0.999, 1e-8, 0.05, 12, 0, 0, 1, 0},
      {1e-3, 0.5, 0.9, 1e-3, 0, 2, 1, 0, 0, 0},
      {2e-3, 0.9, 0.95, 1e-8, 0.1, 100, 1, 1, 1, 0},
      {1e-1, 0.0, 0.5, 0.0, 0.001, 4, 0, 1, 0, 0}};
  int64_t shape[1] = {N_OPT};
  for (size_t d = 0; d < 4; d++)
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
      int dt = dtypes[d];
      torc_adam_step_kparams kp;
      memset(&kp, 0, sizeof kp);
      kp.p = cfg[c];
      double bc1 = 1 - pow(cfg[c].beta1, (double)cfg[c].step);
      double bc2 = 1 - pow(cfg[c].beta2, (double)cfg[c].step);
      kp.step_size = cfg[c].lr / bc1;
      kp.bias_correction2_sqrt = sqrt(bc2);
      void *p = buf(dt, N_OPT), *g = buf(dt, N_OPT), *m = buf(dt, N_OPT),
           *v = buf(dt, N_OPT), *vm = buf(dt, N_OPT);
      void *p2 = buf(dt, N_OPT), *m2 = buf(dt, N_OPT), *v2 = buf(dt, N_OPT),
           *vm2 = buf(dt, N_OPT);
      fill_opt(dt, p, N_OPT, -2, 2);
      fill_opt(dt, g, N_OPT, -1, 1);
      fill_opt(dt, m, N_OPT, -0.5, 0.5);
      fill_opt(dt, v, N_OPT, 0, 0.5);
      fill_opt(dt, vm, N_OPT, 0, 0.6);
      st(dt, v, 5, NAN); /* amsgrad's maximum propagates NaN */
      st(dt, vm, 6, NAN);
      size_t bytes = (size_t)N_OPT * dsize(dt);
      memcpy(p2, p, bytes);
      memcpy(m2, m, bytes);
      memcpy(v2, v, bytes);
      memcpy(vm2, vm, bytes);
      torc_ktensor in[1] = {kt(dt, g, 1, shape)};
      torc_ktensor out[4] = {kt(dt, p, 1, shape), kt(dt, m, 1, shape),
                             kt(dt, v, 1, shape), kt(dt, vm, 1, shape)};
      run_ref("adam_step_", dt, in, 1, out, cfg[c].amsgrad ? 4 : 3, &kp,
              sizeof kp);
      adam_replica(dt, &kp, p2, g, m2, v2, vm2, N_OPT);
      for (int64_t i = 0; i < N_OPT; i++) {
        const void *r[4] = {p, m, v, vm}, *o[4] = {p2, m2, v2, vm2};
        static const char *const nm[4] = {"param", "exp_avg", "exp_avg_sq",
                                          "max_exp_avg_sq"};
        for (int j = 0; j < (cfg[c].amsgrad ? 4 : 3); j++)
          if (!same_bits(dt, r[j], o[j], i))
            fail_msg("adam dtype %d config %zu %s[%lld]: got %.9g, ref %.9g",
                     dt, c, nm[j], (long long)i, ld(dt, o[j], i),
                     ld(dt, r[j], i));
      }
      void *all[] = {p, g, m, v, vm, p2, m2, v2, vm2};
      for (size_t i = 0; i < 9; i++)
        free(all[i]);
    }
}

/* foreach_add_ and foreach_mul_ on lists of three, bit for bit. */
static void test_foreach_add_mul(void **state) {
  (void)state;
  static const int64_t sizes[3] = {N_OPT, 1, 64};
  for (size_t d = 0; d < 4; d++) {
    int dt = dtypes[d];
    void *x[3], *y[3], *x2[3], *sc = buf(dt, 1);
    torc_ktensor xs[3], ys[3];
    st(dt, sc, 0, -1.37);
    for (int k = 0; k < 3; k++) {
      x[k] = buf(dt, sizes[k]);
      y[k] = buf(dt, sizes[k]);
      x2[k] = buf(dt, sizes[k]);
      if (sizes[k] > 4)
        fill_opt(dt, x[k], sizes[k], -3, 3);
      else
        fill(dt, x[k], sizes[k], -3, 3);
      fill(dt, y[k], sizes[k], -3, 3);
      xs[k] = kt(dt, x[k], 1, &sizes[k]);
      ys[k] = kt(dt, y[k], 1, &sizes[k]);
    }
    for (int op = 0; op < 2; op++) {
      for (int k = 0; k < 3; k++)
        memcpy(x2[k], x[k], (size_t)sizes[k] * dsize(dt));
      torc_ktensor s1 = kt(dt, sc, 0, NULL);
      if (op == 0)
        run_ref("foreach_add_", dt, ys, 3, xs, 3, NULL, 0);
      else
        run_ref("foreach_mul_", dt, &s1, 1, xs, 3, NULL, 0);
      for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < sizes[k]; i++) {
          double a = ld(dt, x2[k], i), b = op ? ld(dt, sc, 0) : ld(dt, y[k], i);
          double got =
              dt == TORC_F64
                  ? (op ? torc_cuda_fe_mul_d(dt, a, b)
                        : torc_cuda_fe_add_d(dt, a, b))
                  : (op ? torc_cuda_fe_mul_f(dt, (float)a, (float)b)
                        : torc_cuda_fe_add_f(dt, (float)a, (float)b));
          st(dt, x2[k], i, got);
          if (!same_bits(dt, x[k], x2[k], i))
            fail_msg("foreach_%s dtype %d tensor %d [%lld]: got %.9g, ref "
                     "%.9g",
                     op ? "mul_" : "add_", dt, k, (long long)i,
                     ld(dt, x2[k], i), ld(dt, x[k], i));
        }
    }
    for (int k = 0; k < 3; k++)
      free(x[k]), free(y[k]), free(x2[k]);
    free(sc);
  }
}

/* ---- the multi-tensor plan ---- */

/* Runs the plan over sizes nu[n] and checks every element of every tensor
 * is served by exactly one block of one launch. */
static void check_plan(const int64_t *nu, int n, int64_t chunk, int max_e,
                       int64_t max_b) {
  int64_t total = 0, *off = malloc(sizeof(int64_t) * (size_t)(n + 1));
  assert_non_null(off);
  for (int k = 0; k < n; k++) {
    off[k] = total;
    total += nu[k];
  }
  off[n] = total;
  unsigned char *seen = calloc((size_t)(total ? total : 1), 1);
  torc_cuda_mt_entry *ent = malloc(sizeof *ent * (size_t)max_e);
  int32_t *bstart = malloc(sizeof(int32_t) * (size_t)max_e);
  assert_non_null(seen);
  assert_non_null(ent);
  assert_non_null(bstart);
  int ct = 0, ne;
  int64_t cc = 0;
  while ((ne = torc_cuda_mt_next(nu, n, chunk, max_e, max_b, &ct, &cc,
                                 ent)) > 0) {
    assert_true(ne <= max_e);
    int64_t b = 0;
    for (int e = 0; e < ne; e++) {
      assert_true(ent[e].nchunks > 0);
      assert_true(nu[ent[e].tensor] > 0);
      bstart[e] = (int32_t)b;
      b += ent[e].nchunks;
    }
    assert_true(b <= max_b);
    for (int32_t blk = 0; blk < (int32_t)b; blk++) {
      int e = torc_cuda_mt_locate(bstart, ne, blk);
      assert_true(e >= 0 && e < ne);
      assert_true(bstart[e] <= blk && (e + 1 == ne || blk < bstart[e + 1]));
      int k = ent[e].tensor;
      int64_t c = ent[e].chunk0 + (blk - bstart[e]);
      int64_t lo = c * chunk, hi = lo + chunk < nu[k] ? lo + chunk : nu[k];
      assert_true(lo < hi);
      for (int64_t i = lo; i < hi; i++)
        seen[off[k] + i]++;
    }
  }
  for (int64_t i = 0; i < total; i++)
    if (seen[i] != 1)
      fail_msg("element %lld of the list served %d times", (long long)i,
               (int)seen[i]);
  free(off);
  free(seen);
  free(ent);
  free(bstart);
}

static void test_mt_plan(void **state) {
  (void)state;
  int64_t nu[200];
  for (int trial = 0; trial < 300; trial++) {
    int n = 1 + (int)uniform(0, 60);
    for (int k = 0; k < n; k++) {
      double u = uniform(0, 1);
      nu[k] = u < 0.2 ? 0 : u < 0.4 ? 1 + (int64_t)uniform(0, 8)
                                    : (int64_t)uniform(0, 200);
    }
    int64_t chunk = 1 + (int64_t)uniform(0, 16);
    int max_e = 1 + (int)uniform(0, 6);
    int64_t max_b = 1 + (int64_t)uniform(0, 20);
    check_plan(nu, n, chunk, max_e, max_b);
    check_plan(nu, n, 16384, 41, 1 << 30); /* optim.cu's sizes */
  }
  int64_t empty[3] = {0, 0, 0};
  check_plan(empty, 3, 4, 2, 5);
  int64_t big[2] = {(int64_t)1 << 20, 3};
  check_plan(big, 2, 1000, 2, 7); /* a tensor over many launches */
}

/* ---- foreach_norm ---- */

/* optim.cu's two kernels on the CPU: chunk partials, then each tensor's
 * fold, for the list xs (dtype dt) with chunk elements per block. */
static double fn_replica(int dt, const void *x, int64_t n, int kind,
                         int64_t chunk) {
  int two = dt == TORC_F64 && kind == 2;
  int64_t np = torc_cuda_mt_chunks(n, chunk);
  double *part = malloc(sizeof(double) * (size_t)(np ? np : 1));
  double scale = 0;
  assert_non_null(part);
  for (int round = two ? 0 : 1; round < 2; round++) {
    int k = round == 0 ? 0 : kind;
    int fold = k == 1 || k == 2 ? k : 0;
    for (int64_t c = 0; c < np; c++) {
      double acc[B];
      int64_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
      for (int t = 0; t < B; t++) {
        acc[t] = 0;
        for (int64_t i = lo + t; i < hi; i += B)
          acc[t] = torc_cuda_fn_step(
              fold, acc[t], torc_cuda_fn_term(k, ld(dt, x, i), scale));
      }
      for (int s = B / 2; s > 0; s >>= 1)
        for (int t = 0; t < s; t++)
          acc[t] = torc_cuda_fn_step(fold, acc[t], acc[t + s]);
      part[c] = acc[0];
    }
    double acc[B];
    for (int t = 0; t < B; t++) {
      acc[t] = 0;
      for (int64_t j = t; j < np; j += B)
        acc[t] = torc_cuda_fn_step(fold, acc[t], part[j]);
    }
    for (int s = B / 2; s > 0; s >>= 1)
      for (int t = 0; t < s; t++)
        acc[t] = torc_cuda_fn_step(fold, acc[t], acc[t + s]);
    if (round == 0) {
      scale = acc[0];
      continue;
    }
    free(part);
    return torc_cuda_fn_final(kind, acc[0], two, scale);
  }
  free(part);
  return 0;
}

static void test_foreach_norm(void **state) {
  (void)state;
  static const int64_t sizes[5] = {0, 1, 1000, 70000, 5};
  static const double ps[3] = {1, 2, INFINITY};
  for (size_t d = 0; d < 4; d++)
    for (int sp = 0; sp < 3; sp++) {
      int dt = dtypes[d];
      void *xs[5];
      torc_ktensor in[5];
      for (int k = 0; k < 5; k++) {
        xs[k] = buf(dt, sizes[k]);
        fill(dt, xs[k], sizes[k], -3, 3);
        in[k] = kt(dt, xs[k], 1, &sizes[k]);
      }
      if (sp == 1)
        st(dt, xs[4], 2, NAN);
      if (sp == 2)
        st(dt, xs[2], 17, INFINITY);
      if (dt == TORC_F64 && sp == 0)
        st(dt, xs[3], 5, 1e300); /* the square overflows f64 */
      for (int pi = 0; pi < 3; pi++) {
        void *out = buf(dt, 5);
        int64_t os[1] = {5};
        torc_ktensor o = kt(dt, out, 1, os);
        torc_norm_params p = {0, 0, ps[pi]};
        run_ref("foreach_norm", dt, in, 5, &o, 1, &p, sizeof p);
        int kind = pi == 0 ? 1 : pi == 1 ? 2 : 0;
        for (int k = 0; k < 5; k++) {
          double got = fn_replica(dt, xs[k], sizes[k], kind, 16384);
          double got_small = fn_replica(dt, xs[k], sizes[k], kind, 77);
          void *g = buf(dt, 2);
          st(dt, g, 0, got);
          st(dt, g, 1, got_small);
          /* one rounding of the dtype at most: both fold in f64 */
          double rt = dt == TORC_F64   ? 1e-13
                      : dt == TORC_F32 ? 2.4e-7
                      : dt == TORC_F16 ? 1.0 / 1024
                                       : 1.0 / 128;
          expect_close("norm", k, ld(dt, g, 0), ld(dt, out, k), rt, 0);
          expect_close("norm (small chunks)", k, ld(dt, g, 1), ld(dt, out, k),
                       rt, 0);
          free(g);
        }
        free(out);
      }
      for (int k = 0; k < 5; k++)
        free(xs[k]);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layer_norm),  cmocka_unit_test(test_group_norm),
      cmocka_unit_test(test_cross_entropy), cmocka_unit_test(test_ce_targets),
      cmocka_unit_test(test_sgd),         cmocka_unit_test(test_adam),
      cmocka_unit_test(test_foreach_add_mul),
      cmocka_unit_test(test_mt_plan),     cmocka_unit_test(test_foreach_norm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
