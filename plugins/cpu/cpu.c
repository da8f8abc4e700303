/* plugins/cpu/cpu.c — the cpu plugin: OpenBLAS-backed kernels for the
 * core's "cpu" device at a priority above ref (which keeps every op this
 * plugin does not serve), with OpenBLAS's threads set from [torc] threads.
 * `torc test-backend cpu` certifies it against ref by pinning the
 * dispatcher to each provider in turn.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

int (*torc_cpu__set_error)(int status, const char *fmt, ...) = NULL;

/* Kernels registered at ref's priority + this. */
enum { CPU_PRIORITY = 10 };

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

static int cpu_init(const torc_host *host, torc_plugin *self) {
  if (!TORC_HAS_SLOT(host, torc_host, num_threads) || !host->set_error ||
      !host->register_kernel || !host->num_threads)
    return TORC_ERR_ABI; /* no way to report more: the core names us */
  torc_cpu__set_error = host->set_error;
  torc_cpu__threads(host->num_threads());
  return register_fast(host, self, "cpu");
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
    .keys = NULL,
    .init = cpu_init,
    .fini = NULL,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);
TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &cpu_info;
}
