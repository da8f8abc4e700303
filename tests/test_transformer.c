/* tests/test_transformer.c — multihead_attention, the transformer encoder
 * and decoder layers and positional_embedding (torc/module.h) against
 * PyTorch: state-dict names, order and shapes, a strict load of PyTorch's
 * state dict, outputs, attention weights and gradients (of every input and
 * parameter) with every kind of mask (in f64, on the cpu and sim), the
 * default init, repr, the INI types, embedding's padding_idx, the user
 * errors, and incremental decoding (decode_internal.h): a causal stack and
 * an lstm run token by token agree with the whole sequence. Expected
 * values are in tests/fixtures/transformer.safetensors, written by
 * tests/fixtures/gen_transformer.py. */
#include <math.h>

#include "../core/decode_internal.h"
#include "testutil.h"

#define TOL 1e-9 /* f64 against PyTorch's f64 */
#define FIXTURE "transformer.safetensors"

enum { MHA, ENC, DEC };

/* The cases of gen_transformer.py and the options that build the same
 * module; causal_mask names the fixture's causal float mask, which the
 * module's is_causal replaces in a second run. */
typedef struct tf_case {
  const char *name;
  int kind;
  int64_t kdim, vdim;
  int bias, batch_first, norm_first, gelu;
  const char *causal_mask;
} tf_case;

static const tf_case CASES[] = {
    {"mha", MHA, 0, 0, 1, 0, 0, 0, NULL},
    {"mha_kv", MHA, 6, 4, 1, 1, 0, 0, NULL},
    {"mha_bool", MHA, 0, 0, 0, 0, 0, 0, NULL},
    {"mha_unbatched", MHA, 0, 0, 1, 0, 0, 0, "attn_mask"},
    {"enc_post", ENC, 0, 0, 1, 1, 0, 0, NULL},
    {"enc_pre_gelu", ENC, 0, 0, 1, 1, 1, 1, "src_mask"},
    {"dec", DEC, 0, 0, 1, 1, 0, 0, "tgt_mask"},
    {"dec_pre_tm", DEC, 0, 0, 1, 0, 1, 1, NULL},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

static torc_state_dict *fx;  /* the whole fixture */
static torc_safetensors *st; /* the same, for its metadata */
static double max_err[3];    /* outputs, weights, gradients */

static torc_tensor *fx_opt(const char *prefix, const char *name) {
  char key[256];
  snprintf(key, sizeof key, "%s.%s", prefix, name);
  return torc_state_dict_get(fx, key);
}

static torc_tensor *fx_get(const char *prefix, const char *name) {
  torc_tensor *t = fx_opt(prefix, name);
  if (t == NULL) {
    print_error("fixture has no %s.%s\n", prefix, name);
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

/* max |a - b| (NaN against NaN counts 0), after checking the shapes. */
static double max_diff(const torc_tensor *a, const torc_tensor *b) {
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(torc_ndim(a), torc_ndim(b));
  for (int i = 0; i < torc_ndim(a); i++)
    assert_int_equal(torc_size(a, i), torc_size(b, i));
  double *x = test_values(a), *y = test_values(b), m = 0;
  assert_non_null(x);
  assert_non_null(y);
  for (int64_t i = 0; i < torc_numel(a); i++) {
    double d = fabs(x[i] - y[i]);
    if (x[i] != x[i] || y[i] != y[i])
      d = (x[i] != x[i]) == (y[i] != y[i]) ? 0 : INFINITY;
    if (d > m)
      m = d;
  }
  free(x);
  free(y);
  return m;
}

static void check_close(const char *what, const char *prefix,
                        const torc_tensor *got, const torc_tensor *want,
                        int kind, double tol) {
  double d = max_diff(got, want);
  if (d > max_err[kind])
    max_err[kind] = d;
  if (d > tol) {
    print_error("%s %s: max |torc - torch| = %g\n", prefix, what, d);
    fail();
  }
}

static torc_module *build(const tf_case *c) {
  torc_module *m;
  if (c->kind == MHA) {
    torc_mha_options o = torc_mha_options_default(8, 2);
    o.kdim = c->kdim;
    o.vdim = c->vdim;
    o.bias = c->bias;
    o.batch_first = c->batch_first;
    m = torc_multihead_attention_new(&o);
  } else {
    torc_transformer_layer_options o =
        torc_transformer_layer_options_default(8, 2);
    o.dim_feedforward = 16;
    o.batch_first = c->batch_first;
    o.norm_first = c->norm_first;
    o.activation = c->gelu ? "gelu" : NULL;
    m = c->kind == ENC ? torc_transformer_encoder_layer_new(&o)
                       : torc_transformer_decoder_layer_new(&o);
  }
  assert_torc(m);
  return m;
}

/* Builds case c in f64 and loads PyTorch's state dict into it, strictly. */
static torc_module *build_loaded(const tf_case *c) {
  torc_module *m = build(c);
  assert_ok(torc_module_to_dtype(m, TORC_F64));
  char prefix[64];
  snprintf(prefix, sizeof prefix, "%s.sd.", c->name);
  torc_load_opts opts = {0};
  opts.prefix = prefix;
  assert_ok(torc_module_load_state_dict(m, fx, &opts, NULL));
  torc_module_train(m, 0); /* as the fixture: eval, no dropout */
  return m;
}

/* Names in PyTorch's order and shapes, for every case. */
static void test_names_shapes(void **state) {
  (void)state;
  for (int i = 0; i < N_CASES; i++) {
    torc_module *m = build(&CASES[i]);
    torc_named_tensor *list = NULL;
    int n = torc_module_named_parameters(m, &list);
    char names[2048] = "";
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
    /* no buffers: the state dict is the parameters */
    assert_int_equal(torc_module_named_buffers(m, 0, &list), 0);
    torc_named_tensors_free(list, 0);
    torc_module_free(m);
  }
}

/* Runs a loaded case (with_mask 0: the causal mask replaced by is_causal)
 * and compares output, weights and gradients. */
static void run_case(const tf_case *c, int with_mask, torc_device dev) {
  int scope = torc_scope_begin();
  torc_module *m = build_loaded(c);
  assert_ok(torc_module_to(m, dev));
  const char *p = c->name;
  static const char *const in_names[] = {"q", "k", "v", "src", "tgt",
                                         "memory"};
  torc_tensor *in[6] = {NULL};
  for (int i = 0; i < 6; i++) {
    torc_tensor *t = fx_opt(p, in_names[i]);
    if (t) {
      in[i] = torc_clone(torc_to(t, dev));
      assert_ok(torc_set_requires_grad(in[i], 1));
    }
  }
  static const char *const mask_names[] = {
      "key_padding_mask",     "attn_mask",
      "src_mask",             "src_key_padding_mask",
      "tgt_mask",             "memory_mask",
      "tgt_key_padding_mask", "memory_key_padding_mask"};
  torc_tensor *mk[8] = {NULL};
  for (int i = 0; i < 8; i++) {
    torc_tensor *t = fx_opt(p, mask_names[i]);
    if (t && !(!with_mask && c->causal_mask &&
               strcmp(c->causal_mask, mask_names[i]) == 0))
      mk[i] = torc_to(t, dev);
  }
  int causal = !with_mask && c->causal_mask;
  torc_tensor *out = NULL, *w = NULL;
  if (c->kind == MHA) {
    torc_tensor *q = in[0];
    assert_ok(torc_mha_forward(m, q, in[1] ? in[1] : q, in[2] ? in[2] : q,
                               mk[0], mk[1], causal, &out, &w));
    check_close("weights", p, w, fx_get(p, "weights"), 1, TOL);
  } else if (c->kind == ENC)
    assert_ok(torc_transformer_encoder_layer_forward(m, in[3], mk[2], mk[3],
                                                     causal, &out));
  else
    assert_ok(torc_transformer_decoder_layer_forward(
        m, in[4], in[5], mk[4], mk[5], mk[6], mk[7], causal, 0, &out));
  check_close("out", p, out, fx_get(p, "out"), 0, TOL);
  torc_tensor *r = torc_to(fx_get(p, "r"), dev);
  assert_ok(torc_backward(torc_sum(torc_mul(out, r), NULL, 0, 0), NULL, 0));
  for (int i = 0; i < 6; i++) {
    if (in[i] == NULL)
      continue;
    char key[64];
    snprintf(key, sizeof key, "grad.%s", in_names[i]);
    check_close(key, p, torc_grad_of(in[i]), fx_get(p, key), 2, TOL);
  }
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(m, &list);
  for (int k = 0; k < n; k++) {
    char key[128];
    snprintf(key, sizeof key, "grad.sd.%s", list[k].name);
    check_close(key, p, torc_grad_of(list[k].tensor), fx_get(p, key), 2,
                TOL);
  }
  torc_named_tensors_free(list, n);
  torc_scope_end(scope);
  torc_module_free(m);
}

static void test_against_pytorch(void **state) {
  (void)state;
  for (int i = 0; i < N_CASES; i++) {
    run_case(&CASES[i], 1, TORC_CPU);
    if (CASES[i].causal_mask)
      run_case(&CASES[i], 0, TORC_CPU);
  }
}

/* The same on the sim device (ref's kernels). */
static void test_sim(void **state) {
  (void)state;
  torc_device sim;
  if (torc_device_parse("sim", &sim) != TORC_OK) {
    printf("# sim not available: %s\n", torc_last_error());
    return;
  }
  run_case(&CASES[1], 1, sim); /* mha_kv: kdim, vdim, both masks */
  run_case(&CASES[2], 1, sim); /* mha_bool */
  run_case(&CASES[5], 0, sim); /* enc_pre_gelu, is_causal */
  run_case(&CASES[6], 1, sim); /* dec */
}

/* torc_module_forward is self-attention with no mask; forward_n takes
 * query, key and value; the causal option equals is_causal; an encoder
 * layer's torc_module_forward equals its C call without masks; a decoder
 * layer's forward_n equals its C call. */
static void test_forward_variants(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  torc_module *m = build_loaded(&CASES[0]);
  const torc_tensor *x = fx_get("mha", "q");
  torc_tensor *a = torc_module_forward(m, x), *b = NULL;
  assert_ok(torc_mha_forward(m, x, x, x, NULL, NULL, 0, &b, NULL));
  assert_true(max_diff(a, b) == 0);
  torc_tensor *xc = torc_clone(x); /* not the same tensor: three inputs */
  a = torc_module_forward_n(m, (const torc_tensor *const[]){x, xc, xc}, 3);
  assert_true(max_diff(a, b) < 1e-12);
  torc_module_free(m);

  /* a float key_padding_mask is added: -inf where the bool one is true */
  m = build_loaded(&CASES[1]); /* mha_kv */
  const torc_tensor *kq = fx_get("mha_kv", "q"), *kk = fx_get("mha_kv", "k"),
                    *kv = fx_get("mha_kv", "v");
  const torc_tensor *kb = fx_get("mha_kv", "key_padding_mask");
  torc_tensor *kf = torc_masked_fill(
      torc_zeros(TORC_SHAPE(3, 7), TORC_F64, TORC_CPU), kb, -INFINITY);
  const torc_tensor *am = fx_get("mha_kv", "attn_mask");
  assert_ok(torc_mha_forward(m, kq, kk, kv, kf, am, 0, &a, NULL));
  check_close("out (float key_padding_mask)", "mha_kv", a,
              fx_get("mha_kv", "out"), 0, TOL);
  /* the masks all in one [N * heads, L, S] float attn_mask */
  torc_tensor *all = torc_reshape(
      torc_expand(torc_add(torc_unsqueeze(torc_unsqueeze(kf, 1), 1), am),
                  TORC_SHAPE(3, 2, 5, 7)),
      TORC_SHAPE(6, 5, 7));
  assert_ok(torc_mha_forward(m, kq, kk, kv, NULL, all, 0, &a, NULL));
  check_close("out (3-D attn_mask)", "mha_kv", a, fx_get("mha_kv", "out"), 0,
              TOL);
  torc_module_free(m);

  torc_mha_options o = torc_mha_options_default(8, 2);
  o.causal = 1;
  torc_module *mc = torc_multihead_attention_new(&o);
  assert_ok(torc_module_to_dtype(mc, TORC_F64));
  torc_load_opts opts = {0};
  opts.prefix = "mha_unbatched.sd.";
  assert_ok(torc_module_load_state_dict(mc, fx, &opts, NULL));
  x = fx_get("mha_unbatched", "q");
  check_close("out (causal option)", "mha_unbatched",
              torc_module_forward(mc, x), fx_get("mha_unbatched", "out"), 0,
              TOL);
  torc_module_free(mc);

  m = build_loaded(&CASES[4]); /* enc_post */
  x = fx_get("enc_post", "src");
  assert_ok(torc_transformer_encoder_layer_forward(m, x, NULL, NULL, 0, &b));
  assert_true(max_diff(torc_module_forward(m, x), b) == 0);
  /* unbatched [L, E]: the batched result's row */
  torc_tensor *row = NULL;
  assert_ok(torc_transformer_encoder_layer_forward(m, torc_select(x, 0, 1),
                                                   NULL, NULL, 0, &row));
  assert_int_equal(torc_ndim(row), 2);
  assert_true(max_diff(row, torc_select(b, 0, 1)) < 1e-12);
  torc_module_free(m);

  m = build_loaded(&CASES[6]); /* dec */
  const torc_tensor *t = fx_get("dec", "tgt"), *mem = fx_get("dec", "memory");
  assert_ok(torc_transformer_decoder_layer_forward(m, t, mem, NULL, NULL,
                                                   NULL, NULL, 0, 0, &b));
  a = torc_module_forward_n(m, (const torc_tensor *const[]){t, mem}, 2);
  assert_true(max_diff(a, b) == 0);
  torc_scope_end(scope);
  torc_module_free(m);
}

/* PyTorch's _reset_parameters: xavier-uniform projections, zero biases
 * (in_proj_bias, out_proj.bias); the layers' linears as nn.Linear's. */
static void check_bound(const torc_tensor *t, double bound, int zero) {
  double *v = test_values(t);
  double lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < torc_numel(t); i++) {
    lo = v[i] < lo ? v[i] : lo;
    hi = v[i] > hi ? v[i] : hi;
  }
  free(v);
  if (zero) {
    assert_true(lo == 0 && hi == 0);
    return;
  }
  assert_true(-bound <= lo && hi <= bound && hi > lo);
  /* a uniform draw of this many values reaches near its bounds */
  assert_true(hi > bound / 2 && lo < -bound / 2);
}

static void test_default_init(void **state) {
  (void)state;
  torc_module *m = build(&CASES[0]);
  check_bound(torc_module_parameter(m, "in_proj_weight"),
              sqrt(6.0 / (8 + 24)), 0);
  check_bound(torc_module_parameter(m, "in_proj_bias"), 0, 1);
  torc_module *op = torc_module_child(m, "out_proj");
  check_bound(torc_module_parameter(op, "weight"), 1 / sqrt(8.0), 0);
  check_bound(torc_module_parameter(op, "bias"), 0, 1);
  torc_module_free(m);
  m = build(&CASES[1]); /* kdim 6, vdim 4 */
  check_bound(torc_module_parameter(m, "k_proj_weight"), sqrt(6.0 / 14), 0);
  check_bound(torc_module_parameter(m, "v_proj_weight"), sqrt(6.0 / 12), 0);
  torc_module_free(m);
  m = build(&CASES[6]);
  check_bound(torc_module_parameter(torc_module_find(m, "linear2"), "weight"),
              1 / sqrt(16.0), 0);
  check_bound(torc_module_parameter(torc_module_find(m, "multihead_attn"),
                                    "in_proj_bias"),
              0, 1);
  /* torc_module_init re-draws: MHA's own reset, then its children's */
  int scope = torc_scope_begin();
  torc_tensor *w = torc_module_parameter(
      torc_module_find(m, "self_attn"), "in_proj_weight");
  torc_tensor *before = torc_clone(w);
  assert_ok(torc_module_init(m, "default", NULL));
  assert_true(max_diff(before, w) > 0);
  check_bound(w, sqrt(6.0 / 32), 0);
  torc_scope_end(scope);
  torc_module_free(m);
}

/* PyTorch's repr with its class names replaced by torc's type names. */
static void torch_to_torc_names(const char *in, char *out, size_t size) {
  static const char *const map[][2] = {
      {"TransformerEncoderLayer", "transformer_encoder_layer"},
      {"TransformerDecoderLayer", "transformer_decoder_layer"},
      {"MultiheadAttention", "multihead_attention"},
      {"NonDynamicallyQuantizableLinear", "linear"},
      {"Linear", "linear"},
      {"LayerNorm", "layernorm"},
      {"Dropout", "dropout"}};
  size_t o = 0;
  while (*in && o + 1 < size) {
    int hit = 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
      size_t l = strlen(map[i][0]);
      if (strncmp(in, map[i][0], l) == 0 && in[l] == '(') {
        o += (size_t)snprintf(out + o, size - o, "%s", map[i][1]);
        in += l;
        hit = 1;
        break;
      }
    }
    if (!hit)
      out[o++] = *in++;
  }
  out[o < size ? o : size - 1] = '\0';
}

static void test_repr(void **state) {
  (void)state;
  for (int i = 0; i < N_CASES; i++) {
    torc_module *m = build(&CASES[i]);
    char *r = torc_module_repr(m);
    char want[4096];
    torch_to_torc_names(fx_meta(CASES[i].name, "repr"), want, sizeof want);
    assert_string_equal(r, want);
    free(r);
    torc_module_free(m);
  }
  torc_module *m = torc_positional_embedding_new("sinusoidal", 16, 8, 0.1);
  char *r = torc_module_repr(m);
  assert_string_equal(r, "positional_embedding(sinusoidal, 16, 8, "
                         "dropout=0.1)");
  free(r);
  torc_module_free(m);
  m = torc_embedding_padded_new(10, 3, -1);
  r = torc_module_repr(m);
  assert_string_equal(r, "embedding(10, 3, padding_idx=9)"); /* as PyTorch */
  free(r);
  torc_module_free(m);
}

/* Every shape mismatch: one error naming the shapes. */
static void test_errors(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  torc_module *m = build(&CASES[1]); /* kdim 6, vdim 4, batch_first */
  torc_tensor *out = NULL;
  torc_tensor *q = torc_zeros(TORC_SHAPE(3, 5, 8), TORC_F32, TORC_CPU);
  torc_tensor *k = torc_zeros(TORC_SHAPE(3, 7, 6), TORC_F32, TORC_CPU);
  torc_tensor *v = torc_zeros(TORC_SHAPE(3, 7, 4), TORC_F32, TORC_CPU);
  torc_tensor *q4 = torc_zeros(TORC_SHAPE(1, 3, 5, 8), TORC_F32, TORC_CPU);
  assert_int_equal(torc_mha_forward(m, q4, k, v, NULL, NULL, 0, &out, NULL),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "expected a 3-D query [N, L, E] "
                               "(batch_first) (or one unbatched sequence "
                               "[L, E]), got shape [1, 3, 5, 8]");
  assert_null(out);
  torc_tensor *q7 = torc_zeros(TORC_SHAPE(3, 5, 7), TORC_F32, TORC_CPU);
  assert_int_equal(torc_mha_forward(m, q7, k, v, NULL, NULL, 0, &out, NULL),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "the query has shape [3, 5, 7]: its last dim "
                               "7 is not embed_dim 8");
  assert_int_equal(torc_mha_forward(m, q, v, v, NULL, NULL, 0, &out, NULL),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "the key has shape [3, 7, 4]: its last dim 4 "
                               "is not kdim 6");
  assert_int_equal(
      torc_mha_forward(m, q, k, torc_zeros(TORC_SHAPE(3, 6, 4), TORC_F32,
                                           TORC_CPU),
                       NULL, NULL, 0, &out, NULL),
      TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "query [3, 5, 8], key [3, 7, 6] and value "
                               "[3, 6, 4] (layout [N, L, E] (batch_first)) "
                               "must have one batch size N");
  assert_int_equal(torc_mha_forward(m, torc_select(q, 0, 0), k, v, NULL, NULL,
                                    0, &out, NULL),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "the query is 2-D but the key has shape "
                               "[3, 7, 6]");
  torc_tensor *kpm = torc_zeros(TORC_SHAPE(3, 5), TORC_BOOL, TORC_CPU);
  assert_int_equal(torc_mha_forward(m, q, k, v, kpm, NULL, 0, &out, NULL),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "key_padding_mask has shape [3, 5] but must "
                               "be [N, S] = [3, 7]");
  torc_tensor *am = torc_zeros(TORC_SHAPE(7, 5), TORC_BOOL, TORC_CPU);
  assert_int_equal(torc_mha_forward(m, q, k, v, NULL, am, 0, &out, NULL),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "attn_mask has shape [7, 5] but must be "
                               "[L, S] = [5, 7] or [N * num_heads, L, S] = "
                               "[6, 5, 7]");
  torc_tensor *ami = torc_zeros(TORC_SHAPE(5, 7), TORC_I64, TORC_CPU);
  assert_int_equal(torc_mha_forward(m, q, k, v, NULL, ami, 0, &out, NULL),
                   TORC_ERR_DTYPE);
  assert_error(TORC_ERR_DTYPE, "attn_mask is i64; it must be bool");
  torc_tensor *qi = torc_zeros(TORC_SHAPE(3, 5, 8), TORC_I64, TORC_CPU);
  assert_int_equal(torc_mha_forward(m, qi, k, v, NULL, NULL, 0, &out, NULL),
                   TORC_ERR_DTYPE);
  assert_error(TORC_ERR_DTYPE, "the query is i64; it must be floating");
  assert_null(torc_module_forward_n(m, (const torc_tensor *const[]){q, k}, 2));
  assert_error(TORC_ERR_INVALID, "given 2 inputs; it takes 1");
  torc_module_free(m);

  /* unbatched masks */
  m = build(&CASES[0]);
  torc_tensor *x = torc_zeros(TORC_SHAPE(5, 8), TORC_F32, TORC_CPU);
  kpm = torc_zeros(TORC_SHAPE(1, 5), TORC_BOOL, TORC_CPU);
  assert_int_equal(torc_mha_forward(m, x, x, x, kpm, NULL, 0, &out, NULL),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "key_padding_mask has shape [1, 5] but must "
                               "be [S] = [5] for the unbatched key [5, 8]");
  am = torc_zeros(TORC_SHAPE(6, 5, 5), TORC_BOOL, TORC_CPU);
  assert_int_equal(torc_mha_forward(m, x, x, x, NULL, am, 0, &out, NULL),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "or [num_heads, L, S] = [2, 5, 5]");
  torc_module_free(m);

  m = torc_linear_new(3, 2, 1);
  assert_int_equal(torc_mha_forward(m, x, x, x, NULL, NULL, 0, &out, NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "is a linear, not a multihead_attention");
  assert_int_equal(torc_transformer_encoder_layer_forward(m, x, NULL, NULL, 0,
                                                          &out),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "not a transformer_encoder_layer");
  torc_module_free(m);

  m = build(&CASES[4]); /* enc_post, batch_first */
  assert_null(torc_module_forward(m, q7));
  assert_error(TORC_ERR_SHAPE, "src has shape [3, 5, 7]; expected [N, L, "
                               "d_model] (batch_first) (or unbatched [L, "
                               "d_model]) with d_model = 8");
  torc_module_free(m);
  m = build(&CASES[6]); /* dec */
  assert_null(torc_module_forward(m, q));
  assert_error(TORC_ERR_INVALID, "given 1 inputs; it takes 2 (tgt, memory)");
  assert_null(torc_module_forward_n(m, (const torc_tensor *const[]){q, q7},
                                    2));
  assert_error(TORC_ERR_SHAPE, "memory has shape [3, 5, 7]");
  assert_int_equal(torc_transformer_encoder_layer_forward(m, q, NULL, NULL, 0,
                                                          &out),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "is a transformer_decoder_layer, not a "
                                 "transformer_encoder_layer");
  torc_module_free(m);

  /* options */
  torc_mha_options o = torc_mha_options_default(8, 3);
  assert_null(torc_multihead_attention_new(&o));
  assert_error(TORC_ERR_INVALID, "num_heads is 3; it must be >= 1 and divide "
                                 "embed_dim 8");
  o = torc_mha_options_default(0, 1);
  assert_null(torc_multihead_attention_new(&o));
  assert_error(TORC_ERR_INVALID, "embed_dim is 0");
  o = torc_mha_options_default(8, 2);
  o.dropout = 1;
  assert_null(torc_multihead_attention_new(&o));
  assert_error(TORC_ERR_INVALID, "dropout is 1");
  o.dropout = 0;
  o.kdim = -1;
  assert_null(torc_multihead_attention_new(&o));
  assert_error(TORC_ERR_INVALID, "kdim -1");
  assert_null(torc_multihead_attention_new(NULL));
  assert_error(TORC_ERR_NULL, "torc_mha_options_default");
  torc_transformer_layer_options t =
      torc_transformer_layer_options_default(8, 2);
  t.activation = "tanh";
  assert_null(torc_transformer_encoder_layer_new(&t));
  assert_error(TORC_ERR_INVALID, "activation 'tanh' is not relu or gelu");
  t = torc_transformer_layer_options_default(8, 5);
  assert_null(torc_transformer_decoder_layer_new(&t));
  assert_error(TORC_ERR_INVALID, "nhead is 5");
  t = torc_transformer_layer_options_default(8, 2);
  t.layer_norm_eps = 0;
  assert_null(torc_transformer_encoder_layer_new(&t));
  assert_error(TORC_ERR_INVALID, "layer_norm_eps is 0");
  assert_null(torc_transformer_encoder_layer_new(NULL));
  assert_error(TORC_ERR_NULL, "torc_transformer_layer_options_default");

  assert_null(torc_positional_embedding_new("rotary", 8, 4, 0));
  assert_error(TORC_ERR_INVALID, "kind 'rotary' is not learned or "
                                 "sinusoidal");
  assert_null(torc_positional_embedding_new("learned", 0, 4, 0));
  assert_error(TORC_ERR_INVALID, "max_len 0");
  m = torc_positional_embedding_new("learned", 4, 8, 0);
  assert_null(torc_module_forward(m, q));
  assert_error(TORC_ERR_SHAPE, "the sequence has 5 positions (input [3, 5, "
                               "8]) but max_len is 4");
  assert_null(torc_module_forward(m, q7));
  assert_error(TORC_ERR_SHAPE, "d_model = 8, got shape [3, 5, 7]");
  torc_module_free(m);

  assert_null(torc_embedding_padded_new(10, 3, 10));
  assert_error(TORC_ERR_INVALID, "padding_idx 10 is outside the table of "
                                 "num_embeddings 10; it must be from -10 to "
                                 "9");
  assert_null(torc_embedding_padded_new(10, 3, -11));
  assert_error(TORC_ERR_INVALID, "padding_idx -11");
  torc_scope_end(scope);
}

/* nn.Embedding's padding_idx: the row starts zero, stays zero at
 * torc_module_init, and gets no gradient. */
static void test_padding_idx(void **state) {
  (void)state;
  torc_module *m = torc_embedding_padded_new(6, 3, -2); /* row 4 */
  int scope = torc_scope_begin();
  torc_tensor *w = torc_module_parameter(m, "weight");
  check_bound(torc_select(w, 0, 4), 0, 1);
  assert_ok(torc_module_init(m, "default", NULL));
  check_bound(torc_select(w, 0, 4), 0, 1);
  /* a loaded non-zero row is looked up as it is, with no gradient */
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  assert_ok(torc_init_constant_(torc_select(w, 0, 4), 0.5));
  torc_set_grad_mode(gm);
  torc_tensor *idx = torc_from_host((int64_t[]){4, 1, 4, 0}, TORC_SHAPE(2, 2),
                                    TORC_I64, TORC_CPU);
  torc_tensor *y = torc_module_forward(m, idx);
  assert_true(max_diff(torc_select(torc_select(y, 0, 0), 0, 0),
                       torc_select(w, 0, 4)) == 0);
  assert_ok(torc_backward(torc_sum(torc_square(y), NULL, 0, 0), NULL, 0));
  torc_tensor *g = torc_grad_of(w);
  check_bound(torc_select(g, 0, 4), 0, 1);
  double *gv = test_values(torc_select(g, 0, 1));
  assert_true(gv[0] != 0);
  free(gv);
  torc_scope_end(scope);
  torc_module_free(m);
}

/* positional_embedding: learned adds weight[p], sinusoidal the table of
 * "Attention is all you need" (a buffer outside the state dict). */
static void test_positional(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  torc_tensor *x = torc_zeros(TORC_SHAPE(2, 3, 4), TORC_F32, TORC_CPU);
  torc_module *m = torc_positional_embedding_new("sinusoidal", 8, 4, 0);
  assert_torc(m);
  assert_non_null(torc_module_buffer(m, "pe"));
  torc_named_tensor *list = NULL;
  assert_int_equal(torc_module_named_buffers(m, 1, &list), 0);
  torc_named_tensors_free(list, 0);
  assert_int_equal(torc_module_named_parameters(m, &list), 0);
  torc_named_tensors_free(list, 0);
  torc_tensor *y = torc_module_forward(m, x);
  double want[12];
  for (int p = 0; p < 3; p++)
    for (int i = 0; i < 4; i += 2) {
      double a = p / pow(10000.0, i / 4.0);
      want[p * 4 + i] = sin(a);
      want[p * 4 + i + 1] = cos(a);
    }
  test_assert_values(torc_select(y, 0, 1), want, 12, 1e-6);
  torc_module_free(m);

  m = torc_positional_embedding_new("learned", 8, 4, 0);
  assert_torc(m);
  torc_tensor *w = torc_module_parameter(m, "weight");
  assert_int_equal(torc_size(w, 0), 8);
  assert_int_equal(torc_size(w, 1), 4);
  y = torc_module_forward(m, torc_select(x, 0, 0)); /* unbatched [L, d] */
  assert_true(max_diff(y, torc_narrow(w, 0, 0, 3)) == 0);
  torc_module_free(m);
  torc_scope_end(scope);
}

/* The INI types: a causal language model from [layer] sections, and
 * torc_module_build's keys and errors. */
static void test_ini(void **state) {
  (void)state;
  torc_module *m = torc_module_build(
      "multihead_attention", "embed_dim=8, num_heads=2, kdim=6, vdim=4, "
                             "batch_first=yes, causal=yes, bias=no");
  assert_torc(m);
  assert_non_null(torc_module_parameter(m, "k_proj_weight"));
  assert_null(torc_module_parameter(m, "in_proj_bias"));
  torc_module_free(m);
  m = torc_module_build("transformer_encoder_layer",
                        "d_model=8, nhead=2, dim_feedforward=16, "
                        "activation=gelu, norm_first=yes, batch_first=yes");
  assert_torc(m);
  char *r = torc_module_repr(m);
  assert_contains(r, "(linear1): linear(in_features=8, out_features=16");
  free(r);
  torc_module_free(m);
  m = torc_module_build("transformer_decoder_layer", "d_model=8, nhead=2");
  assert_torc(m);
  assert_int_equal(torc_size(torc_module_parameter(
                                 torc_module_find(m, "linear1"), "weight"),
                             0),
                   2048);
  assert_non_null(torc_module_find(m, "norm3"));
  torc_module_free(m);
  m = torc_module_build("embedding",
                        "num_embeddings=5, embedding_dim=2, padding_idx=0");
  assert_torc(m);
  r = torc_module_repr(m);
  assert_string_equal(r, "embedding(5, 2, padding_idx=0)");
  free(r);
  torc_module_free(m);

  assert_null(torc_module_build("multihead_attention", "embed_dim=8"));
  assert_error(TORC_ERR_INVALID, "num_heads");
  assert_null(torc_module_build("multihead_attention",
                                "embed_dim=8, num_heads=2, kdim=0"));
  assert_error(TORC_ERR_INVALID, "key 'kdim' = '0' is not an integer >= 1, "
                                 "or empty for embed_dim");
  assert_null(torc_module_build("transformer_encoder_layer",
                                "d_model=8, nhead=2, activation=tanh"));
  assert_error(TORC_ERR_INVALID, "key 'activation' = 'tanh' is not relu or "
                                 "gelu");
  assert_null(torc_module_build("positional_embedding",
                                "kind=rope, max_len=4, d_model=2"));
  assert_error(TORC_ERR_INVALID, "key 'kind' = 'rope' is not learned or "
                                 "sinusoidal");
  assert_null(torc_module_build("embedding", "num_embeddings=5, "
                                             "embedding_dim=2, padding_idx=x"));
  assert_error(TORC_ERR_INVALID, "padding_idx");
  assert_null(torc_module_build("embedding", "num_embeddings=5, "
                                             "embedding_dim=2, padding_idx=5"));
  assert_error(TORC_ERR_INVALID, "padding_idx 5 is outside");

  /* a model file: positions, two causal encoder layers, a head */
  torc_config *cfg = torc_config_parse(
      "[model]\ninput = 6,8\n"
      "[layer]\ntype = positional_embedding\nkind = sinusoidal\n"
      "max_len = 16\nd_model = 8\n"
      "[layer]\ntype = transformer_encoder_layer\nd_model = 8\nnhead = 2\n"
      "dim_feedforward = 16\nbatch_first = yes\ncausal = yes\n"
      "[layer]\ntype = transformer_encoder_layer\nd_model = 8\nnhead = 2\n"
      "dim_feedforward = 16\nbatch_first = yes\ncausal = yes\n"
      "norm_first = yes\n"
      "[layer]\ntype = linear\nout_features = 3\n",
      "gpt.ini");
  assert_torc(cfg);
  m = torc_module_from_config(cfg, NULL, NULL);
  assert_torc(m);
  torc_config_free(cfg);
  r = torc_module_repr(m);
  assert_contains(r, "(0): positional_embedding(sinusoidal, 16, 8)");
  assert_contains(r, "(1): transformer_encoder_layer(\n");
  assert_contains(r, "(self_attn): multihead_attention(\n");
  free(r);
  int scope = torc_scope_begin();
  torc_tensor *y = torc_module_forward(
      m, torc_zeros(TORC_SHAPE(2, 6, 8), TORC_F32, TORC_CPU));
  assert_torc(y);
  assert_int_equal(torc_size(y, 2), 3);
  torc_scope_end(scope);
  torc_module_free(m);
}

/* ---- incremental decoding ---- */

static void seq_add(torc_module *seq, torc_module *m) {
  assert_ok(torc_sequential_append(seq, m));
}

/* embedding -> positional_embedding -> 2 causal encoder layers -> linear
 * (sinusoidal: the positions' table; else learned). */
static torc_module *causal_stack(int sinusoidal) {
  torc_module *seq = torc_sequential_new();
  seq_add(seq, torc_embedding_new(11, 8));
  seq_add(seq, torc_positional_embedding_new(
                   sinusoidal ? "sinusoidal" : "learned", 16, 8, 0.1));
  torc_transformer_layer_options o =
      torc_transformer_layer_options_default(8, 2);
  o.dim_feedforward = 16;
  o.batch_first = 1;
  o.causal = 1;
  seq_add(seq, torc_transformer_encoder_layer_new(&o));
  o.norm_first = 1;
  o.activation = "gelu";
  seq_add(seq, torc_transformer_encoder_layer_new(&o));
  seq_add(seq, torc_linear_new(8, 11, 1));
  torc_module_train(seq, 0);
  return seq;
}

/* embedding -> lstm (or gru; batch_first, 2 layers) -> linear. */
static torc_module *rnn_stack(int gru, int bidir) {
  torc_module *seq = torc_sequential_new();
  seq_add(seq, torc_embedding_new(11, 6));
  torc_rnn_options o = torc_rnn_options_default(5);
  o.input_size = 6;
  o.num_layers = 2;
  o.batch_first = 1;
  o.bidirectional = bidir;
  seq_add(seq, gru ? torc_gru_new(&o) : torc_lstm_new(&o));
  seq_add(seq, torc_linear_new(bidir ? 10 : 5, 11, 1));
  torc_module_train(seq, 0);
  return seq;
}

/* Runs model on tokens [N, T] whole, then under a decode in the chunks
 * `steps` (summing to T), and checks every chunk's output equals the
 * whole run's positions within 1e-5 and no module refused to cache. */
static void decode_check(torc_module *model, const torc_tensor *tokens,
                         const int *steps, int n_steps) {
  int scope = torc_scope_begin();
  torc_tensor *full = torc_module_forward(model, tokens);
  assert_torc(full);
  torc__decode *d = torc__decode_new();
  assert_non_null(d);
  torc__decode *outer = torc__decode_set_active(d);
  int64_t t = 0;
  for (int i = 0; i < n_steps; i++) {
    torc_tensor *y =
        torc_module_forward(model, torc_narrow(tokens, 1, t, steps[i]));
    if (y == NULL)
      print_error("step %d: %s\n", i, torc_last_error());
    assert_torc(y);
    double dmax = max_diff(y, torc_narrow(full, 1, t, steps[i]));
    if (dmax > 1e-5) {
      print_error("chunk %d (tokens %lld..%lld): max |step - whole| = %g\n",
                  i, (long long)t, (long long)(t + steps[i] - 1), dmax);
      fail();
    }
    torc__decode_advance(d, steps[i]);
    t += steps[i];
  }
  assert_null(torc__decode_why_uncacheable(d));
  /* cleared, it starts over */
  torc__decode_clear(d);
  torc_tensor *y = torc_module_forward(model, torc_narrow(tokens, 1, 0, 2));
  assert_true(max_diff(y, torc_narrow(full, 1, 0, 2)) < 1e-5);
  torc__decode_set_active(outer);
  torc__decode_free(d);
  torc_scope_end(scope);
}

static void test_decode(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t ids[] = {1, 4, 2, 9, 0, 3, 7, 5, 10, 2, 6, 8, 3, 3, 1, 0};
  torc_tensor *tok = torc_from_host(ids, TORC_SHAPE(2, 8), TORC_I64,
                                    TORC_CPU);
  static const int one[] = {1, 1, 1, 1, 1, 1, 1, 1};
  static const int chunks[] = {3, 2, 1, 2}; /* P > 0 with T > 1 */
  for (int sin_ = 0; sin_ < 2; sin_++) {
    torc_module *m = causal_stack(sin_);
    decode_check(m, tok, one, 8);
    decode_check(m, tok, chunks, 4);
    torc_module_free(m);
  }
  for (int gru = 0; gru < 2; gru++) {
    torc_module *m = rnn_stack(gru, 0);
    decode_check(m, tok, one, 8);
    decode_check(m, tok, chunks, 4);
    torc_module_free(m);
  }
  /* modules that cannot cache say why */
  torc_module *m = rnn_stack(0, 1);
  torc__decode *d = torc__decode_new();
  torc__decode *outer = torc__decode_set_active(d);
  assert_torc(torc_module_forward(m, torc_narrow(tok, 1, 0, 1)));
  assert_non_null(torc__decode_why_uncacheable(d));
  assert_contains(torc__decode_why_uncacheable(d), "bidirectional");
  torc_module_free(m);
  torc__decode_clear(d);
  torc_transformer_layer_options o =
      torc_transformer_layer_options_default(8, 2);
  o.batch_first = 1;
  m = torc_transformer_encoder_layer_new(&o);
  assert_torc(torc_module_forward(
      m, torc_zeros(TORC_SHAPE(2, 1, 8), TORC_F32, TORC_CPU)));
  assert_contains(torc__decode_why_uncacheable(d), "self_attn "
                                                   "(multihead_attention): "
                                                   "attention that is not "
                                                   "causal");
  torc_module_free(m);
  /* positions past max_len under a decode */
  torc__decode_clear(d);
  m = torc_positional_embedding_new("learned", 4, 8, 0);
  torc__decode_advance(d, 3);
  assert_null(torc_module_forward(
      m, torc_zeros(TORC_SHAPE(1, 2, 8), TORC_F32, TORC_CPU)));
  assert_error(TORC_ERR_SHAPE, "positions 3 .. 4 (after 3 decoded tokens) "
                               "go past max_len 4");
  torc_module_free(m);
  torc__decode_set_active(outer);
  torc__decode_free(d);
  torc_scope_end(scope);
}

/* For tests/test_transformer_torch.sh: every case built with torc's own
 * init (f32), its state dict under "CASE." and its eval-mode output on the
 * fixture's inputs (no masks) under "CASE.io.", in
 * $TORC_TRANSFORMER_EXPORT_DIR/transformer.torc.safetensors (read by
 * gen_transformer.py --check). */
static void test_export_for_pytorch(void **state) {
  (void)state;
  const char *dir = getenv("TORC_TRANSFORMER_EXPORT_DIR");
  assert_non_null(dir);
  torc_state_dict *sd = torc_state_dict_new();
  assert_non_null(sd);
  torc_module *mods[N_CASES];
  int scope = torc_scope_begin();
  static const char *const in_names[] = {"q", "k", "v", "src", "tgt",
                                         "memory"};
  for (int i = 0; i < N_CASES; i++) {
    const tf_case *c = &CASES[i];
    char p[64], key[96];
    mods[i] = build(c);
    torc_module_train(mods[i], 0);
    snprintf(p, sizeof p, "%s.", c->name);
    assert_ok(torc_module_state_dict(mods[i], p, sd));
    torc_tensor *in[6] = {NULL};
    for (int k = 0; k < 6; k++) {
      torc_tensor *t = fx_opt(c->name, in_names[k]);
      if (t == NULL)
        continue;
      in[k] = torc_to_dtype(t, TORC_F32);
      snprintf(key, sizeof key, "%sio.%s", p, in_names[k]);
      assert_ok(torc_state_dict_set(sd, key, in[k]));
    }
    torc_tensor *out = NULL;
    if (c->kind == MHA)
      assert_ok(torc_mha_forward(mods[i], in[0], in[1] ? in[1] : in[0],
                                 in[2] ? in[2] : in[0], NULL, NULL, 0, &out,
                                 NULL));
    else if (c->kind == ENC)
      out = torc_module_forward(mods[i], in[3]);
    else
      out = torc_module_forward_n(
          mods[i], (const torc_tensor *const[]){in[4], in[5]}, 2);
    assert_torc(out);
    snprintf(key, sizeof key, "%sio.out", p);
    assert_ok(torc_state_dict_set(sd, key, out));
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/transformer.torc.safetensors", dir);
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
  printf("max |torc - torch| (f64): outputs %.3g, weights %.3g, gradients "
         "%.3g\n",
         max_err[0], max_err[1], max_err[2]);
  torc_state_dict_free(fx);
  torc_safetensors_close(st);
  return test_teardown_all(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_shapes),
      cmocka_unit_test(test_against_pytorch),
      cmocka_unit_test(test_sim),
      cmocka_unit_test(test_forward_variants),
      cmocka_unit_test(test_default_init),
      cmocka_unit_test(test_repr),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_padding_idx),
      cmocka_unit_test(test_positional),
      cmocka_unit_test(test_ini),
      cmocka_unit_test(test_decode),
  };
  const struct CMUnitTest export_only[] = {
      cmocka_unit_test(test_export_for_pytorch),
  };
  const char *dir = getenv("TORC_TRANSFORMER_EXPORT_DIR");
  if (dir && *dir)
    return cmocka_run_group_tests_name("transformer export", export_only,
                                       setup, teardown);
  return cmocka_run_group_tests_name("transformer", tests, setup, teardown);
}
