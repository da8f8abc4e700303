/* tests/plugins/no_entry.c — a shared object that looks like a plugin but
 * exports its descriptor under the wrong name (torc_plugin_entrypoint), so
 * dlsym("torc_plugin_entry") fails and the loader must say so. */
#include "torc/plugin.h"

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entrypoint(void);

static int no_entry_init(const torc_host *host, torc_plugin *self) {
  (void)self;
  host->log(TORC_LOG_ERROR, "no_entry: init called through a wrong symbol");
  return TORC_OK;
}

static const torc_plugin_info no_entry_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "no_entry",
    .version = "0.0.1",
    .description = "test plugin exporting a misspelt entry symbol",
    .init = no_entry_init,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entrypoint(void) {
  return &no_entry_info;
}
