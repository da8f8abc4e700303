/* tests/plugins/missing_dep.c — a valid plugin linked against
 * libtorc_missing_dep.so.1 (tests/plugins/missing_dep_lib.c), a library
 * that is not on the run-time search path: dlopen fails the way it does
 * for a backend whose vendor library (libcudnn.so.9, ...) is absent. */
#include "torc/plugin.h"

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

/* Defined in libtorc_missing_dep.so.1. */
int torc_missing_dep_answer(void);

static int missing_dep_init(const torc_host *host, torc_plugin *self) {
  (void)self;
  host->log(TORC_LOG_ERROR,
            "missing_dep: loaded although its dependency is absent (%d)",
            torc_missing_dep_answer());
  return TORC_OK;
}

static const torc_plugin_info missing_dep_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "missing_dep",
    .version = "0.0.1",
    .description = "test plugin whose shared-library dependency is absent",
    .init = missing_dep_init,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &missing_dep_info;
}
