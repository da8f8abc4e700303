/* bench/compare/bench_compare.c — torc's side of bench/compare.sh, built on
 * the public API the way a user writes a training loop: the idx source and
 * the DataLoader (normalise pipeline, batch 64, shuffled), the modules, the
 * cross-entropy loss of the losses plugin, SGD with momentum of the optim
 * plugin, zero_grad / backward / step; evaluation in eval mode under
 * no-grad. One measurement per invocation, printed as
 *   torc <measure> <value>
 * so bench/compare.sh can alternate torc and PyTorch runs.
 *
 *   bench_compare train mlp|cnn [SAMPLES]   training samples/s, peak RSS
 *   bench_compare eval mlp|cnn              test-set samples/s at batch 1000
 *   bench_compare eval_plan mlp|cnn         the same through a plan
 *                                           (torc/graph.h: traced on the
 *                                           first batch)
 *   bench_compare op                        ns per dispatched op (16 floats),
 *                                           ns per autograd forward+backward
 *   bench_compare latency                   batch-1 MLP forward, µs
 *   bench_compare gemm N                    f32 N x N GEMM GFLOP/s
 *   bench_compare conv                      conv2d 64x32x28x28 * 3x3x64 GFLOP/s
 *   bench_compare startup                   one training step, then exit
 *   bench_compare seq lstm|gpt [STEPS]      training tokens/s of a
 *                                           character model on random
 *                                           token ids (median of STEPS
 *                                           timed steps, default 20),
 *                                           peak RSS
 *
 * The plugins are ref, cpu and, where built, onednn; threads = 2 unless
 * TORC_THREADS says otherwise; the loader has one worker thread unless
 * TORC_BENCH_WORKERS says otherwise. TORC_BENCH_PROFILE=1 prints the
 * profiler's report of the seq rows' timed steps on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "torc/graph.h"
#include "torc/torc.h"

#define ROOT "/usr/share/datasets/fashion-mnist/"
#define PIPELINE "scale(0.00392156862745098), normalize(0.2860, 0.3530)"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "bench_compare: %s: %s\n", what, torc_last_error());
  exit(1);
}

static long peak_rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static void setup(void) {
  const char *th = getenv("TORC_THREADS");
  if (torc_set_num_threads(th ? atoi(th) : 2) != TORC_OK)
    die("threads");
  static const char *const need[] = {"ref", "cpu", "data", "losses", "optim"};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (torc_plugin_load(need[i], NULL) != TORC_OK)
      die("plugins (build with bash scripts/setup.sh; run bench/compare.sh)");
  /* oneDNN is optional: used where configure found it. */
  if (torc_plugin_load("onednn", NULL) != TORC_OK)
    torc_clear_error();
}

static void add(torc_module *seq, torc_module *m) {
  if (torc_sequential_append(seq, m) != TORC_OK)
    die("model");
}

/* flatten; linear 784->256; relu; linear 256->128; relu; linear 128->10 */
static torc_module *mlp(void) {
  torc_module *m = torc_sequential_new();
  add(m, torc_flatten_new(1, -1));
  add(m, torc_linear_new(784, 256, 1));
  add(m, torc_module_build("relu", NULL));
  add(m, torc_linear_new(256, 128, 1));
  add(m, torc_module_build("relu", NULL));
  add(m, torc_linear_new(128, 10, 1));
  return m;
}

/* conv3x3 1->32, relu, maxpool 2; conv3x3 32->64, relu, maxpool 2;
 * flatten; linear 3136->128, relu; linear 128->10 (padding 1) */
static torc_module *cnn(void) {
  torc_conv2d_params same = {.padding = {1, 1}};
  torc_pool2d_params pool = {.kernel = {2, 2}};
  torc_module *m = torc_sequential_new();
  add(m, torc_conv2d_new(1, 32, 3, 3, &same, 1));
  add(m, torc_module_build("relu", NULL));
  add(m, torc_maxpool2d_new(&pool));
  add(m, torc_conv2d_new(32, 64, 3, 3, &same, 1));
  add(m, torc_module_build("relu", NULL));
  add(m, torc_maxpool2d_new(&pool));
  add(m, torc_flatten_new(1, -1));
  add(m, torc_linear_new(3136, 128, 1));
  add(m, torc_module_build("relu", NULL));
  add(m, torc_linear_new(128, 10, 1));
  return m;
}

static torc_dataset *open_split(const char *split) {
  char img[256], lab[256];
  snprintf(img, sizeof img, ROOT "%s-images-idx3-ubyte.gz", split);
  snprintf(lab, sizeof lab, ROOT "%s-labels-idx1-ubyte.gz", split);
  const char *k[2] = {"images", "labels"};
  const char *v[2] = {img, lab};
  torc_dataset *ds = torc_dataset_open("idx", k, v, 2);
  if (ds == NULL)
    die("dataset (apt-get install dataset-fashion-mnist)");
  return ds;
}

static torc_loader *loader(torc_dataset *ds, const torc_transform *tf,
                           int64_t batch, int shuffle) {
  torc_loader_opts o = {0};
  o.batch_size = batch;
  o.shuffle = shuffle;
  o.transform = tf;
  /* One loader thread by default, as the example INI files have: batches are
   * prepared while the model computes (the order does not depend on it). */
  const char *w = getenv("TORC_BENCH_WORKERS");
  o.workers = w ? atoi(w) : 1;
  torc_loader *ld = torc_loader_new(ds, &o);
  if (ld == NULL || torc_loader_start(ld, 0, 0) != TORC_OK)
    die("loader");
  return ld;
}

/* Trains on `limit` samples (one epoch = 60000); returns samples/s, or
 * stops after the first step when `one_step`. */
static double train(const char *which, int64_t limit, int one_step) {
  torc_manual_seed(0);
  torc_dataset *ds = open_split("train");
  torc_transform *tf = torc_transform_parse(PIPELINE);
  if (tf == NULL)
    die("transform");
  torc_module *net = strcmp(which, "cnn") == 0 ? cnn() : mlp();
  torc_loss *ce = torc_loss_build("cross_entropy", NULL);
  torc_optimizer *opt =
      torc_optimizer_build("sgd", "lr=0.01, momentum=0.9", net);
  if (ce == NULL || opt == NULL)
    die("loss/optimizer");
  torc_module_train(net, 1);
  if (!one_step) {
    /* As PyTorch's side: one untimed forward/backward per batch shape the
     * run will see (64, and the epoch's short last batch if it gets
     * there), no optimizer step, the gradients dropped: oneDNN generates
     * its kernels for each GEMM shape here, PyTorch warms or compiles. */
    torc_loader *wl = loader(ds, tf, 64, 0);
    torc_batch wb = {0};
    if (torc_loader_next(wl, &wb) != 1)
      die("warm-up batch");
    int64_t total = torc_dataset_length(ds), last = limit >= total ? total % 64 : 0;
    int64_t sizes[2] = {64, last};
    for (int i = 0; i < 2; i++) {
      if (sizes[i] == 0)
        continue;
      int scope = torc_scope_begin();
      torc_tensor *x = torc_narrow(wb.input, 0, 0, sizes[i]);
      torc_tensor *y = torc_narrow(wb.target, 0, 0, sizes[i]);
      torc_tensor *loss =
          torc_loss_forward(ce, torc_module_forward(net, x), y);
      if (torc_backward(loss, NULL, 0))
        die("warm-up step");
      torc_scope_end(scope);
    }
    if (torc_optimizer_zero_grad(opt, 1))
      die("zero_grad");
    torc_batch_clear(&wb);
    torc_loader_free(wl);
  }
  torc_loader *ld = loader(ds, tf, 64, 1);
  int64_t n = 0;
  double t0 = now(), loss_v = 0;
  torc_batch b = {0};
  while (n < limit) {
    int r = torc_loader_next(ld, &b);
    if (r < 0)
      die("next");
    if (r == 0)
      break;
    int scope = torc_scope_begin();
    torc_tensor *loss = torc_loss_forward(ce, torc_module_forward(net, b.input),
                                          b.target);
    if (torc_optimizer_zero_grad(opt, 1) || torc_backward(loss, NULL, 0) ||
        torc_optimizer_step(opt))
      die("training step");
    if (one_step && torc_item(loss, &loss_v))
      die("item");
    torc_scope_end(scope);
    n += b.size;
    torc_batch_clear(&b);
    if (one_step)
      break;
  }
  double dt = now() - t0;
  torc_loader_free(ld);
  torc_optimizer_free(opt);
  torc_loss_free(ce);
  torc_module_free(net);
  torc_transform_free(tf);
  torc_dataset_close(ds);
  return (double)n / dt;
}

/* Evaluates the (untrained) model on the 10000 test images at batch 1000:
 * eval mode, no-grad, argmax accuracy counted as a user would. The test
 * set is decoded and normalised into its ten batches before the clock
 * starts, as onnxruntime's and PyTorch's sides are fed, so the rate is
 * the model's alone. `planned`: the forward through a plan traced on the
 * first batch before timing (as their sessions and models are made before
 * theirs). Best of EVAL_PASSES passes over the test set, the first warming
 * up: a pass of the MLP lasts ~20 ms, so one busy spell of the shared
 * machine would decide a best of two. */
#define EVAL_MAX_BATCHES 16
#define EVAL_PASSES 5
static double evaluate(const char *which, int planned) {
  torc_manual_seed(0);
  torc_dataset *ds = open_split("t10k");
  torc_transform *tf = torc_transform_parse(PIPELINE);
  torc_module *net = strcmp(which, "cnn") == 0 ? cnn() : mlp();
  torc_module_train(net, 0);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc_batch batches[EVAL_MAX_BATCHES];
  int nb = 0;
  torc_loader *ld = loader(ds, tf, 1000, 0);
  while (nb < EVAL_MAX_BATCHES && torc_loader_next(ld, &batches[nb]) == 1)
    nb++;
  torc_loader_free(ld);
  torc_plan *plan = NULL;
  if (planned) {
    const torc_tensor *x = batches[0].input;
    torc_graph *g = NULL;
    int flags = TORC_PLAN_FOLD_BN | TORC_PLAN_FUSE | TORC_PLAN_FREEZE;
    if (torc_trace(net, &x, 1, &g) || torc_plan_new(g, flags, &plan))
      die("plan");
    torc_graph_free(g); /* the plan keeps what it needs */
  }
  double best = 0;
  for (int pass = 0; pass < EVAL_PASSES; pass++) {
    int64_t n = 0;
    double correct = 0, t0 = now();
    for (int i = 0; i < nb; i++) {
      const torc_batch *b = &batches[i];
      const torc_tensor *x = b->input;
      torc_tensor *y = NULL;
      /* a smaller last batch runs eagerly */
      if (plan && torc_size(x, 0) == torc_size(batches[0].input, 0) &&
          torc_plan_run(plan, &x, 1, &y))
        die("plan run");
      int scope = torc_scope_begin();
      int dim = 1;
      torc_tensor *pred =
          torc_argmax(y ? y : torc_module_forward(net, b->input), &dim, 0);
      double c;
      if (torc_item(torc_sum(torc_eq(pred, b->target), NULL, 0, 0), &c))
        die("eval");
      correct += c;
      torc_scope_end(scope);
      torc_release(y);
      n += b->size;
    }
    double rate = (double)n / (now() - t0);
    if (rate > best)
      best = rate;
  }
  torc_plan_free(plan);
  for (int i = 0; i < nb; i++)
    torc_batch_clear(&batches[i]);
  torc_set_grad_mode(gm);
  torc_module_free(net);
  torc_transform_free(tf);
  torc_dataset_close(ds);
  return best;
}

/* ns per torc_add of two 16-float tensors (no grad), and per forward +
 * backward of one torc_mul with autograd. */
static void op_overhead(void) {
  int64_t shape[1] = {16};
  torc_tensor *a = torc_randn(shape, 1, TORC_F32, TORC_CPU, NULL);
  torc_tensor *b = torc_randn(shape, 1, TORC_F32, TORC_CPU, NULL);
  torc_tensor *g = torc_ones(shape, 1, TORC_F32, TORC_CPU);
  if (a == NULL || b == NULL || g == NULL)
    die("inputs");
  const int reps = 200000;
  double best = 1e9;
  for (int r = 0; r < 5; r++) {
    double t0 = now();
    for (int i = 0; i < reps; i++)
      torc_release(torc_add(a, b));
    double ns = (now() - t0) / reps * 1e9;
    if (ns < best)
      best = ns;
  }
  printf("torc op_ns %.1f\n", best);
  if (torc_set_requires_grad(a, 1))
    die("requires_grad");
  best = 1e9;
  for (int r = 0; r < 5; r++) {
    double t0 = now();
    for (int i = 0; i < reps / 4; i++) {
      torc_tensor *y = torc_mul(a, b);
      if (torc_backward(y, g, 0))
        die("backward");
      torc_release(y);
      torc_zero_grad(a, 1);
    }
    double ns = (now() - t0) / (reps / 4) * 1e9;
    if (ns < best)
      best = ns;
  }
  printf("torc autograd_ns %.1f\n", best);
  torc_release(a);
  torc_release(b);
  torc_release(g);
}

static void latency(void) {
  torc_manual_seed(0);
  torc_module *net = mlp();
  torc_module_train(net, 0);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc_tensor *x = torc_randn(TORC_SHAPE(1, 1, 28, 28), TORC_F32, TORC_CPU,
                              NULL);
  const int reps = 20000;
  double best = 1e9;
  for (int r = 0; r < 5; r++) {
    double t0 = now();
    for (int i = 0; i < reps; i++) {
      int scope = torc_scope_begin();
      if (torc_module_forward(net, x) == NULL)
        die("forward");
      torc_scope_end(scope);
    }
    double us = (now() - t0) / reps * 1e6;
    if (us < best)
      best = us;
  }
  printf("torc latency_us %.2f\n", best);
  torc_set_grad_mode(gm);
  torc_release(x);
  torc_module_free(net);
}

static double gemm(int64_t n) {
  torc_tensor *a = torc_randn(TORC_SHAPE(n, n), TORC_F32, TORC_CPU, NULL);
  torc_tensor *b = torc_randn(TORC_SHAPE(n, n), TORC_F32, TORC_CPU, NULL);
  double flop = 2.0 * n * n * n, best = 0;
  torc_release(torc_matmul(a, b));
  int reps = (int)(2e9 / flop) + 1;
  for (int r = 0; r < 5; r++) {
    double t0 = now();
    for (int i = 0; i < reps; i++) {
      torc_tensor *c = torc_matmul(a, b);
      if (c == NULL)
        die("matmul");
      torc_release(c);
    }
    double g = flop * reps / (now() - t0) / 1e9;
    if (g > best)
      best = g;
  }
  torc_release(a);
  torc_release(b);
  return best;
}

static double conv(void) {
  torc_tensor *x = torc_randn(TORC_SHAPE(64, 32, 28, 28), TORC_F32, TORC_CPU,
                              NULL);
  torc_tensor *w = torc_randn(TORC_SHAPE(64, 32, 3, 3), TORC_F32, TORC_CPU,
                              NULL);
  torc_conv2d_params p = {.padding = {1, 1}};
  double flop = 2.0 * 64 * 64 * 28 * 28 * 32 * 9, best = 0;
  torc_release(torc_conv2d(x, w, NULL, &p));
  for (int r = 0; r < 5; r++) {
    double t0 = now();
    for (int i = 0; i < 5; i++) {
      torc_tensor *y = torc_conv2d(x, w, NULL, &p);
      if (y == NULL)
        die("conv2d");
      torc_release(y);
    }
    double g = flop * 5 / (now() - t0) / 1e9;
    if (g > best)
      best = g;
  }
  torc_release(x);
  torc_release(w);
  return best;
}

/* The sequence models of bench/compare.sh's seq rows, on random token ids
 * (no dataset): batch SEQ_BATCH windows of SEQ_CONTEXT ids drawn from a
 * SEQ_VOCAB-char vocabulary, the targets the same windows' next ids. */
#define SEQ_VOCAB 113
#define SEQ_BATCH 32
#define SEQ_CONTEXT 128
#define SEQ_WARMUP 3
#define SEQ_STEPS 20 /* timed steps by default */
#define SEQ_MAX_STEPS 1000

/* embedding(113, 64); lstm(64, 256, batch_first); linear(256, 113):
 * [N, L] ids -> [N, L, 113] logits. */
static torc_module *seq_lstm(void) {
  torc_module *m = torc_sequential_new();
  torc_rnn_options o = torc_rnn_options_default(256);
  o.input_size = 64;
  o.batch_first = 1;
  add(m, torc_embedding_new(SEQ_VOCAB, 64));
  add(m, torc_lstm_new(&o));
  add(m, torc_linear_new(256, SEQ_VOCAB, 1));
  return m;
}

/* embedding(113, 128); learned positions (128 x 128); 4 pre-norm causal
 * encoder layers (d_model 128, 4 heads, feed-forward 512, dropout 0.1,
 * gelu); layernorm(128); linear(128, 113): a small GPT. */
static torc_module *seq_gpt(void) {
  torc_module *m = torc_sequential_new();
  add(m, torc_embedding_new(SEQ_VOCAB, 128));
  add(m, torc_positional_embedding_new("learned", SEQ_CONTEXT, 128, 0));
  torc_transformer_layer_options o =
      torc_transformer_layer_options_default(128, 4);
  o.dim_feedforward = 512;
  o.dropout = 0.1;
  o.activation = "gelu";
  o.batch_first = 1;
  o.norm_first = 1;
  o.causal = 1;
  for (int i = 0; i < 4; i++)
    add(m, torc_transformer_encoder_layer_new(&o));
  const int64_t d[1] = {128};
  add(m, torc_layernorm_new(d, 1, 1e-5, 1));
  add(m, torc_linear_new(128, SEQ_VOCAB, 1));
  return m;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Training tokens/s of the lstm or gpt model: SEQ_WARMUP steps, then the
 * median of `steps` timed steps (zero_grad, forward, cross-entropy over
 * the last dim, backward, clip_grad_norm 1.0, optimizer step: Adam lr 3e-3
 * for the LSTM, AdamW lr 1e-3 weight decay 0.01 for the GPT). The batches
 * are drawn before the clock starts, one per step. */
static double train_seq(const char *which, int steps) {
  int gpt = strcmp(which, "gpt") == 0;
  torc_manual_seed(0);
  torc_module *net = gpt ? seq_gpt() : seq_lstm();
  torc_loss *ce = torc_loss_build("cross_entropy", "class_dim=-1");
  torc_optimizer *opt =
      gpt ? torc_optimizer_build("adamw", "lr=1e-3, weight_decay=0.01", net)
          : torc_optimizer_build("adam", "lr=3e-3", net);
  if (net == NULL || ce == NULL || opt == NULL)
    die("model/loss/optimizer");
  int total = SEQ_WARMUP + steps;
  torc_tensor **x = calloc((size_t)total, sizeof *x);
  torc_tensor **y = calloc((size_t)total, sizeof *y);
  double *dt = calloc((size_t)steps, sizeof *dt);
  if (x == NULL || y == NULL || dt == NULL)
    die("out of memory");
  for (int i = 0; i < total; i++) {
    /* ids [N, L + 1]: the input its first L, the target its last L */
    torc_tensor *ids =
        torc_randint(0, SEQ_VOCAB, TORC_SHAPE(SEQ_BATCH, SEQ_CONTEXT + 1),
                     TORC_I64, TORC_CPU, NULL);
    torc_tensor *xv = torc_narrow(ids, 1, 0, SEQ_CONTEXT);
    torc_tensor *yv = torc_narrow(ids, 1, 1, SEQ_CONTEXT);
    x[i] = torc_contiguous(xv);
    y[i] = torc_contiguous(yv);
    if (x[i] == NULL || y[i] == NULL)
      die("batches");
    torc_release(xv);
    torc_release(yv);
    torc_release(ids);
  }
  torc_module_train(net, 1);
  const char *prof = getenv("TORC_BENCH_PROFILE");
  int profile = prof != NULL && strcmp(prof, "1") == 0;
  for (int i = 0; i < total; i++) {
    if (profile && i == SEQ_WARMUP)
      torc_profile_enable(1);
    double t0 = now();
    int scope = torc_scope_begin();
    if (torc_optimizer_zero_grad(opt, 1))
      die("zero_grad");
    torc_tensor *loss =
        torc_loss_forward(ce, torc_module_forward(net, x[i]), y[i]);
    if (loss == NULL || torc_backward(loss, NULL, 0) ||
        torc_module_clip_grad_norm(net, 1.0, 2.0, 0, NULL) ||
        torc_optimizer_step(opt))
      die("training step");
    torc_scope_end(scope);
    if (i >= SEQ_WARMUP)
      dt[i - SEQ_WARMUP] = now() - t0;
  }
  if (profile) {
    char *report = torc_profile_report(20, steps);
    torc_profile_enable(0);
    if (report != NULL)
      fprintf(stderr, "%s", report);
    free(report);
  }
  qsort(dt, (size_t)steps, sizeof dt[0], cmp_double);
  double med = steps % 2 ? dt[steps / 2]
                         : (dt[steps / 2 - 1] + dt[steps / 2]) / 2;
  for (int i = 0; i < total; i++) {
    torc_release(x[i]);
    torc_release(y[i]);
  }
  free(x);
  free(y);
  free(dt);
  torc_optimizer_free(opt);
  torc_loss_free(ce);
  torc_module_free(net);
  return SEQ_BATCH * SEQ_CONTEXT / med;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  setup();
  if (strcmp(mode, "train") == 0 && argc > 2) {
    int64_t limit = argc > 3 ? atoll(argv[3]) : 60000;
    double rate = train(argv[2], limit, 0);
    printf("torc train_%s %.0f\n", argv[2], rate);
    printf("torc rss_train_%s %ld\n", argv[2], peak_rss_kib());
  } else if (strcmp(mode, "eval") == 0 && argc > 2) {
    double rate = evaluate(argv[2], 0);
    printf("torc eval_%s %.0f\n", argv[2], rate);
    printf("torc rss_eval_%s %ld\n", argv[2], peak_rss_kib());
  } else if (strcmp(mode, "eval_plan") == 0 && argc > 2) {
    double rate = evaluate(argv[2], 1);
    printf("torc eval_plan_%s %.0f\n", argv[2], rate);
    printf("torc rss_eval_plan_%s %ld\n", argv[2], peak_rss_kib());
  } else if (strcmp(mode, "op") == 0) {
    op_overhead();
  } else if (strcmp(mode, "latency") == 0) {
    latency();
  } else if (strcmp(mode, "gemm") == 0 && argc > 2) {
    int64_t n = atoll(argv[2]);
    printf("torc gemm_%lld %.1f\n", (long long)n, gemm(n));
  } else if (strcmp(mode, "conv") == 0) {
    printf("torc conv %.1f\n", conv());
  } else if (strcmp(mode, "seq") == 0 && argc > 2 &&
             (strcmp(argv[2], "lstm") == 0 || strcmp(argv[2], "gpt") == 0)) {
    int steps = argc > 3 ? atoi(argv[3]) : SEQ_STEPS;
    if (steps < 1 || steps > SEQ_MAX_STEPS) {
      fprintf(stderr, "bench_compare: seq STEPS is %s; give 1 to %d\n",
              argv[3], SEQ_MAX_STEPS);
      torc_shutdown();
      return 2;
    }
    double rate = train_seq(argv[2], steps);
    printf("torc train_seq_%s %.0f\n", argv[2], rate);
    printf("torc rss_train_seq_%s %ld\n", argv[2], peak_rss_kib());
  } else if (strcmp(mode, "startup") == 0) {
    train("mlp", 64, 1);
  } else {
    fprintf(stderr,
            "usage: bench_compare train|eval|eval_plan mlp|cnn [SAMPLES] | op | "
            "latency | gemm N | conv | startup | seq lstm|gpt [STEPS]\n");
    torc_shutdown();
    return 2;
  }
  torc_shutdown();
  return 0;
}
