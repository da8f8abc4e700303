/* tests/plugins/modplug.c — a plugin defining a module type, "scaled_tanh"
 * (keys features, scale): a parameter alpha [features] initialised to
 * scale, and forward y = alpha * tanh(x) over the last dim, computed only
 * through host->api (it links nothing of libtorc). Built twice: modplug,
 * and modplug_bare (-DMODPLUG_BARE) whose descriptor lacks
 * TORC_PROVIDES_MODULE. The key type_name renames the type, so the tests
 * can make a registration collide. tests/test_modplug.c uses both.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/plugin.h"
#include "torc/plugin_api.h"

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

#ifdef MODPLUG_BARE
#define MODPLUG_NAME "modplug_bare"
#define MODPLUG_PROVIDES 0u
#else
#define MODPLUG_NAME "modplug"
#define MODPLUG_PROVIDES TORC_PROVIDES_MODULE
#endif

/* Set once by init; valid until the plugin is unloaded. */
static const torc_host *host;
static const torc_api *api;

/* A scaled_tanh module's own state (torc_module_state). */
typedef struct scaled_tanh {
  int64_t features;
  double scale;
} scaled_tanh;

/* x: [..., features] -> y = alpha * tanh(x), alpha [features] broadcast
 * over the leading dims. */
static torc_tensor *st_forward(torc_module *m, const torc_tensor *const *in,
                               int n_in) {
  (void)n_in;
  const scaled_tanh *st = api->module_state(m);
  const torc_tensor *x = in[0];
  int nd = api->ndim(x);
  if (nd < 1 || api->size(x, nd - 1) != st->features) {
    host->set_error(TORC_ERR_SHAPE,
                    "scaled_tanh: the input's last dim is %lld but features "
                    "= %lld; give an input [..., %lld] or build the module "
                    "with features=%lld",
                    nd < 1 ? 0LL : (long long)api->size(x, nd - 1),
                    (long long)st->features, (long long)st->features,
                    nd < 1 ? 0LL : (long long)api->size(x, nd - 1));
    return NULL;
  }
  torc_tensor *alpha = api->module_parameter(m, "alpha");
  /* Our own scope: the tanh temporary goes, the result is kept. */
  int scope = api->scope_begin();
  torc_tensor *y = api->mul(alpha, api->tanh(x));
  api->scope_keep(y);
  api->scope_end(scope);
  return y;
}

static void st_destroy(torc_module *m) { free(api->module_state(m)); }

static int st_describe(const torc_module *m, char *buf, size_t size) {
  const scaled_tanh *st = api->module_state(m);
  return snprintf(buf, size, "%lld, scale=%g", (long long)st->features,
                  st->scale);
}

static const torc_module_vtable st_vtable = {
    .struct_size = sizeof(torc_module_vtable),
    .forward = st_forward,
    .destroy = st_destroy,
    .describe = st_describe,
};

/* The value of `key` among the n pairs (the core passed every key, with
 * defaults filled in). */
static const char *value_of(const char *const *keys, const char *const *values,
                            int n, const char *key) {
  for (int i = 0; i < n; i++)
    if (strcmp(keys[i], key) == 0)
      return values[i];
  return NULL;
}

static torc_module *st_create(const char *const *keys,
                              const char *const *values, int n, void *user) {
  (void)user;
  const char *fv = value_of(keys, values, n, "features");
  const char *sv = value_of(keys, values, n, "scale");
  char *end = NULL;
  errno = 0;
  long long features = fv ? strtoll(fv, &end, 10) : 0;
  if (fv == NULL || end == fv || *end != '\0' || errno || features < 1) {
    host->set_error(TORC_ERR_INVALID,
                    "scaled_tanh: key 'features' = '%s' is not an integer "
                    ">= 1; give the input's last dim, e.g. features=64",
                    fv ? fv : "");
    return NULL;
  }
  end = NULL;
  double scale = sv ? strtod(sv, &end) : NAN;
  if (sv == NULL || end == sv || *end != '\0' || !isfinite(scale)) {
    host->set_error(TORC_ERR_INVALID,
                    "scaled_tanh: key 'scale' = '%s' is not a finite number; "
                    "give alpha's initial value, e.g. scale=0.5",
                    sv ? sv : "");
    return NULL;
  }
  scaled_tanh *st = malloc(sizeof *st);
  if (st == NULL) {
    host->set_error(TORC_ERR_OOM, "scaled_tanh: out of memory");
    return NULL;
  }
  st->features = features;
  st->scale = scale;
  torc_module *m = api->module_new("scaled_tanh", &st_vtable, st);
  if (m == NULL) {
    free(st); /* module_new leaves the state to us when it fails */
    return NULL;
  }
  /* The module takes its own reference to alpha; the scope drops ours. */
  int scope = api->scope_begin();
  const int64_t shape[1] = {features};
  torc_tensor *alpha = api->full(shape, 1, scale, api->module_dtype(m),
                                 api->module_device(m));
  torc_status rc = alpha ? api->module_register_parameter(m, "alpha", alpha)
                         : api->last_status();
  api->scope_end(scope);
  if (rc != TORC_OK) {
    api->module_free(m); /* frees st through st_destroy */
    return NULL;
  }
  return m;
}

static const torc_module_key st_keys[] = {
    {"features", "number of features, the input's last dim (an integer >= 1)",
     NULL},
    {"scale", "initial value of every element of alpha (a number)", "1.0"},
    {NULL, NULL, NULL},
};

/* Not const: init sets the name from the type_name key. */
static torc_module_type st_type = {
    .struct_size = sizeof(torc_module_type),
    .name = "scaled_tanh",
    .description = "alpha * tanh(x) with a learned alpha per feature",
    .keys = st_keys,
    .create = st_create,
};

static char st_type_name[64];

static int modplug_init(const torc_host *h, torc_plugin *self) {
  host = h;
  if (!TORC_HAS_SLOT(h, torc_host, register_module_type) ||
      !TORC_API_HAS(h->api, init_fans))
    return h->set_error(TORC_ERR_ABI,
                        MODPLUG_NAME ": this torc (ABI %u.%u) cannot take "
                        "module types from plugins; it needs ABI 1.1 or "
                        "newer: upgrade torc",
                        (unsigned)h->abi_major, (unsigned)h->abi_minor);
  api = h->api;
  /* Every slot of the table is filled (all are function pointers). */
  for (size_t off = sizeof(size_t); off + sizeof(void (*)(void)) <=
                                        api->struct_size;
       off += sizeof(void (*)(void))) {
    void (*fn)(void);
    memcpy(&fn, (const char *)api + off, sizeof fn);
    if (fn == NULL)
      return h->set_error(TORC_ERR_INTERNAL,
                          MODPLUG_NAME ": host->api has a NULL slot at byte "
                          "%zu of %zu; fill it in core/plugin_api.c",
                          off, api->struct_size);
  }
  const char *name = h->config_get(self, "type_name");
  snprintf(st_type_name, sizeof st_type_name, "%s",
           name ? name : "scaled_tanh");
  st_type.name = st_type_name;
  return h->register_module_type(self, &st_type);
}

static const torc_plugin_key modplug_keys[] = {
    {"type_name", "the name to register the module type under",
     "scaled_tanh"},
    {NULL, NULL, NULL},
};

static const torc_plugin_info modplug_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = MODPLUG_NAME,
    .version = "0.1.0",
    .description = "test plugin defining the scaled_tanh module type",
    .provides = MODPLUG_PROVIDES,
    .keys = modplug_keys,
    .init = modplug_init,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &modplug_info;
}
