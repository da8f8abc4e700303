/* tests/test_cuda_device.c — the cuda plugin on a real GPU, what the CPU
 * tests cannot reach: copies both ways, kernels of each family against the
 * cpu on the same inputs (elementwise with broadcast, matmul on cuBLAS and
 * on the tiled kernel, a cuDNN convolution, a reduction, an integer op),
 * streams and events, a bad index reported at the next wait with the
 * device still usable afterwards, and out of memory with the device's own
 * figures. Skipped (77, saying why) where the plugin was not built or no
 * CUDA device is present — every CI machine here; bench/gpu/check.sh runs
 * it on a GPU.
 */
#include <math.h>

#include "testutil.h"

#include "torc/stream.h"

static torc_device gpu;

/* x on the gpu from host values. */
static torc_tensor *on_gpu(const float *v, const int64_t *shape, int nd) {
  torc_tensor *t = torc_from_host(v, shape, nd, TORC_F32, gpu);
  assert_torc(t);
  return t;
}

/* The n floats of t (any device) in out. */
static void read_back(const torc_tensor *t, float *out, size_t n) {
  assert_ok(torc_to_host(t, out, n * sizeof *out));
}

/* |a - b| <= atol + rtol |b| element by element. */
static void close_to(const float *a, const float *b, size_t n, double atol,
                     double rtol, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (!(fabs((double)a[i] - b[i]) <= atol + rtol * fabs((double)b[i])))
      fail_msg("%s: element %zu is %.9g on cuda, %.9g on the cpu", what, i,
               (double)a[i], (double)b[i]);
}

static void fill(float *v, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    v[i] = (float)sin((double)(i * 7 + seed)) * 2.0f;
}

static void test_copies_and_elementwise(void **state) {
  (void)state;
  float a[64], b[8], got[64], want[64];
  fill(a, 64, 1), fill(b, 8, 2);
  torc_tensor *ga = on_gpu(a, TORC_SHAPE(8, 8));
  torc_tensor *gb = on_gpu(b, TORC_SHAPE(1, 8)); /* broadcast over rows */
  torc_tensor *ca = torc_from_host(a, TORC_SHAPE(8, 8), TORC_F32, TORC_CPU);
  torc_tensor *cb = torc_from_host(b, TORC_SHAPE(1, 8), TORC_F32, TORC_CPU);
  read_back(ga, got, 64);
  assert_memory_equal(got, a, sizeof a);
  torc_tensor *gy = torc_tanh(torc_mul(ga, gb));
  torc_tensor *cy = torc_tanh(torc_mul(ca, cb));
  assert_torc(gy);
  assert_torc(cy);
  assert_true(torc_device_eq(torc_device_of(gy), gpu));
  read_back(gy, got, 64), read_back(cy, want, 64);
  close_to(got, want, 64, 1e-6, 1e-6, "tanh(a * b)");
  torc_release(ga), torc_release(gb), torc_release(ca), torc_release(cb);
  torc_release(gy), torc_release(cy);
}

static void test_matmul_conv_reduce(void **state) {
  (void)state;
  enum { M = 33, K = 65, N = 17 };
  static float x[M * K], w[K * N], got[M * N], want[M * N];
  fill(x, M * K, 3), fill(w, K * N, 4);
  torc_tensor *gx = on_gpu(x, TORC_SHAPE(M, K));
  torc_tensor *gw = on_gpu(w, TORC_SHAPE(K, N));
  torc_tensor *cx = torc_from_host(x, TORC_SHAPE(M, K), TORC_F32, TORC_CPU);
  torc_tensor *cw = torc_from_host(w, TORC_SHAPE(K, N), TORC_F32, TORC_CPU);
  torc_tensor *gy = torc_matmul(gx, gw), *cy = torc_matmul(cx, cw);
  assert_torc(gy);
  read_back(gy, got, M * N), read_back(cy, want, M * N);
  close_to(got, want, M * N, 1e-4, 1e-5, "matmul (cuBLAS)");
  /* transposed operands (column-contiguous views): w^T [N, K] x^T [K, M],
   * which cuBLAS reads through its transpose flags */
  torc_tensor *gt = torc_transpose(gw, 0, 1), *ct = torc_transpose(cw, 0, 1);
  torc_tensor *gxt = torc_transpose(gx, 0, 1), *cxt = torc_transpose(cx, 0, 1);
  torc_tensor *gyt = torc_matmul(gt, gxt), *cyt = torc_matmul(ct, cxt);
  assert_torc(gyt);
  assert_torc(cyt);
  read_back(gyt, got, M * N), read_back(cyt, want, M * N);
  close_to(got, want, M * N, 1e-4, 1e-5, "matmul of transposed views");
  torc_release(gxt), torc_release(cxt);
  /* sum over dim 1 */
  float s_got[M], s_want[M];
  int dims[1] = {1};
  torc_tensor *gs = torc_sum(gx, dims, 1, 0), *cs = torc_sum(cx, dims, 1, 0);
  assert_torc(gs);
  read_back(gs, s_got, M), read_back(cs, s_want, M);
  close_to(s_got, s_want, M, 1e-5, 1e-5, "sum over dim 1");
  /* a 3x3 convolution with a bias on cuDNN */
  static float im[2 * 3 * 9 * 9], k[4 * 3 * 3 * 3], bias[4];
  static float c_got[2 * 4 * 9 * 9], c_want[2 * 4 * 9 * 9];
  fill(im, sizeof im / 4, 5), fill(k, sizeof k / 4, 6), fill(bias, 4, 7);
  torc_conv2d_params p = {{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1};
  torc_tensor *gi = on_gpu(im, TORC_SHAPE(2, 3, 9, 9));
  torc_tensor *gk = on_gpu(k, TORC_SHAPE(4, 3, 3, 3));
  torc_tensor *gbias = on_gpu(bias, TORC_SHAPE(4));
  torc_tensor *ci = torc_from_host(im, TORC_SHAPE(2, 3, 9, 9), TORC_F32,
                                   TORC_CPU);
  torc_tensor *ck = torc_from_host(k, TORC_SHAPE(4, 3, 3, 3), TORC_F32,
                                   TORC_CPU);
  torc_tensor *cbias = torc_from_host(bias, TORC_SHAPE(4), TORC_F32,
                                      TORC_CPU);
  torc_tensor *gc = torc_conv2d(gi, gk, gbias, &p);
  torc_tensor *cc = torc_conv2d(ci, ck, cbias, &p);
  assert_torc(gc);
  assert_torc(cc);
  read_back(gc, c_got, sizeof c_got / 4);
  read_back(cc, c_want, sizeof c_want / 4);
  close_to(c_got, c_want, sizeof c_got / 4, 1e-4, 1e-5, "conv2d (cuDNN)");
  torc_release(gx), torc_release(gw), torc_release(cx), torc_release(cw);
  torc_release(gy), torc_release(cy), torc_release(gt), torc_release(ct);
  torc_release(gyt), torc_release(cyt), torc_release(gs), torc_release(cs);
  torc_release(gi), torc_release(gk), torc_release(gbias);
  torc_release(ci), torc_release(ck), torc_release(cbias);
  torc_release(gc), torc_release(cc);
}

/* Work on a side stream waits for an event of the default one; the event
 * completes; the result is the same. */
static void test_streams_and_events(void **state) {
  (void)state;
  float a[1024], got[1024];
  fill(a, 1024, 8);
  torc_tensor *ga = on_gpu(a, TORC_SHAPE(1024));
  torc_stream *side = torc_stream_new(gpu);
  torc_event *ev = torc_event_new(gpu);
  assert_non_null(side);
  assert_non_null(ev);
  assert_ok(torc_event_record(ev, torc_stream_default(gpu)));
  assert_ok(torc_stream_wait_event(side, ev));
  assert_ok(torc_set_current_stream(side));
  torc_tensor *gy = torc_add(ga, ga);
  assert_torc(gy);
  assert_ok(torc_event_record(ev, side));
  assert_ok(torc_set_current_stream(torc_stream_default(gpu)));
  assert_ok(torc_event_synchronize(ev));
  assert_int_equal(torc_event_query(ev), TORC_OK);
  read_back(gy, got, 1024);
  for (int i = 0; i < 1024; i++)
    assert_true(got[i] == a[i] + a[i]);
  torc_release(gy), torc_release(ga);
  torc_event_free(ev);
  torc_stream_free(side);
}

/* A gather with an index out of range: the call queues, the next wait
 * fails with one message naming the op and the value, and the device
 * runs the next op as if nothing happened. */
static void test_bad_index_at_the_next_wait(void **state) {
  (void)state;
  float x[12], got[12];
  fill(x, 12, 9);
  int64_t idx[4] = {0, 2, 7, 1}; /* 7 is past dim 1's size 4 */
  torc_tensor *gx = on_gpu(x, TORC_SHAPE(3, 4));
  torc_tensor *gi = torc_from_host(idx, TORC_SHAPE(1, 4), TORC_I64, gpu);
  assert_torc(gi);
  torc_tensor *g = torc_gather(gx, 1, gi);
  if (g != NULL) {
    float v[4];
    assert_int_equal(torc_to_host(g, v, sizeof v), TORC_ERR_RANGE);
    torc_release(g);
  } else {
    assert_int_equal(torc_last_status(), TORC_ERR_RANGE);
  }
  assert_non_null(strstr(torc_last_error(), "'gather'"));
  assert_non_null(strstr(torc_last_error(), "index 7"));
  torc_clear_error();
  torc_tensor *gy = torc_add(gx, gx);
  assert_torc(gy);
  read_back(gy, got, 12);
  for (int i = 0; i < 12; i++)
    assert_true(got[i] == x[i] + x[i]);
  torc_release(gx), torc_release(gi), torc_release(gy);
}

/* A request past the device's memory: TORC_ERR_OOM, the device named, its
 * figures in the message. */
static void test_out_of_memory(void **state) {
  (void)state;
  int64_t n = INT64_C(1) << 48; /* 1 PiB of f32 */
  torc_tensor *t = torc_empty(&n, 1, TORC_F32, gpu);
  assert_null(t);
  assert_int_equal(torc_last_status(), TORC_ERR_OOM);
  assert_non_null(strstr(torc_last_error(), "cuda:0"));
  torc_clear_error();
}

int main(void) {
  if (!test_plugin_built("cuda", "the CUDA toolkit with cuBLAS and cuDNN"))
    return TEST_SKIP_STATUS;
  if (torc_plugin_load("ref", NULL) != TORC_OK ||
      torc_plugin_load("cuda", NULL) != TORC_OK) {
    printf("test_cuda_device: cannot load the plugins: %s\n",
           torc_last_error());
    return 1;
  }
  if (torc_device_count("cuda") < 1) {
    char why[512] = "";
    torc_device_none_reason("cuda", why, sizeof why);
    printf("SKIP: no CUDA device here (%s); bench/gpu/check.sh runs this "
           "test on a GPU\n",
           why[0] ? why : "cuda has 0 devices");
    return TEST_SKIP_STATUS;
  }
  assert_ok(torc_device_parse("cuda:0", &gpu));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_copies_and_elementwise),
      cmocka_unit_test(test_matmul_conv_reduce),
      cmocka_unit_test(test_streams_and_events),
      cmocka_unit_test(test_bad_index_at_the_next_wait),
      cmocka_unit_test(test_out_of_memory),
  };
  return cmocka_run_group_tests_name("cuda_device", tests, NULL, NULL);
}
