/* tests/plugins/bad_abi.c — a well-formed plugin that declares the next ABI
 * major version, as a plugin built against a future, incompatible torc
 * would. The loader must refuse it (TORC_ERR_ABI) without calling init. */
#include "torc/plugin.h"

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

/* Never called by a correct loader: says so loudly if it is. */
static int bad_abi_init(const torc_host *host, torc_plugin *self) {
  (void)self;
  host->log(TORC_LOG_ERROR, "bad_abi: init called despite the ABI mismatch");
  return TORC_OK;
}

static const torc_plugin_info bad_abi_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR + 1, /* deliberately wrong */
    .abi_minor = 0,
    .name = "bad_abi",
    .version = "0.0.1",
    .description = "test plugin built for the next ABI major version",
    .provides = TORC_PROVIDES_KERNELS,
    .init = bad_abi_init,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &bad_abi_info;
}
