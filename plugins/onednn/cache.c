/* plugins/onednn/cache.c — the primitive cache: oneDNN primitives are
 * costly to create (JIT code generation, ~0.1-10 ms) and cheap to run, so
 * each (op, shapes, parameters, threads) gets one primitive, made on first
 * use and kept in a bounded LRU. Reorder buffers and scratchpads of every
 * entry share one arena (only one kernel runs at a time), so the cache
 * holds at most one activation-sized buffer set, not one per shape.
 */
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "onednn_internal.h"

/* Most cached primitives; the least recently used one is dropped beyond. */
enum { DNN_CACHE_CAP = 64 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static dnn_entry *entries[DNN_CACHE_CAP];
static int n_entries;
static uint64_t clock_now;
static void *arena;
static size_t arena_size;

void torc_dnn__lock(void) { pthread_mutex_lock(&lock); }
void torc_dnn__unlock(void) { pthread_mutex_unlock(&lock); }

int torc_dnn__fail(const char *op, const char *what, dnnl_status_t s) {
  return torc_dnn__set_error(TORC_ERR_PLUGIN,
                             "onednn kernel '%s': %s failed (oneDNN status "
                             "%d)",
                             op, what, (int)s);
}

int torc_dnn__threads(int n) {
  static _Thread_local int last;
  if (n < 1)
    n = 1;
#ifdef TORC_SANITIZE
  /* libgomp never joins its idle workers, and LeakSanitizer's exit-time
   * scan crashes (SIGSEGV in its tracer) while they are alive: sanitizer
   * builds run oneDNN on the calling thread alone. */
  n = 1;
#endif
  if (last != n) {
    omp_set_num_threads(n);
    last = n;
  }
  return n;
}

int torc_dnn__md(dnnl_memory_desc_t *md, int ndim, const int64_t *dims,
                 const int64_t *strides, dnnl_data_type_t dt) {
  dnnl_dims_t d, s;
  for (int i = 0; i < ndim; i++)
    d[i] = dims[i], s[i] = strides[i];
  return dnnl_memory_desc_init_by_strides(md, ndim, d, dt, s) == dnnl_success
             ? TORC_OK
             : TORC_ERR_PLUGIN;
}

static void entry_free(dnn_entry *e) {
  if (e == NULL)
    return;
  for (int i = 0; i < e->n_args; i++) {
    dnn_arg *a = &e->args[i];
    if (a->reorder)
      dnnl_primitive_destroy(a->reorder);
    if (a->user)
      dnnl_memory_destroy(a->user);
    if (a->prim)
      dnnl_memory_destroy(a->prim);
  }
  if (e->scratch)
    dnnl_memory_destroy(e->scratch);
  if (e->prim)
    dnnl_primitive_destroy(e->prim);
  if (e->pd)
    dnnl_primitive_desc_destroy(e->pd);
  if (e->ext_free)
    e->ext_free(e->ext);
  free(e);
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

int torc_dnn__entry_arg(dnn_entry *e, int arg, const dnnl_memory_desc_t *user_md,
                        int is_out) {
  if (e->n_args == DNN_MAX_ARGS)
    return torc_dnn__set_error(TORC_ERR_INTERNAL,
                               "onednn: too many primitive arguments");
  const dnnl_memory_desc_t *pmd =
      dnnl_primitive_desc_query_md(e->pd, dnnl_query_exec_arg_md, arg);
  if (pmd == NULL || pmd->ndims == 0)
    return torc_dnn__set_error(TORC_ERR_INTERNAL,
                               "onednn: the primitive has no argument %d", arg);
  dnn_arg *a = &e->args[e->n_args++];
  memset(a, 0, sizeof *a);
  a->arg = arg;
  a->is_out = is_out;
  a->scratch_only = user_md == NULL;
  dnnl_status_t s = dnnl_success;
  if (user_md)
    s = dnnl_memory_create(&a->user, user_md, torc_dnn__engine,
                           DNNL_MEMORY_NONE);
  if (s == dnnl_success &&
      (user_md == NULL || !dnnl_memory_desc_equal(user_md, pmd))) {
    a->prim_bytes = dnnl_memory_desc_get_size(pmd);
    a->arena_off = e->arena_bytes;
    e->arena_bytes += align64(a->prim_bytes);
    s = dnnl_memory_create(&a->prim, pmd, torc_dnn__engine, DNNL_MEMORY_NONE);
    if (s == dnnl_success && user_md) {
      dnnl_primitive_desc_t rpd;
      s = is_out ? dnnl_reorder_primitive_desc_create(
                       &rpd, pmd, torc_dnn__engine, user_md, torc_dnn__engine,
                       NULL)
                 : dnnl_reorder_primitive_desc_create(
                       &rpd, user_md, torc_dnn__engine, pmd, torc_dnn__engine,
                       NULL);
      if (s == dnnl_success) {
        s = dnnl_primitive_create(&a->reorder, rpd);
        dnnl_primitive_desc_destroy(rpd);
      }
    }
  }
  return s == dnnl_success ? TORC_OK
                           : torc_dnn__fail("cache", "creating a reorder", s);
}

int torc_dnn__entry_finish(dnn_entry *e) {
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(e->pd, dnnl_query_impl_info_str, 0, &impl) ==
      dnnl_success)
    e->impl = impl;
  const dnnl_memory_desc_t *smd =
      dnnl_primitive_desc_query_md(e->pd, dnnl_query_scratchpad_md, 0);
  dnnl_status_t s;
  if (smd && smd->ndims > 0 && dnnl_memory_desc_get_size(smd) > 0) {
    e->scratch_bytes = dnnl_memory_desc_get_size(smd);
    e->scratch_off = e->arena_bytes;
    e->arena_bytes += align64(e->scratch_bytes);
    s = dnnl_memory_create(&e->scratch, smd, torc_dnn__engine,
                           DNNL_MEMORY_NONE);
    if (s != dnnl_success)
      return torc_dnn__fail("cache", "creating a scratchpad", s);
  }
  s = dnnl_primitive_create(&e->prim, e->pd);
  return s == dnnl_success ? TORC_OK
                           : torc_dnn__fail("cache", "creating a primitive", s);
}

dnn_entry *torc_dnn__cache_get(const dnn_key *key, dnn_build_fn build,
                               const void *ctx) {
  clock_now++;
  for (int i = 0; i < n_entries; i++)
    if (memcmp(&entries[i]->key, key, sizeof *key) == 0) {
      entries[i]->used = clock_now;
      return entries[i];
    }
  dnn_entry *e = calloc(1, sizeof *e);
  if (e == NULL) {
    torc_dnn__set_error(TORC_ERR_OOM, "onednn: out of memory");
    return NULL;
  }
  e->key = *key;
  int st = build(e, ctx);
  if (st == TORC_ERR_UNSUPPORTED) { /* remembered, so not retried */
    entry_free(e);
    if ((e = calloc(1, sizeof *e)) == NULL) {
      torc_dnn__set_error(TORC_ERR_OOM, "onednn: out of memory");
      return NULL;
    }
    e->key = *key;
    e->unsupported = 1;
  } else if (st != TORC_OK) {
    entry_free(e);
    return NULL;
  }
  e->used = clock_now;
  if (n_entries == DNN_CACHE_CAP) {
    int lru = 0;
    for (int i = 1; i < n_entries; i++)
      if (entries[i]->used < entries[lru]->used)
        lru = i;
    entry_free(entries[lru]);
    entries[lru] = entries[--n_entries];
  }
  entries[n_entries++] = e;
  return e;
}

/* Grows the arena to n bytes (contents are scratch: not kept). */
static int arena_reserve(size_t n) {
  if (n <= arena_size)
    return TORC_OK;
  free(arena);
  arena_size = 0;
  size_t sz = align64(n);
  arena = aligned_alloc(64, sz);
  if (arena == NULL)
    return torc_dnn__set_error(TORC_ERR_OOM,
                               "onednn: out of memory for a %zu-byte reorder "
                               "and scratch arena",
                               sz);
  arena_size = sz;
  return TORC_OK;
}

void *torc_dnn__arena(size_t n) {
  return arena_reserve(n) == TORC_OK ? arena : NULL;
}

void *torc_dnn__arg_buffer(const dnn_entry *e, int arg) {
  for (int i = 0; i < e->n_args; i++)
    if (e->args[i].arg == arg)
      return e->args[i].prim ? (char *)arena + e->args[i].arena_off
                             : NULL;
  return NULL;
}

int torc_dnn__run(dnn_entry *e, void *const *ptrs) {
  int st = arena_reserve(e->arena_bytes);
  if (st != TORC_OK)
    return st;
  dnnl_exec_arg_t xa[DNN_MAX_ARGS + 1];
  int nx = 0;
  dnnl_status_t s = dnnl_success;
  for (int i = 0; i < e->n_args && s == dnnl_success; i++) {
    dnn_arg *a = &e->args[i];
    if (a->user)
      s = dnnl_memory_set_data_handle_v2(a->user, ptrs[i], torc_dnn__stream);
    if (s == dnnl_success && a->prim)
      s = dnnl_memory_set_data_handle_v2(
          a->prim, (char *)arena + a->arena_off, torc_dnn__stream);
    xa[nx++] = (dnnl_exec_arg_t){a->arg, a->prim ? a->prim : a->user};
  }
  if (s == dnnl_success && e->scratch) {
    s = dnnl_memory_set_data_handle_v2(
        e->scratch, (char *)arena + e->scratch_off, torc_dnn__stream);
    xa[nx++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->scratch};
  }
  for (int i = 0; i < e->n_args && s == dnnl_success; i++) {
    dnn_arg *a = &e->args[i];
    if (a->reorder && !a->is_out) {
      dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, a->user},
                               {DNNL_ARG_TO, a->prim}};
      s = dnnl_primitive_execute(a->reorder, torc_dnn__stream, 2, ra);
    }
  }
  if (s == dnnl_success)
    s = dnnl_primitive_execute(e->prim, torc_dnn__stream, nx, xa);
  for (int i = 0; i < e->n_args && s == dnnl_success; i++) {
    dnn_arg *a = &e->args[i];
    if (a->reorder && a->is_out) {
      dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, a->prim},
                               {DNNL_ARG_TO, a->user}};
      s = dnnl_primitive_execute(a->reorder, torc_dnn__stream, 2, ra);
    }
  }
  if (s == dnnl_success)
    s = dnnl_stream_wait(torc_dnn__stream);
  return s == dnnl_success ? TORC_OK
                           : torc_dnn__fail("run", "executing a primitive", s);
}

void torc_dnn__cache_clear(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < n_entries; i++)
    entry_free(entries[i]);
  n_entries = 0;
  free(arena);
  arena = NULL;
  arena_size = 0;
  pthread_mutex_unlock(&lock);
}
