/* tests/plugins/noop_device.h — the device type that test plugins register
 * only to check that a failed load rolls it back (init_fail, typo_op): one
 * device, whose memory must never be used. The includer first declares
 * its host pointer and defines NOOP_DEVICE_HOST (that pointer's name) and
 * NOOP_DEVICE_USED (the message of an allocation). */
#ifndef TORC_TEST_NOOP_DEVICE_H
#define TORC_TEST_NOOP_DEVICE_H

#include "torc/plugin.h"

static inline int noop_device_count(void *user) {
  (void)user;
  return 1;
}

static inline int noop_device_alloc(void *user, int index, size_t nbytes,
                                    void **out) {
  (void)user, (void)index, (void)nbytes, (void)out;
  return NOOP_DEVICE_HOST->set_error(TORC_ERR_INTERNAL, NOOP_DEVICE_USED);
}

static inline void noop_device_free(void *user, int index, void *ptr) {
  (void)user, (void)index, (void)ptr;
}

static inline int noop_device_copy_from(void *user, int index, void *dst,
                                        size_t off, const void *src, size_t n,
                                        uint32_t flags) {
  (void)user, (void)index, (void)dst, (void)off, (void)src, (void)n,
      (void)flags;
  return TORC_ERR_INTERNAL;
}

static inline int noop_device_copy_to(void *user, int index, void *dst,
                                      const void *src, size_t off, size_t n) {
  (void)user, (void)index, (void)dst, (void)src, (void)off, (void)n;
  return TORC_ERR_INTERNAL;
}

static inline int noop_device_sync(void *user, int index) {
  (void)user, (void)index;
  return TORC_OK;
}

/* The device table of type `type` over the callbacks above. */
static inline torc_device_ops noop_device_ops(const char *type) {
  torc_device_ops dev = {
      .struct_size = sizeof dev,
      .type = type,
      .count = noop_device_count,
      .alloc = noop_device_alloc,
      .free = noop_device_free,
      .copy_from_host = noop_device_copy_from,
      .copy_to_host = noop_device_copy_to,
      .synchronize = noop_device_sync,
  };
  return dev;
}

#endif /* TORC_TEST_NOOP_DEVICE_H */
