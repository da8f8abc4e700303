/* tests/plugins/short_info.c — a plugin whose descriptor declares the
 * right ABI major but a struct_size that stops before `init`, as one built
 * from a truncated or pre-release header would: the core must refuse it
 * (TORC_ERR_ABI) without reading or calling the slot past the size. */
#include "torc/plugin.h"

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

static int short_info_init(const torc_host *host, torc_plugin *self) {
  (void)self;
  host->log(TORC_LOG_ERROR, "short_info: init called although it lies "
                            "beyond the descriptor's struct_size");
  return TORC_OK;
}

static const torc_plugin_info short_info_info = {
    .struct_size = offsetof(torc_plugin_info, init),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "short_info",
    .version = "0.0.1",
    .description = "test plugin whose descriptor ends before init",
    .init = short_info_init,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &short_info_info;
}
