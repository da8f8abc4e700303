/* plugins/cpu/pool.c — the cpu plugin's one thread pool: n-1 persistent
 * workers parked on a condition variable (no spinning, so they never
 * compete with OpenBLAS or the caller for the 2 cores), woken per
 * parallel_for. Every shared field is guarded by one mutex, which keeps it
 * helgrind-clean; a wake costs a few microseconds, so kernels call it only
 * for work of tens of microseconds or more (see TORC_CPU_PAR_MIN).
 */
#include <pthread.h>
#include <stdlib.h>

#include "cpu_internal.h"

enum { POOL_MAX_WORKERS = 63 };

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake; /* workers wait for a new generation */
  pthread_cond_t done; /* the caller waits for pending == 0 */
  pthread_t tid[POOL_MAX_WORKERS];
  int n_workers;
  int busy;     /* a parallel_for is running (others run serially) */
  int stop;     /* fini: workers exit */
  uint64_t gen; /* bumped per job */
  /* The job: chunks 1 .. n_chunks-1 go to workers 0 .. n_chunks-2. */
  torc_cpu_task fn;
  void *ctx;
  int64_t n;
  int n_chunks;
  int pending;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

/* Set in the workers, so a kernel they run does not nest a job. */
static _Thread_local int in_worker;

/* Chunk c of n elements in k chunks: [c n / k, (c+1) n / k). */
static void chunk_range(int64_t n, int k, int c, int64_t *b, int64_t *e) {
  *b = (int64_t)((__int128)n * c / k);
  *e = (int64_t)((__int128)n * (c + 1) / k);
}

static void *worker_main(void *arg) {
  int me = (int)(intptr_t)arg;
  in_worker = 1;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool.lock);
  for (;;) {
    while (!pool.stop && pool.gen == seen)
      pthread_cond_wait(&pool.wake, &pool.lock);
    if (pool.stop)
      break;
    seen = pool.gen;
    if (me + 1 >= pool.n_chunks)
      continue; /* not needed for this job */
    torc_cpu_task fn = pool.fn;
    void *ctx = pool.ctx;
    int64_t b, e;
    chunk_range(pool.n, pool.n_chunks, me + 1, &b, &e);
    pthread_mutex_unlock(&pool.lock);
    fn(ctx, b, e);
    pthread_mutex_lock(&pool.lock);
    if (--pool.pending == 0)
      pthread_cond_signal(&pool.done);
  }
  pthread_mutex_unlock(&pool.lock);
  return NULL;
}

/* Starts workers up to `want` (called with the lock held); returns how
 * many there are. */
static int grow(int want) {
  if (want > POOL_MAX_WORKERS)
    want = POOL_MAX_WORKERS;
  while (pool.n_workers < want) {
    if (pthread_create(&pool.tid[pool.n_workers], NULL, worker_main,
                       (void *)(intptr_t)pool.n_workers) != 0)
      break;
    pool.n_workers++;
  }
  return pool.n_workers;
}

void torc_cpu__parallel_for(int n_threads, int64_t n, int64_t grain,
                            torc_cpu_task fn, void *ctx) {
  if (n <= 0)
    return;
  if (grain < 1)
    grain = 1;
  int64_t k = (n + grain - 1) / grain;
  if (k > n_threads)
    k = n_threads;
  if (k <= 1 || in_worker) {
    fn(ctx, 0, n);
    return;
  }
  pthread_mutex_lock(&pool.lock);
  if (pool.busy || pool.stop) { /* another thread's job: run serially */
    pthread_mutex_unlock(&pool.lock);
    fn(ctx, 0, n);
    return;
  }
  int w = grow((int)k - 1);
  if (w + 1 < k)
    k = w + 1;
  if (k <= 1) {
    pthread_mutex_unlock(&pool.lock);
    fn(ctx, 0, n);
    return;
  }
  pool.busy = 1;
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  pool.n_chunks = (int)k;
  pool.pending = (int)k - 1;
  pool.gen++;
  pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.lock);
  int64_t b, e;
  chunk_range(n, (int)k, 0, &b, &e);
  fn(ctx, b, e);
  pthread_mutex_lock(&pool.lock);
  while (pool.pending > 0)
    pthread_cond_wait(&pool.done, &pool.lock);
  pool.busy = 0;
  pthread_mutex_unlock(&pool.lock);
}

void torc_cpu__pool_fini(void) {
  pthread_mutex_lock(&pool.lock);
  pool.stop = 1;
  pthread_cond_broadcast(&pool.wake);
  int n = pool.n_workers;
  pthread_mutex_unlock(&pool.lock);
  for (int i = 0; i < n; i++)
    pthread_join(pool.tid[i], NULL);
  pthread_mutex_lock(&pool.lock);
  pool.n_workers = 0;
  pool.stop = 0; /* a reload starts afresh */
  pthread_mutex_unlock(&pool.lock);
}
