/* core/profile.c — the profiler: with it on, the dispatcher times every
 * kernel (per op and device type), the module forward wrapper times every
 * module's forward, and the autograd engine charges each backward formula
 * to the module whose forward recorded it. torc_profile_report prints where
 * the time went: kernels by op, the framework's own share (the wall time
 * no kernel accounts for), and forward/backward per module — what `torc
 * bench` shows for a user's model, each op with the plugin that served
 * it. Each kernel call's FLOPs and bytes (core/kcost.c) are summed per op
 * and, through a per-thread running count read at the start and end of
 * each module pass, per module: torc_profile_roofline sets them against
 * the machine's peak (`torc bench --roofline`). Off, it costs one
 * predictable branch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

_Atomic int torc__prof_on;

typedef struct op_stat {
  _Atomic uint64_t calls, ns;
  /* The calls' FLOPs (those with a formula), the calls without one, and
   * the bytes they moved (torc_kernel_cost). */
  _Atomic uint64_t flops, uncounted, bytes;
  _Atomic int memory_bound;
  /* The plugin that served the op's first call, and another that served
   * a later one (by dtype: a sum of floats on cpu, of a bool on ref), both
   * shown; their names live as long as the plugins are loaded. */
  _Atomic(const char *) provider, other;
} op_stat;

static op_stat op_stats[TORC__MAX_DEVICE_TYPES][TORC__OP_COUNT];

/* Modules seen, by address, with their path and type at first sight. */
typedef struct mod_stat {
  const void *m;
  char name[160];
  int order; /* first forward, for the report's order */
  uint64_t calls, fwd_ns, bwd_ns;
  torc__prof_work fwd, bwd; /* the kernels' work in each pass */
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

/* This thread's kernels' work while profiling (torc__prof_thread_work). */
static _Thread_local torc__prof_work tl_work;

torc__prof_work torc__prof_thread_work(void) { return tl_work; }

void torc__prof_kernel(int op, int devtype, const char *provider,
                       uint64_t ns, const torc_kernel_cost *cost) {
  op_stat *s = &op_stats[devtype][op];
  const char *had = NULL;
  if (!atomic_compare_exchange_strong(&s->provider, &had, provider) &&
      had != provider && atomic_load(&s->other) == NULL)
    atomic_store(&s->other, provider);
  atomic_fetch_add_explicit(&s->calls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->ns, ns, memory_order_relaxed);
  if (cost->flops >= 0) {
    atomic_fetch_add_explicit(&s->flops, (uint64_t)cost->flops,
                              memory_order_relaxed);
    tl_work.flops += (uint64_t)cost->flops;
  } else {
    atomic_fetch_add_explicit(&s->uncounted, 1, memory_order_relaxed);
    tl_work.uncounted++;
  }
  if (cost->bytes > 0)
    atomic_fetch_add_explicit(&s->bytes, (uint64_t)cost->bytes,
                              memory_order_relaxed);
  atomic_store_explicit(&s->memory_bound, cost->memory_bound,
                        memory_order_relaxed);
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

void torc__prof_module(const void *m, const char *name, int backward,
                       uint64_t ns, torc__prof_work since) {
  torc__prof_work now = tl_work;
  pthread_mutex_lock(&mods_lock);
  mod_stat *s = mod_find(m, name);
  if (s) {
    torc__prof_work *w = backward ? &s->bwd : &s->fwd;
    s->calls += backward ? 0 : 1;
    *(backward ? &s->bwd_ns : &s->fwd_ns) += ns;
    w->flops += now.flops - since.flops;
    w->uncounted += now.uncounted - since.uncounted;
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
  char provider[24]; /* "cpu", or "cpu+ref" for two */
  uint64_t calls, ns, flops, uncounted, bytes;
  int memory_bound;
} op_row;

static int cmp_op_row(const void *a, const void *b) {
  const op_row *x = a, *y = b;
  return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

/* The (device type, op) pairs that ran, costliest first, into a malloc'ed
 * array (*rows; NULL on OOM, with *n 0); their kernel time in *kernel_s. */
static void collect_rows(op_row **rows, int *n, double *kernel_s) {
  op_row *r = torc__malloc(sizeof *r * TORC__MAX_DEVICE_TYPES * TORC__OP_COUNT);
  *rows = r;
  *n = 0;
  *kernel_s = 0;
  for (int d = 0; r && d < TORC__MAX_DEVICE_TYPES; d++)
    for (int o = 0; o < TORC__OP_COUNT; o++) {
      const op_stat *st = &op_stats[d][o];
      uint64_t c = atomic_load(&st->calls);
      if (c == 0)
        continue;
      op_row *x = &r[(*n)++];
      x->op = o, x->dev = d, x->calls = c;
      x->ns = atomic_load(&st->ns);
      const char *p = atomic_load(&st->provider), *q = atomic_load(&st->other);
      snprintf(x->provider, sizeof x->provider, "%s%s%s", p ? p : "?",
               q ? "+" : "", q ? q : "");
      x->flops = atomic_load(&st->flops);
      x->uncounted = atomic_load(&st->uncounted);
      x->bytes = atomic_load(&st->bytes);
      x->memory_bound = atomic_load(&st->memory_bound);
      *kernel_s += (double)x->ns * 1e-9;
    }
  if (r)
    qsort(r, (size_t)*n, sizeof *r, cmp_op_row);
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
  op_row *rows;
  int n;
  double kernel_s;
  collect_rows(&rows, &n, &kernel_s);
  fprintf(f, "kernels by op (%d of %d shown)\n", n < top || top <= 0 ? n : top,
          n);
  fprintf(f, "  %-28s %-8s %-10s %10s %12s %7s\n", "op", "device",
          "provider", "calls", unit, "share");
  for (int i = 0; i < n && (top <= 0 || i < top); i++)
    fprintf(f, "  %-28s %-8s %-10s %10llu %12.3f %6.1f%%\n",
            torc__ops[rows[i].op].name, torc_device_type_name(rows[i].dev),
            rows[i].provider,
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

/* ---- the roofline ---- */

/* v with thousands separators ("25,690,112") into buf. */
static const char *grouped(uint64_t v, char *buf, size_t size) {
  char digits[32];
  int nd = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
  size_t o = 0;
  for (int i = 0; i < nd && o + 2 < size; i++) {
    if (i > 0 && (nd - i) % 3 == 0)
      buf[o++] = ',';
    buf[o++] = digits[i];
  }
  buf[o] = '\0';
  return buf;
}

/* FLOPs per step of a work total: grouped, "+" after it when some calls
 * had no formula, "-" when none had one. */
static const char *flops_cell(uint64_t flops, uint64_t uncounted,
                              int64_t steps, char *buf, size_t size) {
  if (flops == 0 && uncounted > 0)
    return "-";
  uint64_t per = steps > 0 ? (flops + (uint64_t)steps / 2) / (uint64_t)steps
                           : flops;
  char g[40];
  snprintf(buf, size, "%s%s", grouped(per, g, sizeof g),
           uncounted > 0 ? "+" : "");
  return buf;
}

/* GFLOP/s and the % of peak of `flops` done in `ns` ("-" where either
 * means nothing: no FLOPs counted, no time, no peak). */
static void rate_cells(uint64_t flops, double ns, double peak, char *rate,
                       char *pct, size_t size) {
  snprintf(rate, size, "-");
  snprintf(pct, size, "-");
  if (flops == 0 || ns <= 0)
    return;
  double g = (double)flops / ns; /* FLOP/ns = GFLOP/s */
  snprintf(rate, size, "%.1f", g);
  if (peak > 0)
    snprintf(pct, size, "%.1f%%", 100.0 * g / peak);
}

char *torc_profile_roofline(int top, int64_t steps, double peak_gflops) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (f == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory for the roofline report");
    return NULL;
  }
  double wall_ns = (double)torc__prof_now() - t_on;
  double per = 1e-6 / (double)(steps > 0 ? steps : 1); /* ns -> ms(/step) */
  const char *unit = steps > 0 ? "ms/step" : "ms";
  const char *funit = steps > 0 ? "FLOP/step" : "FLOP";
  op_row *rows;
  int n;
  double kernel_s;
  collect_rows(&rows, &n, &kernel_s);
  char c1[48], c2[48], r[24], p[24];
  int plus = 0;
  fprintf(f, "roofline by op (%d of %d shown; GB/s for the memory-bound "
             "ops)\n",
          n < top || top <= 0 ? n : top, n);
  fprintf(f, "  %-28s %-6s %-8s %8s %18s %9s %8s %7s %7s  %s\n", "op",
          "device", "provider", "calls", funit, unit, "GFLOP/s", "% peak",
          "GB/s", "bound");
  uint64_t all_flops = 0, all_unc = 0;
  for (int i = 0; i < n; i++) {
    all_flops += rows[i].flops;
    all_unc += rows[i].uncounted;
    if (top > 0 && i >= top)
      continue;
    const op_row *x = &rows[i];
    rate_cells(x->flops, (double)x->ns, x->dev == 0 ? peak_gflops : 0, r, p,
               sizeof r);
    const char *fc = flops_cell(x->flops, x->uncounted, steps, c1, sizeof c1);
    plus |= x->flops > 0 && x->uncounted > 0;
    if (x->memory_bound && x->ns > 0)
      snprintf(c2, sizeof c2, "%.2f", (double)x->bytes / (double)x->ns);
    else
      snprintf(c2, sizeof c2, "-");
    fprintf(f, "  %-28s %-6s %-8s %8llu %18s %9.3f %8s %7s %7s  %s\n",
            torc__ops[x->op].name, torc_device_type_name(x->dev),
            x->provider, (unsigned long long)x->calls, fc,
            (double)x->ns * per, r, p, c2,
            x->memory_bound ? "memory" : "compute");
  }
  torc__free(rows);
  rate_cells(all_flops, kernel_s * 1e9, peak_gflops, r, p, sizeof r);
  plus |= all_flops > 0 && all_unc > 0;
  fprintf(f, "  %-28s %-6s %-8s %8s %18s %9.3f %8s %7s\n", "all kernels", "",
          "", "", flops_cell(all_flops, all_unc, steps, c1, sizeof c1),
          kernel_s * 1e9 * per, r, p);
  fprintf(f, "  %-28s %-6s %-8s %8s %18s %9.3f\n", "outside kernels", "", "",
          "", "", (wall_ns - kernel_s * 1e9) * per);
  pthread_mutex_lock(&mods_lock);
  if (n_mods > 0) {
    qsort(mods, (size_t)n_mods, sizeof *mods, cmp_mod);
    fprintf(f, "\nroofline by module (forward includes the module's "
               "children; GFLOP/s of both passes)\n");
    fprintf(f, "  %-30s %9s %9s %18s %18s %8s %7s\n", "module", "fwd ms",
            "bwd ms", "fwd FLOP", "bwd FLOP", "GFLOP/s", "% peak");
    for (int i = 0; i < n_mods; i++) {
      const mod_stat *m = &mods[i];
      uint64_t fl = m->fwd.flops + m->bwd.flops;
      rate_cells(fl, (double)(m->fwd_ns + m->bwd_ns), peak_gflops, r, p,
                 sizeof r);
      plus |= (m->fwd.flops > 0 && m->fwd.uncounted > 0) ||
              (m->bwd.flops > 0 && m->bwd.uncounted > 0);
      fprintf(f, "  %-30s %9.3f %9.3f %18s %18s %8s %7s\n", m->name,
              (double)m->fwd_ns * per, (double)m->bwd_ns * per,
              flops_cell(m->fwd.flops, m->fwd.uncounted, steps, c1,
                         sizeof c1),
              flops_cell(m->bwd.flops, m->bwd.uncounted, steps, c2,
                         sizeof c2),
              r, p);
    }
  }
  pthread_mutex_unlock(&mods_lock);
  if (plus)
    fprintf(f, "\n(N+: N FLOPs counted, and kernels with no FLOP formula "
               "ran too; -: none had one)\n");
  /* The whole step: every kernel's FLOPs over the wall time. */
  rate_cells(all_flops, wall_ns, peak_gflops, r, p, sizeof r);
  fprintf(f, "\n%s: %s %s in %.3f %s = %s GFLOP/s", steps > 0 ? "step" : "total",
          flops_cell(all_flops, all_unc, steps, c1, sizeof c1), funit,
          wall_ns * per, unit, r);
  if (peak_gflops > 0)
    fprintf(f, ", %s of the %.1f GFLOP/s peak\n", p, peak_gflops);
  else
    fprintf(f, " (no peak to compare with)\n");
  fprintf(f, "wall time %.3f s%s\n", wall_ns * 1e-9,
          steps > 0 ? "; per-step figures divide by the steps" : "");
  if (fclose(f) != 0) {
    free(buf);
    torc_set_error(TORC_ERR_OOM, "out of memory for the roofline report");
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
