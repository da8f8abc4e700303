/* tests/test_cpu_ew.c — the cpu plugin's elementwise, reduction and
 * softmax kernels and its GEMM split beyond the conformance suite's small
 * shapes: sizes that take the vector loops, their tails and the thread
 * pool; special values (NaN, +-inf, +-0, denormals, overflow and
 * underflow of exp); broadcast, strided and in-place layouts; each run
 * pinned to ref, then to the plugin, and compared; bf16 (f32 inside) bit
 * for bit where ref's double result rounds the same. TORC_CPU_ISA picks
 * the ISA under test (tests/test_cpu.sh runs the conformance with each).
 */
#include "testutil.h"

#include <math.h>

#define REF torc__dispatch_pin("ref")
#define CPU torc__dispatch_pin("cpu")
#define UNPIN torc__dispatch_pin(NULL)

static int setup_pinned(void **state) {
  (void)state;
  return test_apply_ini("[torc]\nthreads = 2\n"
                        "[plugin.ref]\nmodule = ref\n"
                        "[plugin.cpu]\nmodule = cpu\n",
                        "cpu.ini");
}

static double tol_of(torc_dtype dt) { return dt == TORC_F64 ? 1e-10 : 2e-6; }

/* n values of dtype dt: a spread over [-lo_span, span] plus, at the start,
 * special values (NaN, infinities, zeros, denormals, exp's overflow and
 * underflow edges). */
static torc_tensor *special(int64_t n, torc_dtype dt, double span) {
  static const double sp[] = {NAN,    INFINITY, -INFINITY, 0.0,   -0.0,
                              1e-40,  -1e-40,   1e-45,     88.7,  88.8,
                              -87.3,  -103.9,   -104.5,    -150., 200.,
                              0.6249, 0.6251,   -0.6251,   9.1,   -9.1,
                              1e-30,  3.4e38,   -3.4e38,   0.5,   2.0};
  double *v = malloc(sizeof(double) * (size_t)n);
  assert_non_null(v);
  for (int64_t i = 0; i < n; i++)
    v[i] = -span + 2 * span * (double)((i * 7919) % n) / (double)n;
  for (int64_t i = 0; i < n && i < (int64_t)(sizeof sp / sizeof sp[0]); i++)
    v[i] = sp[i];
  torc_tensor *d = torc_from_host(v, TORC_SHAPE(n), TORC_F64, TORC_CPU);
  free(v);
  assert_torc(d);
  torc_tensor *t = torc_to_dtype(d, dt);
  assert_torc(t);
  return t;
}

typedef torc_tensor *(*unary_fn)(const torc_tensor *);

static torc_tensor *leaky(const torc_tensor *x) {
  return torc_leaky_relu(x, 0.02);
}
static torc_tensor *gelu_t(const torc_tensor *x) { return torc_gelu(x, 1); }
static torc_tensor *gelu_e(const torc_tensor *x) { return torc_gelu(x, 0); }
static torc_tensor *clamp(const torc_tensor *x) {
  return torc_clamp(x, 1, -0.5, 1, 2.0);
}

/* Every vectorised unary op, at sizes below and above the pool's
 * threshold, contiguous and strided, f32 and f64. */
static void test_unary(void **state) {
  (void)state;
  static const unary_fn fns[] = {
      torc_neg,   torc_abs,  torc_square, torc_relu,    torc_exp,
      torc_log,   torc_sqrt, torc_tanh,   torc_sigmoid, torc_reciprocal,
      torc_rsqrt, torc_silu, torc_sign,   leaky,        gelu_t,
      gelu_e,     clamp};
  static const int64_t sizes[] = {37, 100003};
  for (int d = 0; d < 2; d++) {
    torc_dtype dt = d ? TORC_F64 : TORC_F32;
    for (int s = 0; s < 2; s++) {
      int scope = torc_scope_begin();
      torc_tensor *x = special(sizes[s], dt, 30.0);
      torc_tensor *xs = torc_slice(x, 0, 1, sizes[s], 3); /* strided */
      assert_torc(xs);
      for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
        const torc_tensor *in[2] = {x, xs};
        for (int k = 0; k < 2; k++) {
          REF;
          torc_tensor *r = fns[f](in[k]);
          CPU;
          torc_tensor *c = fns[f](in[k]);
          UNPIN;
          test_assert_close(c, r, tol_of(dt));
        }
      }
      torc_scope_end(scope);
    }
  }
}

/* Binary ops in the layouts the walk special-cases (same shape, a row
 * broadcast as a bias, a column broadcast, a scalar, a transposed
 * operand) and in place, with comparisons to bool. */
static void test_binary(void **state) {
  (void)state;
  typedef torc_tensor *(*bin_fn)(const torc_tensor *, const torc_tensor *);
  static const bin_fn fns[] = {torc_add,     torc_sub,     torc_mul, torc_div,
                               torc_maximum, torc_minimum, torc_eq,  torc_ne,
                               torc_lt,      torc_le,      torc_gt,  torc_ge};
  static const int64_t rows[] = {3, 700};
  for (int d = 0; d < 2; d++) {
    torc_dtype dt = d ? TORC_F64 : TORC_F32;
    for (int s = 0; s < 2; s++) {
      int scope = torc_scope_begin();
      int64_t n = rows[s], c = 67;
      torc_tensor *a = torc_reshape(special(n * c, dt, 5.0), TORC_SHAPE(n, c));
      torc_tensor *b = torc_randn(TORC_SHAPE(n, c), dt, TORC_CPU, NULL);
      torc_tensor *row = torc_randn(TORC_SHAPE(c), dt, TORC_CPU, NULL);
      torc_tensor *col = torc_randn(TORC_SHAPE(n, 1), dt, TORC_CPU, NULL);
      torc_tensor *sc = torc_full(NULL, 0, 0.5, dt, TORC_CPU);
      torc_tensor *bt = torc_transpose(
          torc_randn(TORC_SHAPE(c, n), dt, TORC_CPU, NULL), 0, 1);
      assert_torc(a);
      assert_torc(bt);
      const torc_tensor *rhs[] = {b, row, col, sc, bt};
      for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++)
        for (size_t k = 0; k < sizeof rhs / sizeof rhs[0]; k++)
          for (int swap = 0; swap < 2; swap++) {
            const torc_tensor *x = swap ? rhs[k] : a, *y = swap ? a : rhs[k];
            REF;
            torc_tensor *r = fns[f](x, y);
            CPU;
            torc_tensor *o = fns[f](x, y);
            UNPIN;
            test_assert_close(o, r, tol_of(dt));
          }
      /* In place into a transposed view. */
      torc_tensor *t1 = torc_clone(bt), *t2 = torc_clone(bt);
      torc_tensor *v1 = torc_transpose(t1, 0, 1),
                  *v2 = torc_transpose(t2, 0, 1);
      torc_tensor *w = torc_randn(TORC_SHAPE(c, n), dt, TORC_CPU, NULL);
      REF;
      assert_ok(torc_add_(v1, w));
      CPU;
      assert_ok(torc_add_(v2, w));
      UNPIN;
      test_assert_close(t2, t1, tol_of(dt));
      torc_scope_end(scope);
    }
  }
}

/* Reductions over dim sets the plan treats differently (all, last, first,
 * middle, mixed), on a permuted input too, a large full sum, and kept
 * dims between reduced ones on a large input. */
static void test_reduce(void **state) {
  (void)state;
  typedef torc_tensor *(*red_fn)(const torc_tensor *, const int *, int, int);
  static const red_fn fns[] = {torc_sum, torc_mean, torc_amax, torc_amin};
  static const int dims[][3] = {{0, 0, 0}, {3, 0, 0}, {0, 0, 0},
                                {1, 0, 0}, {0, 2, 3}, {1, 2, 0}};
  static const int n_dims[] = {0, 1, 1, 1, 3, 2};
  for (int d = 0; d < 2; d++) {
    torc_dtype dt = d ? TORC_F64 : TORC_F32;
    int scope = torc_scope_begin();
    torc_tensor *x = torc_randn(TORC_SHAPE(6, 7, 9, 41), dt, TORC_CPU, NULL);
    int perm[4] = {2, 0, 3, 1};
    torc_tensor *xp = torc_permute(x, perm, 4);
    torc_tensor *big = torc_randn(TORC_SHAPE(300001), dt, TORC_CPU, NULL);
    torc_tensor *wide = torc_randn(TORC_SHAPE(2000, 257), dt, TORC_CPU, NULL);
    torc_tensor *nan = special(1000, dt, 3.0);
    /* a conv bias's gradient: kept dims among reduced ones, large enough
     * to run in slices of the kept indices */
    torc_tensor *conv = torc_randn(TORC_SHAPE(16, 12, 14, 14), dt, TORC_CPU,
                                   NULL);
    assert_torc(xp);
    assert_torc(conv);
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
      for (size_t k = 0; k < sizeof n_dims / sizeof n_dims[0]; k++)
        for (int p = 0; p < 2; p++) {
          const torc_tensor *in = p ? xp : x;
          REF;
          torc_tensor *r = fns[f](in, dims[k], n_dims[k], 1);
          CPU;
          torc_tensor *c = fns[f](in, dims[k], n_dims[k], 1);
          UNPIN;
          test_assert_close(c, r, d ? 1e-10 : 1e-5);
        }
      static const int d0[1] = {0}, d1[1] = {1};
      const torc_tensor *more[] = {big, wide, wide, nan};
      const int *md[] = {NULL, d0, d1, NULL};
      for (int k = 0; k < 4; k++) {
        REF;
        torc_tensor *r = fns[f](more[k], md[k], md[k] ? 1 : 0, 0);
        CPU;
        torc_tensor *c = fns[f](more[k], md[k], md[k] ? 1 : 0, 0);
        UNPIN;
        test_assert_close(c, r, d ? 1e-10 : 1e-5);
      }
      static const int bias_dims[2][3] = {{0, 2, 3}, {0, 3, 0}};
      for (int k = 0; k < 2; k++) {
        REF;
        torc_tensor *r = fns[f](conv, bias_dims[k], 3 - k, 0);
        CPU;
        torc_tensor *c = fns[f](conv, bias_dims[k], 3 - k, 0);
        UNPIN;
        test_assert_close(c, r, d ? 1e-10 : 1e-5);
      }
    }
    torc_scope_end(scope);
  }
}

/* softmax and log_softmax over the last dim (the fast path), the first
 * (strided lines), with infinities and NaN in some rows. */
static void test_softmax(void **state) {
  (void)state;
  for (int d = 0; d < 2; d++) {
    torc_dtype dt = d ? TORC_F64 : TORC_F32;
    int scope = torc_scope_begin();
    torc_tensor *x = torc_mul_scalar(
        torc_randn(TORC_SHAPE(513, 131), dt, TORC_CPU, NULL), 4.0);
    torc_tensor *s = torc_reshape(special(25 * 5, dt, 3.0), TORC_SHAPE(25, 5));
    const torc_tensor *in[] = {x, s};
    for (int k = 0; k < 2; k++)
      for (int dim = 0; dim < 2; dim++)
        for (int lg = 0; lg < 2; lg++) {
          REF;
          torc_tensor *r =
              lg ? torc_log_softmax(in[k], dim) : torc_softmax(in[k], dim);
          CPU;
          torc_tensor *c =
              lg ? torc_log_softmax(in[k], dim) : torc_softmax(in[k], dim);
          UNPIN;
          test_assert_close(c, r, d ? 1e-10 : 1e-5);
        }
    torc_scope_end(scope);
  }
}

/* GEMMs big enough to be split across the pool, by rows and by columns,
 * with transposed operands. */
static void test_gemm_split(void **state) {
  (void)state;
  static const int64_t mnk[][3] = {
      {300, 70, 200}, {70, 301, 200}, {257, 263, 129}};
  for (int d = 0; d < 2; d++) {
    torc_dtype dt = d ? TORC_F64 : TORC_F32;
    for (size_t i = 0; i < sizeof mnk / sizeof mnk[0]; i++)
      for (int t = 0; t < 4; t++) {
        int scope = torc_scope_begin();
        int64_t m = mnk[i][0], n = mnk[i][1], k = mnk[i][2];
        torc_tensor *a =
            (t & 1)
                ? torc_transpose(
                      torc_randn(TORC_SHAPE(k, m), dt, TORC_CPU, NULL), 0, 1)
                : torc_randn(TORC_SHAPE(m, k), dt, TORC_CPU, NULL);
        torc_tensor *b =
            (t & 2)
                ? torc_transpose(
                      torc_randn(TORC_SHAPE(n, k), dt, TORC_CPU, NULL), 0, 1)
                : torc_randn(TORC_SHAPE(k, n), dt, TORC_CPU, NULL);
        REF;
        torc_tensor *r = torc_matmul(a, b);
        CPU;
        torc_tensor *c = torc_matmul(a, b);
        UNPIN;
        test_assert_close(c, r, d ? 1e-10 : 1e-4);
        torc_scope_end(scope);
      }
  }
}

/* Copies between dtypes and into strided views. */
static void test_copy(void **state) {
  (void)state;
  static const torc_dtype dts[] = {TORC_F32, TORC_F64,  TORC_I32,
                                   TORC_U8,  TORC_BOOL, TORC_F16,
                                   TORC_BF16};
  int scope = torc_scope_begin();
  torc_tensor *x = torc_mul_scalar(special(4099, TORC_F64, 300.0), 1.0);
  for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++)
    for (size_t j = 0; j < sizeof dts / sizeof dts[0]; j++) {
      REF;
      torc_tensor *src = torc_to_dtype(x, dts[i]);
      torc_tensor *r = torc_to_dtype(src, dts[j]);
      CPU;
      torc_tensor *c = torc_to_dtype(src, dts[j]);
      UNPIN;
      test_assert_close(c, r, 0);
    }
  torc_tensor *m = torc_randn(TORC_SHAPE(301, 127), TORC_F32, TORC_CPU, NULL);
  REF;
  torc_tensor *r = torc_contiguous(torc_transpose(m, 0, 1));
  CPU;
  torc_tensor *c = torc_contiguous(torc_transpose(m, 0, 1));
  UNPIN;
  test_assert_close(c, r, 0);
  /* strided casts to bf16 and back (a transposed gradient's) */
  torc_tensor *mb = torc_to_dtype(m, TORC_BF16);
  REF;
  torc_tensor *rb = torc_to_dtype(torc_transpose(m, 0, 1), TORC_BF16);
  torc_tensor *rf = torc_to_dtype(torc_transpose(mb, 0, 1), TORC_F32);
  CPU;
  torc_tensor *cb = torc_to_dtype(torc_transpose(m, 0, 1), TORC_BF16);
  torc_tensor *cf = torc_to_dtype(torc_transpose(mb, 0, 1), TORC_F32);
  UNPIN;
  test_assert_close(cb, rb, 0);
  test_assert_close(cf, rf, 0);
  torc_scope_end(scope);
}

/* f32 -> bf16 and back on the cpu plugin's contiguous loop, bit for bit
 * against torc_f32_to_bf16: ties to even both ways, the largest floats
 * rounding to infinity, subnormals, -0, infinities and NaNs (kept NaN),
 * over a vector's length and a tail. */
static void test_copy_bf16_bits(void **state) {
  (void)state;
  static const uint32_t bits[] = {
      0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f817fffu, 0x7f7fffffu,
      0xff7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x00000001u, 0x00008000u,
      0x00018000u, 0x807fffffu, 0x80000000u, 0x00000000u, 0x7f800000u,
      0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu,
      0x3f800000u, 0xbf800000u, 0x40490fdbu, 0x3eaaaaabu, 0xc2f6e979u,
      0x33800000u, 0x1f7fffffu, 0x5f7f8000u, 0x00ffffffu, 0x80ff8000u,
      0x4b7fffffu, 0x4b7f8000u, 0x3f7f8000u, 0x3f7fc000u, 0x3f7fffffu,
      0x477fe000u, 0x477ff000u};
  enum { N = sizeof bits / sizeof bits[0] };
  float f[N];
  memcpy(f, bits, sizeof f);
  int scope = torc_scope_begin();
  torc_tensor *x = torc_from_host(f, (int64_t[]){N}, 1, TORC_F32, TORC_CPU);
  assert_torc(x);
  CPU;
  torc_tensor *b = torc_to_dtype(x, TORC_BF16);
  torc_tensor *back = b ? torc_to_dtype(b, TORC_F32) : NULL;
  UNPIN;
  assert_torc(back);
  uint16_t got[N];
  float round[N];
  assert_ok(torc_to_host(b, got, sizeof got));
  assert_ok(torc_to_host(back, round, sizeof round));
  for (int i = 0; i < N; i++) {
    uint16_t want = torc_f32_to_bf16(f[i]);
    uint32_t rb, wb = (uint32_t)want << 16;
    memcpy(&rb, &round[i], sizeof rb);
    if (got[i] != want || rb != wb) {
      print_error("0x%08x: bf16 0x%04x, back 0x%08x; expected 0x%04x, "
                  "0x%08x\n",
                  bits[i], got[i], rb, want, wb);
      fail();
    }
  }
  torc_scope_end(scope);
}

/* ---- bf16 (f32 inside) ---- */

/* The bits of a bf16 tensor, row-major; the caller frees them. */
static uint16_t *bf16_bits(const torc_tensor *t) {
  int64_t n = torc_numel(t);
  int scope = torc_scope_begin();
  torc_tensor *c = torc_contiguous(t);
  uint16_t *b = malloc(sizeof(uint16_t) * (size_t)(n > 0 ? n : 1));
  assert_non_null(b);
  assert_torc(c);
  assert_int_equal(torc_dtype_of(c), TORC_BF16);
  assert_ok(torc_to_host(c, b, sizeof(uint16_t) * (size_t)n));
  torc_scope_end(scope);
  return b;
}

/* Asserts bf16 tensors a and b hold the same bits, NaNs' included; what
 * names the case in the message. */
static void assert_bf16_same(const torc_tensor *a, const torc_tensor *b,
                             const char *what) {
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(torc_numel(a), torc_numel(b));
  uint16_t *x = bf16_bits(a), *y = bf16_bits(b);
  for (int64_t i = 0; i < torc_numel(a); i++)
    if (x[i] != y[i]) {
      print_error("%s: element %lld: cpu 0x%04x (%g), ref 0x%04x (%g)\n", what,
                  (long long)i, x[i], (double)torc_bf16_to_f32(x[i]), y[i],
                  (double)torc_bf16_to_f32(y[i]));
      free(x), free(y);
      fail();
    }
  free(x), free(y);
}

/* One bf16 ulp, relative, over the f32 tolerance: the transcendental
 * ops' f32 polynomials (1-2 f32 ulp) round to ref's bf16 but near a
 * rounding boundary. */
static const double bf16_tol = 1.0 / 256 + 2e-6;

/* bf16 unary ops, contiguous and strided, in place, at sizes off the
 * vector width and the block (37, 100003: the pool too), over special
 * values: bit for bit ref's where f32 rounds as ref's double does, within
 * a bf16 ulp for the f32 polynomials. */
static void test_unary_bf16(void **state) {
  (void)state;
  static const struct {
    unary_fn fn;
    const char *name;
    int exact;
  } fns[] = {{torc_neg, "neg", 1},       {torc_abs, "abs", 1},
             {torc_square, "square", 1}, {torc_relu, "relu", 1},
             {torc_sqrt, "sqrt", 1},     {torc_reciprocal, "reciprocal", 1},
             {torc_sign, "sign", 1},     {clamp, "clamp", 1},
             {torc_exp, "exp", 0},       {torc_log, "log", 0},
             {torc_tanh, "tanh", 0},     {torc_sigmoid, "sigmoid", 0},
             {torc_rsqrt, "rsqrt", 0},   {torc_silu, "silu", 0},
             {leaky, "leaky_relu", 0},   {gelu_t, "gelu tanh", 0},
             {gelu_e, "gelu erf", 0}};
  static const int64_t sizes[] = {37, 100003};
  for (int s = 0; s < 2; s++) {
    int scope = torc_scope_begin();
    torc_tensor *x = special(sizes[s], TORC_BF16, 30.0);
    torc_tensor *xs = torc_slice(x, 0, 1, sizes[s], 3); /* strided */
    assert_torc(xs);
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
      const torc_tensor *in[2] = {x, xs};
      for (int k = 0; k < 2; k++) {
        REF;
        torc_tensor *r = fns[f].fn(in[k]);
        CPU;
        torc_tensor *c = fns[f].fn(in[k]);
        UNPIN;
        assert_torc(r);
        assert_torc(c);
        assert_int_equal(torc_dtype_of(c), TORC_BF16);
        if (fns[f].exact)
          assert_bf16_same(c, r, fns[f].name);
        else
          test_assert_close(c, r, bf16_tol);
      }
    }
    /* in place, on a strided view */
    torc_tensor *x1 = torc_clone(x), *x2 = torc_clone(x);
    torc_tensor *v1 = torc_slice(x1, 0, 1, sizes[s], 2);
    torc_tensor *v2 = torc_slice(x2, 0, 1, sizes[s], 2);
    assert_torc(v1);
    assert_torc(v2);
    REF;
    assert_ok(torc_relu_(v1));
    CPU;
    assert_ok(torc_relu_(v2));
    UNPIN;
    assert_bf16_same(x2, x1, "relu_ in place");
    torc_scope_end(scope);
  }
}

/* bf16 binary ops in the layouts of test_binary (same shape, bias row,
 * column, scalar, transposed; each side), over special values and
 * denormals, and in place: bit for bit ref's, comparisons to bool. */
static void test_binary_bf16(void **state) {
  (void)state;
  typedef torc_tensor *(*bin_fn)(const torc_tensor *, const torc_tensor *);
  static const bin_fn fns[] = {torc_add,     torc_sub,     torc_mul, torc_div,
                               torc_maximum, torc_minimum, torc_eq,  torc_ne,
                               torc_lt,      torc_le,      torc_gt,  torc_ge};
  static const char *const names[] = {"add",     "sub",     "mul", "div",
                                      "maximum", "minimum", "eq",  "ne",
                                      "lt",      "le",      "gt",  "ge"};
  static const int64_t rows[] = {3, 700};
  const torc_dtype dt = TORC_BF16;
  for (int s = 0; s < 2; s++) {
    int scope = torc_scope_begin();
    int64_t n = rows[s], c = 67;
    torc_tensor *a = torc_reshape(special(n * c, dt, 5.0), TORC_SHAPE(n, c));
    torc_tensor *b = torc_randn(TORC_SHAPE(n, c), dt, TORC_CPU, NULL);
    torc_tensor *row = torc_randn(TORC_SHAPE(c), dt, TORC_CPU, NULL);
    torc_tensor *col = torc_randn(TORC_SHAPE(n, 1), dt, TORC_CPU, NULL);
    torc_tensor *sc = torc_full(NULL, 0, 0.1, dt, TORC_CPU);
    torc_tensor *bt =
        torc_transpose(torc_randn(TORC_SHAPE(c, n), dt, TORC_CPU, NULL), 0, 1);
    /* tiny operands: products and quotients in the denormals */
    torc_tensor *tiny = torc_mul_scalar(
        torc_randn(TORC_SHAPE(n, c), dt, TORC_CPU, NULL), 1e-30);
    assert_torc(a);
    assert_torc(bt);
    assert_torc(tiny);
    const torc_tensor *rhs[] = {b, row, col, sc, bt, tiny};
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++)
      for (size_t k = 0; k < sizeof rhs / sizeof rhs[0]; k++)
        for (int swap = 0; swap < 2; swap++) {
          const torc_tensor *x = swap ? rhs[k] : a, *y = swap ? a : rhs[k];
          REF;
          torc_tensor *r = fns[f](x, y);
          CPU;
          torc_tensor *o = fns[f](x, y);
          UNPIN;
          assert_torc(r);
          assert_torc(o);
          if (f < 6)
            assert_bf16_same(o, r, names[f]);
          else
            test_assert_close(o, r, 0);
        }
    /* tiny * tiny and tiny / big: results below the normals */
    REF;
    torc_tensor *r1 = torc_mul(tiny, torc_mul_scalar(b, 1e-8));
    torc_tensor *r2 = torc_div(tiny, torc_mul_scalar(b, 1e8));
    CPU;
    torc_tensor *c1 = torc_mul(tiny, torc_mul_scalar(b, 1e-8));
    torc_tensor *c2 = torc_div(tiny, torc_mul_scalar(b, 1e8));
    UNPIN;
    assert_bf16_same(c1, r1, "denormal mul");
    assert_bf16_same(c2, r2, "denormal div");
    /* in place into a transposed view, and a bias added in place */
    torc_tensor *t1 = torc_clone(bt), *t2 = torc_clone(bt);
    torc_tensor *v1 = torc_transpose(t1, 0, 1), *v2 = torc_transpose(t2, 0, 1);
    torc_tensor *w = torc_randn(TORC_SHAPE(c, n), dt, TORC_CPU, NULL);
    torc_tensor *a1 = torc_clone(a), *a2 = torc_clone(a);
    REF;
    assert_ok(torc_add_(v1, w));
    assert_ok(torc_add_(a1, row));
    CPU;
    assert_ok(torc_add_(v2, w));
    assert_ok(torc_add_(a2, row));
    UNPIN;
    assert_bf16_same(t2, t1, "add_ transposed");
    assert_bf16_same(a2, a1, "add_ bias");
    torc_scope_end(scope);
  }
}

/* relu's backward on bf16 (the relu_backward kernel), over the values of
 * test_relu_backward and a tail: bit for bit ref's. */
static void test_relu_backward_bf16(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  torc_tensor *x = special(1037, TORC_BF16, 4.0);
  torc_tensor *g = torc_randn(TORC_SHAPE(1037), TORC_BF16, TORC_CPU, NULL);
  torc_tensor *grads[2];
  for (int p = 0; p < 2; p++) {
    torc_tensor *xl = torc_clone(x);
    assert_ok(torc_set_requires_grad(xl, 1));
    p ? CPU : REF;
    torc_tensor *y = torc_relu(xl);
    assert_ok(torc_backward(y, g, 0));
    UNPIN;
    grads[p] = torc_grad_of(xl);
    assert_torc(grads[p]);
  }
  assert_bf16_same(grads[1], grads[0], "relu_backward");
  torc_scope_end(scope);
}

/* bf16 sum, mean (double accumulation in both, rounded once: within a
 * bf16 ulp of ref's, whose order differs), amax, amin (bit for bit), over
 * the dim sets of test_reduce, a permuted input, a large full sum, and a
 * conv bias's gradient. */
static void test_reduce_bf16(void **state) {
  (void)state;
  typedef torc_tensor *(*red_fn)(const torc_tensor *, const int *, int, int);
  static const red_fn fns[] = {torc_sum, torc_mean, torc_amax, torc_amin};
  static const char *const names[] = {"sum", "mean", "amax", "amin"};
  static const int dims[][3] = {{0, 0, 0}, {3, 0, 0}, {0, 0, 0},
                                {1, 0, 0}, {0, 2, 3}, {1, 2, 0}};
  static const int n_dims[] = {0, 1, 1, 1, 3, 2};
  const torc_dtype dt = TORC_BF16;
  int scope = torc_scope_begin();
  torc_tensor *x = torc_randn(TORC_SHAPE(6, 7, 9, 41), dt, TORC_CPU, NULL);
  int perm[4] = {2, 0, 3, 1};
  torc_tensor *xp = torc_permute(x, perm, 4);
  torc_tensor *big = torc_randn(TORC_SHAPE(300001), dt, TORC_CPU, NULL);
  torc_tensor *wide = torc_randn(TORC_SHAPE(2000, 257), dt, TORC_CPU, NULL);
  torc_tensor *nan = special(1000, dt, 3.0);
  torc_tensor *fin = torc_slice(special(1000, dt, 3.0), 0, 3, 1000, 1);
  torc_tensor *conv =
      torc_randn(TORC_SHAPE(16, 12, 14, 14), dt, TORC_CPU, NULL);
  assert_torc(xp);
  assert_torc(fin);
  assert_torc(conv);
  for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
    int exact = f >= 2;
    const torc_tensor *ins[32];
    const int *ds[32];
    int nds[32], kd[32], n_in = 0;
    for (size_t k = 0; k < sizeof n_dims / sizeof n_dims[0]; k++)
      for (int p = 0; p < 2; p++) {
        ins[n_in] = p ? xp : x, ds[n_in] = dims[k];
        nds[n_in] = n_dims[k], kd[n_in++] = 1;
      }
    static const int d0[1] = {0}, d1[1] = {1};
    static const int bias_dims[2][3] = {{0, 2, 3}, {0, 3, 0}};
    const torc_tensor *more[] = {big, wide, wide, nan, fin, conv, conv};
    const int *md[] = {NULL, d0, d1, NULL, NULL, bias_dims[0], bias_dims[1]};
    const int mn[] = {0, 1, 1, 0, 0, 3, 2};
    for (int k = 0; k < 7; k++) {
      ins[n_in] = more[k], ds[n_in] = md[k];
      nds[n_in] = mn[k], kd[n_in++] = 0;
    }
    for (int k = 0; k < n_in; k++) {
      REF;
      torc_tensor *r = fns[f](ins[k], ds[k], nds[k], kd[k]);
      CPU;
      torc_tensor *c = fns[f](ins[k], ds[k], nds[k], kd[k]);
      UNPIN;
      assert_torc(r);
      assert_torc(c);
      assert_int_equal(torc_dtype_of(c), TORC_BF16);
      if (exact)
        assert_bf16_same(c, r, names[f]);
      else
        test_assert_close(c, r, bf16_tol);
    }
  }
  torc_scope_end(scope);
}

/* bf16 fill_ (a value that rounds, and one in the denormals), contiguous
 * and into a strided view, and where: bit for bit ref's. */
static void test_fill_where_bf16(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  static const double vals[] = {0.1, -3.3e-39, 1e39, NAN};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    REF;
    torc_tensor *r = torc_full(TORC_SHAPE(1001), vals[i], TORC_BF16, TORC_CPU);
    CPU;
    torc_tensor *c = torc_full(TORC_SHAPE(1001), vals[i], TORC_BF16, TORC_CPU);
    UNPIN;
    assert_bf16_same(c, r, "fill_");
  }
  torc_tensor *z1 = torc_zeros(TORC_SHAPE(40, 30), TORC_BF16, TORC_CPU);
  torc_tensor *z2 = torc_zeros(TORC_SHAPE(40, 30), TORC_BF16, TORC_CPU);
  torc_tensor *v1 = torc_transpose(z1, 0, 1), *v2 = torc_transpose(z2, 0, 1);
  REF;
  assert_ok(torc_fill_(torc_slice(v1, 0, 0, 30, 2), 0.3));
  CPU;
  assert_ok(torc_fill_(torc_slice(v2, 0, 0, 30, 2), 0.3));
  UNPIN;
  assert_bf16_same(z2, z1, "fill_ strided");
  torc_tensor *a = special(2049, TORC_BF16, 3.0);
  torc_tensor *b = torc_randn(TORC_SHAPE(2049), TORC_BF16, TORC_CPU, NULL);
  torc_tensor *cond = torc_gt(b, torc_full(NULL, 0, 0.0, TORC_BF16, TORC_CPU));
  REF;
  torc_tensor *r = torc_where(cond, a, b);
  CPU;
  torc_tensor *c = torc_where(cond, a, b);
  UNPIN;
  assert_bf16_same(c, r, "where");
  torc_scope_end(scope);
}

/* The plugin serves these ops for bf16 ahead of ref (a plugin that
 * registered none would leave every bf16 test above passing on ref's
 * kernels). */
static void test_bf16_registered(void **state) {
  (void)state;
  static const char *const ops[] = {
      "neg",   "abs", "relu", "add",     "sub",           "mul",
      "div",   "sum", "mean", "amax",    "relu_backward", "fill_",
      "where", "exp", "gt",   "maximum", "dropout"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    int found = 0;
    for (int k = 0; k < torc_kernel_count(); k++) {
      torc_kernel_summary s;
      if (torc_kernel_get(k, &s) == TORC_OK && strcmp(s.op, ops[i]) == 0 &&
          s.dtype == TORC_BF16 && strcmp(s.provider, "cpu") == 0 && s.active)
        found = 1;
    }
    if (!found) {
      print_error("no active cpu kernel for bf16 %s\n", ops[i]);
      fail();
    }
  }
}

/* [plugin.cpu] gemm: openblas always loads (and computes a matmul), an
 * unknown provider fails with a message naming the key and the choices;
 * onednn loads or, where the plugin was built without oneDNN, says so. */
/* relu's backward (the fused relu_backward kernel), ref then cpu, f32
 * and f64, over vector loops and a tail: 0 where the output is <= 0
 * (+-0 included), else the gradient, which a NaN output passes, as
 * PyTorch's threshold_backward: relu(NaN) = NaN, gradient 1. */
static void test_relu_backward(void **state) {
  (void)state;
  enum { N = 1037 };
  static const double special[] = {-1, 0, -0.0, 2, NAN, INFINITY, -INFINITY,
                                   1e-42, -1e-42};
  double xs[N], gs[N];
  for (int i = 0; i < N; i++) {
    xs[i] = i < 9 ? special[i] : (i % 7) - 3.25;
    gs[i] = 0.5 + (i % 5);
  }
  for (int dt = 0; dt < 2; dt++) {
    torc_dtype d = dt ? TORC_F64 : TORC_F32;
    torc_tensor *grads[2] = {NULL, NULL};
    for (int p = 0; p < 2; p++) {
      p ? CPU : REF;
      torc_tensor *x0 = torc_from_host(xs, TORC_SHAPE(N), TORC_F64, TORC_CPU);
      torc_tensor *g0 = torc_from_host(gs, TORC_SHAPE(N), TORC_F64, TORC_CPU);
      torc_tensor *x = torc_to_dtype(x0, d), *g = torc_to_dtype(g0, d);
      assert_ok(torc_set_requires_grad(x, 1));
      torc_tensor *y = torc_relu(x);
      assert_ok(torc_backward(y, g, 0));
      grads[p] = torc_retain(torc_grad_of(x));
      double *yv = test_values(y), *gv = test_values(grads[p]);
      for (int i = 0; i < N; i++) {
        double want = yv[i] <= 0 ? 0 : (double)(d == TORC_F32 ? (float)gs[i]
                                                              : gs[i]);
        if (gv[i] != want)
          print_error("%s %s, element %d: x %g, y %g: gradient %g, want %g\n",
                      p ? "cpu" : "ref", dt ? "f64" : "f32", i, xs[i], yv[i],
                      gv[i], want);
        assert_true(gv[i] == want);
      }
      assert_true(isnan(yv[4]) && gv[4] == gs[4]); /* NaN passes it */
      free(yv), free(gv);
      torc_release(y), torc_release(x), torc_release(g);
      torc_release(x0), torc_release(g0);
      UNPIN;
    }
    test_assert_close(grads[1], grads[0], 0);
    torc_release(grads[0]), torc_release(grads[1]);
  }
}

static void test_gemm_key(void **state) {
  (void)state;
  static const char *const values[] = {"openblas", "onednn", "auto", "nope"};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    char ini[256];
    snprintf(ini, sizeof ini,
             "[plugin.ref]\nmodule = ref\n[plugin.cpu]\nmodule = cpu\n"
             "gemm = %s\n",
             values[i]);
    torc_config *cfg = torc_config_parse(ini, "gemm.ini");
    assert_non_null(cfg);
    torc_status st = torc_config_apply(cfg);
    torc_config_free(cfg);
    if (strcmp(values[i], "nope") == 0) {
      assert_int_not_equal(st, TORC_OK);
      assert_non_null(strstr(torc_last_error(), "openblas or onednn"));
    } else if (st != TORC_OK) {
      assert_string_equal(values[i], "onednn");
      assert_non_null(strstr(torc_last_error(), "without oneDNN"));
    } else {
      int scope = torc_scope_begin();
      torc_tensor *a =
          torc_randn(TORC_SHAPE(200, 300), TORC_F32, TORC_CPU, NULL);
      torc_tensor *b =
          torc_randn(TORC_SHAPE(300, 100), TORC_F32, TORC_CPU, NULL);
      REF;
      torc_tensor *r = torc_matmul(a, b);
      CPU;
      torc_tensor *c = torc_matmul(a, b);
      UNPIN;
      test_assert_close(c, r, 1e-4);
      torc_scope_end(scope);
    }
    torc_clear_error();
    torc_shutdown();
  }
}

int main(void) {
  if (!test_plugin_built("cpu", "libopenblas-dev"))
    return TEST_SKIP_STATUS;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_unary, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_binary, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_reduce, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_softmax, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_gemm_split, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_relu_backward, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_copy_bf16_bits, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_copy, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_unary_bf16, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_binary_bf16, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_relu_backward_bf16, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_reduce_bf16, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_fill_where_bf16, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_bf16_registered, test_live_setup,
                                      test_live_teardown),
  };
  const struct CMUnitTest plain[] = {
      cmocka_unit_test(test_gemm_key),
  };
  int failed = cmocka_run_group_tests_name("cpu elementwise against ref", tests,
                                           setup_pinned, test_teardown_all);
  failed += cmocka_run_group_tests_name("cpu plugin keys", plain, NULL, NULL);
  return failed;
}
