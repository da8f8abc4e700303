/* plugins/sim/sim_memory.c — the sim device's memory: opaque handles the
 * core cannot dereference, mapped through a per-device table to host
 * buffers (a handle inside an allocation is valid too); the per-device cap
 * (out of memory); stream-ordered frees; copies to and from the host;
 * pinned host memory; the memory-info slot.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* A handle is a non-canonical address on 64-bit machines (bits 48-63 are
 * not copies of bit 47), so that any dereference by the core faults at
 * once, under ASan and valgrind as without them:
 *   bits 56-63 tag 0x5a, 48-55 device index, 0-47 an address in the
 *   device's own space.
 * On 32-bit machines it points into the kernel's part of the address space
 * (>= 0xc0000000): tag 2 bits, device 3, address 27. Each allocation takes
 * fresh addresses (never reused, with a gap after it), so a handle is
 * recognised after its free and an overrun never lands in a neighbour. */
#if UINTPTR_MAX > 0xffffffffu
#define H_TAG ((uintptr_t)0x5a << 56)
#define H_TAG_MASK ((uintptr_t)0xff << 56)
#define H_DEV_SHIFT 48
#define H_DEV_MASK ((uintptr_t)0xff)
#define H_ADDR_MASK (((uintptr_t)1 << 48) - 1)
#else
#define H_TAG ((uintptr_t)0x3 << 30)
#define H_TAG_MASK ((uintptr_t)0x3 << 30)
#define H_DEV_SHIFT 27
#define H_DEV_MASK ((uintptr_t)0x7)
#define H_ADDR_MASK (((uintptr_t)1 << 27) - 1)
#endif
/* Allocations start at multiples of this, with at least this much unused
 * space after each (the core's allocator aligns blocks to 512 bytes). */
#define H_ALIGN ((uintptr_t)512)

static void *handle_make(int dev, uintptr_t addr) {
  return (void *)(H_TAG | ((uintptr_t)dev & H_DEV_MASK) << H_DEV_SHIFT |
                  (addr & H_ADDR_MASK));
}

sim_device *sim__device(int index) {
  if (!sim__g.live) /* called after teardown: nothing to report it to */
    return NULL;
  if (index < 0 || index >= sim__g.n_devices) {
    sim__g.host->set_error(TORC_ERR_DEVICE,
                           "sim: device index %d is out of range: the sim "
                           "plugin has %d device(s) (set [plugin.sim] devices)",
                           index, sim__g.n_devices);
    return NULL;
  }
  return &sim__g.devices[index];
}

void sim__human_bytes(size_t nbytes, char *buf, size_t size) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (nbytes < 1024) {
    snprintf(buf, size, "%zu B", nbytes);
    return;
  }
  double v = (double)nbytes / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, size, "%.1f %s", v, units[u]);
}

/* The index of the live allocation holding address `a` (its end
 * included, for empty allocations), or -1. Called with dev->mu held. */
static ptrdiff_t find_locked(sim_device *dev, uintptr_t a) {
  size_t lo = 0, hi = dev->n_slots; /* the first slot with base > a */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (dev->slots[mid].base <= a)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return -1;
  sim_slot *s = &dev->slots[lo - 1];
  return a - s->base <= s->size ? (ptrdiff_t)(lo - 1) : -1;
}

/* What a handle is, without raising anything: 0 inside a live allocation
 * of dev (buf and size set to what lies from the handle on), 1 not a sim
 * handle, 2 another sim device's, 3 freed or never allocated. Called with
 * dev->mu held. */
static int lookup_locked(sim_device *dev, const void *handle, char **buf,
                         size_t *size, int *owner) {
  uintptr_t h = (uintptr_t)handle;
  if ((h & H_TAG_MASK) != H_TAG)
    return 1;
  *owner = (int)((h >> H_DEV_SHIFT) & H_DEV_MASK);
  if (*owner != (dev->index & (int)H_DEV_MASK))
    return 2;
  uintptr_t a = h & H_ADDR_MASK;
  ptrdiff_t i = find_locked(dev, a);
  if (i < 0)
    return 3;
  size_t off = a - dev->slots[i].base;
  *buf = (char *)dev->slots[i].buf + off;
  *size = dev->slots[i].size - off;
  return 0;
}

int sim__resolve_locked(sim_device *dev, const void *handle, char **buf,
                        size_t *size) {
  int owner = -1;
  switch (lookup_locked(dev, handle, buf, size, &owner)) {
  case 0:
    return TORC_OK;
  case 1:
    return sim__g.host->set_error(
        TORC_ERR_INTERNAL,
        "sim:%d: %p is not sim device memory (a host pointer or another "
        "device type's memory reached the sim device)",
        dev->index, handle);
  case 2:
    return sim__g.host->set_error(
        TORC_ERR_DEVICE,
        "sim:%d: memory handle %p belongs to sim:%d; move the tensor with "
        "torc_to() first",
        dev->index, handle, owner);
  default:
    return sim__g.host->set_error(
        TORC_ERR_INTERNAL,
        "sim:%d: memory handle %p was freed (use after free) or never "
        "allocated",
        dev->index, handle);
  }
}

/* Room for one more slot at the end of the table (0), or -1 when its
 * growth failed. Called with dev->mu held. */
static int slot_reserve_locked(sim_device *dev) {
  if (dev->n_slots < dev->cap_slots)
    return 0;
  size_t cap = dev->cap_slots ? dev->cap_slots * 2 : 64;
  sim_slot *s = realloc(dev->slots, sizeof *s * cap);
  if (s == NULL)
    return -1;
  dev->slots = s;
  dev->cap_slots = cap;
  return 0;
}

int sim__mem_info(void *user, int index, size_t *free_bytes,
                  size_t *total_bytes) {
  (void)user;
  sim_device *dev = sim__device(index);
  if (dev == NULL)
    return TORC_ERR_DEVICE;
  pthread_mutex_lock(&dev->mu);
  *total_bytes = sim__g.mem_cap;
  *free_bytes = sim__g.mem_cap - dev->in_use;
  pthread_mutex_unlock(&dev->mu);
  return TORC_OK;
}

int sim__alloc(void *user, int index, size_t nbytes, void **out) {
  (void)user;
  *out = NULL;
  sim_device *dev = sim__device(index);
  if (dev == NULL)
    return TORC_ERR_DEVICE;
  char want[32], used[32], cap[32];
  pthread_mutex_lock(&dev->mu);
  if (nbytes > sim__g.mem_cap || dev->in_use > sim__g.mem_cap - nbytes) {
    size_t in_use = dev->in_use;
    pthread_mutex_unlock(&dev->mu);
    sim__human_bytes(nbytes, want, sizeof want);
    sim__human_bytes(in_use, used, sizeof used);
    sim__human_bytes(sim__g.mem_cap, cap, sizeof cap);
    return sim__g.host->set_error(
        TORC_ERR_OOM,
        "sim:%d: out of memory: cannot allocate %zu bytes (%s) with %zu "
        "bytes (%s) in use of the device's %zu bytes (%s); free tensors you "
        "no longer need, lower the batch size, or raise [plugin.sim] memory "
        "(now %s)",
        index, nbytes, want, in_use, used, sim__g.mem_cap, cap,
        sim__g.mem_text);
  }
  void *buf = malloc(nbytes ? nbytes : 1);
  if (dev->next_base == 0)
    dev->next_base = H_ALIGN;
  uintptr_t base = dev->next_base;
  uintptr_t span = ((uintptr_t)nbytes + 2 * H_ALIGN - 1) & ~(H_ALIGN - 1);
  int room = nbytes <= H_ADDR_MASK && span <= H_ADDR_MASK - base;
  if (buf == NULL || !room || slot_reserve_locked(dev) != 0) {
    pthread_mutex_unlock(&dev->mu);
    free(buf);
    sim__human_bytes(nbytes, want, sizeof want);
    return sim__g.host->set_error(
        TORC_ERR_OOM,
        "sim:%d: out of %s allocating %zu bytes (%s) to stand for device "
        "memory; free tensors or lower the batch size",
        index, room ? "host memory" : "simulated address space", nbytes,
        want);
  }
  dev->next_base = base + span;
  /* Bases only grow: appending keeps the table sorted. */
  dev->slots[dev->n_slots++] = (sim_slot){base, buf, nbytes};
  dev->in_use += nbytes;
  if (dev->in_use > dev->peak)
    dev->peak = dev->in_use;
  *out = handle_make(index, base);
  pthread_mutex_unlock(&dev->mu);
  return TORC_OK;
}

void sim__free(void *user, int index, void *ptr) {
  (void)user;
  if (ptr == NULL)
    return;
  if (!sim__g.live)
    return;
  if (index < 0 || index >= sim__g.n_devices) {
    sim__g.host->log(TORC_LOG_ERROR,
                     "sim: free of %p on device index %d, which does not "
                     "exist (%d device(s)); ignored",
                     ptr, index, sim__g.n_devices);
    return;
  }
  sim_device *dev = &sim__g.devices[index];
  pthread_mutex_lock(&dev->mu);
  char *buf = NULL;
  size_t size = 0;
  int owner = -1;
  int why = lookup_locked(dev, ptr, &buf, &size, &owner);
  if (why != 0) {
    pthread_mutex_unlock(&dev->mu);
    sim__g.host->log(TORC_LOG_ERROR, "sim:%d: free of %p, which is %s; ignored",
                     index, ptr,
                     why == 1   ? "not sim device memory"
                     : why == 2 ? "memory of another sim device"
                                : "already freed (double free?)");
    return;
  }
  ptrdiff_t i = find_locked(dev, (uintptr_t)ptr & H_ADDR_MASK);
  if (dev->slots[i].base != ((uintptr_t)ptr & H_ADDR_MASK)) {
    pthread_mutex_unlock(&dev->mu);
    sim__g.host->log(TORC_LOG_ERROR,
                     "sim:%d: free of %p, which points inside an allocation, "
                     "not at its start; ignored",
                     index, ptr);
    return;
  }
  /* The accounting drops now; the buffer goes after the work queued so far,
   * which may still read or write it. */
  dev->in_use -= dev->slots[i].size;
  memmove(&dev->slots[i], &dev->slots[i + 1],
          (dev->n_slots - (size_t)i - 1) * sizeof *dev->slots);
  dev->n_slots--;
  if (dev->pending == 0) {
    pthread_mutex_unlock(&dev->mu);
    free(buf);
    return;
  }
  /* Freed after the work queued so far on every stream: behind it on the
   * default stream when only that one has work, else after a wait. */
  int side_busy = dev->pending != dev->def.pending;
  pthread_mutex_unlock(&dev->mu);
  sim_task *t = side_busy ? NULL : calloc(1, sizeof *t);
  if (t == NULL) { /* wait for the streams instead */
    sim__drain(dev, 0);
    free(buf);
    return;
  }
  t->kind = SIM_TASK_FREE;
  t->owned = buf;
  sim__enqueue(dev, t);
}

void sim__free_table(sim_device *dev) {
  for (size_t i = 0; i < dev->n_slots; i++)
    free(dev->slots[i].buf);
  free(dev->slots);
  dev->slots = NULL;
  dev->n_slots = dev->cap_slots = 0;
  dev->in_use = 0;
}

/* Resolves `handle` + [offset, offset + nbytes) under dev->mu; errors name
 * the copy's direction. */
static int resolve_range(sim_device *dev, const void *handle, size_t offset,
                         size_t nbytes, const char *what, char **out) {
  char *buf;
  size_t size;
  pthread_mutex_lock(&dev->mu);
  int st = sim__resolve_locked(dev, handle, &buf, &size);
  pthread_mutex_unlock(&dev->mu);
  if (st != TORC_OK)
    return st;
  if (offset > size || nbytes > size - offset)
    return sim__g.host->set_error(
        TORC_ERR_INTERNAL,
        "sim:%d: %s of %zu bytes at offset %zu overruns the %zu-byte "
        "allocation %p",
        dev->index, what, nbytes, offset, size, handle);
  *out = buf + offset;
  return TORC_OK;
}

/* The live pinned block holding [p, p + n), with one more copy in flight,
 * or NULL when p is not pinned memory from this plugin. */
static sim_pin *pin_acquire(const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p;
  pthread_mutex_lock(&sim__g.pin_mu);
  sim_pin *pin = sim__g.pins;
  for (; pin; pin = pin->next) {
    uintptr_t b = (uintptr_t)pin->ptr;
    if (!pin->dead && a >= b && a - b <= pin->size && n <= pin->size - (a - b))
      break;
  }
  if (pin)
    pin->in_flight++;
  pthread_mutex_unlock(&sim__g.pin_mu);
  return pin;
}

/* Unlinks and frees `pin`; called with pin_mu held. */
static void pin_destroy_locked(sim_pin *pin) {
  sim_pin **pp = &sim__g.pins;
  while (*pp != pin)
    pp = &(*pp)->next;
  *pp = pin->next;
  free(pin->ptr);
  free(pin);
}

void sim__pin_done(sim_pin *pin) {
  pthread_mutex_lock(&sim__g.pin_mu);
  if (--pin->in_flight == 0 && pin->dead)
    pin_destroy_locked(pin);
  pthread_mutex_unlock(&sim__g.pin_mu);
}

void sim__free_pins(void) {
  while (sim__g.pins) {
    sim_pin *next = sim__g.pins->next;
    free(sim__g.pins->ptr);
    free(sim__g.pins);
    sim__g.pins = next;
  }
}

/* A copy task of nbytes from src to dst (both host buffers standing for
 * the device's memory, or pinned memory), for device `index`'s messages;
 * NULL after set_error when the host is out of memory. */
static sim_task *copy_task(int index, void *dst, const void *src,
                           size_t nbytes) {
  sim_task *t = calloc(1, sizeof *t);
  if (t == NULL) {
    sim__g.host->set_error(TORC_ERR_OOM,
                           "sim:%d: out of host memory queueing a %zu-byte "
                           "copy",
                           index, nbytes);
    return NULL;
  }
  t->kind = SIM_TASK_COPY;
  t->dst = dst;
  t->src = src;
  t->nbytes = nbytes;
  return t;
}

int sim__copy_from_host(void *user, int index, void *dst, size_t dst_offset,
                        const void *src, size_t nbytes, uint32_t flags) {
  return sim__copy_from_host_async(user, index, dst, dst_offset, src, nbytes,
                                   flags, NULL);
}

int sim__copy_from_host_async(void *user, int index, void *dst,
                              size_t dst_offset, const void *src,
                              size_t nbytes, uint32_t flags, void *stream) {
  (void)user;
  sim_device *dev = sim__device(index);
  if (dev == NULL)
    return TORC_ERR_DEVICE;
  sim_stream *on = sim__stream_of(dev, stream);
  if (on == NULL)
    return TORC_ERR_DEVICE;
  char *to;
  int st =
      resolve_range(dev, dst, dst_offset, nbytes, "copy from the host", &to);
  if (st != TORC_OK || nbytes == 0)
    return st;
  sim_task *t = copy_task(index, to, NULL, nbytes);
  if (t == NULL)
    return TORC_ERR_OOM;
  sim_pin *pin =
      (flags & TORC_COPY_ASYNC_PINNED) ? pin_acquire(src, nbytes) : NULL;
  int pinned = pin != NULL;
  if ((flags & TORC_COPY_ASYNC_PINNED) && !pinned) {
    pthread_mutex_lock(&sim__g.pin_mu);
    int warn = !sim__g.warned_unpinned;
    sim__g.warned_unpinned = 1;
    pthread_mutex_unlock(&sim__g.pin_mu);
    if (warn)
      sim__g.host->log(TORC_LOG_WARN,
                       "sim:%d: an asynchronous copy from %p was flagged "
                       "pinned but that memory is not from host_alloc; "
                       "staging it instead (logged once)",
                       index, src);
  }
  if (pinned) {
    /* Queued as is: the caller keeps the pinned block unchanged until the
     * next synchronize (TORC_COPY_ASYNC_PINNED); a host_free before the
     * copy ran is deferred to it (sim__pin_done). */
    t->src = src;
    t->pin = pin;
  } else {
    /* Staged, so the caller may reuse src as soon as we return. */
    t->owned = malloc(nbytes);
    if (t->owned == NULL) {
      free(t);
      return sim__g.host->set_error(TORC_ERR_OOM,
                                    "sim:%d: out of host memory staging a "
                                    "%zu-byte copy to the device",
                                    index, nbytes);
    }
    memcpy(t->owned, src, nbytes);
    t->src = t->owned;
  }
  pthread_mutex_lock(&dev->mu);
  if (pinned)
    dev->n_copies_pinned++;
  else
    dev->n_copies_staged++;
  pthread_mutex_unlock(&dev->mu);
  sim__enqueue_on(on, t);
  return TORC_OK;
}

int sim__copy_to_host(void *user, int index, void *dst, const void *src,
                      size_t src_offset, size_t nbytes) {
  (void)user;
  sim_device *dev = sim__device(index);
  if (dev == NULL)
    return TORC_ERR_DEVICE;
  char *from;
  int st =
      resolve_range(dev, src, src_offset, nbytes, "copy to the host", &from);
  if (st != TORC_OK)
    return st;
  pthread_mutex_lock(&dev->mu);
  dev->n_blocking_reads++;
  dev->n_blocking_bytes += nbytes;
  pthread_mutex_unlock(&dev->mu);
  /* The caller owns `src`: it cannot be freed while we wait, and the buffer
   * behind it does not move. */
  st = sim__drain(dev, 1);
  if (st != TORC_OK)
    return st;
  if (nbytes)
    memcpy(dst, from, nbytes);
  return TORC_OK;
}

int sim__copy_to_host_async(void *user, int index, void *dst, const void *src,
                            size_t src_offset, size_t nbytes, void *stream) {
  (void)user;
  sim_device *dev = sim__device(index);
  if (dev == NULL)
    return TORC_ERR_DEVICE;
  sim_stream *on = sim__stream_of(dev, stream);
  if (on == NULL)
    return TORC_ERR_DEVICE;
  char *from;
  int st = resolve_range(dev, src, src_offset, nbytes,
                         "asynchronous copy to the host", &from);
  if (st != TORC_OK || nbytes == 0)
    return st;
  /* The destination must outlive the copy: pinned memory, whose host_free
   * is deferred until the copies using it ran. */
  sim_pin *pin = pin_acquire(dst, nbytes);
  if (pin == NULL)
    return sim__g.host->set_error(
        TORC_ERR_INVALID,
        "sim:%d: asynchronous copy to %p: that is not %zu bytes of pinned "
        "memory from host_alloc (allocate the destination with "
        "torc_empty_pinned)",
        index, dst, nbytes);
  sim_task *t = copy_task(index, dst, from, nbytes);
  if (t == NULL) {
    sim__pin_done(pin);
    return TORC_ERR_OOM;
  }
  t->pin = pin;
  pthread_mutex_lock(&dev->mu);
  dev->n_async_reads++;
  pthread_mutex_unlock(&dev->mu);
  sim__enqueue_on(on, t);
  return TORC_OK;
}

int sim__copy_device_to_device(void *user, int dst_index, void *dst,
                               size_t dst_offset, int src_index,
                               const void *src, size_t src_offset,
                               size_t nbytes, void *stream) {
  (void)user;
  sim_device *sd = sim__device(src_index);
  sim_device *dd = sd ? sim__device(dst_index) : NULL;
  if (dd == NULL)
    return TORC_ERR_DEVICE;
  sim_stream *on = sim__stream_of(sd, stream);
  if (on == NULL)
    return TORC_ERR_DEVICE;
  char *from, *to;
  int st = resolve_range(sd, src, src_offset, nbytes,
                         "device-to-device copy (source)", &from);
  if (st == TORC_OK)
    st = resolve_range(dd, dst, dst_offset, nbytes,
                       "device-to-device copy (destination)", &to);
  if (st != TORC_OK || nbytes == 0)
    return st;
  sim_task *t = copy_task(src_index, to, from, nbytes);
  if (t == NULL)
    return TORC_ERR_OOM;
  pthread_mutex_lock(&sd->mu);
  sd->n_d2d++;
  pthread_mutex_unlock(&sd->mu);
  sim__enqueue_on(on, t);
  return TORC_OK;
}

int sim__host_alloc(void *user, size_t nbytes, void **out) {
  (void)user;
  *out = NULL;
  char want[32];
  sim__human_bytes(nbytes, want, sizeof want);
  sim_pin *pin = calloc(1, sizeof *pin);
  /* Page-aligned, as page-locked memory is. */
  if (pin == NULL || posix_memalign(&pin->ptr, 4096, nbytes ? nbytes : 1)) {
    free(pin);
    return sim__g.host->set_error(TORC_ERR_OOM,
                                  "sim: out of host memory allocating %zu "
                                  "bytes (%s) of pinned memory",
                                  nbytes, want);
  }
  pin->size = nbytes;
  pthread_mutex_lock(&sim__g.pin_mu);
  sim__g.n_host_allocs++;
  pin->next = sim__g.pins;
  sim__g.pins = pin;
  pthread_mutex_unlock(&sim__g.pin_mu);
  *out = pin->ptr;
  return TORC_OK;
}

void sim__host_free(void *user, void *ptr) {
  (void)user;
  if (ptr == NULL || !sim__g.live) /* after teardown every block is gone */
    return;
  pthread_mutex_lock(&sim__g.pin_mu);
  sim_pin *pin = sim__g.pins;
  while (pin && (pin->ptr != ptr || pin->dead))
    pin = pin->next;
  if (pin && pin->in_flight == 0)
    pin_destroy_locked(pin);
  else if (pin) /* queued copies still read it: the last one frees it */
    pin->dead = 1;
  pthread_mutex_unlock(&sim__g.pin_mu);
  if (pin == NULL)
    sim__g.host->log(TORC_LOG_ERROR,
                     "sim: host_free of %p, which is not pinned memory from "
                     "this plugin (double free?); ignored",
                     ptr);
}
