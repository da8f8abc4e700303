/* core/stream_internal.h — what the stream code (stream.c) shares with the
 * allocator, the dispatcher and the copies: the stream object, the calling
 * thread's current stream, and the events that guard a freed block. */
#ifndef TORC_STREAM_INTERNAL_H
#define TORC_STREAM_INTERNAL_H

#include "internal.h"
#include "torc/stream.h"

struct torc_stream {
  _Atomic uint32_t magic; /* STREAM_LIVE, or STREAM_DEAD once freed */
  torc_device dev;
  void *h;            /* the plugin's handle; NULL: the default stream */
  int is_default;
  unsigned serial;    /* for messages: "stream 3 of sim:0" */
  torc_stream *next;  /* every stream object, for unload */
};

/* 1 when the device type runs streams (the plugin has every stream and
 * event slot). */
int torc__has_streams(const torc__devtype *d);

/* The calling thread's current stream on (type, index); NULL means the
 * default stream. Cheap when the thread never set one. */
torc_stream *torc__stream_current(int type, int index);

/* The plugin handle of s (NULL for the default stream or NULL). */
static inline void *torc__stream_handle(const torc_stream *s) {
  return s ? s->h : NULL;
}

/* Records a new plugin event on the stream with handle h (NULL: default)
 * of (d, index) into *out: the guard of a block freed after use on it.
 * TORC_OK or the plugin's error. The device has streams. */
torc_status torc__stream_guard(torc__devtype *d, int index, void *h,
                               void **out);

/* Adds s to the streams storage st was used on (record_stream). */
torc_status torc__storage_record(torc_storage *st, torc_stream *s);

/* copy_from_host on the calling thread's current stream of (d, index). */
torc_status torc__copy_from_host(torc__devtype *d, int index, void *dst,
                                 size_t off, const void *src, size_t n,
                                 uint32_t flags);

/* 1 when a copy from a device of sd to one of dd can skip the host. */
int torc__copy_d2d_possible(const torc__devtype *sd, const torc__devtype *dd);

/* n bytes from src + src_off on src_dev to dst on dst_dev (one device
 * type), ordered after both devices' current streams, without the host. */
torc_status torc__copy_d2d(torc__devtype *d, torc_device dst_dev, void *dst,
                           torc_device src_dev, const void *src,
                           size_t src_off, size_t n);

/* Drops the stream objects of device type `type` (at its unload). */
void torc__streams_drop_type(int type);

/* The streams a storage was used on besides its own (record_stream). */
void torc__storage_used_free(torc_storage *s);

#endif /* TORC_STREAM_INTERNAL_H */
