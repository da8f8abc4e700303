/* tests/test_train_split.c — the validation split [data.train]
 * valid_fraction carves: the training and validation loaders share no
 * sample and together hold every one (of the first `limit`), the split is
 * the same whatever the shuffle and the workers, it moves with [torc]
 * seed, and the validation part is read in order, every sample once.
 */
#include "testutil.h"

/* A config of 40 samples of 4 features (limit 40 of 50), a quarter held
 * out; `extra` goes into [data.train]. */
static torc_config *config(unsigned seed, const char *extra) {
  char ini[2048];
  snprintf(ini, sizeof ini,
           "[torc]\nseed = %u\n"
           "[plugin.ref]\nmodule = ref\n[plugin.data]\nmodule = data\n"
           "[data.train]\nsource = synthetic\nshape = 4\nclasses = 3\n"
           "samples = 50\nlimit = 40\nbatch_size = 7\nvalid_fraction = 0.25\n"
           "%s",
           seed, extra);
  torc_config *cfg = torc_config_parse(ini, "split.ini");
  assert_torc(cfg);
  assert_ok(torc_config_apply(cfg));
  return cfg;
}

/* The first feature of every sample the loader's epoch 0 gives, in
 * order: a fingerprint of each sample (synthetic features are draws from
 * a continuous distribution). */
static int samples_of(torc_loader *ld, double *out, int max) {
  int n = 0;
  torc_batch b = {0};
  assert_ok(torc_loader_start(ld, 0, 0));
  while (torc_loader_next(ld, &b) == 1) {
    torc_tensor *x = torc_to_dtype(b.input, TORC_F64);
    assert_torc(x);
    const double *v = torc_data(torc_contiguous(x));
    for (int64_t i = 0; i < torc_shape(x)[0] && n < max; i++)
      out[n++] = v[i * 4];
    torc_batch_clear(&b);
  }
  return n;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The sorted fingerprints of [data.train]'s part `name`. */
static int part(unsigned seed, const char *extra, const char *name,
                double *out) {
  torc_config *cfg = config(seed, extra);
  int scope = torc_scope_begin();
  torc_loader *ld = torc_loader_from_config(cfg, name, TORC_CPU);
  assert_torc(ld);
  int n = samples_of(ld, out, 64);
  torc_scope_end(scope);
  torc_loader_free(ld);
  torc_config_free(cfg);
  qsort(out, (size_t)n, sizeof *out, cmp_double);
  return n;
}

static void test_disjoint_and_whole(void **state) {
  (void)state;
  double tr[64], va[64], all[128];
  int nt = part(1, "", "train", tr), nv = part(1, "", "valid", va);
  assert_int_equal(nv, 10); /* a quarter of the first 40 */
  assert_int_equal(nt, 30);
  for (int i = 0; i < nt; i++)
    for (int j = 0; j < nv; j++)
      if (tr[i] == va[j])
        fail_msg("sample %.17g is in both parts", tr[i]);
  /* Together: the first 40 samples, as a plain loader with limit 40 reads
   * them. */
  char ini[1024];
  snprintf(ini, sizeof ini,
           "[plugin.ref]\nmodule = ref\n[plugin.data]\nmodule = data\n"
           "[torc]\nseed = 1\n"
           "[data.train]\nsource = synthetic\nshape = 4\nclasses = 3\n"
           "samples = 50\nlimit = 40\nbatch_size = 7\n");
  torc_config *cfg = torc_config_parse(ini, "whole.ini");
  assert_torc(cfg);
  assert_ok(torc_config_apply(cfg));
  int scope = torc_scope_begin();
  torc_loader *ld = torc_loader_from_config(cfg, "train", TORC_CPU);
  assert_torc(ld);
  int na = samples_of(ld, all, 128);
  torc_scope_end(scope);
  torc_loader_free(ld);
  torc_config_free(cfg);
  assert_int_equal(na, 40);
  double both[128];
  memcpy(both, tr, sizeof(double) * (size_t)nt);
  memcpy(both + nt, va, sizeof(double) * (size_t)nv);
  qsort(both, 40, sizeof *both, cmp_double);
  qsort(all, 40, sizeof *all, cmp_double);
  for (int i = 0; i < 40; i++)
    assert_true(both[i] == all[i]);
}

static void test_fixed_by_the_seed(void **state) {
  (void)state;
  double a[64], b[64], c[64];
  int na = part(1, "", "valid", a);
  int nb = part(1, "shuffle = yes\nworkers = 2\n", "valid", b);
  assert_int_equal(na, nb);
  for (int i = 0; i < na; i++)
    assert_true(a[i] == b[i]);
  /* Another seed draws other data and another split; the split alone is
   * checked by the training part's size staying 30. */
  assert_int_equal(part(2, "", "train", c), 30);
}

static void test_valid_in_order(void **state) {
  (void)state;
  /* The validation loader ignores shuffle: two epochs give the same
   * order. */
  torc_config *cfg = config(3, "shuffle = yes\n");
  int scope = torc_scope_begin();
  torc_loader *ld = torc_loader_from_config(cfg, "valid", TORC_CPU);
  assert_torc(ld);
  double e0[64], e1[64];
  int n0 = samples_of(ld, e0, 64);
  int n1 = 0;
  torc_batch bt = {0};
  assert_ok(torc_loader_start(ld, 1, 0));
  while (torc_loader_next(ld, &bt) == 1) {
    torc_tensor *x = torc_to_dtype(bt.input, TORC_F64);
    const double *v = torc_data(torc_contiguous(x));
    for (int64_t i = 0; i < torc_shape(x)[0]; i++)
      e1[n1++] = v[i * 4];
    torc_batch_clear(&bt);
  }
  assert_int_equal(n0, n1);
  for (int i = 0; i < n0; i++)
    assert_true(e0[i] == e1[i]);
  torc_scope_end(scope);
  torc_loader_free(ld);
  torc_config_free(cfg);
}

static void test_only_in_train(void **state) {
  (void)state;
  const char *ini =
      "[plugin.data]\nmodule = data\n"
      "[data.test]\nsource = synthetic\nshape = 4\nclasses = 3\n"
      "samples = 8\nvalid_fraction = 0.5\n";
  torc_config *cfg = torc_config_parse(ini, "bad.ini");
  assert_torc(cfg);
  assert_ok(torc_config_apply(cfg));
  assert_null(torc_loader_from_config(cfg, "test", TORC_CPU));
  assert_int_equal(torc_last_status(), TORC_ERR_CONFIG);
  assert_non_null(strstr(torc_last_error(), "bad.ini:"));
  assert_non_null(strstr(torc_last_error(), "set it there"));
  torc_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_disjoint_and_whole),
      cmocka_unit_test(test_fixed_by_the_seed),
      cmocka_unit_test(test_valid_in_order),
      cmocka_unit_test(test_only_in_train),
  };
  return cmocka_run_group_tests(tests, NULL, test_teardown_all);
}
