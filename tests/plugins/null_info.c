/* tests/plugins/null_info.c — a plugin whose entry point returns NULL (a
 * plugin that found itself unusable without saying why): the core must
 * refuse it with a message, not crash. */
#include "torc/plugin.h"

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return NULL;
}
