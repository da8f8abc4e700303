/* core/dist.c — the world of ranks: communicator types registered by
 * plugins, joining the world a launcher started, collectives on tensors,
 * and DDP's gradient buckets (torc/dist.h).
 *
 * A collective hands the communicator a device memory handle and a byte
 * offset (the tensor's storage), so the core never dereferences device
 * memory. Lists of tensors are packed into one buffer of the devices'
 * own, reduced once, and unpacked.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "stream_internal.h"
#include "torc/dist.h"
#include "torc/plugin_api.h"

/* ---- the registry ---- */

typedef struct comm_reg {
  const torc_comm_type *t;
  torc__plugin *owner;
} comm_reg;

static comm_reg regs[8];
static int n_regs;

/* The registration of communicator `name`, or NULL. */
static const comm_reg *comm_reg_of(const char *name) {
  for (int i = 0; i < n_regs; i++)
    if (strcmp(regs[i].t->name, name) == 0)
      return &regs[i];
  return NULL;
}

static const torc_comm_type *comm_find(const char *name) {
  const comm_reg *r = comm_reg_of(name);
  return r ? r->t : NULL;
}

torc_status torc__comm_register(torc__plugin *owner, const torc_comm_type *t) {
  if (t == NULL || t->struct_size < sizeof(torc_comm_type) ||
      t->name == NULL || t->name[0] == '\0' || t->device_type == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "register_comm: the type is NULL, has no name or "
                          "device type, or its struct_size is smaller than "
                          "this core's torc_comm_type (%zu); rebuild the "
                          "plugin against this torc",
                          sizeof(torc_comm_type));
  if (!t->init || !t->rank || !t->world || !t->all_reduce || !t->broadcast ||
      !t->wait || !t->barrier || !t->destroy)
    return torc_set_error(TORC_ERR_INVALID,
                          "register_comm: communicator '%s' lacks one of "
                          "init, rank, world, all_reduce, broadcast, wait, "
                          "barrier, destroy",
                          t->name);
  const comm_reg *dup = comm_reg_of(t->name);
  if (dup)
    return torc_set_error(TORC_ERR_INVALID,
                          "register_comm: a communicator named '%s' is "
                          "already registered (by plugin '%s')",
                          t->name, torc__plugin_name(dup->owner));
  if (n_regs == (int)(sizeof regs / sizeof regs[0]))
    return torc_set_error(TORC_ERR_INVALID,
                          "register_comm: at most %d communicator types",
                          (int)(sizeof regs / sizeof regs[0]));
  regs[n_regs++] = (comm_reg){t, owner};
  return TORC_OK;
}

void torc__comm_unregister_owner(torc__plugin *owner) {
  int k = 0;
  for (int i = 0; i < n_regs; i++)
    if (regs[i].owner != owner)
      regs[k++] = regs[i];
  n_regs = k;
}

/* ---- the world ---- */

static struct {
  int init, rank, world;
  const torc_comm_type *t; /* NULL for a world of one */
  void *comm;
  const torc_comm_type *boot_t; /* nccl's bootstrap (mpi), or NULL */
  void *boot;
  double timeout;
  torc_device dev;
} W = {.world = 1, .timeout = 300};

/* An integer environment variable: 1 and *v, 0 when unset, -1 when it does
 * not parse. */
static int env_int(const char *name, int *v) {
  const char *s = getenv(name);
  if (s == NULL || *s == '\0')
    return 0;
  char *end;
  long x = strtol(s, &end, 10);
  if (*end != '\0' || x < 0 || x > 1000000) {
    torc_set_error(TORC_ERR_CONFIG,
                   "the environment variable %s = '%s' is not a count "
                   "(0..1000000); the launcher sets it, or unset it",
                   name, s);
    return -1;
  }
  *v = (int)x;
  return 1;
}

torc_status torc_dist_env(int *rank, int *world) {
  static const char *const pairs[][2] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
      {"TORC_RANK", "TORC_WORLD_SIZE"}};
  int r = 0, w = 1;
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    int hr = env_int(pairs[i][0], &r), hw = env_int(pairs[i][1], &w);
    if (hr < 0 || hw < 0)
      return torc_last_status();
    if (hr == 0 && hw == 0)
      continue;
    if (hr != hw)
      return torc_set_error(TORC_ERR_CONFIG,
                            "%s is set but %s is not; a launcher sets both "
                            "(mpirun does), or set both yourself",
                            hr ? pairs[i][0] : pairs[i][1],
                            hr ? pairs[i][1] : pairs[i][0]);
    if (w < 1 || r >= w)
      return torc_set_error(TORC_ERR_CONFIG,
                            "%s = %d does not fit %s = %d (ranks run from 0 "
                            "to the world size - 1)",
                            pairs[i][0], r, pairs[i][1], w);
    break;
  }
  if (rank)
    *rank = r;
  if (world)
    *world = w;
  return TORC_OK;
}

static torc_status comm_status(torc_status st, const char *what) {
  if (st == TORC_OK)
    return st;
  char msg[900];
  snprintf(msg, sizeof msg, "%s", torc_last_error());
  return torc_set_error(st, "rank %d of %d: %s: %s", W.rank, W.world, what,
                        msg[0] ? msg : torc_status_str(st));
}

/* The communicator type `name`, loading the plugin of that name when no
 * loaded plugin registered it. */
static const torc_comm_type *comm_get(const char *name) {
  const torc_comm_type *t = comm_find(name);
  if (t)
    return t;
  if (strcmp(name, "mpi") == 0) {
    torc_plugin_opts po = {0};
    if (torc_plugin_load("mpi", &po) != TORC_OK) {
      char msg[700];
      snprintf(msg, sizeof msg, "%s", torc_last_error());
      torc_set_error(TORC_ERR_PLUGIN,
                     "[dist] backend = mpi needs the mpi plugin, which did "
                     "not load (%s); it is built when configure finds Open "
                     "MPI: apt-get install libopenmpi-dev openmpi-bin, then "
                     "configure and make again",
                     msg);
      return NULL;
    }
    if ((t = comm_find(name)) != NULL)
      return t;
  }
  torc_set_error(TORC_ERR_PLUGIN,
                 "no plugin registered the communicator '%s'%s",
                 name,
                 strcmp(name, "nccl") == 0
                     ? ": it is part of the cuda plugin, built with "
                       "--with-cuda where NCCL is installed; load it with "
                       "[plugin.cuda] module = cuda"
                     : "; [dist] backend takes mpi or nccl");
  return NULL;
}

static void world_reset(void) {
  W.init = 0, W.rank = 0, W.world = 1;
  W.t = W.boot_t = NULL;
  W.comm = W.boot = NULL;
}

torc_status torc_dist_init(const torc_dist_opts *opts) {
  torc_dist_opts o = {0};
  if (opts)
    o = *opts;
  const char *want = o.backend && strcmp(o.backend, "auto") != 0
                         ? o.backend
                         : NULL;
  if (W.init) {
    if (want && W.t && strcmp(want, W.t->name) != 0)
      return torc_set_error(TORC_ERR_INVALID,
                            "torc_dist_init: the world was joined with "
                            "backend '%s'; it cannot switch to '%s'",
                            W.t->name, want);
    return TORC_OK;
  }
  int rank, world;
  torc_status st = torc_dist_env(&rank, &world);
  if (st)
    return st;
  W.timeout = o.timeout_s > 0 ? o.timeout_s : 300;
  W.dev = o.device;
  if (world == 1 && want == NULL) {
    W.init = 1;
    return TORC_OK;
  }
  const char *dt = torc_device_type_name(o.device.type);
  const char *name = want ? want
                     : dt && strcmp(dt, "cuda") == 0 && comm_find("nccl")
                         ? "nccl"
                         : "mpi";
  const torc_comm_type *t = comm_get(name);
  if (t == NULL)
    return torc_last_status();
  if (dt && strcmp(t->device_type, dt) != 0)
    return torc_set_error(TORC_ERR_DEVICE,
                          "[dist] backend = %s moves %s tensors, but the run "
                          "computes on %s; use backend = %s (or auto)",
                          t->name, t->device_type, dt,
                          strcmp(dt, "cuda") == 0 ? "nccl" : "mpi");
  W.rank = rank, W.world = world;
  torc_comm_init_args a = {.struct_size = sizeof a,
                           .rank = rank,
                           .world = world,
                           .device_index = o.device.index,
                           .timeout_s = W.timeout};
  unsigned char id[512];
  size_t id_size = sizeof id;
  if (t->get_unique_id) {
    /* The unique id goes from rank 0 to the others over MPI. */
    const torc_comm_type *b = comm_get("mpi");
    if (b == NULL)
      return torc_last_status();
    if ((st = b->init(&a, &W.boot)) != TORC_OK)
      return comm_status(st, "joining the bootstrap (mpi) world");
    W.boot_t = b;
    memset(id, 0, sizeof id);
    if (rank == 0 && (st = t->get_unique_id(id, &id_size)) != TORC_OK) {
      st = comm_status(st, "making the communicator's unique id");
      b->destroy(W.boot, 1);
      world_reset();
      return st;
    }
    if ((st = b->broadcast(W.boot, id, 0, sizeof id, 0, NULL, NULL)) ||
        (st = b->broadcast(W.boot, &id_size, 0, sizeof id_size, 0, NULL,
                           NULL))) {
      st = comm_status(st, "sending the unique id");
      b->destroy(W.boot, 1);
      world_reset();
      return st;
    }
    a.unique_id = id;
    a.unique_id_size = id_size;
  }
  if ((st = t->init(&a, &W.comm)) != TORC_OK) {
    st = comm_status(st, "joining the world");
    if (W.boot_t)
      W.boot_t->destroy(W.boot, 1);
    world_reset();
    return st;
  }
  W.t = t;
  int tr = t->rank(W.comm), tw = t->world(W.comm);
  if (tr != rank || tw != world) {
    st = torc_set_error(TORC_ERR_DIST,
                        "the launcher says rank %d of %d, but %s says rank "
                        "%d of %d: the processes were not started by the "
                        "same launcher as one job (start them with one "
                        "mpirun -np %d)",
                        rank, world, t->name, tr, tw, world);
    torc_dist_finalize(1);
    return st;
  }
  W.init = 1;
  return TORC_OK;
}

int torc_dist_is_initialized(void) { return W.init; }
int torc_dist_rank(void) { return W.rank; }
int torc_dist_world_size(void) { return W.world; }
const char *torc_dist_backend(void) { return W.t ? W.t->name : NULL; }
double torc_dist_timeout(void) { return W.timeout; }

void torc_dist_finalize(int failed) {
  if (W.t)
    W.t->destroy(W.comm, failed);
  if (W.boot_t)
    W.boot_t->destroy(W.boot, failed);
  world_reset();
}

/* ---- collectives on tensors ---- */

/* The tensor's memory as the communicator takes it. */
static torc_status buf_of(const torc_tensor *t, void **data, size_t *off) {
  torc_ktensor k;
  torc_status st = torc_ktensor_of(t, &k);
  if (st)
    return st;
  *data = k.data;
  *off = (size_t)k.offset * torc_dtype_size(t->dtype);
  return TORC_OK;
}

static void *stream_of(torc_device dev) {
  torc_stream *s = torc__stream_current(dev.type, dev.index);
  return s ? torc__stream_handle(s) : NULL;
}

/* Checks that every tensor suits the communicator: its device type, one
 * dtype (float when `need_float`). */
static torc_status check_list(const char *fn, torc_tensor *const *ts, int n,
                              int need_float) {
  if (ts == NULL || n < 1)
    return torc_set_error(TORC_ERR_INVALID, "%s: give at least one tensor",
                          fn);
  for (int i = 0; i < n; i++) {
    if (ts[i] == NULL)
      return torc__null_input(fn);
    torc_device d = ts[i]->storage->device;
    const char *dt = torc_device_type_name(d.type);
    if (W.t && strcmp(dt, W.t->device_type) != 0) {
      char b[64];
      return torc_set_error(TORC_ERR_DEVICE,
                            "%s: tensor %d is on %s, but the %s "
                            "communicator moves %s tensors; move it there "
                            "first, or use the backend for %s",
                            fn, i, torc_device_str(d, b, sizeof b),
                            W.t->name, W.t->device_type, dt);
    }
    if (!torc_device_eq(d, ts[0]->storage->device) ||
        ts[i]->dtype != ts[0]->dtype)
      return torc_set_error(TORC_ERR_DTYPE,
                            "%s: tensor %d is %s on another device or of "
                            "another dtype than tensor 0 (%s); one call "
                            "takes one dtype on one device",
                            fn, i, torc_dtype_name(ts[i]->dtype),
                            torc_dtype_name(ts[0]->dtype));
    if (need_float && !torc_dtype_is_float(ts[i]->dtype))
      return torc_set_error(TORC_ERR_DTYPE,
                            "%s: tensor %d is %s; reductions take float "
                            "tensors",
                            fn, i, torc_dtype_name(ts[i]->dtype));
  }
  return TORC_OK;
}

/* Waits for work with the world's timeout. */
static torc_status wait_work(void *work, const char *what) {
  if (work == NULL)
    return TORC_OK;
  torc_status st = W.t->wait(W.comm, work, W.timeout);
  return st ? comm_status(st, what) : TORC_OK;
}

/* A flat buffer holding ts packed (copied in when `fill`), or ts[0] itself
 * when it is the only one and contiguous; a new reference. */
static torc_tensor *pack(torc_tensor *const *ts, int n, int fill) {
  if (n == 1 && torc_is_contiguous(ts[0]))
    return torc_retain(ts[0]);
  int64_t total = 0;
  for (int i = 0; i < n; i++)
    total += torc_numel(ts[i]);
  torc_tensor *flat =
      torc_empty(&total, 1, ts[0]->dtype, ts[0]->storage->device);
  int64_t off = 0;
  for (int i = 0; flat && fill && i < n; i++) {
    int64_t k = torc_numel(ts[i]);
    torc_tensor *s = torc_slice(flat, 0, off, off + k, 1);
    torc_tensor *v = s ? torc_view(s, ts[i]->shape, ts[i]->ndim) : NULL;
    torc_status st = v ? torc_copy_(v, ts[i]) : torc_last_status();
    torc_release(v), torc_release(s);
    if (st) {
      torc_release(flat);
      return NULL;
    }
    off += k;
  }
  return flat;
}

static torc_status unpack(torc_tensor *flat, torc_tensor *const *ts, int n) {
  if (flat == ts[0])
    return TORC_OK;
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    int64_t k = torc_numel(ts[i]);
    torc_tensor *s = torc_slice(flat, 0, off, off + k, 1);
    torc_tensor *v = s ? torc_view(s, ts[i]->shape, ts[i]->ndim) : NULL;
    torc_status st = v ? torc_copy_(ts[i], v) : torc_last_status();
    torc_release(v), torc_release(s);
    if (st)
      return st;
    off += k;
  }
  return TORC_OK;
}

torc_status torc_dist_all_reduce(torc_tensor *const *ts, int n,
                                 torc_dist_op op) {
  torc_status st = check_list("torc_dist_all_reduce", ts, n, 1);
  if (st || W.t == NULL)
    return st; /* a world of one: nothing to do */
  if (op < TORC_DIST_SUM || op > TORC_DIST_MAX)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_dist_all_reduce: op %d is not one of "
                          "TORC_DIST_SUM, _AVG, _MAX",
                          (int)op);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc__scope_suspend(1); /* the core releases what it makes here */
  torc_tensor *flat = pack(ts, n, 1);
  void *data = NULL, *work = NULL;
  size_t off = 0;
  st = flat ? buf_of(flat, &data, &off) : torc_last_status();
  if (st == TORC_OK) {
    st = W.t->all_reduce(W.comm, data, off, (size_t)torc_numel(flat),
                         flat->dtype, (int)op,
                         stream_of(flat->storage->device), &work);
    st = st ? comm_status(st, "all-reduce") : wait_work(work, "all-reduce");
  }
  if (st == TORC_OK)
    st = unpack(flat, ts, n);
  torc_release(flat);
  torc__scope_suspend(-1);
  torc_set_grad_mode(gm);
  return st;
}

torc_status torc_dist_broadcast(torc_tensor *const *ts, int n, int root) {
  torc_status st = check_list("torc_dist_broadcast", ts, n, 0);
  if (st || W.t == NULL)
    return st;
  if (root < 0 || root >= W.world)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_dist_broadcast: root %d is not a rank "
                          "(0..%d)",
                          root, W.world - 1);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc__scope_suspend(1);
  torc_tensor *flat = pack(ts, n, W.rank == root);
  void *data = NULL, *work = NULL;
  size_t off = 0;
  st = flat ? buf_of(flat, &data, &off) : torc_last_status();
  if (st == TORC_OK) {
    st = W.t->broadcast(W.comm, data, off,
                        (size_t)torc_numel(flat) *
                            torc_dtype_size(flat->dtype),
                        root, stream_of(flat->storage->device), &work);
    st = st ? comm_status(st, "broadcast") : wait_work(work, "broadcast");
  }
  if (st == TORC_OK)
    st = unpack(flat, ts, n);
  torc_release(flat);
  torc__scope_suspend(-1);
  torc_set_grad_mode(gm);
  return st;
}

/* Checks out's first dimension is world times in's, the rest equal. */
static torc_status check_blocks(const char *fn, const torc_tensor *big,
                                const torc_tensor *small) {
  if (big == NULL || small == NULL)
    return torc__null_input(fn);
  int ok = big->ndim == small->ndim && big->ndim >= 1 &&
           big->shape[0] == small->shape[0] * W.world &&
           big->dtype == small->dtype && torc_is_contiguous(big) &&
           torc_is_contiguous(small);
  for (int d = 1; ok && d < big->ndim; d++)
    ok = big->shape[d] == small->shape[d];
  if (!ok) {
    char a[128], b[128];
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: the gathered tensor is %s %s and the block "
                          "%s %s; the first must be %d (the world size) "
                          "blocks along dimension 0, both contiguous, of "
                          "one dtype",
                          fn, torc__shape_str(big->shape, big->ndim, a,
                                              sizeof a),
                          torc_dtype_name(big->dtype),
                          torc__shape_str(small->shape, small->ndim, b,
                                          sizeof b),
                          torc_dtype_name(small->dtype), W.world);
  }
  return TORC_OK;
}

/* The checks and memory of a collective between `out` and `in`, one of
 * them world blocks of the other (`gather`: out is): TORC_OK with the
 * buffers set, or an error. With a world of one the caller copies. */
static torc_status block_call(const char *fn, torc_tensor *out,
                              const torc_tensor *in, int gather,
                              int need_float, int has_slot, const char *slot,
                              void **sd, size_t *so, void **rd, size_t *ro) {
  torc_status st = gather ? check_blocks(fn, out, in)
                          : check_blocks(fn, in, out);
  torc_tensor *pair[2] = {out, (torc_tensor *)in};
  if (st || (st = check_list(fn, pair, 2, need_float)) || W.t == NULL)
    return st;
  if (!has_slot)
    return torc_set_error(TORC_ERR_UNSUPPORTED,
                          "%s: the %s communicator has no %s", fn, W.t->name,
                          slot);
  if ((st = buf_of(in, sd, so)) == TORC_OK)
    st = buf_of(out, rd, ro);
  return st;
}

torc_status torc_dist_all_gather(torc_tensor *out, const torc_tensor *in) {
  void *sd = NULL, *rd = NULL, *work = NULL;
  size_t so = 0, ro = 0;
  torc_status st = block_call("torc_dist_all_gather", out, in, 1, 0,
                              W.t && W.t->all_gather, "all_gather", &sd, &so,
                              &rd, &ro);
  if (st || W.t == NULL)
    return st ? st : torc_copy_(out, in);
  st = W.t->all_gather(W.comm, sd, so, rd, ro,
                       (size_t)torc_numel(in) * torc_dtype_size(in->dtype),
                       stream_of(out->storage->device), &work);
  return st ? comm_status(st, "all-gather") : wait_work(work, "all-gather");
}

torc_status torc_dist_reduce_scatter(torc_tensor *out, const torc_tensor *in,
                                     torc_dist_op op) {
  void *sd = NULL, *rd = NULL, *work = NULL;
  size_t so = 0, ro = 0;
  torc_status st = block_call("torc_dist_reduce_scatter", out, in, 0, 1,
                              W.t && W.t->reduce_scatter, "reduce_scatter",
                              &sd, &so, &rd, &ro);
  if (st || W.t == NULL)
    return st ? st : torc_copy_(out, in);
  st = W.t->reduce_scatter(W.comm, sd, so, rd, ro, (size_t)torc_numel(out),
                           out->dtype, (int)op,
                           stream_of(out->storage->device), &work);
  return st ? comm_status(st, "reduce-scatter")
            : wait_work(work, "reduce-scatter");
}

torc_status torc_dist_barrier(void) {
  if (W.t == NULL)
    return TORC_OK;
  torc_status st = W.t->barrier(W.comm, W.timeout);
  return st ? comm_status(st, "barrier") : TORC_OK;
}

/* ---- a differentiable all-reduce (synchronised batch norm) ---- */

/* y = the sum of x over the ranks; dL/dx on each rank is the sum over the
 * ranks of dL/dy, since every rank's loss depends on every rank's x. */
static torc_status all_reduce_backward(torc__node *n, torc_tensor *const *gout,
                                       torc_tensor **gin) {
  (void)n;
  gin[0] = torc_clone(gout[0]);
  if (gin[0] == NULL)
    return torc_last_status();
  return torc_dist_all_reduce(&gin[0], 1, TORC_DIST_SUM);
}

torc_tensor *torc_dist_all_reduce_sum_grad(const torc_tensor *x) {
  if (x == NULL) {
    torc__null_input("torc_dist_all_reduce_sum_grad");
    return NULL;
  }
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc__scope_suspend(1);
  torc_tensor *y = torc_clone(x);
  torc_status st = y ? torc_dist_all_reduce(&y, 1, TORC_DIST_SUM)
                     : torc_last_status();
  torc__scope_suspend(-1);
  torc_set_grad_mode(gm);
  if (st == TORC_OK && torc__should_record(&x, 1)) {
    torc__node *n = torc__node_new("AllReduceBackward", "dist_all_reduce",
                                   all_reduce_backward, &x, 1);
    if (n == NULL)
      st = torc_last_status();
    else
      torc__node_attach(n, &y, 1);
  }
  if (st) {
    torc_release(y);
    return NULL;
  }
  return torc__ret(y);
}

/* ---- DDP ---- */

typedef struct bucket {
  torc_tensor *flat; /* the bucket's gradients, packed */
  int first, n;      /* its parameters: order[first .. first + n) */
  int ready;         /* gradients copied in during this backward */
  int started;
  void *work;
} bucket;

typedef struct hook_ctx {
  struct torc_ddp *d;
  int i; /* the parameter's index */
} hook_ctx;

struct torc_ddp {
  torc_module *m;
  hook_ctx *ctx; /* per parameter: what its hook gets */
  int np;
  torc_tensor **params; /* in bucket order (reverse registration order) */
  torc_tensor **views;  /* params[i]'s slot in its bucket */
  int *bucket_of, *hook, *seen;
  bucket *b;
  int nb, next; /* buckets; the next to start */
  int no_sync, queued, failed;
  int started_in_bw;
  torc_ddp_stats stats;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Starts bucket k's all-reduce (average). */
static torc_status bucket_start(torc_ddp *d, int k) {
  bucket *b = &d->b[k];
  void *data = NULL;
  size_t off = 0;
  torc_status st = buf_of(b->flat, &data, &off);
  if (st)
    return st;
  st = W.t->all_reduce(W.comm, data, off, (size_t)torc_numel(b->flat),
                       b->flat->dtype, TORC_COMM_AVG,
                       stream_of(b->flat->storage->device), &b->work);
  b->started = 1;
  return st ? comm_status(st, "all-reduce of a gradient bucket") : TORC_OK;
}

/* Starts the buckets that are full, in order: bucket k only after k - 1,
 * so that every rank starts them in the same order. */
static torc_status start_ready(torc_ddp *d) {
  while (d->next < d->nb && d->b[d->next].ready == d->b[d->next].n) {
    torc_status st = bucket_start(d, d->next++);
    if (st)
      return st;
    d->started_in_bw++;
  }
  /* Progress for backends that move data only inside their calls. */
  for (int k = 0; k < d->next && W.t->test; k++) {
    if (d->b[k].work == NULL)
      continue;
    int done = 0;
    torc_status st = W.t->test(W.comm, d->b[k].work, &done);
    if (st)
      return comm_status(st, "all-reduce of a gradient bucket");
    if (done)
      d->b[k].work = NULL;
  }
  return TORC_OK;
}

/* End of backward: the buckets not full yet get the gradients there are
 * (zeros for a parameter backward did not reach), everything is started
 * and awaited, and .grad gets the averages. */
static torc_status ddp_finish(void *user) {
  torc_ddp *d = user;
  torc_status st = TORC_OK;
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  for (int i = 0; i < d->np && st == TORC_OK && !d->failed; i++) {
    if (d->seen[i] || d->b[d->bucket_of[i]].started)
      continue;
    torc_tensor *g = torc_grad_of(d->params[i]);
    st = g ? torc_copy_(d->views[i], g) : torc_fill_(d->views[i], 0);
    d->b[d->bucket_of[i]].ready++;
  }
  while (st == TORC_OK && !d->failed && d->next < d->nb)
    st = bucket_start(d, d->next++);
  double t0 = now_s();
  for (int k = 0; k < d->nb; k++) {
    bucket *b = &d->b[k];
    if (b->work) {
      torc_status ws =
          wait_work(b->work, "all-reduce of a gradient bucket");
      if (st == TORC_OK)
        st = ws;
      b->work = NULL;
    }
  }
  if (st == TORC_OK && W.t->device_type &&
      strcmp(W.t->device_type, "cpu") != 0)
    st = torc_synchronize(d->b[0].flat->storage->device);
  double waited = now_s() - t0;
  for (int i = 0; i < d->np && st == TORC_OK; i++) {
    torc_tensor *g = torc_grad_of(d->params[i]);
    if (g) {
      st = torc_copy_(g, d->views[i]);
    } else {
      torc_tensor *c = torc_clone(d->views[i]);
      st = c ? torc_set_grad(d->params[i], c) : torc_last_status();
      torc_release(c);
    }
  }
  torc_set_grad_mode(gm);
  d->stats.buckets = d->nb;
  d->stats.started_in_backward = d->started_in_bw;
  d->stats.wait_seconds = waited;
  d->stats.comm_seconds += waited;
  d->stats.steps++;
  for (int k = 0; k < d->nb; k++)
    d->b[k].ready = 0, d->b[k].started = 0;
  memset(d->seen, 0, sizeof(int) * (size_t)d->np);
  d->next = 0, d->queued = 0, d->started_in_bw = 0;
  if (st)
    d->failed = 1;
  return st;
}

/* Parameter i's gradient is complete: into its bucket, and the buckets
 * that are full start. */
static torc_status ddp_hook(torc_tensor *t, void *user) {
  torc_ddp *d = ((hook_ctx *)user)->d;
  int i = ((hook_ctx *)user)->i;
  if (d->no_sync || W.t == NULL || d->failed || d->seen[i])
    return TORC_OK;
  torc_status st;
  if (!d->queued) {
    if ((st = torc_autograd_queue_callback(ddp_finish, d)))
      return st;
    d->queued = 1;
  }
  bucket *b = &d->b[d->bucket_of[i]];
  if (b->started)
    return TORC_OK;
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  st = torc_copy_(d->views[i], torc_grad_of(t));
  torc_set_grad_mode(gm);
  if (st)
    return st;
  d->seen[i] = 1;
  b->ready++;
  return start_ready(d);
}

void torc_ddp_free(torc_ddp *d) {
  if (d == NULL)
    return;
  for (int i = 0; i < d->np; i++) {
    if (d->hook && d->hook[i] > 0)
      torc_remove_hook(d->params[i], d->hook[i]);
    if (d->views)
      torc_release(d->views[i]);
    torc_release(d->params[i]);
  }
  for (int k = 0; k < d->nb; k++) {
    if (d->b[k].work)
      W.t->wait(W.comm, d->b[k].work, W.timeout);
    torc_release(d->b[k].flat);
  }
  torc__free(d->b);
  torc__free(d->params);
  torc__free(d->views);
  torc__free(d->bucket_of);
  torc__free(d->hook);
  torc__free(d->seen);
  torc__free(d->ctx);
  torc__free(d);
}

/* Rank 0's parameters and buffers to every rank. */
static torc_status broadcast_state(torc_module *m) {
  torc_named_tensor *p = NULL, *b = NULL;
  int np = torc_module_named_parameters(m, &p);
  int nb = np < 0 ? -1 : torc_module_named_buffers(m, 0, &b);
  torc_status st = TORC_OK;
  if (np < 0 || nb < 0)
    st = torc_set_error(TORC_ERR_OOM, "out of memory listing parameters");
  for (int i = 0; i < np && st == TORC_OK; i++)
    st = torc_dist_broadcast(&p[i].tensor, 1, 0);
  for (int i = 0; i < nb && st == TORC_OK; i++)
    st = torc_dist_broadcast(&b[i].tensor, 1, 0);
  torc_named_tensors_free(p, np);
  torc_named_tensors_free(b, nb);
  return st;
}

static torc_ddp *ddp_new(torc_module *m, const torc_ddp_opts *opts);

torc_ddp *torc_ddp_new(torc_module *m, const torc_ddp_opts *opts) {
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc__scope_suspend(1); /* the buckets are the DDP's own */
  torc_ddp *d = ddp_new(m, opts);
  torc__scope_suspend(-1);
  torc_set_grad_mode(gm);
  return d;
}

static torc_ddp *ddp_new(torc_module *m, const torc_ddp_opts *opts) {
  if (m == NULL) {
    torc__null_input("torc_ddp_new");
    return NULL;
  }
  torc_ddp_opts o = {0};
  if (opts)
    o = *opts;
  double mb = o.bucket_mb > 0 ? o.bucket_mb : 25;
  if (W.t && !o.no_broadcast && broadcast_state(m) != TORC_OK)
    return NULL;
  torc_named_tensor *p = NULL;
  int np = torc_module_named_parameters(m, &p);
  torc_ddp *d = torc__calloc(1, sizeof *d);
  if (np < 0 || d == NULL) {
    torc_named_tensors_free(p, np);
    torc__free(d);
    torc_set_error(TORC_ERR_OOM, "out of memory in torc_ddp_new");
    return NULL;
  }
  d->m = m;
  int n = 0;
  for (int i = 0; i < np; i++)
    n += torc_requires_grad(p[i].tensor);
  d->params = torc__calloc((size_t)n + 1, sizeof *d->params);
  d->views = torc__calloc((size_t)n + 1, sizeof *d->views);
  d->bucket_of = torc__calloc((size_t)n + 1, sizeof *d->bucket_of);
  d->hook = torc__calloc((size_t)n + 1, sizeof *d->hook);
  d->seen = torc__calloc((size_t)n + 1, sizeof *d->seen);
  d->b = torc__calloc((size_t)n + 1, sizeof *d->b);
  d->ctx = torc__calloc((size_t)n + 1, sizeof *d->ctx);
  torc_status st = TORC_OK;
  if (!d->params || !d->views || !d->bucket_of || !d->hook || !d->seen ||
      !d->b || !d->ctx)
    st = torc_set_error(TORC_ERR_OOM, "out of memory in torc_ddp_new");
  /* Reverse registration order: the order gradients arrive in. */
  for (int i = np - 1; i >= 0 && st == TORC_OK; i--)
    if (torc_requires_grad(p[i].tensor))
      d->params[d->np++] = torc_retain(p[i].tensor);
  torc_named_tensors_free(p, np);
  /* Buckets: consecutive parameters of one dtype and device, up to mb. */
  size_t cap = (size_t)(mb * 1048576.0), used = 0;
  for (int i = 0; i < d->np && st == TORC_OK; i++) {
    torc_tensor *t = d->params[i];
    size_t bytes = (size_t)torc_numel(t) * torc_dtype_size(t->dtype);
    bucket *cur = d->nb ? &d->b[d->nb - 1] : NULL;
    torc_tensor *t0 = cur ? d->params[cur->first] : NULL;
    if (cur == NULL || used + bytes > cap || t0->dtype != t->dtype ||
        !torc_device_eq(t0->storage->device, t->storage->device)) {
      cur = &d->b[d->nb++];
      cur->first = i;
      used = 0;
    }
    cur->n++;
    used += bytes;
    d->bucket_of[i] = d->nb - 1;
  }
  for (int k = 0; k < d->nb && st == TORC_OK; k++) {
    bucket *b = &d->b[k];
    int64_t total = 0;
    for (int i = b->first; i < b->first + b->n; i++)
      total += torc_numel(d->params[i]);
    torc_tensor *t0 = d->params[b->first];
    b->flat = torc_zeros(&total, 1, t0->dtype, t0->storage->device);
    if (b->flat == NULL) {
      st = torc_last_status();
      break;
    }
    int64_t off = 0;
    for (int i = b->first; i < b->first + b->n && st == TORC_OK; i++) {
      int64_t c = torc_numel(d->params[i]);
      torc_tensor *s = torc_slice(b->flat, 0, off, off + c, 1);
      d->views[i] =
          s ? torc_view(s, d->params[i]->shape, d->params[i]->ndim) : NULL;
      torc_release(s);
      if (d->views[i] == NULL)
        st = torc_last_status();
      off += c;
    }
  }
  for (int i = 0; i < d->np && st == TORC_OK; i++) {
    d->ctx[i] = (hook_ctx){d, i};
    if ((d->hook[i] = torc_register_post_accumulate_grad_hook(
             d->params[i], ddp_hook, &d->ctx[i])) < 0)
      st = torc_last_status();
  }
  if (st) {
    torc_ddp_free(d);
    return NULL;
  }
  return d;
}

void torc_ddp_no_sync(torc_ddp *d, int on) {
  if (d)
    d->no_sync = on != 0;
}

void torc_ddp_get_stats(const torc_ddp *d, torc_ddp_stats *out) {
  if (out == NULL)
    return;
  memset(out, 0, sizeof *out);
  if (d)
    *out = d->stats;
}
