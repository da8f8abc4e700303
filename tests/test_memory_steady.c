/* tests/test_memory_steady.c — the caching allocator's steady state in a
 * real training step on sim: a run built from an INI text as `torc train`
 * builds it (the model, a loader feeding the device, the loss, Adam,
 * gradient clipping) takes 20 steps, and from step 2 on neither the bytes
 * reserved nor the count of segments taken from the device move, while
 * every step's storages come from the cache. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>

#include "testutil.h"
#include "sim_testutil.h"

static const char ini[] =
    "[torc]\n"
    "seed = 11\n"
    "[plugin.ref]\nmodule = ref\n"
    "[plugin.sim]\nmodule = sim\nmemory = 256M\n"
    "[plugin.data]\nmodule = data\n"
    "[plugin.losses]\nmodule = losses\n"
    "[plugin.optim]\nmodule = optim\n"
    "[device]\ntype = sim\n"
    "[data.train]\nsource = synthetic\nshape = 128\nclasses = 5\n"
    "samples = 96\nbatch_size = 32\nshuffle = yes\n"
    "[model]\ninput = 128\n"
    "[layer]\ntype = linear\nout_features = 4096\n"
    "[layer]\ntype = relu\n"
    "[layer]\ntype = dropout\np = 0.25\n"
    "[layer]\ntype = linear\nout_features = 5\n"
    "[loss]\ntype = cross_entropy\n"
    "[optimizer]\ntype = adam\nlr = 0.001\nweight_decay = 0.01\n";

static torc_config *cfg;

static int setup(void **state) {
  (void)state;
  cfg = torc_config_parse(ini, "steady.ini");
  if (cfg == NULL || torc_config_apply(cfg) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  torc_config_free(cfg);
  torc_shutdown();
  return 0;
}

static torc_memory_stats2 stats(torc_device dev) {
  torc_memory_stats2 s = {.struct_size = sizeof s};
  assert_ok(torc_device_memory_stats2(dev, &s));
  return s;
}

/* One step as the trainer takes it: forward, loss, zero_grad, backward,
 * clip_grad_norm, the loss read back, the update. */
static void step(torc_module *m, torc_loss *loss_fn, torc_optimizer *opt,
                 torc_loader *ld) {
  torc_batch b = {0};
  int got = torc_loader_next(ld, &b);
  if (got == 0) { /* the epoch's end: the next one */
    assert_ok(torc_loader_start(ld, 1, 0));
    got = torc_loader_next(ld, &b);
  }
  assert_int_equal(got, 1);
  int scope = torc_scope_begin();
  torc_tensor *out = torc_module_forward(m, b.input);
  assert_torc(out);
  torc_tensor *loss = torc_loss_forward(loss_fn, out, b.target);
  assert_torc(loss);
  assert_ok(torc_optimizer_zero_grad(opt, 1));
  assert_ok(torc_backward(loss, NULL, 0));
  assert_ok(torc_module_clip_grad_norm(m, 1.0, 2, 0, NULL));
  double lv;
  assert_ok(torc_item(loss, &lv));
  assert_true(lv == lv);
  assert_ok(torc_optimizer_step(opt));
  torc_scope_end(scope);
  torc_batch_clear(&b);
}

static void test_training_steps_take_no_new_memory(void **state) {
  (void)state;
  torc_device sim;
  assert_ok(torc_config_device(cfg, &sim));
  assert_int_equal(stats(sim).caching, TORC_CACHING_BLOCKS);
  torc_module *m = torc_module_from_config(cfg, NULL, NULL);
  assert_torc(m);
  assert_ok(torc_module_to(m, sim));
  torc_module_train(m, 1);
  torc_loader *ld = torc_loader_from_config(cfg, "train", sim);
  assert_torc(ld);
  torc_loss *loss_fn = torc_loss_from_config(cfg);
  assert_torc(loss_fn);
  torc_optimizer *opt = torc_optimizer_from_config(cfg, m);
  assert_torc(opt);
  assert_ok(torc_loader_start(ld, 0, 0));

  step(m, loss_fn, opt, ld); /* Adam's moments are made here */
  step(m, loss_fn, opt, ld);
  assert_ok(torc_synchronize(sim));
  torc_memory_stats2 s2 = stats(sim);
  /* the first weight (128 x 4096 floats, 2 MiB) and its gradient and
   * moments are in the large pool, the rest in the small one */
  assert_true(s2.pool_reserved[0].current > 0);
  assert_true(s2.pool_reserved[1].current > 0);
  print_message("after step 2: %zu bytes allocated, %zu reserved in %llu "
                "segments\n",
                s2.allocated, s2.reserved,
                (unsigned long long)s2.segment_allocs);
  size_t allocated[21] = {0};
  allocated[2] = s2.allocated;
  for (int k = 3; k <= 20; k++) {
    step(m, loss_fn, opt, ld);
    assert_ok(torc_synchronize(sim));
    torc_memory_stats2 s = stats(sim);
    if (s.reserved != s2.reserved || s.segment_allocs != s2.segment_allocs) {
      print_error("step %d: reserved %zu in %llu segments; after step 2 %zu "
                  "in %llu\n",
                  k, s.reserved, (unsigned long long)s.segment_allocs,
                  s2.reserved, (unsigned long long)s2.segment_allocs);
      fail();
    }
    assert_int_equal(s.segment_frees, s2.segment_frees);
    /* The loader holds the next batch on the device except after an
     * epoch's last one (3 batches an epoch): the same place in an epoch
     * holds the same bytes. */
    allocated[k] = s.allocated;
    if (k >= 5)
      assert_int_equal(s.allocated, allocated[k - 3]);
    assert_int_equal(s.oom_count, 0);
  }
  torc_memory_stats2 s20 = stats(sim);
  /* the 18 steps allocated storages, every one served by the cache */
  uint64_t allocs = s20.alloc_count - s2.alloc_count;
  assert_true(allocs >= 18 * 10);
  assert_int_equal(s20.cache_hits - s2.cache_hits, allocs);
  assert_true(s20.peak_reserved == s2.reserved);

  torc_optimizer_free(opt);
  torc_loss_free(loss_fn);
  torc_loader_free(ld);
  torc_module_free(m);
  assert_ok(torc_synchronize(sim));
  assert_int_equal(stats(sim).allocated, 0);
  /* empty_cache gives every segment back */
  assert_ok(torc_device_empty_cache(sim));
  assert_int_equal(stats(sim).reserved, 0);
}

int main(void) {
  const char *no_cache = getenv("TORC_NO_CACHE");
#ifdef TORC_SANITIZE
  no_cache = "1";
#endif
  if (no_cache && *no_cache && strcmp(no_cache, "0") != 0) {
    printf("caching is off (TORC_NO_CACHE or a sanitizer build): no steady "
           "state to test\n");
    return TEST_SKIP_STATUS;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_training_steps_take_no_new_memory),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
