/* tests/test_nosync.c — a training step that waits on nothing: the MLP and
 * the CNN of examples/fashion-mnist trained on sim, the host's waits (sim's
 * counters) read at every step; the deferred non-finite-loss guard names
 * the step a run with log_every = 1 names, on the cpu and on sim; index
 * errors reported at once on the cpu, at the next read on sim; the foreach
 * ops and optimizer steps with the per-tensor bits in one kernel, the
 * clip in a fixed number, and torc_optimizer_step_if's skipped step.
 */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim_testutil.h"
#include "testutil.h"

static char tmpdir[512];

/* The [model] .. [optimizer] sections of examples/fashion-mnist/NAME.ini
 * (the layers, the loss and the optimizer) into buf. */
static void example_model(const char *name, char *buf, size_t size) {
  const char *top = getenv("TORC_TOP_SRCDIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/fashion-mnist/%s.ini",
           top ? top : ".", name);
  size_t n = 0;
  char *text = (char *)test_read_file(path, &n);
  assert_non_null(text);
  text[n] = '\0';
  const char *a = strstr(text, "\n[model]");
  const char *b = a ? strstr(a, "\n[scheduler]") : NULL;
  assert_non_null(a);
  assert_non_null(b);
  assert_true((size_t)(b - a) < size);
  memcpy(buf, a + 1, (size_t)(b - a));
  buf[b - a] = '\0';
  free(text);
}

/* A run of the example's model on dev ("cpu" or "sim"): synthetic
 * Fashion-MNIST-shaped data, `samples` of them in batches of 8, one epoch,
 * the figures read every log_every steps; lr (unless NULL) in place of the
 * example's. */
static torc_config *config(const char *name, const char *model, const char *dev,
                           int samples, int log_every, const char *lr) {
  char body[8192], ini[16384];
  example_model(model, body, sizeof body);
  if (lr) {
    char *at = strstr(body, "\nlr = 0.05\n");
    assert_non_null(at);
    char rest[8192];
    snprintf(rest, sizeof rest, "%s", at + strlen("\nlr = 0.05\n"));
    snprintf(at, sizeof body - (size_t)(at - body), "\nlr = %s\n%s", lr, rest);
  }
  snprintf(ini, sizeof ini,
           "[torc]\nseed = 3\ndeterministic = yes\n"
           "[plugin.ref]\nmodule = ref\n[plugin.data]\nmodule = data\n"
           "[plugin.losses]\nmodule = losses\n[plugin.optim]\nmodule = optim\n"
           "[plugin.sim]\nmodule = sim\n"
           "[device]\ntype = %s\n"
           "[data.train]\nsource = synthetic\nshape = 1,28,28\nclasses = 10\n"
           "samples = %d\nbatch_size = 8\nshuffle = yes\n"
           "%s"
           "[train]\nepochs = 1\nlog_every = %d\ndir = %s/%s\n",
           dev, samples, body, log_every, tmpdir, name);
  torc_config *cfg = torc_config_parse(ini, "nosync.ini");
  assert_torc(cfg);
  assert_ok(torc_config_apply(cfg));
  return cfg;
}

/* ---- the host's waits, step by step ---- */

typedef struct counts {
  int steps;
  uint64_t waits[64];   /* blocking reads + synchronizes of each step */
  uint64_t kernels[64]; /* kernels of each step */
  int logged[64];
} counts;

static int count_step(const torc_train_event *ev, void *user) {
  counts *c = user;
  torc_sim_counters k = sim_counters(0, 1);
  assert_true(c->steps < 64);
  c->waits[c->steps] = k.blocking_reads + k.synchronizes;
  c->kernels[c->steps] = k.kernels;
  c->logged[c->steps] = ev->logged;
  c->steps++;
  return TORC_TRAIN_CONTINUE;
}

static void train_counted(const char *model, counts *c) {
  torc_config *cfg = config(model, model, "sim", 96, 4, NULL);
  memset(c, 0, sizeof *c);
  torc_train_callbacks cb = {.struct_size = sizeof cb,
                             .user = c,
                             .on_step = count_step,
                             .flags = TORC_TRAIN_NO_PROGRESS |
                                      TORC_TRAIN_NO_METRICS};
  torc_train_opts o = {0};
  torc_train_result res;
  (void)sim_counters(0, 1);
  assert_ok(torc_train_ex(cfg, &o, &cb, &res));
  assert_int_equal(res.steps, 12);
  assert_int_equal(c->steps, 12);
  printf("%s on sim, host waits per step:", model);
  for (int i = 0; i < c->steps; i++)
    printf(" %llu%s", (unsigned long long)c->waits[i], c->logged[i] ? "*" : "");
  printf("\n%s on sim, kernels per step:", model);
  for (int i = 0; i < c->steps; i++)
    printf(" %llu", (unsigned long long)c->kernels[i]);
  printf("\n");
  /* Between the log_every boundaries (steps 4, 8, 12) the host waits on
   * nothing; the first step too (the run's set-up is not a wait). */
  for (int i = 0; i < c->steps; i++) {
    assert_int_equal(c->logged[i], (i + 1) % 4 == 0);
    if (!c->logged[i])
      assert_int_equal(c->waits[i], 0);
    else /* the window's figures and the guard, in one read */
      assert_int_equal(c->waits[i], 1);
  }
  torc_config_free(cfg);
}

static void test_mlp_waits_on_nothing(void **state) {
  (void)state;
  counts c;
  train_counted("mlp", &c);
}

static void test_cnn_waits_on_nothing(void **state) {
  (void)state;
  counts c;
  train_counted("cnn", &c);
}

/* ---- the deferred guard ---- */

/* A run with a learning rate that sends the loss to inf: its error. */
static torc_status diverge(const char *name, const char *dev, int log_every,
                           char *msg, size_t size, int64_t *steps) {
  torc_config *cfg = config(name, "mlp", dev, 96, log_every, "1e30");
  torc_train_callbacks cb = {.struct_size = sizeof cb,
                             .flags = TORC_TRAIN_NO_PROGRESS |
                                      TORC_TRAIN_NO_METRICS};
  torc_train_opts o = {0};
  torc_train_result res;
  torc_status st = torc_train_ex(cfg, &o, &cb, &res);
  snprintf(msg, size, "%s", torc_last_error());
  *steps = res.steps;
  torc_config_free(cfg);
  return st;
}

static void guard_on(const char *dev) {
  char eager[2048], lazy[2048];
  int64_t se = 0, sl = 0;
  char n1[64], n2[64];
  snprintf(n1, sizeof n1, "eager-%s", dev);
  snprintf(n2, sizeof n2, "lazy-%s", dev);
  assert_int_equal(diverge(n1, dev, 1, eager, sizeof eager, &se),
                   TORC_ERR_INVALID);
  assert_int_equal(diverge(n2, dev, 12, lazy, sizeof lazy, &sl),
                   TORC_ERR_INVALID);
  printf("%s, read every step: %s\n%s, read at step 12: %s\n", dev, eager, dev,
         lazy);
  /* Read every step, the run stops at the bad step; read at the window's
   * end, it goes on to there with the steps skipped and names the same
   * step, the same last finite loss. */
  assert_contains(eager, "the loss is ");
  assert_contains(eager, "the last finite loss was");
  assert_contains(eager, "clip_grad_norm");
  assert_string_equal(eager, lazy);
  long long step = -1, ep = -1, batch = -1;
  assert_int_equal(
      sscanf(eager, "step %lld (epoch %lld, batch %lld)", &step, &ep, &batch),
      3);
  assert_true(step >= 1 && step < 12);
  assert_int_equal(ep, 1);
  assert_int_equal(batch, step);
  assert_int_equal(se, step); /* the bad step was taken, not applied */
  assert_int_equal(sl, 12);
}

static void test_guard_cpu(void **state) {
  (void)state;
  guard_on("cpu");
}

static void test_guard_sim(void **state) {
  (void)state;
  guard_on("sim");
}

/* ---- index checks: on the cpu at once, on sim at the next read ---- */

static void need_sim(void) {
  if (torc_device_count("ref") < 0 || torc_device_count("sim") <= 0) {
    torc_plugin_load("ref", NULL);
    assert_ok(torc_plugin_load("sim", NULL));
  }
}

static void test_bad_index_reported(void **state) {
  (void)state;
  need_sim();
  torc_device sim = sim_dev(0);
  int64_t iv[2] = {1, 7};
  torc_tensor *ix = torc_from_host(iv, TORC_SHAPE(2), TORC_I64, TORC_CPU);
  torc_tensor *w = torc_ones(TORC_SHAPE(5, 3), TORC_F32, TORC_CPU);
  assert_torc(ix);
  assert_torc(w);
  /* The cpu: at once, naming the index. */
  assert_null(torc_embedding(ix, w));
  assert_error(TORC_ERR_RANGE, "index 7 is out of range");
  assert_null(torc_one_hot(ix, 5));
  assert_error(TORC_ERR_RANGE, "index 7 is out of range");
  /* sim: the ops queue without a read; the next read reports the first
   * bad index, naming it. */
  torc_tensor *six = torc_to(ix, sim), *sw = torc_to(w, sim);
  assert_torc(six);
  assert_torc(sw);
  assert_ok(torc_synchronize(sim));
  (void)sim_counters(0, 1);
  torc_tensor *e = torc_embedding(six, sw);
  assert_torc(e);
  torc_sim_counters k = sim_counters(0, 0);
  assert_int_equal(k.blocking_reads + k.synchronizes, 0);
  float out[6];
  assert_int_equal(torc_to_host(e, out, sizeof out), TORC_ERR_RANGE);
  assert_contains(torc_last_error(), "index 7 is out of range");
  assert_contains(torc_last_error(), "reported at the next synchronisation");
  torc_release(e);
  (void)sim_counters(0, 1);
  torc_tensor *h = torc_one_hot(six, 5);
  assert_torc(h);
  k = sim_counters(0, 0);
  assert_int_equal(k.blocking_reads + k.synchronizes, 0);
  assert_int_equal(torc_synchronize(sim), TORC_ERR_RANGE);
  assert_contains(torc_last_error(), "index 7 is out of range");
  /* Reported once: the device goes on. */
  assert_ok(torc_synchronize(sim));
  torc_release(h);
  torc_release(six), torc_release(sw), torc_release(ix), torc_release(w);
}

/* ---- multi-tensor optimizer steps ---- */

enum { NP = 5 };

/* NP tensors of assorted shapes on dev from pattern(seed + i). */
static void make_list(torc_tensor **t, torc_device dev, uint32_t seed,
                      int positive) {
  static const int64_t shapes[NP][2] = {
      {3, 4}, {7, 1}, {1, 1}, {16, 3}, {2, 5}};
  for (int i = 0; i < NP; i++) {
    torc_tensor *c =
        make_cpu(shapes[i], 2, TORC_F32, seed + (uint32_t)i, positive);
    t[i] = torc_to(c, dev);
    assert_torc(t[i]);
    torc_release(c);
  }
}

static void free_list(torc_tensor **t) {
  for (int i = 0; i < NP; i++)
    torc_release(t[i]);
}

/* Every tensor of a and b holds the same bytes. */
static void assert_lists_equal(torc_tensor **a, torc_tensor **b,
                               const char *what) {
  for (int i = 0; i < NP; i++) {
    size_t nb = (size_t)torc_numel(a[i]) * sizeof(float);
    float *x = malloc(nb), *y = malloc(nb);
    assert_non_null(x);
    assert_non_null(y);
    assert_ok(torc_to_host(a[i], x, nb));
    assert_ok(torc_to_host(b[i], y, nb));
    if (memcmp(x, y, nb) != 0) {
      print_error("%s: tensor %d differs from the per-parameter step\n", what,
                  i);
      fail();
    }
    free(x), free(y);
  }
}

/* The kernels sim ran for fn(user), the queue drained before and after. */
static uint64_t kernels_of(void (*fn)(void *), void *user) {
  torc_device sim = sim_dev(0);
  assert_ok(torc_synchronize(sim));
  (void)sim_counters(0, 1);
  fn(user);
  assert_ok(torc_synchronize(sim));
  return sim_counters(0, 1).kernels;
}

typedef struct sgd_case {
  torc_tensor **p, **g, **b;
  torc_sgd_step_params h;
  int foreach;
  const torc_tensor *ok; /* the foreach step's flag, or NULL */
} sgd_case;

static void sgd_run(void *u) {
  sgd_case *c = u;
  const torc_tensor *const *g = (const torc_tensor *const *)c->g;
  if (c->foreach) {
    assert_ok(torc_foreach_sgd_step_(c->p, g, c->h.momentum ? c->b : NULL, NP,
                                     &c->h, c->ok));
    return;
  }
  for (int i = 0; i < NP; i++)
    assert_ok(
        torc_sgd_step_(c->p[i], g[i], c->h.momentum ? c->b[i] : NULL, &c->h));
}

typedef struct adam_case {
  torc_tensor **p, **g, **m, **v, **vm;
  torc_adam_step_params h;
  int foreach;
  const torc_tensor *ok;
} adam_case;

static void adam_run(void *u) {
  adam_case *c = u;
  const torc_tensor *const *g = (const torc_tensor *const *)c->g;
  if (c->foreach) {
    assert_ok(torc_foreach_adam_step_(
        c->p, g, c->m, c->v, c->h.amsgrad ? c->vm : NULL, NP, &c->h, c->ok));
    return;
  }
  for (int i = 0; i < NP; i++)
    assert_ok(torc_adam_step_(c->p[i], g[i], c->m[i], c->v[i],
                              c->h.amsgrad ? c->vm[i] : NULL, &c->h));
}

/* torc_foreach_sgd_step_ and _adam_step_ on sim: the bits of the
 * per-parameter steps, in one kernel instead of NP; on the cpu the same
 * bits too (there each parameter runs the single-tensor kernel). */
static void foreach_on(torc_device dev, int count) {
  const torc_sgd_step_params sgds[] = {
      {.lr = 0.1, .momentum = 0.9, .nesterov = 1, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.1},
      {.lr = 0.2}};
  for (size_t k = 0; k < sizeof sgds / sizeof *sgds; k++) {
    torc_tensor *p1[NP], *p2[NP], *g[NP], *b1[NP], *b2[NP];
    make_list(p1, dev, 10, 0), make_list(p2, dev, 10, 0);
    make_list(b1, dev, 30, 0), make_list(b2, dev, 30, 0);
    make_list(g, dev, 20, 0);
    for (int step = 1; step <= 3; step++) {
      sgd_case one = {p1, g, b1, sgds[k], 0, NULL},
               many = {p2, g, b2, sgds[k], 1, NULL};
      one.h.first_step = many.h.first_step = step == 1;
      uint64_t k1 = count ? kernels_of(sgd_run, &one) : (sgd_run(&one), 0);
      uint64_t kn = count ? kernels_of(sgd_run, &many) : (sgd_run(&many), 0);
      if (count) {
        assert_int_equal(k1, NP);
        assert_int_equal(kn, 1);
      }
    }
    assert_lists_equal(p1, p2, "foreach sgd: params");
    assert_lists_equal(b1, b2, "foreach sgd: momentum buffers");
    free_list(p1), free_list(p2), free_list(b1), free_list(b2), free_list(g);
  }
  const torc_adam_step_params adams[] = {
      {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8},
      {.lr = 1e-2,
       .beta1 = 0.8,
       .beta2 = 0.99,
       .eps = 1e-6,
       .weight_decay = 0.1,
       .decoupled = 1},
      {.lr = 1e-2,
       .beta1 = 0.9,
       .beta2 = 0.999,
       .eps = 1e-8,
       .weight_decay = 0.01,
       .amsgrad = 1}};
  for (size_t k = 0; k < sizeof adams / sizeof *adams; k++) {
    torc_tensor *p1[NP], *p2[NP], *g[NP], *m1[NP], *m2[NP], *v1[NP], *v2[NP],
        *x1[NP], *x2[NP];
    make_list(p1, dev, 10, 0), make_list(p2, dev, 10, 0);
    make_list(m1, dev, 30, 0), make_list(m2, dev, 30, 0);
    make_list(v1, dev, 40, 1), make_list(v2, dev, 40, 1);
    make_list(x1, dev, 50, 1), make_list(x2, dev, 50, 1);
    make_list(g, dev, 20, 0);
    for (int step = 1; step <= 3; step++) {
      adam_case one = {p1, g, m1, v1, x1, adams[k], 0, NULL},
                many = {p2, g, m2, v2, x2, adams[k], 1, NULL};
      one.h.step = many.h.step = step;
      uint64_t k1 = count ? kernels_of(adam_run, &one) : (adam_run(&one), 0);
      uint64_t kn = count ? kernels_of(adam_run, &many) : (adam_run(&many), 0);
      if (count) {
        assert_int_equal(k1, NP);
        assert_int_equal(kn, 1);
      }
    }
    assert_lists_equal(p1, p2, "foreach adam: params");
    assert_lists_equal(m1, m2, "foreach adam: exp_avg");
    assert_lists_equal(v1, v2, "foreach adam: exp_avg_sq");
    assert_lists_equal(x1, x2, "foreach adam: max_exp_avg_sq");
    free_list(p1), free_list(p2), free_list(m1), free_list(m2);
    free_list(v1), free_list(v2), free_list(x1), free_list(x2), free_list(g);
  }
}

/* A false flag: the list step writes nothing, and reads nothing back on
 * sim; a true one steps as without. */
static void flag_on(torc_device dev) {
  torc_tensor *p1[NP], *p2[NP], *p0[NP], *g[NP], *b1[NP], *b2[NP];
  make_list(p0, dev, 10, 0), make_list(p1, dev, 10, 0),
      make_list(p2, dev, 10, 0);
  make_list(b1, dev, 30, 0), make_list(b2, dev, 30, 0),
      make_list(g, dev, 20, 0);
  torc_tensor *no = torc_full(NULL, 0, 0, TORC_BOOL, dev),
              *yes = torc_full(NULL, 0, 1, TORC_BOOL, dev);
  assert_torc(no);
  assert_torc(yes);
  torc_sgd_step_params h = {.lr = 0.1, .momentum = 0.9, .first_step = 1};
  const torc_tensor *const *cg = (const torc_tensor *const *)g;
  int sim = !torc_device_is_host(dev);
  if (sim)
    (void)sim_counters(0, 1);
  assert_ok(torc_foreach_sgd_step_(p1, cg, b1, NP, &h, no));
  if (sim) {
    torc_sim_counters k = sim_counters(0, 0);
    assert_int_equal(k.blocking_reads + k.synchronizes, 0);
  }
  assert_lists_equal(p0, p1, "a skipped step: params");
  assert_ok(torc_foreach_sgd_step_(p1, cg, b1, NP, &h, yes));
  assert_ok(torc_foreach_sgd_step_(p2, cg, b2, NP, &h, NULL));
  assert_lists_equal(p1, p2, "a flagged step: params");
  assert_lists_equal(b1, b2, "a flagged step: buffers");
  torc_release(no), torc_release(yes);
  free_list(p0), free_list(p1), free_list(p2), free_list(b1), free_list(b2);
  free_list(g);
}

/* foreach add_, mul_, mul_scalar_ and norm: the single ops' bits; on sim
 * one kernel each. */
typedef struct ew_case {
  torc_tensor **x, **y, *s, *norms;
  int which;
} ew_case;

static void ew_run(void *u) {
  ew_case *c = u;
  const torc_tensor *const *y = (const torc_tensor *const *)c->y;
  switch (c->which) {
  case 0:
    assert_ok(torc_foreach_add_(c->x, y, NP));
    break;
  case 1:
    assert_ok(torc_foreach_mul_(c->x, NP, c->s));
    break;
  case 2:
    assert_ok(torc_foreach_mul_scalar_(c->x, NP, 0.37));
    break;
  default:
    c->norms = torc_foreach_norm((const torc_tensor *const *)c->x, NP,
                                 c->which == 3 ? 2.0 : INFINITY);
    assert_torc(c->norms);
  }
}

static void elementwise_on(torc_device dev, int count) {
  for (int which = 0; which < 5; which++) {
    torc_tensor *a[NP], *b[NP], *y[NP];
    make_list(a, dev, 60, 0), make_list(b, dev, 60, 0),
        make_list(y, dev, 70, 0);
    torc_tensor *s = torc_full(NULL, 0, -1.25, TORC_F32, dev);
    assert_torc(s);
    ew_case c = {a, y, s, NULL, which};
    uint64_t k = count ? kernels_of(ew_run, &c) : (ew_run(&c), 0);
    if (count) {
      printf("foreach op %d on sim: %llu kernel(s) for %d tensors\n", which,
             (unsigned long long)k, NP);
      /* mul_scalar_ also fills its scalar. */
      assert_int_equal(k, which == 2 ? 2 : 1);
    }
    for (int i = 0; i < NP; i++) { /* the single ops on b */
      if (which == 0)
        assert_ok(torc_add_(b[i], y[i]));
      else if (which == 1)
        assert_ok(torc_mul_(b[i], s));
      else if (which == 2)
        assert_ok(torc_mul_scalar_(b[i], 0.37));
    }
    if (which < 3) {
      assert_lists_equal(a, b, "foreach add_/mul_");
    } else {
      float got[NP], want[NP];
      assert_int_equal(torc_numel(c.norms), NP);
      assert_ok(torc_to_host(c.norms, got, sizeof got));
      for (int i = 0; i < NP; i++) {
        torc_tensor *one =
            torc_norm(b[i], which == 3 ? 2.0 : INFINITY, NULL, 0, 0);
        assert_torc(one);
        assert_ok(torc_to_host(one, &want[i], sizeof(float)));
        torc_release(one);
      }
      assert_memory_equal(got, want, sizeof got);
      torc_release(c.norms);
    }
    torc_release(s);
    free_list(a), free_list(b), free_list(y);
  }
}

/* torc_clip_grad_norm_t on sim: the double form's norm and gradients, in
 * a number of kernels that does not grow with the parameters. */
static uint64_t clip_kernels(int n_params, int check) {
  torc_device sim = sim_dev(0);
  torc_tensor *p[NP], *q[NP], *g[NP];
  make_list(p, sim, 80, 0), make_list(q, sim, 80, 0), make_list(g, sim, 90, 0);
  for (int i = 0; i < NP; i++) {
    torc_tensor *g2 = torc_clone(g[i]);
    assert_ok(torc_set_requires_grad(p[i], 1));
    assert_ok(torc_set_requires_grad(q[i], 1));
    assert_ok(torc_set_grad(p[i], g[i]));
    assert_ok(torc_set_grad(q[i], g2));
    torc_release(g2);
  }
  assert_ok(torc_synchronize(sim));
  (void)sim_counters(0, 1);
  torc_tensor *total = NULL;
  assert_ok(torc_clip_grad_norm_t(p, n_params, 0.5, 2, &total));
  assert_ok(torc_synchronize(sim));
  torc_sim_counters k = sim_counters(0, 1);
  if (check) {
    double t = 0, h = 0;
    assert_ok(torc_item(total, &t));
    assert_ok(torc_clip_grad_norm(q, n_params, 0.5, 2, 1, &h));
    assert_true(t == h);
    torc_tensor *gp[NP], *gq[NP];
    for (int i = 0; i < NP; i++)
      gp[i] = torc_grad_of(p[i]), gq[i] = torc_grad_of(q[i]);
    assert_lists_equal(gp, gq, "clip_grad_norm_t: gradients");
  }
  torc_release(total);
  free_list(p), free_list(q), free_list(g);
  return k.kernels;
}

static void test_foreach_elementwise(void **state) {
  (void)state;
  need_sim();
  elementwise_on(sim_dev(0), 1);
  elementwise_on(TORC_CPU, 0);
  uint64_t k2 = clip_kernels(2, 1), k5 = clip_kernels(NP, 1);
  printf("clip_grad_norm_t on sim: %llu kernels for 2 gradients, %llu for "
         "%d\n",
         (unsigned long long)k2, (unsigned long long)k5, NP);
  assert_int_equal(k2, k5);
}

static void test_foreach_steps(void **state) {
  (void)state;
  need_sim();
  foreach_on(sim_dev(0), 1);
  foreach_on(TORC_CPU, 0);
  flag_on(sim_dev(0));
  flag_on(TORC_CPU);
}

/* torc_optimizer_step on sim: NP parameters in 1 kernel (sgd with
 * momentum), not NP. */
static void test_optimizer_step_kernels(void **state) {
  (void)state;
  need_sim();
  torc_device sim = sim_dev(0);
  torc_tensor *p[NP], *g[NP];
  make_list(p, sim, 1, 0), make_list(g, sim, 2, 0);
  for (int i = 0; i < NP; i++) {
    assert_ok(torc_set_requires_grad(p[i], 1));
    assert_ok(torc_set_grad(p[i], g[i]));
  }
  torc_optimizer *opt =
      torc_optimizer_build("sgd", "lr=0.1, momentum=0.9, nesterov=yes", NULL);
  assert_torc(opt);
  assert_true(torc_optimizer_add_params(opt, p, NP, NULL) >= 0);
  for (int step = 0; step < 3; step++) {
    assert_ok(torc_synchronize(sim));
    (void)sim_counters(0, 1);
    assert_ok(torc_optimizer_step(opt));
    assert_ok(torc_synchronize(sim));
    torc_sim_counters k = sim_counters(0, 1);
    printf("optimizer step %d of %d parameters on sim: %llu kernels\n",
           step + 1, NP, (unsigned long long)k.kernels);
    /* The first step also makes the momentum buffers (zeros). */
    assert_true(step == 0 ? k.kernels <= 1 + NP : k.kernels == 1);
  }
  torc_optimizer_free(opt);
  free_list(p), free_list(g);
}

/* torc_optimizer_step_if with a false flag leaves the parameters as they
 * were, reading nothing back on sim: through the list kernels (sgd,
 * adam) and through the undo of other types (rmsprop); a true flag steps
 * as torc_optimizer_step. */
static void step_if_on(torc_device dev, const char *type, const char *spec) {
  torc_tensor *p[NP], *q[NP], *p0[NP], *g[NP];
  make_list(p, dev, 1, 0), make_list(q, dev, 1, 0), make_list(p0, dev, 1, 0);
  make_list(g, dev, 2, 0);
  for (int i = 0; i < NP; i++) {
    assert_ok(torc_set_requires_grad(p[i], 1));
    assert_ok(torc_set_requires_grad(q[i], 1));
    assert_ok(torc_set_grad(p[i], g[i]));
    assert_ok(torc_set_grad(q[i], g[i]));
  }
  torc_optimizer *a = torc_optimizer_build(type, spec, NULL),
                 *b = torc_optimizer_build(type, spec, NULL);
  assert_torc(a);
  assert_torc(b);
  assert_true(torc_optimizer_add_params(a, p, NP, NULL) >= 0);
  assert_true(torc_optimizer_add_params(b, q, NP, NULL) >= 0);
  torc_tensor *no = torc_full(NULL, 0, 0, TORC_BOOL, dev),
              *yes = torc_full(NULL, 0, 1, TORC_BOOL, dev);
  int sim = !torc_device_is_host(dev);
  assert_ok(torc_optimizer_step_if(a, yes));
  assert_ok(torc_optimizer_step(b));
  assert_lists_equal(p, q, "step_if(true): params");
  for (int i = 0; i < NP; i++)
    assert_ok(torc_copy_(p0[i], p[i]));
  if (sim) {
    assert_ok(torc_synchronize(dev));
    (void)sim_counters(0, 1);
  }
  assert_ok(torc_optimizer_step_if(a, no));
  if (sim) {
    torc_sim_counters k = sim_counters(0, 0);
    assert_int_equal(k.blocking_reads + k.synchronizes, 0);
  }
  torc_tensor *pp[NP];
  for (int i = 0; i < NP; i++)
    pp[i] = p[i];
  assert_lists_equal(pp, p0, "step_if(false): params");
  torc_release(no), torc_release(yes);
  torc_optimizer_free(a), torc_optimizer_free(b);
  free_list(p), free_list(q), free_list(p0), free_list(g);
}

static void test_step_if(void **state) {
  (void)state;
  need_sim();
  torc_device devs[2] = {sim_dev(0), TORC_CPU};
  for (int d = 0; d < 2; d++) {
    step_if_on(devs[d], "sgd", "lr=0.1, momentum=0.9");
    step_if_on(devs[d], "adamw", "lr=0.01, weight_decay=0.1");
    step_if_on(devs[d], "rmsprop", "lr=0.01");
  }
}

static int setup(void **state) {
  (void)state;
  return test_make_tmpdir(tmpdir, sizeof tmpdir, "torc-nosync");
}

static int teardown(void **state) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0)
    fprintf(stderr, "teardown: could not remove %s\n", tmpdir);
  return test_teardown_all(state);
}

int main(void) {
  if (getenv("TORC_PLUGIN_PATH") == NULL) {
    printf("test_nosync: TORC_PLUGIN_PATH is not set (run through make "
           "check); skipped\n");
    return TEST_SKIP_STATUS;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mlp_waits_on_nothing),
      cmocka_unit_test(test_cnn_waits_on_nothing),
      cmocka_unit_test(test_guard_cpu),
      cmocka_unit_test(test_guard_sim),
      cmocka_unit_test(test_bad_index_reported),
      cmocka_unit_test(test_foreach_steps),
      cmocka_unit_test(test_foreach_elementwise),
      cmocka_unit_test(test_optimizer_step_kernels),
      cmocka_unit_test(test_step_if),
  };
  return cmocka_run_group_tests_name("nosync", tests, setup, teardown);
}
