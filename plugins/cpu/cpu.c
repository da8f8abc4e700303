/* plugins/cpu/cpu.c — the cpu plugin: OpenBLAS-backed kernels for the
 * core's "cpu" device at a priority above ref (which keeps every op this
 * plugin does not serve), OpenBLAS's threads set from [torc] threads, and
 * the `certify` mode: the kernels on a second, host-memory device type over
 * ref's, for tests that compare the two across devices (`torc
 * test-backend cpu` itself pins the dispatcher to each provider instead).
 */
#include <stdlib.h>
#include <string.h>

#include "../ref/ref_kernels.h"
#include "cpu_internal.h"

int (*torc_cpu__set_error)(int status, const char *fmt, ...) = NULL;

/* Kernels registered at ref's priority + this. */
enum { CPU_PRIORITY = 10 };

/* The name of the certification device type. */
#define CERTIFY_TYPE "cpu_certify"

static const torc_plugin_key cpu_keys[] = {
    {"certify",
     "yes: leave device cpu to ref and serve a host-memory device type "
     "'" CERTIFY_TYPE "' with these kernels over ref's, so that `torc "
     "test-backend cpu --config FILE` compares the two (no, yes)",
     "no"},
    {NULL, NULL, NULL},
};

typedef struct cpu_kernel {
  const char *op;
  torc_kernel_fn fn;
  uint32_t flags;
} cpu_kernel;

static const cpu_kernel cpu_kernels[] = {
    {"matmul", torc_cpu__k_matmul, 0},
    {"conv2d", torc_cpu__k_conv2d, TORC_KERNEL_CONTIGUOUS},
    {"conv2d_backward_input", torc_cpu__k_conv2d_backward_input,
     TORC_KERNEL_CONTIGUOUS},
    {"conv_transpose2d", torc_cpu__k_conv2d_backward_input,
     TORC_KERNEL_CONTIGUOUS},
    {"conv2d_backward_weight", torc_cpu__k_conv2d_backward_weight,
     TORC_KERNEL_CONTIGUOUS},
};

/* ---- the certification device: plain host memory ---- */

static int cert_count(void *user) {
  (void)user;
  return 1;
}

static int cert_alloc(void *user, int index, size_t nbytes, void **out) {
  (void)user, (void)index;
  *out = malloc(nbytes ? nbytes : 1);
  if (*out == NULL)
    return torc_cpu__set_error(TORC_ERR_OOM,
                               "cpu: " CERTIFY_TYPE " cannot allocate %zu "
                               "bytes of host memory",
                               nbytes);
  return TORC_OK;
}

static void cert_free(void *user, int index, void *ptr) {
  (void)user, (void)index;
  free(ptr);
}

static int cert_from_host(void *user, int index, void *dst, size_t off,
                          const void *src, size_t nbytes, uint32_t flags) {
  (void)user, (void)index, (void)flags;
  if (nbytes)
    memcpy((char *)dst + off, src, nbytes);
  return TORC_OK;
}

static int cert_to_host(void *user, int index, void *dst, const void *src,
                        size_t off, size_t nbytes) {
  (void)user, (void)index;
  if (nbytes)
    memcpy(dst, (const char *)src + off, nbytes);
  return TORC_OK;
}

static int cert_sync(void *user, int index) {
  (void)user, (void)index;
  return TORC_OK;
}

static const torc_device_ops cert_ops = {
    .struct_size = sizeof(torc_device_ops),
    .type = CERTIFY_TYPE,
    .user = NULL,
    .count = cert_count,
    .alloc = cert_alloc,
    .free = cert_free,
    .copy_from_host = cert_from_host,
    .copy_to_host = cert_to_host,
    .synchronize = cert_sync,
};

/* ---- init ---- */

static int register_fast(const torc_host *host, torc_plugin *self,
                         const char *type) {
  static const int32_t dtypes[] = {TORC_F32, TORC_F64};
  for (size_t i = 0; i < sizeof cpu_kernels / sizeof cpu_kernels[0]; i++)
    for (size_t d = 0; d < 2; d++) {
      torc_kernel_reg reg = {
          .struct_size = sizeof reg,
          .device_type = type,
          .op = cpu_kernels[i].op,
          .dtype = dtypes[d],
          .priority = CPU_PRIORITY,
          .fn = cpu_kernels[i].fn,
          .data = NULL,
          .flags = cpu_kernels[i].flags,
      };
      int st = host->register_kernel(self, &reg);
      if (st != TORC_OK)
        return st;
    }
  return TORC_OK;
}

/* The certification device gets every ref kernel (priority 0) under the
 * fast ones, as device cpu has them in normal use. */
static int register_certify(const torc_host *host, torc_plugin *self) {
  int st = host->register_device(self, &cert_ops);
  for (size_t i = 0; st == TORC_OK && i < torc_ref_n_kernels; i++) {
    const torc_ref_kernel *k = &torc_ref_kernels[i];
    torc_kernel_reg reg = {
        .struct_size = sizeof reg,
        .device_type = CERTIFY_TYPE,
        .op = k->op,
        .dtype = k->dtype,
        .priority = 0,
        .fn = k->fn,
        .data = NULL,
        .flags = k->flags,
    };
    st = host->register_kernel(self, &reg);
  }
  return st == TORC_OK ? register_fast(host, self, CERTIFY_TYPE) : st;
}

static int cpu_init(const torc_host *host, torc_plugin *self) {
  if (!TORC_HAS_SLOT(host, torc_host, num_threads) || !host->set_error ||
      !host->config_get || !host->register_kernel || !host->register_device ||
      !host->num_threads)
    return TORC_ERR_ABI; /* no way to report more: the core names us */
  torc_cpu__set_error = host->set_error;
  torc_ref_set_error = host->set_error;
  const char *v = host->config_get(self, "certify");
  int certify = 0;
  if (v && strcmp(v, "yes") == 0)
    certify = 1;
  else if (v && strcmp(v, "no") != 0)
    return host->set_error(TORC_ERR_CONFIG,
                           "cpu: certify = '%s' is not valid; write yes or "
                           "no",
                           v);
  torc_cpu__threads(host->num_threads());
  return certify ? register_certify(host, self)
                 : register_fast(host, self, "cpu");
}

static const torc_plugin_info cpu_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "cpu",
    .version = "0.1.0",
    .description = "fast kernels for cpu: matmul and conv2d (forward and "
                   "backward) through OpenBLAS, f32 and f64",
    .provides = TORC_PROVIDES_KERNELS,
    .flags = 0,
    .keys = cpu_keys,
    .init = cpu_init,
    .fini = NULL,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);
TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &cpu_info;
}
