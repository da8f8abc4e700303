/* core/module_types.c — the registry of module types that are built from
 * key/value pairs (torc_module_create, torc_module_build): the core's own
 * container and skip-node types, the built-in layers, and plugins' types. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_internal.h"
#include "registry.h"

/* ---- the type registry ---- */

static torc__oreg module_reg =
    TORC__OREG_INIT("module type", "torc_module_type_register",
                    "the core or the program");
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

/* Parses an integer key's value; 0, or -1 after setting an error. */
static int parse_int_key(const char *key, const char *v, long long *out,
                         const char *type) {
  char *end;
  long long x = strtoll(v, &end, 10);
  if (end == v || *end != '\0') {
    torc_set_error(TORC_ERR_INVALID, "%s: key '%s' = '%s' is not an integer",
                   type, key, v);
    return -1;
  }
  *out = x;
  return 0;
}

static const char *kv(const char *const *k, const char *const *v, int n,
                      const char *key) {
  for (int i = 0; i < n; i++)
    if (strcmp(k[i], key) == 0)
      return v[i];
  return NULL;
}

static torc_module *create_container(const char *const *k,
                                     const char *const *v, int n,
                                     void *user) {
  (void)k, (void)v, (void)n;
  int kind = (int)(intptr_t)user;
  if (kind == KIND_SEQUENTIAL)
    return torc_sequential_new();
  if (kind == KIND_LIST)
    return torc_module_list_new();
  return torc_module_dict_new();
}

static torc_module *create_skip(const char *const *k, const char *const *v,
                                int n, void *user) {
  int kind = (int)(intptr_t)user;
  const char *type = kind == KIND_ADD ? "add" : "concat";
  long long from = 0, dim = 1;
  if (parse_int_key("from", kv(k, v, n, "from"), &from, type))
    return NULL;
  if (from >= 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: key 'from' = %lld must be negative (-1 is the layer "
                   "just before, -2 the one before it, ...)",
                   type, from);
    return NULL;
  }
  if (kind == KIND_CONCAT &&
      parse_int_key("dim", kv(k, v, n, "dim"), &dim, type))
    return NULL;
  return kind == KIND_ADD ? torc_add_node_new((int)from)
                          : torc_concat_node_new((int)from, (int)dim);
}

static const torc_module_key no_keys[] = {{NULL, NULL, NULL}};
static const torc_module_key add_keys[] = {
    {"from", "the earlier layer to add, as a negative offset (-2, -6, ...)",
     NULL},
    {NULL, NULL, NULL}};
static const torc_module_key concat_keys[] = {
    {"from", "the earlier layer to join, as a negative offset", NULL},
    {"dim", "the dim to concatenate along (1 = channels)", "1"},
    {NULL, NULL, NULL}};

static const torc_module_type core_types[] = {
    {sizeof(torc_module_type), "sequential",
     "layers run in order (nn.Sequential)", no_keys, create_container,
     (void *)(intptr_t)KIND_SEQUENTIAL},
    {sizeof(torc_module_type), "module_list",
     "a list of modules without forward (nn.ModuleList)", no_keys,
     create_container, (void *)(intptr_t)KIND_LIST},
    {sizeof(torc_module_type), "module_dict",
     "named modules without forward (nn.ModuleDict)", no_keys,
     create_container, (void *)(intptr_t)KIND_DICT},
    {sizeof(torc_module_type), "add",
     "adds an earlier layer's output to the input (residual connection)",
     add_keys, create_skip, (void *)(intptr_t)KIND_ADD},
    {sizeof(torc_module_type), "concat",
     "joins an earlier layer's output to the input along a dim", concat_keys,
     create_skip, (void *)(intptr_t)KIND_CONCAT},
};

static torc_status reg_add(struct torc__plugin *owner,
                           const torc_module_type *t) {
  if (t == NULL || t->name == NULL || t->create == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_module_type_register: the "
                                         "type, its name and create are "
                                         "required");
  if (t->struct_size < offsetof(torc_module_type, user))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_module_type_register: type '%s' has "
                          "struct_size %zu; set it to "
                          "sizeof(torc_module_type)",
                          t->name, t->struct_size);
  return torc__oreg_add(&module_reg, owner, t, t->name);
}

static void register_builtins(void) {
  for (size_t i = 0; i < sizeof core_types / sizeof core_types[0]; i++)
    reg_add(NULL, &core_types[i]);
  for (int i = 0; torc__builtin_module_types[i]; i++)
    reg_add(NULL, torc__builtin_module_types[i]);
}

/* The registry, with the built-in types in it. */
static torc__oreg *registry(void) {
  pthread_once(&builtins_once, register_builtins);
  return &module_reg;
}

torc_status torc__module_type_register_owned(struct torc__plugin *owner,
                                             const torc_module_type *type) {
  registry();
  return reg_add(owner, type);
}

torc_status torc_module_type_register(const torc_module_type *type) {
  return torc__module_type_register_owned(NULL, type);
}

void torc__module_types_unregister_owner(struct torc__plugin *owner) {
  torc__oreg_remove_owner(&module_reg, owner);
}

const torc_module_type *torc_module_type_find(const char *name) {
  return torc__oreg_find(registry(), name);
}

int torc_module_type_count(void) { return torc__oreg_count(registry()); }

const torc_module_type *torc_module_type_at(int i) {
  return torc__oreg_at(registry(), i);
}

torc_module *torc_module_create(const char *type, const char *const *keys,
                                const char *const *values, int n) {
  if (type == NULL || (n > 0 && (keys == NULL || values == NULL)) || n < 0) {
    torc_set_error(TORC_ERR_NULL, "torc_module_create: the type name (and "
                                  "the key and value arrays when n > 0) "
                                  "are required");
    return NULL;
  }
  const torc_module_type *t = torc__oreg_lookup(registry(), type, "module");
  if (t == NULL)
    return NULL;
  int nk = torc__keys_count(t->keys);
  const char **kk = torc__calloc((size_t)nk + 1, sizeof *kk);
  const char **vv = torc__calloc((size_t)nk + 1, sizeof *vv);
  torc_status st = kk && vv ? TORC_OK
                            : torc_set_error(TORC_ERR_OOM,
                                             "out of memory building a '%s'",
                                             type);
  if (st == TORC_OK)
    st = torc__keys_resolve(type, t->keys, NULL, keys, values, n, NULL, vv);
  torc_module *m = NULL;
  if (st == TORC_OK) {
    for (int j = 0; j < nk; j++)
      kk[j] = t->keys[j].name;
    torc_clear_error();
    m = t->create(kk, vv, nk, t->user);
    if (m == NULL && torc_last_status() == TORC_OK)
      torc_set_error(TORC_ERR_INVALID, "%s: the type's create failed "
                                       "without saying why",
                     type);
  }
  torc__free(kk), torc__free(vv);
  return m;
}

torc_module *torc_module_build(const char *type, const char *spec) {
  torc__spec sp;
  torc_status st = torc__spec_split(&sp, type ? type : "module", spec);
  torc_module *m = st ? NULL : torc_module_create(type, sp.k, sp.v, sp.n);
  torc__spec_free(&sp);
  return m;
}
