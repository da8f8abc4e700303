/* plugins/sim/sim_internal.h — state shared by the sim plugin's files: the
 * devices (memory table, streams and events, simulated clock, sticky
 * error) and the plugin-wide settings. Internal to the plugin; every symbol is hidden.
 */
#ifndef TORC_SIM_INTERNAL_H
#define TORC_SIM_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "torc/plugin.h"

/* Most sim devices a configuration may ask for. */
#define SIM_MAX_DEVICES 64

/* Length of a sticky (asynchronous) error message. */
#define SIM_MSG_MAX 1024

typedef struct sim_pin sim_pin;
typedef struct sim_device sim_device;
typedef struct sim_event sim_event;

/* One piece of work on a stream. */
typedef enum sim_task_kind {
  SIM_TASK_KERNEL, /* run a reference kernel on host buffers */
  SIM_TASK_COPY,   /* memcpy (host, device or another device's buffer),
                      free `owned` after */
  SIM_TASK_FREE,   /* free a device buffer whose handle is already gone */
  SIM_TASK_RECORD, /* complete `event`'s record number `target` */
  SIM_TASK_WAIT    /* wait until `event` completed record `target` */
} sim_task_kind;

typedef struct sim_task {
  struct sim_task *next;
  sim_task_kind kind;
  /* SIM_TASK_KERNEL: the kernel and its arguments, whose pointers (in,
   * out, params, op) point into the same allocation as the task. */
  torc_kernel_fn fn;
  torc_kernel_args args;
  int inject_fail; /* the fail_op key named this op */
  /* SIM_TASK_COPY / SIM_TASK_FREE */
  void *dst;
  const void *src;
  size_t nbytes;
  void *owned;  /* staging buffer (COPY) or device buffer (FREE) to free */
  sim_pin *pin; /* COPY from or to pinned memory: released after */
  /* SIM_TASK_RECORD / SIM_TASK_WAIT (holding a reference of the event) */
  sim_event *event;
  uint64_t target;
} sim_task;

/* A stream: a FIFO of tasks run in order by its own worker thread. The
 * default stream is embedded in its device; others come from stream_new.
 * Guarded by the device's mu. */
typedef struct sim_stream {
  uint32_t magic; /* SIM_STREAM_MAGIC while alive */
  sim_device *dev;
  struct sim_stream *next; /* the device's streams */
  pthread_t thread;
  int thread_started;
  int stop;
  pthread_cond_t work; /* the queue got a task, or stop was set */
  sim_task *head, *tail;
  size_t pending;    /* queued + running tasks */
  uint64_t clock_us; /* simulated end time of the last task started */
} sim_stream;

#define SIM_STREAM_MAGIC 0x73696d73u

/* An event: the number of records queued and completed, and the
 * simulated time the last completed one completed at. Guarded by its
 * device's mu; freed when the user freed it and no queued task holds it. */
struct sim_event {
  uint32_t magic; /* SIM_EVENT_MAGIC while the user holds it */
  sim_device *dev;
  uint64_t records, done;
  uint64_t time_us;
  int refs; /* the user's + queued RECORD and WAIT tasks */
  struct sim_event *prev, *next; /* the device's events */
};

#define SIM_EVENT_MAGIC 0x73696d65u

/* One live allocation of a device's memory table. A handle is an address
 * in the device's own address space: `base` plus an offset, so handles
 * into the inside of an allocation are valid too (as CUDA pointers are,
 * which the core's caching allocator relies on to split blocks). Bases
 * are never reused, so a handle used after its free is recognised. */
typedef struct sim_slot {
  uintptr_t base; /* the allocation's first address (device space) */
  void *buf;      /* the host buffer standing for device memory */
  size_t size;    /* bytes requested */
} sim_slot;

struct sim_device {
  int index;
  pthread_mutex_t mu;  /* guards everything below */
  pthread_cond_t idle; /* a task finished (pending dropped, an event done) */
  int started;
  sim_stream def;      /* the default stream */
  sim_stream *streams; /* every stream, the default one first */
  sim_event *events;   /* every live event */
  size_t pending;      /* queued + running tasks of all streams */
  uint64_t sim_time_us; /* the largest simulated end time of a task */
  /* memory */
  sim_slot *slots; /* live allocations, sorted by base */
  size_t n_slots, cap_slots;
  uintptr_t next_base; /* where the next allocation starts */
  size_t in_use, peak;
  /* the first error of an asynchronous kernel since the last sync */
  int sticky;
  char sticky_msg[SIM_MSG_MAX];
  /* counters, for describe and debugging */
  uint64_t n_kernels, n_copies_staged, n_copies_pinned;
  /* the host waited: blocking device->host reads and synchronizes */
  uint64_t n_blocking_reads, n_blocking_bytes, n_syncs;
  uint64_t n_async_reads, n_d2d;
};

/* A block from host_alloc ("pinned" memory). A block freed while queued
 * copies still read it is marked dead and freed by the last of them. */
struct sim_pin {
  struct sim_pin *next;
  void *ptr;
  size_t size;
  int in_flight; /* queued copies reading it */
  int dead;      /* host_free was called */
};

typedef struct sim_state {
  int live; /* init ran and teardown has not */
  const torc_host *host;
  int n_devices;
  sim_device *devices;
  size_t mem_cap;
  char mem_text[64]; /* the memory key as written, for messages */
  long latency_us;
  long kernel_latency_us, copy_latency_us; /* simulated clock only */
  char fail_op[64];       /* "" = none */
  pthread_mutex_t pin_mu; /* guards the pins list and its nodes */
  sim_pin *pins;
  uint64_t n_host_allocs; /* host_alloc calls (under pin_mu) */
  int warned_unpinned;
} sim_state;

/* The plugin's one state (plugins are loaded once per process). */
extern sim_state sim__g;

/* ---- sim_stream.c: streams and their worker threads ---- */

/* Initialises dev's lock, default stream and table and starts the default
 * stream's worker. TORC_OK or an error after host->set_error. */
int sim__device_start(sim_device *dev, int index);

/* Runs what is queued, joins the workers and frees every buffer, stream,
 * event and task. */
void sim__device_stop(sim_device *dev);

/* Appends a task to dev's default stream (takes ownership). */
void sim__enqueue(sim_device *dev, sim_task *task);

/* Appends a task to stream s (takes ownership). */
void sim__enqueue_on(sim_stream *s, sim_task *task);

/* The stream of dev a handle names (NULL: the default stream), or NULL
 * after host->set_error when it is none of dev's. */
sim_stream *sim__stream_of(sim_device *dev, void *handle);

/* Waits until every stream of dev is empty. With `report`, takes the
 * sticky error and raises it in the calling thread (returning its
 * status), else leaves it for a later synchronisation. */
int sim__drain(sim_device *dev, int report);

/* Takes dev's sticky error, raising it in the calling thread; TORC_OK when
 * there is none. */
int sim__report_sticky(sim_device *dev);

/* The stream and event slots (sim_events.c). */
int sim__stream_new(void *user, int index, void **out);
void sim__stream_free(void *user, int index, void *stream);
int sim__event_new(void *user, int index, void **out);
int sim__event_record(void *user, int index, void *event, void *stream);
int sim__stream_wait_event(void *user, int index, void *stream, void *event);
int sim__event_query(void *user, int index, void *event);
int sim__event_synchronize(void *user, int index, void *event);
void sim__event_free(void *user, int index, void *event);
/* Drops a reference of ev (its device's mu held); frees it at the last. */
void sim__event_unref_locked(sim_event *ev);

/* The function the reference kernels report errors through
 * (torc_ref_set_error): on a worker thread it records into the running
 * kernel's result; elsewhere it forwards to host->set_error. */
int sim__ref_set_error(int status, const char *fmt, ...) TORC_PRINTF(2, 3);

/* The generic kernel registered for every (op, dtype) of the reference
 * table; kernel_data is the torc_ref_kernel entry. */
int sim__kernel(const torc_kernel_args *args);

/* ---- sim_memory.c: handles, the memory table and the cap ---- */

/* Resolves a handle of device dev to its host buffer and size. Called with
 * dev->mu held. TORC_OK, or an error after host->set_error (a handle
 * that is not one, belongs to another device, or was freed). */
int sim__resolve_locked(sim_device *dev, const void *handle, char **buf,
                        size_t *size);

/* The device ops slots for memory. */
int sim__mem_info(void *user, int index, size_t *free_bytes,
                  size_t *total_bytes);
int sim__alloc(void *user, int index, size_t nbytes, void **out);
void sim__free(void *user, int index, void *ptr);
int sim__copy_from_host(void *user, int index, void *dst, size_t dst_offset,
                        const void *src, size_t nbytes, uint32_t flags);
int sim__copy_to_host(void *user, int index, void *dst, const void *src,
                      size_t src_offset, size_t nbytes);
int sim__copy_from_host_async(void *user, int index, void *dst,
                              size_t dst_offset, const void *src,
                              size_t nbytes, uint32_t flags, void *stream);
int sim__copy_to_host_async(void *user, int index, void *dst, const void *src,
                            size_t src_offset, size_t nbytes, void *stream);
int sim__copy_device_to_device(void *user, int dst_index, void *dst,
                               size_t dst_offset, int src_index,
                               const void *src, size_t src_offset,
                               size_t nbytes, void *stream);
int sim__host_alloc(void *user, size_t nbytes, void **out);
void sim__host_free(void *user, void *ptr);

/* A queued copy from `pin` has run: frees the block if it was released. */
void sim__pin_done(sim_pin *pin);

/* Frees every pinned block (at teardown, after the workers stopped). */
void sim__free_pins(void);

/* Frees every buffer left in dev's table (at teardown). */
void sim__free_table(sim_device *dev);

/* The device `index`, or NULL after host->set_error when out of range. */
sim_device *sim__device(int index);

/* Writes nbytes as "1.5 MiB" into buf. */
void sim__human_bytes(size_t nbytes, char *buf, size_t size);

/* "f32", ... for a dtype value. */
const char *sim__dtype_name(int32_t dtype);

#endif /* TORC_SIM_INTERNAL_H */
