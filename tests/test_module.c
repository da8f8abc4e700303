/* tests/test_module.c — the module tree (torc/module.h) on modules defined
 * here, independent of the built-in layers: names and order as PyTorch
 * gives them, ownership, forward with its device check and error context,
 * train/eval, moving between devices and dtypes with parameter identity
 * kept, freezing by pattern, repr and summary, sequential skip nodes, and
 * the type registry's errors.
 */
#include <math.h>

#include "testutil.h"

/* "scale": y = x * w + count, with parameter w [n], a persistent buffer
 * count [n] and a non-persistent buffer tmp [1]. */
static torc_tensor *scale_forward(torc_module *m, const torc_tensor *const *in,
                                  int n_in) {
  (void)n_in;
  torc_tensor *w = torc_module_parameter(m, "w");
  torc_tensor *c = torc_module_buffer(m, "count");
  return torc_add(torc_mul(in[0], w), c);
}

static int scale_describe(const torc_module *m, char *buf, size_t size) {
  return snprintf(buf, size, "n=%lld",
                  (long long)torc_size(torc_module_parameter(m, "w"), 0));
}

static const torc_module_vtable scale_vt = {
    sizeof(torc_module_vtable), scale_forward, NULL, scale_describe, NULL};

static torc_module *scale_new(int64_t n, double w) {
  torc_module *m = torc_module_new("scale", &scale_vt, NULL);
  if (m == NULL)
    return NULL;
  torc_tensor *tw = torc_full(TORC_SHAPE(n), w, TORC_F32, TORC_CPU);
  torc_tensor *tc = torc_zeros(TORC_SHAPE(n), TORC_F32, TORC_CPU);
  torc_tensor *tt = torc_zeros(TORC_SHAPE(1), TORC_I64, TORC_CPU);
  torc_status st = torc_module_register_parameter(m, "w", tw);
  if (st == TORC_OK)
    st = torc_module_register_buffer(m, "count", tc, 1);
  if (st == TORC_OK)
    st = torc_module_register_buffer(m, "tmp", tt, 0);
  torc_release(tw);
  torc_release(tc);
  torc_release(tt);
  if (st) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}

/* A user-defined network: features (sequential of two scales), head. */
static torc_tensor *net_forward(torc_module *m, const torc_tensor *const *in,
                                int n_in) {
  (void)n_in;
  return torc_module_forward(torc_module_child(m, "head"),
                             torc_module_forward(
                                 torc_module_child(m, "features"), in[0]));
}

static const torc_module_vtable net_vt = {sizeof(torc_module_vtable),
                                          net_forward, NULL, NULL, NULL};

static torc_module *net_new(void) {
  torc_module *net = torc_module_new("Net", &net_vt, NULL);
  torc_module *f = torc_sequential_new();
  assert_ok(torc_sequential_append(f, scale_new(3, 2.0)));
  assert_ok(torc_sequential_append(f, scale_new(3, 3.0)));
  assert_ok(torc_module_add_child(net, "features", f));
  assert_ok(torc_module_add_child(net, "head", scale_new(3, 0.5)));
  return net;
}

static void test_names_and_order(void **state) {
  (void)state;
  torc_module *net = net_new();
  torc_named_tensor *p;
  int n = torc_module_named_parameters(net, &p);
  assert_int_equal(n, 3);
  assert_string_equal(p[0].name, "features.0.w");
  assert_string_equal(p[1].name, "features.1.w");
  assert_string_equal(p[2].name, "head.w");
  assert_true(torc_requires_grad(p[0].tensor));
  torc_named_tensors_free(p, n);
  n = torc_module_named_buffers(net, 1, &p);
  assert_int_equal(n, 3);
  assert_string_equal(p[0].name, "features.0.count");
  torc_named_tensors_free(p, n);
  n = torc_module_named_buffers(net, 0, &p);
  assert_int_equal(n, 6);
  assert_string_equal(p[1].name, "features.0.tmp");
  torc_named_tensors_free(p, n);

  torc_module *f1 = torc_module_find(net, "features.1");
  assert_torc(f1);
  assert_string_equal(torc_module_path(f1), "features.1");
  assert_string_equal(torc_module_type_name(f1), "scale");
  assert_string_equal(torc_module_path(net), "");
  assert_ptr_equal(torc_module_find(net, ""), net);
  assert_int_equal(torc_module_child_count(torc_module_child(net,
                                                             "features")),
                   2);
  assert_string_equal(
      torc_module_child_name(torc_module_child(net, "features"), 1), "1");
  assert_null(torc_module_find(net, "features.7"));
  assert_error(TORC_ERR_INVALID, "has no child '7'");
  assert_contains(torc_last_error(), "'0', '1'");
  assert_int_equal(torc_module_parameter_count(net, 0), 9);
  torc_module_free(net);
}

static void test_ownership_errors(void **state) {
  (void)state;
  torc_module *net = net_new();
  torc_module *head = torc_module_child(net, "head");
  /* a module has one parent */
  torc_module *other = torc_sequential_new();
  assert_int_equal(torc_module_add_child(other, "h", head), TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "already belongs to a parent");
  assert_non_null(torc_module_child(net, "head")); /* still there */
  /* freeing a child is refused */
  torc_module_free(head);
  assert_non_null(torc_module_parameter(torc_module_child(net, "head"), "w"));
  /* names */
  assert_int_equal(torc_module_add_child(net, "head", scale_new(1, 1)),
                   TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "already has a parameter, buffer or "
                                     "child named 'head'");
  assert_int_equal(torc_module_add_child(net, "a.b", scale_new(1, 1)),
                   TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "is not valid");
  /* a cycle */
  assert_int_equal(torc_module_add_child(head, "net", net), TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "would make a cycle");
  assert_int_equal(torc_module_add_child(other, "self", other),
                   TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "cycle");
  /* a failed constructor: one check at the end, the first error kept */
  torc_clear_error();
  torc_set_error(TORC_ERR_SHAPE, "first error");
  assert_int_equal(torc_sequential_append(other, NULL), TORC_ERR_NULL);
  assert_error(TORC_ERR_SHAPE, "first error");
  /* parameter rules */
  torc_tensor *i = torc_zeros(TORC_SHAPE(2), TORC_I64, TORC_CPU);
  assert_int_equal(torc_module_register_parameter(other, "p", i),
                   TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "must be floating");
  torc_tensor *a = torc_ones(TORC_SHAPE(2), TORC_F32, TORC_CPU);
  torc_set_requires_grad(a, 1);
  torc_tensor *b = torc_mul_scalar(a, 2);
  assert_int_equal(torc_module_register_parameter(other, "p", b),
                   TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "not a leaf");
  assert_int_equal(torc_module_set_buffer(other, "nope", a), TORC_ERR_INVALID);
  torc_release(i);
  torc_release(a);
  torc_release(b);
  torc_module_free(other);
  torc_module_free(net);
}

static void test_forward_and_errors(void **state) {
  (void)state;
  torc_module *net = net_new();
  float xs[3] = {1, 2, 3};
  torc_tensor *x = torc_from_host(xs, TORC_SHAPE(3), TORC_F32, TORC_CPU);
  torc_tensor *y = torc_module_forward(net, x);
  double want[3] = {3, 6, 9}; /* x * 2 * 3 * 0.5 */
  test_assert_values(y, want, 3, 0);
  torc_tensor *loss = torc_sum(y, NULL, 0, 0);
  assert_ok(torc_backward(loss, NULL, 0));
  torc_release(loss);
  torc_tensor *g = torc_grad_of(torc_module_parameter(
      torc_module_find(net, "head"), "w"));
  double gw[3] = {6, 12, 18};
  test_assert_values(g, gw, 3, 0);
  torc_release(y);

  /* an op error inside names the innermost module, once */
  torc_tensor *x4 = torc_ones(TORC_SHAPE(4), TORC_F32, TORC_CPU);
  assert_null(torc_module_forward(net, x4));
  assert_int_equal(torc_last_status(), TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "(in scale 'features.0')");
  assert_null(strstr(torc_last_error(), "features.1"));
  assert_null(strstr(torc_last_error(), "Net"));
  /* NULL propagation */
  torc_clear_error();
  torc_set_error(TORC_ERR_IO, "earlier");
  assert_null(torc_module_forward(net, NULL));
  assert_error(TORC_ERR_IO, "earlier");
  assert_null(torc_module_forward(NULL, x));
  /* a module list has no forward */
  torc_module *list = torc_module_list_new();
  assert_ok(torc_sequential_append(list, scale_new(3, 1)));
  assert_null(torc_module_forward(list, x));
  assert_error(TORC_ERR_INVALID, "has no forward");
  assert_null(torc_module_forward(torc_module_child_at(list, 0), x4));
  assert_contains(torc_last_error(), "scale '0'");
  torc_module_free(list);
  torc_release(x);
  torc_release(x4);
  torc_module_free(net);
}

static void test_train_eval(void **state) {
  (void)state;
  torc_module *net = net_new();
  assert_true(torc_module_is_training(torc_module_find(net, "features.1")));
  torc_module_train(net, 0);
  assert_false(torc_module_is_training(net));
  assert_false(torc_module_is_training(torc_module_find(net, "features.1")));
  torc_module_train(torc_module_child(net, "features"), 1);
  assert_true(torc_module_is_training(torc_module_find(net, "features.0")));
  assert_false(torc_module_is_training(torc_module_child(net, "head")));
  torc_module_free(net);
}

static void test_to_device(void **state) {
  (void)state;
  torc_device sim;
  assert_ok(torc_device_parse("sim:0", &sim));
  torc_module *net = net_new();
  torc_tensor *w = torc_module_parameter(torc_module_child(net, "head"), "w");
  /* give it a gradient: that moves too */
  float xs[3] = {1, 2, 3};
  torc_tensor *x = torc_from_host(xs, TORC_SHAPE(3), TORC_F32, TORC_CPU);
  torc_tensor *y = torc_module_forward(net, x);
  torc_tensor *loss = torc_sum(y, NULL, 0, 0);
  assert_ok(torc_backward(loss, NULL, 0));
  torc_release(loss);
  torc_release(y);

  assert_ok(torc_module_to(net, sim));
  assert_ptr_equal(torc_module_parameter(torc_module_child(net, "head"), "w"),
                   w); /* identity kept: an optimizer keeps working */
  assert_true(torc_device_eq(torc_device_of(w), sim));
  assert_true(torc_device_eq(torc_device_of(torc_grad_of(w)), sim));
  assert_true(torc_requires_grad(w));
  assert_true(torc_device_eq(torc_module_device(net), sim));
  assert_ok(torc_module_check_device(net, sim));
  double half[3] = {0.5, 0.5, 0.5};
  test_assert_values(w, half, 3, 0);

  /* a cpu input to a sim model: one message with both fixes */
  assert_null(torc_module_forward(net, x));
  assert_error(TORC_ERR_DEVICE, "the input is on cpu but the module's "
                                "parameters are on sim:0");
  assert_contains(torc_last_error(), "torc_to(x, sim:0)");
  assert_contains(torc_last_error(), "torc_module_to(model, cpu)");
  torc_tensor *xs_ = torc_to(x, sim);
  torc_tensor *ys = torc_module_forward(net, xs_);
  double want[3] = {3, 6, 9};
  test_assert_values(ys, want, 3, 0);
  torc_release(ys);
  torc_release(xs_);

  /* the consistency check lists every stray tensor */
  assert_int_equal(torc_module_check_device(net, TORC_CPU), TORC_ERR_DEVICE);
  assert_contains(torc_last_error(), "9 tensors of the model are not on cpu");
  assert_contains(torc_last_error(), "features.0.w on sim:0");
  assert_contains(torc_last_error(), "head.tmp on sim:0");
  torc_module *head = torc_module_child(net, "head");
  torc_tensor *stray = torc_zeros(TORC_SHAPE(3), TORC_F32, TORC_CPU);
  assert_ok(torc_module_set_buffer(head, "count", stray));
  torc_release(stray);
  assert_int_equal(torc_module_check_device(net, sim), TORC_ERR_DEVICE);
  assert_contains(torc_last_error(), "1 tensor of the model is not on sim:0: "
                                     "head.count on cpu");

  assert_ok(torc_module_to(net, TORC_CPU));
  assert_ok(torc_module_check_device(net, TORC_CPU));
  assert_true(torc_device_eq(torc_device_of(w), TORC_CPU));
  test_assert_values(w, half, 3, 0);
  torc_release(x);
  torc_module_free(net);
}

static void test_to_dtype(void **state) {
  (void)state;
  torc_module *net = net_new();
  torc_tensor *w = torc_module_parameter(torc_module_child(net, "head"), "w");
  assert_ok(torc_module_to_dtype(net, TORC_F64));
  assert_int_equal(torc_dtype_of(w), TORC_F64);
  assert_int_equal(torc_dtype_of(torc_module_buffer(
                       torc_module_child(net, "head"), "tmp")),
                   TORC_I64); /* integer buffers keep their dtype */
  assert_int_equal(torc_module_dtype(net), TORC_F64);
  torc_tensor *x = torc_ones(TORC_SHAPE(3), TORC_F64, TORC_CPU);
  torc_tensor *y = torc_module_forward(net, x);
  assert_int_equal(torc_dtype_of(y), TORC_F64);
  torc_release(y);
  torc_release(x);
  assert_int_equal(torc_module_to_dtype(net, TORC_I32), TORC_ERR_DTYPE);
  assert_contains(torc_last_error(), "not a floating dtype");
  torc_module_free(net);
}

static void test_freeze(void **state) {
  (void)state;
  torc_module *net = net_new();
  assert_int_equal(torc_module_freeze(net, "features.*", 1), 2);
  assert_false(torc_requires_grad(
      torc_module_parameter(torc_module_find(net, "features.1"), "w")));
  assert_true(torc_requires_grad(
      torc_module_parameter(torc_module_child(net, "head"), "w")));
  assert_int_equal(torc_module_parameter_count(net, 1), 3);
  assert_int_equal(torc_module_freeze(net, "featurs.*", 1), -1);
  assert_error(TORC_ERR_INVALID, "pattern 'featurs.*' matches no parameter");
  assert_contains(torc_last_error(), "features.0.w, features.1.w, head.w");
  assert_int_equal(torc_module_freeze(net, "*.w", 0), 3);
  assert_int_equal(torc_module_parameter_count(net, 1), 9);
  torc_module_free(net);
}

static void test_repr_and_summary(void **state) {
  (void)state;
  torc_module *net = net_new();
  char *r = torc_module_repr(net);
  assert_torc(r);
  assert_string_equal(r, "Net(\n"
                         "  (features): sequential(\n"
                         "    (0): scale(n=3)\n"
                         "    (1): scale(n=3)\n"
                         "  )\n"
                         "  (head): scale(n=3)\n"
                         ")");
  free(r);
  torc_tensor *x = torc_ones(TORC_SHAPE(5, 3), TORC_F32, TORC_CPU);
  char *s = torc_module_summary(net, x);
  assert_torc(s);
  assert_contains(s, "Layer (type)");
  assert_contains(s, "    features.1 (scale)");
  assert_contains(s, "[5, 3]");
  assert_contains(s, "Total params: 9\n");
  assert_contains(s, "Trainable params: 9\n");
  assert_true(torc_module_is_training(net)); /* mode restored */
  free(s);
  assert_int_equal(torc_module_freeze(net, "head.w", 1), 1);
  torc_tensor *bad = torc_ones(TORC_SHAPE(5, 4), TORC_F32, TORC_CPU);
  assert_null(torc_module_summary(net, bad));
  assert_contains(torc_last_error(), "(in scale 'features.0')");
  s = torc_module_summary(net, x);
  assert_contains(s, "Non-trainable params: 3\n");
  free(s);
  torc_release(bad);
  torc_release(x);
  torc_module_free(net);
}

static void test_skip_nodes(void **state) {
  (void)state;
  /* y1 = 2x, y2 = y1 * 3, add(from -2): y2 + y1 = 8x; concat(-4) with x */
  torc_module *seq = torc_sequential_new();
  assert_ok(torc_sequential_append(seq, scale_new(2, 2.0)));
  assert_ok(torc_sequential_append(seq, scale_new(2, 3.0)));
  assert_ok(torc_sequential_append(seq, torc_add_node_new(-2)));
  assert_ok(torc_sequential_append(seq, torc_concat_node_new(-4, 0)));
  float xs[2] = {1, -1};
  torc_tensor *x = torc_from_host(xs, TORC_SHAPE(2), TORC_F32, TORC_CPU);
  torc_tensor *y = torc_module_forward(seq, x);
  double want[4] = {8, -8, 1, -1};
  test_assert_values(y, want, 4, 0);
  torc_release(y);
  assert_int_equal(torc_module_from(torc_module_child_at(seq, 2)), -2);

  /* from reaching before the input, or not negative */
  assert_int_equal(torc_sequential_append(seq, torc_add_node_new(-6)),
                   TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "add node at index 4 has from = -6");
  assert_int_equal(torc_sequential_append(seq, torc_add_node_new(1)),
                   TORC_ERR_INVALID);
  /* shapes that differ: a message naming both */
  torc_module *s2 = torc_sequential_new();
  assert_ok(torc_sequential_append(s2, torc_concat_node_new(-1, 0)));
  assert_ok(torc_sequential_append(s2, torc_add_node_new(-2)));
  assert_null(torc_module_forward(s2, x));
  assert_error(TORC_ERR_SHAPE, "the input [4] and the sequential's input [2] "
                               "differ in shape");
  assert_contains(torc_last_error(), "(in add '1')");
  torc_module *s3 = torc_sequential_new();
  assert_ok(torc_sequential_append(s3, scale_new(2, 1.0)));
  assert_ok(torc_sequential_append(s3, torc_concat_node_new(-1, 0)));
  assert_ok(torc_sequential_append(s3, torc_add_node_new(-2)));
  assert_null(torc_module_forward(s3, x));
  assert_error(TORC_ERR_SHAPE, "the input [4] and the output of the layer 2 "
                               "back [2] differ in shape");
  torc_module_free(s3);
  /* outside a sequential: two inputs */
  torc_module *add = torc_add_node_new(-1);
  assert_null(torc_module_forward(add, x));
  assert_error(TORC_ERR_INVALID, "takes two inputs");
  const torc_tensor *pair[2] = {x, x};
  y = torc_module_forward_n(add, pair, 2);
  double w2[2] = {2, -2};
  test_assert_values(y, w2, 2, 0);
  torc_release(y);
  torc_module_free(add);
  torc_module_free(s2);
  torc_release(x);
  torc_module_free(seq);
}

/* A type registered by the program, built from key/values. */
static torc_module *scale_create(const char *const *k, const char *const *v,
                                 int n, void *user) {
  (void)user;
  long long size = 0;
  double w = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(k[i], "n") == 0)
      size = atoll(v[i]);
    else if (strcmp(k[i], "w") == 0) {
      /* "w=1,2" arrives joined: take the sum, to see both parts */
      char *end;
      w = strtod(v[i], &end);
      while (*end == ',')
        w += strtod(end + 1, &end);
    }
  }
  return scale_new(size, w);
}

static const torc_module_key scale_keys[] = {
    {"n", "features", NULL}, {"w", "the weight", "1"}, {NULL, NULL, NULL}};
static const torc_module_type scale_type = {
    sizeof(torc_module_type), "test_scale", "a test layer", scale_keys,
    scale_create, NULL};

static void test_registry(void **state) {
  (void)state;
  assert_ok(torc_module_type_register(&scale_type));
  assert_int_equal(torc_module_type_register(&scale_type), TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "module type 'test_scale' is already "
                                     "registered");
  assert_ptr_equal(torc_module_type_find("test_scale"), &scale_type);
  assert_ptr_equal(torc_module_type_find("sequential")->create != NULL, 1);
  int n = torc_module_type_count();
  assert_true(n >= 6);
  for (int i = 1; i < n; i++) /* sorted by name */
    assert_true(strcmp(torc_module_type_at(i - 1)->name,
                       torc_module_type_at(i)->name) < 0);

  torc_module *m = torc_module_build("test_scale", "n=2, w=1,2");
  assert_torc(m);
  double three[2] = {3, 3};
  test_assert_values(torc_module_parameter(m, "w"), three, 2, 0);
  torc_module_free(m);
  m = torc_module_build("test_scale", "n=2"); /* default w */
  double one[2] = {1, 1};
  test_assert_values(torc_module_parameter(m, "w"), one, 2, 0);
  torc_module_free(m);

  assert_null(torc_module_build("test_scal", "n=1"));
  assert_error(TORC_ERR_INVALID, "unknown module type 'test_scal' (did you "
                                 "mean 'test_scale'?)");
  assert_null(torc_module_build("test_scale", "n=1, ww=2"));
  assert_error(TORC_ERR_INVALID, "test_scale: unknown key 'ww' (did you mean "
                                 "'w'?); its keys are: n, w");
  assert_null(torc_module_build("test_scale", "n=1 n=2"));
  assert_error(TORC_ERR_INVALID, "key 'n' is given twice");
  assert_null(torc_module_build("test_scale", "w=2"));
  assert_error(TORC_ERR_INVALID, "key 'n' is required (features)");
  assert_null(torc_module_build("test_scale", "3"));
  assert_error(TORC_ERR_INVALID, "'3' in \"3\" is not key=value");
  assert_null(torc_module_build("add", "from=2"));
  assert_error(TORC_ERR_INVALID, "must be negative");
  assert_null(torc_module_build("add", NULL));
  assert_error(TORC_ERR_INVALID, "key 'from' is required");
  m = torc_module_build("concat", "from=-3");
  assert_torc(m);
  assert_int_equal(torc_module_from(m), -3);
  torc_module_free(m);
  m = torc_module_build("sequential", "");
  assert_torc(m);
  assert_string_equal(torc_module_type_name(m), "sequential");
  torc_module_free(m);
}

/* Anomaly mode names the module whose forward made the bad op. */
static torc_tensor *logm_forward(torc_module *m, const torc_tensor *const *in,
                                 int n_in) {
  (void)n_in;
  return torc_log(torc_mul(in[0], torc_module_parameter(m, "w")));
}

static const torc_module_vtable logm_vt = {sizeof(torc_module_vtable),
                                           logm_forward, NULL, NULL, NULL};

static void test_anomaly_names_module(void **state) {
  (void)state;
  torc_module *root = torc_module_dict_new();
  torc_module *body = torc_sequential_new();
  torc_module *lg = torc_module_new("logm", &logm_vt, NULL);
  torc_tensor *w = torc_ones(TORC_SHAPE(2), TORC_F32, TORC_CPU);
  assert_ok(torc_module_register_parameter(lg, "w", w));
  torc_release(w);
  assert_ok(torc_sequential_append(body, lg));
  assert_ok(torc_module_add_child(root, "features", body));
  float xs[2] = {0, 1};
  torc_tensor *x = torc_from_host(xs, TORC_SHAPE(2), TORC_F32, TORC_CPU);
  int scope = torc_scope_begin();
  torc_set_anomaly_mode(1);
  torc_tensor *y = torc_module_forward(body, x);
  assert_torc(y);
  assert_int_equal(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0),
                   TORC_ERR_AUTOGRAD);
  assert_contains(torc_last_error(), "the forward op 'log', in module logm "
                                     "'features.0' produced");
  torc_set_anomaly_mode(0);
  torc_scope_end(scope);
  torc_release(x);
  torc_module_free(root);
}

/* ---- models from INI text ---- */

static const char *const cnn_ini =
    "[model]\n"                            /* 1 */
    "input = 1,8,8\n"                      /* 2 */
    "[layer]\n"                            /* 3 */
    "type = conv2d\n"                      /* 4 */
    "out_channels = 4\n"                   /* 5 */
    "kernel = 3\n"                         /* 6 */
    "padding = 1\n"                        /* 7 */
    "[layer]\n"                            /* 8 */
    "type = relu\n"                        /* 9 */
    "[layer]\n"                            /* 10 */
    "type = add\n"                         /* 11 */
    "from = -2\n"                          /* 12 */
    "[layer]\n"                            /* 13 */
    "type = flatten\n"                     /* 14 */
    "[layer]\n"                            /* 15 */
    "type = linear\n"                      /* 16 */
    "out_features = 3\n";                  /* 17 */

static torc_module *model_from(const char *text) {
  torc_config *cfg = torc_config_parse(text, "net.ini");
  if (cfg == NULL)
    return NULL;
  torc_module *m = torc_module_from_config(cfg, NULL, NULL);
  torc_config_free(cfg);
  return m;
}

/* Replaces the first occurrence of `from` in cnn_ini by `to`. */
static char *edit(const char *from, const char *to) {
  const char *p = strstr(cnn_ini, from);
  assert_non_null(p);
  size_t n = strlen(cnn_ini) - strlen(from) + strlen(to) + 1;
  char *s = malloc(n);
  snprintf(s, n, "%.*s%s%s", (int)(p - cnn_ini), cnn_ini, to,
           p + strlen(from));
  return s;
}

static void test_model_from_config(void **state) {
  (void)state;
  torc_config *cfg = torc_config_parse(cnn_ini, "net.ini");
  assert_torc(cfg);
  int64_t shape[TORC_MAX_DIMS];
  int nd = 0;
  torc_module *m = torc_module_from_config(cfg, shape, &nd);
  torc_config_free(cfg);
  assert_torc(m);
  assert_int_equal(nd, 3);
  assert_int_equal(shape[2], 8);
  /* the lazy linear saw 4*8*8 features: nobody computed 256 */
  torc_tensor *w = torc_module_parameter(torc_module_child(m, "4"), "weight");
  assert_torc(w);
  assert_int_equal(torc_size(w, 1), 256);
  assert_true(torc_module_is_training(m));
  torc_named_tensor *p;
  int n = torc_module_named_parameters(m, &p);
  assert_int_equal(n, 4);
  assert_string_equal(p[0].name, "0.weight");
  assert_string_equal(p[3].name, "4.bias");
  torc_named_tensors_free(p, n);
  torc_module_free(m);
}

static void test_model_config_errors(void **state) {
  (void)state;
  struct {
    const char *from, *to, *want;
  } cases[] = {
      {"type = conv2d", "type = convv2d",
       "net.ini:4: key 'type' in [layer]: layer 0 (convv2d): unknown module "
       "type 'convv2d' (did you mean 'conv2d'?)"},
      {"kernel = 3", "kernal = 3",
       "net.ini:6: key 'kernal' in [layer]: layer 0 (conv2d): conv2d: "
       "unknown key 'kernal' (did you mean 'kernel'?)"},
      {"out_features = 3", "out_features = three",
       "net.ini:17: key 'out_features' in [layer]: layer 4 (linear)"},
      {"from = -2", "from = -9",
       "net.ini:10: [layer]: layer 2 (add): torc_sequential_append: add "
       "node at index 2 has from = -9"},
      {"type = linear", "type = linear\nin_features = 100",
       "net.ini:15: [layer]: layer 4 (linear) does not fit a sample of "
       "shape [1,8,8]: linear: input has 256 features"},
      {"input = 1,8,8", "input = 1,x,8",
       "net.ini:2: key 'input' in [model]: '1,x,8' is not a shape"},
      {"from = -2", "from = -3",
       "net.ini:10: [layer]: layer 2 (add) does not fit a sample of shape "
       "[1,8,8]: add: the input [1, 4, 8, 8] and the sequential's input "
       "[1, 1, 8, 8] differ in shape"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = edit(cases[i].from, cases[i].to);
    torc_clear_error();
    torc_module *m = model_from(text);
    free(text);
    if (m != NULL) {
      print_error("case %zu built a model\n", i);
      torc_module_free(m);
      fail();
    }
    assert_int_equal(torc_last_status(), TORC_ERR_CONFIG);
    assert_contains(torc_last_error(), cases[i].want);
  }
  assert_null(model_from("[layer]\ntype = relu\n"));
  assert_error(TORC_ERR_CONFIG, "no [model] section");
  assert_null(model_from("[model]\ninput = 3\n"));
  assert_error(TORC_ERR_CONFIG, "the model has no layers");
}

/* A sequential frees each output once its last reader has run: in no-grad
 * mode a deep stack holds two activations, not one per layer, while an
 * add node still reads the output it reaches back to. */
static size_t probed;
static torc_tensor *neg_forward(torc_module *m, const torc_tensor *const *in,
                                int n_in) {
  (void)m, (void)n_in;
  return torc_neg(in[0]);
}
static torc_tensor *probe_forward(torc_module *m, const torc_tensor *const *in,
                                  int n_in) {
  (void)m, (void)n_in;
  probed = torc_device_memory_allocated(TORC_CPU);
  return torc_neg(in[0]);
}
static const torc_module_vtable neg_vt = {sizeof(torc_module_vtable),
                                          neg_forward, NULL, NULL, NULL};
static const torc_module_vtable probe_vt = {sizeof(torc_module_vtable),
                                            probe_forward, NULL, NULL, NULL};

static void test_sequential_frees_early(void **state) {
  (void)state;
  torc_module *seq = torc_sequential_new();
  for (int i = 0; i < 10; i++) /* 5 is an add of outputs 4 and 0 */
    assert_ok(torc_sequential_append(
        seq, i == 5 ? torc_add_node_new(-5)
                    : torc_module_new("neg", &neg_vt, NULL)));
  assert_ok(torc_sequential_append(seq,
                                   torc_module_new("probe", &probe_vt, NULL)));
  enum { N = 1 << 18 }; /* 1 MiB of f32 per activation */
  torc_tensor *x = torc_full(TORC_SHAPE(N), 1.5, TORC_F32, TORC_CPU);
  size_t base = torc_device_memory_allocated(TORC_CPU), act = N * 4;
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc_tensor *y = torc_module_forward(seq, x);
  torc_set_grad_mode(gm);
  assert_non_null(y);
  /* x -> -x -> x -> -x -> x, + (-x) = -2x (the add reads output 0), four
   * negations to -2x, the probe's: 2x. */
  const float *v = torc_data(y);
  assert_float_equal(v[0], 3.0, 0);
  assert_float_equal(v[N - 1], 3.0, 0);
  /* Live at the probe: its input, output 9 (held since output 0 was read
   * at 5 and freed); 10 activations before outputs were freed early. */
  if (probed - base > 2 * act) {
    print_error("%zu bytes live at layer 10, more than 2 activations of "
                "%zu\n", probed - base, act);
    fail();
  }
  torc_release(y);
  torc_release(x);
  torc_module_free(seq);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_names_and_order, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_ownership_errors, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_forward_and_errors,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_train_eval, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_to_device, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_to_dtype, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_freeze, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_repr_and_summary, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_skip_nodes, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_registry, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_anomaly_names_module,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_model_from_config,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_model_config_errors,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_sequential_frees_early,
                                      test_live_setup, test_live_teardown),
  };
  return cmocka_run_group_tests(tests, test_setup_ref_sim, test_teardown_all);
}
