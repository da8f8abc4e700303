/* tests/test_cuda_tiled_mm_bodies.c — the cuda plugin's tiled matmul
 * (plugins/cuda/tiled_mm.cu) replayed on the CPU with its body
 * (plugins/cuda/tiled_mm_body.h): the same tiles, the same staging of
 * TILE-wide strips with zero padding, the same batch offsets and sums
 * (wrapping int64; double in ref's order), against ref's kernel on the
 * same operands — batched, transposed, with sizes that are not multiples
 * of the tile, K = 0, sums that overflow and floats of mixed magnitude.
 * Bit-exact for i32, i64, u8, f32, f64, f16 and bf16. Needs no GPU.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "torc/dtype.h"
#include "torc/plugin.h"

#include "../plugins/cuda/tiled_mm_body.h"
#include "../plugins/ref/ref_kernels.h"
#include "cuda_testutil.h"

#define T TORC_CUDA_IMM_TILE

static torc_kernel_fn ref_matmul(void) {
  for (size_t i = 0; i < torc_ref_n_kernels; i++)
    if (strcmp(torc_ref_kernels[i].op, "matmul") == 0)
      return torc_ref_kernels[i].fn;
  fail_msg("no ref kernel for matmul");
  return NULL;
}

static size_t esize(int dt) {
  switch (dt) {
  case TORC_I64: case TORC_F64: return 8;
  case TORC_I32: case TORC_F32: return 4;
  case TORC_F16: case TORC_BF16: return 2;
  default: return 1;
  }
}

static int is_float(int dt) {
  return dt == TORC_F32 || dt == TORC_F64 || dt == TORC_F16 ||
         dt == TORC_BF16;
}

/* A floating element as tiled_mm.cu's loads widen it, and its store. */
static double loadf(int dt, const void *p, int64_t i) {
  switch (dt) {
  case TORC_F32: return ((const float *)p)[i];
  case TORC_F64: return ((const double *)p)[i];
  case TORC_F16: return torc_f16_to_f32(((const uint16_t *)p)[i]);
  default: return torc_bf16_to_f32(((const uint16_t *)p)[i]);
  }
}

static void storef(int dt, void *p, int64_t i, double v) {
  switch (dt) {
  case TORC_F32: ((float *)p)[i] = (float)v; break;
  case TORC_F64: ((double *)p)[i] = v; break;
  case TORC_F16: ((uint16_t *)p)[i] = torc_f32_to_f16((float)v); break;
  default: ((uint16_t *)p)[i] = torc_f32_to_bf16((float)v); break;
  }
}

static int64_t load(int dt, const void *p, int64_t i) {
  switch (dt) {
  case TORC_I64: return ((const int64_t *)p)[i];
  case TORC_I32: return ((const int32_t *)p)[i];
  default: return ((const uint8_t *)p)[i];
  }
}

static void store(int dt, void *p, int64_t i, int64_t v) {
  switch (dt) {
  case TORC_I64: ((int64_t *)p)[i] = v; break;
  case TORC_I32: ((int32_t *)p)[i] = torc_cuda_imm_to_i32(v); break;
  default: ((uint8_t *)p)[i] = torc_cuda_imm_to_u8(v); break;
  }
}

/* What the grid computes: every block (bx, by) of every batch, each
 * thread (tx, ty) of it summing the staged strips in the kernel's order. */
static void replay(int dt, const void *x, const void *w, void *y, int nd,
                   const int64_t *ysh, const int64_t *xst, const int64_t *wst,
                   const int64_t *yst, int64_t K) {
  torc_cuda_imm_batch bw;
  memset(&bw, 0, sizeof bw);
  bw.nb = nd - 2;
  int64_t batches = 1;
  for (int d = 0; d < nd - 2; d++) {
    bw.shape[d] = ysh[d];
    bw.st[0][d] = xst[d];
    bw.st[1][d] = wst[d];
    bw.st[2][d] = yst[d];
    batches *= ysh[d];
  }
  int64_t M = ysh[nd - 2], N = ysh[nd - 1];
  static int64_t sx[T][T], sw[T][T];
  static double fx[T][T], fw[T][T];
  int fl = is_float(dt);
  for (int64_t b = 0; b < batches; b++) {
    int64_t off[3];
    torc_cuda_imm_batch_offsets(&bw, b, off);
    for (int64_t by = 0; by < torc_cuda_imm_tiles(M); by++)
      for (int64_t bx = 0; bx < torc_cuda_imm_tiles(N); bx++) {
        int64_t acc[T][T];
        double facc[T][T];
        memset(acc, 0, sizeof acc);
        for (int ty = 0; ty < T; ty++)
          for (int tx = 0; tx < T; tx++)
            facc[ty][tx] = 0.0;
        for (int64_t k0 = 0; k0 < K; k0 += T) {
          for (int ty = 0; ty < T; ty++)
            for (int tx = 0; tx < T; tx++) {
              int64_t m = by * T + ty, n = bx * T + tx;
              int64_t kx = k0 + tx, kw = k0 + ty;
              int64_t px = off[0] + m * xst[nd - 2] + kx * xst[nd - 1];
              int64_t pw = off[1] + kw * wst[nd - 2] + n * wst[nd - 1];
              int inx = m < M && kx < K, inw = kw < K && n < N;
              if (fl) {
                fx[ty][tx] = inx ? loadf(dt, x, px) : 0.0;
                fw[ty][tx] = inw ? loadf(dt, w, pw) : 0.0;
              } else {
                sx[ty][tx] = inx ? load(dt, x, px) : 0;
                sw[ty][tx] = inw ? load(dt, w, pw) : 0;
              }
            }
          int kn = K - k0 < T ? (int)(K - k0) : T;
          for (int ty = 0; ty < T; ty++)
            for (int tx = 0; tx < T; tx++)
              for (int k = 0; k < kn; k++) {
                if (fl)
                  facc[ty][tx] =
                      torc_cuda_mm_dfma(facc[ty][tx], fx[ty][k], fw[k][tx]);
                else
                  acc[ty][tx] =
                      torc_cuda_imm_fma(acc[ty][tx], sx[ty][k], sw[k][tx]);
              }
        }
        for (int ty = 0; ty < T; ty++)
          for (int tx = 0; tx < T; tx++) {
            int64_t m = by * T + ty, n = bx * T + tx;
            int64_t py = off[2] + m * yst[nd - 2] + n * yst[nd - 1];
            if (m < M && n < N) {
              if (fl)
                storef(dt, y, py, facc[ty][tx]);
              else
                store(dt, y, py, acc[ty][tx]);
            }
          }
      }
  }
}

static void set_kt(torc_ktensor *t, void *p, int dt, int nd,
                   const int64_t *sh, const int64_t *st) {
  memset(t, 0, sizeof *t);
  t->data = p;
  t->dtype = dt;
  t->ndim = nd;
  for (int d = 0; d < nd; d++) {
    t->shape[d] = sh[d];
    t->strides[d] = st[d];
  }
}

/* Row-major strides of shape sh. */
static void contiguous(int nd, const int64_t *sh, int64_t *st) {
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; d--) {
    st[d] = s;
    s *= sh[d];
  }
}

/* One case: [B0, B1, M, K] x [B0, B1, K, N], w transposed in memory when
 * wt, values from `big` (overflowing sums) or small ones. */
static void one_case(int dt, int64_t B0, int64_t B1, int64_t M, int64_t K,
                     int64_t N, int wt, int big) {
  int nd = 4;
  int64_t xsh[4] = {B0, B1, M, K}, wsh[4] = {B0, B1, K, N},
          ysh[4] = {B0, B1, M, N};
  int64_t xst[4], wst[4], yst[4];
  contiguous(nd, xsh, xst);
  contiguous(nd, ysh, yst);
  int64_t wmem[4] = {B0, B1, N, K}; /* w stored as [.., N, K] when wt */
  if (wt) {
    int64_t ms[4];
    contiguous(nd, wmem, ms);
    wst[0] = ms[0], wst[1] = ms[1], wst[2] = ms[3], wst[3] = ms[2];
  } else {
    contiguous(nd, wsh, wst);
  }
  int64_t nx = B0 * B1 * M * K, nw = B0 * B1 * K * N, ny = B0 * B1 * M * N;
  size_t es = esize(dt);
  char *x = calloc((size_t)(nx ? nx : 1), es);
  char *w = calloc((size_t)(nw ? nw : 1), es);
  char *y = calloc((size_t)(ny ? ny : 1), es);
  char *yr = calloc((size_t)(ny ? ny : 1), es);
  assert_non_null(x);
  assert_non_null(w);
  assert_non_null(y);
  assert_non_null(yr);
  uint64_t r = 0x9e3779b97f4a7c15ull;
  for (int64_t i = 0; i < nx + nw; i++) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    int64_t v = big ? (int64_t)r : (int64_t)(r >> 59) - 16;
    if (is_float(dt)) {
      /* mixed magnitudes: sums that round, and cancel */
      double f = ((double)(r >> 11) / 9007199254740992.0 - 0.5) *
                 (big ? ldexp(1.0, (int)(r >> 60) * 4 - 30) : 8.0);
      storef(dt, i < nx ? x : w, i < nx ? i : i - nx, f);
    } else {
      store(dt, i < nx ? x : w, i < nx ? i : i - nx, v);
    }
  }
  memset(y, 0x5a, (size_t)ny * es);
  memset(yr, 0xa5, (size_t)ny * es);
  replay(dt, x, w, y, nd, ysh, xst, wst, yst, K);
  torc_ktensor in[2], out[1];
  set_kt(&in[0], x, dt, nd, xsh, xst);
  set_kt(&in[1], w, dt, nd, wsh, wst);
  set_kt(&out[0], yr, dt, nd, ysh, yst);
  torc_kernel_args a;
  cuda_test_args(&a, "matmul", in, 2, out, 1, NULL, 0);
  assert_int_equal(ref_matmul()(&a), TORC_OK);
  for (int64_t i = 0; i < ny; i++)
    if (memcmp(y + i * (int64_t)es, yr + i * (int64_t)es, es) != 0)
      fail_msg("dtype %d, [%lld,%lld,%lld,%lld] x N %lld (wt %d, big %d): "
               "element %lld is %lld, ref gives %lld",
               dt, (long long)B0, (long long)B1, (long long)M, (long long)K,
               (long long)N, wt, big, (long long)i,
               (long long)(is_float(dt) ? (int64_t)loadf(dt, y, i)
                                         : load(dt, y, i)),
               (long long)(is_float(dt) ? (int64_t)loadf(dt, yr, i)
                                         : load(dt, yr, i)));
  free(x), free(w), free(y), free(yr);
}

static void test_against_ref(void **state) {
  (void)state;
  static const int dts[] = {TORC_I32, TORC_I64, TORC_U8, TORC_F32,
                            TORC_F64, TORC_F16, TORC_BF16};
  static const int64_t sizes[][5] = {
      {1, 1, 1, 1, 1},  {1, 1, 16, 16, 16}, {2, 3, 5, 7, 9},
      {1, 2, 17, 33, 15}, {2, 1, 3, 0, 4},  {1, 1, 40, 3, 1}};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
      for (int wt = 0; wt < 2; wt++)
        for (int big = 0; big < 2; big++)
          one_case(dts[d], sizes[s][0], sizes[s][1], sizes[s][2], sizes[s][3],
                   sizes[s][4], wt, big);
}

/* Batch offsets: batch b of a [2, 3] batch with x's batch dims swapped in
 * memory starts where the strides say. */
static void test_batch_offsets(void **state) {
  (void)state;
  torc_cuda_imm_batch bw;
  memset(&bw, 0, sizeof bw);
  bw.nb = 2;
  bw.shape[0] = 2, bw.shape[1] = 3;
  bw.st[0][0] = 1, bw.st[0][1] = 2;    /* x: transposed batch */
  bw.st[1][0] = 30, bw.st[1][1] = 10;  /* w: row-major */
  bw.st[2][0] = 0, bw.st[2][1] = 7;    /* y: broadcast over dim 0 */
  for (int64_t b = 0; b < 6; b++) {
    int64_t off[3], i = b / 3, j = b % 3;
    torc_cuda_imm_batch_offsets(&bw, b, off);
    assert_int_equal(off[0], i * 1 + j * 2);
    assert_int_equal(off[1], i * 30 + j * 10);
    assert_int_equal(off[2], j * 7);
  }
  assert_int_equal(torc_cuda_imm_tiles(0), 0);
  assert_int_equal(torc_cuda_imm_tiles(1), 1);
  assert_int_equal(torc_cuda_imm_tiles(T), 1);
  assert_int_equal(torc_cuda_imm_tiles(T + 1), 2);
  assert_int_equal(torc_cuda_imm_fma(INT64_MAX, 1, 1), INT64_MIN);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_ref),
      cmocka_unit_test(test_batch_offsets),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
