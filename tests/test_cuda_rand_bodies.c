/* tests/test_cuda_rand_bodies.c — the per-element bodies of the cuda
 * plugin's random ops (plugins/cuda/rand_body.h), compiled for the host,
 * against the ref kernels for the same seed and offset: every element
 * bit-identical (uniform_, normal_, randint_, dropout), for every dtype
 * rand.cu registers. Needs no GPU.
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

#include "torc/plugin.h"

#include "../plugins/cuda/rand_body.h"
#include "../plugins/ref/ref_kernels.h"
#include "cuda_testutil.h"

#define N 3000

static torc_kernel_fn ref_kernel(const char *op, int dtype) {
  return cuda_test_ref_kernel(op, dtype);
}

static torc_ktensor kt(void *p, int dtype, int64_t n) {
  torc_ktensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.dtype = dtype;
  t.ndim = 1;
  t.shape[0] = n;
  t.strides[0] = 1;
  return t;
}

static void run_ref(const char *op, int dtype, const torc_ktensor *in,
                    int n_in, const torc_ktensor *out, int n_out,
                    const void *p, size_t psize) {
  torc_kernel_args a;
  cuda_test_args(&a, op, in, n_in, out, n_out, p, psize);
  assert_int_equal(ref_kernel(op, dtype)(&a), TORC_OK);
}

/* Seeds and offsets: small, a counter crossing 2^32 (the counter's high
 * word), a seed with both key words set. */
static const struct {
  uint64_t seed, offset;
} draws[] = {{0, 0},
             {42, 7},
             {0x123456789abcdefull, (1ull << 32) - N / 2},
             {0xffffffffffffffffull, 0xfffffffffull}};
#define N_DRAWS (sizeof draws / sizeof draws[0])

static void same_bits(const char *what, uint64_t seed, uint64_t off,
                      int64_t i, const void *got, const void *want,
                      size_t size) {
  if (memcmp(got, want, size) != 0)
    fail_msg("%s, seed 0x%llx offset %llu, element %lld: the body's bits "
             "differ from ref's",
             what, (unsigned long long)seed, (unsigned long long)off,
             (long long)i);
}

/* [a, b) ranges: a plain one, [0, 1), and one narrower than f32's
 * spacing at 1 so that rounding lands on b and the step-down runs. */
static const double ranges[][2] = {{-3.0, 5.0}, {0.0, 1.0},
                                   {1.0, 1.0 + 0x1p-21}};

static void test_uniform(void **state) {
  (void)state;
  static float f[N], fr[N];
  static double d[N], dr[N];
  int stepped = 0;
  for (size_t k = 0; k < N_DRAWS; k++)
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
      torc_random_params p = {.seed = draws[k].seed,
                              .offset = draws[k].offset,
                              .a = ranges[r][0],
                              .b = ranges[r][1]};
      torc_ktensor o = kt(fr, TORC_F32, N);
      run_ref("uniform_", TORC_F32, NULL, 0, &o, 1, &p, sizeof p);
      o = kt(dr, TORC_F64, N);
      run_ref("uniform_", TORC_F64, NULL, 0, &o, 1, &p, sizeof p);
      for (int64_t i = 0; i < N; i++) {
        uint64_t n = p.offset + (uint64_t)i;
        f[i] = torc_cuda_rand_uniform_f32(p.seed, n, p.a, p.b);
        d[i] = torc_cuda_rand_uniform_f64(p.seed, n, p.a, p.b);
        same_bits("uniform_ f32", p.seed, p.offset, i, &f[i], &fr[i],
                  sizeof f[i]);
        same_bits("uniform_ f64", p.seed, p.offset, i, &d[i], &dr[i],
                  sizeof d[i]);
        assert_true(f[i] >= p.a && f[i] < p.b);
        float raw = (float)(p.a + (p.b - p.a) *
                                      (double)torc_philox_uniform_f32(p.seed, n));
        stepped += (double)raw >= p.b;
      }
    }
  /* The narrow range must have exercised the step below b. */
  assert_true(stepped > 0);
}

static void test_normal(void **state) {
  (void)state;
  static float f[N], fr[N];
  static double d[N], dr[N];
  for (size_t k = 0; k < N_DRAWS; k++) {
    torc_random_params p = {.seed = draws[k].seed,
                            .offset = draws[k].offset,
                            .a = 0.5,
                            .b = 2.0};
    torc_ktensor o = kt(fr, TORC_F32, N);
    run_ref("normal_", TORC_F32, NULL, 0, &o, 1, &p, sizeof p);
    o = kt(dr, TORC_F64, N);
    run_ref("normal_", TORC_F64, NULL, 0, &o, 1, &p, sizeof p);
    for (int64_t i = 0; i < N; i++) {
      uint64_t n = p.offset + (uint64_t)i;
      d[i] = torc_cuda_rand_normal(p.seed, n, p.a, p.b);
      f[i] = (float)d[i];
      same_bits("normal_ f32", p.seed, p.offset, i, &f[i], &fr[i],
                sizeof f[i]);
      same_bits("normal_ f64", p.seed, p.offset, i, &d[i], &dr[i],
                sizeof d[i]);
    }
  }
}

static void test_randint(void **state) {
  (void)state;
  static int32_t v32[N], r32[N];
  static int64_t v64[N], r64[N];
  static const int64_t lims[][2] = {{0, 10}, {-5, 3}, {-1000000, 1000000000}};
  for (size_t k = 0; k < N_DRAWS; k++)
    for (size_t l = 0; l < sizeof lims / sizeof lims[0]; l++) {
      torc_random_params p = {.seed = draws[k].seed,
                              .offset = draws[k].offset,
                              .low = lims[l][0],
                              .high = lims[l][1]};
      torc_ktensor o = kt(r32, TORC_I32, N);
      run_ref("randint_", TORC_I32, NULL, 0, &o, 1, &p, sizeof p);
      o = kt(r64, TORC_I64, N);
      run_ref("randint_", TORC_I64, NULL, 0, &o, 1, &p, sizeof p);
      for (int64_t i = 0; i < N; i++) {
        uint64_t n = p.offset + (uint64_t)i;
        /* rand.cu's stores: i32 keeps the low 32 bits. */
        v64[i] = torc_philox_randint(p.seed, n, p.low, p.high);
        v32[i] = (int32_t)v64[i];
        same_bits("randint_ i32", p.seed, p.offset, i, &v32[i], &r32[i],
                  sizeof v32[i]);
        same_bits("randint_ i64", p.seed, p.offset, i, &v64[i], &r64[i],
                  sizeof v64[i]);
      }
    }
}

/* dropout: y = x * factor rounded once, the mask the factor, for p = 0
 * (all kept), 0.3, 0.999 and 1 (all dropped, factor 0). */
static void test_dropout(void **state) {
  (void)state;
  static float x[N], y[N], m[N], yr[N], mr[N];
  static double xd[N], yd[N], md[N], ydr[N], mdr[N];
  for (int64_t i = 0; i < N; i++) {
    x[i] = (float)sin((double)i) * 3.0f;
    xd[i] = cos((double)i) * 3.0;
  }
  static const double ps[] = {0.0, 0.3, 0.999, 1.0};
  for (size_t k = 0; k < N_DRAWS; k++)
    for (size_t q = 0; q < sizeof ps / sizeof ps[0]; q++) {
      torc_dropout_kparams p = {.seed = draws[k].seed,
                                .offset = draws[k].offset,
                                .p = ps[q]};
      double scale = p.p >= 1 ? 0 : 1.0 / (1.0 - p.p); /* as rand.cu */
      torc_ktensor in = kt(x, TORC_F32, N);
      torc_ktensor out[2] = {kt(yr, TORC_F32, N), kt(mr, TORC_F32, N)};
      run_ref("dropout", TORC_F32, &in, 1, out, 2, &p, sizeof p);
      in = kt(xd, TORC_F64, N);
      out[0] = kt(ydr, TORC_F64, N);
      out[1] = kt(mdr, TORC_F64, N);
      run_ref("dropout", TORC_F64, &in, 1, out, 2, &p, sizeof p);
      for (int64_t i = 0; i < N; i++) {
        double f = torc_cuda_rand_keep(p.seed, p.offset + (uint64_t)i, p.p,
                                       scale);
        m[i] = (float)f;
        y[i] = (float)((double)x[i] * f);
        md[i] = f;
        yd[i] = xd[i] * f;
        same_bits("dropout f32 y", p.seed, p.offset, i, &y[i], &yr[i],
                  sizeof y[i]);
        same_bits("dropout f32 mask", p.seed, p.offset, i, &m[i], &mr[i],
                  sizeof m[i]);
        same_bits("dropout f64 y", p.seed, p.offset, i, &yd[i], &ydr[i],
                  sizeof yd[i]);
        same_bits("dropout f64 mask", p.seed, p.offset, i, &md[i], &mdr[i],
                  sizeof md[i]);
      }
    }
}

/* f16 and bf16 outputs of uniform_ and normal_, randint_ into floating
 * and u8 outputs, dropout over 16-bit floats: the bodies as rand.cu
 * stores them, bit for bit against ref. */
static void test_other_dtypes(void **state) {
  (void)state;
  static uint16_t h[N], hr[N];
  static float f[N], fr[N];
  static double d[N], dr[N];
  static uint8_t u[N], ur[N];
  int stepped = 0;
  for (size_t k = 0; k < N_DRAWS; k++) {
    for (int bf = 0; bf < 2; bf++) {
      int dt = bf ? TORC_BF16 : TORC_F16;
      const char *name = bf ? "bf16" : "f16";
      for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        torc_random_params p = {.seed = draws[k].seed,
                                .offset = draws[k].offset,
                                .a = ranges[r][0],
                                .b = ranges[r][1]};
        if (r == 2) /* narrower than the 16-bit spacing at 1 */
          p.b = 1.0 + (bf ? 0x1p-9 : 0x1p-12);
        torc_ktensor o = kt(hr, dt, N);
        run_ref("uniform_", dt, NULL, 0, &o, 1, &p, sizeof p);
        for (int64_t i = 0; i < N; i++) {
          uint64_t n = p.offset + (uint64_t)i;
          h[i] = torc_cuda_rand_uniform_16(p.seed, n, p.a, p.b, bf);
          same_bits(bf ? "uniform_ bf16" : "uniform_ f16", p.seed, p.offset,
                    i, &h[i], &hr[i], sizeof h[i]);
          stepped += torc_cuda_rand_from16(
                         torc_cuda_rand_to16(
                             p.a + (p.b - p.a) * (double)torc_philox_uniform_f32(
                                                     p.seed, n),
                             bf),
                         bf) >= p.b;
        }
        o = kt(hr, dt, N);
        run_ref("normal_", dt, NULL, 0, &o, 1, &p, sizeof p);
        for (int64_t i = 0; i < N; i++) {
          h[i] = torc_cuda_rand_to16(
              torc_cuda_rand_normal(p.seed, p.offset + (uint64_t)i, p.a, p.b),
              bf);
          same_bits(bf ? "normal_ bf16" : "normal_ f16", p.seed, p.offset, i,
                    &h[i], &hr[i], sizeof h[i]);
        }
      }
      (void)name;
    }
    /* randint_ into f32, f64, f16, bf16 and u8: a range past 2^24 checks
     * the one rounding to f32 */
    static const int64_t lims[][2] = {
        {0, 10}, {-300, 300}, {-(INT64_C(1) << 40), INT64_C(1) << 41}};
    for (size_t l = 0; l < sizeof lims / sizeof lims[0]; l++) {
      torc_random_params p = {.seed = draws[k].seed,
                              .offset = draws[k].offset,
                              .low = lims[l][0],
                              .high = lims[l][1]};
      torc_ktensor o = kt(fr, TORC_F32, N);
      run_ref("randint_", TORC_F32, NULL, 0, &o, 1, &p, sizeof p);
      o = kt(dr, TORC_F64, N);
      run_ref("randint_", TORC_F64, NULL, 0, &o, 1, &p, sizeof p);
      o = kt(ur, TORC_U8, N);
      run_ref("randint_", TORC_U8, NULL, 0, &o, 1, &p, sizeof p);
      for (int64_t i = 0; i < N; i++) {
        int64_t v =
            torc_philox_randint(p.seed, p.offset + (uint64_t)i, p.low, p.high);
        f[i] = torc_i64_to_f32(v);
        d[i] = (double)v;
        u[i] = (uint8_t)(uint64_t)v;
        same_bits("randint_ f32", p.seed, p.offset, i, &f[i], &fr[i],
                  sizeof f[i]);
        same_bits("randint_ f64", p.seed, p.offset, i, &d[i], &dr[i],
                  sizeof d[i]);
        same_bits("randint_ u8", p.seed, p.offset, i, &u[i], &ur[i],
                  sizeof u[i]);
      }
      for (int bf = 0; bf < 2; bf++) {
        int dt = bf ? TORC_BF16 : TORC_F16;
        o = kt(hr, dt, N);
        run_ref("randint_", dt, NULL, 0, &o, 1, &p, sizeof p);
        for (int64_t i = 0; i < N; i++) {
          float fv = torc_i64_to_f32(torc_philox_randint(
              p.seed, p.offset + (uint64_t)i, p.low, p.high));
          h[i] = bf ? torc_f32_to_bf16(fv) : torc_f32_to_f16(fv);
          same_bits(bf ? "randint_ bf16" : "randint_ f16", p.seed, p.offset,
                    i, &h[i], &hr[i], sizeof h[i]);
        }
      }
    }
    /* dropout over f16/bf16 */
    static uint16_t x[N], y[N], m[N], yr[N], mr[N];
    for (int bf = 0; bf < 2; bf++) {
      int dt = bf ? TORC_BF16 : TORC_F16;
      for (int64_t i = 0; i < N; i++)
        x[i] = torc_cuda_rand_to16(sin((double)i) * 3.0, bf);
      torc_dropout_kparams p = {
          .seed = draws[k].seed, .offset = draws[k].offset, .p = 0.3};
      double scale = 1.0 / (1.0 - p.p);
      torc_ktensor in = kt(x, dt, N);
      torc_ktensor out[2] = {kt(yr, dt, N), kt(mr, dt, N)};
      run_ref("dropout", dt, &in, 1, out, 2, &p, sizeof p);
      for (int64_t i = 0; i < N; i++) {
        double kf =
            torc_cuda_rand_keep(p.seed, p.offset + (uint64_t)i, p.p, scale);
        m[i] = torc_cuda_rand_to16(kf, bf);
        y[i] = torc_cuda_rand_to16(torc_cuda_rand_from16(x[i], bf) * kf, bf);
        same_bits("dropout 16-bit y", p.seed, p.offset, i, &y[i], &yr[i],
                  sizeof y[i]);
        same_bits("dropout 16-bit mask", p.seed, p.offset, i, &m[i], &mr[i],
                  sizeof m[i]);
      }
    }
  }
  assert_true(stepped > 0); /* the step below b ran */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uniform),
      cmocka_unit_test(test_normal),
      cmocka_unit_test(test_randint),
      cmocka_unit_test(test_dropout),
      cmocka_unit_test(test_other_dtypes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
