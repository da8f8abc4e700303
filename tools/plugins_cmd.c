/* tools/plugins_cmd.c — `torc plugins`: the loaded plugins, the devices of
 * each device type, and the table of which provider serves each op and
 * dtype on each device type, with the kernels another one overrides.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/plugin.h" /* TORC_ABI_*, TORC_PROVIDES_*: constants only */
#include "torc/torc.h"

#include "cli.h"
#include "commands.h"

const char torc_tool__usage_plugins[] =
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
    char why[512];
    if (count == 0 && torc_device_none_reason(name, why, sizeof why) == TORC_OK)
      printf("    %s\n", why); /* the plugin's reason, with the fix */
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

/* The report: the versions, the plugins, the device types (registered
 * ones, whose ids are small integers: see torc_device_type_name; then any
 * type that has kernels but no device), the op table and the overrides. */
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

int torc_tool__cmd_plugins(int argc, char **argv) {
  const char *config = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (is_help_flag(a)) {
      fputs(torc_tool__usage_plugins, stdout);
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
