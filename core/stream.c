/* core/stream.c — streams and events (torc/stream.h) over the device ABI's
 * optional stream slots: the stream and event objects, the calling
 * thread's current stream per device, record_stream, and the copies that
 * use streams (host to device, device to host into pinned memory, device
 * to device without the host). Devices without the slots get the same API
 * with synchronous semantics.
 */
#include <stdio.h>
#include <stdlib.h>

#include "alloc_internal.h"
#include "stream_internal.h"

enum { STREAM_LIVE = 0x5354524du, STREAM_DEAD = 0xdeadbeefu };
enum { EVENT_LIVE = 0x45564e54u };
enum { MAX_CURRENT = 16 };

struct torc_event {
  uint32_t magic;
  torc_device dev;
  void *h; /* the plugin's event; NULL on a device without streams */
};

/* Every stream object (default ones included) lives on this list until
 * its device type is unloaded: a freed stream stays recognisable. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static torc_stream *g_all;
static torc_stream **g_default[TORC__MAX_DEVICE_TYPES];
static unsigned g_serial;
/* Bumped when a device type is unloaded: threads' current streams from
 * before are forgotten. */
static _Atomic unsigned g_gen;

typedef struct cur_entry {
  int16_t type, index;
  torc_stream *s;
} cur_entry;

static _Thread_local cur_entry tl_cur[MAX_CURRENT];
static _Thread_local int tl_n;
static _Thread_local unsigned tl_gen;

int torc__has_streams(const torc__devtype *d) {
  const torc_device_ops *o = &d->ops;
  return o->stream_new && o->stream_free && o->event_new && o->event_record &&
         o->stream_wait_event && o->event_query && o->event_synchronize &&
         o->event_free;
}

torc_stream *torc__stream_current(int type, int index) {
  if (tl_n == 0)
    return NULL;
  if (tl_gen != atomic_load_explicit(&g_gen, memory_order_acquire)) {
    tl_n = 0;
    return NULL;
  }
  for (int i = 0; i < tl_n; i++)
    if (tl_cur[i].type == type && tl_cur[i].index == index) {
      /* Freed by another thread: this one is back on the default. */
      if (tl_cur[i].s->magic != STREAM_LIVE) {
        tl_cur[i] = tl_cur[--tl_n];
        return NULL;
      }
      return tl_cur[i].s;
    }
  return NULL;
}

/* "stream 3 of sim:0" / "the default stream of sim:0". */
static const char *stream_name(const torc_stream *s, char *buf, size_t size) {
  char dev[48];
  torc_device_str(s->dev, dev, sizeof dev);
  if (s->is_default)
    snprintf(buf, size, "the default stream of %s", dev);
  else
    snprintf(buf, size, "stream %u of %s", s->serial, dev);
  return buf;
}

static torc_status check_stream(const torc_stream *s, const char *fn) {
  if (s == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the stream is NULL; pass one from "
                          "torc_stream_new or torc_current_stream",
                          fn);
  if (s->magic == STREAM_DEAD) {
    char b[80];
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: %s was freed (torc_stream_free); create a new "
                          "one with torc_stream_new",
                          fn, stream_name(s, b, sizeof b));
  }
  if (s->magic != STREAM_LIVE)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: %p is not a torc stream", fn, (const void *)s);
  return TORC_OK;
}

static torc_status check_event(const torc_event *ev, const char *fn) {
  if (ev == NULL || ev->magic != EVENT_LIVE)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the event is %s; pass one from torc_event_new",
                          fn, ev ? "not a live torc event (freed?)" : "NULL");
  return TORC_OK;
}

/* A new stream object on the global list; lock held. */
static torc_stream *stream_obj_locked(torc_device dev, void *h, int is_def) {
  torc_stream *s = torc__calloc(1, sizeof *s);
  if (s == NULL)
    return NULL;
  s->magic = STREAM_LIVE;
  s->dev = dev;
  s->h = h;
  s->is_default = is_def;
  s->serial = is_def ? 0 : ++g_serial;
  s->next = g_all;
  g_all = s;
  return s;
}

torc_stream *torc_stream_default(torc_device dev) {
  torc__ensure_init();
  if (torc__device_check(dev, "torc_stream_default"))
    return NULL;
  torc__devtype *d = torc__devtype_get(dev.type);
  pthread_mutex_lock(&g_mu);
  if (g_default[dev.type] == NULL)
    g_default[dev.type] =
        torc__calloc((size_t)(d->count > 0 ? d->count : 1), sizeof(void *));
  torc_stream *s = NULL;
  if (g_default[dev.type]) {
    s = g_default[dev.type][dev.index];
    if (s == NULL)
      s = g_default[dev.type][dev.index] = stream_obj_locked(dev, NULL, 1);
  }
  pthread_mutex_unlock(&g_mu);
  if (s == NULL)
    torc_set_error(TORC_ERR_OOM, "torc_stream_default: out of memory");
  return s;
}

torc_stream *torc_current_stream(torc_device dev) {
  torc__ensure_init();
  if (torc__device_check(dev, "torc_current_stream"))
    return NULL;
  torc_stream *s = torc__stream_current(dev.type, dev.index);
  return s ? s : torc_stream_default(dev);
}

torc_stream *torc_stream_new(torc_device dev) {
  torc__ensure_init();
  if (torc__device_check(dev, "torc_stream_new"))
    return NULL;
  if (torc_device_is_host(dev)) {
    torc_set_error(TORC_ERR_DEVICE,
                   "torc_stream_new: the cpu has no streams (its work runs "
                   "on the calling thread); create streams on an "
                   "accelerator such as sim:0, or use "
                   "torc_stream_default(TORC_CPU)");
    return NULL;
  }
  torc__devtype *d = torc__devtype_get(dev.type);
  void *h = NULL;
  if (torc__has_streams(d) &&
      d->ops.stream_new(d->ops.user, dev.index, &h) != TORC_OK)
    return NULL;
  pthread_mutex_lock(&g_mu);
  torc_stream *s = stream_obj_locked(dev, h, 0);
  pthread_mutex_unlock(&g_mu);
  if (s == NULL) {
    if (h)
      d->ops.stream_free(d->ops.user, dev.index, h);
    torc_set_error(TORC_ERR_OOM, "torc_stream_new: out of memory");
  }
  return s;
}

/* Forgets s as the calling thread's current stream. */
static void drop_current(const torc_stream *s) {
  for (int i = 0; i < tl_n; i++)
    if (tl_cur[i].s == s) {
      tl_cur[i] = tl_cur[--tl_n];
      return;
    }
}

torc_status torc_set_current_stream(torc_stream *s) {
  torc_status st = check_stream(s, "torc_set_current_stream");
  if (st)
    return st;
  if (tl_gen != atomic_load_explicit(&g_gen, memory_order_acquire)) {
    tl_n = 0;
    tl_gen = atomic_load(&g_gen);
  }
  for (int i = 0; i < tl_n; i++)
    if (tl_cur[i].type == s->dev.type && tl_cur[i].index == s->dev.index) {
      if (s->is_default)
        tl_cur[i] = tl_cur[--tl_n];
      else
        tl_cur[i].s = s;
      return TORC_OK;
    }
  if (s->is_default)
    return TORC_OK;
  if (tl_n == MAX_CURRENT)
    return torc_set_error(TORC_ERR_RANGE,
                          "torc_set_current_stream: this thread already has "
                          "current streams on %d devices, the most torc keeps; "
                          "set the default stream back on devices it no "
                          "longer uses",
                          MAX_CURRENT);
  tl_cur[tl_n++] = (cur_entry){s->dev.type, s->dev.index, s};
  return TORC_OK;
}

torc_device torc_stream_device(const torc_stream *s) {
  return s ? s->dev : TORC_CPU;
}

/* Waits for the work queued on (d, index, h). */
static torc_status sync_handle(torc__devtype *d, int index, void *h) {
  if (!torc__has_streams(d))
    return (torc_status)d->ops.synchronize(d->ops.user, index);
  void *ev = NULL;
  torc_status st = (torc_status)d->ops.event_new(d->ops.user, index, &ev);
  if (st == TORC_OK)
    st = (torc_status)d->ops.event_record(d->ops.user, index, ev, h);
  if (st == TORC_OK)
    st = (torc_status)d->ops.event_synchronize(d->ops.user, index, ev);
  if (ev)
    d->ops.event_free(d->ops.user, index, ev);
  return st;
}

torc_status torc_stream_synchronize(torc_stream *s) {
  torc_status st = check_stream(s, "torc_stream_synchronize");
  if (st)
    return st;
  return sync_handle(torc__devtype_get(s->dev.type), s->dev.index, s->h);
}

void torc_stream_free(torc_stream *s) {
  if (s == NULL || s->is_default)
    return;
  if (check_stream(s, "torc_stream_free")) {
    torc_logf(TORC_LOG_ERROR, "%s; ignored", torc_last_error());
    torc_clear_error();
    return;
  }
  torc__devtype *d = torc__devtype_get(s->dev.type);
  drop_current(s);
  if (d && s->h) {
    /* Its work done, its cached blocks serve the default stream. */
    if (sync_handle(d, s->dev.index, s->h) != TORC_OK) {
      torc_logf(TORC_LOG_ERROR, "torc_stream_free: %s", torc_last_error());
      torc_clear_error();
    }
    if (d->cache && d->cache[s->dev.index].mode == TORC__CACHE_BLOCKS) {
      torc__cache *c = &d->cache[s->dev.index];
      pthread_mutex_lock(&c->lock);
      torc__blocks_retag(c, s);
      pthread_mutex_unlock(&c->lock);
    }
    d->ops.stream_free(d->ops.user, s->dev.index, s->h);
  }
  s->h = NULL;
  s->magic = STREAM_DEAD;
}

void torc__streams_drop_type(int type) {
  pthread_mutex_lock(&g_mu);
  for (torc_stream **pp = &g_all; *pp;) {
    torc_stream *s = *pp;
    if (s->dev.type == type) {
      *pp = s->next;
      torc__free(s);
    } else {
      pp = &s->next;
    }
  }
  if (type >= 0 && type < TORC__MAX_DEVICE_TYPES) {
    torc__free(g_default[type]);
    g_default[type] = NULL;
  }
  atomic_fetch_add(&g_gen, 1);
  pthread_mutex_unlock(&g_mu);
}

/* ---- events ---- */

torc_event *torc_event_new(torc_device dev) {
  torc__ensure_init();
  if (torc__device_check(dev, "torc_event_new"))
    return NULL;
  torc__devtype *d = torc__devtype_get(dev.type);
  torc_event *ev = torc__calloc(1, sizeof *ev);
  if (ev == NULL) {
    torc_set_error(TORC_ERR_OOM, "torc_event_new: out of memory");
    return NULL;
  }
  if (torc__has_streams(d) &&
      d->ops.event_new(d->ops.user, dev.index, &ev->h) != TORC_OK) {
    torc__free(ev);
    return NULL;
  }
  ev->magic = EVENT_LIVE;
  ev->dev = dev;
  return ev;
}

torc_device torc_event_device(const torc_event *ev) {
  return ev ? ev->dev : TORC_CPU;
}

torc_status torc_event_record(torc_event *ev, torc_stream *s) {
  torc_status st = check_event(ev, "torc_event_record");
  if (st)
    return st;
  if (s == NULL && (s = torc_current_stream(ev->dev)) == NULL)
    return torc_last_status();
  if ((st = check_stream(s, "torc_event_record")))
    return st;
  if (!torc_device_eq(s->dev, ev->dev)) {
    char a[48], b[80];
    torc_device_str(ev->dev, a, sizeof a);
    return torc_set_error(TORC_ERR_DEVICE,
                          "torc_event_record: the event belongs to %s but %s "
                          "is on another device; record it on a stream of %s "
                          "(or create the event with torc_event_new on the "
                          "stream's device)",
                          a, stream_name(s, b, sizeof b), a);
  }
  torc__devtype *d = torc__devtype_get(ev->dev.type);
  if (!torc__has_streams(d)) /* one queue: done once it drained */
    return (torc_status)d->ops.synchronize(d->ops.user, ev->dev.index);
  return (torc_status)d->ops.event_record(d->ops.user, ev->dev.index, ev->h,
                                          s->h);
}

int torc_event_query(torc_event *ev) {
  if (check_event(ev, "torc_event_query"))
    return -1;
  torc__devtype *d = torc__devtype_get(ev->dev.type);
  if (!torc__has_streams(d))
    return 1;
  int rc = d->ops.event_query(d->ops.user, ev->dev.index, ev->h);
  return rc == TORC_OK ? 1 : rc == TORC_EVENT_NOT_READY ? 0 : -1;
}

torc_status torc_event_synchronize(torc_event *ev) {
  torc_status st = check_event(ev, "torc_event_synchronize");
  if (st)
    return st;
  torc__devtype *d = torc__devtype_get(ev->dev.type);
  if (!torc__has_streams(d))
    return TORC_OK;
  return (torc_status)d->ops.event_synchronize(d->ops.user, ev->dev.index,
                                               ev->h);
}

void torc_event_free(torc_event *ev) {
  if (ev == NULL || ev->magic != EVENT_LIVE)
    return;
  torc__devtype *d = torc__devtype_get(ev->dev.type);
  if (d && ev->h)
    d->ops.event_free(d->ops.user, ev->dev.index, ev->h);
  ev->magic = 0;
  torc__free(ev);
}

torc_status torc_stream_wait_event(torc_stream *s, torc_event *ev) {
  torc_status st = check_stream(s, "torc_stream_wait_event");
  if (st || (st = check_event(ev, "torc_stream_wait_event")))
    return st;
  if (s->dev.type != ev->dev.type) {
    char a[48], b[80];
    torc_device_str(ev->dev, a, sizeof a);
    return torc_set_error(TORC_ERR_DEVICE,
                          "torc_stream_wait_event: the event belongs to %s, a "
                          "device of another type than %s; a stream can wait "
                          "only on events of its own device type (synchronize "
                          "the event on the host with torc_event_synchronize "
                          "instead)",
                          a, stream_name(s, b, sizeof b));
  }
  torc__devtype *d = torc__devtype_get(s->dev.type);
  if (!torc__has_streams(d)) /* one queue per device, events done */
    return TORC_OK;
  return (torc_status)d->ops.stream_wait_event(d->ops.user, s->dev.index,
                                               s->h, ev->h);
}

torc_status torc_stream_wait_stream(torc_stream *s, torc_stream *other) {
  torc_status st = check_stream(s, "torc_stream_wait_stream");
  if (st || (st = check_stream(other, "torc_stream_wait_stream")))
    return st;
  if (s == other)
    return TORC_OK;
  torc_event *ev = torc_event_new(other->dev);
  if (ev == NULL)
    return torc_last_status();
  st = torc_event_record(ev, other);
  if (st == TORC_OK)
    st = torc_stream_wait_event(s, ev);
  torc_event_free(ev);
  return st;
}

/* ---- record_stream ---- */

torc_status torc__stream_guard(torc__devtype *d, int index, void *h,
                               void **out) {
  *out = NULL;
  torc_status st = (torc_status)d->ops.event_new(d->ops.user, index, out);
  if (st == TORC_OK)
    st = (torc_status)d->ops.event_record(d->ops.user, index, *out, h);
  if (st != TORC_OK && *out) {
    d->ops.event_free(d->ops.user, index, *out);
    *out = NULL;
  }
  return st;
}

/* A stream as storages keep it: NULL for the default stream. */
static torc_stream *canon(torc_stream *s) {
  return s && s->is_default ? NULL : s;
}

torc_status torc__storage_record(torc_storage *st, torc_stream *s) {
  s = canon(s);
  if (s == st->alloc_stream)
    return TORC_OK;
  for (int i = 0; i < st->n_used; i++)
    if (st->used[i] == s)
      return TORC_OK;
  torc_stream **u = torc__realloc(st->used, sizeof *u * (size_t)(st->n_used + 1));
  if (u == NULL)
    return torc_set_error(TORC_ERR_OOM,
                          "torc_tensor_record_stream: out of memory");
  u[st->n_used++] = s;
  st->used = u;
  return TORC_OK;
}

torc_status torc_tensor_record_stream(torc_tensor *t, torc_stream *s) {
  if (t == NULL)
    return torc__null_input("torc_tensor_record_stream");
  torc_status st = check_stream(s, "torc_tensor_record_stream");
  if (st)
    return st;
  torc_storage *sg = t->storage;
  if (!torc_device_eq(sg->device, s->dev)) {
    char a[48], b[80];
    torc_device_str(sg->device, a, sizeof a);
    return torc_set_error(TORC_ERR_DEVICE,
                          "torc_tensor_record_stream: the tensor is on %s but "
                          "%s is not; record a stream of the tensor's device",
                          a, stream_name(s, b, sizeof b));
  }
  torc__devtype *d = torc__devtype_get(s->dev.type);
  if (!torc__has_streams(d) || sg->host_alloc)
    return TORC_OK;
  return torc__storage_record(sg, s);
}

void torc__storage_used_free(torc_storage *s) {
  torc__free(s->used);
  s->used = NULL;
  s->n_used = 0;
}

/* ---- copies ---- */

torc_status torc__copy_from_host(torc__devtype *d, int index, void *dst,
                                 size_t off, const void *src, size_t n,
                                 uint32_t flags) {
  torc_stream *s = torc__stream_current((int)d->id, index);
  if (s && d->ops.copy_from_host_async && torc__has_streams(d))
    return (torc_status)d->ops.copy_from_host_async(d->ops.user, index, dst,
                                                    off, src, n, flags, s->h);
  return (torc_status)d->ops.copy_from_host(d->ops.user, index, dst, off, src,
                                            n, flags);
}

/* One side of a device-to-device copy: `waiter` (on wdev) waits for the
 * work queued so far on `h` (on hdev). */
static torc_status order_after(torc__devtype *d, int wdev, void *waiter,
                               int hdev, void *h) {
  void *ev = NULL;
  torc_status st = torc__stream_guard(d, hdev, h, &ev);
  if (st == TORC_OK)
    st = (torc_status)d->ops.stream_wait_event(d->ops.user, wdev, waiter, ev);
  if (ev)
    d->ops.event_free(d->ops.user, hdev, ev);
  return st;
}

int torc__copy_d2d_possible(const torc__devtype *sd, const torc__devtype *dd) {
  return sd == dd && dd->ops.copy_device_to_device && torc__has_streams(dd);
}

torc_status torc__copy_d2d(torc__devtype *d, torc_device dst_dev, void *dst,
                           torc_device src_dev, const void *src,
                           size_t src_off, size_t n) {
  void *sh = torc__stream_handle(torc__stream_current(src_dev.type,
                                                      src_dev.index));
  void *dh = torc__stream_handle(torc__stream_current(dst_dev.type,
                                                      dst_dev.index));
  /* The source's stream waits for the destination's (its block may have
   * been another tensor's there), copies, and the destination's stream
   * waits for the copy. */
  torc_status st = order_after(d, src_dev.index, sh, dst_dev.index, dh);
  if (st == TORC_OK)
    st = (torc_status)d->ops.copy_device_to_device(
        d->ops.user, dst_dev.index, dst, 0, src_dev.index, src, src_off, n, sh);
  if (st == TORC_OK)
    st = order_after(d, dst_dev.index, dh, src_dev.index, sh);
  return st;
}

torc_status torc_to_host_async(const torc_tensor *t, torc_tensor *pinned,
                               torc_event **done) {
  if (done)
    *done = NULL;
  if (t == NULL || pinned == NULL)
    return torc__null_input("torc_to_host_async");
  torc_device dev = t->storage->device;
  char a[48];
  torc_device_str(dev, a, sizeof a);
  torc_storage *ps = pinned->storage;
  if (torc_device_is_host(dev))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_to_host_async: the tensor is on the cpu "
                          "already; copy it with torc_copy_");
  if (!ps->host_alloc || !torc_device_eq(ps->pinned_for, dev) ||
      !torc_is_contiguous(pinned))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_to_host_async: the destination is not a "
                          "contiguous pinned tensor for %s; create it with "
                          "torc_empty_pinned(shape, ndim, dtype, %s)",
                          a, a);
  if (pinned->dtype != t->dtype)
    return torc_set_error(TORC_ERR_DTYPE,
                          "torc_to_host_async: the tensor is %s but the "
                          "destination is %s; they must match",
                          torc_dtype_name(t->dtype),
                          torc_dtype_name(pinned->dtype));
  int64_t n = torc__numel(t->shape, t->ndim);
  if (n != torc__numel(pinned->shape, pinned->ndim))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_to_host_async: the tensor has %lld elements "
                          "but the destination %lld; they must match",
                          (long long)n,
                          (long long)torc__numel(pinned->shape, pinned->ndim));
  size_t es = torc_dtype_size(t->dtype), nbytes = (size_t)n * es;
  torc_event *ev = done ? torc_event_new(dev) : NULL;
  if (done && ev == NULL)
    return torc_last_status();
  torc_tensor *c = torc__contiguous(t);
  torc_status st = c ? TORC_OK : torc_last_status();
  torc__devtype *d = torc__devtype_get(dev.type);
  char *to = (char *)ps->ptr + (size_t)pinned->offset * es;
  if (st == TORC_OK && nbytes) {
    torc_stream *cur = torc__stream_current(dev.type, dev.index);
    if (d->ops.copy_to_host_async && torc__has_streams(d)) {
      st = (torc_status)d->ops.copy_to_host_async(
          d->ops.user, dev.index, to, c->storage->ptr,
          (size_t)c->offset * es, nbytes, torc__stream_handle(cur));
      if (st == TORC_OK) /* read on cur: not reused before that ran */
        st = torc__storage_record(c->storage, cur);
    } else {
      st = (torc_status)d->ops.copy_to_host(d->ops.user, dev.index, to,
                                            c->storage->ptr,
                                            (size_t)c->offset * es, nbytes);
    }
  }
  if (st == TORC_OK && ev)
    st = torc_event_record(ev, NULL);
  torc_release(c);
  if (st != TORC_OK) {
    torc_event_free(ev);
    return st;
  }
  if (done)
    *done = ev;
  return TORC_OK;
}
