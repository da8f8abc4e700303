/* plugins/cpu/pool.c — the cpu plugin's one thread pool: n-1 persistent
 * workers that spin briefly on the job counter after each job, then park
 * on a condition variable. A training step is a chain of parallel kernels
 * a few microseconds apart; a worker still spinning starts the next one in
 * well under a microsecond where a condition-variable wake costs 5-50 us
 * (a futex and a reschedule), which was most of a small GEMM's time. The
 * spin is bounded in time (TORC_CPU_SPIN_US, default 50 us) so an idle
 * worker gives its core back to the data loader and to other processes.
 *
 * The handshake is Dekker's with sequentially consistent atomics: the
 * caller bumps `gen`, then reads `sleepers`; a worker counts itself in
 * `sleepers` under the lock, then reads `gen`. One of the two sees the
 * other's write, so a job is never missed and a parked worker is woken
 * only when one is parked. Completion mirrors it with `pending` and
 * `caller_parked`.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

#include "cpu_internal.h"

enum { POOL_MAX_WORKERS = 63 }; /* chunks <= 64 fit gen's low byte */

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake; /* parked workers wait for a new generation */
  pthread_cond_t done; /* a parked caller waits for pending == 0 */
  pthread_t tid[POOL_MAX_WORKERS];
  int n_workers;         /* guarded by lock */
  atomic_int busy;       /* a parallel_for is running (others run serially) */
  atomic_int stop;       /* fini: workers exit */
  /* Bumped per job, after the job is written: the job count times 256
   * plus the job's chunk count, so that a worker reads both at once. */
  atomic_uint_fast64_t gen;
  atomic_int sleepers;   /* workers parked on `wake` */
  atomic_int pending;    /* chunks of the current job not yet finished */
  atomic_int caller_parked; /* the caller waits on `done` */
  /* The job, written before gen is bumped: chunks 1 .. k-1 go to
   * workers 0 .. k-2 (k = gen % 256); a worker outside them reads none of
   * it, so the next job may overwrite it while that worker looks on. */
  torc_cpu_task fn;
  void *ctx;
  int64_t n;
  int64_t dyn_chunk;  /* > 0: chunks of this size claimed from `next` */
  atomic_llong next;  /* the next unclaimed element (dynamic jobs) */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

/* Each worker's first `seen` generation: the one before the job that
 * created it (written before pthread_create, so the worker reads it). */
static uint64_t start_gen[POOL_MAX_WORKERS];

/* Set in the workers, so a kernel they run does not nest a job. */
static _Thread_local int in_worker;

/* How long a worker or the caller spins before parking, in ns (-1: not
 * read from the environment yet). */
static atomic_llong spin_ns = -1;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t spin_budget(void) {
  int64_t ns = atomic_load(&spin_ns);
  if (ns < 0) {
    const char *s = getenv("TORC_CPU_SPIN_US");
    long us = 50;
    if (s && *s) {
      char *end;
      long v = strtol(s, &end, 10);
      if (*end == '\0' && v >= 0 && v <= 100000)
        us = v;
    }
    ns = (int64_t)us * 1000;
    atomic_store(&spin_ns, ns);
  }
  return ns;
}

/* Spins until *v != old or stop is set, for at most `budget` ns; returns
 * the last value read. */
static uint64_t spin_gen(uint64_t old, int64_t budget) {
  uint64_t g = atomic_load(&pool.gen);
  if (g != old || budget <= 0)
    return g;
  int64_t t0 = now_ns();
  for (unsigned i = 1;; i++) {
    cpu_relax();
    g = atomic_load(&pool.gen);
    if (g != old || atomic_load(&pool.stop))
      return g;
    if ((i & 63) == 0 && now_ns() - t0 > budget)
      return g;
  }
}

/* Chunk c of n elements in k chunks: [c n / k, (c+1) n / k). */
static void chunk_range(int64_t n, int k, int c, int64_t *b, int64_t *e) {
  *b = (int64_t)((__int128)n * c / k);
  *e = (int64_t)((__int128)n * (c + 1) / k);
}

/* A dynamic job's loop, run by the caller and each worker in it: claim
 * the next chunk until none is left. A thread the OS preempted (the data
 * loader's, another process's) then delays the job by at most one chunk:
 * the others take what it has not claimed. */
static void run_claims(void) {
  int64_t n = pool.n, c = pool.dyn_chunk;
  for (;;) {
    int64_t b = atomic_fetch_add(&pool.next, c);
    if (b >= n)
      return;
    pool.fn(pool.ctx, b, b + c < n ? b + c : n);
  }
}

static void *worker_main(void *arg) {
  int me = (int)(intptr_t)arg;
  in_worker = 1;
  int64_t budget = spin_budget();
  uint64_t seen = start_gen[me];
  for (;;) {
    uint64_t g = spin_gen(seen, budget);
    if (g == seen && !atomic_load(&pool.stop)) {
      pthread_mutex_lock(&pool.lock);
      atomic_fetch_add(&pool.sleepers, 1);
      while (!atomic_load(&pool.stop) && (g = atomic_load(&pool.gen)) == seen)
        pthread_cond_wait(&pool.wake, &pool.lock);
      atomic_fetch_sub(&pool.sleepers, 1);
      pthread_mutex_unlock(&pool.lock);
    }
    if (atomic_load(&pool.stop))
      break;
    seen = g;
    int k = (int)(g & 255);
    if (me + 1 >= k)
      continue; /* not needed for this job */
    if (pool.dyn_chunk > 0) {
      run_claims();
    } else {
      int64_t b, e;
      chunk_range(pool.n, k, me + 1, &b, &e);
      pool.fn(pool.ctx, b, e);
    }
    if (atomic_fetch_sub(&pool.pending, 1) == 1 &&
        atomic_load(&pool.caller_parked)) {
      pthread_mutex_lock(&pool.lock);
      pthread_cond_signal(&pool.done);
      pthread_mutex_unlock(&pool.lock);
    }
  }
  return NULL;
}

/* Starts workers up to `want` (called with the lock held); returns how
 * many there are. */
static int grow(int want) {
  if (want > POOL_MAX_WORKERS)
    want = POOL_MAX_WORKERS;
  while (pool.n_workers < want) {
    start_gen[pool.n_workers] = atomic_load(&pool.gen);
    if (pthread_create(&pool.tid[pool.n_workers], NULL, worker_main,
                       (void *)(intptr_t)pool.n_workers) != 0)
      break;
    pool.n_workers++;
  }
  return pool.n_workers;
}

/* Runs fn over [0, n) on up to n_threads threads (the caller one of
 * them): static slices (dyn_chunk 0, at least `grain` elements each) or
 * chunks of dyn_chunk elements claimed one at a time. */
static void run_job(int n_threads, int64_t n, int64_t grain,
                    int64_t dyn_chunk, torc_cpu_task fn, void *ctx) {
  if (n <= 0)
    return;
  if (grain < 1)
    grain = 1;
  int64_t k = (n + grain - 1) / grain;
  if (k > n_threads)
    k = n_threads;
  if (k <= 1 || in_worker || atomic_load(&pool.stop)) {
    fn(ctx, 0, n);
    return;
  }
  if (atomic_exchange(&pool.busy, 1)) { /* another thread's job: serial */
    fn(ctx, 0, n);
    return;
  }
  pthread_mutex_lock(&pool.lock);
  int w = grow((int)k - 1);
  pthread_mutex_unlock(&pool.lock);
  if (w + 1 < k)
    k = w + 1;
  if (k <= 1) {
    atomic_store(&pool.busy, 0);
    fn(ctx, 0, n);
    return;
  }
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  pool.dyn_chunk = dyn_chunk;
  atomic_store(&pool.next, 0);
  atomic_store(&pool.pending, (int)k - 1);
  uint64_t g = atomic_load(&pool.gen);
  atomic_store(&pool.gen, ((g >> 8) + 1) << 8 | (uint64_t)k); /* publishes */
  if (atomic_load(&pool.sleepers) > 0) {
    pthread_mutex_lock(&pool.lock);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
  }
  if (dyn_chunk > 0) {
    run_claims();
  } else {
    int64_t b, e;
    chunk_range(n, (int)k, 0, &b, &e);
    fn(ctx, b, e);
  }
  /* Wait for the other chunks: spin, then park. */
  if (atomic_load(&pool.pending) > 0) {
    int64_t budget = spin_budget(), t0 = now_ns();
    for (unsigned i = 1; atomic_load(&pool.pending) > 0; i++) {
      cpu_relax();
      if ((i & 63) == 0 && now_ns() - t0 > budget)
        break;
    }
    if (atomic_load(&pool.pending) > 0) {
      pthread_mutex_lock(&pool.lock);
      atomic_store(&pool.caller_parked, 1);
      while (atomic_load(&pool.pending) > 0)
        pthread_cond_wait(&pool.done, &pool.lock);
      atomic_store(&pool.caller_parked, 0);
      pthread_mutex_unlock(&pool.lock);
    }
  }
  atomic_store(&pool.busy, 0);
}

void torc_cpu__parallel_for(int n_threads, int64_t n, int64_t grain,
                            torc_cpu_task fn, void *ctx) {
  run_job(n_threads, n, grain, 0, fn, ctx);
}

void torc_cpu__parallel_dyn(int n_threads, int64_t n, int64_t chunk,
                            torc_cpu_task fn, void *ctx) {
  if (chunk < 1)
    chunk = 1;
  run_job(n_threads, n, chunk, chunk, fn, ctx);
}

void torc_cpu__pool_fini(void) {
  pthread_mutex_lock(&pool.lock);
  atomic_store(&pool.stop, 1);
  pthread_cond_broadcast(&pool.wake);
  int n = pool.n_workers;
  pthread_mutex_unlock(&pool.lock);
  for (int i = 0; i < n; i++)
    pthread_join(pool.tid[i], NULL);
  pthread_mutex_lock(&pool.lock);
  pool.n_workers = 0;
  atomic_store(&pool.stop, 0); /* a reload starts afresh */
  pthread_mutex_unlock(&pool.lock);
}
