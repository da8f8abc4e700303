/* bench/compare/peak.c — the machine's fp32 FMA peak, the yardstick of
 * bench/compare.sh's GEMM and conv rows. Each of THREADS threads (default 2)
 * runs independent chains of fused multiply-adds held in registers: 16
 * AVX-512 accumulators (16 lanes each) where the CPU has AVX-512F *and* the
 * OS saves its state (XCR0), else 12 AVX2 accumulators (8 lanes each), else
 * it reports 0. Enough chains to cover the FMA latency of both FMA pipes (4
 * cycles x 2 pipes on Zen 4/5 and Intel cores). The best of 5 timed runs of
 * ~0.2 s each, after a warm-up that lets the clock ramp up. Prints
 *   machine peak_gflops <GFLOP/s>
 *   machine peak_isa avx512|avx2|none
 *
 *   peak [THREADS [avx2]]      (avx2: no AVX-512 even where it is there)
 */
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum isa { ISA_NONE, ISA_AVX2, ISA_AVX512 };

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* XCR0: which register states the OS saves on a context switch. */
static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

/* The widest FMA ISA that both the CPU (CPUID) and the OS (XCR0) enable. */
static enum isa detect(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return ISA_NONE;
  int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
  if (!osxsave || !avx || !fma)
    return ISA_NONE;
  uint64_t xcr0 = xgetbv0();
  if ((xcr0 & 0x6) != 0x6) /* SSE and AVX state */
    return ISA_NONE;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
    return ISA_NONE;
  int avx2 = (b >> 5) & 1, avx512f = (b >> 16) & 1;
  if (avx512f && (xcr0 & 0xe6) == 0xe6) /* + opmask, ZMM0-15 hi, ZMM16-31 */
    return ISA_AVX512;
  return avx2 ? ISA_AVX2 : ISA_NONE;
}

/* Sinks the accumulators so that the compiler keeps every chain. */
static volatile float sink;

#define FMA16(f)                                                               \
  f(0) f(1) f(2) f(3) f(4) f(5) f(6) f(7) f(8) f(9) f(10) f(11) f(12) f(13)   \
      f(14) f(15)
#define FMA12(f)                                                               \
  f(0) f(1) f(2) f(3) f(4) f(5) f(6) f(7) f(8) f(9) f(10) f(11)

/* `iters` rounds of 16 independent 16-lane FMAs; returns the flops. */
__attribute__((target("avx512f"))) static double fma512(int64_t iters) {
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
#define DECL(i) __m512 acc##i = _mm512_set1_ps((float)(i) * 1e-3f);
  FMA16(DECL)
#undef DECL
  for (int64_t it = 0; it < iters; it++) {
#define STEP(i) acc##i = _mm512_fmadd_ps(acc##i, x, y);
    FMA16(STEP)
#undef STEP
  }
  __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, acc##i);
  FMA16(SUM)
#undef SUM
  sink = _mm512_reduce_add_ps(s);
  return (double)iters * 16 * 16 * 2;
}

/* `iters` rounds of 12 independent 8-lane FMAs; returns the flops. */
__attribute__((target("avx2,fma"))) static double fma256(int64_t iters) {
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
#define DECL(i) __m256 acc##i = _mm256_set1_ps((float)(i) * 1e-3f);
  FMA12(DECL)
#undef DECL
  for (int64_t it = 0; it < iters; it++) {
#define STEP(i) acc##i = _mm256_fmadd_ps(acc##i, x, y);
    FMA12(STEP)
#undef STEP
  }
  __m256 s = _mm256_setzero_ps();
#define SUM(i) s = _mm256_add_ps(s, acc##i);
  FMA12(SUM)
#undef SUM
  float v[8];
  _mm256_storeu_ps(v, s);
  sink = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
  return (double)iters * 12 * 8 * 2;
}

typedef struct {
  enum isa isa;
  int64_t iters;
  pthread_barrier_t *start;
  double flops;
} job;

static double kernel(enum isa isa, int64_t iters) {
  return isa == ISA_AVX512 ? fma512(iters) : fma256(iters);
}

static void *worker(void *arg) {
  job *j = arg;
  pthread_barrier_wait(j->start);
  j->flops = kernel(j->isa, j->iters);
  return NULL;
}

/* GFLOP/s of `threads` threads running `iters` rounds each, timed from the
 * common start to the last one's end. */
static double run(enum isa isa, int threads, int64_t iters) {
  pthread_t tid[64];
  job jobs[64];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  for (int t = 0; t < threads; t++) {
    jobs[t] = (job){.isa = isa, .iters = iters, .start = &start};
    if (pthread_create(&tid[t], NULL, worker, &jobs[t]) != 0) {
      fprintf(stderr, "peak: cannot start a thread\n");
      exit(1);
    }
  }
  pthread_barrier_wait(&start);
  double t0 = now(), flops = 0;
  for (int t = 0; t < threads; t++) {
    pthread_join(tid[t], NULL);
    flops += jobs[t].flops;
  }
  double dt = now() - t0;
  pthread_barrier_destroy(&start);
  return flops / dt / 1e9;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  if (threads < 1 || threads > 64) {
    fprintf(stderr, "usage: peak [THREADS (1..64) [avx2]]\n");
    return 2;
  }
  enum isa isa = detect();
  if (argc > 2 && strcmp(argv[2], "avx2") == 0 && isa == ISA_AVX512)
    isa = ISA_AVX2;
  if (isa == ISA_NONE) {
    printf("machine peak_gflops 0\nmachine peak_isa none\n");
    return 0;
  }
  /* Calibrate: ~0.2 s per run, after ~0.1 s of warm-up (clock ramp). */
  int64_t iters = 1 << 20;
  double t0 = now();
  kernel(isa, iters);
  double dt = now() - t0;
  while (dt < 0.1) {
    iters *= 2;
    t0 = now();
    kernel(isa, iters);
    dt = now() - t0;
  }
  iters = (int64_t)((double)iters * 0.2 / dt) + 1;
  double best = 0;
  for (int r = 0; r < 5; r++) {
    double g = run(isa, threads, iters);
    if (g > best)
      best = g;
  }
  printf("machine peak_gflops %.1f\n", best);
  printf("machine peak_isa %s\n", isa == ISA_AVX512 ? "avx512" : "avx2");
  return 0;
}
