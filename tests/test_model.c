/* tests/test_model.c — state dicts move between PyTorch and torc: the CNN of
 * tests/fixtures/gen_model.py, built in torc from the built-in layers (and
 * again from the key/value registry the INI trainer uses), loads PyTorch's
 * state dict strictly and gives PyTorch's eval-mode logits on cpu and sim;
 * a torc-trained copy is exported for gen_model.py --check (the reverse
 * direction, run by tests/test_model_torch.sh where PyTorch exists).
 *
 * With TORC_MODEL_EXPORT_DIR set only the export runs, writing there. */
#include <math.h>

#include "testutil.h"

/* |torc - torch| <= 1e-5 on every logit (the required figure). The logits
 * lie in (-0.3, 0.3) and come from 3x3 convolutions (9- and 72-term sums),
 * batch norms and two linears (144 and 32 terms), each a few ulp (2^-23)
 * from PyTorch's in another summation order, so a correct model lands near
 * 1e-7. A wrong layout, batch statistics used in eval, dropout left on or
 * a different eps move them by 1e-2 or more (seen in PyTorch: 0.36, 0.027). */
static const double tol = 1e-5;

/* The file names of the reverse direction, in the export folder. */
#define EXPORT_STATE "test_model.torc.safetensors"
#define EXPORT_IO "test_model.torc_io.safetensors"

/* ---- the network: Net of gen_model.py ---- */

/* forward = classifier(features(x)) */
static torc_tensor *net_forward(torc_module *m, const torc_tensor *const *in,
                                int n_in) {
  (void)n_in;
  int s = torc_scope_begin();
  torc_tensor *h =
      torc_module_forward(torc_module_child(m, "features"), in[0]);
  torc_tensor *y = torc_module_forward(torc_module_child(m, "classifier"), h);
  if (y)
    torc_scope_keep(y);
  torc_scope_end(s);
  return y;
}

static const torc_module_vtable net_vtable = {sizeof(torc_module_vtable),
                                              net_forward, NULL, NULL, NULL};

/* A sequential of n layers (taking ownership of all of them, also on
 * failure); NULL after the first error. */
static torc_module *sequential_of(torc_module *const *layers, int n) {
  torc_module *seq = torc_sequential_new();
  int ok = seq != NULL;
  for (int i = 0; i < n; i++) {
    if (ok)
      ok = torc_sequential_append(seq, layers[i]) == TORC_OK;
    else
      torc_module_free(layers[i]);
  }
  if (!ok) {
    torc_module_free(seq);
    return NULL;
  }
  return seq;
}

/* Net with the two given children (owned from here on, also on failure). */
static torc_module *net_of(torc_module *features, torc_module *classifier) {
  torc_module *net = torc_module_new("Net", &net_vtable, NULL);
  if (net == NULL || features == NULL || classifier == NULL) {
    torc_module_free(net);
    torc_module_free(features);
    torc_module_free(classifier);
    return NULL;
  }
  if (torc_module_add_child(net, "features", features) != TORC_OK) {
    torc_module_free(classifier);
    torc_module_free(net);
    return NULL;
  }
  if (torc_module_add_child(net, "classifier", classifier) != TORC_OK) {
    torc_module_free(net);
    return NULL;
  }
  return net;
}

/* What to change in the architecture, for the tests of a strict load. */
enum variant { NET_SAME, NET_NO_DROPOUT, NET_11_CLASSES };

/* Net from the constructors, as PyTorch writes it, except that the first
 * linear's in_features is left to the first forward (0: lazy): nobody
 * computes 16 * 3 * 3 by hand. */
static torc_module *net_new(enum variant v) {
  torc_conv2d_params pad1 = {.padding = {1, 1}};
  torc_pool2d_params pool2 = {.kernel = {2, 2}};
  torc_module *features[] = {
      torc_conv2d_new(1, 8, 3, 3, &pad1, 1),
      torc_batchnorm2d_new(8, 1e-5, 0.1),
      torc_module_build("relu", NULL),
      torc_maxpool2d_new(&pool2),
      torc_conv2d_new(8, 16, 3, 3, &pad1, 1),
      torc_batchnorm2d_new(16, 1e-5, 0.1),
      torc_module_build("relu", NULL),
      torc_maxpool2d_new(&pool2),
  };
  torc_module *classifier[5];
  int n = 0;
  classifier[n++] = torc_flatten_new(1, -1);
  classifier[n++] = torc_linear_new(0, 32, 1);
  classifier[n++] = torc_module_build("relu", NULL);
  if (v != NET_NO_DROPOUT)
    classifier[n++] = torc_dropout_new(0.25);
  classifier[n++] = torc_linear_new(32, v == NET_11_CLASSES ? 11 : 10, 1);
  return net_of(sequential_of(features, 8), sequential_of(classifier, n));
}

/* The same Net from the registry, with the keys an INI [layer] section
 * gives: every input size (conv in_channels, batch-norm num_features,
 * linear in_features) is inferred at the first forward. */
static torc_module *net_from_registry(void) {
  torc_module *features[] = {
      torc_module_build("conv2d", "out_channels=8, kernel=3, padding=1"),
      torc_module_build("batchnorm2d", NULL),
      torc_module_build("relu", NULL),
      torc_module_build("maxpool2d", "kernel=2"),
      torc_module_build("conv2d", "out_channels=16, kernel=3, padding=1"),
      torc_module_build("batchnorm2d", NULL),
      torc_module_build("relu", NULL),
      torc_module_build("maxpool2d", "kernel=2"),
  };
  torc_module *classifier[] = {
      torc_module_build("flatten", NULL),
      torc_module_build("linear", "out_features=32"),
      torc_module_build("relu", NULL),
      torc_module_build("dropout", "p=0.25"),
      torc_module_build("linear", "out_features=10"),
  };
  return net_of(sequential_of(features, 8), sequential_of(classifier, 5));
}

/* ---- helpers ---- */

static void fixture_path(char *buf, size_t size, const char *name) {
  const char *src = getenv("TORC_TOP_SRCDIR");
  snprintf(buf, size, "%s/tests/fixtures/%s", src ? src : ".", name);
}

/* Tensor `name` of fixture file `file` on dev (owned by the open scope). */
static torc_tensor *fixture_tensor(const char *file, const char *name,
                                   torc_device dev) {
  char path[512];
  fixture_path(path, sizeof path, file);
  torc_safetensors *st = torc_safetensors_open(path);
  assert_torc(st);
  torc_tensor *t = torc_safetensors_get(st, name, dev);
  torc_safetensors_close(st);
  assert_torc(t);
  return t;
}

/* Runs lazy layers once (torc_module_summary: eval mode, no autograd, no
 * running statistic changes) so every parameter exists. */
static void materialise(torc_module *net, const torc_tensor *example) {
  char *s = torc_module_summary(net, example);
  assert_torc(s);
  free(s);
}

/* Eval-mode output of net on x without autograd (owned by the open
 * scope). */
static torc_tensor *eval_logits(torc_module *net, const torc_tensor *x) {
  torc_module_train(net, 0);
  torc_grad_mode m = torc_set_grad_mode(TORC_NO_GRAD);
  torc_tensor *y = torc_module_forward(net, x);
  torc_set_grad_mode(m);
  assert_torc(y);
  return y;
}

/* max |got - want| over elements; the shapes must be equal. */
static double max_abs_diff(const torc_tensor *got, const torc_tensor *want) {
  assert_int_equal(torc_ndim(got), torc_ndim(want));
  for (int d = 0; d < torc_ndim(want); d++)
    assert_int_equal(torc_shape(got)[d], torc_shape(want)[d]);
  double *g = test_values(got), *w = test_values(want);
  assert_non_null(g);
  assert_non_null(w);
  double dev = 0;
  for (int64_t i = 0; i < torc_numel(want); i++) {
    double d = fabs(g[i] - w[i]);
    dev = d > dev || d != d ? d : dev; /* a NaN is the worst */
  }
  free(g);
  free(w);
  return dev;
}

/* Loads the PyTorch state dict strictly into net, checking the report. */
static void load_pytorch_state(torc_module *net) {
  char path[512];
  fixture_path(path, sizeof path, "model.safetensors");
  torc_load_report rep = {0};
  assert_ok(torc_module_load(net, path, NULL, &rep));
  assert_int_equal(rep.n_loaded, 18);
  assert_int_equal(rep.n_missing, 0);
  assert_int_equal(rep.n_unexpected, 0);
  assert_int_equal(rep.n_mismatched, 0);
  torc_load_report_clear(&rep);
}

/* Loads PyTorch's state into a Net on dev and compares the eval logits
 * with PyTorch's. Returns the largest deviation; *logits_out (if not NULL)
 * receives the logits (owned by the open scope). */
static double pytorch_parity(torc_module *net, torc_device dev,
                             torc_tensor **logits_out) {
  torc_tensor *x = fixture_tensor("model_io.safetensors", "input", dev);
  torc_tensor *want =
      fixture_tensor("model_io.safetensors", "logits", TORC_CPU);
  assert_ok(torc_module_to(net, dev));
  materialise(net, x);
  /* Before the load the logits are another model's: the check can fail. */
  double before = max_abs_diff(eval_logits(net, x), want);
  assert_true(before > 100 * tol);
  load_pytorch_state(net);
  assert_ok(torc_module_check_device(net, dev));
  /* The loaded statistics are PyTorch's (5 training batches). */
  int64_t nbt = 0;
  torc_tensor *nbt_t = torc_module_buffer(
      torc_module_find(net, "features.1"), "num_batches_tracked");
  assert_torc(nbt_t);
  assert_int_equal(torc_dtype_of(nbt_t), TORC_I64);
  assert_int_equal(torc_ndim(nbt_t), 0);
  assert_ok(torc_to_host(nbt_t, &nbt, sizeof nbt));
  assert_int_equal(nbt, 5);
  torc_tensor *got = eval_logits(net, x);
  assert_int_equal(torc_device_of(got).type, dev.type);
  assert_int_equal(torc_device_of(got).index, dev.index);
  double d = max_abs_diff(got, want);
  char dn[32];
  torc_device_str(dev, dn, sizeof dn);
  printf("# %s: eval logits of PyTorch's state dict: largest deviation "
         "%.3g (tolerance %g; %.3g before the load)\n",
         dn, d, tol, before);
  if (logits_out)
    *logits_out = got;
  return d;
}

/* ---- PyTorch -> torc ---- */

static void test_pytorch_state_dict_cpu(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_module *net = net_new(NET_SAME);
  assert_torc(net);
  /* The lazy linear has no weight until the first forward. */
  assert_null(torc_module_parameter(torc_module_find(net, "classifier.1"),
                                    "weight"));
  double d = pytorch_parity(net, TORC_CPU, NULL);
  assert_true(d <= tol);
  /* ... and got [32, 144] from it. */
  torc_tensor *w = torc_module_parameter(
      torc_module_find(net, "classifier.1"), "weight");
  assert_torc(w);
  assert_int_equal(torc_shape(w)[0], 32);
  assert_int_equal(torc_shape(w)[1], 144);
  torc_module_free(net);
  torc_scope_end(s);
}

static void test_pytorch_state_dict_sim(void **state) {
  (void)state;
  torc_device sim;
  if (torc_device_parse("sim", &sim) != TORC_OK) {
    printf("# sim not available: %s\n", torc_last_error());
    skip();
  }
  int s = torc_scope_begin();
  torc_module *net = net_new(NET_SAME);
  assert_torc(net);
  torc_tensor *on_sim = NULL;
  assert_true(pytorch_parity(net, sim, &on_sim) <= tol);
  /* sim delegates to ref: the same bits as the cpu. */
  torc_module *net_cpu = net_new(NET_SAME);
  assert_torc(net_cpu);
  torc_tensor *on_cpu = NULL;
  assert_true(pytorch_parity(net_cpu, TORC_CPU, &on_cpu) <= tol);
  assert_true(max_abs_diff(on_sim, on_cpu) == 0);
  torc_module_free(net);
  torc_module_free(net_cpu);
  torc_scope_end(s);
}

/* 1 if `name` is one of the n names. */
static int has_name(const char *const *names, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0)
      return 1;
  return 0;
}

/* The registry (INI) path gives PyTorch's state-dict names and shapes,
 * loads the file strictly and gives PyTorch's logits. */
static void test_registry_net(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_module *net = net_from_registry();
  assert_torc(net);
  materialise(net,
              fixture_tensor("model_io.safetensors", "input", TORC_CPU));

  char path[512];
  fixture_path(path, sizeof path, "model.safetensors");
  torc_safetensors *st = torc_safetensors_open(path);
  assert_torc(st);
  int n_file = torc_safetensors_count(st);
  assert_int_equal(n_file, 18);
  const char *file_names[32];
  for (int i = 0; i < n_file; i++)
    file_names[i] = torc_safetensors_name(st, i);

  torc_named_tensor *params = NULL, *bufs = NULL;
  int n_p = torc_module_named_parameters(net, &params);
  int n_b = torc_module_named_buffers(net, 1, &bufs);
  assert_int_equal(n_p, 12); /* weight and bias of 2 conv, 2 bn, 2 linear */
  assert_int_equal(n_b, 6);  /* 2 x running_mean, running_var, n_batches */
  /* PyTorch's order: features.0.weight first, classifier.4.bias last. */
  assert_string_equal(params[0].name, "features.0.weight");
  assert_string_equal(params[n_p - 1].name, "classifier.4.bias");
  assert_string_equal(bufs[2].name, "features.1.num_batches_tracked");
  for (int k = 0; k < 2; k++) {
    torc_named_tensor *list = k ? bufs : params;
    for (int i = 0; i < (k ? n_b : n_p); i++) {
      if (!has_name(file_names, n_file, list[i].name)) {
        print_error("%s is not a name in %s\n", list[i].name, path);
        fail();
      }
      torc_dtype dt;
      int nd;
      int64_t shape[TORC_MAX_DIMS];
      assert_ok(torc_safetensors_info(st, list[i].name, &dt, &nd, shape));
      assert_int_equal(torc_dtype_of(list[i].tensor), dt);
      assert_int_equal(torc_ndim(list[i].tensor), nd);
      for (int d = 0; d < nd; d++)
        assert_int_equal(torc_shape(list[i].tensor)[d], shape[d]);
    }
  }
  torc_named_tensors_free(params, n_p);
  torc_named_tensors_free(bufs, n_b);
  torc_safetensors_close(st);

  /* Names and shapes match, so the strict load and the logits follow. */
  load_pytorch_state(net);
  torc_tensor *x = fixture_tensor("model_io.safetensors", "input", TORC_CPU);
  torc_tensor *want =
      fixture_tensor("model_io.safetensors", "logits", TORC_CPU);
  double d = max_abs_diff(eval_logits(net, x), want);
  printf("# registry-built net: largest deviation %.3g\n", d);
  assert_true(d <= tol);
  torc_module_free(net);
  torc_scope_end(s);
}

/* ---- what a strict load refuses ---- */

static void test_load_before_lazy_forward(void **state) {
  (void)state;
  torc_module *net = net_new(NET_SAME);
  assert_torc(net);
  char path[512];
  fixture_path(path, sizeof path, "model.safetensors");
  assert_int_equal(torc_module_load(net, path, NULL, NULL), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "classifier.1");
  assert_contains(torc_last_error(), "forward");
  torc_module_free(net);
}

/* A net without the dropout numbers its last linear 3, not 4: two keys
 * missing, two unexpected, and nothing in the module changes. */
static void test_load_other_architecture(void **state) {
  (void)state;
  int s = torc_scope_begin();
  char path[512];
  fixture_path(path, sizeof path, "model.safetensors");
  torc_tensor *x = fixture_tensor("model_io.safetensors", "input", TORC_CPU);

  torc_module *net = net_new(NET_NO_DROPOUT);
  assert_torc(net);
  materialise(net, x);
  torc_tensor *before = eval_logits(net, x);
  torc_load_report rep = {0};
  assert_int_equal(torc_module_load(net, path, NULL, &rep), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "classifier.3.weight");
  assert_contains(torc_last_error(), "classifier.4.weight");
  assert_int_equal(rep.n_missing, 2);
  assert_int_equal(rep.n_unexpected, 2);
  torc_load_report_clear(&rep);
  assert_true(max_abs_diff(eval_logits(net, x), before) == 0);
  torc_module_free(net);

  /* 11 classes: the shapes of classifier.4 differ. */
  net = net_new(NET_11_CLASSES);
  assert_torc(net);
  materialise(net, x);
  assert_int_equal(torc_module_load(net, path, NULL, &rep), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "classifier.4.weight");
  assert_contains(torc_last_error(), "[10, 32]");
  assert_contains(torc_last_error(), "[11, 32]");
  assert_int_equal(rep.n_mismatched, 2);
  assert_int_equal(rep.n_missing, 0);
  assert_int_equal(rep.n_unexpected, 0);
  torc_load_report_clear(&rep);
  torc_module_free(net);
  torc_scope_end(s);
}

/* ---- torc -> PyTorch ---- */

/* One SGD step of cross-entropy on a random batch, in training mode
 * (dropout on, batch statistics, running statistics updated). */
static void train_step(torc_module *net, double lr) {
  int s = torc_scope_begin();
  int64_t xs[] = {16, 1, 12, 12}, ys[] = {16, 1};
  torc_tensor *x = torc_randn(xs, 4, TORC_F32, TORC_CPU, NULL);
  torc_tensor *y = torc_randint(0, 10, ys, 2, TORC_I64, TORC_CPU, NULL);
  torc_module_train(net, 1);
  torc_tensor *lp = torc_log_softmax(torc_module_forward(net, x), 1);
  torc_tensor *loss = torc_neg(torc_mean(torc_gather(lp, 1, y), NULL, 0, 0));
  assert_torc(loss);
  assert_ok(torc_backward(loss, NULL, 0));
  torc_named_tensor *params = NULL;
  int n = torc_module_named_parameters(net, &params);
  assert_true(n == 12);
  torc_grad_mode m = torc_set_grad_mode(TORC_NO_GRAD);
  for (int i = 0; i < n; i++) {
    torc_tensor *g = torc_grad_of(params[i].tensor);
    assert_torc(g);
    assert_ok(torc_sub_(params[i].tensor, torc_mul_scalar(g, lr)));
    assert_ok(torc_zero_grad(params[i].tensor, 1));
  }
  torc_set_grad_mode(m);
  torc_named_tensors_free(params, n);
  torc_scope_end(s);
}

/* Compares the names, dtypes and shapes of two safetensors files. */
static void assert_same_layout(const char *a_path, const char *b_path) {
  torc_safetensors *a = torc_safetensors_open(a_path);
  torc_safetensors *b = torc_safetensors_open(b_path);
  assert_torc(a);
  assert_torc(b);
  assert_int_equal(torc_safetensors_count(a), torc_safetensors_count(b));
  for (int i = 0; i < torc_safetensors_count(a); i++) {
    const char *name = torc_safetensors_name(a, i);
    assert_string_equal(name, torc_safetensors_name(b, i)); /* sorted */
    torc_dtype da, db;
    int na, nb;
    int64_t sa[TORC_MAX_DIMS], sb[TORC_MAX_DIMS];
    assert_ok(torc_safetensors_info(a, name, &da, &na, sa));
    assert_ok(torc_safetensors_info(b, name, &db, &nb, sb));
    assert_int_equal(da, db);
    assert_int_equal(na, nb);
    assert_memory_equal(sa, sb, sizeof(int64_t) * (size_t)na);
  }
  torc_safetensors_close(a);
  torc_safetensors_close(b);
}

/* Trains Net a few steps in torc, saves its state dict and (input, eval
 * logits) for gen_model.py --check; checks here that the file has exactly
 * the layout of PyTorch's and gives the same logits when loaded back. */
static void test_export_for_pytorch(void **state) {
  (void)state;
  const char *dir = getenv("TORC_MODEL_EXPORT_DIR");
  const char *build = getenv("TORC_TOP_BUILDDIR");
  const char *src = getenv("TORC_TOP_SRCDIR");
  char folder[512], state_path[600], io_path[600], fixture[512];
  if (dir && *dir)
    snprintf(folder, sizeof folder, "%s", dir);
  else
    snprintf(folder, sizeof folder, "%s%s", build ? build : ".",
             build ? "/tests" : "");
  snprintf(state_path, sizeof state_path, "%s/" EXPORT_STATE, folder);
  snprintf(io_path, sizeof io_path, "%s/" EXPORT_IO, folder);

  int s = torc_scope_begin();
  torc_manual_seed(20261130);
  torc_module *net = net_new(NET_SAME);
  assert_torc(net);
  for (int i = 0; i < 5; i++) /* the first forward creates the lazy weight */
    train_step(net, 0.1);
  int64_t xs[] = {4, 1, 12, 12};
  torc_tensor *x = torc_randn(xs, 4, TORC_F32, TORC_CPU, NULL);
  torc_tensor *logits = eval_logits(net, x);
  assert_ok(torc_module_save(net, state_path));
  const char *names[] = {"input", "logits"};
  const torc_tensor *io[] = {x, logits};
  const char *mk[] = {"generator"}, *mv[] = {"tests/test_model.c"};
  assert_ok(torc_safetensors_save(io_path, names, io, 2, mk, mv, 1));

  /* PyTorch's key set, dtypes (num_batches_tracked i64, 0-dim) and shapes. */
  fixture_path(fixture, sizeof fixture, "model.safetensors");
  assert_same_layout(state_path, fixture);

  /* Loaded back into another torc Net (other weights), the same logits. */
  torc_manual_seed(1);
  torc_module *again = net_new(NET_SAME);
  assert_torc(again);
  materialise(again, x);
  assert_true(max_abs_diff(eval_logits(again, x), logits) > 100 * tol);
  torc_load_report rep = {0};
  assert_ok(torc_module_load(again, state_path, NULL, &rep));
  assert_int_equal(rep.n_loaded, 18);
  torc_load_report_clear(&rep);
  assert_true(max_abs_diff(eval_logits(again, x), logits) == 0);
  /* The training moved the batch-norm statistics. */
  torc_tensor *rm = torc_module_buffer(torc_module_find(again, "features.1"),
                                       "running_mean");
  assert_torc(rm);
  double *v = test_values(rm);
  assert_non_null(v);
  assert_true(v[0] != 0);
  free(v);
  torc_module_free(again);
  torc_module_free(net);
  torc_scope_end(s);
  printf("# wrote %s and %s; check them in PyTorch with\n"
         "#   /usr/bin/python3 %s/tests/fixtures/gen_model.py --check %s %s\n",
         state_path, io_path, src ? src : ".", state_path, io_path);
}

int main(void) {
  if (test_setup_ref_sim(NULL) != 0)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_pytorch_state_dict_cpu,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_pytorch_state_dict_sim,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_registry_net, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_load_before_lazy_forward,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_load_other_architecture,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_export_for_pytorch,
                                      test_live_setup, test_live_teardown),
  };
  const struct CMUnitTest export_only[] = {
      cmocka_unit_test_setup_teardown(test_export_for_pytorch,
                                      test_live_setup, test_live_teardown),
  };
  const char *dir = getenv("TORC_MODEL_EXPORT_DIR");
  if (dir && *dir)
    return cmocka_run_group_tests_name("model export", export_only, NULL,
                                       test_teardown_all);
  return cmocka_run_group_tests_name("model", tests, NULL, test_teardown_all);
}
