/* plugins/cuda/nccl.c — the "nccl" communicator: collectives on cuda
 * tensors with NCCL, for data-parallel training with one GPU per rank.
 * Built only when configure finds NCCL beside the CUDA toolkit.
 *
 * The core makes the unique id on rank 0 (get_unique_id), carries it to
 * the other ranks over the mpi communicator and calls init on every rank
 * with it. The communicator is non-blocking (ncclConfig_t.blocking = 0):
 * its init and every call return at once and complete in the background,
 * and this file polls ncclCommGetAsyncError against [dist] timeout, so a
 * rank that died or hangs makes the others fail with a message instead of
 * waiting forever inside NCCL.
 *
 * A collective is queued on the stream the core gives (the device's
 * default stream when NULL), in place where the ABI says so; its work
 * handle is a CUDA event recorded on that stream after it. test queries
 * the event and NCCL's asynchronous error (a peer that went away, a
 * network failure); wait polls test with a deadline.
 */
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_internal.h"

static const torc_host *host;

typedef struct ncomm {
  ncclComm_t c;
  int dev; /* the CUDA device of this rank */
  int rank, world;
  double timeout;     /* [dist] timeout: init, the enqueue of a call, destroy */
  cudaStream_t own;   /* barrier's stream, created on first use */
  int *one;           /* barrier's int on the device, allocated with `own` */
  cudaEvent_t fence;  /* barrier: the default stream's work so far */
  pthread_mutex_t mu; /* calls from different threads kept apart */
} ncomm;

typedef struct nwork {
  cudaEvent_t ev;
  const char *what;
} nwork;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A poll's pause: none for the first 2000 tries, then sleeps that grow to
 * 1 ms, so a rank waiting for a slow peer leaves it the cores. */
static void nap(long *spins, useconds_t *us) {
  if (++*spins <= 2000)
    return;
  *us = *us ? (*us < 1000 ? *us * 2 : 1000) : 10;
  usleep(*us);
}

/* What to do about a failed NCCL call, by its result. */
static const char *advice(ncclResult_t r) {
  switch (r) {
  case ncclSystemError:
  case ncclRemoteError:
    return "a rank stopped or the network between the ranks failed (the "
           "other ranks' output says whether one ended first); set "
           "NCCL_DEBUG=INFO for NCCL's account and, across machines, "
           "NCCL_SOCKET_IFNAME to the interface the ranks reach each other "
           "on";
  case ncclUnhandledCudaError:
    return "a CUDA call inside NCCL failed; set NCCL_DEBUG=INFO for which "
           "one";
  case ncclInvalidArgument:
  case ncclInvalidUsage:
    return "every rank must call the same collectives in the same order, "
           "with the same sizes and dtypes, one rank per GPU; set "
           "NCCL_DEBUG=WARN for what NCCL refused";
  default:
    return "set NCCL_DEBUG=INFO for NCCL's account";
  }
}

/* set_error for a failed NCCL call: what failed, NCCL's words (the
 * result's and its last error's) and what to do. */
static int nccl_error(ncclComm_t comm, ncclResult_t r, const char *what) {
  const char *last = ncclGetLastError(comm);
  int has_last = last != NULL && last[0] != '\0';
  return host->set_error(TORC_ERR_DIST, "%s failed: %s%s%s (ncclResult %d); %s",
                         what, ncclGetErrorString(r), has_last ? ": " : "",
                         has_last ? last : "", (int)r, advice(r));
}

/* set_error for a failed CUDA call of the communicator. */
static int cuda_error(const ncomm *c, cudaError_t e, const char *what) {
  (void)cudaGetLastError();
  return host->set_error(e == cudaErrorMemoryAllocation ? TORC_ERR_OOM
                                                        : TORC_ERR_DEVICE,
                         "nccl on cuda:%d: %s failed: %s: %s", c->dev, what,
                         cudaGetErrorName(e), cudaGetErrorString(e));
}

/* Polls the communicator until the call that returned r has completed in
 * the background (a non-blocking communicator's calls return
 * ncclInProgress), at most timeout_s seconds. TORC_OK, or TORC_ERR_DIST
 * naming `what` with NCCL's words or the timeout. */
static int settle(ncclComm_t comm, ncclResult_t r, const char *what,
                  double timeout_s) {
  if (r != ncclSuccess && r != ncclInProgress)
    return nccl_error(comm, r, what);
  double t0 = now_s();
  long spins = 0;
  useconds_t us = 0;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t q = ncclCommGetAsyncError(comm, &state);
    if (q != ncclSuccess)
      return nccl_error(comm, q, "ncclCommGetAsyncError");
    if (state == ncclSuccess)
      return TORC_OK;
    if (state != ncclInProgress)
      return nccl_error(comm, state, what);
    if (now_s() - t0 > timeout_s)
      return host->set_error(TORC_ERR_DIST,
                             "%s did not complete within %.0f s ([dist] "
                             "timeout): another rank stopped, hangs or "
                             "never started (its own output says why); set "
                             "NCCL_DEBUG=INFO for NCCL's account and, "
                             "across machines, NCCL_SOCKET_IFNAME to the "
                             "interface the ranks reach each other on",
                             what, timeout_s);
    nap(&spins, &us);
  }
}

static int n_get_unique_id(void *buf, size_t *size) {
  if (*size < sizeof(ncclUniqueId))
    return host->set_error(TORC_ERR_INVALID,
                           "nccl: the unique id takes %zu bytes; the buffer "
                           "has %zu",
                           sizeof(ncclUniqueId), *size);
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess)
    return nccl_error(NULL, r, "ncclGetUniqueId (rank 0 making the id)");
  memcpy(buf, &id, sizeof id);
  *size = sizeof id;
  return TORC_OK;
}

static int n_init(const torc_comm_init_args *a, void **out) {
  *out = NULL;
  if (a->unique_id == NULL || a->unique_id_size != sizeof(ncclUniqueId))
    return host->set_error(TORC_ERR_INVALID,
                           "nccl: init needs rank 0's unique id of %zu "
                           "bytes; it got %zu bytes (are the ranks' cuda "
                           "plugins built against different NCCL "
                           "versions?)",
                           sizeof(ncclUniqueId),
                           a->unique_id ? a->unique_id_size : (size_t)0);
  if (a->world < 1 || a->rank < 0 || a->rank >= a->world)
    return host->set_error(TORC_ERR_INVALID,
                           "nccl: rank %d of %d is not a rank of the world",
                           a->rank, a->world);
  /* Makes the device current (NCCL binds the communicator to it) and
   * checks it exists. */
  if (torc_cuda__stream(a->device_index) == NULL)
    return TORC_ERR_DEVICE;
  ncomm *c = calloc(1, sizeof *c);
  if (c == NULL)
    return host->set_error(TORC_ERR_OOM, "out of memory joining the world");
  c->dev = a->device_index;
  c->timeout = a->timeout_s > 0 ? a->timeout_s : 300;
  pthread_mutex_init(&c->mu, NULL);
  ncclUniqueId id;
  memcpy(&id, a->unique_id, sizeof id);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&c->c, a->world, id, a->rank, &cfg);
  int st =
      settle(c->c, r, "ncclCommInitRankConfig (joining the world)", c->timeout);
  if (st == TORC_OK) {
    int rank = -1, world = 0;
    if ((r = ncclCommUserRank(c->c, &rank)) != ncclSuccess)
      st = nccl_error(c->c, r, "ncclCommUserRank");
    else if ((r = ncclCommCount(c->c, &world)) != ncclSuccess)
      st = nccl_error(c->c, r, "ncclCommCount");
    c->rank = rank, c->world = world;
  }
  if (st != TORC_OK) {
    if (c->c != NULL)
      (void)ncclCommAbort(c->c);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return st;
  }
  if (host->log) {
    int v = 0;
    (void)ncclGetVersion(&v);
    host->log(TORC_LOG_INFO, "nccl: NCCL %d.%d.%d, rank %d of %d on cuda:%d",
              v / 10000, v / 100 % 100, v % 100, c->rank, c->world, c->dev);
  }
  *out = c;
  return TORC_OK;
}

static int n_rank(void *h) { return ((ncomm *)h)->rank; }
static int n_world(void *h) { return ((ncomm *)h)->world; }

static int dtype_of(torc_dtype dt, ncclDataType_t *out) {
  static const char *const names[] = {"f32", "f64", "f16", "bf16",
                                      "i32", "i64", "u8",  "bool"};
  switch (dt) {
  case TORC_F32:
    *out = ncclFloat32;
    return TORC_OK;
  case TORC_F64:
    *out = ncclFloat64;
    return TORC_OK;
  case TORC_F16:
    *out = ncclFloat16;
    return TORC_OK;
  case TORC_BF16:
    *out = ncclBfloat16;
    return TORC_OK;
  case TORC_I32:
    *out = ncclInt32;
    return TORC_OK;
  case TORC_I64:
    *out = ncclInt64;
    return TORC_OK;
  default:
    return host->set_error(TORC_ERR_DTYPE,
                           "the nccl communicator reduces f32, f64, f16, "
                           "bf16, i32 and i64 tensors, not %s; cast the "
                           "tensor first",
                           dt >= 0 && dt < TORC_DTYPE_COUNT ? names[dt]
                                                            : "an unknown "
                                                              "dtype");
  }
}

static int op_of(int op, ncclRedOp_t *out) {
  switch (op) {
  case TORC_COMM_SUM:
    *out = ncclSum;
    return TORC_OK;
  case TORC_COMM_AVG:
    *out = ncclAvg;
    return TORC_OK;
  case TORC_COMM_MAX:
    *out = ncclMax;
    return TORC_OK;
  default:
    return host->set_error(TORC_ERR_INVALID,
                           "the nccl communicator has no reduction %d", op);
  }
}

/* The stream a collective is queued on: `stream`, or the device's default
 * one for NULL. Makes the communicator's device current; NULL after
 * set_error when it cannot be. */
static cudaStream_t stream_for(const ncomm *c, void *stream) {
  cudaStream_t s = torc_cuda__stream(c->dev);
  return s != NULL && stream != NULL ? (cudaStream_t)stream : s;
}

/* Takes c->mu and the stream a collective goes on; NULL (the lock not
 * held, the error set) when the device has none. */
static cudaStream_t lock_stream(ncomm *c, void *stream) {
  pthread_mutex_lock(&c->mu);
  cudaStream_t s = stream_for(c, stream);
  if (s == NULL)
    pthread_mutex_unlock(&c->mu);
  return s;
}

static int n_wait(void *h, void *wk, double timeout_s);

/* After a collective was queued on s (r: what NCCL returned): waits for
 * the enqueue to settle, then hands the caller an event recorded after it
 * as work, or waits for it with the communicator's timeout when work_out
 * is NULL. Called with c->mu held; releases it. */
static int finish(ncomm *c, ncclResult_t r, cudaStream_t s, const char *call,
                  const char *what, void **work_out) {
  int st = settle(c->c, r, call, c->timeout);
  nwork *w = NULL;
  if (st == TORC_OK && (w = malloc(sizeof *w)) == NULL)
    st = host->set_error(TORC_ERR_OOM, "out of memory in the %s", what);
  if (st == TORC_OK) {
    w->what = what;
    cudaError_t e = cudaEventCreateWithFlags(&w->ev, cudaEventDisableTiming);
    if (e == cudaSuccess && (e = cudaEventRecord(w->ev, s)) != cudaSuccess)
      (void)cudaEventDestroy(w->ev);
    if (e != cudaSuccess) {
      free(w);
      st = cuda_error(c, e, "recording the collective's event");
    }
  }
  pthread_mutex_unlock(&c->mu);
  if (st != TORC_OK)
    return st;
  if (work_out) {
    *work_out = w;
    return TORC_OK;
  }
  return n_wait(c, w, c->timeout);
}

static int n_all_reduce(void *h, void *buf, size_t offset, size_t count,
                        torc_dtype dt, int op, void *stream, void **work_out) {
  ncomm *c = h;
  ncclDataType_t t = ncclFloat32;
  ncclRedOp_t o = ncclSum;
  int st;
  if ((st = dtype_of(dt, &t)) || (st = op_of(op, &o)))
    return st;
  cudaStream_t s = lock_stream(c, stream);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  char *p = (char *)buf + offset;
  ncclResult_t r = ncclAllReduce(p, p, count, t, o, c->c, s);
  return finish(c, r, s, "ncclAllReduce", "all-reduce", work_out);
}

static int n_broadcast(void *h, void *buf, size_t offset, size_t nbytes,
                       int root, void *stream, void **work_out) {
  ncomm *c = h;
  cudaStream_t s = lock_stream(c, stream);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  char *p = (char *)buf + offset;
  ncclResult_t r = ncclBroadcast(p, p, nbytes, ncclUint8, root, c->c, s);
  return finish(c, r, s, "ncclBroadcast", "broadcast", work_out);
}

static int n_all_gather(void *h, const void *send, size_t so, void *recv,
                        size_t ro, size_t nbytes, void *stream,
                        void **work_out) {
  ncomm *c = h;
  cudaStream_t s = lock_stream(c, stream);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  ncclResult_t r = ncclAllGather((const char *)send + so, (char *)recv + ro,
                                 nbytes, ncclUint8, c->c, s);
  return finish(c, r, s, "ncclAllGather", "all-gather", work_out);
}

static int n_reduce_scatter(void *h, const void *send, size_t so, void *recv,
                            size_t ro, size_t count, torc_dtype dt, int op,
                            void *stream, void **work_out) {
  ncomm *c = h;
  ncclDataType_t t = ncclFloat32;
  ncclRedOp_t o = ncclSum;
  int st;
  if ((st = dtype_of(dt, &t)) || (st = op_of(op, &o)))
    return st;
  cudaStream_t s = lock_stream(c, stream);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  ncclResult_t r = ncclReduceScatter((const char *)send + so, (char *)recv + ro,
                                     count, t, o, c->c, s);
  return finish(c, r, s, "ncclReduceScatter", "reduce-scatter", work_out);
}

static int n_test(void *h, void *wk, int *done) {
  ncomm *c = h;
  nwork *w = wk;
  *done = 0;
  cudaError_t e = cudaEventQuery(w->ev);
  if (e == cudaSuccess) {
    (void)cudaEventDestroy(w->ev);
    free(w);
    *done = 1;
    return TORC_OK;
  }
  if (e != cudaErrorNotReady)
    return cuda_error(c, e, w->what);
  (void)cudaGetLastError();
  /* Not done: a peer that went away or a network failure shows here (the
   * collective's kernel would wait for it forever). */
  ncclResult_t state = ncclSuccess;
  ncclResult_t q = ncclCommGetAsyncError(c->c, &state);
  if (q != ncclSuccess)
    return nccl_error(c->c, q, "ncclCommGetAsyncError");
  if (state != ncclSuccess && state != ncclInProgress) {
    char what[96];
    snprintf(what, sizeof what, "the %s", w->what);
    return nccl_error(c->c, state, what);
  }
  return TORC_OK;
}

static int n_wait(void *h, void *wk, double timeout_s) {
  const char *what = ((nwork *)wk)->what;
  double t0 = now_s();
  long spins = 0;
  useconds_t us = 0;
  for (;;) {
    int done = 0;
    int st = n_test(h, wk, &done);
    if (st != TORC_OK || done)
      return st;
    if (now_s() - t0 > timeout_s)
      /* The collective stays queued: the caller ends the job (destroy
       * with abort, which stops its kernel). */
      return host->set_error(TORC_ERR_DIST,
                             "the %s did not complete within %.0f s ([dist] "
                             "timeout): another rank stopped or hangs (its "
                             "own output says why); set NCCL_DEBUG=INFO for "
                             "NCCL's account",
                             what, timeout_s);
    nap(&spins, &us);
  }
}

/* An all-reduce of one int on the communicator's own stream, queued after
 * the work on the device's default stream so far (which keeps NCCL's calls
 * in the order they were made), then waited for with the deadline. */
static int n_barrier(void *h, double timeout_s) {
  ncomm *c = h;
  pthread_mutex_lock(&c->mu);
  cudaStream_t s = torc_cuda__stream(c->dev);
  if (s == NULL) {
    pthread_mutex_unlock(&c->mu);
    return TORC_ERR_DEVICE;
  }
  cudaError_t e = cudaSuccess;
  if (c->own == NULL) {
    e = cudaStreamCreateWithFlags(&c->own, cudaStreamNonBlocking);
    if (e == cudaSuccess)
      e = cudaEventCreateWithFlags(&c->fence, cudaEventDisableTiming);
    if (e == cudaSuccess)
      e = cudaMalloc((void **)&c->one, sizeof(int));
    if (e == cudaSuccess)
      e = cudaMemsetAsync(c->one, 0, sizeof(int), c->own);
    if (e != cudaSuccess) {
      if (c->one)
        (void)cudaFree(c->one);
      if (c->fence)
        (void)cudaEventDestroy(c->fence);
      if (c->own)
        (void)cudaStreamDestroy(c->own);
      c->one = NULL, c->fence = NULL, c->own = NULL;
    }
  }
  if (e == cudaSuccess && (e = cudaEventRecord(c->fence, s)) == cudaSuccess)
    e = cudaStreamWaitEvent(c->own, c->fence, 0);
  if (e != cudaSuccess) {
    pthread_mutex_unlock(&c->mu);
    return cuda_error(c, e, "setting up the barrier's stream");
  }
  /* The max of zeros: the value stays 0, however many barriers. */
  ncclResult_t r =
      ncclAllReduce(c->one, c->one, 1, ncclInt32, ncclMax, c->c, c->own);
  nwork *w = NULL;
  int st =
      finish(c, r, c->own, "ncclAllReduce (barrier)", "barrier", (void **)&w);
  return st != TORC_OK ? st : n_wait(c, w, timeout_s);
}

/* Leaves the world: after a failure (abort) ncclCommAbort, which stops the
 * communicator's kernels at once; otherwise ncclCommFinalize, which
 * completes the queued calls (at most [dist] timeout, then an abort), and
 * ncclCommDestroy. The other ranks are stopped by the core's bootstrap
 * communicator (MPI_Abort). Sets no error: the caller's stands. */
static void n_destroy(void *h, int abort) {
  ncomm *c = h;
  if (c == NULL)
    return;
  (void)cudaSetDevice(c->dev);
  int aborted = abort;
  if (!abort) {
    ncclResult_t r = ncclCommFinalize(c->c);
    double t0 = now_s();
    long spins = 0;
    useconds_t us = 0;
    while (r == ncclInProgress || r == ncclSuccess) {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(c->c, &state) != ncclSuccess)
        state = ncclInternalError;
      r = state;
      if (r != ncclInProgress || now_s() - t0 > c->timeout)
        break;
      nap(&spins, &us);
    }
    if (r == ncclSuccess) {
      (void)ncclCommDestroy(c->c);
    } else {
      if (host->log)
        host->log(TORC_LOG_WARN,
                  "nccl: ncclCommFinalize did not complete (%s); the "
                  "communicator is aborted instead",
                  r == ncclInProgress ? "timed out" : ncclGetErrorString(r));
      aborted = 1;
    }
  }
  if (aborted)
    (void)ncclCommAbort(c->c);
  if (c->own) {
    (void)cudaFree(c->one);
    (void)cudaEventDestroy(c->fence);
    (void)cudaStreamDestroy(c->own);
  }
  (void)cudaGetLastError();
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static const torc_comm_type nccl_comm = {
    .struct_size = sizeof(torc_comm_type),
    .name = "nccl",
    .device_type = "cuda",
    .description = "NCCL: collectives on cuda tensors, one GPU per rank",
    .get_unique_id = n_get_unique_id,
    .init = n_init,
    .rank = n_rank,
    .world = n_world,
    .all_reduce = n_all_reduce,
    .broadcast = n_broadcast,
    .all_gather = n_all_gather,
    .reduce_scatter = n_reduce_scatter,
    .test = n_test,
    .wait = n_wait,
    .barrier = n_barrier,
    .destroy = n_destroy,
};

int torc_cuda__register_nccl(const torc_host *h, torc_plugin *self) {
  host = h;
  return h->register_comm(self, &nccl_comm);
}
