/* core/alloc_internal.h — what the allocator's two files share: the
 * per-device cache record with its statistics (alloc.c) and the block
 * allocator for devices that ask for it (alloc_blocks.c). */
#ifndef TORC_ALLOC_INTERNAL_H
#define TORC_ALLOC_INTERNAL_H

#include "internal.h"

/* How a device's memory is cached: not at all (a device without
 * TORC_DEVICE_CACHING, or caching turned off), by size class (the cpu
 * device), or in split and merged blocks (alloc_blocks.c). */
enum { TORC__CACHE_NONE, TORC__CACHE_BINS, TORC__CACHE_BLOCKS };

enum { TORC__N_SMALL = 16, TORC__N_BINS = TORC__N_SMALL + 4 * 40 };

/* Requests up to this size are the small pool in the statistics (and in
 * the block allocator, where they share 2 MiB segments). */
#define TORC__SMALL_MAX ((size_t)1 << 20)

typedef struct torc__bin {
  void **ptr; /* a stack of free blocks of this class */
  int n, cap;
} torc__bin;

/* One figure: its current value and peak, and how often it grew and
 * shrank. */
typedef struct torc__mstat {
  size_t cur, peak;
  uint64_t allocs, frees;
} torc__mstat;

typedef struct torc__blocks torc__blocks;

struct torc__cache {
  pthread_mutex_t lock;
  int mode; /* TORC__CACHE_* */
  torc__bin bins[TORC__N_BINS];
  size_t cached;        /* bytes held in the bins */
  torc_memory_stats st; /* os_allocs, os_frees, cache_hits */
  uint64_t oom_count;
  /* [0] every pool, [1] small, [2] large: bytes of live tensor storages
   * (as requested) and bytes taken from the device */
  torc__mstat alloc[3], resv[3];
  torc__blocks *bk; /* TORC__CACHE_BLOCKS only */
};

/* Counts `n` bytes in or out of `m` (all pools and the pool of `size`).
 * Lock held. */
static inline void torc__mstat_add(torc__mstat *m, size_t size, size_t n) {
  for (int i = 0; i < 2; i++) {
    torc__mstat *s = &m[i == 0 ? 0 : size <= TORC__SMALL_MAX ? 1 : 2];
    s->cur += n;
    if (s->cur > s->peak)
      s->peak = s->cur;
    s->allocs++;
  }
}
static inline void torc__mstat_sub(torc__mstat *m, size_t size, size_t n) {
  for (int i = 0; i < 2; i++) {
    torc__mstat *s = &m[i == 0 ? 0 : size <= TORC__SMALL_MAX ? 1 : 2];
    s->cur -= n;
    s->frees++;
  }
}

/* Writes n bytes as "512 B", "1.5 KiB", "20.0 MiB" or "1.00 GiB"
 * (alloc.c). */
void torc__mem_human(size_t n, char *buf, size_t size);

/* ---- alloc_blocks.c ---- */

/* Creates the block state of a cache; TORC_OK or OOM. */
torc_status torc__blocks_create(torc__cache *c);
/* Frees every segment and the block state (at unload). Lock held. */
void torc__blocks_destroy(torc__devtype *d, int index, torc__cache *c);
/* nbytes from the blocks of (d, index); the lock is not held. */
torc_status torc__blocks_alloc(torc__devtype *d, int index, torc__cache *c,
                               size_t nbytes, void **out);
/* Returns a block from torc__blocks_alloc; the lock is not held. When
 * `used` names streams (record_stream), an event is recorded on each and
 * the block is reused only once they all completed. */
void torc__blocks_free(torc__devtype *d, int index, torc__cache *c,
                       void *ptr, size_t nbytes,
                       struct torc_stream *const *used, int n_used);
/* Hands the blocks of stream s (being freed, its work done) to the
 * default stream. Lock held. */
void torc__blocks_retag(torc__cache *c, const struct torc_stream *s);
/* Gives every wholly free segment back to the device; the bytes freed.
 * Lock held. */
size_t torc__blocks_release(torc__devtype *d, int index, torc__cache *c);
/* Frees the blocks waiting on events that have completed, so that the
 * statistics read next do not count them as allocated. Lock held. */
void torc__blocks_collect(torc__devtype *d, int index, torc__cache *c);
/* Bytes of the blocks in use (rounded sizes). Lock held. */
size_t torc__blocks_in_use(const torc__cache *c);

#endif /* TORC_ALLOC_INTERNAL_H */
