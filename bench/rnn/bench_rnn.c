/* bench/rnn/bench_rnn.c — one LSTM (or GRU) layer's forward and backward
 * on the cpu device: hidden 256, batch 32, 128 steps, input 256, f32, by
 * default. Prints the median of RUNS timed runs (after one warm-up) of
 * forward, backward and their sum, in ms, and of the CPU time the process
 * spent on both (all threads). Built on demand
 * (make bench/rnn/bench_rnn), never run by make check.
 *
 *   bench_rnn [RUNS [THREADS [lstm|gru [STEPS]]]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "torc/torc.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of every thread of the process: steadier than the wall clock
 * on a loaded machine. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "bench_rnn: %s: %s\n", what, torc_last_error());
  exit(1);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 5;
  int threads = argc > 2 ? atoi(argv[2]) : 2;
  int gru = argc > 3 && strcmp(argv[3], "gru") == 0;
  enum { MAXRUNS = 64 };
  int L = argc > 4 ? atoi(argv[4]) : 128, N = 32, IN = 256, HID = 256;
  if (runs < 1 || runs > MAXRUNS || threads < 1 || L < 1) {
    fprintf(stderr, "usage: bench_rnn [RUNS (1-64) [THREADS [lstm|gru "
                    "[STEPS]]]]\n");
    return 2;
  }
  if (torc_plugin_load("ref", NULL) != TORC_OK)
    die("loading ref");
  if (torc_plugin_load("cpu", NULL) != TORC_OK) {
    fprintf(stderr, "bench_rnn: the cpu plugin is not loaded (%s); timing "
                    "ref's kernels\n",
            torc_last_error());
    torc_clear_error();
  }
  torc_set_num_threads(threads);
  torc_rnn_options o = torc_rnn_options_default(HID);
  o.input_size = IN;
  torc_module *m = gru ? torc_gru_new(&o) : torc_lstm_new(&o);
  if (m == NULL)
    die("the layer");
  double fw[MAXRUNS], bw[MAXRUNS], all[MAXRUNS], cpu[MAXRUNS];
  for (int r = -1; r < runs; r++) {
    int scope = torc_scope_begin();
    torc_tensor *x = torc_randn(TORC_SHAPE((int64_t)L, (int64_t)N, (int64_t)IN), TORC_F32, TORC_CPU,
                                NULL);
    if (x == NULL || torc_set_requires_grad(x, 1))
      die("the input");
    double c0 = cpu_now(), t0 = now();
    torc_tensor *y = torc_module_forward(m, x);
    if (y == NULL)
      die("forward");
    double t1 = now();
    if (torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0))
      die("backward");
    double t2 = now(), c2 = cpu_now();
    torc_scope_end(scope);
    if (r >= 0) {
      fw[r] = (t1 - t0) * 1e3;
      bw[r] = (t2 - t1) * 1e3;
      all[r] = (t2 - t0) * 1e3;
      cpu[r] = (c2 - c0) * 1e3;
    }
  }
  qsort(fw, (size_t)runs, sizeof fw[0], cmp_d);
  qsort(bw, (size_t)runs, sizeof bw[0], cmp_d);
  qsort(all, (size_t)runs, sizeof all[0], cmp_d);
  qsort(cpu, (size_t)runs, sizeof cpu[0], cmp_d);
  printf("%s L %d N %d in %d hidden %d f32, %d threads, median of %d: "
         "forward %.1f ms, backward %.1f ms, total %.1f ms (cpu time %.1f "
         "ms)\n",
         gru ? "gru" : "lstm", L, N, IN, HID, threads, runs, fw[runs / 2],
         bw[runs / 2], all[runs / 2], cpu[runs / 2]);
  torc_module_free(m);
  torc_shutdown();
  return 0;
}
