/* plugins/mpi/mpi.c — the "mpi" communicator on Open MPI: collectives on
 * cpu tensors for training in several processes, and the bootstrap that
 * carries NCCL's unique id. The world is the job mpirun started
 * (MPI_COMM_WORLD, duplicated so that a user's own MPI traffic never
 * mixes with torc's).
 *
 * Collectives are non-blocking (MPI_Iallreduce and kin): DDP starts a
 * bucket's all-reduce while backward goes on, and calls test from its
 * hooks, which is what moves the data of Open MPI's shared-memory
 * transport (it has no progress thread). wait polls with a deadline, so a
 * rank that died or hangs ends the others' wait at [dist] timeout instead
 * of never. MPI_THREAD_SERIALIZED: the core calls from one thread at a
 * time; a mutex keeps calls from different threads apart.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "torc/plugin.h"

static const torc_host *host;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int we_initialised; /* MPI_Init_thread was ours: finalize it */

typedef struct comm {
  MPI_Comm c;
  int rank, world;
  int users; /* torc_dist's communicator and nccl's bootstrap share it */
} comm;

static comm *the; /* one per process: MPI has one world */

typedef struct work {
  MPI_Request req;
  const char *what;
  /* AVG: divide the sum by the world once it arrived */
  void *avg_buf;
  size_t avg_count;
  torc_dtype avg_dt;
} work;

static int mpi_error(int rc, const char *what) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return host->set_error(TORC_ERR_DIST, "%s failed: %s (MPI error %d)", what,
                         text, rc);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int dtype_of(torc_dtype dt, MPI_Datatype *out) {
  switch (dt) {
  case TORC_F32:
    *out = MPI_FLOAT;
    return TORC_OK;
  case TORC_F64:
    *out = MPI_DOUBLE;
    return TORC_OK;
  case TORC_I32:
    *out = MPI_INT32_T;
    return TORC_OK;
  case TORC_I64:
    *out = MPI_INT64_T;
    return TORC_OK;
  default:
    return host->set_error(TORC_ERR_DTYPE,
                           "the mpi communicator reduces f32, f64, i32 and "
                           "i64 tensors, not %s; cast the tensor first (a "
                           "bf16 model's gradients are f32)",
                           dt == TORC_F16    ? "f16"
                           : dt == TORC_BF16 ? "bf16"
                                             : "this dtype");
  }
}

static int op_of(int op, MPI_Op *out) {
  switch (op) {
  case TORC_COMM_SUM:
  case TORC_COMM_AVG:
    *out = MPI_SUM;
    return TORC_OK;
  case TORC_COMM_MAX:
    *out = MPI_MAX;
    return TORC_OK;
  default:
    return host->set_error(TORC_ERR_INVALID,
                           "the mpi communicator has no reduction %d", op);
  }
}

/* MPI counts are ints: n (of `unit`) must fit one. */
static int fits(size_t n, const char *unit, const char *what) {
  if (n <= (size_t)0x7fffffff)
    return TORC_OK;
  return host->set_error(TORC_ERR_INVALID,
                         "%s of %zu %s: the mpi communicator takes at most "
                         "2^31 - 1 per call; split the tensor",
                         what, n, unit);
}

/* A reduction's MPI type and op, and its count checked against MPI's int
 * counts; `what` words the message. */
static int reduction(torc_dtype dt, int op, size_t count, const char *what,
                     MPI_Datatype *t, MPI_Op *o) {
  int rc;
  if ((rc = dtype_of(dt, t)) || (rc = op_of(op, o)))
    return rc;
  return fits(count, "elements", what);
}

static void divide(void *buf, size_t n, torc_dtype dt, int world) {
  if (dt == TORC_F32) {
    float *p = buf, s = 1.0f / (float)world;
    for (size_t i = 0; i < n; i++)
      p[i] *= s;
  } else if (dt == TORC_F64) {
    double *p = buf, s = 1.0 / (double)world;
    for (size_t i = 0; i < n; i++)
      p[i] *= s;
  } else if (dt == TORC_I32) {
    int32_t *p = buf;
    for (size_t i = 0; i < n; i++)
      p[i] /= world;
  } else if (dt == TORC_I64) {
    int64_t *p = buf;
    for (size_t i = 0; i < n; i++)
      p[i] /= world;
  }
}

static int c_init(const torc_comm_init_args *a, void **out) {
  pthread_mutex_lock(&mu);
  int rc = TORC_OK;
  if (the) {
    the->users++;
    *out = the;
    pthread_mutex_unlock(&mu);
    return TORC_OK;
  }
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) !=
        MPI_SUCCESS) {
      pthread_mutex_unlock(&mu);
      return host->set_error(TORC_ERR_DIST,
                             "MPI_Init_thread failed: start the ranks with "
                             "mpirun -np N (Open MPI)");
    }
    we_initialised = 1;
    if (provided < MPI_THREAD_SERIALIZED) {
      pthread_mutex_unlock(&mu);
      return host->set_error(TORC_ERR_DIST,
                             "this MPI gives thread level %d, below "
                             "MPI_THREAD_SERIALIZED (%d), which torc needs",
                             provided, MPI_THREAD_SERIALIZED);
    }
  }
  comm *c = calloc(1, sizeof *c);
  if (c == NULL) {
    pthread_mutex_unlock(&mu);
    return host->set_error(TORC_ERR_OOM, "out of memory joining the world");
  }
  if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->c)) != MPI_SUCCESS) {
    free(c);
    pthread_mutex_unlock(&mu);
    return mpi_error(rc, "MPI_Comm_dup");
  }
  /* Errors come back as codes, for a message, not an abort inside MPI. */
  MPI_Comm_set_errhandler(c->c, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c->c, &c->rank);
  MPI_Comm_size(c->c, &c->world);
  c->users = 1;
  the = c;
  *out = c;
  (void)a;
  pthread_mutex_unlock(&mu);
  return TORC_OK;
}

static int c_rank(void *h) { return ((comm *)h)->rank; }
static int c_world(void *h) { return ((comm *)h)->world; }

/* Hands the request to the caller as work, or waits for it (no deadline:
 * a blocking call was asked for). */
static int finish(comm *c, MPI_Request req, const char *what, void *avg_buf,
                  size_t avg_count, torc_dtype avg_dt, void **work_out) {
  if (work_out) {
    work *w = malloc(sizeof *w);
    if (w == NULL) {
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      return host->set_error(TORC_ERR_OOM, "out of memory in %s", what);
    }
    *w = (work){req, what, avg_buf, avg_count, avg_dt};
    *work_out = w;
    return TORC_OK;
  }
  int rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS)
    return mpi_error(rc, what);
  if (avg_buf)
    divide(avg_buf, avg_count, avg_dt, c->world);
  return TORC_OK;
}

static int c_all_reduce(void *h, void *buf, size_t offset, size_t count,
                        torc_dtype dt, int op, void *stream, void **work_out) {
  comm *c = h;
  (void)stream;
  MPI_Datatype t = MPI_FLOAT;
  MPI_Op o = MPI_SUM;
  int rc = reduction(dt, op, count, "all-reduce", &t, &o);
  if (rc)
    return rc;
  char *p = (char *)buf + offset;
  MPI_Request req;
  pthread_mutex_lock(&mu);
  rc = MPI_Iallreduce(MPI_IN_PLACE, p, (int)count, t, o, c->c, &req);
  pthread_mutex_unlock(&mu);
  if (rc != MPI_SUCCESS)
    return mpi_error(rc, "MPI_Iallreduce");
  return finish(c, req, "all-reduce", op == TORC_COMM_AVG ? p : NULL, count,
                dt, work_out);
}

static int c_broadcast(void *h, void *buf, size_t offset, size_t nbytes,
                       int root, void *stream, void **work_out) {
  comm *c = h;
  (void)stream;
  int rc = fits(nbytes, "bytes", "broadcast");
  if (rc)
    return rc;
  MPI_Request req;
  pthread_mutex_lock(&mu);
  rc = MPI_Ibcast((char *)buf + offset, (int)nbytes, MPI_BYTE, root, c->c,
                  &req);
  pthread_mutex_unlock(&mu);
  if (rc != MPI_SUCCESS)
    return mpi_error(rc, "MPI_Ibcast");
  return finish(c, req, "broadcast", NULL, 0, TORC_F32, work_out);
}

static int c_all_gather(void *h, const void *send, size_t so, void *recv,
                        size_t ro, size_t nbytes, void *stream,
                        void **work_out) {
  comm *c = h;
  (void)stream;
  int rc = fits(nbytes, "bytes per rank", "all-gather");
  if (rc)
    return rc;
  MPI_Request req;
  pthread_mutex_lock(&mu);
  rc = MPI_Iallgather((const char *)send + so, (int)nbytes, MPI_BYTE,
                      (char *)recv + ro, (int)nbytes, MPI_BYTE, c->c, &req);
  pthread_mutex_unlock(&mu);
  if (rc != MPI_SUCCESS)
    return mpi_error(rc, "MPI_Iallgather");
  return finish(c, req, "all-gather", NULL, 0, TORC_F32, work_out);
}

static int c_reduce_scatter(void *h, const void *send, size_t so, void *recv,
                            size_t ro, size_t count, torc_dtype dt, int op,
                            void *stream, void **work_out) {
  comm *c = h;
  (void)stream;
  MPI_Datatype t = MPI_FLOAT;
  MPI_Op o = MPI_SUM;
  int rc = reduction(dt, op, count, "reduce-scatter", &t, &o);
  if (rc)
    return rc;
  MPI_Request req;
  char *r = (char *)recv + ro;
  pthread_mutex_lock(&mu);
  rc = MPI_Ireduce_scatter_block((const char *)send + so, r, (int)count, t, o,
                                 c->c, &req);
  pthread_mutex_unlock(&mu);
  if (rc != MPI_SUCCESS)
    return mpi_error(rc, "MPI_Ireduce_scatter_block");
  return finish(c, req, "reduce-scatter", op == TORC_COMM_AVG ? r : NULL,
                count, dt, work_out);
}

static int c_test(void *h, void *wk, int *done) {
  comm *c = h;
  work *w = wk;
  int flag = 0;
  pthread_mutex_lock(&mu);
  int rc = MPI_Test(&w->req, &flag, MPI_STATUS_IGNORE);
  pthread_mutex_unlock(&mu);
  if (rc != MPI_SUCCESS)
    return mpi_error(rc, w->what);
  *done = flag;
  if (flag) {
    if (w->avg_buf)
      divide(w->avg_buf, w->avg_count, w->avg_dt, c->world);
    free(w);
  }
  return TORC_OK;
}

/* Polls until done or the deadline: a short spin, then sleeps that grow
 * to 1 ms, so a rank waiting for a slow peer leaves it the cores. */
static int c_wait(void *h, void *wk, double timeout_s) {
  work *w = wk;
  const char *what = w->what;
  double t0 = now_s();
  long spins = 0;
  useconds_t nap = 0;
  for (;;) {
    int done = 0;
    int rc = c_test(h, wk, &done);
    if (rc != TORC_OK || done)
      return rc;
    double t = now_s() - t0;
    if (t > timeout_s)
      /* The request stays pending: the caller ends the job (destroy with
       * abort), which is all that can be done with it. */
      return host->set_error(TORC_ERR_DIST,
                             "the %s did not complete within %.0f s ([dist] "
                             "timeout): another rank stopped or hangs; its "
                             "own output says why",
                             what, timeout_s);
    if (++spins > 2000) {
      nap = nap ? (nap < 1000 ? nap * 2 : 1000) : 10;
      usleep(nap);
    }
  }
}

static int c_barrier(void *h, double timeout_s) {
  comm *c = h;
  MPI_Request req;
  pthread_mutex_lock(&mu);
  int rc = MPI_Ibarrier(c->c, &req);
  pthread_mutex_unlock(&mu);
  if (rc != MPI_SUCCESS)
    return mpi_error(rc, "MPI_Ibarrier");
  work *w = malloc(sizeof *w);
  if (w == NULL) {
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    return TORC_OK;
  }
  *w = (work){req, "barrier", NULL, 0, TORC_F32};
  return c_wait(h, w, timeout_s);
}

static void c_destroy(void *h, int abort) {
  comm *c = h;
  if (abort) {
    /* Ends every rank of the job; mpirun reports the status. */
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(c ? c->c : MPI_COMM_WORLD, 1);
    _exit(1);
  }
  pthread_mutex_lock(&mu);
  if (c && --c->users == 0) {
    MPI_Comm_free(&c->c);
    free(c);
    the = NULL;
  }
  pthread_mutex_unlock(&mu);
}

static const torc_comm_type mpi_comm = {
    .struct_size = sizeof(torc_comm_type),
    .name = "mpi",
    .device_type = "cpu",
    .description = "Open MPI: collectives on cpu tensors",
    .init = c_init,
    .rank = c_rank,
    .world = c_world,
    .all_reduce = c_all_reduce,
    .broadcast = c_broadcast,
    .all_gather = c_all_gather,
    .reduce_scatter = c_reduce_scatter,
    .test = c_test,
    .wait = c_wait,
    .barrier = c_barrier,
    .destroy = c_destroy,
};

static int plugin_init(const torc_host *h, torc_plugin *self) {
  host = h;
  if (!TORC_HAS_SLOT(h, torc_host, register_comm))
    return h->set_error(TORC_ERR_ABI,
                        "the mpi plugin needs a torc core of ABI 1.9 or "
                        "later (communicators); this core is %u.%u",
                        h->abi_major, h->abi_minor);
  return h->register_comm(self, &mpi_comm);
}

/* MPI_Finalize once, at unload, when the plugin initialised MPI. */
static void plugin_fini(torc_plugin *self) {
  (void)self;
  int fin = 0;
  MPI_Finalized(&fin);
  if (we_initialised && !fin)
    MPI_Finalize();
}

static const torc_plugin_info info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "mpi",
    .version = "0.1.0",
    .description = "Open MPI communicator (training in several processes)",
    .provides = TORC_PROVIDES_COMM,
    /* Open MPI cannot be initialised twice in a process. */
    .flags = TORC_PLUGIN_NO_UNLOAD,
    .init = plugin_init,
    .fini = plugin_fini,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &info;
}
