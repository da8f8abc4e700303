/* core/alloc_blocks.c — the block allocator of devices that ask for it
 * (TORC_DEVICE_CACHING), after PyTorch's CUDA caching allocator: segments
 * taken from the device are split into blocks and merged back on free.
 *
 * Requests round up to 512 bytes. Up to 1 MiB they come from the small
 * pool, whose segments are 2 MiB; larger ones from the large pool, whose
 * segments are 20 MiB for requests under 10 MiB and the request rounded up
 * to 2 MiB from there. A request takes the smallest free block of its pool
 * that fits (the lowest address among equals) and splits it when what
 * remains is at least 512 bytes (small pool) or more than 1 MiB (large
 * pool); a freed block merges with its free neighbours. Wholly free
 * segments stay cached until torc_device_empty_cache or an out-of-memory
 * that emptying the cache may cure.
 *
 * A block's handle is its segment's handle plus its offset, which the flag
 * lets the core compute. Streams (PyTorch's rule): a segment belongs to
 * the stream it was allocated on, and its blocks serve requests made on
 * that stream only, so reuse is immediate: the stream runs work in queue
 * order, and a kernel queued after a free sees the new owner's data. A
 * block also used on other streams (record_stream) waits, after its free,
 * on events recorded on them then, checked at the next allocation.
 */
#include <stdio.h>
#include <stdlib.h>

#include "alloc_internal.h"
#include "stream_internal.h"

#define MIB ((size_t)1 << 20)
#define ROUND ((size_t)512)
#define SMALL_SEGMENT (2 * MIB)
#define LARGE_SEGMENT (20 * MIB)
#define LARGE_OWN (10 * MIB) /* from here a request gets its own segment */
#define LARGE_SPLIT (1 * MIB) /* a large block splits above this remainder */
/* A size of the pool, for the per-pool statistics. */
#define POOL_SIZE(pool) ((pool) ? TORC__SMALL_MAX + 1 : TORC__SMALL_MAX)

typedef struct blk {
  uintptr_t addr; /* the handle: segment handle + offset */
  size_t size;    /* bytes, a multiple of 512 */
  struct blk *prev, *next;   /* neighbours in the segment, by address */
  struct blk *fprev, *fnext; /* the pool's free list (free blocks only) */
  struct blk *hnext;         /* hash chain (blocks in use only) */
  struct blk *seg_next;      /* the list of segments (first blocks only) */
  int pool;                  /* 0 small, 1 large */
  int in_use;                /* 1 also while freed and waiting on events */
  const torc_stream *stream; /* the segment's stream; NULL: the default */
  void **evs;                /* the events a freed block waits on */
  int n_evs;
  struct blk *pnext;         /* the list of blocks waiting on events */
} blk;

struct torc__blocks {
  blk *free_list[2]; /* by size, then address: the first fit is the best */
  blk **hash;        /* blocks in use, by address */
  size_t n_hash, n_live;
  blk *segs;     /* every segment's first block */
  size_t in_use; /* bytes of the blocks in use */
  blk *pending;  /* freed blocks waiting on events (record_stream) */
};

static size_t round_size(size_t n) {
  return n <= ROUND ? ROUND : (n + ROUND - 1) & ~(ROUND - 1);
}

static size_t segment_size(size_t size) {
  if (size <= TORC__SMALL_MAX)
    return SMALL_SEGMENT;
  if (size < LARGE_OWN)
    return LARGE_SEGMENT;
  return (size + 2 * MIB - 1) & ~(2 * MIB - 1);
}

static size_t hash_of(const torc__blocks *bk, uintptr_t a) {
  uint64_t h = (uint64_t)(a >> 9) * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 32) & (bk->n_hash - 1);
}

torc_status torc__blocks_create(torc__cache *c) {
  c->bk = torc__calloc(1, sizeof *c->bk);
  if (c->bk)
    c->bk->hash = calloc(256, sizeof *c->bk->hash);
  if (c->bk == NULL || c->bk->hash == NULL) {
    torc__free(c->bk);
    c->bk = NULL;
    return torc_set_error(TORC_ERR_OOM,
                          "out of memory creating a device's block cache");
  }
  c->bk->n_hash = 256;
  return TORC_OK;
}

/* ---- the free lists and the hash (lock held) ---- */

/* The free lists are sorted by stream, then size, then address. */
static int free_before(const blk *a, const blk *b) {
  if (a->stream != b->stream)
    return (uintptr_t)a->stream < (uintptr_t)b->stream;
  return a->size < b->size || (a->size == b->size && a->addr < b->addr);
}

static void free_insert(torc__blocks *bk, blk *b) {
  blk **pp = &bk->free_list[b->pool], *prev = NULL;
  while (*pp && free_before(*pp, b)) {
    prev = *pp;
    pp = &(*pp)->fnext;
  }
  b->fnext = *pp;
  b->fprev = prev;
  if (*pp)
    (*pp)->fprev = b;
  *pp = b;
}

static void free_remove(torc__blocks *bk, blk *b) {
  if (b->fprev)
    b->fprev->fnext = b->fnext;
  else
    bk->free_list[b->pool] = b->fnext;
  if (b->fnext)
    b->fnext->fprev = b->fprev;
  b->fprev = b->fnext = NULL;
}

static void hash_insert(torc__blocks *bk, blk *b) {
  if (bk->n_live >= 2 * bk->n_hash) { /* grow; when that fails, chain on */
    size_t n = bk->n_hash * 2;
    blk **h = calloc(n, sizeof *h);
    if (h) {
      blk **old = bk->hash;
      size_t old_n = bk->n_hash;
      bk->hash = h;
      bk->n_hash = n;
      for (size_t i = 0; i < old_n; i++)
        for (blk *e = old[i], *next; e; e = next) {
          next = e->hnext;
          size_t k = hash_of(bk, e->addr);
          e->hnext = h[k];
          h[k] = e;
        }
      free(old);
    }
  }
  size_t k = hash_of(bk, b->addr);
  b->hnext = bk->hash[k];
  bk->hash[k] = b;
  bk->n_live++;
}

static blk *hash_remove(torc__blocks *bk, uintptr_t a) {
  for (blk **pp = &bk->hash[hash_of(bk, a)]; *pp; pp = &(*pp)->hnext)
    if ((*pp)->addr == a) {
      blk *b = *pp;
      *pp = b->hnext;
      b->hnext = NULL;
      bk->n_live--;
      return b;
    }
  return NULL;
}

/* ---- segments (lock held) ---- */

static void segment_free(torc__devtype *d, int index, torc__cache *c, blk *b) {
  blk **pp = &c->bk->segs;
  while (*pp != b)
    pp = &(*pp)->seg_next;
  *pp = b->seg_next;
  d->ops.free(d->ops.user, index, (void *)b->addr);
  c->st.os_frees++;
  torc__mstat_sub(c->resv, POOL_SIZE(b->pool), b->size);
  free(b);
}

static void process_pending(torc__devtype *d, int index, torc__cache *c);

size_t torc__blocks_release(torc__devtype *d, int index, torc__cache *c) {
  process_pending(d, index, c);
  size_t freed = 0;
  for (blk *b = c->bk->segs, *next; b; b = next) {
    next = b->seg_next;
    if (!b->in_use && b->next == NULL) { /* the whole segment is free */
      free_remove(c->bk, b);
      freed += b->size;
      segment_free(d, index, c, b);
    }
  }
  return freed;
}

void torc__blocks_collect(torc__devtype *d, int index, torc__cache *c) {
  if (c->bk != NULL && c->bk->pending != NULL)
    process_pending(d, index, c);
}

void torc__blocks_destroy(torc__devtype *d, int index, torc__cache *c) {
  if (c->bk == NULL)
    return;
  for (blk *b = c->bk->pending; b; b = b->pnext) {
    for (int i = 0; i < b->n_evs; i++)
      d->ops.event_free(d->ops.user, index, b->evs[i]);
    torc__free(b->evs);
  }
  for (blk *s = c->bk->segs, *next; s; s = next) {
    next = s->seg_next;
    d->ops.free(d->ops.user, index, (void *)s->addr);
    c->st.os_frees++;
    for (blk *b = s, *bn; b; b = bn) {
      bn = b->next;
      free(b);
    }
  }
  free(c->bk->hash);
  torc__free(c->bk);
  c->bk = NULL;
}

size_t torc__blocks_in_use(const torc__cache *c) {
  return c->bk ? c->bk->in_use : 0;
}

/* ---- allocation ---- */

/* The out-of-memory error after the cache was emptied and the device
 * still refused: what was asked, what torc holds, what the device has,
 * what to do, and the device's own message. Lock held. */
static void oom_error(torc__devtype *d, int index, torc__cache *c,
                      size_t nbytes) {
  c->oom_count++;
  char said[512];
  snprintf(said, sizeof said, "%s", torc_last_error());
  size_t allocated = c->alloc[0].cur;
  size_t held_free = c->resv[0].cur - c->bk->in_use;
  size_t dev_free = 0, dev_total = 0;
  int have_total =
      d->ops.mem_info &&
      d->ops.mem_info(d->ops.user, index, &dev_free, &dev_total) == TORC_OK;
  char want[32], a[32], f[32], t[32], total[96] = "";
  torc__mem_human(nbytes, want, sizeof want);
  torc__mem_human(allocated, a, sizeof a);
  torc__mem_human(held_free, f, sizeof f);
  if (have_total) {
    torc__mem_human(dev_total, t, sizeof t);
    snprintf(total, sizeof total, "; the device has %s in total", t);
  }
  const char *fix;
  if (have_total && nbytes > dev_total)
    fix = "the request alone is larger than the device: lower the batch "
          "size or the model's size";
  else if (held_free >= round_size(nbytes))
    fix = "the cache's free memory would hold the request but lies between "
          "live tensors (fragmentation), so emptying the cache (done "
          "already) cannot return it: free tensors you no longer need or "
          "lower the batch size";
  else
    fix = "emptying the cache (done already) did not make room: lower the "
          "batch size or free tensors you no longer need";
  torc_set_error(TORC_ERR_OOM,
                 "out of memory on %s:%d: cannot allocate %zu bytes (%s); "
                 "torc has %zu bytes (%s) allocated and %zu bytes (%s) "
                 "reserved but free%s; %s. The device said: %s",
                 d->name, index, nbytes, want, allocated, a, held_free, f,
                 total, fix, *said ? said : "out of memory");
}

/* One more call of the device's alloc (a retry), unless the fault
 * injector (torc/testing.h) says this attempt fails. */
static torc_status segment_alloc(torc__devtype *d, int index, size_t seg,
                                 void **h) {
  if (torc__alloc_fault())
    return torc_set_error(TORC_ERR_OOM,
                          "out of memory allocating %zu bytes on %s:%d "
                          "(an injected failure)",
                          seg, d->name, index);
  return (torc_status)d->ops.alloc(d->ops.user, index, seg, h);
}

/* A new segment for a block of `size`, as the first block of its
 * segment, free and on no list; NULL with the error set. When the device
 * refuses the segment (or `injected` says the request's attempt failed),
 * the cache's free segments go back and it is asked again, then for just
 * the block (a device smaller than a segment still works, uncached in
 * effect). The lock is not held. */
static blk *segment_new(torc__devtype *d, int index, torc__cache *c,
                        size_t nbytes, size_t size, int injected,
                        const torc_stream *stream) {
  size_t seg = segment_size(size);
  void *h = NULL;
  torc_status st =
      injected ? torc_set_error(TORC_ERR_OOM,
                                "out of memory allocating %zu bytes on %s:%d "
                                "(an injected failure)",
                                seg, d->name, index)
               : (torc_status)d->ops.alloc(d->ops.user, index, seg, &h);
  if (st == TORC_ERR_OOM) {
    pthread_mutex_lock(&c->lock);
    size_t freed = torc__blocks_release(d, index, c);
    pthread_mutex_unlock(&c->lock);
    if (freed > 0) {
      torc_clear_error();
      st = segment_alloc(d, index, seg, &h);
    }
    if (st == TORC_ERR_OOM && seg > size) {
      torc_clear_error();
      seg = size;
      st = segment_alloc(d, index, seg, &h);
    }
  }
  pthread_mutex_lock(&c->lock);
  if (st != TORC_OK) {
    if (st == TORC_ERR_OOM)
      oom_error(d, index, c, nbytes);
    pthread_mutex_unlock(&c->lock);
    return NULL;
  }
  /* Block records (and the hash) are bookkeeping of the cache, as pooled
   * objects are: plain calloc, so the live count of torc/testing.h does not
   * depend on how the cache's segments happen to be split. */
  blk *b = calloc(1, sizeof *b);
  if (b == NULL) {
    c->oom_count++;
    pthread_mutex_unlock(&c->lock);
    d->ops.free(d->ops.user, index, h);
    torc_set_error(TORC_ERR_OOM, "out of host memory for a block record");
    return NULL;
  }
  b->addr = (uintptr_t)h;
  b->size = seg;
  b->pool = size > TORC__SMALL_MAX;
  b->stream = stream;
  b->seg_next = c->bk->segs;
  c->bk->segs = b;
  c->st.os_allocs++;
  torc__mstat_add(c->resv, POOL_SIZE(b->pool), seg);
  pthread_mutex_unlock(&c->lock);
  return b;
}

torc_status torc__blocks_alloc(torc__devtype *d, int index, torc__cache *c,
                               size_t nbytes, void **out) {
  size_t size = round_size(nbytes);
  int pool = size > TORC__SMALL_MAX;
  /* One attempt of the fault injector per request, cached or not: an
   * injected failure acts as the device's out-of-memory. */
  int injected = torc__alloc_fault();
  const torc_stream *stream = torc__stream_current(d->id, index);
  if (stream && stream->is_default)
    stream = NULL;
  pthread_mutex_lock(&c->lock);
  torc__blocks *bk = c->bk;
  if (bk->pending)
    process_pending(d, index, c);
  blk *b = injected ? NULL : bk->free_list[pool];
  while (b && (b->stream != stream || b->size < size))
    b = b->fnext;
  if (b) {
    free_remove(bk, b);
    c->st.cache_hits++;
  } else {
    pthread_mutex_unlock(&c->lock);
    if ((b = segment_new(d, index, c, nbytes, size, injected, stream)) ==
        NULL)
      return torc_last_status();
    pthread_mutex_lock(&c->lock);
  }
  size_t rest = b->size - size;
  if (rest >= (pool ? LARGE_SPLIT + 1 : ROUND)) {
    blk *n = calloc(1, sizeof *n); /* none: the block stays whole */
    if (n) {
      n->addr = b->addr + size;
      n->size = rest;
      n->pool = pool;
      n->stream = b->stream;
      n->prev = b;
      n->next = b->next;
      if (b->next)
        b->next->prev = n;
      b->next = n;
      b->size = size;
      free_insert(bk, n);
    }
  }
  b->in_use = 1;
  hash_insert(bk, b);
  bk->in_use += b->size;
  torc__mstat_add(c->alloc, nbytes, nbytes);
  pthread_mutex_unlock(&c->lock);
  *out = (void *)b->addr;
  return TORC_OK;
}

/* Makes a block free: merges it with its free neighbours and lists it.
 * Lock held. */
static void release_block(torc__blocks *bk, blk *b) {
  b->in_use = 0;
  bk->in_use -= b->size;
  blk *p = b->prev, *n = b->next;
  if (p && !p->in_use) { /* merge into the free block before */
    free_remove(bk, p);
    p->size += b->size;
    p->next = n;
    if (n)
      n->prev = p;
    free(b);
    b = p;
  }
  if (n && !n->in_use) { /* and absorb the free block after */
    free_remove(bk, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next)
      n->next->prev = b;
    free(n);
  }
  free_insert(bk, b);
}

/* Frees the waiting blocks whose events all completed (PyTorch's
 * process_events). Lock held. */
static void process_pending(torc__devtype *d, int index, torc__cache *c) {
  torc__blocks *bk = c->bk;
  for (blk **pp = &bk->pending; *pp;) {
    blk *b = *pp;
    while (b->n_evs > 0) {
      void *ev = b->evs[b->n_evs - 1];
      int rc = d->ops.event_query(d->ops.user, index, ev);
      if (rc == TORC_EVENT_NOT_READY)
        break;
      if (rc != TORC_OK) /* an asynchronous error: reported at a sync */
        torc_clear_error();
      d->ops.event_free(d->ops.user, index, ev);
      b->n_evs--;
    }
    if (b->n_evs > 0) {
      pp = &b->pnext;
      continue;
    }
    *pp = b->pnext;
    b->pnext = NULL;
    torc__free(b->evs);
    b->evs = NULL;
    release_block(bk, b);
  }
}

/* The events guarding block b, freed after use on the streams `used`
 * (other than its own); 0 events when none is needed. Returns -1 when an
 * event could not be made (the caller then waits for the device). Lock
 * not held. */
static int guard_events(torc__devtype *d, int index, const torc_stream *own,
                        struct torc_stream *const *used, int n_used,
                        void ***evs_out) {
  *evs_out = NULL;
  if (n_used == 0 || !torc__has_streams(d))
    return 0;
  void **evs = torc__calloc((size_t)n_used, sizeof *evs);
  if (evs == NULL)
    return -1;
  int n = 0;
  for (int i = 0; i < n_used; i++) {
    const torc_stream *s = used[i];
    /* A freed stream's work ran at its free; its own stream needs none. */
    if (s == own || (s && !s->is_default && s->h == NULL))
      continue;
    if (torc__stream_guard(d, index, torc__stream_handle(s), &evs[n]) !=
        TORC_OK) {
      while (n-- > 0)
        d->ops.event_free(d->ops.user, index, evs[n]);
      torc__free(evs);
      return -1;
    }
    n++;
  }
  if (n == 0)
    torc__free(evs);
  else
    *evs_out = evs;
  return n;
}

void torc__blocks_free(torc__devtype *d, int index, torc__cache *c,
                       void *ptr, size_t nbytes,
                       struct torc_stream *const *used, int n_used) {
  void **evs = NULL;
  int n_evs = 0;
  if (n_used > 0) {
    pthread_mutex_lock(&c->lock);
    blk *b = NULL;
    for (b = c->bk->hash[hash_of(c->bk, (uintptr_t)ptr)]; b; b = b->hnext)
      if (b->addr == (uintptr_t)ptr)
        break;
    const torc_stream *own = b ? b->stream : NULL;
    pthread_mutex_unlock(&c->lock);
    n_evs = guard_events(d, index, own, used, n_used, &evs);
    if (n_evs < 0) { /* no events: wait for the device instead */
      torc_clear_error();
      d->ops.synchronize(d->ops.user, index);
      torc_clear_error();
      n_evs = 0;
    }
  }
  pthread_mutex_lock(&c->lock);
  torc__blocks *bk = c->bk;
  blk *b = hash_remove(bk, (uintptr_t)ptr);
  if (b == NULL) {
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < n_evs; i++)
      d->ops.event_free(d->ops.user, index, evs[i]);
    torc__free(evs);
    torc_logf(TORC_LOG_ERROR,
              "%s:%d: free of %p, which is no block of the memory cache "
              "(double free?); ignored",
              d->name, index, ptr);
    return;
  }
  torc__mstat_sub(c->alloc, nbytes, nbytes);
  if (n_evs > 0) { /* reused once the streams it was used on are past it */
    b->evs = evs;
    b->n_evs = n_evs;
    b->pnext = bk->pending;
    bk->pending = b;
  } else {
    release_block(bk, b);
  }
  pthread_mutex_unlock(&c->lock);
}

void torc__blocks_retag(torc__cache *c, const struct torc_stream *s) {
  torc__blocks *bk = c->bk;
  for (blk *seg = bk->segs; seg; seg = seg->seg_next) {
    if (seg->stream != s)
      continue;
    for (blk *b = seg; b; b = b->next) {
      int listed = !b->in_use;
      if (listed)
        free_remove(bk, b);
      b->stream = NULL;
      if (listed)
        free_insert(bk, b);
    }
  }
}
