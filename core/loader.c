/* core/loader.c — the DataLoader: a seeded, sharded sampler, batches built
 * by worker threads (or the caller when workers = 0) into a bounded ring
 * that hands them out in order, the default collate (stack, or pad with a
 * mask), pinned staging and the move to the loader's device — on a device
 * with streams, on a copy stream one batch ahead of the caller's step.
 *
 * Determinism: batch b of epoch e is a pure function of (seed, e, b): its
 * sample indices come from the epoch's permutation, its augmentations from
 * (seed, e, sample index). Workers only decide *when* a batch is built.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "torc/philox.h"
#include "data_internal.h"
#include "internal.h"
#include "stream_internal.h"

enum { SLOT_EMPTY, SLOT_READY, SLOT_ERROR };

/* Returned by build() when a stop or a restart makes the batch useless. */
#define BUILD_ABORTED (-1)

#define MSG_MAX 1024

typedef struct slot {
  int state;
  int64_t batch; /* batch number the slot holds */
  torc_batch b;
  torc_status status;
  char msg[MSG_MAX];
} slot;

typedef struct worker {
  struct torc_loader *ld;
  int64_t *idx; /* batch_size sample indices */
  pthread_t thread;
  char msg[MSG_MAX]; /* the error of the batch in hand */
} worker;

struct torc_loader {
  torc_dataset *ds;
  torc_loader_opts o;
  torc_dataset *own_ds;   /* from config: closed with the loader */
  torc_transform *own_tf; /* from config: freed with the loader */
  int64_t n, B, world, rank;
  int64_t per_rank, n_batches;
  int pin;            /* collate into pinned memory for o.device */
  int64_t *perm;      /* the epoch's permutation (start() only) */
  int64_t *sync_idx;  /* workers = 0: the batch's indices */
  char sync_msg[MSG_MAX];
  /* Shared with the workers, under mu. */
  pthread_mutex_t mu;
  pthread_cond_t work_cv;  /* workers: a batch may be claimed, or stop */
  pthread_cond_t ready_cv; /* caller: a slot was filled */
  int started;
  int64_t epoch;
  int64_t *order; /* per_rank sample indices of this rank's epoch */
  int64_t claim;  /* next batch a worker takes */
  int64_t deliver; /* next batch torc_loader_next hands out */
  _Atomic uint64_t gen; /* bumped by start(): older batches are dropped */
  _Atomic int stop;
  slot *slots;
  int cap;
  worker *workers;
  int n_workers;
  /* The caller's only. */
  torc_loader_stats stats;
  /* Overlap, on a device with streams: batch k+1 moves to the device on
   * copy_stream while the caller computes step k on its own stream. */
  int overlap;
  torc_stream *copy_stream;
  torc__pin_pool *pool; /* staging buffers, reused once their copies ran */
  int ahead_state; /* AHEAD_* */
  torc_batch ahead;
  torc_event *ahead_ev; /* recorded on copy_stream after its copies */
  torc_status ahead_status;
  char ahead_msg[MSG_MAX];
};

/* What the loader holds of the next batch. */
enum { AHEAD_NONE, AHEAD_BATCH, AHEAD_ERROR, AHEAD_END };

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void torc_batch_clear(torc_batch *b) {
  if (b == NULL)
    return;
  torc_release(b->input);
  torc_release(b->target);
  torc_release(b->mask);
  memset(b, 0, sizeof *b);
}

/* ---- collate ---- */

/* The pinned buffer pool of the loader whose batch this thread builds
 * (NULL: none), so the collates take their staging buffers from it. */
static _Thread_local torc__pin_pool *tl_pool;

static torc_tensor *pinned_out(const int64_t *shape, int nd, torc_dtype dt,
                               torc_device dev) {
  if (tl_pool)
    return torc__empty_pinned_pooled(shape, nd, dt, tl_pool, dev);
  return torc_empty_pinned(shape, nd, dt, dev);
}

static torc_tensor *alloc_out(const int64_t *shape, int nd, torc_dtype dt,
                              const torc_device *pin_for) {
  if (pin_for)
    return pinned_out(shape, nd, dt, *pin_for);
  return torc__empty(shape, nd, dt, TORC_CPU);
}

static const char *shape_s(const torc_tensor *t, char *buf, size_t size) {
  return torc__shape_str(t->shape, t->ndim, buf, size);
}

/* Stacks equal-shaped tensors into [n, ...]. */
static torc_tensor *stack(torc_tensor *const *ts, int n,
                          const torc_device *pin_for) {
  int64_t shape[TORC_MAX_DIMS];
  shape[0] = n;
  memcpy(shape + 1, ts[0]->shape, sizeof(int64_t) * (size_t)ts[0]->ndim);
  torc_tensor *out = alloc_out(shape, ts[0]->ndim + 1, ts[0]->dtype, pin_for);
  if (out == NULL)
    return NULL;
  size_t per = (size_t)torc__numel(ts[0]->shape, ts[0]->ndim) *
               torc_dtype_size(ts[0]->dtype);
  char *dst = torc__host_data(out);
  for (int i = 0; i < n; i++) {
    torc_tensor *c = torc__host_contiguous(ts[i]);
    if (c == NULL) {
      torc_release(out);
      return NULL;
    }
    if (per)
      memcpy(dst + (size_t)i * per, torc__host_data(c), per);
    torc_release(c);
  }
  return out;
}

/* Pads each input with zeros to `max` (per dim) and stacks; the mask is
 * true on real elements. */
static torc_status pad_stack(torc_tensor *const *ts, int n,
                             const int64_t *max, const torc_device *pin_for,
                             torc_tensor **out_x, torc_tensor **out_m) {
  int nd = ts[0]->ndim;
  int64_t shape[TORC_MAX_DIMS];
  shape[0] = n;
  memcpy(shape + 1, max, sizeof(int64_t) * (size_t)nd);
  torc_tensor *x = alloc_out(shape, nd + 1, ts[0]->dtype, pin_for);
  torc_tensor *m = x ? alloc_out(shape, nd + 1, TORC_BOOL, pin_for) : NULL;
  if (m == NULL) {
    torc_release(x);
    return torc_last_status();
  }
  size_t es = torc_dtype_size(ts[0]->dtype);
  int64_t per = torc__numel(max, nd);
  char *xd = torc__host_data(x);
  uint8_t *md = torc__host_data(m);
  memset(xd, 0, (size_t)(per * n) * es);
  memset(md, 0, (size_t)(per * n));
  int64_t dst_strides[TORC_MAX_DIMS];
  torc__contiguous_strides(max, nd, dst_strides);
  for (int i = 0; i < n; i++) {
    torc_tensor *c = torc__host_contiguous(ts[i]);
    if (c == NULL) {
      torc_release(x);
      torc_release(m);
      return torc_last_status();
    }
    const char *src = torc__host_data(c);
    int64_t w = c->shape[nd - 1];
    int64_t rows = w ? torc__numel(c->shape, nd) / w : 0;
    int64_t idx[TORC_MAX_DIMS] = {0};
    for (int64_t r = 0; r < rows; r++) {
      int64_t off = (int64_t)i * per;
      for (int d = 0; d < nd - 1; d++)
        off += idx[d] * dst_strides[d];
      memcpy(xd + (size_t)off * es, src + (size_t)(r * w) * es,
             (size_t)w * es);
      memset(md + off, 1, (size_t)w);
      for (int d = nd - 2; d >= 0; d--) {
        if (++idx[d] < c->shape[d])
          break;
        idx[d] = 0;
      }
    }
    torc_release(c);
  }
  *out_x = x;
  *out_m = m;
  return TORC_OK;
}

static torc_status collate(torc_tensor *const *inputs,
                           torc_tensor *const *targets, int n,
                           torc_batch *out, const torc_device *pin_for) {
  if (out == NULL || inputs == NULL || targets == NULL || n < 1)
    return torc_set_error(TORC_ERR_NULL,
                          "torc_collate_default: %s",
                          out == NULL ? "the output batch is NULL"
                          : n < 1     ? "a batch needs at least one sample"
                                      : "the input or target array is NULL");
  memset(out, 0, sizeof *out);
  char s0[96], s1[96];
  for (int i = 0; i < n; i++) {
    if (inputs[i] == NULL || targets[i] == NULL)
      return torc_set_error(TORC_ERR_NULL,
                            "torc_collate_default: sample %d of the batch "
                            "has no %s",
                            i, inputs[i] == NULL ? "input" : "target");
    if (!torc_device_is_host(inputs[i]->storage->device) ||
        !torc_device_is_host(targets[i]->storage->device))
      return torc_set_error(TORC_ERR_DEVICE,
                            "torc_collate_default: sample %d of the batch is "
                            "on %s; collate works on cpu samples",
                            i,
                            torc__devname(inputs[i]->storage->device.type
                                              ? inputs[i]->storage->device
                                              : targets[i]->storage->device));
  }
  const torc_tensor *x0 = inputs[0], *t0 = targets[0];
  if (x0->ndim + 1 > TORC_MAX_DIMS || t0->ndim + 1 > TORC_MAX_DIMS)
    return torc_set_error(TORC_ERR_SHAPE,
                          "torc_collate_default: samples have %d dims; a "
                          "batch adds one and tensors have at most %d",
                          x0->ndim > t0->ndim ? x0->ndim : t0->ndim,
                          TORC_MAX_DIMS);
  int64_t max[TORC_MAX_DIMS];
  memcpy(max, x0->shape, sizeof(int64_t) * (size_t)x0->ndim);
  int ragged = 0;
  for (int i = 1; i < n; i++) {
    const torc_tensor *x = inputs[i], *t = targets[i];
    if (x->dtype != x0->dtype)
      return torc_set_error(TORC_ERR_DTYPE,
                            "torc_collate_default: sample %d's input is %s "
                            "but sample 0's is %s; give them one dtype (a "
                            "cast(...) transform stage)",
                            i, torc_dtype_name(x->dtype),
                            torc_dtype_name(x0->dtype));
    if (x->ndim != x0->ndim)
      return torc_set_error(TORC_ERR_SHAPE,
                            "torc_collate_default: sample %d's input has "
                            "shape %s but sample 0's %s; the default collate "
                            "pads only inputs with the same number of dims "
                            "(write a custom collate for others)",
                            i, shape_s(x, s0, sizeof s0),
                            shape_s(x0, s1, sizeof s1));
    for (int d = 0; d < x->ndim; d++) {
      if (x->shape[d] != x0->shape[d])
        ragged = 1;
      if (x->shape[d] > max[d])
        max[d] = x->shape[d];
    }
    if (t->dtype != t0->dtype || t->ndim != t0->ndim ||
        memcmp(t->shape, t0->shape, sizeof(int64_t) * (size_t)t->ndim) != 0)
      return torc_set_error(TORC_ERR_SHAPE,
                            "torc_collate_default: sample %d's target is %s "
                            "%s but sample 0's is %s %s; targets are stacked, "
                            "so they must agree in shape and dtype",
                            i, torc_dtype_name(t->dtype),
                            shape_s(t, s0, sizeof s0),
                            torc_dtype_name(t0->dtype),
                            shape_s(t0, s1, sizeof s1));
  }
  torc_batch b = {0};
  torc_status st = TORC_OK;
  if (ragged) {
    st = pad_stack(inputs, n, max, pin_for, &b.input, &b.mask);
  } else {
    b.input = stack(inputs, n, pin_for);
    if (b.input == NULL)
      st = torc_last_status();
  }
  if (st == TORC_OK) {
    b.target = stack(targets, n, pin_for);
    if (b.target == NULL)
      st = torc_last_status();
  }
  if (st != TORC_OK) {
    torc_batch_clear(&b);
    return st ? st : TORC_ERR_INTERNAL;
  }
  b.size = n;
  *out = b;
  return TORC_OK;
}

torc_status torc_collate_default(torc_tensor *const *inputs,
                                 torc_tensor *const *targets, int n,
                                 torc_batch *out, void *user) {
  (void)user;
  return collate(inputs, targets, n, out, NULL);
}

/* A pinned copy of a cpu tensor (custom collates' outputs). */
static torc_tensor *pin_copy(torc_tensor *t, torc_device dev) {
  torc_tensor *c = torc__host_contiguous(t);
  if (c == NULL)
    return NULL;
  torc_tensor *p = pinned_out(c->shape, c->ndim, c->dtype, dev);
  if (p) {
    size_t nb = (size_t)torc__numel(c->shape, c->ndim) *
                torc_dtype_size(c->dtype);
    if (nb)
      memcpy(torc__host_data(p), torc__host_data(c), nb);
  }
  torc_release(c);
  return p;
}

/* ---- building one batch ---- */

/* Sample indices of batch b of the current epoch; returns the count.
 * Caller holds mu (or is the only thread). */
static int64_t batch_indices(const torc_loader *ld, int64_t b, int64_t *out) {
  int64_t first = b * ld->B;
  int64_t n = ld->per_rank - first;
  if (n > ld->B)
    n = ld->B;
  memcpy(out, ld->order + first, sizeof(int64_t) * (size_t)n);
  return n;
}

static int aborted(const torc_loader *ld, uint64_t gen) {
  return ld->o.workers > 0 &&
         (atomic_load(&ld->stop) || atomic_load(&ld->gen) != gen);
}

/* Loads, transforms and collates samples idx[0..n) (batch bi of epoch
 * `epoch`) into a cpu batch. Returns TORC_OK, an error with `msg` set (the
 * sample index and the cause), or BUILD_ABORTED. Scopes are suspended:
 * nothing made here belongs to a scope, whichever thread runs it. */
static int build(const torc_loader *ld, const int64_t *idx, int64_t n,
                 int64_t epoch, int64_t bi, uint64_t gen, torc_batch *out,
                 char *msg) {
  memset(out, 0, sizeof *out);
  torc_tensor **xs = torc__calloc((size_t)n, sizeof *xs);
  torc_tensor **ys = torc__calloc((size_t)n, sizeof *ys);
  if (xs == NULL || ys == NULL) {
    torc__free(xs), torc__free(ys);
    torc_set_error(TORC_ERR_OOM, "out of memory building batch %lld",
                   (long long)bi);
    snprintf(msg, MSG_MAX, "data loader: %s", torc_last_error());
    return TORC_ERR_OOM;
  }
  torc__scope_suspend(1);
  int rc = TORC_OK;
  int64_t got = 0;
  for (; got < n; got++) {
    if (aborted(ld, gen)) {
      rc = BUILD_ABORTED;
      break;
    }
    torc_tensor *x = NULL, *y = NULL;
    torc_status st = torc_dataset_get(ld->ds, idx[got], &x, &y);
    if (st == TORC_OK && ld->o.transform) {
      torc_tensor *tx =
          torc__transform_run(ld->o.transform, x, ld->o.seed, epoch, idx[got]);
      torc_release(x);
      x = tx;
      if (x == NULL)
        st = torc_last_status() ? torc_last_status() : TORC_ERR_INTERNAL;
    }
    if (st != TORC_OK) {
      torc_release(x);
      torc_release(y);
      snprintf(msg, MSG_MAX,
               "data loader: sample %lld (batch %lld of epoch %lld): %s",
               (long long)idx[got], (long long)bi, (long long)epoch,
               torc_last_error());
      rc = st;
      break;
    }
    xs[got] = x;
    ys[got] = y;
  }
  if (rc == TORC_OK) {
    torc_device dev = ld->o.device;
    torc_status st;
    tl_pool = ld->pool;
    if (ld->o.collate) {
      torc_clear_error();
      st = ld->o.collate(xs, ys, (int)n, out, ld->o.collate_user);
      if (st == TORC_OK && (out->input == NULL || out->target == NULL))
        st = torc_set_error(TORC_ERR_INVALID,
                            "the custom collate returned TORC_OK without %s",
                            out->input == NULL ? "an input" : "a target");
      if (st == TORC_OK && ld->pin) {
        torc_tensor **ts[3] = {&out->input, &out->target, &out->mask};
        for (int k = 0; k < 3 && st == TORC_OK; k++) {
          if (*ts[k] == NULL || torc_is_pinned(*ts[k]))
            continue;
          torc_tensor *p = pin_copy(*ts[k], dev);
          if (p == NULL)
            st = torc_last_status();
          else {
            torc_release(*ts[k]);
            *ts[k] = p;
          }
        }
      }
      if (st != TORC_OK && torc_last_status() == TORC_OK)
        torc_set_error(st, "the custom collate failed without saying why "
                           "(status %d)",
                       (int)st);
    } else {
      st = collate(xs, ys, (int)n, out, ld->pin ? &dev : NULL);
    }
    tl_pool = NULL;
    if (st != TORC_OK) {
      torc_batch_clear(out);
      snprintf(msg, MSG_MAX,
               "data loader: batch %lld of epoch %lld (samples %lld..): %s",
               (long long)bi, (long long)epoch, (long long)idx[0],
               torc_last_error());
      rc = st;
    } else {
      out->index = bi;
      out->size = n;
    }
  }
  for (int64_t i = 0; i < got; i++) {
    torc_release(xs[i]);
    torc_release(ys[i]);
  }
  torc__scope_suspend(-1);
  torc__free(xs);
  torc__free(ys);
  return rc;
}

/* ---- workers ---- */

static void *worker_main(void *arg) {
  worker *w = arg;
  torc_loader *ld = w->ld;
  pthread_mutex_lock(&ld->mu);
  while (!atomic_load(&ld->stop)) {
    if (!(ld->started && ld->claim < ld->n_batches &&
          ld->claim < ld->deliver + ld->cap)) {
      pthread_cond_wait(&ld->work_cv, &ld->mu);
      continue;
    }
    int64_t bi = ld->claim++;
    int64_t n = batch_indices(ld, bi, w->idx);
    int64_t epoch = ld->epoch;
    uint64_t gen = atomic_load(&ld->gen);
    pthread_mutex_unlock(&ld->mu);

    torc_batch b;
    w->msg[0] = '\0';
    int rc = build(ld, w->idx, n, epoch, bi, gen, &b, w->msg);

    pthread_mutex_lock(&ld->mu);
    if (rc == BUILD_ABORTED || atomic_load(&ld->stop) ||
        atomic_load(&ld->gen) != gen) {
      torc_batch_clear(&b);
      continue;
    }
    slot *s = &ld->slots[bi % ld->cap];
    s->batch = bi;
    s->b = b;
    s->status = rc;
    s->state = rc == TORC_OK ? SLOT_READY : SLOT_ERROR;
    if (rc != TORC_OK)
      memcpy(s->msg, w->msg, sizeof s->msg);
    pthread_cond_broadcast(&ld->ready_cv);
  }
  pthread_mutex_unlock(&ld->mu);
  return NULL;
}

/* ---- the loader ---- */

static void clear_slots(torc_loader *ld) {
  for (int i = 0; i < ld->cap; i++) {
    torc_batch_clear(&ld->slots[i].b);
    ld->slots[i].state = SLOT_EMPTY;
    ld->slots[i].batch = -1;
  }
}

static void stop_workers(torc_loader *ld) {
  if (ld->n_workers == 0)
    return;
  pthread_mutex_lock(&ld->mu);
  atomic_store(&ld->stop, 1);
  pthread_cond_broadcast(&ld->work_cv);
  pthread_mutex_unlock(&ld->mu);
  for (int i = 0; i < ld->n_workers; i++)
    pthread_join(ld->workers[i].thread, NULL);
  ld->n_workers = 0;
}

/* Drops the batch moved ahead (a restart, the end). */
static void drop_ahead(torc_loader *ld) {
  torc_batch_clear(&ld->ahead);
  torc_event_free(ld->ahead_ev);
  ld->ahead_ev = NULL;
  ld->ahead_state = AHEAD_NONE;
}

void torc_loader_free(torc_loader *ld) {
  if (ld == NULL)
    return;
  stop_workers(ld);
  drop_ahead(ld);
  torc_stream_free(ld->copy_stream);
  if (ld->slots)
    clear_slots(ld);
  torc__free(ld->slots);
  if (ld->workers)
    for (int i = 0; i < ld->o.workers; i++)
      torc__free(ld->workers[i].idx);
  torc__free(ld->workers);
  torc__free(ld->perm);
  torc__free(ld->order);
  torc__free(ld->sync_idx);
  pthread_mutex_destroy(&ld->mu);
  pthread_cond_destroy(&ld->work_cv);
  pthread_cond_destroy(&ld->ready_cv);
  torc__pin_pool_drop(ld->pool); /* after every batch went back to it */
  torc_dataset_close(ld->own_ds);
  torc_transform_free(ld->own_tf);
  torc__free(ld);
}

void torc__loader_own(torc_loader *ld, torc_dataset *ds, torc_transform *t) {
  ld->own_ds = ds;
  ld->own_tf = t;
}

torc_dataset *torc_loader_dataset(const torc_loader *ld) {
  return ld ? ld->ds : NULL;
}

static torc_status opt_error(const char *opt, long long v, const char *fix) {
  return torc_set_error(TORC_ERR_INVALID, "torc_loader_new: %s = %lld %s",
                        opt, v, fix);
}

static torc_status check_opts(const torc_loader_opts *o) {
  if (o->batch_size < 0 || o->batch_size > INT32_MAX)
    return opt_error("batch_size", (long long)o->batch_size,
                     "is out of range; use 1 to 2147483647 (0 means 1)");
  if (o->limit < 0)
    return opt_error("limit", (long long)o->limit,
                     "is negative; give a sample count (0 = all)");
  if (o->workers < 0 || o->workers > 256)
    return opt_error("workers", o->workers,
                     "is out of range; use 0 (load in the calling thread) "
                     "to 256");
  if (o->prefetch < 0 || o->prefetch > 4096)
    return opt_error("prefetch", o->prefetch,
                     "is out of range; use 0 (2 per worker) to 4096");
  if (o->world_size < 0)
    return opt_error("world_size", o->world_size,
                     "is negative; use 0 or 1 (no sharding) or the number "
                     "of ranks");
  if (o->world_size > 1 && (o->rank < 0 || o->rank >= o->world_size))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_loader_new: rank = %d is out of range for "
                          "world_size = %d; use 0 to %d",
                          o->rank, o->world_size, o->world_size - 1);
  if (o->world_size <= 1 && o->rank != 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_loader_new: rank = %d without sharding "
                          "(world_size = %d); set world_size to the number "
                          "of ranks, or rank to 0",
                          o->rank, o->world_size);
  if (o->pin_memory < -1 || o->pin_memory > 1)
    return opt_error("pin_memory", o->pin_memory,
                     "is not one of 0 (auto), 1 (yes), -1 (no)");
  return torc__device_check(o->device, "torc_loader_new");
}

torc_loader *torc_loader_new(torc_dataset *ds, const torc_loader_opts *opts) {
  if (ds == NULL) {
    torc__null_input("torc_loader_new");
    return NULL;
  }
  torc_loader_opts o = {0};
  if (opts)
    o = *opts;
  if (check_opts(&o) != TORC_OK)
    return NULL;
  int64_t n = torc_dataset_length(ds);
  if (o.limit > 0 && o.limit < n)
    n = o.limit;
  if (n <= 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_loader_new: the dataset (%s) has no samples",
                   torc_dataset_describe(ds));
    return NULL;
  }
  int64_t B = o.batch_size ? o.batch_size : 1;
  int64_t world = o.world_size > 1 ? o.world_size : 1;
  int64_t per_rank = (n + world - 1) / world;
  int64_t n_batches = o.drop_last ? per_rank / B : (per_rank + B - 1) / B;
  if (n_batches == 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_loader_new: batch_size = %lld with drop_last leaves "
                   "no batch: %s has %lld samples%s; use a smaller batch or "
                   "drop_last = no",
                   (long long)B, world > 1 ? "this rank" : "the dataset",
                   (long long)per_rank, world > 1 ? " per rank" : "");
    return NULL;
  }
  torc_loader *ld = torc__calloc(1, sizeof *ld);
  if (ld == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory for a loader");
    return NULL;
  }
  pthread_mutex_init(&ld->mu, NULL);
  pthread_cond_init(&ld->work_cv, NULL);
  pthread_cond_init(&ld->ready_cv, NULL);
  ld->ds = ds;
  ld->o = o;
  ld->n = n;
  ld->B = B;
  ld->world = world;
  ld->rank = world > 1 ? o.rank : 0;
  ld->per_rank = per_rank;
  ld->n_batches = n_batches;
  ld->pin = o.pin_memory == 1 ||
            (o.pin_memory == 0 && !torc_device_is_host(o.device));
  /* A device with streams gets its batches on a copy stream, one ahead. */
  torc__devtype *dt = torc__devtype_get(o.device.type);
  ld->overlap = !torc_device_is_host(o.device) && dt && torc__has_streams(dt);
  ld->cap = o.prefetch ? o.prefetch : (o.workers ? 2 * o.workers : 1);
  /* Staging buffers for every batch in flight (input, target, mask): the
   * ring's, the batch ahead, the one being built. */
  if (ld->overlap && ld->pin)
    ld->pool = torc__pin_pool_new(o.device, 3 * (ld->cap + 2));
  ld->perm = torc__malloc(sizeof(int64_t) * (size_t)n);
  ld->order = torc__malloc(sizeof(int64_t) * (size_t)per_rank);
  ld->sync_idx = torc__malloc(sizeof(int64_t) * (size_t)B);
  ld->slots = torc__calloc((size_t)ld->cap, sizeof *ld->slots);
  ld->workers = o.workers ? torc__calloc((size_t)o.workers, sizeof *ld->workers)
                          : NULL;
  int ok = ld->perm && ld->order && ld->sync_idx && ld->slots &&
           (o.workers == 0 || ld->workers) &&
           (ld->pool || !(ld->overlap && ld->pin));
  for (int i = 0; ok && i < o.workers; i++) {
    ld->workers[i].ld = ld;
    ld->workers[i].idx = torc__malloc(sizeof(int64_t) * (size_t)B);
    ok = ld->workers[i].idx != NULL;
  }
  if (!ok) {
    torc_loader_free(ld);
    torc_set_error(TORC_ERR_OOM, "out of memory for a loader over %lld "
                                 "samples",
                   (long long)n);
    return NULL;
  }
  clear_slots(ld);
  for (int i = 0; i < o.workers; i++) {
    int e = pthread_create(&ld->workers[i].thread, NULL, worker_main,
                           &ld->workers[i]);
    if (e != 0) {
      torc_loader_free(ld);
      torc_set_error(TORC_ERR_INTERNAL,
                     "torc_loader_new: cannot start loader thread %d of %d: "
                     "%s; use fewer workers",
                     i + 1, o.workers, strerror(e));
      return NULL;
    }
    ld->n_workers = i + 1;
  }
  return ld;
}

int64_t torc_loader_length(const torc_loader *ld) {
  return ld ? ld->n_batches : -1;
}

/* The permutation of epoch e: Fisher-Yates over Philox keyed by (seed, e),
 * draw k at counter k. */
static void make_perm(torc_loader *ld, int64_t epoch) {
  int64_t n = ld->n;
  for (int64_t i = 0; i < n; i++)
    ld->perm[i] = i;
  if (!ld->o.shuffle)
    return;
  uint64_t key = torc__data_key(ld->o.seed, epoch, 0);
  uint64_t draw = 0;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = torc_philox_randint(key, draw++, 0, i + 1);
    int64_t t = ld->perm[i];
    ld->perm[i] = ld->perm[j];
    ld->perm[j] = t;
  }
}

torc_status torc_loader_start(torc_loader *ld, int64_t epoch,
                              int64_t first_batch) {
  if (ld == NULL)
    return torc__null_input("torc_loader_start");
  if (epoch < 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_loader_start: epoch = %lld is negative",
                          (long long)epoch);
  if (first_batch < 0 || first_batch > ld->n_batches)
    return torc_set_error(TORC_ERR_RANGE,
                          "torc_loader_start: first_batch = %lld is out of "
                          "range; an epoch has %lld batches (0..%lld)",
                          (long long)first_batch, (long long)ld->n_batches,
                          (long long)ld->n_batches);
  make_perm(ld, epoch);
  pthread_mutex_lock(&ld->mu);
  /* Padded by wrap-around to per_rank * world, then every world-th from
   * rank (PyTorch's DistributedSampler). */
  for (int64_t k = 0; k < ld->per_rank; k++)
    ld->order[k] = ld->perm[(ld->rank + k * ld->world) % ld->n];
  atomic_fetch_add(&ld->gen, 1);
  ld->epoch = epoch;
  ld->claim = ld->deliver = first_batch;
  ld->started = 1;
  clear_slots(ld);
  drop_ahead(ld);
  pthread_cond_broadcast(&ld->work_cv);
  pthread_mutex_unlock(&ld->mu);
  return TORC_OK;
}

/* Moves the batch's tensors to the loader's device (in the caller's
 * thread, which owns the device's queue). */
static torc_status move_batch(torc_loader *ld, torc_batch *b) {
  if (torc_device_is_host(ld->o.device))
    return TORC_OK;
  torc_tensor **ts[3] = {&b->input, &b->target, &b->mask};
  for (int k = 0; k < 3; k++) {
    if (*ts[k] == NULL)
      continue;
    torc_tensor *d = torc__to(*ts[k], ld->o.device);
    if (d == NULL)
      return torc_last_status();
    torc_release(*ts[k]);
    *ts[k] = d;
  }
  return TORC_OK;
}

/* The next batch from the ring (or built here), on the cpu: 1, 0 at the
 * end of the epoch, -1 with the error set. */
static int fetch(torc_loader *ld, torc_batch *out) {
  torc_batch b = {0};
  double t0 = now_seconds();
  if (ld->n_workers == 0) {
    if (ld->deliver >= ld->n_batches)
      return 0;
    int64_t bi = ld->deliver++;
    int64_t n = batch_indices(ld, bi, ld->sync_idx);
    int rc = build(ld, ld->sync_idx, n, ld->epoch, bi, 0, &b, ld->sync_msg);
    ld->stats.wait_seconds += now_seconds() - t0;
    if (rc != TORC_OK) {
      torc_set_error((torc_status)rc, "%s", ld->sync_msg);
      return -1;
    }
  } else {
    pthread_mutex_lock(&ld->mu);
    if (ld->deliver >= ld->n_batches) {
      pthread_mutex_unlock(&ld->mu);
      return 0;
    }
    int64_t bi = ld->deliver;
    slot *s = &ld->slots[bi % ld->cap];
    while (s->state == SLOT_EMPTY || s->batch != bi)
      pthread_cond_wait(&ld->ready_cv, &ld->mu);
    int state = s->state;
    torc_status status = s->status;
    b = s->b;
    memset(&s->b, 0, sizeof s->b);
    s->state = SLOT_EMPTY;
    ld->deliver++;
    pthread_cond_broadcast(&ld->work_cv);
    if (state == SLOT_ERROR)
      torc_set_error(status, "%s", s->msg);
    pthread_mutex_unlock(&ld->mu);
    ld->stats.wait_seconds += now_seconds() - t0;
    if (state == SLOT_ERROR)
      return -1;
  }
  if (ld->pin && b.input && torc_is_pinned(b.input))
    ld->stats.pinned = 1;
  *out = b;
  return 1;
}

/* Queues b's move to the device on the copy stream and an event after it
 * in *ev; the caller's current stream is left as it was. */
static torc_status move_ahead(torc_loader *ld, torc_batch *b,
                              torc_event **ev) {
  torc_device dev = ld->o.device;
  *ev = NULL;
  torc_stream *prev = torc_current_stream(dev);
  torc_status st = prev ? torc_set_current_stream(ld->copy_stream)
                        : torc_last_status();
  if (st != TORC_OK)
    return st;
  st = move_batch(ld, b);
  if (st == TORC_OK && (*ev = torc_event_new(dev)) == NULL)
    st = torc_last_status();
  if (st == TORC_OK)
    st = torc_event_record(*ev, ld->copy_stream);
  torc_set_current_stream(prev);
  if (st != TORC_OK) {
    torc_event_free(*ev);
    *ev = NULL;
  }
  return st;
}

/* Fetches batch k+1 and queues its move, keeping it (or its error, or the
 * end) for the next call. */
static void prefetch(torc_loader *ld) {
  torc_batch nb = {0};
  int rc = fetch(ld, &nb);
  if (rc == 1 && move_ahead(ld, &nb, &ld->ahead_ev) != TORC_OK) {
    torc_batch_clear(&nb);
    rc = -1;
  }
  if (rc == 1) {
    ld->ahead = nb;
    ld->ahead_state = AHEAD_BATCH;
  } else if (rc == 0) {
    ld->ahead_state = AHEAD_END;
  } else { /* reported with the batch it belongs to */
    ld->ahead_status = torc_last_status();
    snprintf(ld->ahead_msg, sizeof ld->ahead_msg, "%s", torc_last_error());
    ld->ahead_state = AHEAD_ERROR;
    torc_clear_error();
  }
}

/* torc_loader_next with overlap: the batch moved during the last call (or
 * now, the first time), batch k+1's move queued behind it on the copy
 * stream, and the caller's stream made to wait for this batch's copies. */
static int next_overlapped(torc_loader *ld, torc_batch *out) {
  torc_batch b = {0};
  torc_event *ev = NULL;
  int state = ld->ahead_state;
  ld->ahead_state = AHEAD_NONE;
  if (state == AHEAD_END)
    return 0;
  if (state == AHEAD_ERROR) {
    torc_set_error(ld->ahead_status, "%s", ld->ahead_msg);
    return -1;
  }
  if (state == AHEAD_BATCH) {
    b = ld->ahead;
    ev = ld->ahead_ev;
    memset(&ld->ahead, 0, sizeof ld->ahead);
    ld->ahead_ev = NULL;
  } else {
    int rc = fetch(ld, &b);
    if (rc != 1)
      return rc;
    if (move_ahead(ld, &b, &ev) != TORC_OK) {
      torc_batch_clear(&b);
      return -1;
    }
  }
  prefetch(ld);
  /* The caller's stream waits on the device, and the batch's blocks (of
   * the copy stream) are not reused before that stream is past them. */
  torc_stream *cur = torc_current_stream(ld->o.device);
  torc_status st = cur ? torc_stream_wait_event(cur, ev) : torc_last_status();
  torc_tensor *ts[3] = {b.input, b.target, b.mask};
  for (int k = 0; k < 3 && st == TORC_OK; k++)
    if (ts[k])
      st = torc_tensor_record_stream(ts[k], cur);
  torc_event_free(ev);
  if (st != TORC_OK) {
    torc_batch_clear(&b);
    return -1;
  }
  ld->stats.batches++;
  ld->stats.samples += b.size;
  *out = b;
  return 1;
}

int torc_loader_next(torc_loader *ld, torc_batch *out) {
  if (out)
    memset(out, 0, sizeof *out);
  if (ld == NULL || out == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_loader_next: the %s is NULL",
                   ld == NULL ? "loader" : "output batch");
    return -1;
  }
  if (!ld->started && torc_loader_start(ld, 0, 0) != TORC_OK)
    return -1;
  if (ld->overlap && ld->copy_stream == NULL &&
      (ld->copy_stream = torc_stream_new(ld->o.device)) == NULL)
    return -1;
  if (ld->overlap)
    return next_overlapped(ld, out);
  torc_batch b = {0};
  int rc = fetch(ld, &b);
  if (rc != 1)
    return rc;
  if (move_batch(ld, &b) != TORC_OK) {
    torc_batch_clear(&b);
    return -1;
  }
  ld->stats.batches++;
  ld->stats.samples += b.size;
  *out = b;
  return 1;
}

torc_status torc_loader_get_stats(const torc_loader *ld,
                                  torc_loader_stats *out) {
  if (ld == NULL || out == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_loader_get_stats: the %s is "
                                         "NULL",
                          ld == NULL ? "loader" : "output");
  *out = ld->stats;
  return TORC_OK;
}
