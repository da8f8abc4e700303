/* torc/device.h — devices: a device type registered by a plugin (or the
 * built-in "cpu") and an index, e.g. cpu, sim:0, cuda:1.
 */
#ifndef TORC_DEVICE_H
#define TORC_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "torc/error.h"

TORC_BEGIN_DECLS

/* A device, passed by value. `type` is a run-time id given to each device
 * type as it is registered (the built-in "cpu" is 0); `index` selects one of
 * that type's devices. Ids are not stable across processes: store names
 * (torc_device_str), not ids. */
typedef struct torc_device {
  int16_t type;
  int16_t index;
} torc_device;

/* The host CPU: always present, even with no plugin loaded. */
#define TORC_CPU ((torc_device){0, 0})

/* Longest device type name, including the terminating NUL. */
#define TORC_DEVICE_TYPE_MAX 32

/* Parses "cpu", "sim", "sim:1", "cuda:0" into a device. The type must be
 * registered (by the built-in cpu or a loaded plugin) and the index must be
 * below its device count. Errors: TORC_ERR_DEVICE, with the registered
 * types and their counts in the message. */
TORC_API torc_status torc_device_parse(const char *name, torc_device *out);

/* Writes the device's name ("cpu", "sim:0") into buf (at most `size` bytes,
 * NUL-terminated) and returns buf. */
TORC_API char *torc_device_str(torc_device dev, char *buf, size_t size);

/* Most device types registered at once; ids run from 0 to this - 1. */
#define TORC_MAX_DEVICE_TYPES 16

/* The name of a device type id ("cpu", "sim"), or NULL if no type has that
 * id (ids of unloaded plugins' types are left empty, not reused at once). */
TORC_API const char *torc_device_type_name(int type);

/* One line from the device's plugin describing it (its memory, say), or
 * its name when the plugin gives none. Errors: TORC_ERR_DEVICE. */
TORC_API torc_status torc_device_describe(torc_device dev, char *buf,
                                          size_t size);

/* Number of devices of a registered type (0 for a type whose plugin loaded
 * but found no hardware, e.g. cuda on a machine without a GPU), or -1 if
 * `type_name` is not registered. */
TORC_API int torc_device_count(const char *type_name);

/* Why a registered type has no devices, in its plugin's words (e.g. "no
 * CUDA device was found (cudaGetDeviceCount: ...); install or update the
 * NVIDIA driver, or run on the CPU instead: --set device.type=cpu"),
 * written into buf as one NUL-terminated sentence. TORC_OK with the text;
 * TORC_ERR_DEVICE (buf empty) when the type is unknown, has devices, or
 * its plugin gives no reason. Sets no error for those. */
TORC_API torc_status torc_device_none_reason(const char *type_name, char *buf,
                                             size_t size);

/* 1 if the two devices are the same device. */
static inline int torc_device_eq(torc_device a, torc_device b) {
  return a.type == b.type && a.index == b.index;
}

/* 1 if the core may read and write the device's memory directly (the cpu
 * device); 0 for accelerators and simulated devices. */
TORC_API int torc_device_is_host(torc_device dev);

/* Waits until all work queued on `dev` has finished. Errors raised by
 * asynchronous kernels since the last synchronisation are reported here. */
TORC_API torc_status torc_synchronize(torc_device dev);

/* Bytes currently allocated by torc on `dev` (tensor storage), for tests
 * and memory reports. */
TORC_API size_t torc_device_memory_allocated(torc_device dev);

/* Caps the bytes of tensor storage torc allocates on `dev` (0: no cap,
 * the default), as torch.cuda.set_per_process_memory_fraction: a storage
 * that would take torc_device_memory_allocated past `bytes` fails with
 * TORC_ERR_OOM and a message giving the request, the limit and what is
 * allocated. Storages already allocated are kept. Meant for sharing a
 * device, and for running untrusted models (an ONNX file whose shapes ask
 * for more) within a budget. Errors: an unknown device. */
TORC_API torc_status torc_device_set_memory_limit(torc_device dev,
                                                  size_t bytes);

/* The limit set by torc_device_set_memory_limit for `dev` (0: none). */
TORC_API size_t torc_device_memory_limit(torc_device dev);

/* What the caching allocator of a device holds and has done. Freed tensor
 * storage goes back to a per-device cache of size-classed blocks, so a
 * training loop's steady state takes no memory from the OS; a request the
 * device cannot serve empties the cache and is tried again. The cache is
 * on for the cpu device and plugin devices that ask for it (TORC_NO_CACHE=1
 * turns it off; sanitizer builds never cache, so a use-after-free is still
 * caught). The fields of torc_memory_stats2 say more. */
typedef struct torc_memory_stats {
  size_t allocated;    /* bytes in live tensor storages */
  size_t cached;       /* bytes held free in the cache */
  uint64_t os_allocs;  /* blocks taken from the device (the OS) */
  uint64_t os_frees;   /* blocks given back to it */
  uint64_t cache_hits; /* requests served from the cache */
  int caching;         /* 1 when this device caches */
} torc_memory_stats;

/* Fills *out for `dev`. Errors: an unknown device, out NULL. */
TORC_API torc_status torc_device_memory_stats(torc_device dev,
                                              torc_memory_stats *out);

/* Gives every cached free block of `dev` back to the device (the OS for
 * cpu), as torch.cuda.empty_cache(). Live tensors are untouched. */
TORC_API torc_status torc_device_empty_cache(torc_device dev);

/* One figure of torc_memory_stats2: its current value, its peak since
 * the start or the last torc_reset_peak_memory_stats, and how many times
 * it grew (allocs) and shrank (frees). */
typedef struct torc_memory_stat {
  size_t current, peak;
  uint64_t allocs, frees;
} torc_memory_stat;

/* How a device's memory is cached (torc_memory_stats2.caching). */
enum {
  TORC_CACHING_NONE = 0,   /* every storage is one call of the device */
  TORC_CACHING_CLASSES = 1, /* size-class bins (the cpu device) */
  TORC_CACHING_BLOCKS = 2  /* split and merged blocks of segments */
};

/* The memory statistics of a device, version 2, as torch.cuda's
 * memory_stats. The caller sets struct_size to sizeof(torc_memory_stats2)
 * before the call; the core fills the fields that fit in it, so a program
 * built against older headers keeps working as fields are appended.
 *
 * "Allocated" counts the bytes of live tensor storages as requested;
 * "reserved" the bytes taken from the device (whole segments for a device
 * with the block allocator, size classes for the cpu device, the storages
 * themselves for an uncached device). A device with TORC_DEVICE_CACHING
 * (torc/plugin.h) gets the block allocator: requests round up to 512
 * bytes; up to 1 MiB they share 2 MiB segments (the small pool), larger
 * ones 20 MiB segments (requests of 10 MiB and more get a segment of their
 * own, rounded up to 2 MiB); a block is split when the rest is big enough
 * (512 bytes small, over 1 MiB large) and merges with free neighbours. */
typedef struct torc_memory_stats2 {
  size_t struct_size;       /* set by the caller */
  int caching;              /* TORC_CACHING_* */
  size_t allocated;         /* bytes in live tensor storages */
  size_t reserved;          /* bytes held from the device */
  size_t peak_allocated;    /* highest `allocated` since the last reset */
  size_t peak_reserved;     /* highest `reserved` since the last reset */
  size_t fragmentation;     /* reserved - allocated */
  uint64_t alloc_count;     /* storages allocated */
  uint64_t free_count;      /* storages freed */
  uint64_t segment_allocs;  /* calls of the device's alloc (segments) */
  uint64_t segment_frees;   /* calls of its free */
  uint64_t cache_hits;      /* requests served without calling the device */
  uint64_t oom_count;       /* requests that failed out of memory */
  size_t device_free;       /* what the device reports free (0: unknown) */
  size_t device_total;      /* its total memory (0: unknown) */
  /* [0] the small pool (requests up to 1 MiB), [1] the large pool */
  torc_memory_stat pool_allocated[2];
  torc_memory_stat pool_reserved[2];
} torc_memory_stats2;

/* Fills the fields of *out that fit in out->struct_size for `dev`.
 * Errors: an unknown device; out NULL or its struct_size too small to
 * hold `caching` (TORC_ERR_INVALID). */
TORC_API torc_status torc_device_memory_stats2(torc_device dev,
                                               torc_memory_stats2 *out);

/* Sets the peaks of `dev` (peak_allocated, peak_reserved and the pools')
 * to the current values, as torch.cuda.reset_peak_memory_stats(). */
TORC_API torc_status torc_reset_peak_memory_stats(torc_device dev);

/* A table of `dev`'s memory as torch.cuda.memory_summary(): current and
 * peak bytes, allocs and frees of allocated and reserved memory, overall
 * and per pool, then fragmentation, cache hits, out-of-memory errors and
 * the device's own figures when it reports them. A malloc'ed string (free
 * it), or NULL with the error set. */
TORC_API char *torc_memory_summary(torc_device dev);

/* Pinned (page-locked) host memory for fast, asynchronous copies to
 * `dev`, from the device's plugin; plain aligned host memory when the
 * device has no such notion. Free with torc_host_free. NULL on failure. */
TORC_API void *torc_host_alloc(torc_device dev, size_t nbytes);

/* Frees memory from torc_host_alloc. NULL is ignored. */
TORC_API void torc_host_free(torc_device dev, void *ptr);

TORC_END_DECLS

#endif /* TORC_DEVICE_H */
