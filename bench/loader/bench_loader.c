/* bench/loader/bench_loader.c — torc's side of the loader benchmark:
 * Fashion-MNIST through the idx source and the DataLoader with the
 * normalise pipeline (batch 64, shuffled) at 0, 1 and 2 workers, and the
 * share of an MLP training step (784-128-10, plain SGD) spent waiting for
 * data. Prints lines "torc <what> <workers> <value>", the medians of RUNS
 * runs; bench/loader/run.sh puts them beside PyTorch's.
 *
 *   bench_loader [RUNS [SAMPLES [STEPS]]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "torc/torc.h"

#define ROOT "/usr/share/datasets/fashion-mnist/"
#define PIPELINE "scale(0.00392156862745098), normalize(0.2860, 0.3530)"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "bench_loader: %s: %s\n", what, torc_last_error());
  exit(1);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return v[n / 2];
}

static torc_loader *loader(torc_dataset *ds, const torc_transform *tf,
                           int workers) {
  torc_loader_opts o = {0};
  o.batch_size = 64;
  o.shuffle = 1;
  o.workers = workers;
  o.transform = tf;
  torc_loader *ld = torc_loader_new(ds, &o);
  if (ld == NULL || torc_loader_start(ld, 0, 0) != TORC_OK)
    die("loader");
  return ld;
}

static double epoch_rate(torc_dataset *ds, const torc_transform *tf,
                         int workers, int64_t limit) {
  double t0 = now();
  torc_loader *ld = loader(ds, tf, workers);
  int64_t n = 0;
  torc_batch b = {0};
  while (n < limit) {
    int r = torc_loader_next(ld, &b);
    if (r < 0)
      die("next");
    if (r == 0)
      break;
    n += b.size;
    torc_batch_clear(&b);
  }
  torc_loader_free(ld);
  return (double)n / (now() - t0);
}

static torc_module *mlp(void) {
  torc_module *m = torc_sequential_new();
  if (torc_sequential_append(m, torc_flatten_new(1, -1)) ||
      torc_sequential_append(m, torc_linear_new(784, 128, 1)) ||
      torc_sequential_append(m, torc_module_build("relu", NULL)) ||
      torc_sequential_append(m, torc_linear_new(128, 10, 1)))
    die("model");
  return m;
}

static double step_wait(torc_dataset *ds, const torc_transform *tf,
                        int workers, int steps) {
  torc_manual_seed(0);
  torc_module *m = mlp();
  torc_named_tensor *p;
  int np = torc_module_named_parameters(m, &p);
  torc_loader *ld = loader(ds, tf, workers);
  double t0 = now();
  for (int s = 0; s < steps; s++) {
    torc_batch b = {0};
    if (torc_loader_next(ld, &b) != 1)
      die("next");
    int scope = torc_scope_begin();
    torc_tensor *logp = torc_log_softmax(torc_module_forward(m, b.input), 1);
    torc_tensor *loss = torc_neg(torc_mean(
        torc_gather(logp, 1, torc_unsqueeze(b.target, 1)), NULL, 0, 0));
    if (torc_backward(loss, NULL, 0) != TORC_OK)
      die("backward");
    torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
    for (int i = 0; i < np; i++) {
      torc_sub_(p[i].tensor, torc_mul_scalar(torc_grad_of(p[i].tensor), 0.05));
      torc_zero_grad(p[i].tensor, 1);
    }
    torc_set_grad_mode(gm);
    torc_scope_end(scope);
    torc_batch_clear(&b);
  }
  double total = now() - t0;
  torc_loader_stats st;
  torc_loader_get_stats(ld, &st);
  torc_loader_free(ld);
  torc_named_tensors_free(p, np);
  torc_module_free(m);
  return st.wait_seconds / total;
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 3;
  int64_t limit = argc > 2 ? atoll(argv[2]) : 60000;
  int steps = argc > 3 ? atoi(argv[3]) : 300;
  if (runs < 1 || runs > 99)
    runs = 3;
  if (torc_plugin_load("ref", NULL) || torc_plugin_load("data", NULL))
    die("plugins (set TORC_PLUGIN_PATH, or use bench/loader/run.sh)");
  const char *k[2] = {"images", "labels"};
  const char *v[2] = {ROOT "train-images-idx3-ubyte.gz",
                      ROOT "train-labels-idx1-ubyte.gz"};
  torc_dataset *ds = torc_dataset_open("idx", k, v, 2);
  if (ds == NULL)
    die("dataset (apt-get install dataset-fashion-mnist)");
  torc_transform *tf = torc_transform_parse(PIPELINE);
  if (tf == NULL)
    die("transform");
  double r[99];
  for (int w = 0; w <= 2; w++) {
    for (int i = 0; i < runs; i++)
      r[i] = epoch_rate(ds, tf, w, limit);
    printf("torc samples_per_sec %d %.0f\n", w, median(r, runs));
    fflush(stdout);
  }
  for (int w = 0; w <= 2; w += 2) {
    for (int i = 0; i < runs; i++)
      r[i] = step_wait(ds, tf, w, steps);
    printf("torc wait_fraction %d %.4f\n", w, median(r, runs));
    fflush(stdout);
  }
  torc_transform_free(tf);
  torc_dataset_close(ds);
  torc_shutdown();
  return 0;
}
