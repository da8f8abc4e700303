/* tests/test_cuda_index_bodies.c — the index arithmetic of the cuda
 * plugin's indexing and shape ops (plugins/cuda/index_body.h) replayed on
 * the CPU in each kernel's order (one destination at a time, its sources
 * found by a stable sort of keys), against the ref kernels on the same
 * inputs: gather, index_select, scatter (replace, add), index_add,
 * embedding_backward, cumsum, pad and its backward per mode, interpolate
 * and its backward per mode, topk's order with ties, NaN and signed
 * zeros. Needs no GPU.
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

#include "../plugins/cuda/index_body.h"
#include "../plugins/cuda/kerr.h"
#include "../plugins/ref/ref_kernels.h"
#include "cuda_testutil.h"

/* ---- the ref side ---- */

static char ref_msg[512];

static int record_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ref_msg, sizeof ref_msg, fmt, ap);
  va_end(ap);
  return status;
}

static torc_kernel_fn ref_kernel(const char *op, int dt) {
  return cuda_test_ref_kernel(op, dt);
}

/* A contiguous kernel tensor over p. */
static torc_ktensor kt(void *p, int dt, int nd, const int64_t *shape) {
  torc_ktensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.dtype = dt;
  t.ndim = nd;
  int64_t st = 1;
  for (int d = nd - 1; d >= 0; d--) {
    t.shape[d] = shape[d];
    t.strides[d] = st;
    st *= shape[d];
  }
  return t;
}

static int64_t numel(const torc_ktensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

static void run_ref(const char *op, int dt, const torc_ktensor *in, int n_in,
                    const torc_ktensor *out, int n_out, const void *p,
                    size_t psize) {
  torc_kernel_args a;
  cuda_test_args(&a, op, in, n_in, out, n_out, p, psize);
  int st = ref_kernel(op, dt)(&a);
  if (st != TORC_OK)
    fail_msg("ref %s failed: %s", op, ref_msg);
}

/* A walk over t's shape with its strides as operand 0 and, when given,
 * the other operands' strides. */
static torc_cuda_ix_walk walk_of(int nd, const int64_t *shape, int nops,
                                 const int64_t *const *st) {
  torc_cuda_ix_walk w;
  memset(&w, 0, sizeof w);
  w.ndim = nd;
  for (int d = 0; d < nd; d++) {
    w.shape[d] = shape[d];
    for (int k = 0; k < nops; k++)
      w.st[k][d] = st[k] ? st[k][d] : 0;
  }
  return w;
}

static uint64_t lcg_state = 12345;
static uint32_t lcg(void) {
  lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(lcg_state >> 33);
}
/* Small values with many repeats and exact float sums. */
static float rnd_f(void) { return (float)((int)(lcg() % 17) - 8) * 0.375f; }

/* ---- the sorted sources, on the CPU ---- */

/* A stable sort of (keys, vals) by key (insertion: small inputs). */
static void stable_sort(uint64_t *keys, int64_t *vals, int64_t n) {
  for (int64_t i = 1; i < n; i++) {
    uint64_t k = keys[i];
    int64_t v = vals[i];
    int64_t j = i - 1;
    while (j >= 0 && keys[j] > k) {
      keys[j + 1] = keys[j];
      vals[j + 1] = vals[j];
      j--;
    }
    keys[j + 1] = k;
    vals[j + 1] = v;
  }
}

/* k_keys of index.cu: idx (i64, walked over ishape with istrides), line
 * strides lst (0 at d), dim size `size`, nlines lines. */
static void make_keys(const int64_t *idx, int nd, const int64_t *ishape,
                      const int64_t *istrides, const int64_t *lst, int d,
                      int64_t n, int64_t size, uint64_t nlines,
                      uint64_t *keys, int64_t *vals) {
  const int64_t *st[2] = {istrides, lst};
  torc_cuda_ix_walk w = walk_of(nd, ishape, 2, st);
  uint64_t bad = nlines * (uint64_t)size;
  for (int64_t i = 0; i < n; i++) {
    int64_t o[2], c[8];
    torc_cuda_ix_at(&w, i, 2, o, c);
    keys[i] = torc_cuda_ix_key(o[1], idx[o[0]], size, bad);
    vals[i] = c[d];
  }
  stable_sort(keys, vals, n);
}

/* ---- gather, index_select ---- */

static void test_gather(void **state) {
  (void)state;
  const int64_t xs[3] = {3, 5, 4};
  for (int d = 0; d < 3; d++) {
    int64_t ys[3] = {2, 4, 3};
    ys[d] = 6; /* along d the index may be longer than x */
    float x[60], y[144], yr[144];
    int64_t idx[144];
    torc_ktensor tx = kt(x, TORC_F32, 3, xs), ti = kt(idx, TORC_I64, 3, ys),
                 ty = kt(yr, TORC_F32, 3, ys);
    for (int i = 0; i < 60; i++)
      x[i] = rnd_f();
    int64_t n = numel(&ti);
    for (int64_t i = 0; i < n; i++)
      idx[i] = lcg() % xs[d];
    torc_index_params p = {d, 0};
    torc_ktensor in[2] = {tx, ti};
    run_ref("gather", TORC_F32, in, 2, &ty, 1, &p, sizeof p);
    /* k_gather */
    int64_t xz[8];
    memcpy(xz, tx.strides, sizeof xz);
    xz[d] = 0;
    const int64_t *st[3] = {ti.strides, ty.strides, xz};
    torc_cuda_ix_walk w = walk_of(3, ys, 3, st);
    for (int64_t i = 0; i < n; i++) {
      int64_t o[3];
      torc_cuda_ix_at(&w, i, 3, o, NULL);
      y[o[1]] = x[o[2] + idx[o[0]] * tx.strides[d]];
    }
    assert_memory_equal(y, yr, sizeof(float) * (size_t)n);
  }
}

static void test_index_select(void **state) {
  (void)state;
  const int64_t xs[3] = {4, 3, 5};
  for (int d = 0; d < 3; d++) {
    for (int zero_d = 0; zero_d < 2; zero_d++) {
      int64_t L = zero_d ? 1 : 7;
      int64_t ys[3] = {4, 3, 5};
      ys[d] = L;
      float x[60], y[140], yr[140];
      int64_t idx[7];
      for (int i = 0; i < 60; i++)
        x[i] = rnd_f();
      for (int i = 0; i < L; i++)
        idx[i] = lcg() % xs[d];
      torc_ktensor tx = kt(x, TORC_F32, 3, xs), ty = kt(yr, TORC_F32, 3, ys);
      torc_ktensor ti = kt(idx, TORC_I64, zero_d ? 0 : 1, &L);
      torc_index_params p = {d, 0};
      torc_ktensor in[2] = {tx, ti};
      run_ref("index_select", TORC_F32, in, 2, &ty, 1, &p, sizeof p);
      int64_t xz[8];
      memcpy(xz, tx.strides, sizeof xz);
      xz[d] = 0;
      const int64_t *st[2] = {ty.strides, xz};
      torc_cuda_ix_walk w = walk_of(3, ys, 2, st);
      int64_t is = ti.ndim ? ti.strides[0] : 0, n = numel(&ty);
      for (int64_t i = 0; i < n; i++) {
        int64_t o[2], c[8];
        torc_cuda_ix_at(&w, i, 2, o, c);
        y[o[0]] = x[o[1] + idx[c[d] * is] * tx.strides[d]];
      }
      assert_memory_equal(y, yr, sizeof(float) * (size_t)n);
    }
  }
}

/* ---- scatter (replace, add) and index_add: k_scatter ---- */

/* y (ys, holding the input) gets src at idx along d; add or replace. */
static void scatter_replay(float *y, const int64_t *ys, const float *src,
                           const int64_t *ss, const int64_t *idx,
                           const int64_t *is, int d, int add) {
  int64_t ish[3], ist[3], lst[3] = {0, 0, 0}, nlines = 1;
  torc_ktensor ty = kt(y, TORC_F32, 3, ys), tsrc = kt((void *)src, TORC_F32, 3, ss);
  torc_ktensor ti = kt((void *)idx, TORC_I64, 3, is);
  for (int k = 2; k >= 0; k--) {
    ish[k] = is[k];
    ist[k] = ti.strides[k];
    if (k != d) {
      lst[k] = nlines;
      nlines *= is[k];
    }
  }
  int64_t nkeys = numel(&ti);
  uint64_t keys[256];
  int64_t vals[256];
  make_keys(idx, 3, ish, ist, lst, d, nkeys, ys[d], (uint64_t)nlines, keys,
            vals);
  int64_t sz[8];
  memcpy(sz, tsrc.strides, sizeof sz);
  sz[d] = 0;
  const int64_t *st[2] = {ty.strides, sz};
  torc_cuda_ix_walk w = walk_of(3, ys, 2, st);
  int64_t n = numel(&ty);
  for (int64_t i = 0; i < n; i++) {
    int64_t o[2], c[8], line = 0;
    torc_cuda_ix_at(&w, i, 2, o, c);
    int in = 1;
    for (int e = 0; e < 3; e++)
      if (e != d) {
        in = in && c[e] < is[e];
        line += c[e] * lst[e];
      }
    if (!in)
      continue;
    uint64_t key = (uint64_t)line * (uint64_t)ys[d] + (uint64_t)c[d];
    int64_t lo = torc_cuda_ix_lower_bound(keys, nkeys, key);
    int64_t hi = torc_cuda_ix_lower_bound(keys, nkeys, key + 1);
    if (lo == hi)
      continue;
    if (!add) {
      y[o[0]] = src[o[1] + vals[hi - 1] * tsrc.strides[d]];
      continue;
    }
    float acc = y[o[0]];
    for (int64_t q = lo; q < hi; q++)
      acc = (float)torc_cuda_ix_addf(acc, src[o[1] + vals[q] * tsrc.strides[d]]);
    y[o[0]] = acc;
  }
}

static void test_scatter(void **state) {
  (void)state;
  const int64_t ys[3] = {4, 3, 5};
  for (int add = 0; add < 2; add++)
    for (int d = 0; d < 3; d++) {
      int64_t is[3] = {3, 2, 4}, ss[3] = {4, 3, 5};
      is[d] = 6;
      ss[d] = 7;
      float y[60], yr[60], src[140];
      int64_t idx[144];
      for (int i = 0; i < 60; i++)
        y[i] = yr[i] = rnd_f();
      for (int i = 0; i < 140; i++)
        src[i] = rnd_f() + (float)i; /* distinct: shows who won */
      int64_t n = is[0] * is[1] * is[2];
      for (int64_t i = 0; i < n; i++)
        idx[i] = lcg() % ys[d];
      torc_ktensor ti = kt(idx, TORC_I64, 3, is), tsrc = kt(src, TORC_F32, 3, ss),
                   ty = kt(yr, TORC_F32, 3, ys);
      torc_index_params p = {d, add};
      torc_ktensor in[2] = {ti, tsrc};
      run_ref("scatter", TORC_F32, in, 2, &ty, 1, &p, sizeof p);
      scatter_replay(y, ys, src, ss, idx, is, d, add);
      assert_memory_equal(y, yr, sizeof y);
    }
}

static void test_index_add(void **state) {
  (void)state;
  const int64_t ys[3] = {3, 4, 5};
  for (int d = 0; d < 3; d++) {
    int64_t L = 9, ss[3] = {3, 4, 5};
    ss[d] = L;
    float y[60], yr[60], src[180];
    int64_t idx[9];
    for (int i = 0; i < 60; i++)
      y[i] = yr[i] = rnd_f();
    for (int i = 0; i < 180; i++)
      src[i] = rnd_f() * 1e-3f + (float)(i % 7) * 1e4f; /* order shows */
    for (int i = 0; i < L; i++)
      idx[i] = lcg() % ys[d];
    torc_ktensor ti = kt(idx, TORC_I64, 1, &L), tsrc = kt(src, TORC_F32, 3, ss),
                 ty = kt(yr, TORC_F32, 3, ys);
    torc_index_params p = {d, 1};
    torc_ktensor in[2] = {ti, tsrc};
    run_ref("index_add", TORC_F32, in, 2, &ty, 1, &p, sizeof p);
    /* index_add: one line, the 1-D index walked as [L] */
    int64_t ish[1] = {L}, ist[1] = {1}, lst[1] = {0};
    uint64_t keys[9];
    int64_t vals[9];
    make_keys(idx, 1, ish, ist, lst, 0, L, ys[d], 1, keys, vals);
    int64_t sz[8];
    memcpy(sz, tsrc.strides, sizeof sz);
    sz[d] = 0;
    const int64_t *st[2] = {ty.strides, sz};
    torc_cuda_ix_walk w = walk_of(3, ys, 2, st);
    for (int64_t i = 0; i < 60; i++) {
      int64_t o[2], c[8];
      torc_cuda_ix_at(&w, i, 2, o, c);
      int64_t lo = torc_cuda_ix_lower_bound(keys, L, (uint64_t)c[d]);
      int64_t hi = torc_cuda_ix_lower_bound(keys, L, (uint64_t)c[d] + 1);
      float acc = y[o[0]];
      for (int64_t q = lo; q < hi; q++)
        acc = (float)torc_cuda_ix_addf(acc, src[o[1] + vals[q] * tsrc.strides[d]]);
      y[o[0]] = acc;
    }
    assert_memory_equal(y, yr, sizeof y);
  }
}

/* Integer adds wrap; bool adds are an or (ref's add_elem). */
static void test_int_add(void **state) {
  (void)state;
  assert_int_equal(torc_cuda_ix_addi(INT64_MAX, 1), INT64_MIN);
  assert_int_equal(torc_cuda_ix_addi(-5, 3), -2);
  uint8_t y[4] = {250, 1, 0, 0}, yr[4] = {250, 1, 0, 0};
  uint8_t src[6] = {10, 255, 3, 0, 7, 1};
  int64_t idx[6] = {0, 1, 0, 3, 3, 3}, L = 6, ys = 4;
  torc_ktensor ti = kt(idx, TORC_I64, 1, &L), ts = kt(src, TORC_U8, 1, &L),
               ty = kt(yr, TORC_U8, 1, &ys);
  torc_index_params p = {0, 1};
  torc_ktensor in[2] = {ti, ts};
  run_ref("index_add", TORC_U8, in, 2, &ty, 1, &p, sizeof p);
  for (int i = 0; i < 6; i++)
    y[idx[i]] = (uint8_t)(uint64_t)torc_cuda_ix_addi(y[idx[i]], src[i]);
  assert_memory_equal(y, yr, sizeof y);
}

/* ---- embedding_backward ---- */

static void test_embedding_backward(void **state) {
  (void)state;
  const int64_t num = 7, D = 3, n = 11;
  int64_t idx[11], is[2] = {1, 11}, gs[3] = {1, 11, 3}, ws[2] = {7, 3};
  float gy[33], gw[21], gwr[21];
  for (int i = 0; i < n; i++)
    idx[i] = lcg() % (num - 2); /* the last rows get nothing */
  for (int i = 0; i < 33; i++)
    gy[i] = rnd_f() * 1e-4f + (float)(i % 5) * 1e5f;
  torc_ktensor tg = kt(gy, TORC_F32, 3, gs), ti = kt(idx, TORC_I64, 2, is),
               tw = kt(gwr, TORC_F32, 2, ws);
  torc_ktensor in[2] = {tg, ti};
  run_ref("embedding_backward", TORC_F32, in, 2, &tw, 1, NULL, 0);
  int64_t ish[1] = {n}, ist[1] = {1}, lst[1] = {0};
  uint64_t keys[11];
  int64_t vals[11];
  make_keys(idx, 1, ish, ist, lst, 0, n, num, 1, keys, vals);
  for (int64_t e = 0; e < num * D; e++) {
    int64_t k = e / D, c = e % D;
    int64_t lo = torc_cuda_ix_lower_bound(keys, n, (uint64_t)k);
    int64_t hi = torc_cuda_ix_lower_bound(keys, n, (uint64_t)k + 1);
    double acc = 0;
    for (int64_t q = lo; q < hi; q++)
      acc = torc_cuda_ix_addf(acc, gy[vals[q] * D + c]);
    gw[e] = (float)acc;
  }
  assert_memory_equal(gw, gwr, sizeof gw);
}

/* Keys: a bad value gets the bad key; the bit count covers it. */
static void test_keys(void **state) {
  (void)state;
  assert_int_equal(torc_cuda_ix_key(2, 3, 5, 99), 13);
  assert_int_equal(torc_cuda_ix_key(2, 5, 5, 99), 99);
  assert_int_equal(torc_cuda_ix_key(2, -1, 5, 99), 99);
  assert_int_equal(torc_cuda_ix_key_bits(1), 1);
  assert_int_equal(torc_cuda_ix_key_bits(2), 2);
  assert_int_equal(torc_cuda_ix_key_bits(255), 8);
  assert_int_equal(torc_cuda_ix_key_bits(256), 9);
  uint64_t keys[5] = {1, 1, 3, 3, 3};
  assert_int_equal(torc_cuda_ix_lower_bound(keys, 5, 0), 0);
  assert_int_equal(torc_cuda_ix_lower_bound(keys, 5, 2), 2);
  assert_int_equal(torc_cuda_ix_lower_bound(keys, 5, 3), 2);
  assert_int_equal(torc_cuda_ix_lower_bound(keys, 5, 4), 5);
  assert_int_equal(torc_cuda_ix_lower_bound(keys, 0, 4), 0);
}

/* The message of a bad index the kernels recorded (kerr.h), as the next
 * wait reports it. */
static void test_index_msg(void **state) {
  (void)state;
  char msg[512];
  torc_cuda_kerr_message(msg, sizeof msg, 0, "gather", 1, -3, 0, 5, 7);
  assert_string_equal(msg, "cuda:0: 'gather': index -3 (element 7 of the "
                           "index) along dim 1 is out of range: expected 0 "
                           "to 4; the kernel found it on the device and it "
                           "is reported at this wait (run with "
                           "TORC_CUDA_SYNC=1 to stop at the op, or check "
                           "the indices on the cpu)");
  torc_cuda_kerr_message(msg, sizeof msg, 3, "embedding", -1, INT64_MIN, 0,
                         INT64_MAX, 0);
  assert_non_null(strstr(msg, "cuda:3: 'embedding': index "
                              "-9223372036854775808 (element 0 of the index) "
                              "is out of range: expected 0 to "
                              "9223372036854775806;"));
  torc_cuda_kerr_message(msg, sizeof msg, 0, NULL, 0, 0, 0, 0, 0);
  assert_non_null(strstr(msg, "'(an op)': index 0"));
  assert_non_null(strstr(msg, "expected 0 to -1"));
}

/* ---- cumsum: one line at a time, in order ---- */

static void test_cumsum(void **state) {
  (void)state;
  const int64_t xs[3] = {3, 7, 4};
  for (int d = 0; d < 3; d++) {
    float x[84], y[84], yr[84];
    int32_t xi[84];
    int64_t yi[84], yir[84];
    for (int i = 0; i < 84; i++) {
      x[i] = rnd_f() * 0.1f + (i % 3 ? 1e7f : -1e7f);
      /* near INT32_MAX on odd i (in int64, then cast: the sums wrap) */
      xi[i] = (int32_t)((int64_t)(lcg() % 2000) - 1000 +
                        (i % 2 ? INT32_MAX : 0) - (i % 2 ? 1000 : 0));
    }
    torc_dim_params p = {d, 0};
    torc_ktensor tx = kt(x, TORC_F32, 3, xs), ty = kt(yr, TORC_F32, 3, xs);
    run_ref("cumsum", TORC_F32, &tx, 1, &ty, 1, &p, sizeof p);
    torc_ktensor txi = kt(xi, TORC_I32, 3, xs), tyi = kt(yir, TORC_I64, 3, xs);
    run_ref("cumsum", TORC_I32, &txi, 1, &tyi, 1, &p, sizeof p);
    /* k_cumsum: lines over the other dims */
    int64_t lsh[2], ls[2];
    int ln = 0;
    for (int k = 0; k < 3; k++)
      if (k != d) {
        lsh[ln] = xs[k];
        ls[ln++] = tx.strides[k];
      }
    const int64_t *st[2] = {ls, ls};
    torc_cuda_ix_walk w = walk_of(2, lsh, 2, st);
    int64_t sd = tx.strides[d];
    for (int64_t l = 0; l < lsh[0] * lsh[1]; l++) {
      int64_t o[2];
      torc_cuda_ix_at(&w, l, 2, o, NULL);
      double f = 0;
      int64_t s = 0;
      for (int64_t k = 0; k < xs[d]; k++) {
        f = torc_cuda_ix_addf(f, x[o[0] + k * sd]);
        y[o[1] + k * sd] = (float)f;
        s = torc_cuda_ix_addi(s, xi[o[0] + k * sd]);
        yi[o[1] + k * sd] = s;
      }
    }
    assert_memory_equal(y, yr, sizeof y);
    assert_memory_equal(yi, yir, sizeof yi);
  }
}

/* The block path: segments, their carries folded left to right, each
 * segment folded again from its carry. Integers equal ref's exactly;
 * floats within the double rounding of the regrouping. */
static void test_cumsum_block(void **state) {
  (void)state;
  const int64_t lens[] = {256, 257, 1000, 4099};
  assert_true(torc_cuda_cumsum_blocked(1, 256));
  assert_false(torc_cuda_cumsum_blocked(1, 255));
  assert_false(torc_cuda_cumsum_blocked(65536, 1000));
  for (size_t c = 0; c < sizeof lens / sizeof lens[0]; c++) {
    int64_t len = lens[c];
    float *x = malloc(sizeof(float) * (size_t)len * 3);
    int64_t *xi = malloc(sizeof(int64_t) * (size_t)len * 3);
    assert_non_null(x);
    assert_non_null(xi);
    float *y = x + len, *yr = x + 2 * len;
    int64_t *yi = xi + len, *yir = xi + 2 * len;
    for (int64_t i = 0; i < len; i++) {
      x[i] = rnd_f() * (1.0f + (float)(i % 11));
      /* products past 2^63 wrap (computed unsigned: no overflow) */
      xi[i] = (int64_t)((uint64_t)lcg() * (uint64_t)lcg() *
                        (uint64_t)(i % 2 ? 1 : -3));
    }
    torc_dim_params p = {0, 0};
    torc_ktensor tx = kt(x, TORC_F32, 1, &len), ty = kt(yr, TORC_F32, 1, &len);
    run_ref("cumsum", TORC_F32, &tx, 1, &ty, 1, &p, sizeof p);
    torc_ktensor txi = kt(xi, TORC_I64, 1, &len),
                 tyi = kt(yir, TORC_I64, 1, &len);
    run_ref("cumsum", TORC_I64, &txi, 1, &tyi, 1, &p, sizeof p);
    double fpart[TORC_CUDA_CS_BLOCK];
    int64_t ipart[TORC_CUDA_CS_BLOCK];
    for (int t = 0; t < TORC_CUDA_CS_BLOCK; t++) {
      int64_t lo, hi;
      torc_cuda_cumsum_seg(len, t, &lo, &hi);
      fpart[t] = 0;
      ipart[t] = 0;
      for (int64_t k = lo; k < hi; k++) {
        fpart[t] = torc_cuda_ix_addf(fpart[t], x[k]);
        ipart[t] = torc_cuda_ix_addi(ipart[t], xi[k]);
      }
    }
    double fc = 0;
    int64_t ic = 0, covered = 0;
    for (int t = 0; t < TORC_CUDA_CS_BLOCK; t++) {
      double fn = torc_cuda_ix_addf(fc, fpart[t]);
      int64_t in = torc_cuda_ix_addi(ic, ipart[t]);
      fpart[t] = fc;
      ipart[t] = ic;
      fc = fn;
      ic = in;
    }
    for (int t = 0; t < TORC_CUDA_CS_BLOCK; t++) {
      int64_t lo, hi;
      torc_cuda_cumsum_seg(len, t, &lo, &hi);
      if (hi > lo) {
        assert_int_equal(lo, covered);
        covered = hi;
      }
      double f = fpart[t];
      int64_t s = ipart[t];
      for (int64_t k = lo; k < hi; k++) {
        f = torc_cuda_ix_addf(f, x[k]);
        y[k] = (float)f;
        s = torc_cuda_ix_addi(s, xi[k]);
        yi[k] = s;
      }
    }
    assert_int_equal(covered, len);
    assert_memory_equal(yi, yir, sizeof(int64_t) * (size_t)len);
    for (int64_t k = 0; k < len; k++)
      if (fabsf(y[k] - yr[k]) > 1e-6f * (1.0f + fabsf(yr[k])))
        fail_msg("cumsum block path, len %lld: element %lld is %.9g, ref "
                 "%.9g",
                 (long long)len, (long long)k, y[k], yr[k]);
    free(x);
    free(xi);
  }
}

/* ---- pad ---- */

/* pad_sources is the exact inverse of pad_source, ascending. */
static void test_pad_sources(void **state) {
  (void)state;
  for (int mode = 0; mode < 3; mode++)
    for (int64_t size = 1; size <= 6; size++)
      for (int64_t before = mode ? 0 : -3; before <= 5; before++)
        for (int64_t after = mode ? 0 : -3; after <= 5; after++) {
          if (mode == 1 && (before >= size || after >= size))
            continue; /* the core allows reflect pads < size only */
          int64_t out = size + before + after;
          if (out < 0)
            continue;
          for (int64_t s = 0; s < size; s++) {
            torc_cuda_pad_ranges r;
            torc_cuda_pad_sources(mode, s, before, size, out, &r);
            int64_t got[64], ng = 0, want[64], nw = 0;
            for (int k = 0; k < r.n; k++)
              for (int64_t o = r.lo[k]; o < r.hi[k]; o++)
                got[ng++] = o;
            for (int64_t o = 0; o < out; o++)
              if (torc_cuda_pad_source(mode, o, before, size) == s)
                want[nw++] = o;
            if (ng != nw || memcmp(got, want, sizeof(int64_t) * (size_t)ng))
              fail_msg("pad mode %d size %lld before %lld after %lld: the "
                       "sources of %lld differ (%lld vs %lld)",
                       mode, (long long)size, (long long)before,
                       (long long)after, (long long)s, (long long)ng,
                       (long long)nw);
            for (int k = 1; k < r.n; k++)
              assert_true(r.lo[k] >= r.hi[k - 1]);
          }
        }
}

static torc_pad_params pad_p(int mode, double value, const int64_t *b,
                             const int64_t *af, int nd) {
  torc_pad_params p;
  memset(&p, 0, sizeof p);
  p.mode = mode;
  p.value = value;
  for (int k = 0; k < nd; k++) {
    p.before[k] = b[k];
    p.after[k] = af[k];
  }
  return p;
}

/* f16 data (rounding each step shows the order) through pad and its
 * backward, per mode. */
static void test_pad(void **state) {
  (void)state;
  const int64_t xs[3] = {2, 3, 4};
  const int64_t cases[3][2][3] = {{{1, -1, 2}, {0, 2, -1}},
                                  {{1, 2, 3}, {1, 1, 2}},
                                  {{0, 3, 5}, {2, 0, 4}}};
  for (int mode = 0; mode < 3; mode++) {
    const int64_t *b = cases[mode][0], *af = cases[mode][1];
    int64_t ys[3];
    for (int k = 0; k < 3; k++)
      ys[k] = xs[k] + b[k] + af[k];
    int64_t ny = ys[0] * ys[1] * ys[2];
    uint16_t x[24], y[400], yr[400], g[400], gx[24], gxr[24];
    for (int i = 0; i < 24; i++)
      x[i] = torc_f32_to_f16(rnd_f());
    for (int64_t i = 0; i < ny; i++)
      g[i] = torc_f32_to_f16(rnd_f() * (1.0f + (float)(i % 5) * 0.3f));
    torc_pad_params p = pad_p(mode, -2.5, b, af, 3);
    torc_ktensor tx = kt(x, TORC_F16, 3, xs), ty = kt(yr, TORC_F16, 3, ys);
    run_ref("pad", TORC_F16, &tx, 1, &ty, 1, &p, sizeof p);
    torc_ktensor tg = kt(g, TORC_F16, 3, ys), tgx = kt(gxr, TORC_F16, 3, xs);
    run_ref("pad_backward", TORC_F16, &tg, 1, &tgx, 1, &p, sizeof p);
    /* k_pad */
    uint16_t fill = torc_f32_to_f16(-2.5f);
    const int64_t *st1[1] = {ty.strides};
    torc_cuda_ix_walk w = walk_of(3, ys, 1, st1);
    for (int64_t i = 0; i < ny; i++) {
      int64_t o[1], c[8], pos = 0;
      torc_cuda_ix_at(&w, i, 1, o, c);
      int in = 1;
      for (int k = 0; k < 3 && in; k++) {
        int64_t s = torc_cuda_pad_source(mode, c[k], b[k], xs[k]);
        in = s >= 0;
        pos += s * tx.strides[k];
      }
      y[o[0]] = in ? x[pos] : fill;
    }
    assert_memory_equal(y, yr, sizeof(uint16_t) * (size_t)ny);
    /* k_pad_backward */
    const int64_t *st2[1] = {tgx.strides};
    torc_cuda_ix_walk wx = walk_of(3, xs, 1, st2);
    for (int64_t i = 0; i < 24; i++) {
      int64_t o[1], c[8], cur[8];
      int ri[8], any = 1;
      torc_cuda_pad_ranges r[8];
      torc_cuda_ix_at(&wx, i, 1, o, c);
      for (int k = 0; k < 3; k++) {
        torc_cuda_pad_sources(mode, c[k], b[k], xs[k], ys[k], &r[k]);
        any = any && r[k].n > 0;
      }
      uint16_t acc = torc_f32_to_f16(0.0f);
      if (any) {
        torc_cuda_pad_first(3, r, ri, cur);
        do {
          int64_t pos = 0;
          for (int k = 0; k < 3; k++)
            pos += cur[k] * tg.strides[k];
          acc = torc_f32_to_f16((float)torc_cuda_ix_addf(
              torc_f16_to_f32(acc), torc_f16_to_f32(g[pos])));
        } while (torc_cuda_pad_next(3, r, ri, cur));
      }
      gx[o[0]] = acc;
    }
    assert_memory_equal(gx, gxr, sizeof gx);
  }
}

/* ---- interpolate ---- */

/* Forward and backward of one geometry and mode in f32 (NC = 2 x 3). */
static void interp_case(int mode, int align, int64_t H, int64_t W, int64_t OH,
                        int64_t OW) {
  int64_t xs[4] = {2, 3, H, W}, ys[4] = {2, 3, OH, OW};
  int64_t nx = 6 * H * W, ny = 6 * OH * OW;
  float *x = malloc(sizeof(float) * (size_t)nx * 3);
  float *y = malloc(sizeof(float) * (size_t)ny * 3);
  assert_non_null(x);
  assert_non_null(y);
  float *xr = x + nx, *gx = x + 2 * nx, *yr = y + ny, *g = y + 2 * ny;
  for (int64_t i = 0; i < nx; i++)
    x[i] = rnd_f() + 0.01f * (float)(i % 13);
  for (int64_t i = 0; i < ny; i++)
    g[i] = rnd_f() * 1.1f + 1e3f * (float)(i % 3);
  torc_interp_params p = {mode, align};
  torc_ktensor tx = kt(x, TORC_F32, 4, xs), ty = kt(yr, TORC_F32, 4, ys);
  run_ref("interpolate", TORC_F32, &tx, 1, &ty, 1, &p, sizeof p);
  torc_ktensor tg = kt(g, TORC_F32, 4, ys), tgx = kt(xr, TORC_F32, 4, xs);
  run_ref("interpolate_backward", TORC_F32, &tg, 1, &tgx, 1, &p, sizeof p);
  /* k_interp */
  for (int64_t i = 0; i < ny; i++) {
    int64_t nc = i / (OH * OW), oh = i / OW % OH, ow = i % OW;
    int64_t h0, h1, w0, w1;
    double lh, lw, wt[4];
    torc_cuda_interp_source(mode, align, oh, H, OH, &h0, &h1, &lh);
    torc_cuda_interp_source(mode, align, ow, W, OW, &w0, &w1, &lw);
    torc_cuda_interp_weights(lh, lw, wt);
    const float *px = x + nc * H * W;
    int64_t pos[4] = {h0 * W + w0, h0 * W + w1, h1 * W + w0, h1 * W + w1};
    double v = 0;
    for (int k = 0; k < 4; k++)
      if (wt[k] != 0)
        v = TORC_CUDA_IX_ADD(v, TORC_CUDA_IX_MUL(wt[k], (double)px[pos[k]]));
    y[i] = (float)v;
  }
  if (memcmp(y, yr, sizeof(float) * (size_t)ny))
    fail_msg("interpolate mode %d align %d %lldx%lld -> %lldx%lld differs",
             mode, align, (long long)H, (long long)W, (long long)OH,
             (long long)OW);
  /* k_interp_backward */
  for (int64_t i = 0; i < nx; i++) {
    int64_t nc = i / (H * W), h = i / W % H, xw = i % W;
    int64_t oh0 = torc_cuda_interp_lower_bound(mode, align, h - 1, H, OH);
    int64_t oh1 = torc_cuda_interp_lower_bound(mode, align, h + 1, H, OH);
    int64_t ow0 = torc_cuda_interp_lower_bound(mode, align, xw - 1, W, OW);
    int64_t ow1 = torc_cuda_interp_lower_bound(mode, align, xw + 1, W, OW);
    float acc = 0;
    for (int64_t oh = oh0; oh < oh1; oh++) {
      int64_t h0, h1;
      double lh;
      torc_cuda_interp_source(mode, align, oh, H, OH, &h0, &h1, &lh);
      for (int64_t ow = ow0; ow < ow1; ow++) {
        int64_t w0, w1;
        double lw, wt[4];
        torc_cuda_interp_source(mode, align, ow, W, OW, &w0, &w1, &lw);
        torc_cuda_interp_weights(lh, lw, wt);
        int64_t th[4] = {h0, h0, h1, h1}, tw[4] = {w0, w1, w0, w1};
        double gv = g[nc * OH * OW + oh * OW + ow];
        for (int k = 0; k < 4; k++)
          if (wt[k] != 0 && th[k] == h && tw[k] == xw)
            acc = (float)TORC_CUDA_IX_ADD((double)acc,
                                          TORC_CUDA_IX_MUL(wt[k], gv));
      }
    }
    gx[i] = acc;
  }
  if (memcmp(gx, xr, sizeof(float) * (size_t)nx))
    fail_msg("interpolate_backward mode %d align %d %lldx%lld -> %lldx%lld "
             "differs",
             mode, align, (long long)H, (long long)W, (long long)OH,
             (long long)OW);
  free(x);
  free(y);
}

static void test_interpolate(void **state) {
  (void)state;
  const int64_t sizes[][4] = {{3, 4, 7, 9}, {7, 9, 3, 4}, {1, 1, 5, 3},
                              {5, 3, 1, 1}, {4, 4, 4, 4}, {2, 7, 5, 5},
                              {6, 5, 13, 2}, {3, 3, 8, 8}};
  for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
    const int64_t *s = sizes[c];
    interp_case(0, 0, s[0], s[1], s[2], s[3]);
    interp_case(1, 0, s[0], s[1], s[2], s[3]);
    interp_case(1, 1, s[0], s[1], s[2], s[3]);
  }
}

/* The outputs touching an input coordinate are [lb(t - 1), lb(t + 1)). */
static void test_interp_bounds(void **state) {
  (void)state;
  for (int mode = 0; mode < 2; mode++)
    for (int align = 0; align < 2; align++)
      for (int64_t in = 1; in <= 9; in++)
        for (int64_t out = 1; out <= 11; out++)
          for (int64_t t = 0; t < in; t++) {
            int64_t lo = torc_cuda_interp_lower_bound(mode, align, t - 1, in,
                                                      out);
            int64_t hi = torc_cuda_interp_lower_bound(mode, align, t + 1, in,
                                                      out);
            for (int64_t o = 0; o < out; o++) {
              int64_t i0, i1;
              double l1;
              torc_cuda_interp_source(mode, align, o, in, out, &i0, &i1, &l1);
              int touches = i0 == t || i1 == t;
              if (touches && (o < lo || o >= hi))
                fail_msg("mode %d align %d %lld -> %lld: output %lld touches "
                         "%lld outside [%lld, %lld)",
                         mode, align, (long long)in, (long long)out,
                         (long long)o, (long long)t, (long long)lo,
                         (long long)hi);
            }
          }
}

/* ---- topk: keys, a stable sort, the first k ---- */

static void topk_case_f(const double *vals, int64_t len, int largest) {
  float x[64];
  for (int64_t i = 0; i < len; i++)
    x[i] = (float)vals[i];
  for (int64_t k = 0; k <= len; k++) {
    float v[64], vr[64];
    int64_t ix[64], ixr[64];
    torc_topk_params p = {k, 0, largest};
    torc_ktensor tx = kt(x, TORC_F32, 1, &len);
    torc_ktensor out[2] = {kt(vr, TORC_F32, 1, &k), kt(ixr, TORC_I64, 1, &k)};
    run_ref("topk", TORC_F32, &tx, 1, out, 2, &p, sizeof p);
    uint64_t keys[64];
    int64_t pos[64];
    for (int64_t j = 0; j < len; j++) {
      keys[j] = torc_cuda_topk_key_f((double)x[j], largest);
      pos[j] = j;
    }
    stable_sort(keys, pos, len);
    for (int64_t j = 0; j < k; j++) {
      v[j] = x[pos[j]];
      ix[j] = pos[j];
    }
    assert_memory_equal(ix, ixr, sizeof(int64_t) * (size_t)k);
    assert_memory_equal(v, vr, sizeof(float) * (size_t)k);
  }
}

static void test_topk(void **state) {
  (void)state;
  const double a[] = {1, NAN, -0.0, 3, 0.0, -INFINITY, 3, NAN, INFINITY, -2,
                      0.0, 1, -0.0, -INFINITY};
  const int64_t n = sizeof a / sizeof a[0];
  topk_case_f(a, n, 1);
  topk_case_f(a, n, 0);
  double r[40];
  for (int i = 0; i < 40; i++)
    r[i] = (double)rnd_f();
  topk_case_f(r, 40, 1);
  topk_case_f(r, 40, 0);
  /* integers, rows along dim 1 of [3, 9] */
  int64_t xs[2] = {3, 9};
  int32_t xi[27];
  for (int i = 0; i < 27; i++) {
    /* small values with ties, and INT32_MIN and just above it */
    xi[i] = (int32_t)((int64_t)(lcg() % 7) +
                      (i % 4 == 0 ? (int64_t)INT32_MIN : -3));
  }
  for (int largest = 0; largest < 2; largest++) {
    int64_t ks[2] = {3, 5};
    int32_t v[15], vr[15];
    int64_t ix[15], ixr[15];
    torc_topk_params p = {5, 1, largest};
    torc_ktensor tx = kt(xi, TORC_I32, 2, xs);
    torc_ktensor out[2] = {kt(vr, TORC_I32, 2, ks), kt(ixr, TORC_I64, 2, ks)};
    run_ref("topk", TORC_I32, &tx, 1, out, 2, &p, sizeof p);
    for (int row = 0; row < 3; row++) {
      uint64_t keys[9];
      int64_t pos[9];
      for (int j = 0; j < 9; j++) {
        keys[j] = torc_cuda_topk_key_i(xi[row * 9 + j], largest);
        pos[j] = j;
      }
      stable_sort(keys, pos, 9);
      for (int j = 0; j < 5; j++) {
        v[row * 5 + j] = xi[row * 9 + pos[j]];
        ix[row * 5 + j] = pos[j];
      }
    }
    assert_memory_equal(ix, ixr, sizeof ix);
    assert_memory_equal(v, vr, sizeof v);
  }
}

int main(void) {
  torc_ref_set_error = record_error;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keys),
      cmocka_unit_test(test_index_msg),
      cmocka_unit_test(test_gather),
      cmocka_unit_test(test_index_select),
      cmocka_unit_test(test_scatter),
      cmocka_unit_test(test_index_add),
      cmocka_unit_test(test_int_add),
      cmocka_unit_test(test_embedding_backward),
      cmocka_unit_test(test_cumsum),
      cmocka_unit_test(test_cumsum_block),
      cmocka_unit_test(test_pad_sources),
      cmocka_unit_test(test_pad),
      cmocka_unit_test(test_interpolate),
      cmocka_unit_test(test_interp_bounds),
      cmocka_unit_test(test_topk),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
