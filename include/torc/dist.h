/* torc/dist.h — training in several processes: the world of ranks, its
 * collectives on tensors, and data-parallel training (DDP).
 *
 * The ranks are processes started by a launcher: `mpirun -np N prog`
 * (Open MPI's OMPI_COMM_WORLD_RANK / _SIZE, or PMI_RANK / PMI_SIZE), or
 * any launcher that sets TORC_RANK and TORC_WORLD_SIZE and starts the
 * processes under MPI. The collectives run on a communicator a plugin
 * registers (torc/plugin.h, torc_comm_type): "mpi" (plugins/mpi, Open MPI,
 * cpu tensors) or "nccl" (the cuda plugin, cuda tensors; its unique id goes
 * from rank 0 to the others over MPI, so mpirun launches both).
 *
 * DDP as PyTorch's DistributedDataParallel, without a wrapper module (so
 * state dicts never gain a "module." prefix): torc_ddp_new broadcasts the
 * parameters and buffers from rank 0, then a post-accumulate hook per
 * parameter copies each gradient into its bucket (about 25 MB, parameters
 * in reverse order, as gradients arrive) and starts the bucket's
 * all-reduce as soon as the bucket is full, while backward goes on; an
 * end-of-backward callback starts the rest, waits for all and writes the
 * averaged gradients back into .grad. Buckets start in the same order on
 * every rank (a bucket waits for the ones before it).
 */
#ifndef TORC_DIST_H
#define TORC_DIST_H

#include "torc/module.h"
#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* A reduction (the values are the plugin ABI's TORC_COMM_*). */
typedef enum torc_dist_op {
  TORC_DIST_SUM = 0,
  TORC_DIST_AVG = 1,
  TORC_DIST_MAX = 2
} torc_dist_op;

/* Options for torc_dist_init; zero-initialise, then set what you need. */
typedef struct torc_dist_opts {
  /* "mpi", "nccl", or NULL / "auto": nccl for a cuda device when the cuda
   * plugin offers it, mpi otherwise. The plugin named "mpi" is loaded
   * when no loaded plugin registered the backend. */
  const char *backend;
  /* Seconds a collective may take before the run stops with
   * TORC_ERR_DIST (a rank died or hangs); <= 0: 300. */
  double timeout_s;
  /* The device this rank computes on (nccl: its GPU). */
  torc_device device;
} torc_dist_opts;

/* The rank and world size the launcher set in the environment, without
 * joining anything: 1 and *rank 0 when no launcher started this process.
 * TORC_ERR_CONFIG for values that do not parse or do not fit (a rank out
 * of range, TORC_RANK without TORC_WORLD_SIZE). */
TORC_API torc_status torc_dist_env(int *rank, int *world);

/* Joins the world the launcher started (torc_dist_env). A world of 1 with
 * no launcher needs no communicator: the collectives are then copies.
 * Idempotent: a second call with the same backend is TORC_OK. Errors:
 * TORC_ERR_PLUGIN when the backend's plugin is missing (the message says
 * which package or configure option gives it), TORC_ERR_DIST when the
 * backend's world differs from the launcher's. */
TORC_API torc_status torc_dist_init(const torc_dist_opts *opts);

/* 1 once torc_dist_init succeeded (until torc_dist_finalize). */
TORC_API int torc_dist_is_initialized(void);

/* This process's rank (0 without torc_dist_init). */
TORC_API int torc_dist_rank(void);

/* The number of ranks (1 without torc_dist_init). */
TORC_API int torc_dist_world_size(void);

/* The backend's name ("mpi", "nccl"), or NULL for a world of one. */
TORC_API const char *torc_dist_backend(void);

/* [dist] timeout or torc_dist_opts.timeout_s, in seconds. */
TORC_API double torc_dist_timeout(void);

/* Leaves the world. With `failed`, after an error: the other ranks are
 * stopped too, so that none waits out its timeout. */
TORC_API void torc_dist_finalize(int failed);

/* ---- collectives: every rank calls them in the same order ---- */

/* Reduces n tensors in place across ranks with op: all on the
 * communicator's device type, of one float dtype; they are packed into one
 * buffer (or sent as is when n is 1 and contiguous). */
TORC_API torc_status torc_dist_all_reduce(torc_tensor *const *ts, int n,
                                          torc_dist_op op);

/* Root's values of n tensors to every rank's, in place. */
TORC_API torc_status torc_dist_broadcast(torc_tensor *const *ts, int n,
                                         int root);

/* Every rank's `in` into `out`, whose first dimension is world times
 * in's (rank r's block at r). */
TORC_API torc_status torc_dist_all_gather(torc_tensor *out,
                                          const torc_tensor *in);

/* `in` (first dimension world times out's) reduced across ranks with op;
 * rank r keeps block r in `out`. */
TORC_API torc_status torc_dist_reduce_scatter(torc_tensor *out,
                                              const torc_tensor *in,
                                              torc_dist_op op);

/* x summed over the ranks as a new tensor that autograd follows: the
 * backward of each rank sums the ranks' gradients (PyTorch's
 * torch.distributed.nn.all_reduce). Synchronised batch norm is built on
 * it. A world of one gives a copy. NULL on error. */
TORC_API torc_tensor *torc_dist_all_reduce_sum_grad(const torc_tensor *x);

/* Returns once every rank called it (or TORC_ERR_DIST at the timeout). */
TORC_API torc_status torc_dist_barrier(void);

/* ---- data-parallel training ---- */

typedef struct torc_ddp torc_ddp;

/* Options for torc_ddp_new; zero-initialise, then set what you need. */
typedef struct torc_ddp_opts {
  double bucket_mb; /* bucket size in MiB; <= 0: 25 (PyTorch's) */
  /* Do not broadcast the parameters and buffers from rank 0 at start
   * (they are known to be equal, e.g. loaded from one checkpoint). */
  int no_broadcast;
} torc_ddp_opts;

/* Makes m's training data-parallel across the world (torc_dist_init
 * first): the broadcast from rank 0, the hooks on m's parameters that
 * require grad. With a world of one it does nothing per step. NULL on
 * error (OOM, a communicator failure). */
TORC_API torc_ddp *torc_ddp_new(torc_module *m, const torc_ddp_opts *opts);

/* Removes the hooks and frees the buckets. NULL is ignored. */
TORC_API void torc_ddp_free(torc_ddp *ddp);

/* With on = 1 the next backwards only accumulate gradients locally
 * (gradient accumulation, as PyTorch's no_sync()); the first backward
 * after torc_ddp_no_sync(ddp, 0) all-reduces the sums. */
TORC_API void torc_ddp_no_sync(torc_ddp *ddp, int on);

/* What the last synced backward did: the buckets in total, those started
 * from a gradient hook before backward finished walking the graph (the
 * overlap), and the seconds spent waiting for all-reduces once it had. */
typedef struct torc_ddp_stats {
  int buckets;
  int started_in_backward;
  double wait_seconds;
  int64_t steps; /* synced backwards so far */
  double comm_seconds; /* their waits, summed */
} torc_ddp_stats;

/* The last synced backward's figures and the running totals. */
TORC_API void torc_ddp_get_stats(const torc_ddp *ddp, torc_ddp_stats *out);

/* With on = 1, every batchnorm1d and batchnorm2d below m computes its
 * training statistics over the whole world's batch (PyTorch's
 * SyncBatchNorm.convert_sync_batchnorm): an all-reduce of the per-channel
 * sums in forward, and of their gradients in backward. It costs two
 * all-reduces per layer and step each way; with a world of one it changes
 * nothing. The trainer's [dist] sync_batchnorm = yes. */
TORC_API torc_status torc_module_sync_batchnorm(torc_module *m, int on);

TORC_END_DECLS

#endif /* TORC_DIST_H */
