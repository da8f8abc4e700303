/* torc/stream.h — streams and events, as torch.cuda.Stream and Event: a
 * stream is an in-order queue of work on one device (kernels, copies); an
 * event marks a point of a stream, which the host or another stream can
 * wait for. Every device has a default stream; each thread has a current
 * stream per device (the default one until torc_set_current_stream), and
 * every op the thread runs on that device is queued there.
 *
 * A device whose plugin has no streams (and the cpu) has only its default
 * stream: the functions here still work, synchronously (an event is
 * complete once recorded, after the device synchronized). See
 * docs/streams.md.
 */
#ifndef TORC_STREAM_H
#define TORC_STREAM_H

#include "torc/device.h"
#include "torc/error.h"

TORC_BEGIN_DECLS

typedef struct torc_tensor torc_tensor;

/* A stream of one device. Opaque. */
typedef struct torc_stream torc_stream;

/* An event of one device. Opaque. */
typedef struct torc_event torc_event;

/* A new stream of `dev`, or NULL with the error set: TORC_ERR_DEVICE for
 * the cpu (it has no streams) or a bad device. On a device whose plugin
 * has no streams, the new stream is its one queue under another name. */
TORC_API torc_stream *torc_stream_new(torc_device dev);

/* Frees a stream from torc_stream_new after the work queued on it has run
 * (this waits for it). Threads whose current stream it was go back to the
 * default stream; using it afterwards is an error naming it. NULL and
 * default streams are ignored. Free streams before torc_shutdown. */
TORC_API void torc_stream_free(torc_stream *s);

/* The default stream of `dev` (never freed), or NULL with the error set
 * for a bad device. */
TORC_API torc_stream *torc_stream_default(torc_device dev);

/* The calling thread's current stream on `dev`: the default stream unless
 * torc_set_current_stream chose another. NULL for a bad device. */
TORC_API torc_stream *torc_current_stream(torc_device dev);

/* Makes `s` the calling thread's current stream on its device (other
 * threads and other devices keep theirs). Errors: TORC_ERR_INVALID for a
 * NULL or freed stream; TORC_ERR_RANGE when the thread already set
 * current streams on 16 other devices. */
TORC_API torc_status torc_set_current_stream(torc_stream *s);

/* The device a stream belongs to. */
TORC_API torc_device torc_stream_device(const torc_stream *s);

/* Blocks until the work queued on `s` so far has run; reports errors of
 * asynchronous work. */
TORC_API torc_status torc_stream_synchronize(torc_stream *s);

/* Makes `s` wait, on the device, for `ev` as last recorded: the host does
 * not wait. Errors: TORC_ERR_DEVICE when ev belongs to another device
 * type; TORC_ERR_INVALID for NULL or freed arguments. */
TORC_API torc_status torc_stream_wait_event(torc_stream *s, torc_event *ev);

/* Makes `s` wait, on the device, for the work queued on `other` so far (an
 * event recorded on other, waited on by s). */
TORC_API torc_status torc_stream_wait_stream(torc_stream *s,
                                             torc_stream *other);

/* A new event of `dev`, not recorded (it counts as complete), or NULL with
 * the error set. */
TORC_API torc_event *torc_event_new(torc_device dev);

/* Records `ev` on `s` (NULL: the current stream of ev's device): it
 * completes when the work queued on s so far has run. Errors:
 * TORC_ERR_DEVICE when s belongs to another device than ev. */
TORC_API torc_status torc_event_record(torc_event *ev, torc_stream *s);

/* 1 when the work before ev's last record has run (or it was never
 * recorded), 0 when not yet, -1 on an error (set). Never blocks. */
TORC_API int torc_event_query(torc_event *ev);

/* Blocks until ev completes; reports errors of asynchronous work. */
TORC_API torc_status torc_event_synchronize(torc_event *ev);

/* The device an event belongs to. */
TORC_API torc_device torc_event_device(const torc_event *ev);

/* Frees an event (NULL is ignored); work queued to record or wait on it
 * still runs. */
TORC_API void torc_event_free(torc_event *ev);

/* Marks t's storage as used on `s` (PyTorch's Tensor.record_stream): when
 * its last reference goes, the caching allocator does not hand its memory
 * out again until the work queued on s at that moment has run. Needed
 * when a tensor allocated on one stream is used on another. A no-op on
 * the stream t was allocated on and on devices without streams. Errors:
 * TORC_ERR_DEVICE when s belongs to another device than t. */
TORC_API torc_status torc_tensor_record_stream(torc_tensor *t, torc_stream *s);

/* Copies t (on a device) into `pinned`, a tensor from torc_empty_pinned
 * for t's device with t's dtype and number of elements, on the current
 * stream of t's device, without waiting: the data is in `pinned` once
 * *done (a new event, freed by the caller with torc_event_free) completes.
 * Keep both tensors alive until then. On a device without asynchronous
 * copies this copies at once and *done is complete. done may be NULL: then
 * wait with torc_stream_synchronize. Errors: TORC_ERR_INVALID (pinned is
 * not pinned memory for t's device, or sizes differ), TORC_ERR_DTYPE. */
TORC_API torc_status torc_to_host_async(const torc_tensor *t,
                                        torc_tensor *pinned,
                                        torc_event **done);

TORC_END_DECLS

#endif /* TORC_STREAM_H */
