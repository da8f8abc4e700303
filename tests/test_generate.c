/* tests/test_generate.c — the decoder and sampling of torc/generate.h:
 * cached steps against whole windows (a causal transformer stack and an
 * lstm, by prompt and token by token), past the window, a model the
 * decoder cannot cache (with its reason), greedy generation against the
 * argmax of whole forwards, a seed that repeats its text, top-k, logits in
 * [N, V, T], and every user error. */
#include <math.h>

#include "testutil.h"
#include "torc/generate.h"

#define V 11 /* the vocabulary */

static void seq_add(torc_module *seq, torc_module *m) {
  assert_ok(torc_sequential_append(seq, m));
}

/* embedding -> learned positions (max_len 16) -> 2 causal pre-norm
 * encoder layers -> linear; causal 0 makes the attention see every
 * position (a model the decoder cannot cache). */
static torc_module *gpt(int causal) {
  torc_manual_seed(5);
  torc_module *seq = torc_sequential_new();
  seq_add(seq, torc_embedding_new(V, 8));
  seq_add(seq, torc_positional_embedding_new("learned", 16, 8, 0));
  torc_transformer_layer_options o =
      torc_transformer_layer_options_default(8, 2);
  o.dim_feedforward = 16;
  o.dropout = 0.1; /* off in eval mode, which the decoder sets */
  o.batch_first = 1;
  o.norm_first = 1;
  o.causal = causal;
  seq_add(seq, torc_transformer_encoder_layer_new(&o));
  seq_add(seq, torc_transformer_encoder_layer_new(&o));
  seq_add(seq, torc_linear_new(8, V, 1));
  return seq;
}

static torc_module *lstm(void) {
  torc_manual_seed(6);
  torc_module *seq = torc_sequential_new();
  seq_add(seq, torc_embedding_new(V, 6));
  torc_rnn_options o = torc_rnn_options_default(7);
  o.input_size = 6;
  o.batch_first = 1;
  o.num_layers = 2;
  seq_add(seq, torc_lstm_new(&o));
  seq_add(seq, torc_linear_new(7, V, 1));
  return seq;
}

static double max_diff(const torc_tensor *a, const torc_tensor *b) {
  int s = torc_scope_begin();
  double d = NAN;
  torc_item(torc_amax(torc_abs(torc_sub(a, b)), NULL, 0, 0), &d);
  torc_scope_end(s);
  return d;
}

static const int64_t IDS[2][12] = {{1, 4, 2, 9, 0, 3, 7, 5, 10, 2, 6, 8},
                                   {3, 3, 1, 0, 5, 9, 2, 2, 4, 10, 7, 1}};

/* The logits of a decoder fed IDS as a prompt of `prompt` tokens, then
 * one token at a time, stacked [2, 12, V]. */
static torc_tensor *decode_all(torc_decoder *d, int prompt) {
  torc_tensor *ids = torc_from_host(IDS, TORC_SHAPE(2, 12), TORC_I64,
                                    TORC_CPU);
  torc_tensor *parts[12];
  int n = 0;
  torc_decoder_reset(d);
  parts[n] = torc_decoder_step(d, torc_narrow(ids, 1, 0, prompt));
  assert_torc(parts[n]);
  n++;
  for (int t = prompt; t < 12; t++) {
    parts[n] = torc_decoder_step(d, torc_narrow(ids, 1, t, 1));
    assert_torc(parts[n]);
    n++;
  }
  return torc_cat((const torc_tensor *const *)parts, n, 1);
}

/* Cached steps equal the model's whole forward and the decoder with its
 * cache off, by prompt and token by token. */
static void check_cached(torc_module *m) {
  int s = torc_scope_begin();
  torc_module_train(m, 0);
  torc_tensor *ids = torc_from_host(IDS, TORC_SHAPE(2, 12), TORC_I64,
                                    TORC_CPU);
  torc_tensor *whole = torc_module_forward(m, ids);
  assert_torc(whole);
  torc_decoder *d = torc_decoder_new(m, 16, -1);
  assert_non_null(d);
  for (int prompt = 1; prompt <= 5; prompt += 4) {
    torc_tensor *y = decode_all(d, prompt);
    assert_true(torc_decoder_cached(d, NULL));
    assert_true(max_diff(y, whole) < 1e-5);
  }
  torc_decoder_use_cache(d, 0);
  const char *why = NULL;
  assert_false(torc_decoder_cached(d, &why));
  assert_contains(why, "turned off");
  assert_true(max_diff(decode_all(d, 3), whole) < 1e-5);
  torc_decoder_use_cache(d, 1);
  assert_true(torc_decoder_cached(d, NULL));
  torc_decoder_free(d);
  torc_scope_end(s);
}

static void test_cached_steps(void **state) {
  (void)state;
  torc_module *m = gpt(1);
  check_cached(m);
  torc_module_free(m);
  m = lstm();
  check_cached(m);
  torc_module_free(m);
}

/* Past the window (context 8, 12 tokens): the cached decoder re-reads the
 * last 4 tokens (5..8) at the 9th and goes on from there; whole windows
 * slide a token at a time. */
static void test_window(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_module *m = gpt(1);
  torc_module_train(m, 0);
  torc_decoder *d = torc_decoder_new(m, 8, -1);
  torc_tensor *y = decode_all(d, 1);
  torc_tensor *ids = torc_from_host(IDS, TORC_SHAPE(2, 12), TORC_I64,
                                    TORC_CPU);
  /* the first 8 positions as one window */
  torc_tensor *w0 = torc_module_forward(m, torc_narrow(ids, 1, 0, 8));
  assert_true(max_diff(torc_narrow(y, 1, 0, 8), w0) < 1e-5);
  /* then tokens 8..11 seen from token 5 on: the window restarted there */
  torc_tensor *w1 = torc_module_forward(m, torc_narrow(ids, 1, 5, 7));
  assert_true(max_diff(torc_narrow(y, 1, 8, 4), torc_narrow(w1, 1, 3, 4)) <
              1e-5);
  /* whole windows slide: token 11 sees tokens 4..11, token 9 2..9 */
  torc_decoder_use_cache(d, 0);
  y = decode_all(d, 1);
  torc_tensor *w2 = torc_module_forward(m, torc_narrow(ids, 1, 4, 8));
  assert_true(max_diff(torc_narrow(y, 1, 11, 1), torc_narrow(w2, 1, 7, 1)) <
              1e-5);
  torc_tensor *w3 = torc_module_forward(m, torc_narrow(ids, 1, 2, 8));
  assert_true(max_diff(torc_narrow(y, 1, 9, 1), torc_narrow(w3, 1, 7, 1)) <
              1e-5);
  torc_decoder_free(d);
  torc_module_free(m);
  torc_scope_end(s);
}

/* Non-causal attention: the first step finds it out, says why, and runs
 * whole windows, which equal the forward's last positions. */
static void test_uncacheable(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_module *m = gpt(0);
  torc_module_train(m, 0);
  torc_decoder *d = torc_decoder_new(m, 0, -1);
  assert_true(torc_decoder_cached(d, NULL)); /* not known before a step */
  torc_tensor *ids = torc_from_host(IDS, TORC_SHAPE(2, 12), TORC_I64,
                                    TORC_CPU);
  torc_tensor *y = torc_decoder_step(d, torc_narrow(ids, 1, 0, 5));
  assert_torc(y);
  const char *why = NULL;
  assert_false(torc_decoder_cached(d, &why));
  assert_contains(why, "not causal");
  y = torc_decoder_step(d, torc_narrow(ids, 1, 5, 1));
  torc_tensor *whole = torc_module_forward(m, torc_narrow(ids, 1, 0, 6));
  assert_true(max_diff(y, torc_narrow(whole, 1, 5, 1)) < 1e-5);
  torc_decoder_free(d);
  torc_module_free(m);
  /* a conv1d is not known to be causal: whole windows from the start */
  torc_module *c = torc_sequential_new();
  seq_add(c, torc_embedding_new(V, 4));
  seq_add(c, torc_conv1d_new(4, 4, 3, NULL, 1));
  d = torc_decoder_new(c, 0, -1);
  assert_false(torc_decoder_cached(d, &why));
  assert_contains(why, "1 (conv1d) is not known to see only earlier "
                       "positions");
  torc_decoder_free(d);
  torc_module_free(c);
  torc_scope_end(s);
}

/* The likeliest token after each prefix, from whole forwards. */
static int64_t argmax_last(torc_module *m, const int64_t *seq, int64_t n) {
  int s = torc_scope_begin();
  torc_tensor *y = torc_module_forward(
      m, torc_from_host(seq, TORC_SHAPE(1, n), TORC_I64, TORC_CPU));
  torc_tensor *last = torc_select(torc_select(y, 0, 0), 0, n - 1);
  int64_t best = -1;
  assert_ok(torc_to_host(torc_argmax(last, NULL, 0), &best, sizeof best));
  torc_scope_end(s);
  return best;
}

static void test_generate_greedy_and_seeded(void **state) {
  (void)state;
  torc_module *m = gpt(1);
  torc_module_train(m, 1); /* torc_generate evaluates, then restores */
  torc_decoder *d = torc_decoder_new(m, 16, -1);
  torc_generate_options o = torc_generate_options_default();
  o.max_new_tokens = 9;
  o.temperature = 0;
  int64_t prompt[3] = {4, 1, 7}, out[9], n = 0;
  assert_ok(torc_generate(d, prompt, 3, &o, out, &n));
  assert_int_equal(n, 9);
  assert_true(torc_module_is_training(m));
  torc_module_train(m, 0);
  int64_t seq[12] = {4, 1, 7};
  for (int i = 0; i < 9; i++) {
    assert_int_equal(out[i], argmax_last(m, seq, 3 + i));
    seq[3 + i] = out[i];
  }
  /* sampled: a seed repeats its tokens; top_k 1 is greedy */
  o.temperature = 1.5;
  o.seed = 42;
  int64_t a[9], b[9], g[9];
  assert_ok(torc_generate(d, prompt, 3, &o, a, NULL));
  assert_ok(torc_generate(d, prompt, 3, &o, b, NULL));
  assert_memory_equal(a, b, sizeof a);
  o.top_k = 1;
  assert_ok(torc_generate(d, prompt, 3, &o, g, NULL));
  assert_memory_equal(g, out, sizeof g);
  for (int i = 0; i < 9; i++)
    assert_true(a[i] >= 0 && a[i] < V);
  /* a prompt longer than the window: its last 16 tokens are what counts */
  int64_t longp[20] = {9, 9, 9, 9, 4, 1, 7, 2, 0, 3, 5, 8, 6, 10, 2, 2,
                       1, 4, 1, 7};
  int64_t w16[9], l20[9];
  o.temperature = 0;
  o.top_k = 0;
  assert_ok(torc_generate(d, longp + 4, 16, &o, w16, NULL));
  assert_ok(torc_generate(d, longp, 20, &o, l20, NULL));
  assert_memory_equal(w16, l20, sizeof w16);
  torc_decoder_reset(d);
  int sc = torc_scope_begin();
  assert_null(torc_decoder_step(
      d, torc_from_host(longp, TORC_SHAPE(1, 20), TORC_I64, TORC_CPU)));
  assert_error(TORC_ERR_SHAPE, "holds 20 new tokens, more than the model's "
                               "window of 16");
  torc_scope_end(sc);
  torc_decoder_free(d);
  torc_module_free(m);
}

/* The callback sees each token and may stop generation. */
static int stop_at_3(void *user, int64_t tok) {
  (void)tok;
  return ++*(int *)user == 3;
}

static void test_callback_and_layout(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_module *m = lstm();
  torc_decoder *d = torc_decoder_new(m, 0, -1);
  torc_generate_options o = torc_generate_options_default();
  int seen = 0;
  o.on_token = stop_at_3;
  o.user = &seen;
  int64_t prompt[1] = {2}, out[100], n = 0;
  assert_ok(torc_generate(d, prompt, 1, &o, out, &n));
  assert_int_equal(n, 3);
  assert_int_equal(seen, 3);
  torc_decoder_free(d);
  torc_module_free(m);
  m = lstm();
  torc_module_train(m, 0);
  torc_tensor *ids = torc_from_host(IDS, TORC_SHAPE(2, 12), TORC_I64,
                                    TORC_CPU);
  /* logits [N, T, V] read as [N, V, T] (class_dim 1): caught */
  d = torc_decoder_new(m, 0, 1);
  assert_null(torc_decoder_step(d, torc_narrow(ids, 1, 0, 3)));
  assert_error(TORC_ERR_SHAPE, "the model turned token ids [2, 3] into "
                               "[2, 3, 11]; a language model gives logits "
                               "[N, V, T] (class_dim 1)");
  torc_decoder_free(d);
  torc_module_free(m);
  torc_scope_end(s);
}

static void test_errors(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_module *m = lstm();
  assert_null(torc_decoder_new(NULL, 0, -1));
  assert_null(torc_decoder_new(m, 1, -1));
  assert_error(TORC_ERR_INVALID, "context is 1 and class_dim -1; give "
                                 "context 0 (no limit) or at least 2");
  assert_null(torc_decoder_new(m, 8, 2));
  torc_decoder *d = torc_decoder_new(m, 0, -1);
  assert_null(torc_decoder_step(
      d, torc_zeros(TORC_SHAPE(2, 3), TORC_F32, TORC_CPU)));
  assert_error(TORC_ERR_SHAPE, "ids must be i64 [N, T] with N, T >= 1 (N "
                               "sequences, T new tokens each), got f32 "
                               "[2, 3]");
  assert_null(torc_decoder_step(
      d, torc_zeros(TORC_SHAPE(2, 0), TORC_I64, TORC_CPU)));
  assert_torc(torc_decoder_step(
      d, torc_zeros(TORC_SHAPE(2, 3), TORC_I64, TORC_CPU)));
  assert_null(torc_decoder_step(
      d, torc_zeros(TORC_SHAPE(3, 1), TORC_I64, TORC_CPU)));
  assert_error(TORC_ERR_SHAPE, "the decoder holds 2 sequences but ids [3, "
                               "1] has 3; give 2, or torc_decoder_reset "
                               "first");
  torc_decoder_reset(d);
  assert_torc(torc_decoder_step(
      d, torc_zeros(TORC_SHAPE(3, 1), TORC_I64, TORC_CPU)));
  /* an id the embedding lacks: the model's own error */
  int64_t big = V;
  assert_null(torc_decoder_step(
      d, torc_from_host((int64_t[3]){0, big, 1}, TORC_SHAPE(3, 1), TORC_I64,
                        TORC_CPU)));
  assert_error(TORC_ERR_RANGE, "index 11 is out of range");
  torc_generate_options o = torc_generate_options_default();
  int64_t p[1] = {0}, out[4];
  o.max_new_tokens = 0;
  assert_int_equal(torc_generate(d, p, 1, &o, out, NULL), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "max_new_tokens 0");
  o = torc_generate_options_default();
  o.temperature = -1;
  assert_int_equal(torc_generate(d, p, 1, &o, out, NULL), TORC_ERR_INVALID);
  o.temperature = NAN;
  assert_int_equal(torc_generate(d, p, 1, &o, out, NULL), TORC_ERR_INVALID);
  o = torc_generate_options_default();
  assert_int_equal(torc_generate(d, p, 0, &o, out, NULL), TORC_ERR_INVALID);
  torc_clear_error();
  assert_int_not_equal(torc_generate(NULL, p, 1, &o, out, NULL), TORC_OK);
  assert_contains(torc_last_error(), "torc_generate");
  torc_decoder_free(d);
  torc_decoder_free(NULL);
  torc_module_free(m);
  torc_scope_end(s);
}

static int setup(void **state) {
  (void)state;
  return torc_plugin_load("ref", NULL) == TORC_OK ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cached_steps),
      cmocka_unit_test(test_window),
      cmocka_unit_test(test_uncacheable),
      cmocka_unit_test(test_generate_greedy_and_seeded),
      cmocka_unit_test(test_callback_and_layout),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, test_teardown_all);
}
