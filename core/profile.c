/* core/profile.c — the profiler: with it on, the dispatcher times every
 * kernel (per op and device type), the module forward wrapper times every
 * module's forward, and the autograd engine charges each backward formula
 * to the module whose forward recorded it. torc_profile_report prints where
 * the time went: kernels by op, the framework's own share (the wall time
 * no kernel accounts for), and forward/backward per module — what `torc
 * bench` shows for a user's model, each op with the plugin that served
 * it. Off, it costs one predictable branch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

_Atomic int torc__prof_on;

typedef struct op_stat {
  _Atomic uint64_t calls, ns;
  /* The plugin that served the op's last call (its name lives as long as
   * the plugin is loaded); one op served by two plugins (by dtype) shows
   * the last. */
  _Atomic(const char *) provider;
} op_stat;

static op_stat op_stats[TORC__MAX_DEVICE_TYPES][TORC__OP_COUNT];

/* Modules seen, by address, with their path and type at first sight. */
typedef struct mod_stat {
  const void *m;
  char name[160];
  int order; /* first forward, for the report's order */
  uint64_t calls, fwd_ns, bwd_ns;
} mod_stat;

static mod_stat *mods;
static int n_mods, cap_mods;
static pthread_mutex_t mods_lock = PTHREAD_MUTEX_INITIALIZER;
static double t_on;

uint64_t torc__prof_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void torc__prof_kernel(int op, int devtype, const char *provider,
                       uint64_t ns) {
  op_stat *s = &op_stats[devtype][op];
  atomic_store_explicit(&s->provider, provider, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->calls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->ns, ns, memory_order_relaxed);
}

/* The stat of module m, created with `name` on first sight. Lock held. */
static mod_stat *mod_find(const void *m, const char *name) {
  for (int i = 0; i < n_mods; i++)
    if (mods[i].m == m)
      return &mods[i];
  if (name == NULL)
    return NULL;
  if (n_mods == cap_mods) {
    int cap = cap_mods ? cap_mods * 2 : 64;
    mod_stat *p = torc__realloc(mods, (size_t)cap * sizeof *p);
    if (p == NULL)
      return NULL;
    mods = p;
    cap_mods = cap;
  }
  mod_stat *s = &mods[n_mods];
  memset(s, 0, sizeof *s);
  s->m = m;
  s->order = n_mods++;
  snprintf(s->name, sizeof s->name, "%s", name);
  return s;
}

void torc__prof_module(const void *m, const char *name, uint64_t fwd_ns,
                       uint64_t bwd_ns) {
  pthread_mutex_lock(&mods_lock);
  mod_stat *s = mod_find(m, name);
  if (s) {
    s->calls += fwd_ns ? 1 : 0;
    s->fwd_ns += fwd_ns;
    s->bwd_ns += bwd_ns;
  }
  pthread_mutex_unlock(&mods_lock);
}

void torc_profile_enable(int on) {
  if (on) {
    pthread_mutex_lock(&mods_lock);
    memset(op_stats, 0, sizeof op_stats);
    n_mods = 0;
    t_on = (double)torc__prof_now();
    pthread_mutex_unlock(&mods_lock);
  }
  atomic_store(&torc__prof_on, on != 0);
}

int torc_profile_enabled(void) { return atomic_load(&torc__prof_on); }

typedef struct op_row {
  int op, dev;
  const char *provider;
  uint64_t calls, ns;
} op_row;

static int cmp_op_row(const void *a, const void *b) {
  const op_row *x = a, *y = b;
  return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

static int cmp_mod(const void *a, const void *b) {
  return ((const mod_stat *)a)->order - ((const mod_stat *)b)->order;
}

char *torc_profile_report(int top, int64_t steps) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (f == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory for the profile report");
    return NULL;
  }
  double wall = ((double)torc__prof_now() - t_on) * 1e-9;
  double per = 1e3 / (double)(steps > 0 ? steps : 1); /* s -> ms (/step) */
  const char *unit = steps > 0 ? "ms/step" : "ms";
  op_row *rows = torc__malloc(sizeof *rows * TORC__MAX_DEVICE_TYPES * TORC__OP_COUNT);
  int n = 0;
  double kernel_s = 0;
  for (int d = 0; rows && d < TORC__MAX_DEVICE_TYPES; d++)
    for (int o = 0; o < TORC__OP_COUNT; o++) {
      uint64_t c = atomic_load(&op_stats[d][o].calls);
      if (c == 0)
        continue;
      rows[n].op = o, rows[n].dev = d, rows[n].calls = c;
      rows[n].ns = atomic_load(&op_stats[d][o].ns);
      rows[n].provider = atomic_load(&op_stats[d][o].provider);
      kernel_s += (double)rows[n].ns * 1e-9;
      n++;
    }
  if (rows)
    qsort(rows, (size_t)n, sizeof *rows, cmp_op_row);
  fprintf(f, "kernels by op (%d of %d shown)\n", n < top || top <= 0 ? n : top,
          n);
  fprintf(f, "  %-28s %-8s %-10s %10s %12s %7s\n", "op", "device",
          "provider", "calls", unit, "share");
  for (int i = 0; i < n && (top <= 0 || i < top); i++)
    fprintf(f, "  %-28s %-8s %-10s %10llu %12.3f %6.1f%%\n",
            torc__ops[rows[i].op].name, torc_device_type_name(rows[i].dev),
            rows[i].provider ? rows[i].provider : "?",
            (unsigned long long)rows[i].calls,
            (double)rows[i].ns * 1e-9 * per,
            wall > 0 ? 100.0 * (double)rows[i].ns * 1e-9 / wall : 0);
  torc__free(rows);
  fprintf(f, "  %-28s %-8s %-10s %10s %12.3f %6.1f%%\n", "all kernels", "",
          "", "", kernel_s * per, wall > 0 ? 100.0 * kernel_s / wall : 0);
  fprintf(f, "  %-28s %-8s %-10s %10s %12.3f %6.1f%%\n",
          "outside kernels", "", "", "",
          (wall - kernel_s) * per,
          wall > 0 ? 100.0 * (wall - kernel_s) / wall : 0);
  pthread_mutex_lock(&mods_lock);
  if (n_mods > 0) {
    qsort(mods, (size_t)n_mods, sizeof *mods, cmp_mod);
    fprintf(f, "\nmodules (forward includes the module's children)\n");
    fprintf(f, "  %-36s %14s %14s\n", "module", "forward", "backward");
    for (int i = 0; i < n_mods; i++)
      fprintf(f, "  %-36s %10.3f %-3s %10.3f %-3s\n", mods[i].name,
              (double)mods[i].fwd_ns * 1e-9 * per, "ms",
              (double)mods[i].bwd_ns * 1e-9 * per, "ms");
  }
  pthread_mutex_unlock(&mods_lock);
  fprintf(f, "\nwall time %.3f s%s\n", wall,
          steps > 0 ? "; per-step figures divide by the steps" : "");
  if (fclose(f) != 0) {
    free(buf);
    torc_set_error(TORC_ERR_OOM, "out of memory for the profile report");
    return NULL;
  }
  return buf;
}

void torc__profile_clear(void) {
  pthread_mutex_lock(&mods_lock);
  torc__free(mods);
  mods = NULL;
  n_mods = cap_mods = 0;
  pthread_mutex_unlock(&mods_lock);
  atomic_store(&torc__prof_on, 0);
}
