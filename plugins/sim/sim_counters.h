/* plugins/sim/sim_counters.h — what a sim device has counted, read by tests
 * through the plugin's exported torc_sim_read_counters: the blocking reads and
 * synchronisations let a test measure how often the host waited for the
 * device, instead of trusting the code that should not wait.
 */
#ifndef TORC_SIM_COUNTERS_H
#define TORC_SIM_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

/* Counters of one sim device since the plugin loaded (or the last reset). */
typedef struct torc_sim_counters {
  size_t struct_size;       /* sizeof(torc_sim_counters) of the caller */
  uint64_t kernels;         /* kernels queued */
  uint64_t copies_pinned;   /* host->device copies from pinned memory */
  uint64_t copies_staged;   /* host->device copies through a staging copy */
  uint64_t blocking_reads;  /* device->host copies that waited for the queue */
  uint64_t synchronizes;    /* synchronize calls (the host waited) */
  uint64_t blocking_bytes;  /* bytes read by the blocking reads */
  /* The largest simulated end time of the device's tasks, in microseconds:
   * each task starts when its stream is free and the events it waits on
   * completed, and lasts kernel_latency_us (kernels) or copy_latency_us
   * (copies). A reset zeroes it and every stream's clock: reset only when
   * the device is idle (after a synchronize). */
  uint64_t sim_time_us;
  uint64_t async_reads;     /* device->host copies queued on a stream */
  uint64_t copies_d2d;      /* device->device copies from this device */
  uint64_t host_allocs;     /* pinned host_alloc calls (plugin-wide) */
} torc_sim_counters;

/* The name of the exported function, for dlsym. */
#define TORC_SIM_COUNTERS_SYMBOL "torc_sim_read_counters"

/* Fills *out with device `index`'s counters (fields up to out->struct_size)
 * and, when `reset` is non-zero, zeroes them afterwards. 0 on success, -1
 * when the plugin is not initialised or index names no device. */
typedef int (*torc_sim_counters_fn)(int index, torc_sim_counters *out,
                                    int reset);

#endif
