/* tests/test_rnn.c — the recurrent layers (lstm, gru, rnn; torc/module.h)
 * against PyTorch: state-dict names, order and shapes, a strict load of
 * PyTorch's state dict, outputs, final states and gradients (of input,
 * initial states and every parameter), variable lengths against
 * pack_padded_sequence (on the cpu and sim), repr, the INI types and last_step, lazy
 * input_size, dropout's modes and the user errors. Expected values are in
 * tests/fixtures/rnn.safetensors, written by tests/fixtures/gen_rnn.py. */
#include <math.h>

#include "testutil.h"

#define TOL 1e-5
#define FIXTURE "rnn.safetensors"

/* The cases of gen_rnn.py and the options that build the same module. */
typedef struct rnn_case {
  const char *name, *type;
  int layers, bias, batch_first, bidir;
  const char *nonlinearity;
} rnn_case;

static const rnn_case CASES[] = {
    {"lstm", "lstm", 2, 1, 1, 1, NULL},
    {"lstm_tm", "lstm", 2, 1, 0, 1, NULL},
    {"gru", "gru", 2, 1, 1, 1, NULL},
    {"gru_tm", "gru", 1, 0, 0, 0, NULL},
    {"rnn", "rnn", 2, 1, 0, 0, "relu"},
    {"rnn_tanh", "rnn", 1, 1, 1, 1, NULL},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

static torc_state_dict *fx;  /* the whole fixture */
static torc_safetensors *st; /* the same, for its metadata */
static double max_err[3];    /* outputs, states, gradients */

static torc_tensor *fx_get(const char *prefix, const char *name) {
  char key[256];
  snprintf(key, sizeof key, "%s.%s", prefix, name);
  torc_tensor *t = torc_state_dict_get(fx, key);
  if (t == NULL) {
    print_error("fixture has no %s\n", key);
    fail();
  }
  return t;
}

static const char *fx_meta(const char *prefix, const char *name) {
  char key[256];
  snprintf(key, sizeof key, "%s.%s", prefix, name);
  const char *v = torc_safetensors_metadata(st, key);
  if (v == NULL) {
    print_error("fixture has no metadata %s\n", key);
    fail();
  }
  return v;
}

/* max |a - b|, after checking the shapes agree. */
static double max_diff(const torc_tensor *a, const torc_tensor *b) {
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(torc_ndim(a), torc_ndim(b));
  for (int i = 0; i < torc_ndim(a); i++)
    assert_int_equal(torc_size(a, i), torc_size(b, i));
  double *x = test_values(a), *y = test_values(b), m = 0;
  assert_non_null(x);
  assert_non_null(y);
  for (int64_t i = 0; i < torc_numel(a); i++)
    if (fabs(x[i] - y[i]) > m)
      m = fabs(x[i] - y[i]);
  free(x);
  free(y);
  return m;
}

static void check_close(const char *what, const char *prefix,
                        const torc_tensor *got, const torc_tensor *want,
                        int kind) {
  double d = max_diff(got, want);
  if (d > max_err[kind])
    max_err[kind] = d;
  if (d > TOL) {
    print_error("%s %s: max |torc - torch| = %g\n", prefix, what, d);
    fail();
  }
}

static torc_module *build(const rnn_case *c, int64_t input_size) {
  torc_rnn_options o = torc_rnn_options_default(4);
  o.input_size = input_size;
  o.num_layers = c->layers;
  o.bias = c->bias;
  o.batch_first = c->batch_first;
  o.bidirectional = c->bidir;
  o.nonlinearity = c->nonlinearity;
  torc_module *m = c->type[0] == 'l'   ? torc_lstm_new(&o)
                   : c->type[0] == 'g' ? torc_gru_new(&o)
                                       : torc_rnn_new(&o);
  assert_torc(m);
  return m;
}

/* Builds case c and loads PyTorch's state dict into it, strictly. */
static torc_module *build_loaded(const rnn_case *c) {
  torc_module *m = build(c, 3);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "%s.sd.", c->name);
  torc_load_opts opts = {0};
  opts.prefix = prefix;
  assert_ok(torc_module_load_state_dict(m, fx, &opts, NULL));
  return m;
}

/* Names in PyTorch's order and shapes, for every case. */
static void test_names_shapes(void **state) {
  (void)state;
  for (int i = 0; i < N_CASES; i++) {
    torc_module *m = build(&CASES[i], 3);
    torc_named_tensor *list = NULL;
    int n = torc_module_named_parameters(m, &list);
    char names[1024] = "";
    for (int k = 0; k < n; k++) {
      size_t l = strlen(names);
      snprintf(names + l, sizeof names - l, "%s%s", k ? "," : "",
               list[k].name);
      char key[128];
      snprintf(key, sizeof key, "sd.%s", list[k].name);
      const torc_tensor *want = fx_get(CASES[i].name, key);
      assert_int_equal(torc_ndim(list[k].tensor), torc_ndim(want));
      for (int d = 0; d < torc_ndim(want); d++)
        assert_int_equal(torc_size(list[k].tensor, d), torc_size(want, d));
    }
    assert_string_equal(names, fx_meta(CASES[i].name, "names"));
    torc_named_tensors_free(list, n);
    torc_module_free(m);
  }
}

/* The default init: every parameter within 1/sqrt(hidden), not constant;
 * torc_module_init re-draws it, with PyTorch's init whatever the scheme. */
static void check_init(torc_module *m) {
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(m, &list);
  double bound = 1 / sqrt(4.0);
  for (int k = 0; k < n; k++) {
    double *v = test_values(list[k].tensor);
    double lo = 1, hi = -1;
    for (int64_t i = 0; i < torc_numel(list[k].tensor); i++) {
      assert_true(fabs(v[i]) <= bound);
      lo = v[i] < lo ? v[i] : lo;
      hi = v[i] > hi ? v[i] : hi;
    }
    assert_true(hi > lo);
    free(v);
  }
  torc_named_tensors_free(list, n);
}

static void test_default_init(void **state) {
  (void)state;
  torc_module *m = build(&CASES[0], 3);
  check_init(m);
  int scope = torc_scope_begin();
  torc_tensor *before = torc_clone(torc_module_parameter(m, "weight_hh_l1"));
  assert_ok(torc_module_init(m, "xavier_normal", NULL));
  check_init(m);
  assert_true(max_diff(before, torc_module_parameter(m, "weight_hh_l1")) > 0);
  torc_scope_end(scope);
  torc_module_free(m);
}

/* loss = sum(out^2) + 0.5 sum(h_n) (+ sum(c_n^2)), as gen_rnn.py. */
static torc_tensor *loss_of(torc_tensor *out, torc_tensor *h_n,
                            torc_tensor *c_n) {
  torc_tensor *l = torc_add(torc_sum(torc_square(out), NULL, 0, 0),
                            torc_mul_scalar(torc_sum(h_n, NULL, 0, 0), 0.5));
  if (c_n)
    l = torc_add(l, torc_sum(torc_square(c_n), NULL, 0, 0));
  return l;
}

/* Runs a loaded case (prefix: its fixture prefix; packed: with lengths)
 * and compares outputs, states and gradients. */
static void run_case(const rnn_case *c, const char *prefix, int packed,
                     torc_device dev) {
  int scope = torc_scope_begin();
  torc_module *m = build_loaded(c);
  assert_ok(torc_module_to(m, dev));
  int lstm = c->type[0] == 'l';
  torc_tensor *x = torc_clone(torc_to(fx_get(c->name, "x"), dev));
  torc_tensor *h0 = torc_clone(torc_to(fx_get(c->name, "h0"), dev));
  torc_tensor *c0 =
      lstm ? torc_clone(torc_to(fx_get(c->name, "c0"), dev)) : NULL;
  assert_ok(torc_set_requires_grad(x, 1));
  assert_ok(torc_set_requires_grad(h0, 1));
  if (c0)
    assert_ok(torc_set_requires_grad(c0, 1));
  torc_tensor *out = NULL, *h_n = NULL, *c_n = NULL;
  assert_ok(torc_rnn_forward(m, x, h0, c0,
                             packed ? fx_get(prefix, "lengths") : NULL, &out,
                             &h_n, &c_n));
  assert_true(lstm ? c_n != NULL : c_n == NULL);
  check_close("out", prefix, out, fx_get(prefix, "out"), 0);
  check_close("h_n", prefix, h_n, fx_get(prefix, "h_n"), 1);
  if (lstm)
    check_close("c_n", prefix, c_n, fx_get(prefix, "c_n"), 1);
  assert_ok(torc_backward(loss_of(out, h_n, c_n), NULL, 0));
  check_close("grad.x", prefix, torc_grad_of(x), fx_get(prefix, "grad.x"), 2);
  check_close("grad.h0", prefix, torc_grad_of(h0), fx_get(prefix, "grad.h0"),
              2);
  if (c0)
    check_close("grad.c0", prefix, torc_grad_of(c0),
                fx_get(prefix, "grad.c0"), 2);
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(m, &list);
  for (int k = 0; k < n; k++) {
    char key[128];
    snprintf(key, sizeof key, "grad.sd.%s", list[k].name);
    check_close(key, prefix, torc_grad_of(list[k].tensor),
                fx_get(prefix, key), 2);
  }
  torc_named_tensors_free(list, n);
  torc_scope_end(scope);
  torc_module_free(m);
}

static void test_against_pytorch(void **state) {
  (void)state;
  for (int i = 0; i < N_CASES; i++)
    run_case(&CASES[i], CASES[i].name, 0, TORC_CPU);
}

static void test_packed(void **state) {
  (void)state;
  run_case(&CASES[0], "packed_lstm", 1, TORC_CPU);
  run_case(&CASES[2], "packed_gru", 1, TORC_CPU);
}

/* The same on the sim device (the lengths stay on the cpu). */
static void test_sim(void **state) {
  (void)state;
  torc_device sim;
  if (torc_device_parse("sim", &sim) != TORC_OK) {
    printf("# sim not available: %s\n", torc_last_error());
    return;
  }
  run_case(&CASES[0], "lstm", 0, sim);
  run_case(&CASES[0], "packed_lstm", 1, sim);
  run_case(&CASES[2], "packed_gru", 1, sim);
}

/* torc_module_forward gives the output sequence with zero initial states:
 * the same as torc_rnn_forward with h0 = c0 = NULL, and an unbatched
 * sequence gives the batched result's row. */
static void test_forward_and_unbatched(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  torc_module *m = build_loaded(&CASES[1]); /* lstm, time-major */
  const torc_tensor *x = fx_get("lstm_tm", "x");
  torc_tensor *y = torc_module_forward(m, x);
  torc_tensor *out = NULL, *h_n = NULL, *c_n = NULL;
  assert_ok(torc_rnn_forward(m, x, NULL, NULL, NULL, &out, &h_n, &c_n));
  assert_true(max_diff(y, out) == 0);
  /* sequence 1 alone, [L, F], with its initial states */
  const torc_tensor *h0 = fx_get("lstm_tm", "h0"), *c0 = fx_get("lstm_tm", "c0");
  assert_ok(torc_rnn_forward(m, x, h0, c0, NULL, &out, &h_n, &c_n));
  torc_tensor *o1 = NULL, *h1 = NULL, *c1 = NULL;
  assert_ok(torc_rnn_forward(m, torc_select(x, 1, 1), torc_select(h0, 1, 1),
                             torc_select(c0, 1, 1), NULL, &o1, &h1, &c1));
  assert_int_equal(torc_ndim(o1), 2);
  assert_int_equal(torc_ndim(h1), 2);
  assert_true(max_diff(o1, torc_select(out, 1, 1)) < 1e-6);
  assert_true(max_diff(h1, torc_select(h_n, 1, 1)) < 1e-6);
  assert_true(max_diff(c1, torc_select(c_n, 1, 1)) < 1e-6);
  torc_scope_end(scope);
  torc_module_free(m);
}

/* repr: torc's type name, then PyTorch's extra_repr. */
static void test_repr(void **state) {
  (void)state;
  for (int i = 0; i < N_CASES; i++) {
    torc_module *m = build(&CASES[i], 3);
    char *r = torc_module_repr(m);
    const char *want = fx_meta(CASES[i].name, "repr");
    const char *paren = strchr(want, '(');
    assert_non_null(paren);
    char expect[256];
    snprintf(expect, sizeof expect, "%s%s", CASES[i].type, paren);
    assert_string_equal(r, expect);
    free(r);
    torc_module_free(m);
  }
  torc_rnn_options o = torc_rnn_options_default(8);
  o.input_size = 2;
  o.bias = 0;
  o.dropout = 0.25;
  torc_module *m = torc_gru_new(&o);
  char *r = torc_module_repr(m);
  assert_string_equal(r, "gru(2, 8, bias=False, dropout=0.25)");
  free(r);
  torc_module_free(m);
}

/* input_size 0: the parameters appear at the first forward. */
static void test_lazy(void **state) {
  (void)state;
  torc_module *m = build(&CASES[0], 0);
  assert_null(torc_module_parameter(m, "weight_ih_l0"));
  int scope = torc_scope_begin();
  assert_torc(torc_module_forward(m, fx_get("lstm", "x")));
  torc_scope_end(scope);
  torc_tensor *w = torc_module_parameter(m, "weight_ih_l0");
  assert_torc(w);
  assert_int_equal(torc_size(w, 0), 16);
  assert_int_equal(torc_size(w, 1), 3);
  assert_int_equal(torc_size(torc_module_parameter(m, "weight_ih_l1"), 1), 8);
  torc_module_free(m);
}

/* dropout between layers: training differs from eval; eval is
 * deterministic. */
static void test_dropout(void **state) {
  (void)state;
  torc_rnn_options o = torc_rnn_options_default(4);
  o.input_size = 3;
  o.num_layers = 2;
  o.dropout = 0.5;
  torc_module *m = torc_lstm_new(&o);
  assert_torc(m);
  int scope = torc_scope_begin();
  const torc_tensor *x = fx_get("lstm_tm", "x");
  torc_tensor *a = torc_module_forward(m, x);
  torc_module_train(m, 0);
  torc_tensor *b = torc_module_forward(m, x);
  torc_tensor *b2 = torc_module_forward(m, x);
  assert_true(max_diff(a, b) > 1e-4);
  assert_true(max_diff(b, b2) == 0);
  torc_scope_end(scope);
  torc_module_free(m);
}

/* An INI classifier: lstm -> last_step -> linear. */
static void test_ini(void **state) {
  (void)state;
  torc_config *cfg = torc_config_parse(
      "[model]\ninput = 5,3\n"
      "[layer]\ntype = lstm\nhidden_size = 4\nbatch_first = yes\n"
      "bidirectional = yes\nnum_layers = 2\n"
      "[layer]\ntype = last_step\n"
      "[layer]\ntype = linear\nout_features = 2\n",
      "rnn.ini");
  assert_torc(cfg);
  torc_module *m = torc_module_from_config(cfg, NULL, NULL);
  assert_torc(m);
  torc_config_free(cfg);
  char *r = torc_module_repr(m);
  assert_contains(r, "(0): lstm(3, 4, num_layers=2, batch_first=True, "
                     "bidirectional=True)");
  assert_contains(r, "(1): last_step()");
  assert_contains(r, "in_features=8, out_features=2");
  free(r);
  int scope = torc_scope_begin();
  torc_tensor *y = torc_module_forward(m, fx_get("lstm", "x"));
  assert_torc(y);
  assert_int_equal(torc_ndim(y), 2);
  assert_int_equal(torc_size(y, 0), 3);
  assert_int_equal(torc_size(y, 1), 2);
  torc_scope_end(scope);
  torc_module_free(m);

  m = torc_module_build("rnn", "hidden_size=3, nonlinearity=relu");
  assert_torc(m);
  torc_module_free(m);
  assert_null(torc_module_build("rnn", "hidden_size=3, nonlinearity=gelu"));
  assert_error(TORC_ERR_INVALID, "nonlinearity' = 'gelu' is not tanh or relu");
  assert_null(torc_module_build("gru", "hidden_size=3, nonlinearity=relu"));
  assert_error(TORC_ERR_INVALID, "nonlinearity");
  assert_null(torc_module_build("lstm", "num_layers=2"));
  assert_error(TORC_ERR_INVALID, "hidden_size");
  assert_null(torc_module_build("lstm", "hidden_size=2, dropout=2"));
  assert_error(TORC_ERR_INVALID, "dropout");
}

static void test_errors(void **state) {
  (void)state;
  torc_module *m = build_loaded(&CASES[0]); /* lstm, batch_first */
  int scope = torc_scope_begin();
  torc_tensor *out = NULL, *h = NULL;
  torc_tensor *x4 = torc_zeros(TORC_SHAPE(1, 3, 5, 3), TORC_F32, TORC_CPU);
  assert_null(torc_module_forward(m, x4));
  assert_error(TORC_ERR_SHAPE, "expected a 3-D input [N, L, input_size] "
                               "(batch_first)");
  assert_contains(torc_last_error(), "[1, 3, 5, 3]");
  torc_tensor *x = torc_zeros(TORC_SHAPE(3, 5, 7), TORC_F32, TORC_CPU);
  assert_null(torc_module_forward(m, x));
  assert_error(TORC_ERR_SHAPE, "input has 7 features (shape [3, 5, 7]) but "
                               "input_size is 3");
  const torc_tensor *xf = fx_get("lstm", "x");
  torc_tensor *h0 = torc_zeros(TORC_SHAPE(2, 3, 4), TORC_F32, TORC_CPU);
  assert_int_equal(torc_rnn_forward(m, xf, h0, NULL, NULL, &out, &h, NULL),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "h0 has shape [2, 3, 4] but must be "
                               "[4, 3, 4]");
  assert_null(out);
  torc_tensor *c0 = torc_zeros(TORC_SHAPE(4, 2, 4), TORC_F32, TORC_CPU);
  assert_int_equal(torc_rnn_forward(m, xf, NULL, c0, NULL, &out, &h, NULL),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "c0 has shape [4, 2, 4]");
  torc_tensor *len = torc_from_host((int64_t[]){5, 0, 2}, TORC_SHAPE(3),
                                    TORC_I64, TORC_CPU);
  assert_int_equal(torc_rnn_forward(m, xf, NULL, NULL, len, &out, &h, NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "lengths[1] is 0; every length must be from "
                                 "1 to the sequence length 5");
  torc_tensor *lenf = torc_zeros(TORC_SHAPE(3), TORC_F32, TORC_CPU);
  assert_int_equal(torc_rnn_forward(m, xf, NULL, NULL, lenf, &out, &h, NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "lengths must be an i64 tensor [3]");
  torc_scope_end(scope);
  torc_module_free(m);

  m = build_loaded(&CASES[2]); /* gru */
  scope = torc_scope_begin();
  c0 = torc_zeros(TORC_SHAPE(4, 3, 4), TORC_F32, TORC_CPU);
  assert_int_equal(torc_rnn_forward(m, fx_get("gru", "x"), NULL, c0, NULL,
                                    &out, &h, NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "only an lstm has a cell state");
  torc_scope_end(scope);
  torc_module_free(m);

  m = torc_linear_new(3, 2, 1);
  assert_int_equal(torc_rnn_forward(m, xf, NULL, NULL, NULL, &out, &h, NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "is a linear, not an lstm, gru or rnn");
  torc_module_free(m);

  torc_rnn_options o = torc_rnn_options_default(0);
  assert_null(torc_lstm_new(&o));
  assert_error(TORC_ERR_INVALID, "hidden_size 0");
  o = torc_rnn_options_default((int64_t)1 << 40);
  assert_null(torc_rnn_new(&o));
  assert_error(TORC_ERR_INVALID, "hidden_size 1099511627776; hidden_size "
                                 "must be from 1 to 2^31");
  o = torc_rnn_options_default(4);
  o.num_layers = 0;
  assert_null(torc_gru_new(&o));
  assert_error(TORC_ERR_INVALID, "num_layers is 0");
  o = torc_rnn_options_default(4);
  o.nonlinearity = "sigmoid";
  assert_null(torc_rnn_new(&o));
  assert_error(TORC_ERR_INVALID, "nonlinearity 'sigmoid' is not tanh or relu");
  assert_null(torc_lstm_new(NULL));
  assert_error(TORC_ERR_NULL, "torc_rnn_options_default");

  m = torc_last_step_new();
  scope = torc_scope_begin();
  x4 = torc_zeros(TORC_SHAPE(1, 3, 5, 3), TORC_F32, TORC_CPU);
  assert_null(torc_module_forward(m, x4));
  assert_error(TORC_ERR_SHAPE, "last_step: expected [N, L, F]");
  torc_scope_end(scope);
  torc_module_free(m);
}

/* For tests/test_rnn_torch.sh: every case built with torc's own init, its
 * state dict under "CASE." and its eval-mode run on the fixture's inputs
 * under "CASE.io.", in $TORC_RNN_EXPORT_DIR/rnn.torc.safetensors (read by
 * gen_rnn.py --check). */
static void test_export_for_pytorch(void **state) {
  (void)state;
  const char *dir = getenv("TORC_RNN_EXPORT_DIR");
  assert_non_null(dir);
  torc_state_dict *sd = torc_state_dict_new();
  assert_non_null(sd);
  torc_module *mods[N_CASES];
  int scope = torc_scope_begin();
  for (int i = 0; i < N_CASES; i++) {
    const rnn_case *c = &CASES[i];
    char p[64], key[96];
    mods[i] = build(c, 3);
    torc_module_train(mods[i], 0);
    snprintf(p, sizeof p, "%s.", c->name);
    assert_ok(torc_module_state_dict(mods[i], p, sd));
    int lstm = c->type[0] == 'l';
    const char *names[] = {"x", "h0", "c0", "out", "h_n", "c_n"};
    torc_tensor *t[6] = {fx_get(c->name, "x"), fx_get(c->name, "h0"),
                         lstm ? fx_get(c->name, "c0") : NULL, NULL, NULL,
                         NULL};
    assert_ok(torc_rnn_forward(mods[i], t[0], t[1], t[2], NULL, &t[3], &t[4],
                               &t[5]));
    for (int k = 0; k < 6; k++) {
      if (t[k] == NULL)
        continue;
      snprintf(key, sizeof key, "%sio.%s", p, names[k]);
      assert_ok(torc_state_dict_set(sd, key, t[k]));
    }
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/rnn.torc.safetensors", dir);
  assert_ok(torc_state_dict_save(sd, path));
  torc_state_dict_free(sd);
  torc_scope_end(scope);
  for (int i = 0; i < N_CASES; i++)
    torc_module_free(mods[i]);
}

static int setup(void **state) {
  if (test_setup_ref_sim(state))
    return -1;
  const char *src = getenv("TORC_TOP_SRCDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/%s", src ? src : ".",
           FIXTURE);
  fx = torc_state_dict_load(path, TORC_CPU);
  st = torc_safetensors_open(path);
  if (fx == NULL || st == NULL) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  printf("max |torc - torch|: outputs %.3g, states %.3g, gradients %.3g\n",
         max_err[0], max_err[1], max_err[2]);
  torc_state_dict_free(fx);
  torc_safetensors_close(st);
  return test_teardown_all(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_shapes),
      cmocka_unit_test(test_default_init),
      cmocka_unit_test(test_against_pytorch),
      cmocka_unit_test(test_packed),
      cmocka_unit_test(test_sim),
      cmocka_unit_test(test_forward_and_unbatched),
      cmocka_unit_test(test_repr),
      cmocka_unit_test(test_lazy),
      cmocka_unit_test(test_dropout),
      cmocka_unit_test(test_ini),
      cmocka_unit_test(test_errors),
  };
  const struct CMUnitTest export_only[] = {
      cmocka_unit_test(test_export_for_pytorch),
  };
  const char *dir = getenv("TORC_RNN_EXPORT_DIR");
  if (dir && *dir)
    return cmocka_run_group_tests_name("rnn export", export_only, setup,
                                       teardown);
  return cmocka_run_group_tests_name("rnn", tests, setup, teardown);
}
