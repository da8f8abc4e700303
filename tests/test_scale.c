/* tests/test_scale.c — models and configuration files of 100,000 layers:
 * reading, building, printing and running them takes a number of steps
 * linear in the layers (n log n for the INI reader's check of repeated
 * sections), counted by the core's step counters rather than timed.
 */
#include "testutil.h"

/* torc__config_work and torc__module_work: the steps of the core's
 * searches whose length grows with the model. */
#include "../core/internal.h"
#include "../core/module_internal.h"

/* 100,000 layers; valgrind runs about fifty times slower: 20,000 there. */
static int layers(void) {
  const char *vg = getenv("TORC_VALGRIND");
  return vg && strcmp(vg, "1") == 0 ? 20000 : 100000;
}

/* A growing string for the INI texts. */
typedef struct text {
  char *s;
  size_t n, cap;
} text;

static void put(text *t, const char *fmt, ...) TORC_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  assert_true(w >= 0);
  if (t->n + (size_t)w + 1 > t->cap) {
    t->cap = 2 * (t->n + (size_t)w + 1);
    t->s = realloc(t->s, t->cap);
    assert_non_null(t->s);
  }
  va_start(ap, fmt);
  vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
  va_end(ap);
  t->n += (size_t)w;
}

/* A model of n [layer] sections, as a user would write it: linear, relu,
 * identity and an add reaching back two layers, repeated. With a search
 * per layer over the layers before it (the name check of each append, the
 * release check of each forward), 100,000 layers took minutes. */
static void test_deep_model(void **state) {
  (void)state;
  static const char *const layer[4] = {
      "[layer]\ntype = linear\nout_features = 8\n", "[layer]\ntype = relu\n",
      "[layer]\ntype = identity\n", "[layer]\ntype = add\nfrom = -2\n"};
  int n = layers();
  text t = {0};
  put(&t, "[model]\ninput = 8\n");
  for (int i = 0; i < n; i++)
    put(&t, "%s", layer[i % 4]);
  uint64_t work0 = torc__module_work();
  torc_config *cfg = torc_config_parse(t.s, "deep.ini");
  free(t.s);
  assert_torc(cfg);
  torc_module *m = torc_module_from_config(cfg, NULL, NULL); /* + a dry run */
  torc_config_free(cfg);
  assert_torc(m);
  assert_int_equal(torc_module_child_count(m), n);
  char name[32], want[96];
  snprintf(name, sizeof name, "%d", n - 1);
  assert_string_equal(torc_module_type_name(torc_module_child(m, name)),
                      "add");
  snprintf(name, sizeof name, "%d", n / 2);
  assert_ptr_equal(torc_module_find(m, name), torc_module_child_at(m, n / 2));
  assert_null(torc_module_find(m, "100000000"));
  assert_contains(torc_last_error(), "has no child '100000000'");

  torc_named_tensor *p;
  int np = torc_module_named_parameters(m, &p);
  assert_int_equal(np, n / 2);
  snprintf(want, sizeof want, "%d.bias", n - 4);
  assert_string_equal(p[np - 1].name, want);
  torc_named_tensors_free(p, np);

  char *r = torc_module_repr(m);
  assert_torc(r);
  snprintf(want, sizeof want, "\n  (%d): add(from=-2)\n)", n - 1);
  assert_true(strlen(r) > strlen(want));
  assert_string_equal(r + strlen(r) - strlen(want), want);
  free(r);
  torc_tensor *x = torc_zeros(TORC_SHAPE(1, 8), TORC_F32, TORC_CPU);
  char *s = torc_module_summary(m, x);
  assert_torc(s);
  snprintf(want, sizeof want, "\n  %d (add) ", n - 1);
  assert_contains(s, want);
  int total = n / 4 * 72; /* 72 per linear: 360,000 or 1,800,000 */
  if (total >= 1000000)
    snprintf(want, sizeof want, "Total params: %d,%03d,%03d\n",
             total / 1000000, total / 1000 % 1000, total % 1000);
  else
    snprintf(want, sizeof want, "Total params: %d,%03d\n", total / 1000,
             total % 1000);
  assert_contains(s, want);
  free(s);

  /* One training forward (with autograd), through all the layers. */
  torc_tensor *y = torc_module_forward(m, x);
  assert_torc(y);
  assert_int_equal(torc_ndim(y), 2);
  assert_int_equal(torc_size(y, 1), 8);
  torc_release(y);
  torc_release(x);
  torc_module_free(m);

  /* n appends and three forwards: a few steps for each layer. */
  uint64_t work = torc__module_work() - work0;
  if (work > 32 * (uint64_t)n) {
    print_error("%llu search steps for %d layers (%.0f per layer): some "
                "step is not linear in the number of layers\n",
                (unsigned long long)work, n, (double)work / n);
    fail();
  }
}

/* Parses t's text as cfg.ini (and frees it): the parse must fail with a
 * TORC_ERR_CONFIG error holding `want`. The INI reader's steps it took. */
static uint64_t parse_refused(text *t, const char *want) {
  uint64_t work0 = torc__config_work();
  torc_config *cfg = torc_config_parse(t->s, "cfg.ini");
  uint64_t work = torc__config_work() - work0;
  free(t->s);
  assert_null(cfg);
  assert_error(TORC_ERR_CONFIG, want);
  return work;
}

/* n [layer] sections then n [model] sections: each [model] after the
 * first is reported against the first, found without comparing it with
 * every section before it. */
static void test_repeated_sections(void **state) {
  (void)state;
  int n = layers();
  text t = {0};
  for (int i = 0; i < n; i++)
    put(&t, "[layer]\ntype = relu\n");
  for (int i = 0; i < n; i++)
    put(&t, "[model]\ninput = 8\n");
  char want[160];
  snprintf(want, sizeof want,
           "cfg.ini:%d: section [model] given twice (first at line %d); it "
           "may appear once: merge the two",
           2 * n + 3, 2 * n + 1);
  uint64_t work = parse_refused(&t, want);
  if (work > 32 * 2 * (uint64_t)n) { /* a sort: 2n log2(2n) at most */
    print_error("%llu name comparisons for %d sections\n",
                (unsigned long long)work, 2 * n);
    fail();
  }
}

/* One section of n keys, then the first key again: each key is checked
 * against those before it through an index, not one by one. */
static void test_many_keys(void **state) {
  (void)state;
  int n = layers();
  text t = {0};
  put(&t, "[layer]\ntype = relu\n");
  for (int i = 0; i < n; i++)
    put(&t, "k%d = %d\n", i, i);
  put(&t, "k0 = again\n");
  char want[160];
  snprintf(want, sizeof want,
           "cfg.ini:%d: key 'k0' in [layer]: given twice in this section "
           "(first at line 3); keep one",
           n + 3);
  uint64_t work = parse_refused(&t, want);
  if (work > 8 * (uint64_t)n) {
    print_error("%llu key comparisons for %d keys\n",
                (unsigned long long)work, n);
    fail();
  }
}

static int setup_ref(void **state) {
  (void)state;
  if (torc_plugin_load("ref", NULL) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_deep_model, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test(test_repeated_sections),
      cmocka_unit_test(test_many_keys),
  };
  return cmocka_run_group_tests(tests, setup_ref, test_teardown_all);
}
