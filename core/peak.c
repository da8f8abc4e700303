/* core/peak.c — the machine's fp32 FMA peak (torc_cpu_peak_gflops), the
 * roof of `torc bench --roofline`. Each thread runs independent chains of
 * fused multiply-adds held in registers: 16 AVX-512 accumulators (16 lanes
 * each) where the CPU has AVX-512F and the OS saves its state (XCR0), else
 * 12 AVX2 accumulators (8 lanes each), else no figure. Enough chains to
 * cover the FMA latency of both FMA pipes (4 cycles x 2 pipes on Zen 4/5
 * and Intel cores). A warm-up lets the clock ramp up, then the best of 5
 * timed runs of ~30 ms: about 0.2 s in all, once per thread count. The
 * same method as bench/compare/peak.c, which takes longer runs for the
 * comparison's yardstick.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define TORC_PEAK_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

enum { ISA_NONE, ISA_AVX2, ISA_AVX512 };
static const char *const isa_names[] = {"none", "avx2", "avx512"};

/* The most threads measured on. */
#define PEAK_MAX_THREADS 256

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#ifdef TORC_PEAK_X86
/* XCR0: which register states the OS saves on a context switch. */
static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

/* The widest FMA ISA that both the CPU (CPUID) and the OS (XCR0) enable. */
static int detect(void) {
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

static double fma_kernel(int isa, int64_t iters) {
  return isa == ISA_AVX512 ? fma512(iters) : fma256(iters);
}

/* The start gate: the workers wait for `go`, then run unless `abort`. */
typedef struct peak_gate {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int go, abort;
} peak_gate;

typedef struct peak_job {
  int isa;
  int64_t iters;
  peak_gate *gate;
  double flops;
} peak_job;

static void *peak_worker(void *arg) {
  peak_job *j = arg;
  pthread_mutex_lock(&j->gate->lock);
  while (!j->gate->go)
    pthread_cond_wait(&j->gate->cond, &j->gate->lock);
  int abort = j->gate->abort;
  pthread_mutex_unlock(&j->gate->lock);
  j->flops = abort ? 0 : fma_kernel(j->isa, j->iters);
  return NULL;
}

/* GFLOP/s of `threads` threads (the caller and threads - 1 more) running
 * `iters` rounds each, timed from the common start to the last one's end;
 * 0 when a thread cannot start. */
static double timed_run(int isa, int threads, int64_t iters) {
  pthread_t tid[PEAK_MAX_THREADS];
  peak_job jobs[PEAK_MAX_THREADS];
  peak_gate gate = {.lock = PTHREAD_MUTEX_INITIALIZER,
                    .cond = PTHREAD_COND_INITIALIZER};
  int started = 0;
  for (int t = 1; t < threads; t++) {
    jobs[t] = (peak_job){.isa = isa, .iters = iters, .gate = &gate};
    if (pthread_create(&tid[t], NULL, peak_worker, &jobs[t]) != 0)
      break;
    started++;
  }
  int all = started == threads - 1;
  pthread_mutex_lock(&gate.lock);
  gate.go = 1;
  gate.abort = !all;
  pthread_cond_broadcast(&gate.cond);
  pthread_mutex_unlock(&gate.lock);
  double t0 = now_s(), flops = all ? fma_kernel(isa, iters) : 0;
  for (int t = 1; t <= started; t++) {
    pthread_join(tid[t], NULL);
    flops += jobs[t].flops;
  }
  double dt = now_s() - t0;
  pthread_cond_destroy(&gate.cond);
  pthread_mutex_destroy(&gate.lock);
  return all && dt > 0 ? flops / dt * 1e-9 : 0;
}

/* The peak on `threads` threads, 0 where the run could not be made. */
static double measure(int isa, int threads) {
  /* Calibrate on one thread: ~20 ms of warm-up (clock ramp), then runs of
   * ~30 ms: five short runs rather than fewer long ones, so that on a busy
   * machine one of them more likely finds the cores free. */
  int64_t iters = 1 << 10;
  double t0 = now_s();
  fma_kernel(isa, iters);
  double dt = now_s() - t0;
  while (dt < 0.02 && iters < ((int64_t)1 << 40)) {
    iters *= 2;
    t0 = now_s();
    fma_kernel(isa, iters);
    dt = now_s() - t0;
  }
  iters = (int64_t)((double)iters * 0.03 / (dt > 0 ? dt : 1e-3)) + 1;
  double best = 0;
  for (int r = 0; r < 5; r++) {
    double g = timed_run(isa, threads, iters);
    if (g > best)
      best = g;
  }
  return best;
}
#endif

/* Figures measured so far, by thread count. */
static struct {
  int threads, isa;
  double gflops;
} measured[8];
static int n_measured;
static pthread_mutex_t peak_lock = PTHREAD_MUTEX_INITIALIZER;

double torc_cpu_peak_gflops(int threads, const char **isa,
                            int *used_threads) {
  if (threads <= 0)
    threads = torc_get_num_threads();
  if (threads < 1)
    threads = 1;
  if (threads > PEAK_MAX_THREADS)
    threads = PEAK_MAX_THREADS;
  if (used_threads)
    *used_threads = threads;
  pthread_mutex_lock(&peak_lock);
  for (int i = 0; i < n_measured; i++)
    if (measured[i].threads == threads) {
      if (isa)
        *isa = isa_names[measured[i].isa];
      double g = measured[i].gflops;
      pthread_mutex_unlock(&peak_lock);
      return g;
    }
  int which = ISA_NONE;
  double g = 0;
#ifdef TORC_PEAK_X86
  which = detect();
  if (which != ISA_NONE)
    g = measure(which, threads);
  if (g <= 0)
    which = ISA_NONE;
#endif
  /* Remembered (the first 8 thread counts; later ones measure again). */
  if (n_measured < (int)(sizeof measured / sizeof measured[0])) {
    measured[n_measured].threads = threads;
    measured[n_measured].isa = which;
    measured[n_measured].gflops = g;
    n_measured++;
  }
  pthread_mutex_unlock(&peak_lock);
  if (isa)
    *isa = isa_names[which];
  return g;
}
