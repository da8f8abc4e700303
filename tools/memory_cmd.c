/* tools/memory_cmd.c — `torc memory FILE.ini`: builds the run of FILE.ini
 * as `torc train` does, takes a few training steps on its device without
 * writing anything, and prints each step's memory, the device's memory
 * summary and a line of advice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "torc/torc.h"

#include "cli.h"
#include "commands.h"

const char torc_tool__usage_memory[] =
    "usage: torc memory FILE.ini [--steps N] [--device D] [--set S.K=V ...]\n"
    "\n"
    "Builds the model, data, loss and optimizer of FILE.ini as `torc train`\n"
    "does, runs N training steps (default 3) on its device (or on D: cpu,\n"
    "sim, sim:1 ...; the plugin named as the device type is loaded when no\n"
    "loaded plugin provides it) and writes no run folder and no\n"
    "checkpoint. Prints one line per step: the bytes allocated to live\n"
    "tensors, reserved from the device by the caching allocator, and the\n"
    "peak allocated since the first step; then the device's memory summary\n"
    "(as torch.cuda.memory_summary()), whether the steps after the second\n"
    "took new device memory, and a line of advice (the peak beside the\n"
    "device's total memory). Out of memory in a step prints the summary\n"
    "as it was at the failure.\n"
    "\n"
    "  --steps N          training steps to take (1..100000, default 3)\n"
    "  --device D         the device instead of [device] type\n"
    "  --set S.K=V        override key K of section S (repeatable)\n"
    "\n"
    "Exit status: 0 success, 1 a failure while running (out of memory),\n"
    "2 bad input (usage, the configuration, a device no plugin provides).\n";

/* What one training step reads: a run's parts, built from the file. */
typedef struct mem_run {
  torc_device dev;
  torc_module *model;
  torc_loader *train;
  torc_loss *loss;
  torc_optimizer *opt;
  double clip_norm, clip_value;
} mem_run;

static void mem_run_free(mem_run *r) {
  torc_optimizer_free(r->opt);
  torc_loss_free(r->loss);
  torc_loader_free(r->train);
  torc_module_free(r->model);
}

/* Builds the parts of a training run as the trainer does: the model
 * (lazy sizes inferred on the cpu), moved to the device, the [data.train]
 * loader feeding the device, the loss, the optimizer over the model's
 * parameters, and [train]'s clipping. */
static torc_status mem_run_build(mem_run *r, const torc_config *cfg) {
  memset(r, 0, sizeof *r);
  torc_status st = torc_config_device(cfg, &r->dev);
  if (st)
    return st;
  int t = torc_config_find(cfg, "train");
  if (t >= 0 &&
      ((st = torc_config_get_double(cfg, t, "clip_grad_norm", &r->clip_norm)) ||
       (st = torc_config_get_double(cfg, t, "clip_grad_value",
                                    &r->clip_value))))
    return st;
  if (torc_config_find(cfg, "data.train") < 0)
    return torc_set_error(TORC_ERR_CONFIG,
                          "%s: no [data.train] section to take training "
                          "steps on; add one (source, and its files)",
                          torc_config_path(cfg));
  if ((r->model = torc_module_from_config(cfg, NULL, NULL)) == NULL)
    return torc_last_status();
  if ((st = torc_module_to(r->model, r->dev)) ||
      (st = torc_module_check_device(r->model, r->dev)))
    return st;
  if ((r->train = torc_loader_from_config(cfg, "train", r->dev)) == NULL ||
      (r->loss = torc_loss_from_config(cfg)) == NULL ||
      (r->opt = torc_optimizer_from_config(cfg, r->model)) == NULL)
    return torc_last_status();
  torc_module_train(r->model, 1);
  return TORC_OK;
}

/* One step, as the trainer takes it: forward, loss, zero_grad, backward,
 * clipping, the loss read back (a NaN skips the update), the update. */
static torc_status mem_step(mem_run *r, const torc_batch *b, double *lv) {
  torc_tensor *out = torc_module_forward(r->model, b->input);
  torc_tensor *loss = out ? torc_loss_forward(r->loss, out, b->target) : NULL;
  if (loss == NULL)
    return torc_last_status();
  torc_status st;
  if ((st = torc_optimizer_zero_grad(r->opt, 1)) ||
      (st = torc_backward(loss, NULL, 0)))
    return st;
  if (r->clip_norm > 0 &&
      (st = torc_module_clip_grad_norm(r->model, r->clip_norm, 2, 0, NULL)))
    return st;
  if (r->clip_value > 0 &&
      (st = torc_module_clip_grad_value(r->model, r->clip_value)))
    return st;
  if ((st = torc_item(loss, lv)))
    return st;
  if (*lv != *lv)
    return TORC_OK;
  return torc_optimizer_step(r->opt);
}

/* "512 B", "1.5 KiB", "2.0 MiB": bytes for a reader. */
static const char *human(size_t n, char *buf, size_t size) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)n;
  int u = 0;
  while (v >= 1024.0 && u < 4)
    v /= 1024.0, u++;
  if (u == 0)
    snprintf(buf, size, "%zu B", n);
  else
    snprintf(buf, size, "%.1f %s", v, units[u]);
  return buf;
}

/* "2.0 MiB (2097152)": a figure of a step's line. */
static const char *figure(size_t n, char *buf, size_t size) {
  char h[32];
  snprintf(buf, size, "%s (%zu)", human(n, h, sizeof h), n);
  return buf;
}

static int usage_error(const char *msg, const char *arg) {
  fprintf(stderr, "torc memory: %s%s%s\n(torc memory --help for the "
                  "options)\n",
          msg, arg ? " " : "", arg ? arg : "");
  return TORC_TOOL_EXIT_USAGE;
}

/* --device D: sets [device] type, after loading the plugin named as D's
 * type when no loaded plugin registers that type yet (sim for "sim:1").
 * A device that still does not parse is bad input, with the core's
 * message (the registered types, or the devices of the type). */
static int use_device(torc_config *cfg, const char *d) {
  char set[256], type[TORC_DEVICE_TYPE_MAX];
  snprintf(type, sizeof type, "%s", d);
  type[strcspn(type, ":")] = '\0';
  if (type[0] != '\0' && torc_device_count(type) < 0 &&
      torc_plugin_load(type, NULL) != TORC_OK)
    torc_clear_error();
  torc_device dev;
  snprintf(set, sizeof set, "device.type=%s", d);
  if (torc_device_parse(d, &dev) != TORC_OK ||
      torc_config_set(cfg, set) != TORC_OK) {
    fprintf(stderr, "torc memory: --device %s: %s\n", d, torc_last_error());
    return TORC_TOOL_EXIT_USAGE;
  }
  return -1;
}

/* The line of advice: the peak reserved (what the device has to give)
 * beside its total, or the host's memory for the cpu. */
static void print_advice(const torc_memory_stats2 *s, torc_device dev,
                         size_t peak_alloc, size_t peak_resv) {
  char a[32], b[32], c[32];
  size_t total = s->device_total;
  const char *whose = "the device's";
  if (total == 0 && torc_device_is_host(dev)) {
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && psz > 0) {
      total = (size_t)pages * (size_t)psz;
      whose = "the host's";
    }
  }
  printf("advice: peak allocated %s, peak reserved %s", human(peak_alloc, a,
                                                                sizeof a),
         human(peak_resv, b, sizeof b));
  if (total == 0) {
    printf("; the device reports no total memory: compare the peak "
           "reserved with what it has\n");
    return;
  }
  double share = 100.0 * (double)peak_resv / (double)total;
  printf(" = %.1f%% of %s %s: ", share, whose, human(total, c, sizeof c));
  if (share > 90.0)
    printf("close to the limit; lower [data.train] batch_size or the "
           "model's size before a longer run\n");
  else if (share > 50.0)
    printf("fits, with little room to raise [data.train] batch_size\n");
  else
    printf("fits, with room to raise [data.train] batch_size\n");
}

/* Takes `steps` steps on r, printing a line after each; the summary and
 * the advice at the end. *done: the steps taken. */
static torc_status run_steps(mem_run *r, long steps, long *done) {
  torc_status st = torc_reset_peak_memory_stats(r->dev);
  if (st)
    return st;
  char name[64];
  torc_device_str(r->dev, name, sizeof name);
  printf("%ld training step%s on %s (bytes)\n", steps, steps == 1 ? "" : "s",
         name);
  printf("%6s  %-24s %-24s %-24s %s\n", "step", "allocated", "reserved",
         "peak allocated", "loss");
  int64_t epoch = 0;
  size_t resv2 = 0;
  uint64_t seg2 = 0;
  torc_memory_stats2 s = {.struct_size = sizeof s};
  if ((st = torc_loader_start(r->train, epoch, 0)))
    return st;
  for (long k = 1; k <= steps && st == TORC_OK;) {
    torc_batch b = {0};
    int got = torc_loader_next(r->train, &b);
    if (got < 0)
      return torc_last_status();
    if (got == 0) { /* a short epoch: go round again */
      if (epoch > 0 && k == 1)
        return torc_set_error(TORC_ERR_CONFIG,
                              "[data.train] gives no batch; give it samples "
                              "(or drop_last = no)");
      st = torc_loader_start(r->train, ++epoch, 0);
      continue;
    }
    int scope = torc_scope_begin();
    double lv = 0;
    st = mem_step(r, &b, &lv);
    torc_scope_end(scope);
    torc_batch_clear(&b);
    if (st == TORC_OK)
      st = torc_synchronize(r->dev);
    if (st == TORC_OK)
      st = torc_device_memory_stats2(r->dev, &s);
    if (st)
      break;
    *done = k;
    char fa[48], fr[48], fp[48];
    printf("%6ld  %-24s %-24s %-24s %.4f\n", k,
           figure(s.allocated, fa, sizeof fa),
           figure(s.reserved, fr, sizeof fr),
           figure(s.peak_allocated, fp, sizeof fp), lv);
    if (k == 2)
      resv2 = s.reserved, seg2 = s.segment_allocs;
    k++;
  }
  if (st)
    return st;
  char *sum = torc_memory_summary(r->dev);
  if (sum == NULL)
    return torc_last_status();
  printf("\n%s\n", sum);
  free(sum);
  if (s.caching == TORC_CACHING_NONE) {
    char d[32];
    printf("steady state: caching is off on %s (TORC_NO_CACHE, or a "
           "sanitizer build): every storage is its own device allocation\n",
           torc_device_str(r->dev, d, sizeof d));
  } else if (steps >= 3) {
    char g[32];
    char span[48] = "step 3";
    if (steps > 3)
      snprintf(span, sizeof span, "steps 3 to %ld", steps);
    if (s.reserved == resv2 && s.segment_allocs == seg2)
      printf("steady state: %s took no new device memory (reserved stays "
             "%s)\n",
             span, human(s.reserved, g, sizeof g));
    else
      printf("steady state: reserved grew by %s in %llu new segments in %s; "
             "memory that grows step by step is a leak or a cache still "
             "filling\n",
             human(s.reserved > resv2 ? s.reserved - resv2 : 0, g, sizeof g),
             (unsigned long long)(s.segment_allocs - seg2), span);
  }
  print_advice(&s, r->dev, s.peak_allocated, s.peak_reserved);
  return TORC_OK;
}

int torc_tool__cmd_memory(int argc, char **argv) {
  const char *file = NULL, *device = NULL;
  char **sets = calloc((size_t)argc + 1, sizeof *sets);
  int n_sets = 0, rc = -1;
  long steps = 3;
  if (sets == NULL)
    return TORC_TOOL_EXIT_RUNTIME;
  for (int i = 1; i < argc && rc < 0; i++) {
    const char *a = argv[i];
    if (is_help_flag(a)) {
      fputs(torc_tool__usage_memory, stdout);
      rc = TORC_TOOL_EXIT_OK;
    } else if (strcmp(a, "--set") == 0 && i + 1 < argc) {
      sets[n_sets++] = argv[++i];
    } else if (strcmp(a, "--steps") == 0 && i + 1 < argc) {
      char *end;
      const char *v = argv[++i];
      steps = strtol(v, &end, 10);
      if (end == v || *end || steps < 1 || steps > 100000)
        rc = usage_error("--steps takes a positive count of steps "
                         "(1..100000), not", v);
    } else if (strcmp(a, "--device") == 0 && i + 1 < argc) {
      device = argv[++i];
    } else if (a[0] == '-') {
      rc = usage_error("unknown option (or missing value)", a);
    } else if (file == NULL) {
      file = a;
    } else {
      rc = usage_error("unexpected argument", a);
    }
  }
  if (rc < 0 && file == NULL)
    rc = usage_error("which file? usage: torc memory FILE.ini [--steps N] "
                     "[--device D]", NULL);
  torc_config *cfg = NULL;
  if (rc < 0) {
    cfg = torc_config_load(file);
    if (cfg == NULL) {
      fprintf(stderr, "torc memory: %s\n", torc_last_error());
      rc = TORC_TOOL_EXIT_USAGE;
    }
  }
  for (int i = 0; rc < 0 && i < n_sets; i++)
    if (torc_config_set(cfg, sets[i]) != TORC_OK) {
      fprintf(stderr, "torc memory: %s\n", torc_last_error());
      rc = TORC_TOOL_EXIT_USAGE;
    }
  free(sets);
  torc_status st = TORC_OK;
  if (rc < 0 && (st = torc_config_apply(cfg)) != TORC_OK) {
    fprintf(stderr, "torc memory: %s\n", torc_last_error());
    rc = torc_tool__exit_status(st);
  }
  if (rc < 0 && device)
    rc = use_device(cfg, device);
  if (rc >= 0) {
    torc_config_free(cfg);
    return rc;
  }
  mem_run r;
  long done = 0;
  st = mem_run_build(&r, cfg);
  if (st == TORC_OK)
    st = run_steps(&r, steps, &done);
  if (st != TORC_OK) {
    fprintf(stderr, "torc memory: %s\n", torc_last_error());
    /* As for `torc train`: before the first step the file, its data or a
     * shape is at fault (the status tells); after it, a failure while
     * running (out of memory above all). */
    rc = done > 0 ? TORC_TOOL_EXIT_RUNTIME : torc_tool__exit_status(st);
    /* Out of memory once the run is built: what the device holds then. */
    char *sum = st == TORC_ERR_OOM && r.opt ? torc_memory_summary(r.dev)
                                            : NULL;
    if (sum)
      printf("\nat the failure: %s", sum);
    free(sum);
  } else {
    rc = TORC_TOOL_EXIT_OK;
  }
  mem_run_free(&r);
  torc_config_free(cfg);
  return rc;
}
