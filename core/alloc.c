/* core/alloc.c — the caching allocator between tensor storages and a
 * device's alloc/free: a freed block goes to a size-class bin of its device
 * and the next request of that class takes it back, so the steady state of
 * a training loop (the same activations, gradients and temporaries every
 * step) takes no memory from the OS and touches no fresh pages.
 *
 * Size classes: multiples of 64 bytes up to 1 KiB, then four classes per
 * power of two (at most 25% slack). A request is served from its own class
 * only. When the device says out-of-memory, the cache is emptied and the
 * request tried once more. The cache is per device (type and index) with
 * its own lock, so loader threads allocating batches and the training
 * thread freeing them share it safely.
 *
 * Every request counts as one allocation attempt of the fault injector
 * (torc/testing.h), a cache hit too: an injected failure acts as the
 * device's out-of-memory, so tests reach the empty-and-retry path.
 *
 * Blocks freed while the thread traces a forward (torc_trace) are not
 * cached but given back. Caching is on for the built-in cpu device; a
 * plugin device that sets TORC_DEVICE_CACHING gets the block allocator of
 * alloc_blocks.c instead, and any other device is called for every
 * storage. TORC_NO_CACHE=1 (or a sanitizer build, where a reused block
 * would hide a use-after-free) turns caching off. Every device keeps the
 * statistics of torc_device_memory_stats2 (allocated, reserved, their
 * peaks, counts), here too.
 */
#include <stdio.h>
#include <stdlib.h>

#include "alloc_internal.h"

enum { N_SMALL = TORC__N_SMALL, N_BINS = TORC__N_BINS };
typedef torc__bin bin;

/* The class of a request: its rounded size and its bin (-1: too large to
 * cache, served straight from the device). */
static size_t size_class(size_t nbytes, int *binp) {
  if (nbytes <= 1024) {
    size_t s = nbytes ? (nbytes + 63) & ~(size_t)63 : 64;
    *binp = (int)(s / 64) - 1;
    return s;
  }
  int e = 63 - __builtin_clzll((unsigned long long)(nbytes - 1)); /* >= 10 */
  size_t step = (size_t)1 << (e - 2);
  size_t s = (nbytes + step - 1) & ~(step - 1); /* 2^e + k * step, k 1..4 */
  int k = (int)(s >> (e - 2)) - 4;
  int b = N_SMALL + (e - 10) * 4 + (k - 1);
  *binp = b < N_BINS ? b : -1;
  return s;
}

/* The size of the blocks of bin b (the inverse of size_class). */
static size_t bin_size(int b) {
  if (b < N_SMALL)
    return (size_t)(b + 1) * 64;
  int e = 10 + (b - N_SMALL) / 4, k = (b - N_SMALL) % 4 + 1;
  return ((size_t)1 << e) + (size_t)k * ((size_t)1 << (e - 2));
}

static int caching_enabled(void) {
#ifdef TORC_SANITIZE
  return 0;
#else
  const char *e = getenv("TORC_NO_CACHE");
  return !(e && *e && strcmp(e, "0") != 0);
#endif
}

torc_status torc__cache_create(torc__devtype *d) {
  if (d->count <= 0)
    return TORC_OK;
  int mode = !caching_enabled()                      ? TORC__CACHE_NONE
             : d->owner == NULL                      ? TORC__CACHE_BINS
             : (d->ops.flags & TORC_DEVICE_CACHING) ? TORC__CACHE_BLOCKS
                                                     : TORC__CACHE_NONE;
  d->cache = torc__calloc((size_t)d->count, sizeof *d->cache);
  if (d->cache == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory creating the memory "
                                        "cache of device %s",
                          d->name);
  for (int i = 0; i < d->count; i++) {
    d->cache[i].mode = mode;
    if (mode == TORC__CACHE_BLOCKS && torc__blocks_create(&d->cache[i])) {
      while (i-- > 0)
        torc__blocks_destroy(d, i, &d->cache[i]);
      torc__free(d->cache);
      d->cache = NULL;
      return torc_last_status();
    }
  }
  for (int i = 0; i < d->count; i++)
    pthread_mutex_init(&d->cache[i].lock, NULL);
  return TORC_OK;
}

/* Hands every cached block of `c` back to the device. Lock held. */
static void flush_locked(torc__devtype *d, int index, torc__cache *c) {
  if (c->mode == TORC__CACHE_BLOCKS) {
    torc__blocks_release(d, index, c);
    return;
  }
  for (int b = 0; b < N_BINS; b++) {
    bin *bn = &c->bins[b];
    for (int i = 0; i < bn->n; i++) {
      d->ops.free(d->ops.user, index, bn->ptr[i]);
      c->st.os_frees++;
      torc__mstat_sub(c->resv, bin_size(b), bin_size(b));
    }
    bn->n = 0;
  }
  c->cached = 0;
}

void torc__cache_destroy(torc__devtype *d) {
  if (d->cache == NULL)
    return;
  for (int i = 0; i < d->count; i++) {
    torc__cache *c = &d->cache[i];
    if (c->mode == TORC__CACHE_BLOCKS)
      torc__blocks_destroy(d, i, c);
    else
      flush_locked(d, i, c);
    for (int b = 0; b < N_BINS; b++)
      torc__free(c->bins[b].ptr);
    pthread_mutex_destroy(&c->lock);
  }
  torc__free(d->cache);
  d->cache = NULL;
}

/* Asks the device for a block, unless the fault injector (torc/testing.h)
 * says this attempt fails: then the device's out-of-memory is simulated. */
static torc_status device_alloc(torc__devtype *d, int index, size_t nbytes,
                                void **out) {
  if (torc__alloc_fault())
    return torc_set_error(TORC_ERR_OOM,
                          "out of memory allocating %zu bytes on %s:%d "
                          "(an injected failure)",
                          nbytes, d->name, index);
  return (torc_status)d->ops.alloc(d->ops.user, index, nbytes, out);
}

/* Rewrites the error of an allocation the device refused (uncached, or
 * with size classes after the cache was given back when it held anything): what was asked, what
 * torc holds, what the cache gave back, what to do, and the device's own
 * words. Returns TORC_ERR_OOM. */
static torc_status oom_error(torc__devtype *d, int index, torc__cache *c,
                             size_t nbytes, size_t gave_back) {
  char said[512];
  snprintf(said, sizeof said, "%s", torc_last_error());
  pthread_mutex_lock(&c->lock);
  size_t allocated = c->alloc[0].cur;
  pthread_mutex_unlock(&c->lock);
  size_t dev_free = 0, dev_total = 0;
  char t[32], total[64] = "";
  if (d->ops.mem_info &&
      d->ops.mem_info(d->ops.user, index, &dev_free, &dev_total) == TORC_OK) {
    torc__mem_human(dev_total, t, sizeof t);
    snprintf(total, sizeof total, "; the device has %s in total", t);
  }
  char want[32], a[32], g[32], held[96];
  torc__mem_human(nbytes, want, sizeof want);
  torc__mem_human(allocated, a, sizeof a);
  torc__mem_human(gave_back, g, sizeof g);
  if (gave_back)
    snprintf(held, sizeof held,
             "gave its %zu cached bytes (%s) back before trying again",
             gave_back, g);
  else
    snprintf(held, sizeof held, "held no cached memory to give back");
  return torc_set_error(
      TORC_ERR_OOM,
      "out of memory on %s:%d: cannot allocate %zu bytes (%s); torc has "
      "%zu bytes (%s) allocated and %s%s; lower the batch size or the "
      "model's size, or free tensors you no longer need. The device said: "
      "%s",
      d->name, index, nbytes, want, allocated, a, held, total,
      *said ? said : "out of memory");
}

/* An uncached device: every storage is one call of the device's alloc,
 * counted in the statistics. */
static torc_status uncached_alloc(torc__devtype *d, int index, torc__cache *c,
                                  size_t nbytes, void **out) {
  torc_status st = device_alloc(d, index, nbytes, out);
  pthread_mutex_lock(&c->lock);
  if (st == TORC_OK) {
    torc__mstat_add(c->alloc, nbytes, nbytes);
    torc__mstat_add(c->resv, nbytes, nbytes);
  } else if (st == TORC_ERR_OOM) {
    c->oom_count++;
  }
  pthread_mutex_unlock(&c->lock);
  return st == TORC_ERR_OOM ? oom_error(d, index, c, nbytes, 0) : st;
}

torc_status torc__mem_alloc(torc__devtype *d, int index, size_t nbytes,
                            void **out) {
  torc__cache *c = d->cache ? &d->cache[index] : NULL;
  if (c == NULL)
    return device_alloc(d, index, nbytes, out);
  if (c->mode == TORC__CACHE_BLOCKS)
    return torc__blocks_alloc(d, index, c, nbytes, out);
  if (c->mode == TORC__CACHE_NONE)
    return uncached_alloc(d, index, c, nbytes, out);
  int b;
  size_t size = size_class(nbytes, &b);
  /* One attempt per request, cached or not; an injected failure acts as
   * the device's out-of-memory, so the retry below runs. */
  int injected = torc__alloc_fault();
  pthread_mutex_lock(&c->lock);
  if (!injected && b >= 0 && c->bins[b].n > 0) {
    *out = c->bins[b].ptr[--c->bins[b].n];
    c->cached -= size;
    c->st.cache_hits++;
    torc__mstat_add(c->alloc, nbytes, nbytes);
    pthread_mutex_unlock(&c->lock);
    return TORC_OK;
  }
  pthread_mutex_unlock(&c->lock);
  torc_status st =
      injected ? torc_set_error(TORC_ERR_OOM,
                                "out of memory allocating %zu bytes on %s:%d "
                                "(an injected failure)",
                                size, d->name, index)
               : (torc_status)d->ops.alloc(d->ops.user, index, size, out);
  if (st != TORC_OK) { /* out of memory: give the cache back, try again */
    pthread_mutex_lock(&c->lock);
    size_t had = c->cached;
    flush_locked(d, index, c);
    if (had == 0)
      c->oom_count++;
    pthread_mutex_unlock(&c->lock);
    if (had == 0)
      return st == TORC_ERR_OOM ? oom_error(d, index, c, size, 0) : st;
    torc_clear_error();
    if ((st = device_alloc(d, index, size, out))) {
      pthread_mutex_lock(&c->lock);
      c->oom_count++;
      pthread_mutex_unlock(&c->lock);
      return st == TORC_ERR_OOM ? oom_error(d, index, c, size, had) : st;
    }
  }
  pthread_mutex_lock(&c->lock); /* a block taken from the device */
  c->st.os_allocs++;
  torc__mstat_add(c->resv, size, size);
  torc__mstat_add(c->alloc, nbytes, nbytes);
  pthread_mutex_unlock(&c->lock);
  return TORC_OK;
}

void torc__mem_free(torc__devtype *d, int index, void *ptr, size_t nbytes) {
  torc__mem_free_on(d, index, ptr, nbytes, NULL, 0);
}

void torc__mem_free_on(torc__devtype *d, int index, void *ptr, size_t nbytes,
                       struct torc_stream *const *used, int n_used) {
  torc__cache *c = d->cache ? &d->cache[index] : NULL;
  if (c && c->mode == TORC__CACHE_BLOCKS) {
    torc__blocks_free(d, index, c, ptr, nbytes, used, n_used);
    return;
  }
  /* Otherwise the device's free waits for every stream's queued work. */
  if (c && c->mode == TORC__CACHE_NONE) {
    pthread_mutex_lock(&c->lock);
    torc__mstat_sub(c->alloc, nbytes, nbytes);
    torc__mstat_sub(c->resv, nbytes, nbytes);
    pthread_mutex_unlock(&c->lock);
    d->ops.free(d->ops.user, index, ptr);
    return;
  }
  /* A block a trace frees goes back too: a trace runs its forward once,
   * so blocks of its batch's activations would only sit in the cache (an
   * evaluation batch of a CNN holds hundreds of MB of them). */
  int b = -1;
  size_t size = c ? size_class(nbytes, &b) : 0;
  if (c == NULL || b < 0 || torc__trace_on != NULL) {
    if (c) {
      pthread_mutex_lock(&c->lock);
      c->st.os_frees++;
      torc__mstat_sub(c->alloc, nbytes, nbytes);
      torc__mstat_sub(c->resv, size, size);
      pthread_mutex_unlock(&c->lock);
    }
    d->ops.free(d->ops.user, index, ptr);
    return;
  }
  pthread_mutex_lock(&c->lock);
  torc__mstat_sub(c->alloc, nbytes, nbytes);
  bin *bn = &c->bins[b];
  if (bn->n == bn->cap) {
    int cap = bn->cap ? bn->cap * 2 : 8;
    void **p = torc__realloc(bn->ptr, (size_t)cap * sizeof *p);
    if (p == NULL) { /* cannot remember it: free it */
      c->st.os_frees++;
      torc__mstat_sub(c->resv, size, size);
      pthread_mutex_unlock(&c->lock);
      d->ops.free(d->ops.user, index, ptr);
      return;
    }
    bn->ptr = p;
    bn->cap = cap;
  }
  bn->ptr[bn->n++] = ptr;
  c->cached += size;
  pthread_mutex_unlock(&c->lock);
}

torc_status torc_device_empty_cache(torc_device dev) {
  torc_status st = torc__device_check(dev, "torc_device_empty_cache");
  if (st)
    return st;
  torc__devtype *d = torc__devtype_get(dev.type);
  if (d->cache) {
    torc__cache *c = &d->cache[dev.index];
    pthread_mutex_lock(&c->lock);
    flush_locked(d, dev.index, c);
    pthread_mutex_unlock(&c->lock);
  }
  return TORC_OK;
}

torc_status torc_device_memory_stats(torc_device dev, torc_memory_stats *out) {
  torc_status st = torc__device_check(dev, "torc_device_memory_stats");
  if (st)
    return st;
  if (out == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_device_memory_stats: out is NULL");
  torc__devtype *d = torc__devtype_get(dev.type);
  memset(out, 0, sizeof *out);
  if (d->cache && d->cache[dev.index].mode != TORC__CACHE_NONE) {
    torc__cache *c = &d->cache[dev.index];
    pthread_mutex_lock(&c->lock);
    *out = c->st;
    out->cached = c->mode == TORC__CACHE_BLOCKS
                      ? c->resv[0].cur - torc__blocks_in_use(c)
                      : c->cached;
    pthread_mutex_unlock(&c->lock);
    out->caching = 1;
  }
  out->allocated = d->allocated[dev.index];
  return TORC_OK;
}

/* ---- memory statistics, version 2 ---- */

static void copy_stat(torc_memory_stat *to, const torc__mstat *from) {
  to->current = from->cur;
  to->peak = from->peak;
  to->allocs = from->allocs;
  to->frees = from->frees;
}

torc_status torc_device_memory_stats2(torc_device dev, torc_memory_stats2 *out) {
  torc_status st = torc__device_check(dev, "torc_device_memory_stats2");
  if (st)
    return st;
  if (out == NULL || out->struct_size < offsetof(torc_memory_stats2, caching) +
                                            sizeof out->caching)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_device_memory_stats2: out is NULL or its "
                          "struct_size (%zu) is too small; set it to "
                          "sizeof(torc_memory_stats2)",
                          out ? out->struct_size : (size_t)0);
  torc__devtype *d = torc__devtype_get(dev.type);
  torc_memory_stats2 s;
  memset(&s, 0, sizeof s);
  s.struct_size = out->struct_size;
  if (d->cache) {
    torc__cache *c = &d->cache[dev.index];
    pthread_mutex_lock(&c->lock);
    if (c->mode == TORC__CACHE_BLOCKS) /* blocks whose events completed */
      torc__blocks_collect(d, dev.index, c);
    s.caching = c->mode;
    s.allocated = c->alloc[0].cur;
    s.peak_allocated = c->alloc[0].peak;
    s.reserved = c->resv[0].cur;
    s.peak_reserved = c->resv[0].peak;
    s.alloc_count = c->alloc[0].allocs;
    s.free_count = c->alloc[0].frees;
    s.segment_allocs = c->resv[0].allocs;
    s.segment_frees = c->resv[0].frees;
    s.cache_hits = c->st.cache_hits;
    s.oom_count = c->oom_count;
    s.fragmentation = s.reserved > s.allocated ? s.reserved - s.allocated : 0;
    for (int p = 0; p < 2; p++) {
      copy_stat(&s.pool_allocated[p], &c->alloc[1 + p]);
      copy_stat(&s.pool_reserved[p], &c->resv[1 + p]);
    }
    pthread_mutex_unlock(&c->lock);
  } else { /* no statistics kept: what is live */
    s.allocated = s.reserved = d->allocated[dev.index];
  }
  if (d->ops.mem_info &&
      d->ops.mem_info(d->ops.user, dev.index, &s.device_free,
                      &s.device_total) != TORC_OK) {
    torc_clear_error();
    s.device_free = s.device_total = 0;
  }
  size_t n = out->struct_size < sizeof s ? out->struct_size : sizeof s;
  memcpy(out, &s, n);
  return TORC_OK;
}

torc_status torc_reset_peak_memory_stats(torc_device dev) {
  torc_status st = torc__device_check(dev, "torc_reset_peak_memory_stats");
  if (st)
    return st;
  torc__devtype *d = torc__devtype_get(dev.type);
  if (d->cache) {
    torc__cache *c = &d->cache[dev.index];
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < 3; i++) {
      c->alloc[i].peak = c->alloc[i].cur;
      c->resv[i].peak = c->resv[i].cur;
    }
    pthread_mutex_unlock(&c->lock);
  }
  return TORC_OK;
}

void torc__mem_human(size_t n, char *buf, size_t size) {
  if (n < 1024)
    snprintf(buf, size, "%zu B", n);
  else if (n < ((size_t)1 << 20))
    snprintf(buf, size, "%.1f KiB", (double)n / 1024);
  else if (n < ((size_t)1 << 30))
    snprintf(buf, size, "%.1f MiB", (double)n / (1 << 20));
  else
    snprintf(buf, size, "%.2f GiB", (double)n / (1 << 30));
}

/* One row of the summary table. */
static int summary_row(char *buf, size_t size, const char *name,
                       const torc_memory_stat *m) {
  char cur[32], peak[32];
  torc__mem_human(m->current, cur, sizeof cur);
  torc__mem_human(m->peak, peak, sizeof peak);
  return snprintf(buf, size, "  %-22s %12s %12s %10llu %10llu\n", name, cur,
                  peak, (unsigned long long)m->allocs,
                  (unsigned long long)m->frees);
}

char *torc_memory_summary(torc_device dev) {
  torc_memory_stats2 s = {.struct_size = sizeof s};
  if (torc_device_memory_stats2(dev, &s) != TORC_OK)
    return NULL;
  static const char *const modes[] = {"none", "size classes",
                                      "blocks (split and merged)"};
  char name[64], t1[32], t2[32], t3[32];
  torc_device_str(dev, name, sizeof name);
  torc_memory_stat all_a = {s.allocated, s.peak_allocated, s.alloc_count,
                            s.free_count};
  torc_memory_stat all_r = {s.reserved, s.peak_reserved, s.segment_allocs,
                            s.segment_frees};
  size_t cap = 2048, n = 0;
  char *buf = torc__malloc(cap);
  if (buf == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory writing a memory summary");
    return NULL;
  }
  torc__mem_human(s.fragmentation, t1, sizeof t1);
  n += (size_t)snprintf(buf + n, cap - n,
                        "memory summary of %s (caching: %s)\n"
                        "  %-22s %12s %12s %10s %10s\n",
                        name, modes[s.caching], "", "current", "peak",
                        "allocs", "frees");
  n += (size_t)summary_row(buf + n, cap - n, "allocated", &all_a);
  n += (size_t)summary_row(buf + n, cap - n, "  small pool (<= 1 MiB)",
                           &s.pool_allocated[0]);
  n += (size_t)summary_row(buf + n, cap - n, "  large pool",
                           &s.pool_allocated[1]);
  n += (size_t)summary_row(buf + n, cap - n, "reserved", &all_r);
  n += (size_t)summary_row(buf + n, cap - n, "  small pool",
                           &s.pool_reserved[0]);
  n += (size_t)summary_row(buf + n, cap - n, "  large pool",
                           &s.pool_reserved[1]);
  n += (size_t)snprintf(buf + n, cap - n,
                        "  reserved - allocated: %s; cache hits: %llu; "
                        "out-of-memory errors: %llu\n",
                        t1, (unsigned long long)s.cache_hits,
                        (unsigned long long)s.oom_count);
  if (s.device_total) {
    torc__mem_human(s.device_total, t2, sizeof t2);
    torc__mem_human(s.device_free, t3, sizeof t3);
    snprintf(buf + n, cap - n, "  device: %s total, %s free\n", t2, t3);
  }
  return buf;
}

/* ---- object pools: tensor headers, storages, autograd nodes ----
 *
 * Every op creates a tensor and a storage header, and under autograd a
 * node; glibc's per-thread cache holds only 7 blocks of a size, so a
 * step's worth of them went through its slow path. Each thread keeps a
 * short free list per kind instead (objects freed on another thread join
 * that thread's list); a thread's lists are freed when it exits, the
 * calling thread's by torc_shutdown. */

enum { POOL_KINDS = 3, POOL_MAX = 512 };

typedef struct pool_list {
  void *head; /* freed objects, linked through their first word */
  int n;
} pool_list;

static _Thread_local pool_list tl_pool[POOL_KINDS];
static _Thread_local int tl_pool_registered;
static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

/* Pooled objects are malloc'ed directly: an object in a pool is not live
 * (torc__alloc_track counts it out when pooled and in when taken), so the
 * live count of torc/testing.h does not depend on what the pools hold. */
static void pool_drain(pool_list *lists) {
  for (int k = 0; k < POOL_KINDS; k++) {
    while (lists[k].head) {
      void *p = lists[k].head;
      lists[k].head = *(void **)p;
      free(p);
    }
    lists[k].n = 0;
  }
}

static void pool_thread_exit(void *lists) { pool_drain(lists); }
static void pool_key_create(void) {
  pthread_key_create(&pool_key, pool_thread_exit);
}

void torc__pool_drain(void) { pool_drain(tl_pool); }

void *torc__obj_alloc(int kind, size_t size) {
  if (torc__alloc_fault()) /* a pooled object is an allocation attempt too */
    return NULL;
  pool_list *l = &tl_pool[kind];
  void *p = l->head;
  if (p) {
    l->head = *(void **)p;
    l->n--;
    memset(p, 0, size);
  } else if ((p = calloc(1, size)) == NULL) {
    return NULL;
  }
  torc__alloc_track(1);
  return p;
}

void torc__obj_free(int kind, void *p) {
  if (p == NULL)
    return;
  torc__alloc_track(-1);
  /* Off where the cache is (TORC_NO_CACHE, sanitizers): a pooled header
   * would hide a use-after-free or double free of a tensor from them. */
  static _Atomic int pooling = -1;
  int on = atomic_load_explicit(&pooling, memory_order_relaxed);
  if (on < 0)
    atomic_store(&pooling, on = caching_enabled());
  pool_list *l = &tl_pool[kind];
  if (!on || l->n >= POOL_MAX) {
    free(p);
    return;
  }
  if (!tl_pool_registered) {
    pthread_once(&pool_once, pool_key_create);
    pthread_setspecific(pool_key, tl_pool);
    tl_pool_registered = 1;
  }
  *(void **)p = l->head;
  l->head = p;
  l->n++;
}
