/* plugins/cpu/gemm.c — "matmul" for f32/f64: f32 through the selected
 * provider (OpenBLAS's cblas_sgemm or oneDNN's dnnl_sgemm, the [plugin.cpu]
 * gemm key), f64 through cblas_dgemm; each call single-threaded, a big GEMM
 * split into row or column blocks across the plugin's pool. Strided 2-D
 * operands pass as transposes with their leading dimension, other layouts
 * through a contiguous copy; batches are a loop of GEMMs, or one GEMM when
 * a broadcast right operand lets the batch fold into M.
 */
#include <cblas.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef TORC_CPU_HAVE_DNNL
#include <dnnl.h>
#include <omp.h>
#endif

#include "cpu_internal.h"

/* Threads: OpenBLAS runs single-threaded (its idle workers spin in
 * sched_yield, taking ~30% of the CPU in a training loop); a big GEMM is
 * split into column or row blocks across the plugin's pool instead, each
 * block one single-threaded provider call. */
static atomic_int gemm_threads = 1;

void torc_cpu__threads(int n) {
  static atomic_int blas_set;
  if (n < 1)
    n = 1;
  atomic_store(&gemm_threads, n);
  if (!atomic_exchange(&blas_set, 1))
    openblas_set_num_threads(1);
}

/* The f32 provider: 0 OpenBLAS, 1 oneDNN (dnnl_sgemm). */
enum { GEMM_OPENBLAS, GEMM_ONEDNN };
static int sgemm_provider = GEMM_OPENBLAS;

static void blas_call(int32_t dtype, int ta, int tb, int64_t m, int64_t n,
                      int64_t k, double alpha, const void *a, int64_t lda,
                      const void *b, int64_t ldb, double beta, void *c,
                      int64_t ldc, int provider) {
#ifdef TORC_CPU_HAVE_DNNL
  if (dtype == TORC_F32 && provider == GEMM_ONEDNN) {
    /* One thread per call: dnnl reads OpenMP's thread count of the
     * calling thread; the pool supplies the parallelism. */
    int prev = omp_get_max_threads();
    if (prev != 1)
      omp_set_num_threads(1);
    dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, (float)alpha, a, lda, b,
               ldb, (float)beta, c, ldc);
    if (prev != 1)
      omp_set_num_threads(prev);
    return;
  }
#else
  (void)provider;
#endif
  enum CBLAS_TRANSPOSE tA = ta ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tB = tb ? CblasTrans : CblasNoTrans;
  if (dtype == TORC_F64)
    cblas_dgemm(CblasRowMajor, tA, tB, (blasint)m, (blasint)n, (blasint)k,
                alpha, a, (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
  else
    cblas_sgemm(CblasRowMajor, tA, tB, (blasint)m, (blasint)n, (blasint)k,
                (float)alpha, a, (blasint)lda, b, (blasint)ldb, (float)beta, c,
                (blasint)ldc);
}

/* One GEMM split into blocks of C's columns (split_n) or rows. */
typedef struct gemm_job {
  int32_t dtype;
  int ta, tb, split_n, provider;
  int64_t m, n, k, lda, ldb, ldc, unit, n_units;
  double alpha, beta;
  const char *a, *b;
  char *c;
} gemm_job;

static void gemm_task(void *ctx, int64_t b0, int64_t b1) {
  const gemm_job *j = ctx;
  size_t es = cpu_esize(j->dtype);
  int64_t lo = b0 * j->unit, hi = b1 * j->unit;
  int64_t len = j->split_n ? j->n : j->m;
  if (hi > len)
    hi = len;
  if (lo >= hi)
    return;
  if (j->split_n) {
    /* op(B)[:, lo:hi]: columns of B, or rows of B^T. */
    const char *b = j->b + (size_t)(j->tb ? lo * j->ldb : lo) * es;
    blas_call(j->dtype, j->ta, j->tb, j->m, hi - lo, j->k, j->alpha, j->a,
              j->lda, b, j->ldb, j->beta, j->c + (size_t)lo * es, j->ldc,
              j->provider);
  } else {
    const char *a = j->a + (size_t)(j->ta ? lo : lo * j->lda) * es;
    blas_call(j->dtype, j->ta, j->tb, hi - lo, j->n, j->k, j->alpha, a, j->lda,
              j->b, j->ldb, j->beta, j->c + (size_t)(lo * j->ldc) * es, j->ldc,
              j->provider);
  }
}

/* GEMMs under this many multiply-adds run on the calling thread. */
enum { GEMM_PAR_MIN = 1 << 18 };

void torc_cpu__gemm(int32_t dtype, int ta, int tb, int64_t m, int64_t n,
                    int64_t k, double alpha, const void *a, int64_t lda,
                    const void *b, int64_t ldb, double beta, void *c,
                    int64_t ldc) {
  int nt = atomic_load(&gemm_threads);
  double work = (double)m * (double)n * (double)k;
  if (nt <= 1 || work < GEMM_PAR_MIN || (m < 32 && n < 32)) {
    blas_call(dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
              sgemm_provider);
    return;
  }
  gemm_job j = {dtype, ta,  tb, n >= m, sgemm_provider, m,    n, k, lda,
                ldb,   ldc, 0,  0,      alpha,          beta, a, b, c};
  int64_t len = j.split_n ? n : m;
  /* Blocks of 16 rows/columns (a multiple of every kernel's tile), claimed
   * about two per thread at a time: few enough provider calls (each packs
   * its operands), and a thread preempted mid-GEMM leaves its unclaimed
   * blocks to the others. */
  j.unit = 16;
  j.n_units = (len + j.unit - 1) / j.unit;
  int64_t per = (j.n_units + 2 * nt - 1) / (2 * nt);
  torc_cpu__parallel_dyn(nt, j.n_units, per, gemm_task, &j);
}

/* ---- choosing the provider ----
 * "auto" is a rule, not a measurement: oneDNN's first sgemm costs 40-55
 * ms of one-time set-up here (JIT, CPU detection), which a measurement at
 * load would pay even when OpenBLAS wins. oneDNN's sgemm uses AVX-512
 * where the CPU and OS have it, while OpenBLAS uses what its core type
 * (OPENBLAS_CORETYPE, or its own detection) names: on an AVX-512 machine
 * whose OpenBLAS core has no AVX-512 kernels, oneDNN's are ~2x faster
 * (measured: 180 vs 98 GFLOP/s at n = 256 on 2 Zen 5 cores, Haswell
 * core type); elsewhere OpenBLAS, which needs no set-up. */

/* 1 if OpenBLAS runs AVX-512 kernels (its SkylakeX-class core types). */
static int openblas_has_avx512(void) {
  const char *core = openblas_get_corename();
  static const char *const names[] = {"skylakex", "cooperlake",
                                      "sapphirerapids"};
  if (core == NULL)
    return 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcasecmp(core, names[i]) == 0)
      return 1;
  return 0;
}

int torc_cpu__gemm_select(const char *name) {
  const char *env = getenv("TORC_CPU_GEMM");
  if (env && *env)
    name = env;
  if (name == NULL || strcmp(name, "auto") == 0) {
    sgemm_provider = GEMM_OPENBLAS;
#ifdef TORC_CPU_HAVE_DNNL
    if (torc_cpu__machine_isa() >= 2 && !openblas_has_avx512())
      sgemm_provider = GEMM_ONEDNN;
#endif
    return TORC_OK;
  }
  if (strcmp(name, "openblas") == 0) {
    sgemm_provider = GEMM_OPENBLAS;
    return TORC_OK;
  }
  if (strcmp(name, "onednn") == 0) {
#ifdef TORC_CPU_HAVE_DNNL
    sgemm_provider = GEMM_ONEDNN;
    return TORC_OK;
#else
    return torc_cpu__set_error(TORC_ERR_INVALID,
                               "[plugin.cpu] gemm = onednn: this cpu plugin "
                               "was built without oneDNN (install "
                               "libdnnl-dev and configure again), use auto "
                               "or openblas");
#endif
  }
  return torc_cpu__set_error(TORC_ERR_INVALID,
                             "[plugin.cpu] gemm = '%s' is not a GEMM "
                             "provider; use auto, openblas or onednn",
                             name);
}

const char *torc_cpu__gemm_name(void) {
  return sgemm_provider == GEMM_ONEDNN ? "onednn" : "openblas";
}

/* How BLAS can read a rows x cols matrix with strides (rs, cs): as is
 * (*trans 0, leading dimension *ld) or as the transpose of a row-major
 * cols x rows matrix (*trans 1). Returns 0 when neither fits (a broadcast
 * or doubly strided operand), and the caller copies it. */
static int blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                       int *trans, int64_t *ld) {
  if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= (cols > 1 ? cols : 1))) {
    *trans = 0;
    *ld = rows <= 1 ? (cols > 1 ? cols : 1) : rs;
    return 1;
  }
  if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= (rows > 1 ? rows : 1))) {
    *trans = 1;
    *ld = cols <= 1 ? (rows > 1 ? rows : 1) : cs;
    return 1;
  }
  return 0;
}

/* Copies a strided rows x cols matrix to dst, row-major. */
static void pack(int32_t dt, void *dst, const char *src, int64_t rows,
                 int64_t cols, int64_t rs, int64_t cs) {
  if (dt == TORC_F64) {
    double *d = dst;
    const double *s = (const double *)src;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++)
        d[i * cols + j] = s[i * rs + j * cs];
  } else {
    float *d = dst;
    const float *s = (const float *)src;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++)
        d[i * cols + j] = s[i * rs + j * cs];
  }
}

/* One operand of a GEMM: the pointer, transpose flag and leading
 * dimension BLAS gets, packing into *buf (grown as needed) when the
 * strides do not fit. */
typedef struct operand {
  const void *p;
  int trans;
  int64_t ld;
} operand;

static int prepare(int32_t dt, const char *src, int64_t rows, int64_t cols,
                   int64_t rs, int64_t cs, void **buf, operand *o) {
  if (blas_layout(rows, cols, rs, cs, &o->trans, &o->ld)) {
    o->p = src;
    return TORC_OK;
  }
  if (*buf == NULL) {
    size_t n = (size_t)(rows * cols > 0 ? rows * cols : 1);
    *buf = malloc(n * cpu_esize(dt));
    if (*buf == NULL)
      return torc_cpu__set_error(TORC_ERR_OOM,
                                 "cpu kernel 'matmul': out of memory packing "
                                 "a %lld x %lld operand",
                                 (long long)rows, (long long)cols);
  }
  pack(dt, *buf, src, rows, cols, rs, cs);
  o->p = *buf;
  o->trans = 0;
  o->ld = cols > 1 ? cols : 1;
  return TORC_OK;
}

/* 1 if a's batch dims (0 .. nb-1) and its rows (stride rs) form one
 * evenly strided run of B*M rows, so [B..., M, K] reads as [B*M, K]. */
static int rows_fold(const torc_ktensor *a, int nb, int64_t rs) {
  int64_t expect = rs * a->shape[nb];
  for (int d = nb - 1; d >= 0; d--) {
    if (a->shape[d] != 1 && a->strides[d] != expect)
      return 0;
    expect *= a->shape[d];
  }
  return 1;
}

int torc_cpu__k_matmul(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel 'matmul' got %d inputs and %d "
                               "outputs (expected 2 and 1)",
                               a->n_in, a->n_out);
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  int nd = y->ndim, nb = nd - 2;
  int ok = nd >= 2 && x->ndim == nd && w->ndim == nd && x->dtype == y->dtype &&
           w->dtype == y->dtype &&
           (y->dtype == TORC_F32 || y->dtype == TORC_F64);
  for (int d = 0; ok && d < nb; d++)
    ok = x->shape[d] == y->shape[d] && w->shape[d] == y->shape[d];
  if (ok)
    ok = x->shape[nd - 2] == y->shape[nd - 2] &&
         w->shape[nd - 1] == y->shape[nd - 1] &&
         x->shape[nd - 1] == w->shape[nd - 2];
  if (!ok)
    return torc_cpu__set_error(TORC_ERR_SHAPE,
                               "cpu kernel 'matmul' got operands of %d, %d "
                               "and %d dims that are not [B..., M, K] x "
                               "[B..., K, N] -> [B..., M, N] in one of f32, "
                               "f64",
                               x->ndim, w->ndim, y->ndim);
  torc_cpu__threads(a->n_threads);
  int32_t dt = y->dtype;
  size_t es = cpu_esize(dt);
  int64_t M = y->shape[nd - 2], N = y->shape[nd - 1], K = x->shape[nd - 1];
  int64_t B = 1;
  for (int d = 0; d < nb; d++)
    B *= y->shape[d];
  if (B == 0 || M == 0 || N == 0)
    return TORC_OK;
  /* The output is contiguous (the contract): batch b at b*M*N. */
  char *yp = cpu_ptr(y, 0);
  if (K == 0) {
    memset(yp, 0, (size_t)(B * M * N) * es);
    return TORC_OK;
  }
  int64_t xs_m = x->strides[nd - 2], xs_k = x->strides[nd - 1];
  int64_t ws_k = w->strides[nd - 2], ws_n = w->strides[nd - 1];
  int w_bcast = 1;
  for (int d = 0; d < nb; d++)
    w_bcast = w_bcast && (w->shape[d] == 1 || w->strides[d] == 0);
  void *xbuf = NULL, *wbuf = NULL;
  operand ox, ow;
  int st = TORC_OK;
  if (B > 1 && w_bcast && (xs_k == 1 || K == 1) && rows_fold(x, nb, xs_m) &&
      xs_m >= K) {
    /* [B..., M, K] x [K, N]: one GEMM of B*M rows. */
    st = prepare(dt, cpu_ptr(w, 0), K, N, ws_k, ws_n, &wbuf, &ow);
    if (st == TORC_OK)
      torc_cpu__gemm(dt, 0, ow.trans, B * M, N, K, 1.0, cpu_ptr(x, 0),
                     xs_m > 0 ? xs_m : 1, ow.p, ow.ld, 0.0, yp, N);
    free(wbuf);
    return st;
  }
  int64_t idx[TORC_KERNEL_MAX_DIMS] = {0};
  int w_packed = 0;
  for (int64_t b = 0; b < B && st == TORC_OK; b++) {
    int64_t xo = 0, wo = 0;
    for (int d = 0; d < nb; d++)
      xo += idx[d] * x->strides[d], wo += idx[d] * w->strides[d];
    st = prepare(dt, cpu_ptr(x, xo), M, K, xs_m, xs_k, &xbuf, &ox);
    /* A broadcast right operand is packed once for the whole batch. */
    if (st == TORC_OK && !(w_bcast && w_packed)) {
      st = prepare(dt, cpu_ptr(w, wo), K, N, ws_k, ws_n, &wbuf, &ow);
      w_packed = 1;
    }
    if (st == TORC_OK)
      torc_cpu__gemm(dt, ox.trans, ow.trans, M, N, K, 1.0, ox.p, ox.ld, ow.p,
                     ow.ld, 0.0, yp + (size_t)(b * M * N) * es, N);
    for (int d = nb - 1; d >= 0; d--) {
      if (++idx[d] < y->shape[d])
        break;
      idx[d] = 0;
    }
  }
  free(xbuf);
  free(wbuf);
  return st;
}

/* ---- linear_act: matmul, then the bias and the activation in one pass
 * over y's rows (each row's work is small, so rows are split across the
 * pool only when y is large). The sums are the add op's (one rounding to
 * the dtype), so the result is matmul's, then add's, then relu's. */

typedef struct epilogue {
  int32_t dtype, act;
  int64_t N;
  char *y;
  const char *b; /* NULL: no bias */
  int64_t bs;    /* the bias's stride, in elements */
} epilogue;

#define EPILOGUE_ROWS(T)                                                       \
  static void epilogue_##T(const epilogue *e, int64_t r0, int64_t r1) {       \
    const T *b = (const T *)e->b;                                              \
    for (int64_t r = r0; r < r1; r++) {                                        \
      T *y = (T *)e->y + r * e->N;                                             \
      if (b)                                                                   \
        for (int64_t n = 0; n < e->N; n++)                                     \
          y[n] = y[n] + b[n * e->bs];                                          \
      if (e->act == TORC_ACT_RELU)                                             \
        for (int64_t n = 0; n < e->N; n++)                                     \
          y[n] = y[n] > 0 || y[n] != y[n] ? y[n] : (T)0; /* NaN kept */        \
    }                                                                          \
  }
EPILOGUE_ROWS(float)
EPILOGUE_ROWS(double)

static void epilogue_task(void *ctx, int64_t r0, int64_t r1) {
  const epilogue *e = ctx;
  if (e->dtype == TORC_F64)
    epilogue_double(e, r0, r1);
  else
    epilogue_float(e, r0, r1);
}

/* in x [M, K], w [K, N] (strided), optionally b [N]; out y [M, N]. */
int torc_cpu__k_linear_act(const torc_kernel_args *a) {
  const torc_linear_act_kparams *p = a->params;
  if ((a->n_in != 2 && a->n_in != 3) || a->n_out != 1 || p == NULL ||
      a->params_size < sizeof *p)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel 'linear_act' got %d inputs, %d "
                               "outputs and %zu bytes of params (expected "
                               "2 or 3, 1 and %zu)",
                               a->n_in, a->n_out, a->params_size, sizeof *p);
  const torc_ktensor *y = &a->out[0];
  if (p->act != TORC_ACT_NONE && p->act != TORC_ACT_RELU)
    return TORC_KERNEL_DECLINED;
  if (a->n_in == 3) {
    const torc_ktensor *b = &a->in[2];
    if (b->ndim != 1 || y->ndim != 2 || b->shape[0] != y->shape[1] ||
        b->dtype != y->dtype)
      return torc_cpu__set_error(TORC_ERR_SHAPE,
                                 "cpu kernel 'linear_act': the bias must "
                                 "be a vector of y's %lld columns and dtype",
                                 (long long)(y->ndim == 2 ? y->shape[1] : 0));
  }
  torc_kernel_args mm = *a;
  mm.op = "matmul";
  mm.n_in = 2;
  mm.params = NULL;
  mm.params_size = 0;
  int st = torc_cpu__k_matmul(&mm);
  if (st != TORC_OK)
    return st;
  int64_t M = y->shape[0], N = y->shape[1];
  if (M == 0 || N == 0 || (a->n_in == 2 && p->act == TORC_ACT_NONE))
    return TORC_OK;
  epilogue e = {y->dtype, p->act, N, cpu_ptr(y, 0),
                a->n_in == 3 ? cpu_ptr(&a->in[2], 0) : NULL,
                a->n_in == 3 ? a->in[2].strides[0] : 0};
  int64_t grain = TORC_CPU_PAR_MIN / N + 1;
  torc_cpu__parallel_for(a->n_threads, M, grain, epilogue_task, &e);
  return TORC_OK;
}
