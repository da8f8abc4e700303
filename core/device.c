/* core/device.c — the device-type registry: the built-in "cpu" (host
 * memory, 64-byte aligned) and the types plugins register; device names,
 * parsing, memory accounting and synchronisation.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"
#include "stream_internal.h"

static torc__devtype devtypes[TORC__MAX_DEVICE_TYPES];
static pthread_mutex_t devtypes_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the built-in cpu device ---- */

static int cpu_count(void *user) { return 1; }

/* Blocks from this size on are 2 MiB aligned and advised for transparent
 * huge pages: one fault maps 2 MiB instead of 4 KiB. */
#define HUGE_BLOCK ((size_t)2 << 20)

static int cpu_alloc(void *user, int index, size_t nbytes, void **out) {
  /* Round up so aligned_alloc's size is a multiple of the alignment. */
  size_t n = (nbytes + 63) & ~(size_t)63;
  void *p = NULL;
  if (n >= HUGE_BLOCK) {
    if (posix_memalign(&p, HUGE_BLOCK, n) != 0)
      p = NULL;
#ifdef MADV_HUGEPAGE
    else
      madvise(p, n, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
  } else {
    p = aligned_alloc(64, n ? n : 64);
  }
  if (p == NULL)
    return torc_set_error(TORC_ERR_OOM,
                          "out of host memory allocating %zu bytes on cpu",
                          nbytes);
  *out = p;
  return TORC_OK;
}

static void cpu_free(void *user, int index, void *ptr) { free(ptr); }

static int cpu_copy_from_host(void *user, int index, void *dst, size_t off,
                              const void *src, size_t n, uint32_t flags) {
  if (n)
    memcpy((char *)dst + off, src, n);
  return TORC_OK;
}

static int cpu_copy_to_host(void *user, int index, void *dst, const void *src,
                            size_t off, size_t n) {
  if (n)
    memcpy(dst, (const char *)src + off, n);
  return TORC_OK;
}

static int cpu_sync(void *user, int index) { return TORC_OK; }

static int cpu_describe(void *user, int index, char *buf, size_t size) {
  snprintf(buf, size, "host memory");
  return TORC_OK;
}

static const torc_device_ops cpu_ops = {
    .struct_size = sizeof(torc_device_ops),
    .type = "cpu",
    .count = cpu_count,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_from_host = cpu_copy_from_host,
    .copy_to_host = cpu_copy_to_host,
    .synchronize = cpu_sync,
    .describe = cpu_describe,
};

/* ---- registry ---- */

static int valid_type_name(const char *s) {
  if (s == NULL || *s == '\0' || strlen(s) >= TORC_DEVICE_TYPE_MAX)
    return 0;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '_')
      return 0;
  return 1;
}

static int register_locked(torc__plugin *owner, const torc_device_ops *ops,
                           int slot) {
  torc__devtype *d = &devtypes[slot];
  memset(d, 0, sizeof *d);
  size_t n = ops->struct_size < sizeof(torc_device_ops) ? ops->struct_size
                                                          : sizeof(torc_device_ops);
  memcpy(&d->ops, ops, n);
  d->ops.struct_size = sizeof(torc_device_ops);
  d->id = slot;
  snprintf(d->name, sizeof d->name, "%s", ops->type);
  d->owner = owner;
  int count = ops->count(ops->user);
  d->count = count < 0 ? 0 : count;
  size_t n_idx = (size_t)(d->count > 0 ? d->count : 1);
  d->allocated = torc__calloc(2 * n_idx, sizeof(size_t));
  d->limit = d->allocated ? d->allocated + n_idx : NULL;
  if (d->allocated == NULL) { /* -1, not the status: callers want an id */
    torc_set_error(TORC_ERR_OOM, "out of memory registering device %s",
                   ops->type);
    return -1;
  }
  /* The memory statistics, and the cache of the cpu device and of those
   * that ask for one (alloc.c). */
  if (torc__cache_create(d) != TORC_OK) {
    torc__free((void *)d->allocated);
    return -1;
  }
  __atomic_store_n(&d->used, 1, __ATOMIC_RELEASE);
  return slot;
}

torc_status torc__device_init_cpu(void);
torc_status torc__device_init_cpu(void) {
  /* Every allocation passes here: no lock once the cpu type exists. */
  if (__atomic_load_n(&devtypes[0].used, __ATOMIC_ACQUIRE))
    return TORC_OK;
  torc_status st = TORC_OK;
  pthread_mutex_lock(&devtypes_lock);
  /* Out of memory leaves the slot free: the next call tries again. */
  if (!devtypes[0].used && register_locked(NULL, &cpu_ops, 0) < 0)
    st = torc_last_status();
  pthread_mutex_unlock(&devtypes_lock);
  return st;
}

int torc__devtype_register(torc__plugin *owner, const torc_device_ops *ops) {
  const char *who = owner ? torc__plugin_name(owner) : "core";
  if (ops == NULL || ops->struct_size < offsetof(torc_device_ops, synchronize) +
                                            sizeof(ops->synchronize)) {
    torc_set_error(TORC_ERR_PLUGIN,
                   "plugin %s: register_device: table too small (struct_size "
                   "%zu); rebuild the plugin against this torc",
                   who, ops ? ops->struct_size : (size_t)0);
    return -1;
  }
  if (!valid_type_name(ops->type)) {
    torc_set_error(TORC_ERR_PLUGIN,
                   "plugin %s: register_device: invalid type name '%s' (use "
                   "letters, digits and '_', at most %d characters)",
                   who, ops->type ? ops->type : "(null)",
                   TORC_DEVICE_TYPE_MAX - 1);
    return -1;
  }
  if (!ops->count || !ops->alloc || !ops->free || !ops->copy_from_host ||
      !ops->copy_to_host || !ops->synchronize) {
    torc_set_error(TORC_ERR_PLUGIN,
                   "plugin %s: register_device '%s': the count, alloc, free, "
                   "copy_from_host, copy_to_host and synchronize slots are "
                   "required",
                   who, ops->type);
    return -1;
  }
  if (torc__ensure_init() != TORC_OK)
    return -1;
  pthread_mutex_lock(&devtypes_lock);
  int free_slot = -1;
  for (int i = 0; i < TORC__MAX_DEVICE_TYPES; i++) {
    if (devtypes[i].used && strcmp(devtypes[i].name, ops->type) == 0) {
      pthread_mutex_unlock(&devtypes_lock);
      const char *by =
          devtypes[i].owner ? torc__plugin_name(devtypes[i].owner) : "the core";
      torc_set_error(TORC_ERR_PLUGIN,
                     "plugin %s: device type '%s' is already registered by %s; "
                     "load only one plugin providing it",
                     who, ops->type, by);
      return -1;
    }
    if (!devtypes[i].used && free_slot < 0 && i > 0)
      free_slot = i;
  }
  if (free_slot < 0) {
    pthread_mutex_unlock(&devtypes_lock);
    torc_set_error(TORC_ERR_PLUGIN,
                   "plugin %s: cannot register device type '%s': all %d device "
                   "type slots are taken",
                   who, ops->type, TORC__MAX_DEVICE_TYPES);
    return -1;
  }
  int id = register_locked(owner, &(*ops), free_slot);
  pthread_mutex_unlock(&devtypes_lock);
  return id;
}

static void devtype_drop(torc__devtype *d) {
  for (int i = 0; i < d->count; i++)
    if (d->allocated[i])
      torc_logf(TORC_LOG_WARN,
               "device %s:%d still has %zu bytes allocated at unload "
               "(tensors not released)",
               d->name, i, (size_t)d->allocated[i]);
  torc__cache_destroy(d);
  torc__streams_drop_type(d->id);
  if (d->ops.shutdown)
    d->ops.shutdown(d->ops.user);
  torc__free((void *)d->allocated);
  memset(d, 0, sizeof *d);
}

void torc__devtype_unregister_owner(torc__plugin *owner) {
  pthread_mutex_lock(&devtypes_lock);
  for (int i = 1; i < TORC__MAX_DEVICE_TYPES; i++)
    if (devtypes[i].used && devtypes[i].owner == owner)
      devtype_drop(&devtypes[i]);
  pthread_mutex_unlock(&devtypes_lock);
}

void torc__devtypes_clear(void);
void torc__devtypes_clear(void) {
  pthread_mutex_lock(&devtypes_lock);
  for (int i = 0; i < TORC__MAX_DEVICE_TYPES; i++)
    if (devtypes[i].used)
      devtype_drop(&devtypes[i]);
  pthread_mutex_unlock(&devtypes_lock);
}

torc__devtype *torc__devtype_get(int type) {
  if (type < 0 || type >= TORC__MAX_DEVICE_TYPES || !devtypes[type].used)
    return NULL;
  return &devtypes[type];
}

int torc__devtype_find(const char *name) {
  for (int i = 0; i < TORC__MAX_DEVICE_TYPES; i++)
    if (devtypes[i].used && strcmp(devtypes[i].name, name) == 0)
      return i;
  return -1;
}

const char *torc_device_type_name(int type) {
  torc__devtype *d = torc__devtype_get(type);
  return d ? d->name : NULL;
}

int torc_device_count(const char *type_name) {
  torc__ensure_init();
  int id = type_name ? torc__devtype_find(type_name) : -1;
  return id < 0 ? -1 : devtypes[id].count;
}

torc_status torc_device_none_reason(const char *type_name, char *buf,
                                    size_t size) {
  torc__ensure_init();
  if (buf == NULL || size == 0)
    return TORC_ERR_DEVICE;
  buf[0] = '\0';
  int id = type_name ? torc__devtype_find(type_name) : -1;
  if (id < 0 || devtypes[id].count != 0 || !devtypes[id].ops.no_device_reason)
    return TORC_ERR_DEVICE;
  int st = devtypes[id].ops.no_device_reason(devtypes[id].ops.user, buf, size);
  torc_clear_error(); /* a reason, not a pending failure */
  if (st != TORC_OK || buf[0] == '\0') {
    buf[0] = '\0';
    return TORC_ERR_DEVICE;
  }
  return TORC_OK;
}

/* "cpu (1), sim (2)" — the registered types, for messages. */
static void list_types(char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < TORC__MAX_DEVICE_TYPES && len < size; i++)
    if (devtypes[i].used)
      len += (size_t)snprintf(buf + len, size - len, "%s%s (%d device%s)",
                              len ? ", " : "", devtypes[i].name,
                              devtypes[i].count,
                              devtypes[i].count == 1 ? "" : "s");
}

torc_status torc_device_parse(const char *name, torc_device *out) {
  torc_status st0 = torc__ensure_init();
  if (st0 != TORC_OK)
    return st0;
  char types[512];
  if (name == NULL)
    return torc_set_error(TORC_ERR_DEVICE, "device name is NULL");
  const char *colon = strchr(name, ':');
  size_t tlen = colon ? (size_t)(colon - name) : strlen(name);
  char tname[TORC_DEVICE_TYPE_MAX];
  if (tlen == 0 || tlen >= sizeof tname) {
    list_types(types, sizeof types);
    return torc_set_error(TORC_ERR_DEVICE,
                          "invalid device name '%s'; expected TYPE or "
                          "TYPE:INDEX, e.g. cpu or sim:0 (registered: %s)",
                          name, types);
  }
  memcpy(tname, name, tlen);
  tname[tlen] = '\0';
  long index = 0;
  if (colon) {
    char *end;
    errno = 0;
    index = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || errno || index < 0 ||
        index > INT16_MAX)
      return torc_set_error(TORC_ERR_DEVICE,
                            "invalid device index in '%s'; expected a number "
                            "after ':', e.g. %s:0",
                            name, tname);
  }
  int id = torc__devtype_find(tname);
  if (id < 0) {
    list_types(types, sizeof types);
    return torc_set_error(TORC_ERR_DEVICE,
                          "unknown device type '%s' in '%s'; registered: %s. "
                          "Load the plugin that provides it ([plugin.NAME] "
                          "in the config, or torc_plugin_load)",
                          tname, name, types);
  }
  /* The plugin may know why it found nothing (the driver's own words)
   * and what to do instead: its sentence replaces the generic one. */
  char why[512];
  if (devtypes[id].count == 0 &&
      torc_device_none_reason(tname, why, sizeof why) == TORC_OK)
    return torc_set_error(TORC_ERR_DEVICE,
                          "device '%s' does not exist: %s has 0 devices: %s",
                          name, tname, why);
  if (index >= devtypes[id].count)
    return torc_set_error(TORC_ERR_DEVICE,
                          "device '%s' does not exist: %s has %d device%s%s",
                          name, tname, devtypes[id].count,
                          devtypes[id].count == 1 ? "" : "s",
                          devtypes[id].count == 0
                              ? " (its plugin found no hardware)"
                              : "");
  out->type = (int16_t)id;
  out->index = (int16_t)index;
  return TORC_OK;
}

char *torc_device_str(torc_device dev, char *buf, size_t size) {
  const char *n = torc_device_type_name(dev.type);
  if (n == NULL)
    snprintf(buf, size, "<unknown device type %d>:%d", dev.type, dev.index);
  else if (dev.type == 0)
    snprintf(buf, size, "%s", n);
  else
    snprintf(buf, size, "%s:%d", n, dev.index);
  return buf;
}

const char *torc__devname(torc_device dev) {
  static _Thread_local char bufs[4][TORC_DEVICE_TYPE_MAX + 16];
  static _Thread_local int next;
  char *b = bufs[next++ & 3];
  return torc_device_str(dev, b, sizeof bufs[0]);
}

torc_status torc__device_check(torc_device dev, const char *what) {
  torc__devtype *d = torc__devtype_get(dev.type);
  if (d == NULL)
    return torc_set_error(TORC_ERR_DEVICE,
                          "%s: device type id %d is not registered (was its "
                          "plugin unloaded?); parse devices with "
                          "torc_device_parse",
                          what, dev.type);
  if (dev.index < 0 || dev.index >= d->count)
    return torc_set_error(TORC_ERR_DEVICE,
                          "%s: device %s:%d does not exist (%s has %d)", what,
                          d->name, dev.index, d->name, d->count);
  return TORC_OK;
}

int torc_device_is_host(torc_device dev) { return dev.type == 0; }

torc_status torc_device_describe(torc_device dev, char *buf, size_t size) {
  torc_status st = torc__device_check(dev, "torc_device_describe");
  if (st)
    return st;
  torc__devtype *d = torc__devtype_get(dev.type);
  if (size == 0)
    return TORC_OK;
  buf[0] = '\0';
  if (d->ops.describe &&
      d->ops.describe(d->ops.user, dev.index, buf, size) == TORC_OK &&
      buf[0] != '\0')
    return TORC_OK;
  torc_device_str(dev, buf, size);
  return TORC_OK;
}

torc_status torc_synchronize(torc_device dev) {
  torc_status st = torc__device_check(dev, "torc_synchronize");
  if (st)
    return st;
  torc__devtype *d = torc__devtype_get(dev.type);
  return (torc_status)d->ops.synchronize(d->ops.user, dev.index);
}

size_t torc_device_memory_allocated(torc_device dev) {
  torc__devtype *d = torc__devtype_get(dev.type);
  if (d == NULL || dev.index < 0 || dev.index >= d->count)
    return 0;
  return d->allocated[dev.index];
}

torc_status torc_device_set_memory_limit(torc_device dev, size_t bytes) {
  torc_status st = torc__device_check(dev, "torc_device_set_memory_limit");
  if (st)
    return st;
  torc__devtype *d = torc__devtype_get(dev.type);
  d->limit[dev.index] = bytes;
  return TORC_OK;
}

size_t torc_device_memory_limit(torc_device dev) {
  torc__devtype *d = torc__devtype_get(dev.type);
  if (d == NULL || dev.index < 0 || dev.index >= d->count)
    return 0;
  return d->limit[dev.index];
}

void *torc_host_alloc(torc_device dev, size_t nbytes) {
  if (torc__device_check(dev, "torc_host_alloc"))
    return NULL;
  torc__devtype *d = torc__devtype_get(dev.type);
  void *p = NULL;
  if (torc__alloc_fault()) { /* torc/testing.h's injected failure */
    torc_set_error(TORC_ERR_OOM,
                   "out of host memory allocating %zu bytes for %s "
                   "(an injected failure)",
                   nbytes, torc__devname(dev));
    return NULL;
  }
  if (d->ops.host_alloc) {
    if (d->ops.host_alloc(d->ops.user, nbytes, &p) != TORC_OK)
      return NULL;
    return p;
  }
  if (cpu_alloc(NULL, 0, nbytes, &p) != TORC_OK)
    return NULL;
  return p;
}

void torc_host_free(torc_device dev, void *ptr) {
  if (ptr == NULL)
    return;
  torc__devtype *d = torc__devtype_get(dev.type);
  if (d && d->ops.host_alloc && d->ops.host_free)
    d->ops.host_free(d->ops.user, ptr);
  else
    free(ptr);
}
