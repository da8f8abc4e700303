/* plugins/ref/ref.c — the reference backend plugin: registers every kernel
 * of torc_ref_kernels[] for the core's built-in "cpu" device, at priority
 * 0, so that a faster cpu plugin registering higher takes precedence.
 */
#include "ref_util.h"

static int ref_init(const torc_host *host, torc_plugin *self) {
  if (!TORC_HAS_SLOT(host, torc_host, set_error) ||
      !TORC_HAS_SLOT(host, torc_host, register_kernel) ||
      host->set_error == NULL || host->register_kernel == NULL)
    return TORC_ERR_ABI; /* no way to report more: the core names us */
  torc_ref_set_error = host->set_error;
  for (size_t i = 0; i < torc_ref_n_kernels; i++) {
    const torc_ref_kernel *k = &torc_ref_kernels[i];
    torc_kernel_reg reg = {
        .struct_size = sizeof reg,
        .device_type = "cpu",
        .op = k->op,
        .dtype = k->dtype,
        .priority = 0,
        .fn = k->fn,
        .data = NULL,
        .flags = k->flags,
    };
    int st = host->register_kernel(self, &reg);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}

static const torc_plugin_info ref_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "ref",
    .version = "0.1.0",
    .description = "reference kernels for cpu: plain portable C, the oracle "
                   "every backend is tested against",
    .provides = TORC_PROVIDES_KERNELS,
    .flags = 0,
    .keys = NULL,
    .init = ref_init,
    .fini = NULL,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &ref_info;
}
