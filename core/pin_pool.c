/* core/pin_pool.c — a small pool of pinned staging buffers (the loader's):
 * a buffer freed after its host-to-device copy was queued is kept with an
 * event recorded on the freeing thread's current stream, and handed out
 * again for a request of its size once that event completed, instead of a
 * fresh host_alloc and host_free per batch.
 */
#include "internal.h"
#include "stream_internal.h"

typedef struct pin_entry {
  void *ptr;
  size_t nbytes;
  torc_event *ev; /* the copies that read it are done once it completes */
} pin_entry;

struct torc__pin_pool {
  pthread_mutex_t mu;
  _Atomic int refs; /* the owner's and one per buffer handed out */
  torc_device dev;
  int cap, n;
  pin_entry *e;
};

torc__pin_pool *torc__pin_pool_new(torc_device dev, int cap) {
  torc__pin_pool *p = torc__calloc(1, sizeof *p);
  if (p)
    p->e = torc__calloc((size_t)(cap > 0 ? cap : 1), sizeof *p->e);
  if (p == NULL || p->e == NULL) {
    torc__free(p);
    torc_set_error(TORC_ERR_OOM, "out of memory for a pinned buffer pool");
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  p->refs = 1;
  p->dev = dev;
  p->cap = cap;
  return p;
}

static void unref(torc__pin_pool *p) {
  if (atomic_fetch_sub(&p->refs, 1) != 1)
    return;
  for (int i = 0; i < p->n; i++) { /* host_free waits for their copies */
    torc_event_free(p->e[i].ev);
    torc_host_free(p->dev, p->e[i].ptr);
  }
  pthread_mutex_destroy(&p->mu);
  torc__free(p->e);
  torc__free(p);
}

void torc__pin_pool_drop(torc__pin_pool *p) {
  if (p)
    unref(p);
}

void *torc__pin_pool_get(torc__pin_pool *p, size_t nbytes) {
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < p->n; i++) {
    if (p->e[i].nbytes != nbytes)
      continue;
    int done = p->e[i].ev ? torc_event_query(p->e[i].ev) : 1;
    if (done < 0)
      torc_clear_error();
    if (done != 1)
      continue;
    void *ptr = p->e[i].ptr;
    torc_event_free(p->e[i].ev);
    p->e[i] = p->e[--p->n];
    atomic_fetch_add(&p->refs, 1);
    pthread_mutex_unlock(&p->mu);
    return ptr;
  }
  pthread_mutex_unlock(&p->mu);
  void *ptr = torc_host_alloc(p->dev, nbytes);
  if (ptr)
    atomic_fetch_add(&p->refs, 1);
  return ptr;
}

void torc__pin_pool_put(torc__pin_pool *p, void *ptr, size_t nbytes) {
  torc_event *ev = torc_event_new(p->dev);
  if (ev && torc_event_record(ev, NULL) != TORC_OK) {
    torc_event_free(ev);
    ev = NULL;
  }
  int kept = 0;
  if (ev) {
    pthread_mutex_lock(&p->mu);
    if (p->n < p->cap) {
      p->e[p->n++] = (pin_entry){ptr, nbytes, ev};
      kept = 1;
    }
    pthread_mutex_unlock(&p->mu);
  }
  if (!kept) { /* full, or no event to guard it: host_free defers itself */
    torc_clear_error();
    torc_event_free(ev);
    torc_host_free(p->dev, ptr);
  }
  unref(p);
}
