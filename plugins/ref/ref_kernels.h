/* plugins/ref/ref_kernels.h — the reference kernels as a table, shared by the
 * ref plugin (which registers them for device "cpu") and the sim plugin
 * (which runs them on its worker thread over its own memory). Internal to
 * the build: not installed, not part of the ABI.
 */
#ifndef TORC_REF_KERNELS_H
#define TORC_REF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "torc/plugin.h"

/* One reference kernel: the op's name, the dtype it is registered for (or
 * TORC_DTYPE_ANY), the function and TORC_KERNEL_* flags. The function
 * receives host pointers in every torc_ktensor.data. */
typedef struct torc_ref_kernel {
  const char *op;
  int32_t dtype;
  torc_kernel_fn fn;
  uint32_t flags;
} torc_ref_kernel;

/* Every reference kernel; torc_ref_n_kernels entries. */
extern const torc_ref_kernel torc_ref_kernels[];
extern const size_t torc_ref_n_kernels;

/* The error-reporting function kernels use (set by the plugin's init to its
 * host->set_error; kernels must not call it before). */
extern int (*torc_ref_set_error)(int status, const char *fmt, ...);

#endif /* TORC_REF_KERNELS_H */
