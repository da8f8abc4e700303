/* bench/gemm/bench_gemm.c — torc's side of the GEMM benchmark: f32
 * torc_matmul of two n x n matrices through the cpu (OpenBLAS) plugin at
 * n = 256, 1024, 2048. Prints lines "torc gemm <n> <GFLOP/s>", the median
 * of RUNS runs; bench/gemm/run.sh puts them beside PyTorch's.
 *
 *   bench_gemm [RUNS [THREADS]]
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

static void die(const char *what) {
  fprintf(stderr, "bench_gemm: %s: %s\n", what, torc_last_error());
  exit(1);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median GFLOP/s of `runs` runs, each long enough (~0.2 s) to time. */
static double gemm_rate(int64_t n, int runs) {
  int64_t shape[2] = {n, n};
  torc_tensor *a = torc_randn(shape, 2, TORC_F32, TORC_CPU, NULL);
  torc_tensor *b = torc_randn(shape, 2, TORC_F32, TORC_CPU, NULL);
  if (a == NULL || b == NULL)
    die("inputs");
  double flop = 2.0 * (double)n * (double)n * (double)n;
  torc_tensor *c = torc_matmul(a, b); /* warm-up: pool, pages */
  if (c == NULL)
    die("matmul");
  torc_release(c);
  int reps = (int)(4e9 / flop);
  if (reps < 1)
    reps = 1;
  double *rate = malloc(sizeof *rate * (size_t)runs);
  if (rate == NULL)
    die("out of memory");
  for (int r = 0; r < runs; r++) {
    double t0 = now();
    for (int i = 0; i < reps; i++) {
      c = torc_matmul(a, b);
      if (c == NULL)
        die("matmul");
      torc_release(c);
    }
    rate[r] = flop * reps / (now() - t0) / 1e9;
  }
  qsort(rate, (size_t)runs, sizeof *rate, cmp_d);
  double med = rate[runs / 2];
  free(rate);
  torc_release(a);
  torc_release(b);
  return med;
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 5;
  int threads = argc > 2 ? atoi(argv[2]) : 2;
  if (runs < 1 || threads < 1) {
    fprintf(stderr, "usage: bench_gemm [RUNS [THREADS]] (both >= 1)\n");
    return 2;
  }
  if (torc_set_num_threads(threads) != TORC_OK)
    die("threads");
  if (torc_plugin_load("ref", NULL) != TORC_OK ||
      torc_plugin_load("cpu", NULL) != TORC_OK)
    die("loading the ref and cpu plugins (configure with OpenBLAS)");
  torc_manual_seed(1);
  static const int64_t sizes[] = {256, 1024, 2048};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    printf("torc gemm %lld %.1f\n", (long long)sizes[i],
           gemm_rate(sizes[i], runs));
  torc_shutdown();
  return 0;
}
