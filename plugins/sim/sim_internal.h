/* plugins/sim/sim_internal.h — state shared by the sim plugin's files: the
 * devices (memory table, stream queue, sticky error) and the plugin-wide
 * settings. Internal to the plugin; every symbol is hidden.
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

/* One piece of work on a device's stream. */
typedef enum sim_task_kind {
  SIM_TASK_KERNEL, /* run a reference kernel on host buffers */
  SIM_TASK_COPY,   /* memcpy host -> device buffer, free `owned` after */
  SIM_TASK_FREE    /* free a device buffer whose handle is already gone */
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
  sim_pin *pin; /* COPY from pinned memory: the block, released after */
} sim_task;

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

typedef struct sim_device {
  int index;
  pthread_mutex_t mu;  /* guards everything below */
  pthread_cond_t work; /* the queue got a task, or stop was set */
  pthread_cond_t idle; /* pending dropped to 0 */
  pthread_t thread;
  int thread_started;
  int stop;
  sim_task *head, *tail;
  size_t pending; /* queued + running tasks */
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
} sim_device;

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
  char fail_op[64];       /* "" = none */
  pthread_mutex_t pin_mu; /* guards the pins list and its nodes */
  sim_pin *pins;
  int warned_unpinned;
} sim_state;

/* The plugin's one state (plugins are loaded once per process). */
extern sim_state sim__g;

/* ---- sim_stream.c: the per-device stream and its worker thread ---- */

/* Initialises dev's lock, queue and table and starts its worker thread.
 * TORC_OK or an error after host->set_error. */
int sim__device_start(sim_device *dev, int index);

/* Runs what is queued, joins the worker and frees every buffer and task. */
void sim__device_stop(sim_device *dev);

/* Appends a task to dev's stream (takes ownership). */
void sim__enqueue(sim_device *dev, sim_task *task);

/* Waits until dev's stream is empty. With `report`, takes the sticky error
 * and raises it in the calling thread (returning its status), else leaves
 * it for a later synchronisation. */
int sim__drain(sim_device *dev, int report);

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
