/* tests/plugins/modreset.c — a plugin whose module type re-initialises
 * through the vtable's reset slot: "plug_alpha" (key features), y = alpha
 * * x with alpha [features] created at 0.5; reset draws alpha from
 * U(1, 1 + 1/16) for the "default" scheme and U(2, 2 + 1/16) for any
 * other. Built twice: modreset, and modreset_old (-DMODRESET_OLD), type
 * "plug_alpha_old", whose vtable's struct_size ends before the reset slot,
 * as a plugin built against torc before the slot gives it (the slot is
 * filled with a reset that sets alpha to 100, so a core reading past
 * struct_size shows). tests/test_module_reset.c uses both.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/plugin.h"
#include "torc/plugin_api.h"

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

#ifdef MODRESET_OLD
#define MODRESET_NAME "modreset_old"
#define MODRESET_TYPE "plug_alpha_old"
#define MODRESET_VTABLE_SIZE offsetof(torc_module_vtable, reset)
#else
#define MODRESET_NAME "modreset"
#define MODRESET_TYPE "plug_alpha"
#define MODRESET_VTABLE_SIZE sizeof(torc_module_vtable)
#endif

/* Set once by init; valid until the plugin is unloaded. */
static const torc_host *host;
static const torc_api *api;

static torc_tensor *pa_forward(torc_module *m, const torc_tensor *const *in,
                               int n_in) {
  (void)n_in;
  return api->mul(in[0], api->module_parameter(m, "alpha"));
}

static torc_status pa_reset(torc_module *m, const char *scheme,
                            torc_generator *gen) {
  torc_tensor *alpha = api->module_parameter(m, "alpha");
#ifdef MODRESET_OLD
  (void)scheme, (void)gen;
  return api->init_constant_(alpha, 100);
#else
  double base = strcmp(scheme, "default") == 0 ? 1 : 2;
  return api->init_uniform_(alpha, base, base + 1.0 / 16, gen);
#endif
}

static const torc_module_vtable pa_vtable = {
    .struct_size = MODRESET_VTABLE_SIZE,
    .forward = pa_forward,
    .reset = pa_reset,
};

static torc_module *pa_create(const char *const *keys,
                              const char *const *values, int n, void *user) {
  (void)keys, (void)user;
  long long features = n > 0 ? atoll(values[0]) : 0;
  if (features < 1) {
    host->set_error(TORC_ERR_INVALID,
                    MODRESET_TYPE ": key 'features' must be an integer >= 1");
    return NULL;
  }
  torc_module *m = api->module_new(MODRESET_TYPE, &pa_vtable, NULL);
  if (m == NULL)
    return NULL;
  /* The module takes its own reference to alpha; the scope drops ours. */
  int scope = api->scope_begin();
  const int64_t shape[1] = {features};
  torc_tensor *alpha = api->full(shape, 1, 0.5, api->module_dtype(m),
                                 api->module_device(m));
  torc_status rc = alpha ? api->module_register_parameter(m, "alpha", alpha)
                         : api->last_status();
  api->scope_end(scope);
  if (rc != TORC_OK) {
    api->module_free(m);
    return NULL;
  }
  return m;
}

static const torc_module_key pa_keys[] = {
    {"features", "the input's last dim (an integer >= 1)", NULL},
    {NULL, NULL, NULL},
};

static const torc_module_type pa_type = {
    .struct_size = sizeof(torc_module_type),
    .name = MODRESET_TYPE,
    .description = "x * alpha, re-initialised through the reset slot",
    .keys = pa_keys,
    .create = pa_create,
};

static int modreset_init(const torc_host *h, torc_plugin *self) {
  host = h;
  if (!TORC_HAS_SLOT(h, torc_host, register_module_type) ||
      !TORC_API_HAS(h->api, init_uniform_))
    return h->set_error(TORC_ERR_ABI, MODRESET_NAME ": this torc cannot take "
                                      "module types from plugins");
  api = h->api;
  return h->register_module_type(self, &pa_type);
}

static const torc_plugin_info modreset_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = MODRESET_NAME,
    .version = "0.1.0",
    .description = "test plugin whose module type implements reset",
    .provides = TORC_PROVIDES_MODULE,
    .init = modreset_init,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &modreset_info;
}
