/* tests/test_tensor.c — tensor creation, properties, views without copies,
 * copies, moving to and from the host, and every shape/range error a user
 * can make with them. */
#include <math.h>

#include "testutil.h"

static void test_creation_and_properties(void **state) {
  (void)state;
  torc_tensor *t = torc_zeros(TORC_SHAPE(2, 3, 4), TORC_F32, TORC_CPU);
  assert_torc(t);
  assert_int_equal(torc_ndim(t), 3);
  assert_int_equal(torc_numel(t), 24);
  assert_int_equal(torc_size(t, -1), 4);
  assert_int_equal(torc_strides(t)[0], 12);
  assert_int_equal(torc_strides(t)[2], 1);
  assert_true(torc_is_contiguous(t));
  assert_int_equal(torc_dtype_of(t), TORC_F32);
  assert_true(torc_device_eq(torc_device_of(t), TORC_CPU));
  assert_int_equal(torc_size(t, 3), -1);
  assert_error(TORC_ERR_RANGE, "dim 3 is out of range");
  torc_release(t);

  torc_tensor *s = torc_full(NULL, 0, 2.5, TORC_F64, TORC_CPU);
  double v;
  assert_ok(torc_item(s, &v));
  assert_true(v == 2.5);
  assert_int_equal(torc_ndim(s), 0);
  assert_int_equal(torc_numel(s), 1);
  torc_release(s);

  torc_tensor *e = torc_empty(TORC_SHAPE(0, 5), TORC_I64, TORC_CPU);
  assert_torc(e);
  assert_int_equal(torc_numel(e), 0);
  torc_release(e);

  assert_null(torc_zeros(TORC_SHAPE(2, -1), TORC_F32, TORC_CPU));
  assert_error(TORC_ERR_SHAPE, "negative size at dim 1");
  int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  assert_null(torc_zeros(nine, 9, TORC_F32, TORC_CPU));
  assert_error(TORC_ERR_SHAPE, "0 to 8");
  /* No elements, but sizes whose product (past the zero) overflows the
   * strides: refused rather than given wrapped strides. */
  assert_null(torc_empty(TORC_SHAPE(0, 2882303761601003515LL, 4), TORC_F32,
                         TORC_CPU));
  assert_error(TORC_ERR_SHAPE, "too large");
  torc_tensor *z = torc_empty(TORC_SHAPE(0, 1000, 4), TORC_F32, TORC_CPU);
  assert_torc(z);
  assert_int_equal(torc_strides(z)[0], 4000);
  torc_release(z);
}

static void test_arange_linspace_eye(void **state) {
  (void)state;
  torc_tensor *a = torc_arange(0, 5, 1, TORC_I64, TORC_CPU);
  const double ea[] = {0, 1, 2, 3, 4};
  test_assert_values(a, ea, 5, 0);
  torc_release(a);
  a = torc_arange(1, 0, -0.25, TORC_F32, TORC_CPU);
  const double eb[] = {1, 0.75, 0.5, 0.25};
  test_assert_values(a, eb, 4, 0);
  torc_release(a);
  /* torch.linspace(-1, 1, 5) */
  a = torc_linspace(-1, 1, 5, TORC_F32, TORC_CPU);
  const double el[] = {-1, -0.5, 0, 0.5, 1};
  test_assert_values(a, el, 5, 0);
  torc_release(a);
  a = torc_eye(2, 3, TORC_U8, TORC_CPU);
  const double ee[] = {1, 0, 0, 0, 1, 0};
  test_assert_values(a, ee, 6, 0);
  torc_release(a);
  assert_null(torc_arange(0, 5, 0, TORC_F32, TORC_CPU));
  assert_error(TORC_ERR_INVALID, "step must be non-zero");
  assert_null(torc_arange(5, 0, 1, TORC_F32, TORC_CPU));
  assert_error(TORC_ERR_INVALID, "wrong side");
  assert_null(torc_linspace(0, 1, -1, TORC_F32, TORC_CPU));
  assert_error(TORC_ERR_INVALID, "steps is -1");
}

static void test_from_host_to_host(void **state) {
  (void)state;
  const float data[6] = {1, 2, 3, 4, 5, 6};
  torc_tensor *t = torc_from_host(data, TORC_SHAPE(2, 3), TORC_F32, TORC_CPU);
  float back[6];
  assert_ok(torc_to_host(t, back, sizeof back));
  assert_memory_equal(back, data, sizeof data);
  assert_int_equal(torc_to_host(t, back, 8), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "needs exactly 24");
  float *p = torc_data(t);
  assert_non_null(p);
  assert_true(p[4] == 5.0f);
  double v;
  assert_int_equal(torc_item(t, &v), TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "shape [2, 3] (6 elements)");
  torc_release(t);
}

static void test_views_share_storage(void **state) {
  (void)state;
  torc_tensor *t = torc_arange(0, 24, 1, TORC_F32, TORC_CPU);
  torc_tensor *m = torc_view(t, TORC_SHAPE(2, 3, 4));
  assert_torc(m);
  assert_true(torc_shares_storage(t, m));
  torc_tensor *tr = torc_transpose(m, 0, 2); /* [4, 3, 2] */
  assert_int_equal(torc_shape(tr)[0], 4);
  assert_int_equal(torc_strides(tr)[0], 1);
  assert_int_equal(torc_strides(tr)[2], 12);
  assert_false(torc_is_contiguous(tr));
  /* view of a non-viewable layout fails with the fix; reshape copies */
  assert_null(torc_view(tr, TORC_SHAPE(24)));
  assert_error(TORC_ERR_SHAPE, "torc_contiguous");
  torc_tensor *flat = torc_reshape(tr, TORC_SHAPE(-1));
  assert_false(torc_shares_storage(flat, t));
  const double ef[] = {0, 12, 4, 16, 8, 20};
  double *fv = test_values(flat);
  for (int i = 0; i < 6; i++)
    assert_true(fv[i] == ef[i]);
  free(fv);
  /* slice with a step, narrow, select */
  torc_tensor *sl = torc_slice(m, 2, 1, TORC_END, 2); /* m[:, :, 1::2] */
  assert_int_equal(torc_shape(sl)[2], 2);
  const double es[] = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23};
  test_assert_values(sl, es, 12, 0);
  torc_tensor *nr = torc_narrow(m, 1, 1, 2);
  torc_tensor *se = torc_select(nr, 0, -1); /* m[1, 1:3, :] */
  const double en[] = {16, 17, 18, 19, 20, 21, 22, 23};
  test_assert_values(se, en, 8, 0);
  /* permute, squeeze, unsqueeze, flatten, expand */
  torc_tensor *pm = torc_permute(m, (const int[]){2, 0, 1}, 3);
  assert_int_equal(torc_shape(pm)[0], 4);
  torc_tensor *us = torc_unsqueeze(m, 1);
  assert_int_equal(torc_ndim(us), 4);
  assert_int_equal(torc_shape(us)[1], 1);
  torc_tensor *sq = torc_squeeze(us, 1);
  assert_int_equal(torc_ndim(sq), 3);
  torc_tensor *fl = torc_flatten(m, 1, -1);
  assert_int_equal(torc_shape(fl)[1], 12);
  assert_true(torc_shares_storage(fl, t));
  torc_tensor *head = torc_slice(t, 0, 0, 3, 1);
  torc_tensor *col = torc_view(head, TORC_SHAPE(3, 1));
  torc_tensor *ex = torc_expand(col, TORC_SHAPE(2, 3, 4));
  assert_int_equal(torc_strides(ex)[0], 0);
  assert_int_equal(torc_strides(ex)[2], 0);
  const double ex_v[] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
                         0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2};
  test_assert_values(ex, ex_v, 24, 0);
  torc_tensor *all[] = {t, m, tr, flat, sl, nr, se, pm, us, sq, fl, ex};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    torc_release(all[i]);
  torc_release(col);
  torc_release(head);
}

static void test_view_errors(void **state) {
  (void)state;
  torc_tensor *t = torc_zeros(TORC_SHAPE(4, 5), TORC_F32, TORC_CPU);
  assert_null(torc_slice(t, 1, 2, 9, 1));
  assert_error(TORC_ERR_RANGE, "[2:9] is out of range for dim 1 of size 5");
  assert_null(torc_slice(t, 0, 0, 2, 0));
  assert_error(TORC_ERR_RANGE, "step 0 must be >= 1");
  assert_null(torc_narrow(t, 0, 3, 2));
  assert_error(TORC_ERR_RANGE, "start 3, length 2 is out of range");
  assert_null(torc_select(t, 1, 5));
  assert_error(TORC_ERR_RANGE, "index 5 is out of range for dim 1 of size 5");
  assert_null(torc_transpose(t, 0, 2));
  assert_error(TORC_ERR_RANGE, "dim 2 is out of range");
  assert_null(torc_reshape(t, TORC_SHAPE(3, 7)));
  assert_error(TORC_ERR_SHAPE, "shape [3, 7] (21 elements) is invalid for a "
                               "tensor of shape [4, 5] (20 elements)");
  assert_null(torc_reshape(t, TORC_SHAPE(-1, -1)));
  assert_error(TORC_ERR_SHAPE, "only one dimension can be -1");
  /* Dims whose product overflows 64 bits are refused, with or without a
   * -1 or a zero among them. */
  int64_t big = (int64_t)1 << 40;
  assert_null(torc_reshape(t, TORC_SHAPE(big, big, -1)));
  assert_error(TORC_ERR_SHAPE, "more elements than a tensor can hold");
  assert_null(torc_reshape(t, TORC_SHAPE(0, big, big)));
  assert_error(TORC_ERR_SHAPE, "more elements than a tensor can hold");
  assert_null(torc_reshape(t, TORC_SHAPE(3, -1)));
  assert_error(TORC_ERR_SHAPE, "[3, -1] is invalid");
  assert_null(torc_expand(t, TORC_SHAPE(4, 6)));
  assert_error(TORC_ERR_SHAPE, "cannot expand shape [4, 5] to [4, 6]");
  assert_null(torc_permute(t, (const int[]){0, 0}, 2));
  assert_error(TORC_ERR_SHAPE, "appears twice");
  assert_null(torc_flatten(t, 1, 0));
  assert_error(TORC_ERR_RANGE, "start_dim 1 comes after end_dim 0");
  torc_release(t);
}

/* detach shares memory and the version counter: an in-place write through
 * the detached tensor is visible to autograd's version check. */
static void test_detach_shares_version(void **state) {
  (void)state;
  torc_tensor *t = torc_ones(TORC_SHAPE(3), TORC_F32, TORC_CPU);
  torc_tensor *d = torc_detach(t);
  assert_true(torc_shares_storage(t, d));
  uint64_t v0 = torc_version(t);
  assert_ok(torc_fill_(d, 5.0));
  assert_int_equal(torc_version(t), v0 + 1);
  const double e[] = {5, 5, 5};
  test_assert_values(t, e, 3, 0);
  torc_release(t);
  torc_release(d);
}

static void test_copy_fill_clone_cast(void **state) {
  (void)state;
  torc_tensor *t = torc_zeros(TORC_SHAPE(2, 3), TORC_F32, TORC_CPU);
  torc_tensor *row = torc_arange(1, 4, 1, TORC_I32, TORC_CPU);
  assert_ok(torc_copy_(t, row)); /* broadcast + cast */
  const double e1[] = {1, 2, 3, 1, 2, 3};
  test_assert_values(t, e1, 6, 0);
  torc_tensor *col = torc_slice(t, 1, 1, 2, 1); /* t[:, 1:2] */
  assert_ok(torc_fill_(col, -7)); /* strided fill */
  const double e2[] = {1, -7, 3, 1, -7, 3};
  test_assert_values(t, e2, 6, 0);
  torc_tensor *c = torc_clone(col);
  assert_false(torc_shares_storage(c, t));
  assert_true(torc_is_contiguous(c));
  torc_tensor *u8 = torc_to_dtype(t, TORC_U8);
  assert_int_equal(torc_dtype_of(u8), TORC_U8);
  torc_tensor *same = torc_to_dtype(t, TORC_F32);
  assert_ptr_equal(same, t);
  torc_tensor *bad = torc_zeros(TORC_SHAPE(4), TORC_F32, TORC_CPU);
  assert_int_equal(torc_copy_(t, bad), TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "source of shape [4] does not broadcast");
  int64_t iv;
  torc_tensor *one = torc_full(NULL, 0, 41, TORC_I64, TORC_CPU);
  assert_ok(torc_item_i64(one, &iv));
  assert_int_equal(iv, 41);
  int sc = torc_scope_begin();
  assert_int_equal(torc_item_i64(torc_select(torc_select(t, 0, 0), 0, 0), &iv),
                   TORC_ERR_DTYPE);
  assert_error(TORC_ERR_DTYPE, "use torc_item");
  torc_scope_end(sc);
  torc_tensor *all[] = {t, row, col, c, u8, same, bad, one};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    torc_release(all[i]);
}

/* PyTorch's result_type: 0-dim tensors only promote across categories. */
static void test_result_type_zero_dim(void **state) {
  (void)state;
  torc_tensor *i32 = torc_ones(TORC_SHAPE(2), TORC_I32, TORC_CPU);
  torc_tensor *f32 = torc_ones(TORC_SHAPE(2), TORC_F32, TORC_CPU);
  torc_tensor *u8 = torc_ones(TORC_SHAPE(2), TORC_U8, TORC_CPU);
  torc_tensor *s64 = torc_full(NULL, 0, 1.5, TORC_F64, TORC_CPU);
  torc_tensor *si64 = torc_full(NULL, 0, 1, TORC_I64, TORC_CPU);
  torc_tensor *r;
  r = torc_add(i32, s64); /* torch: float64 */
  assert_int_equal(torc_dtype_of(r), TORC_F64);
  torc_release(r);
  r = torc_add(f32, s64); /* torch: float32 */
  assert_int_equal(torc_dtype_of(r), TORC_F32);
  torc_release(r);
  r = torc_add(u8, si64); /* torch: uint8 */
  assert_int_equal(torc_dtype_of(r), TORC_U8);
  torc_release(r);
  r = torc_div(i32, i32); /* true division */
  assert_int_equal(torc_dtype_of(r), TORC_F32);
  torc_release(r);
  torc_release(i32), torc_release(f32), torc_release(u8);
  torc_release(s64), torc_release(si64);
}

static void test_inplace_checks(void **state) {
  (void)state;
  torc_tensor *i = torc_ones(TORC_SHAPE(3), TORC_I64, TORC_CPU);
  torc_tensor *f = torc_ones(TORC_SHAPE(3), TORC_F32, TORC_CPU);
  assert_int_equal(torc_add_(i, f), TORC_ERR_DTYPE);
  assert_error(TORC_ERR_DTYPE, "cannot be stored in place into a i64 tensor");
  torc_tensor *big = torc_ones(TORC_SHAPE(2, 3), TORC_F32, TORC_CPU);
  assert_int_equal(torc_add_(f, big), TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "in-place target has shape [3]");
  torc_tensor *ex = torc_expand(f, TORC_SHAPE(2, 3));
  assert_int_equal(torc_add_(ex, big), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "expanded view");
  uint64_t v = torc_version(f);
  assert_ok(torc_mul_(f, f));
  assert_int_equal(torc_version(f), v + 1);
  torc_release(i), torc_release(f), torc_release(big), torc_release(ex);
}

static void test_no_kernel_message(void **state) {
  (void)state;
  /* With only the core (no plugin), an op names what is missing. */
  torc_shutdown();
  torc_tensor *t = torc_empty(TORC_SHAPE(2), TORC_F32, TORC_CPU);
  assert_torc(t); /* the cpu device and its memory need no plugin */
  assert_null(torc_exp(t));
  assert_error(TORC_ERR_NO_KERNEL, "no kernel for op 'exp' (f32) on cpu");
  assert_contains(torc_last_error(), "load a backend plugin");
  torc_release(t);
  test_load_plugin("ref");
}

static void test_live_count_returns(void **state) {
  (void)state;
  int64_t live = torc_tensor_live_count();
  for (int i = 0; i < 100; i++) {
    int s = torc_scope_begin();
    torc_tensor *a = torc_randn(TORC_SHAPE(8, 8), TORC_F32, TORC_CPU, NULL);
    torc_relu(torc_matmul(a, torc_transpose(a, 0, 1)));
    torc_scope_end(s);
  }
  assert_int_equal(torc_tensor_live_count(), live);
  assert_int_equal(torc_device_memory_allocated(TORC_CPU), 0);
}

static int setup(void **state) {
  (void)state;
  return torc_plugin_load("ref", NULL) == TORC_OK ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_creation_and_properties),
      cmocka_unit_test(test_arange_linspace_eye),
      cmocka_unit_test(test_from_host_to_host),
      cmocka_unit_test(test_views_share_storage),
      cmocka_unit_test(test_view_errors),
      cmocka_unit_test(test_detach_shares_version),
      cmocka_unit_test(test_copy_fill_clone_cast),
      cmocka_unit_test(test_result_type_zero_dim),
      cmocka_unit_test(test_inplace_checks),
      cmocka_unit_test(test_no_kernel_message),
      cmocka_unit_test(test_live_count_returns),
  };
  return cmocka_run_group_tests(tests, setup, test_teardown_all);
}
