/* train/header.c — the start-up header of `torc train` and `torc eval`:
 * the torc version, the plugins and the ops each serves on the device, the
 * device, the parameter count, the data sizes and where outputs go, so a
 * run says what it does before its first step. Public headers only.
 */
#include <stdlib.h>
#include <string.h>

#include "torc/plugin.h"
#include "train_internal.h"

/* The heavy ops of a step, named in the header with the plugin serving
 * them, so a slow provider shows at a glance. */
static const char *const heavy[] = {
    "matmul",     "conv2d",     "conv2d_backward_input",
    "conv2d_backward_weight",   "conv_transpose2d",
    "max_pool2d", "avg_pool2d", "batch_norm",
    "layer_norm", "group_norm", NULL};

static int is_heavy(const char *op) {
  for (int i = 0; heavy[i]; i++)
    if (strcmp(heavy[i], op) == 0)
      return 1;
  return 0;
}

/* The op served for f32 (the dtype a run trains in) on device type
 * `devtype`, with its provider: the active registration for f32, else the
 * active one for any dtype, as dispatch picks them. */
typedef struct served {
  const char *op, *provider;
} served;

/* Fills `out` (room for torc_kernel_count() rows); returns the rows. */
static int served_ops(const char *devtype, served *out) {
  int n = 0, count = torc_kernel_count();
  for (int i = 0; i < count; i++) {
    torc_kernel_summary k;
    if (torc_kernel_get(i, &k) != TORC_OK)
      break;
    if (!k.active || strcmp(k.device_type, devtype) != 0 ||
        (k.dtype != TORC_F32 && k.dtype != TORC_DTYPE_ANY))
      continue;
    /* Sorted by op, then dtype (ANY first): an exact f32 entry replaces
     * the op's ANY one. */
    if (n > 0 && strcmp(out[n - 1].op, k.op) == 0) {
      if (k.dtype == TORC_F32)
        out[n - 1].provider = k.provider;
      continue;
    }
    out[n].op = k.op;
    out[n].provider = k.provider;
    n++;
  }
  return n;
}

const char *torc_train__provider(const char *devtype, const char *op,
                                 torc_dtype dt) {
  const char *any = NULL;
  int count = torc_kernel_count();
  for (int i = 0; i < count; i++) {
    torc_kernel_summary k;
    if (torc_kernel_get(i, &k) != TORC_OK)
      break;
    if (!k.active || strcmp(k.device_type, devtype) != 0 ||
        strcmp(k.op, op) != 0)
      continue;
    if (k.dtype == dt)
      return k.provider;
    if (k.dtype == TORC_DTYPE_ANY)
      any = k.provider;
  }
  return any;
}

const char *torc_train__precision_name(torc_dtype dt) {
  return dt == TORC_BF16 ? "bf16" : dt == TORC_F16 ? "fp16" : "fp32";
}

/* One plugin's line: how many ops it serves on the device and the heavy
 * ones by name; for plugins without kernels, what they provide. */
static void plugin_line(FILE *out, const torc_plugin_summary *p,
                        const char *devtype, const served *ops, int n) {
  int n_ops = 0;
  char heavy_list[512] = "";
  size_t hl = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(ops[i].provider, p->name) != 0)
      continue;
    n_ops++;
    if (is_heavy(ops[i].op) && hl < sizeof heavy_list)
      hl += (size_t)snprintf(heavy_list + hl, sizeof heavy_list - hl, "%s%s",
                             hl ? ", " : "", ops[i].op);
  }
  fprintf(out, "  %-8s %-8s", p->name, p->version);
  if (n_ops > 0)
    fprintf(out, " serves %d op%s on %s%s%s%s", n_ops, n_ops == 1 ? "" : "s",
            devtype, hl ? " (the heavy ones: " : "", heavy_list, hl ? ")" : "");
  else if (p->provides & TORC_PROVIDES_DATA)
    fprintf(out, " data sources");
  else if (p->provides & (TORC_PROVIDES_LOSS | TORC_PROVIDES_OPTIM))
    fprintf(out, " %s",
            (p->provides & TORC_PROVIDES_LOSS) &&
                    (p->provides & TORC_PROVIDES_OPTIM)
                ? "losses, optimizers"
            : (p->provides & TORC_PROVIDES_LOSS) ? "losses"
                                                 : "optimizers, schedulers");
  else if (p->provides & TORC_PROVIDES_COMM)
    fprintf(out, " communicator (training in several processes)");
  else
    fprintf(out, " no ops on %s", devtype);
  fputc('\n', out);
}

/* "train    384 samples, 12 batches per epoch": the samples the loader
 * reads, the dataset's or its first [data.NAME] limit. */
static void data_line(FILE *out, const torc_config *cfg, const char *name,
                      const torc_loader *ld) {
  if (ld == NULL)
    return;
  torc_dataset *ds = torc_loader_dataset(ld);
  int64_t samples = ds ? torc_dataset_length(ds) : -1, limit = 0;
  char section[32];
  snprintf(section, sizeof section, "data.%s", name);
  int i = torc_config_find(cfg, section);
  if (i >= 0 && torc_config_get_int(cfg, i, "limit", &limit) == TORC_OK &&
      limit > 0 && limit < samples)
    samples = limit;
  torc_clear_error(); /* a limit the loader accepted; nothing pending */
  long long nb = (long long)torc_loader_length(ld);
  fprintf(out, "  %-8s %lld samples, %lld batch%s per epoch\n", name,
          (long long)samples, nb, nb == 1 ? "" : "es");
}

/* n with thousands separators ("421,834"), as torc describe prints it. */
static const char *grouped(int64_t n, char *buf, size_t size) {
  char digits[32];
  int len = snprintf(digits, sizeof digits, "%lld", (long long)n);
  size_t o = 0;
  for (int i = 0; i < len && o + 2 < size; i++) {
    if (i > 0 && digits[i - 1] != '-' && (len - i) % 3 == 0)
      buf[o++] = ',';
    buf[o++] = digits[i];
  }
  buf[o] = '\0';
  return buf;
}

void torc_train__header(FILE *out, const torc_train__run *r,
                        const char *what) {
  char dev[64];
  torc_device_str(r->dev, dev, sizeof dev);
  const char *devtype = torc_device_type_name(r->dev.type);
  fprintf(out, "torc %s %s: %s on %s, %d thread%s\n", torc_version_string(),
          what, torc_config_path(r->cfg), dev, torc_get_num_threads(),
          torc_get_num_threads() == 1 ? "" : "s");
  fprintf(out, "plugins (the ops each serves in f32):\n");
  const char *dt = devtype ? devtype : dev;
  int count = torc_kernel_count();
  served *ops = malloc(sizeof *ops * (size_t)(count > 0 ? count : 1));
  int n = ops ? served_ops(dt, ops) : 0;
  for (int i = 0; i < torc_plugin_count(); i++) {
    torc_plugin_summary p;
    if (torc_plugin_get(i, &p) == TORC_OK)
      plugin_line(out, &p, dt, ops, n);
  }
  free(ops);
  if (strcmp(what, "train") == 0 && r->s.precision != TORC_F32) {
    const char *mm = torc_train__provider(dt, "matmul", r->s.precision);
    const char *cv = torc_train__provider(dt, "conv2d", r->s.precision);
    fprintf(out,
            "precision: %s mixed (autocast: the products in %s, the rest "
            "in f32; weights and optimizer f32%s); %s matmul by %s, conv2d "
            "by %s\n",
            torc_train__precision_name(r->s.precision),
            torc_dtype_name(r->s.precision),
            r->scaler ? "; dynamic loss scale" : "",
            torc_dtype_name(r->s.precision), mm ? mm : "none",
            cv ? cv : "none");
  }
  char all[40], trainable[40];
  fprintf(out, "model: %s parameters (%s trainable)\n",
          grouped(torc_module_parameter_count(r->model, 0), all, sizeof all),
          grouped(torc_module_parameter_count(r->model, 1), trainable,
                  sizeof trainable));
  if (r->world > 1) {
    int64_t g = 0; /* the global batch, [data.train] batch_size */
    int di = torc_config_find(r->cfg, "data.train");
    if (di < 0 || torc_config_get_int(r->cfg, di, "batch_size", &g))
      g = 0;
    torc_clear_error();
    int64_t b = g / r->world;
    fprintf(out,
            "dist: %d ranks on %s (this is rank %d: it prints and writes "
            "the files), batch %lld per rank of %lld; gradients averaged in "
            "buckets of %g MB%s\n",
            r->world, torc_dist_backend(), r->rank, (long long)b,
            (long long)b * r->world, r->s.bucket_mb,
            r->s.sync_batchnorm ? "; batch norm synchronised" : "");
  }
  fprintf(out, "data:\n");
  data_line(out, r->cfg, "train", r->train);
  data_line(out, r->cfg, "test", r->test);
  if (strcmp(what, "train") == 0) {
    fprintf(out, "outputs:\n");
    fprintf(out, "  run folder  %s (config.ini, final.safetensors)\n",
            r->s.dir);
    if (r->s.metrics)
      fprintf(out, "  metrics     %s (curves.svg beside it)\n",
              r->s.metrics);
    else
      fprintf(out, "  metrics     none ([train] metrics is not set)\n");
    if (r->s.ck_dir)
      fprintf(out, "  checkpoints %s\n", r->s.ck_dir);
    else
      fprintf(out, "  checkpoints none (no [checkpoint] section: the "
                   "weights at the end only)\n");
  }
  fflush(out);
}
