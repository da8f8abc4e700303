/* tests/plugins/goodkeys.c — a valid plugin declaring two keys (devices,
 * greeting) that registers device type "testdev", backed by host memory.
 * Its tables are written as by a plugin built against an older minor
 * version: the descriptor stops before `fini` and the device table before
 * `host_alloc`; the slots past struct_size hold functions that report
 * being called, so tests/test_plugin_keys.c can check the core honours
 * struct_size. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/plugin.h"

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

#define GOODKEYS_MAX_DEVICES 4

/* Marks that the file was mapped: dlopen runs constructors before the core
 * sees the entry symbol, so a file the loader refuses for its permissions
 * must never get this far (tests/test_plugin_keys.c checks it). */
__attribute__((constructor)) static void gk_mapped(void) {
  setenv("TORC_TEST_GOODKEYS_MAPPED", "1", 1);
}

static const torc_host *gk_host;
static int gk_devices;

static int gk_count(void *user) {
  (void)user;
  return gk_devices;
}

static int gk_alloc(void *user, int index, size_t nbytes, void **out) {
  (void)user;
  void *p = malloc(nbytes > 0 ? nbytes : 1);
  if (p == NULL)
    return gk_host->set_error(TORC_ERR_OOM,
                              "testdev:%d: cannot allocate %zu bytes", index,
                              nbytes);
  *out = p;
  return TORC_OK;
}

static void gk_free(void *user, int index, void *ptr) {
  (void)user, (void)index;
  free(ptr);
}

static int gk_copy_from_host(void *user, int index, void *dst,
                             size_t dst_offset, const void *src, size_t nbytes,
                             uint32_t flags) {
  (void)user, (void)index, (void)flags;
  if (nbytes > 0)
    memcpy((char *)dst + dst_offset, src, nbytes);
  return TORC_OK;
}

static int gk_copy_to_host(void *user, int index, void *dst, const void *src,
                           size_t src_offset, size_t nbytes) {
  (void)user, (void)index;
  if (nbytes > 0)
    memcpy(dst, (const char *)src + src_offset, nbytes);
  return TORC_OK;
}

static int gk_synchronize(void *user, int index) {
  (void)user, (void)index;
  return TORC_OK;
}

/* ---- slots that lie beyond the struct_size the tables declare ---- */

static int gk_beyond_host_alloc(void *user, size_t nbytes, void **out) {
  (void)user, (void)nbytes, (void)out;
  return gk_host->set_error(TORC_ERR_INTERNAL,
                            "goodkeys: host_alloc called although it lies "
                            "beyond the device table's struct_size");
}

static void gk_beyond_host_free(void *user, void *ptr) {
  (void)user, (void)ptr;
  gk_host->log(TORC_LOG_ERROR, "goodkeys: host_free called although it lies "
                               "beyond the device table's struct_size");
}

static int gk_beyond_describe(void *user, int index, char *buf, size_t size) {
  (void)user, (void)index, (void)buf, (void)size;
  gk_host->log(TORC_LOG_ERROR, "goodkeys: describe called although it lies "
                               "beyond the device table's struct_size");
  return TORC_ERR_INTERNAL;
}

static void gk_beyond_shutdown(void *user) {
  (void)user;
  gk_host->log(TORC_LOG_ERROR, "goodkeys: shutdown called although it lies "
                               "beyond the device table's struct_size");
}

static void gk_beyond_fini(torc_plugin *self) {
  (void)self;
  gk_host->log(TORC_LOG_ERROR, "goodkeys: fini called although it lies "
                               "beyond the descriptor's struct_size");
}

static int gk_init(const torc_host *host, torc_plugin *self) {
  gk_host = host;
  /* Lets tests/test_abi.c check the table the core hands out. */
  host->log(TORC_LOG_DEBUG, "goodkeys: host table %zu bytes, ABI %u.%u",
            host->struct_size, (unsigned)host->abi_major,
            (unsigned)host->abi_minor);

  const char *devices = host->config_get(self, "devices");
  const char *greeting = host->config_get(self, "greeting");
  char *end = NULL;
  long n = devices ? strtol(devices, &end, 10) : -1;
  if (devices == NULL || end == devices || *end != '\0' || n < 0 ||
      n > GOODKEYS_MAX_DEVICES)
    return host->set_error(TORC_ERR_CONFIG,
                           "goodkeys: devices = '%s' is not a number from 0 "
                           "to %d; set devices = 0..%d in [plugin.goodkeys]",
                           devices ? devices : "(null)", GOODKEYS_MAX_DEVICES,
                           GOODKEYS_MAX_DEVICES);
  gk_devices = (int)n;
  host->log(TORC_LOG_INFO, "goodkeys: init, %d devices, greeting '%s'",
            gk_devices, greeting ? greeting : "(null)");

  /* A full table whose struct_size stops before the optional slots. */
  torc_device_ops ops = {
      .struct_size = offsetof(torc_device_ops, host_alloc),
      .type = "testdev",
      .count = gk_count,
      .alloc = gk_alloc,
      .free = gk_free,
      .copy_from_host = gk_copy_from_host,
      .copy_to_host = gk_copy_to_host,
      .synchronize = gk_synchronize,
      .host_alloc = gk_beyond_host_alloc,
      .host_free = gk_beyond_host_free,
      .describe = gk_beyond_describe,
      .shutdown = gk_beyond_shutdown,
  };
  return host->register_device(self, &ops);
}

static const torc_plugin_key gk_keys[] = {
    {"devices", "number of testdev devices, 0..4", "1"},
    {"greeting", "a line the plugin logs at init", "hello"},
    {NULL, NULL, NULL},
};

static const torc_plugin_info gk_info = {
    /* As a plugin built before `fini` existed: the slot is filled but lies
     * outside the declared size, so the core must not call it. */
    .struct_size = offsetof(torc_plugin_info, fini),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = 0,
    .name = "goodkeys",
    .version = "1.2.3",
    .description = "test plugin with keys and a host-memory device",
    .provides = TORC_PROVIDES_DEVICE,
    .keys = gk_keys,
    .init = gk_init,
    .fini = gk_beyond_fini,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &gk_info;
}
