/* tools/torc.c — the `torc` command: a thin program over the public API.
 * `torc plugins` lists the loaded plugins, the devices and which provider
 * serves each op on each device type; `torc version` prints the versions.
 * `torc test-backend PLUGIN` runs the conformance suite (conformance.c)
 * on every device type a plugin registers.
 * `torc train`, `torc eval` and `torc bench` (train_cmd.c) run the INI
 * trainer; export is reserved for a later release.
 * Exit status (docs/exit-status.md, one table for every command, applied
 * by torc_tool__exit_status): 0 ok, 1 a failure while running, 2 bad
 * input, 130 interrupted.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/plugin.h" /* TORC_ABI_*, TORC_PROVIDES_*: constants only */
#include "torc/torc.h"

#include "commands.h"
#include "conformance.h"

enum {
  EXIT_OK = TORC_TOOL_EXIT_OK,
  EXIT_RUNTIME = TORC_TOOL_EXIT_RUNTIME,
  EXIT_USAGE = TORC_TOOL_EXIT_USAGE
};

/* ---- usage ---- */

static const char usage_main[] =
    "usage: torc <command> [options]\n"
    "\n"
    "Commands:\n"
    "  plugins [--config FILE]  list plugins, devices, and which provider\n"
    "                           serves each op on each device type\n"
    "  test-backend PLUGIN [--config FILE] [--verbose]\n"
    "                           run the conformance suite on the device\n"
    "                           types PLUGIN registers, against cpu (ref)\n"
    "  describe FILE.ini        build the model of FILE.ini and print it\n"
    "                           and its summary table (shapes, parameters)\n"
    "  layers                   list the module types and their keys\n"
    "  sources                  list the data sources and their keys\n"
    "  version                  print the torc version and plugin ABI\n"
    "  help [COMMAND]           print this help, or a command's\n"
    "  train FILE.ini [--set S.K=V] [--resume [CKPT]]\n"
    "                           train the model of FILE.ini\n"
    "  eval FILE.ini --checkpoint PATH\n"
    "                           evaluate it on [data.test]\n"
    "  bench FILE.ini [--steps N]\n"
    "                           time its training steps, per op and layer\n"
    "  export                   reserved: not available yet in this version\n"
    "\n"
    "Options:\n"
    "  -h, --help               print this help (`torc COMMAND --help`: the\n"
    "                           command's)\n"
    "  --version                same as `torc version`\n"
    "\n"
    "Exit status (every command): 0 success; 1 a failure while running\n"
    "(out of memory, an I/O error while writing, a NaN loss); 2 bad input\n"
    "(usage, the configuration, a bad or hostile file, a missing plugin, a\n"
    "device mix-up); 130 interrupted (Ctrl-C).\n";

static const char usage_plugins[] =
    "usage: torc plugins [--config FILE]\n"
    "\n"
    "Loads plugins and lists them (name, version, ABI, priority, what each\n"
    "provides, its file), the device types with their devices, and a table\n"
    "of the ops: for each op and device type, the dtypes served and by which\n"
    "provider, and the kernels another provider overrides.\n"
    "\n"
    "Options:\n"
    "  --config FILE  load the plugins an INI file names ([plugins],\n"
    "                 [plugin.NAME]; see docs/config.md) and apply its [torc]\n"
    "                 section; without it, every plugin on the search path\n"
    "                 (TORC_PLUGIN_PATH, then the install folder) is loaded\n"
    "  -h, --help     print this help\n";

static const char usage_test_backend[] =
    "usage: torc test-backend PLUGIN [--config FILE] [--verbose]\n"
    "\n"
    "Loads ref, then PLUGIN (a name searched on the plugin path, or a file),\n"
    "and runs the conformance suite on every device type other than cpu\n"
    "that PLUGIN registers: each op x dtype x input variant (contiguous,\n"
    "non-contiguous, broadcast, empty, size-1 dims) on the device and on\n"
    "the cpu (ref), outputs and gradients compared, and a gradcheck in f64\n"
    "on the device for each differentiable op. An op or dtype the device\n"
    "has no kernel for is skipped, with the reason.\n"
    "\n"
    "Options:\n"
    "  --config FILE  apply this INI file first (its plugins and [torc]\n"
    "                 section; see docs/config.md)\n"
    "  --verbose      one line per case (PASS, FAIL or SKIP); without it,\n"
    "                 failures and the summary only\n"
    "  -h, --help     print this help\n"
    "\n"
    "Exit status: 0 no failure, 1 a case failed or a failure while running,\n"
    "2 bad input: usage, the configuration, or a plugin that cannot be\n"
    "loaded.\n";

static const char usage_describe[] =
    "usage: torc describe FILE.ini\n"
    "\n"
    "Loads the plugins FILE.ini names, builds its model from [model] and\n"
    "the [layer] sections, infers every lazy size from [model] input, and\n"
    "prints the module tree and a summary table: each layer's output shape\n"
    "and parameter count, the totals and the memory they take.\n"
    "\n"
    "Exit status: 0 success, 1 a failure while running (out of memory), 2\n"
    "bad input: usage, a bad file or setting, a missing plugin.\n";

static const char usage_layers[] =
    "usage: torc layers [--config FILE]\n"
    "\n"
    "Lists every module type a [layer] section may name (type = ...), with\n"
    "its keys, defaults and accepted values. Without --config every plugin\n"
    "on the plugin path is loaded (their module types are listed too); with\n"
    "it, that file's plugins.\n";

static const char usage_sources[] =
    "usage: torc sources [--config FILE]\n"
    "\n"
    "Lists every data source a [data.NAME] section may name (source = ...),\n"
    "with its keys, defaults and accepted values. Without --config every\n"
    "plugin on the plugin path is loaded; with it, that file's plugins.\n";

static const char usage_version[] =
    "usage: torc version\n"
    "\n"
    "Prints the torc library version and the plugin ABI version (a plugin\n"
    "loads when its ABI major equals this one).\n";

static const char usage_help[] =
    "usage: torc help [COMMAND | config]\n"
    "\n"
    "Prints the list of commands, or the help of COMMAND.\n";

static const char *const reserved_commands[] = {"export", NULL};

static const char commands_line[] =
    "commands: train, eval, bench, plugins, describe, layers, sources,\n"
    "version, help, test-backend (reserved: export); `torc --help` for\n"
    "details\n";

static int is_help_flag(const char *a) {
  return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

static int is_reserved(const char *cmd) {
  for (int i = 0; reserved_commands[i]; i++)
    if (strcmp(cmd, reserved_commands[i]) == 0)
      return 1;
  return 0;
}

static int reserved(const char *cmd) {
  fprintf(stderr, "torc %s: not available yet in this version (see README)\n",
          cmd);
  return EXIT_USAGE;
}

static int unknown_command(const char *cmd) {
  fprintf(stderr, "torc: unknown command '%s'\n%s", cmd, commands_line);
  return EXIT_USAGE;
}

/* ---- output helpers ---- */

/* A growable string, for table cells. */
typedef struct text {
  char *s;
  size_t len, cap;
} text;

static void text_add(text *t, const char *s) {
  size_t n = strlen(s);
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    while (cap < t->len + n + 1)
      cap *= 2;
    char *p = realloc(t->s, cap);
    if (p == NULL) {
      fprintf(stderr, "torc: out of memory\n");
      exit(EXIT_RUNTIME);
    }
    t->s = p;
    t->cap = cap;
  }
  memcpy(t->s + t->len, s, n + 1);
  t->len += n;
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (p == NULL) {
    fprintf(stderr, "torc: out of memory\n");
    exit(EXIT_RUNTIME);
  }
  return p;
}

/* "device, kernels" from TORC_PROVIDES_* bits. */
static void provides_str(uint32_t provides, char *buf, size_t size) {
  static const struct {
    uint32_t bit;
    const char *name;
  } kinds[] = {{TORC_PROVIDES_DEVICE, "device"},
               {TORC_PROVIDES_KERNELS, "kernels"},
               {TORC_PROVIDES_DATA, "data"},
               {TORC_PROVIDES_LOSS, "losses"},
               {TORC_PROVIDES_OPTIM, "optimizers"},
               {TORC_PROVIDES_MODULE, "modules"},
               {TORC_PROVIDES_COMM, "communicators"}};
  size_t len = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if ((provides & kinds[i].bit) && len < size)
      len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "",
                              kinds[i].name);
  if (len == 0)
    snprintf(buf, size, "nothing declared");
}

/* dtype sets: bit d for torc_dtype d, plus one bit for TORC_DTYPE_ANY. */
#define DT_ANY_BIT (1u << TORC_DTYPE_COUNT)
#define DT_FLOATS                                                              \
  ((1u << TORC_F32) | (1u << TORC_F64) | (1u << TORC_F16) | (1u << TORC_BF16))
#define DT_INTS ((1u << TORC_I32) | (1u << TORC_I64) | (1u << TORC_U8))
#define DT_ALL (DT_FLOATS | DT_INTS | (1u << TORC_BOOL))

static unsigned dtype_bit(torc_dtype dt) {
  return torc_dtype_valid(dt) ? 1u << dt : DT_ANY_BIT;
}

/* "float int", "f32 f64 i64", "all", "any": the compact set names. */
static void dtypes_str(unsigned mask, text *out) {
  int first = 1;
#define ADD(word)                                                              \
  do {                                                                         \
    if (!first)                                                                \
      text_add(out, " ");                                                      \
    text_add(out, word);                                                       \
    first = 0;                                                                 \
  } while (0)
  if (mask & DT_ANY_BIT)
    ADD("any");
  if ((mask & DT_ALL) == DT_ALL) {
    ADD("all");
    return;
  }
  if ((mask & DT_FLOATS) == DT_FLOATS)
    ADD("float");
  for (int d = 0; d < TORC_DTYPE_COUNT; d++) {
    unsigned bit = 1u << d;
    if (!(mask & bit))
      continue;
    if ((bit & DT_FLOATS) && (mask & DT_FLOATS) == DT_FLOATS)
      continue;
    if ((bit & DT_INTS) && (mask & DT_INTS) == DT_INTS) {
      if (d == TORC_I32)
        ADD("int");
      continue;
    }
    ADD(torc_dtype_name((torc_dtype)d));
  }
#undef ADD
}

/* ---- torc plugins ---- */

static void list_plugins(void) {
  int n = torc_plugin_count();
  printf("Plugins (%d loaded):\n", n);
  if (n == 0)
    printf("  none\n");
  for (int i = 0; i < n; i++) {
    torc_plugin_summary p;
    if (torc_plugin_get(i, &p) != TORC_OK)
      continue;
    char provides[160];
    provides_str(p.provides, provides, sizeof provides);
    printf("  %s %s  (ABI %u.%u, priority %d)\n", p.name,
           p.version ? p.version : "?", p.abi_major, p.abi_minor, p.priority);
    if (p.description && *p.description)
      printf("      %s\n", p.description);
    printf("      provides: %s\n", provides);
    printf("      file: %s\n", p.path ? p.path : "?");
  }
}

/* The device types: registered ones (ids are small integers; see
 * torc_device_type_name), then any type that has kernels but no device. */
typedef struct devlist {
  const char **names;
  int n, cap;
} devlist;

static void devlist_add(devlist *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->names[i], name) == 0)
      return;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 8;
    const char **p = realloc(l->names, sizeof *p * (size_t)l->cap);
    if (p == NULL) {
      fprintf(stderr, "torc: out of memory\n");
      exit(EXIT_RUNTIME);
    }
    l->names = p;
  }
  l->names[l->n++] = name;
}

static void list_devices(const devlist *types) {
  printf("\nDevices:\n");
  size_t w = 4;
  for (int i = 0; i < types->n; i++)
    if (strlen(types->names[i]) > w)
      w = strlen(types->names[i]);
  for (int i = 0; i < types->n; i++) {
    const char *name = types->names[i];
    int count = torc_device_count(name);
    if (count < 0) {
      printf("  %-*s  not registered (kernels only: no plugin loaded that "
             "provides this device)\n",
             (int)w, name);
      continue;
    }
    printf("  %-*s  %d device%s%s\n", (int)w, name, count,
           count == 1 ? "" : "s", count == 0 ? " (no hardware found)" : "");
    for (int k = 0; k < count && k < 8; k++) {
      char dname[64], desc[256];
      snprintf(dname, sizeof dname, "%s:%d", name, k);
      torc_device dev;
      if (torc_device_parse(dname, &dev) != TORC_OK ||
          torc_device_describe(dev, desc, sizeof desc) != TORC_OK)
        snprintf(desc, sizeof desc, "%s", torc_last_error());
      printf("    %-*s  %s\n", (int)w + 2, dname, desc);
    }
    if (count > 8)
      printf("    ... %s:%d\n", name, count - 1);
  }
}

typedef struct kernels {
  torc_kernel_summary *k;
  int n;
} kernels;

/* The provider serving most (op, dtype) keys of a device type, or NULL. */
static const char *main_provider(const kernels *ks, const char *dev) {
  const char *best = NULL;
  int best_n = 0;
  for (int i = 0; i < ks->n; i++) {
    const torc_kernel_summary *a = &ks->k[i];
    if (!a->active || strcmp(a->device_type, dev) != 0)
      continue;
    int n = 0;
    for (int j = 0; j < ks->n; j++)
      n += ks->k[j].active && strcmp(ks->k[j].device_type, dev) == 0 &&
           strcmp(ks->k[j].provider, a->provider) == 0;
    if (n > best_n) {
      best = a->provider;
      best_n = n;
    }
  }
  return best;
}

/* The cell of (op, device type): the column's main provider's dtypes
 * first, then "DTYPES (PROVIDER)" for every other provider; "-" if none. */
static char *cell(const kernels *ks, const char *op, const char *dev,
                  const char *main_prov) {
  enum { MAXP = 16 };
  const char *prov[MAXP];
  unsigned mask[MAXP];
  int np = 0;
  for (int i = 0; i < ks->n; i++) {
    const torc_kernel_summary *k = &ks->k[i];
    if (!k->active || strcmp(k->op, op) != 0 ||
        strcmp(k->device_type, dev) != 0)
      continue;
    int j = 0;
    while (j < np && strcmp(prov[j], k->provider) != 0)
      j++;
    if (j == np) {
      if (np == MAXP)
        continue;
      prov[np] = k->provider;
      mask[np++] = 0;
    }
    mask[j] |= dtype_bit(k->dtype);
  }
  text t = {0};
  if (np == 0) {
    text_add(&t, "-");
    return t.s;
  }
  for (int pass = 0; pass < 2; pass++)
    for (int j = 0; j < np; j++) {
      int is_main = main_prov && strcmp(prov[j], main_prov) == 0;
      if (is_main != (pass == 0))
        continue;
      if (t.len)
        text_add(&t, ", ");
      dtypes_str(mask[j], &t);
      if (!is_main) {
        text_add(&t, " (");
        text_add(&t, prov[j]);
        text_add(&t, ")");
      }
    }
  return t.s;
}

static void op_table(const kernels *ks, const devlist *types) {
  const char *const *ops = torc_op_names();
  int n_ops = 0;
  while (ops && ops[n_ops])
    n_ops++;
  int n_cols = types->n;

  printf("\nOps: the dtypes each device type serves, by the provider named "
         "in the\n"
         "column header unless a cell names another in parentheses.\n"
         "  float = f32 f64 f16 bf16, int = i32 i64 u8, all = float int "
         "bool,\n"
         "  any = one kernel for every dtype, - = no kernel.\n");

  char **headers = xcalloc((size_t)n_cols, sizeof *headers);
  const char **mains = xcalloc((size_t)n_cols, sizeof *mains);
  char **cells = xcalloc((size_t)n_cols * (size_t)(n_ops ? n_ops : 1),
                         sizeof *cells);
  size_t *width = xcalloc((size_t)n_cols, sizeof *width);
  size_t op_w = 2;
  for (int o = 0; o < n_ops; o++)
    if (strlen(ops[o]) > op_w)
      op_w = strlen(ops[o]);
  for (int c = 0; c < n_cols; c++) {
    mains[c] = main_provider(ks, types->names[c]);
    text h = {0};
    text_add(&h, types->names[c]);
    if (mains[c]) {
      text_add(&h, " (");
      text_add(&h, mains[c]);
      text_add(&h, ")");
    }
    headers[c] = h.s;
    width[c] = h.len;
    for (int o = 0; o < n_ops; o++) {
      char *s = cell(ks, ops[o], types->names[c], mains[c]);
      cells[(size_t)o * (size_t)n_cols + (size_t)c] = s;
      if (strlen(s) > width[c])
        width[c] = strlen(s);
    }
  }

  printf("  %-*s", (int)op_w, "op");
  for (int c = 0; c < n_cols; c++)
    printf("  %-*s", c + 1 < n_cols ? (int)width[c] : 0, headers[c]);
  printf("\n");
  for (int o = 0; o < n_ops; o++) {
    printf("  %-*s", (int)op_w, ops[o]);
    for (int c = 0; c < n_cols; c++)
      printf("  %-*s", c + 1 < n_cols ? (int)width[c] : 0,
             cells[(size_t)o * (size_t)n_cols + (size_t)c]);
    printf("\n");
  }

  for (int c = 0; c < n_cols; c++) {
    free(headers[c]);
    for (int o = 0; o < n_ops; o++)
      free(cells[(size_t)o * (size_t)n_cols + (size_t)c]);
  }
  free(headers);
  free(mains);
  free(cells);
  free(width);
}

/* Registrations that lost to another provider for the same key, one line
 * per (op, device type, provider, winner) with the dtypes concerned. */
typedef struct override_group {
  const torc_kernel_summary *loser, *winner;
  unsigned mask;
} override_group;

static const torc_kernel_summary *winner_of(const kernels *ks,
                                            const torc_kernel_summary *k) {
  for (int j = 0; j < ks->n; j++) {
    const torc_kernel_summary *w = &ks->k[j];
    if (w->active && w->dtype == k->dtype && strcmp(w->op, k->op) == 0 &&
        strcmp(w->device_type, k->device_type) == 0)
      return w;
  }
  return NULL;
}

static int same_provider(const torc_kernel_summary *a,
                         const torc_kernel_summary *b) {
  if (a == NULL || b == NULL)
    return a == b;
  return strcmp(a->provider, b->provider) == 0 && a->priority == b->priority;
}

static void overridden(const kernels *ks, const devlist *types) {
  const char *const *ops = torc_op_names();
  int n_lines = 0;
  for (int o = 0; ops && ops[o]; o++)
    for (int c = 0; c < types->n; c++) {
      enum { MAXG = 16 };
      override_group g[MAXG];
      int ng = 0;
      for (int i = 0; i < ks->n; i++) {
        const torc_kernel_summary *k = &ks->k[i];
        if (k->active || strcmp(k->op, ops[o]) != 0 ||
            strcmp(k->device_type, types->names[c]) != 0)
          continue;
        const torc_kernel_summary *w = winner_of(ks, k);
        int j = 0;
        while (j < ng &&
               !(same_provider(g[j].loser, k) && same_provider(g[j].winner, w)))
          j++;
        if (j == ng) {
          if (ng == MAXG)
            continue;
          g[ng].loser = k;
          g[ng].winner = w;
          g[ng++].mask = 0;
        }
        g[j].mask |= dtype_bit(k->dtype);
      }
      for (int j = 0; j < ng; j++) {
        if (n_lines++ == 0)
          printf("\nOverridden kernels (registered, not used):\n");
        text dts = {0};
        dtypes_str(g[j].mask, &dts);
        printf("  %s on %s [%s]: %s (priority %d)", ops[o], types->names[c],
               dts.s, g[j].loser->provider, g[j].loser->priority);
        if (g[j].winner)
          printf(" overridden by %s (priority %d)\n", g[j].winner->provider,
                 g[j].winner->priority);
        else
          printf(" not used\n");
        free(dts.s);
      }
    }
  if (n_lines == 0)
    printf("\nOverridden kernels: none.\n");
}

static int report(void) {
  kernels ks = {0};
  ks.n = torc_kernel_count();
  ks.k = xcalloc((size_t)(ks.n > 0 ? ks.n : 1), sizeof *ks.k);
  for (int i = 0; i < ks.n; i++)
    if (torc_kernel_get(i, &ks.k[i]) != TORC_OK) {
      fprintf(stderr, "torc plugins: %s\n", torc_last_error());
      free(ks.k);
      return torc_tool__exit_status(torc_last_status());
    }

  devlist types = {0};
  for (int id = 0; id < TORC_MAX_DEVICE_TYPES; id++) {
    const char *name = torc_device_type_name(id);
    if (name)
      devlist_add(&types, name);
  }
  if (types.n == 0)
    devlist_add(&types, "cpu");
  for (int i = 0; i < ks.n; i++)
    devlist_add(&types, ks.k[i].device_type);

  int abi_major, abi_minor;
  torc_abi_version(&abi_major, &abi_minor);
  printf("torc %s, plugin ABI %d.%d\n\n", torc_version_string(), abi_major,
         abi_minor);
  list_plugins();
  list_devices(&types);
  op_table(&ks, &types);
  overridden(&ks, &types);
  free(types.names);
  free(ks.k);
  return EXIT_OK;
}

static int cmd_plugins(int argc, char **argv) {
  const char *config = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (is_help_flag(a)) {
      fputs(usage_plugins, stdout);
      return EXIT_OK;
    } else if (strcmp(a, "--config") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "torc plugins: option '--config' needs a file name\n"
                        "usage: torc plugins [--config FILE]\n");
        return EXIT_USAGE;
      }
      config = argv[++i];
    } else if (strncmp(a, "--config=", 9) == 0) {
      config = a + 9;
    } else {
      fprintf(stderr,
              "torc plugins: unknown %s '%s'\n"
              "usage: torc plugins [--config FILE]  (`torc plugins --help` "
              "for details)\n",
              a[0] == '-' ? "option" : "argument", a);
      return EXIT_USAGE;
    }
  }

  if (config) {
    torc_config *cfg = torc_config_load(config);
    if (cfg == NULL) {
      fprintf(stderr, "torc plugins: %s\n", torc_last_error());
      return EXIT_USAGE;
    }
    torc_status st = torc_config_apply(cfg);
    torc_config_free(cfg);
    if (st != TORC_OK) {
      fprintf(stderr, "torc plugins: %s\n", torc_last_error());
      return torc_tool__exit_status(st);
    }
  } else if (torc_plugin_load_all() < 0) {
    fprintf(stderr, "torc plugins: %s\n", torc_last_error());
    return torc_tool__exit_status(torc_last_status());
  }
  return report();
}

/* ---- torc test-backend ---- */

static int has_type(const devlist *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->names[i], name) == 0)
      return 1;
  return 0;
}

static int plugin_loaded(const char *name) {
  for (int i = 0; i < torc_plugin_count(); i++) {
    torc_plugin_summary p;
    if (torc_plugin_get(i, &p) == TORC_OK && strcmp(p.name, name) == 0)
      return 1;
  }
  return 0;
}

static int cmd_test_backend(int argc, char **argv) {
  const char *config = NULL, *plugin = NULL;
  int verbose = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (is_help_flag(a)) {
      fputs(usage_test_backend, stdout);
      return EXIT_OK;
    } else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
      verbose = 1;
    } else if (strcmp(a, "--config") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "torc test-backend: option '--config' needs a file "
                        "name\nusage: torc test-backend PLUGIN [--config "
                        "FILE] [--verbose]\n");
        return EXIT_USAGE;
      }
      config = argv[++i];
    } else if (strncmp(a, "--config=", 9) == 0) {
      config = a + 9;
    } else if (a[0] != '-' && plugin == NULL) {
      plugin = a;
    } else {
      fprintf(stderr,
              "torc test-backend: unknown %s '%s'\n"
              "usage: torc test-backend PLUGIN [--config FILE] [--verbose]\n",
              a[0] == '-' ? "option" : "argument", a);
      return EXIT_USAGE;
    }
  }
  if (plugin == NULL) {
    fprintf(stderr, "torc test-backend: name the plugin to test, e.g. `torc "
                    "test-backend sim`\n"
                    "usage: torc test-backend PLUGIN [--config FILE] "
                    "[--verbose]\n");
    return EXIT_USAGE;
  }
  if (config) {
    torc_config *cfg = torc_config_load(config);
    if (cfg == NULL) {
      fprintf(stderr, "torc test-backend: %s\n", torc_last_error());
      return EXIT_USAGE;
    }
    torc_status st = torc_config_apply(cfg);
    torc_config_free(cfg);
    if (st != TORC_OK) {
      fprintf(stderr, "torc test-backend: %s\n", torc_last_error());
      return torc_tool__exit_status(st);
    }
  }
  if (!plugin_loaded("ref") && torc_plugin_load("ref", NULL) != TORC_OK) {
    fprintf(stderr,
            "torc test-backend: the reference backend is needed as the "
            "oracle: %s\n",
            torc_last_error());
    return torc_tool__exit_status(torc_last_status());
  }
  /* The device types before and after PLUGIN: the new ones are its own. */
  devlist before = {0}, types = {0};
  for (int id = 0; id < TORC_MAX_DEVICE_TYPES; id++)
    if (torc_device_type_name(id))
      devlist_add(&before, torc_device_type_name(id));
  const char *pname = plugin;
  if (!plugin_loaded(plugin)) {
    if (torc_plugin_load(plugin, NULL) != TORC_OK) {
      fprintf(stderr, "torc test-backend: cannot load plugin '%s': %s\n",
              plugin, torc_last_error());
      free(before.names);
      return torc_tool__exit_status(torc_last_status());
    }
    torc_plugin_summary p;
    if (torc_plugin_get(torc_plugin_count() - 1, &p) == TORC_OK)
      pname = p.name;
  }
  for (int id = 0; id < TORC_MAX_DEVICE_TYPES; id++) {
    const char *name = torc_device_type_name(id);
    if (name && strcmp(name, "cpu") != 0 && !has_type(&before, name))
      devlist_add(&types, name);
  }
  /* A plugin loaded by the configuration: the types it has kernels for. */
  for (int i = 0; i < torc_kernel_count(); i++) {
    torc_kernel_summary k;
    if (torc_kernel_get(i, &k) == TORC_OK && strcmp(k.provider, pname) == 0 &&
        strcmp(k.device_type, "cpu") != 0 && torc_device_count(k.device_type) > 0)
      devlist_add(&types, k.device_type);
  }
  free(before.names);
  int failed = 0, rc = EXIT_OK;
  /* Kernels for the cpu itself (a faster backend over ref): certified by
   * running every case pinned to ref and pinned to the plugin. */
  int cpu_kernels = 0;
  for (int i = 0; i < torc_kernel_count() && !cpu_kernels; i++) {
    torc_kernel_summary k;
    cpu_kernels = torc_kernel_get(i, &k) == TORC_OK &&
                  strcmp(k.provider, pname) == 0 &&
                  strcmp(k.device_type, "cpu") == 0 &&
                  strcmp(pname, "ref") != 0;
  }
  if (types.n == 0 && !cpu_kernels) {
    fprintf(stderr,
            "torc test-backend: plugin '%s' registers no kernels, so there "
            "is nothing to compare with ref\n",
            pname);
    free(types.names);
    return EXIT_USAGE;
  }
  if (cpu_kernels) {
    torc_conformance_result res;
    if (torc_conformance_run_provider(pname, verbose, stdout, &res) != 0)
      rc = EXIT_RUNTIME;
    failed += res.failed;
  }
  for (int i = 0; i < types.n; i++) {
    torc_conformance_result res;
    if (torc_conformance_run(types.names[i], verbose, stdout, &res) != 0)
      rc = EXIT_RUNTIME;
    failed += res.failed;
  }
  free(types.names);
  return failed ? EXIT_RUNTIME : rc;
}

/* ---- torc describe, torc layers ---- */

/* Loads and applies a configuration; prints the error and returns the exit
 * status on failure, NULL cfg. */
static torc_config *load_config(const char *cmd, const char *path, int *rc) {
  torc_config *cfg = torc_config_load(path);
  if (cfg == NULL) {
    fprintf(stderr, "torc %s: %s\n", cmd, torc_last_error());
    *rc = EXIT_USAGE;
    return NULL;
  }
  torc_status st = torc_config_apply(cfg);
  if (st != TORC_OK) {
    fprintf(stderr, "torc %s: %s\n", cmd, torc_last_error());
    torc_config_free(cfg);
    *rc = torc_tool__exit_status(st);
    return NULL;
  }
  *rc = EXIT_OK;
  return cfg;
}

static int cmd_describe(int argc, char **argv) {
  const char *file = NULL;
  for (int i = 1; i < argc; i++) {
    if (is_help_flag(argv[i])) {
      fputs(usage_describe, stdout);
      return EXIT_OK;
    }
    if (argv[i][0] == '-' || file) {
      fprintf(stderr, "torc describe: unexpected %s '%s'\nusage: torc "
                      "describe FILE.ini\n",
              argv[i][0] == '-' ? "option" : "argument", argv[i]);
      return EXIT_USAGE;
    }
    file = argv[i];
  }
  if (file == NULL) {
    fprintf(stderr, "torc describe: which file? usage: torc describe "
                    "FILE.ini\n");
    return EXIT_USAGE;
  }
  int rc;
  torc_config *cfg = load_config("describe", file, &rc);
  if (cfg == NULL)
    return rc;
  int64_t shape[TORC_MAX_DIMS + 1];
  int nd = 0;
  torc_module *m = torc_module_from_config(cfg, shape + 1, &nd);
  torc_config_free(cfg);
  if (m == NULL) {
    fprintf(stderr, "torc describe: %s\n", torc_last_error());
    return torc_tool__exit_status(torc_last_status());
  }
  shape[0] = 1;
  torc_tensor *x = torc_zeros(shape, nd + 1, TORC_F32, TORC_CPU);
  char *r = torc_module_repr(m);
  char *s = x ? torc_module_summary(m, x) : NULL;
  if (r && s)
    printf("%s\n\n%s", r, s);
  else
    fprintf(stderr, "torc describe: %s\n", torc_last_error());
  rc = r && s ? EXIT_OK : torc_tool__exit_status(torc_last_status());
  free(r);
  free(s);
  torc_release(x);
  torc_module_free(m);
  return rc;
}

static int cmd_layers(int argc, char **argv) {
  const char *config = NULL;
  for (int i = 1; i < argc; i++) {
    if (is_help_flag(argv[i])) {
      fputs(strcmp(argv[0], "sources") == 0 ? usage_sources : usage_layers,
            stdout);
      return EXIT_OK;
    } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      config = argv[++i];
    } else {
      fprintf(stderr, "torc %s: unexpected %s '%s'\nusage: torc %s "
                      "[--config FILE]\n",
              argv[0], argv[i][0] == '-' ? "option" : "argument", argv[i],
              argv[0]);
      return EXIT_USAGE;
    }
  }
  if (config) {
    int rc;
    torc_config *cfg = load_config(argv[0], config, &rc);
    if (cfg == NULL)
      return rc;
    torc_config_free(cfg);
  } else {
    torc_plugin_load_all(); /* what the plugin path offers; failures warn */
  }
  if (strcmp(argv[0], "sources") == 0) {
    for (int i = 0; i < torc_data_source_count(); i++) {
      const torc_data_source_type *t = torc_data_source_at(i);
      printf("%s\n    %s\n", t->name, t->description ? t->description : "");
      for (const torc_data_key *k = t->keys; k && k->name; k++)
        printf("    %-18s %s%s%s%s\n", k->name, k->help ? k->help : "",
               k->default_value ? " (default " : " (required",
               k->default_value ? k->default_value : "", ")");
    }
    return EXIT_OK;
  }
  for (int i = 0; i < torc_module_type_count(); i++) {
    const torc_module_type *t = torc_module_type_at(i);
    printf("%s\n    %s\n", t->name, t->description ? t->description : "");
    for (const torc_module_key *k = t->keys; k && k->name; k++)
      printf("    %-18s %s%s%s%s\n", k->name, k->help ? k->help : "",
             k->default_value ? " (default " : " (required",
             k->default_value ? k->default_value : "", ")");
  }
  return EXIT_OK;
}

/* ---- torc version ---- */

static int cmd_version(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (is_help_flag(argv[i])) {
      fputs(usage_version, stdout);
      return EXIT_OK;
    }
    fprintf(stderr, "torc version: unknown %s '%s'\nusage: torc version\n",
            argv[i][0] == '-' ? "option" : "argument", argv[i]);
    return EXIT_USAGE;
  }
  int abi_major, abi_minor;
  torc_abi_version(&abi_major, &abi_minor);
  printf("torc %s\nplugin ABI %d.%d\n", torc_version_string(), abi_major,
         abi_minor);
  return EXIT_OK;
}

/* ---- torc help ---- */

static int cmd_help(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage_main, stdout);
    return EXIT_OK;
  }
  if (argc > 2) {
    fprintf(stderr, "torc help: expected one command, got %d arguments\n"
                    "usage: torc help [COMMAND]\n",
            argc - 1);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "config") == 0) {
    char *h = torc_config_help();
    if (h == NULL) {
      fprintf(stderr, "torc help: %s\n", torc_last_error());
      return torc_tool__exit_status(torc_last_status());
    }
    printf("Sections and keys of a torc INI file (values are validated; an\n"
           "unknown section or key is an error with its line):\n\n%s", h);
    free(h);
    return EXIT_OK;
  }
  if (strcmp(cmd, "plugins") == 0)
    fputs(usage_plugins, stdout);
  else if (strcmp(cmd, "describe") == 0)
    fputs(usage_describe, stdout);
  else if (strcmp(cmd, "layers") == 0)
    fputs(usage_layers, stdout);
  else if (strcmp(cmd, "sources") == 0)
    fputs(usage_sources, stdout);
  else if (strcmp(cmd, "version") == 0)
    fputs(usage_version, stdout);
  else if (strcmp(cmd, "help") == 0)
    fputs(usage_help, stdout);
  else if (strcmp(cmd, "test-backend") == 0)
    fputs(usage_test_backend, stdout);
  else if (strcmp(cmd, "train") == 0)
    fputs(torc_tool__usage_train, stdout);
  else if (strcmp(cmd, "eval") == 0)
    fputs(torc_tool__usage_eval, stdout);
  else if (strcmp(cmd, "bench") == 0)
    fputs(torc_tool__usage_bench, stdout);
  else if (is_reserved(cmd))
    return reserved(cmd);
  else
    return unknown_command(cmd);
  return EXIT_OK;
}

/* ---- main ---- */

static int run(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage_main, stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (is_help_flag(cmd)) {
    fputs(usage_main, stdout);
    return EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0)
    return cmd_version(1, argv + 1);
  if (cmd[0] == '-') {
    fprintf(stderr, "torc: unknown option '%s'\n%s", cmd, commands_line);
    return EXIT_USAGE;
  }
  if (strcmp(cmd, "plugins") == 0)
    return cmd_plugins(argc - 1, argv + 1);
  if (strcmp(cmd, "version") == 0)
    return cmd_version(argc - 1, argv + 1);
  if (strcmp(cmd, "help") == 0)
    return cmd_help(argc - 1, argv + 1);
  if (strcmp(cmd, "test-backend") == 0)
    return cmd_test_backend(argc - 1, argv + 1);
  if (strcmp(cmd, "describe") == 0)
    return cmd_describe(argc - 1, argv + 1);
  if (strcmp(cmd, "layers") == 0 || strcmp(cmd, "sources") == 0)
    return cmd_layers(argc - 1, argv + 1);
  if (strcmp(cmd, "train") == 0)
    return torc_tool__cmd_train(argc - 1, argv + 1);
  if (strcmp(cmd, "eval") == 0)
    return torc_tool__cmd_eval(argc - 1, argv + 1);
  if (strcmp(cmd, "bench") == 0)
    return torc_tool__cmd_bench(argc - 1, argv + 1);
  if (is_reserved(cmd))
    return reserved(cmd);
  return unknown_command(cmd);
}

int main(int argc, char **argv) {
  int rc = run(argc, argv);
  torc_shutdown();
  /* Output that could not be written (a full disk, a closed pipe) is a
   * failure, not a silent success. */
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "torc: writing to standard output failed\n");
    if (rc == EXIT_OK)
      rc = EXIT_RUNTIME;
  }
  return rc;
}
