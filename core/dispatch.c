/* core/dispatch.c — the kernel registry and the dispatcher: (device type,
 * op, dtype) -> the kernels in priority order, the first found by three
 * array indexes; the call itself (device checks, contiguous inputs on
 * request, the kernel arguments, the next kernel when one declines); the
 * opt-in cpu fallback; the warning when the reference kernels serve a
 * heavy op on the cpu while a faster plugin sits unused.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "stream_internal.h"

typedef struct kentry {
  int op, devtype, dtype; /* dtype -1 = ANY */
  int priority;           /* effective */
  uint64_t seq;           /* registration order: later wins ties */
  torc_kernel_fn fn;
  void *data;
  uint32_t flags;
  torc__plugin *owner;
} kentry;

typedef struct kbest {
  torc_kernel_fn fn;
  void *data;
  uint32_t flags;
  uint64_t seq; /* the winning registration */
  int priority; /* its effective priority */
  torc__plugin *owner;
  /* The key's other kernels, best first, tried in turn when the ones
   * before decline (TORC_KERNEL_DECLINED): for an exact dtype, its other
   * kernels and then the ANY kernels. They live in ranked[][]. */
  const struct kbest *rest;
  int n_rest;
} kbest;

static kentry *entries;
static int n_entries, cap_entries;
static kentry *sorted; /* entries sorted for listing; NULL when stale */
static uint64_t next_seq;
/* best[devtype][op][dtype + 1]; slot 0 is TORC_DTYPE_ANY. */
static kbest best[TORC__MAX_DEVICE_TYPES][TORC__OP_COUNT][TORC_DTYPE_COUNT + 1];
/* ranked[devtype][op]: one allocation holding the `rest` lists of every
 * dtype slot of the pair, rebuilt with them when the registry changes. */
static kbest *ranked[TORC__MAX_DEVICE_TYPES][TORC__OP_COUNT];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static int fallback_cpu;
/* (op, devtype) pairs already logged by the fallback. */
static unsigned char fallback_logged[TORC__MAX_DEVICE_TYPES][TORC__OP_COUNT];
/* Ops of the cpu whose provider was checked by slow_provider_check since
 * the registry last changed, and those warned about (once per process). */
static _Atomic unsigned char slow_checked[TORC__OP_COUNT];
static unsigned char slow_warned[TORC__OP_COUNT];

const torc__opinfo torc__ops[TORC__OP_COUNT] = {
#define TORC_OP(name, kind, rule, ...)                                         \
  {#name, TORC__OPK_##kind, TORC__R_##rule},
#include "torc/ops.def"
#undef TORC_OP
};

/* The public function names used in messages, per suffix ("", "_",
 * "_scalar", "_scalar_"): built once, so the hot path never formats. */
const char *const torc__op_fn[4][TORC__OP_COUNT] = {
    {
#define TORC_OP(name, ...) "torc_" #name,
#include "torc/ops.def"
#undef TORC_OP
    },
    {
#define TORC_OP(name, ...) "torc_" #name "_",
#include "torc/ops.def"
#undef TORC_OP
    },
    {
#define TORC_OP(name, ...) "torc_" #name "_scalar",
#include "torc/ops.def"
#undef TORC_OP
    },
    {
#define TORC_OP(name, ...) "torc_" #name "_scalar_",
#include "torc/ops.def"
#undef TORC_OP
    },
};

static const char *op_name_list[TORC__OP_COUNT + 1] = {
#define TORC_OP(name, ...) #name,
#include "torc/ops.def"
#undef TORC_OP
    NULL};

const char *const *torc_op_names(void) { return op_name_list; }

int torc__op_find(const char *name) {
  if (name)
    for (int i = 0; i < TORC__OP_COUNT; i++)
      if (strcmp(torc__ops[i].name, name) == 0)
        return i;
  return -1;
}

void torc__set_fallback(int on) { fallback_cpu = on; }

/* The known op name nearest to `name`, or NULL when none is near enough
 * (more edits than half the name) for a suggestion to help. */
static const char *nearest_op(const char *name) {
  const char *win = NULL;
  size_t win_d = SIZE_MAX;
  for (int i = 0; i < TORC__OP_COUNT; i++) {
    size_t d = torc_edit_distance(name, torc__ops[i].name);
    if (d < win_d)
      win = torc__ops[i].name, win_d = d;
  }
  size_t len = strlen(name);
  return win && win_d <= (len > 4 ? len / 2 : 2) ? win : NULL;
}

/* A kernel for an op this core does not know. A typo in a plugin's kernel
 * table would otherwise leave the op to another provider unnoticed, so it
 * is an error that fails the plugin's load (plugin.c fails it even when
 * init ignores the status). The one exception is a plugin built for a
 * newer minor ABI than this core's: it may name ops added since, and those
 * kernels are skipped (logged once per plugin). */
static int unknown_op(torc__plugin *owner, const char *who, const char *name) {
  if (owner && torc__plugin_abi_minor(owner) > TORC_ABI_MINOR) {
    if (torc__plugin_note_unknown_op(owner) == 0)
      torc_logf(TORC_LOG_INFO,
                "plugin '%s' was built for torc ABI %d.%u, newer than this "
                "torc's %d.%d: its kernels for ops this torc lacks ('%s' "
                "and any others) are skipped",
                who, TORC_ABI_MAJOR, (unsigned)torc__plugin_abi_minor(owner),
                TORC_ABI_MAJOR, TORC_ABI_MINOR, name);
    return TORC_OK;
  }
  const char *near = nearest_op(name);
  char hint[96] = "";
  if (near)
    snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
  torc_status st = torc_set_error(
      TORC_ERR_PLUGIN,
      "plugin '%s': register_kernel: no op is named '%s'%s; the op names are "
      "those of torc/ops.h (torc plugins lists them)",
      who, name, hint);
  if (owner)
    torc__plugin_refuse_op(owner, torc_last_error());
  return st;
}

/* 1 when a ranks before b: higher priority, then later registration. */
static int ranks_before(const kentry *a, const kentry *b) {
  return a->priority > b->priority ||
         (a->priority == b->priority && a->seq > b->seq);
}

static void set_kbest(kbest *b, const kentry *e) {
  b->fn = e->fn;
  b->data = e->data;
  b->flags = e->flags;
  b->seq = e->seq;
  b->priority = e->priority;
  b->owner = e->owner;
  b->rest = NULL;
  b->n_rest = 0;
}

/* Rebuilds best[] and the ranked lists of every dtype slot of (devtype,
 * op): the pair's entries sorted once, then per slot its exact-dtype
 * kernels followed by the ANY ones. Called with reg_lock held, only when
 * the registry changes, so dispatch itself never sorts. On allocation
 * failure the slots keep only their winners (declines then end the list
 * early; nothing else changes). */
static void recompute(int devtype, int op) {
  int n = 0;
  for (int i = 0; i < n_entries; i++)
    if (entries[i].devtype == devtype && entries[i].op == op)
      n++;
  torc__free(ranked[devtype][op]);
  ranked[devtype][op] = NULL;
  kbest *slots = best[devtype][op];
  memset(slots, 0, sizeof best[devtype][op]);
  if (devtype == 0)
    atomic_store_explicit(&slow_checked[op], 0, memory_order_relaxed);
  if (n == 0)
    return;
  const kentry **mine = torc__malloc((size_t)n * sizeof *mine);
  if (mine == NULL) { /* winners only, as found by a plain scan */
    const kentry *win[TORC_DTYPE_COUNT + 1] = {0};
    for (int i = 0; i < n_entries; i++) {
      const kentry *e = &entries[i];
      if (e->devtype == devtype && e->op == op &&
          (win[e->dtype + 1] == NULL || ranks_before(e, win[e->dtype + 1])))
        win[e->dtype + 1] = e;
    }
    for (int d = 0; d <= TORC_DTYPE_COUNT; d++)
      if (win[d])
        set_kbest(&slots[d], win[d]);
    return;
  }
  n = 0;
  for (int i = 0; i < n_entries; i++)
    if (entries[i].devtype == devtype && entries[i].op == op)
      mine[n++] = &entries[i];
  /* Insertion sort: a pair has a handful of kernels. */
  for (int i = 1; i < n; i++) {
    const kentry *e = mine[i];
    int j = i;
    for (; j > 0 && ranks_before(e, mine[j - 1]); j--)
      mine[j] = mine[j - 1];
    mine[j] = e;
  }
  int n_any = 0, n_rest = 0;
  for (int i = 0; i < n; i++)
    n_any += mine[i]->dtype == -1;
  /* Slot 0 (ANY) ranks the ANY kernels; slot d + 1 its own, then ANY. */
  for (int d = -1; d < TORC_DTYPE_COUNT; d++) {
    int own = 0;
    for (int i = 0; i < n; i++)
      own += mine[i]->dtype == d;
    if (own > 0)
      n_rest += own - 1 + (d >= 0 ? n_any : 0);
  }
  kbest *pool = n_rest ? torc__malloc((size_t)n_rest * sizeof *pool) : NULL;
  ranked[devtype][op] = pool;
  int used = 0;
  for (int d = -1; d < TORC_DTYPE_COUNT; d++) {
    kbest *b = &slots[d + 1];
    for (int pass = 0; pass < 2; pass++) {
      int want = pass == 0 ? d : -1;
      if (pass == 1 && (d < 0 || b->fn == NULL))
        break;
      for (int i = 0; i < n; i++) {
        if (mine[i]->dtype != want)
          continue;
        if (b->fn == NULL) {
          set_kbest(b, mine[i]);
          b->rest = pool ? pool + used : NULL;
        } else if (pool) {
          set_kbest(&pool[used++], mine[i]);
          b->n_rest++;
        }
      }
    }
  }
  torc__free(mine);
}

int torc__kernel_register(torc__plugin *owner, const torc_kernel_reg *reg) {
  const char *who = owner ? torc__plugin_name(owner) : "core";
  if (reg == NULL ||
      reg->struct_size < offsetof(torc_kernel_reg, fn) + sizeof reg->fn)
    return torc_set_error(TORC_ERR_PLUGIN,
                          "plugin %s: register_kernel: torc_kernel_reg too "
                          "small; rebuild the plugin against this torc",
                          who);
  if (reg->fn == NULL || reg->op == NULL || reg->device_type == NULL)
    return torc_set_error(TORC_ERR_PLUGIN,
                          "plugin %s: register_kernel: op, device_type and fn "
                          "must be set",
                          who);
  int op = torc__op_find(reg->op);
  if (op < 0)
    return unknown_op(owner, who, reg->op);
  if (reg->dtype != TORC_DTYPE_ANY && !torc_dtype_valid(reg->dtype))
    return torc_set_error(TORC_ERR_PLUGIN,
                          "plugin %s: register_kernel '%s': invalid dtype %d",
                          who, reg->op, (int)reg->dtype);
  int devtype = torc__devtype_find(reg->device_type);
  if (devtype < 0)
    return torc_set_error(TORC_ERR_DEVICE,
                          "plugin %s: register_kernel '%s': device type '%s' "
                          "is not registered; load the plugin that provides "
                          "it first",
                          who, reg->op, reg->device_type);
  pthread_mutex_lock(&reg_lock);
  if (n_entries == cap_entries) {
    int cap = cap_entries ? cap_entries * 2 : 512;
    kentry *p = torc__realloc(entries, (size_t)cap * sizeof *p);
    if (p == NULL) {
      pthread_mutex_unlock(&reg_lock);
      return torc_set_error(TORC_ERR_OOM, "out of memory registering kernels");
    }
    entries = p;
    cap_entries = cap;
  }
  kentry *e = &entries[n_entries++];
  e->op = op;
  e->devtype = devtype;
  e->dtype = reg->dtype;
  e->priority = reg->priority + (owner ? torc__plugin_priority(owner) : 0);
  e->seq = next_seq++;
  e->fn = reg->fn;
  e->data = TORC_HAS_SLOT(reg, torc_kernel_reg, data) ? reg->data : NULL;
  e->flags = TORC_HAS_SLOT(reg, torc_kernel_reg, flags) ? reg->flags : 0;
  e->owner = owner;
  recompute(devtype, op);
  torc__free(sorted);
  sorted = NULL;
  pthread_mutex_unlock(&reg_lock);
  return TORC_OK;
}

/* 1 when some slot of (devtype, op) holds a kernel. Called with reg_lock
 * held. */
static int pair_used(int devtype, int op) {
  for (int d = 0; d <= TORC_DTYPE_COUNT; d++)
    if (best[devtype][op][d].fn)
      return 1;
  return 0;
}

void torc__kernel_unregister_owner(torc__plugin *owner) {
  pthread_mutex_lock(&reg_lock);
  int w = 0;
  for (int i = 0; i < n_entries; i++)
    if (entries[i].owner != owner)
      entries[w++] = entries[i];
  int removed = n_entries - w;
  n_entries = w;
  torc__free(sorted);
  sorted = NULL;
  if (removed) {
    /* Every pair rebuilds: those the owner served lose its kernels, and
     * a pair left empty must drop its lists too. */
    for (int t = 0; t < TORC__MAX_DEVICE_TYPES; t++)
      for (int o = 0; o < TORC__OP_COUNT; o++)
        if (pair_used(t, o))
          recompute(t, o);
  }
  pthread_mutex_unlock(&reg_lock);
}

void torc__registry_clear(void) {
  pthread_mutex_lock(&reg_lock);
  torc__free(entries);
  entries = NULL;
  torc__free(sorted);
  sorted = NULL;
  n_entries = cap_entries = 0;
  for (int t = 0; t < TORC__MAX_DEVICE_TYPES; t++)
    for (int o = 0; o < TORC__OP_COUNT; o++) {
      torc__free(ranked[t][o]);
      ranked[t][o] = NULL;
    }
  memset(best, 0, sizeof best);
  memset(fallback_logged, 0, sizeof fallback_logged);
  memset(slow_warned, 0, sizeof slow_warned);
  for (int i = 0; i < TORC__OP_COUNT; i++)
    atomic_store(&slow_checked[i], 0);
  fallback_cpu = 0;
  pthread_mutex_unlock(&reg_lock);
}

/* The provider this thread prefers (torc__dispatch_pin), or NULL. */
static _Thread_local const char *tl_pin;
static _Thread_local kbest tl_pinned;

void torc__dispatch_pin(const char *provider) { tl_pin = provider; }

/* The pinned provider's best kernel for the key (exact dtype, else ANY),
 * or NULL when it has none. */
static const kbest *lookup_pinned(int devtype, int op, torc_dtype dt) {
  const kentry *win = NULL;
  pthread_mutex_lock(&reg_lock);
  for (int pass = 0; pass < 2 && win == NULL; pass++) {
    int want = pass == 0 ? (int)dt : -1;
    for (int i = 0; i < n_entries; i++) {
      const kentry *e = &entries[i];
      if (e->devtype != devtype || e->op != op || e->dtype != want ||
          e->owner == NULL || strcmp(torc__plugin_name(e->owner), tl_pin))
        continue;
      if (win == NULL || e->priority > win->priority ||
          (e->priority == win->priority && e->seq > win->seq))
        win = e;
    }
  }
  if (win)
    set_kbest(&tl_pinned, win);
  pthread_mutex_unlock(&reg_lock);
  return win ? &tl_pinned : NULL;
}

/* The head of the key's ranked list (exact dtype, else ANY), unpinned. */
static const kbest *lookup_list(int devtype, int op, torc_dtype dt) {
  const kbest *b = &best[devtype][op][dt + 1];
  if (b->fn)
    return b;
  b = &best[devtype][op][0];
  return b->fn ? b : NULL;
}

static const kbest *lookup(int devtype, int op, torc_dtype dt) {
  if (tl_pin) {
    const kbest *p = lookup_pinned(devtype, op, dt);
    if (p)
      return p;
  }
  const kbest *b = &best[devtype][op][dt + 1];
  if (b->fn)
    return b;
  b = &best[devtype][op][0];
  return b->fn ? b : NULL;
}

int torc__kernel_rank(int devtype, int op, torc_dtype dt) {
  if (devtype < 0 || devtype >= TORC__MAX_DEVICE_TYPES || op < 0 ||
      op >= TORC__OP_COUNT || dt < 0 || dt >= TORC_DTYPE_COUNT)
    return INT_MIN;
  const kbest *k = lookup(devtype, op, dt);
  return k ? k->priority : INT_MIN;
}

/* ---- the slow-provider warning ---- */

/* The heavy ops of a training step and the plugins of this tree that
 * serve them on the cpu faster than the reference kernels. */
static const struct {
  const char *op;
  const char *fast[2];
} heavy_ops[] = {
    {"matmul", {"cpu", NULL}},
    {"conv2d", {"onednn", "cpu"}},
    {"conv2d_backward_input", {"onednn", "cpu"}},
    {"conv2d_backward_weight", {"onednn", "cpu"}},
    {"conv_transpose2d", {"onednn", "cpu"}},
    {"max_pool2d", {"onednn", NULL}},
    {"max_pool2d_backward", {"onednn", NULL}},
    {"avg_pool2d", {"onednn", NULL}},
    {"avg_pool2d_backward", {"onednn", NULL}},
    {"batch_norm", {"onednn", NULL}},
    {"batch_norm_backward", {"onednn", NULL}},
};

/* 1 when some kernel in the registry belongs to a plugin named `name`.
 * Called with reg_lock held. */
static int registry_has_owner(const char *name) {
  for (int i = 0; i < n_entries; i++)
    if (entries[i].owner && strcmp(torc__plugin_name(entries[i].owner),
                                   name) == 0)
      return 1;
  return 0;
}

/* Op `op` on the cpu is served by `owner`: if that is the reference
 * plugin, the op is a heavy one and a faster plugin for it is installed
 * but not loaded (none of its kernels is registered), warn once with the
 * lines to add. Decided once per op until the registry changes, so the hot
 * path pays one relaxed load. */
static void slow_provider_check(int op, const torc__plugin *owner) {
  atomic_store_explicit(&slow_checked[op], 1, memory_order_relaxed);
  if (owner == NULL || strcmp(torc__plugin_name(owner), "ref") != 0)
    return;
  const char *name = torc__ops[op].name;
  for (size_t h = 0; h < sizeof heavy_ops / sizeof *heavy_ops; h++) {
    if (strcmp(heavy_ops[h].op, name) != 0)
      continue;
    char add[256] = "";
    size_t len = 0;
    pthread_mutex_lock(&reg_lock);
    int warned = slow_warned[op];
    for (int f = 0; f < 2 && heavy_ops[h].fast[f] && !warned; f++) {
      const char *fast = heavy_ops[h].fast[f];
      if (!registry_has_owner(fast) && torc__plugin_findable(fast, NULL))
        len += (size_t)snprintf(add + len, sizeof add - len,
                                "%s[plugin.%s] module = %s",
                                len ? " and " : "", fast, fast);
    }
    if (len > 0)
      slow_warned[op] = 1;
    pthread_mutex_unlock(&reg_lock);
    if (len > 0)
      torc_logf(TORC_LOG_WARN,
                "op '%s' on cpu runs on the slow reference kernels (plugin "
                "ref), though a faster plugin for it is installed but not "
                "loaded: add %s to the INI file (or leave out every "
                "[plugin.NAME] section to load the standard set)",
                name, add);
    return;
  }
}

/* ---- listing (torc plugins) ---- */

static int cmp_entry(const void *pa, const void *pb) {
  const kentry *a = pa, *b = pb;
  int c = strcmp(torc__ops[a->op].name, torc__ops[b->op].name);
  if (c == 0)
    c = strcmp(torc_device_type_name(a->devtype),
               torc_device_type_name(b->devtype));
  if (c == 0)
    c = a->dtype - b->dtype;
  if (c == 0)
    c = b->priority - a->priority;
  if (c == 0)
    c = a->seq < b->seq ? 1 : -1;
  return c;
}

int torc_kernel_count(void) { return n_entries; }

torc_status torc_kernel_get(int i, torc_kernel_summary *out) {
  pthread_mutex_lock(&reg_lock);
  if (i < 0 || i >= n_entries) {
    pthread_mutex_unlock(&reg_lock);
    return torc_set_error(TORC_ERR_RANGE,
                          "torc_kernel_get: index %d out of range (%d kernels)",
                          i, n_entries);
  }
  /* A sorted copy, kept until the registry changes, so registration order
   * (tie-breaking) is never disturbed and listing stays O(n log n). */
  if (sorted == NULL) {
    sorted = torc__malloc((size_t)n_entries * sizeof *sorted);
    if (sorted == NULL) {
      pthread_mutex_unlock(&reg_lock);
      return torc_set_error(TORC_ERR_OOM, "out of memory");
    }
    memcpy(sorted, entries, (size_t)n_entries * sizeof *sorted);
    qsort(sorted, (size_t)n_entries, sizeof *sorted, cmp_entry);
  }
  const kentry *e = &sorted[i];
  out->op = torc__ops[e->op].name;
  out->device_type = torc_device_type_name(e->devtype);
  out->dtype = (torc_dtype)e->dtype;
  out->provider = e->owner ? torc__plugin_name(e->owner) : "core";
  out->priority = e->priority;
  const kbest *b = &best[e->devtype][e->op][e->dtype + 1];
  out->active = b->fn != NULL && b->seq == e->seq;
  pthread_mutex_unlock(&reg_lock);
  return TORC_OK;
}

/* ---- the call ---- */

torc_status torc__same_device(const char *fn, const torc_tensor *const *ts,
                              int n) {
  for (int i = 1; i < n; i++) {
    torc_device a = ts[0]->storage->device, b = ts[i]->storage->device;
    if (!torc_device_eq(a, b)) {
      const char *first = torc__devname(a), *other = torc__devname(b);
      return torc_set_error(TORC_ERR_DEVICE,
                            "%s: expected all tensors on one device, but one "
                            "is on %s and another on %s; move one with "
                            "torc_to(t, device) (torc never copies between "
                            "devices silently)",
                            fn, first, other);
    }
  }
  return TORC_OK;
}

/* The error for a missing kernel: where the op exists, and which dtypes
 * this device does have. */
static torc_status no_kernel(int op, torc_dtype dt, torc_device dev) {
  char where[512] = "", dts[256] = "";
  size_t wl = 0, dl = 0;
  for (int t = 0; t < TORC__MAX_DEVICE_TYPES; t++) {
    if (t == dev.type || !torc_device_type_name(t))
      continue;
    if (lookup(t, op, dt) && wl < sizeof where)
      wl += (size_t)snprintf(where + wl, sizeof where - wl, "%s%s",
                             wl ? ", " : "", torc_device_type_name(t));
  }
  for (int d = 0; d < TORC_DTYPE_COUNT; d++)
    if (best[dev.type][op][d + 1].fn && dl < sizeof dts)
      dl += (size_t)snprintf(dts + dl, sizeof dts - dl, "%s%s",
                             dl ? ", " : "", torc_dtype_name((torc_dtype)d));
  const char *name = torc__ops[op].name;
  const char *dname = torc__devname(dev);
  if (wl == 0 && dl == 0)
    return torc_set_error(
        TORC_ERR_NO_KERNEL,
        "no kernel for op '%s' (%s) on %s, nor on any loaded device; load a "
        "backend plugin that provides it (e.g. [plugin.ref] module = ref)",
        name, torc_dtype_name(dt), dname);
  return torc_set_error(
      TORC_ERR_NO_KERNEL,
      "no kernel for op '%s' with dtype %s on %s.%s%s%s%s%s Move the tensors "
      "with torc_to(), cast with torc_to_dtype(), or set [torc] fallback = "
      "cpu to run it on the CPU.",
      name, torc_dtype_name(dt), dname, wl ? " Devices that have it: " : "",
      where, wl ? "." : "", dl ? " Dtypes this device has for it: " : "",
      dl ? dts : "");
}

/* Runs the op on the cpu with copies, then writes the results back. */
static torc_status run_fallback(int op, torc_dtype kdt,
                                const torc_tensor *const *in, int n_in,
                                torc_tensor *const *out, int n_out,
                                const void *params, size_t psize) {
  torc_tensor *cin[TORC__KCALL_MAX_IN] = {0}, *cout[TORC__KCALL_MAX_OUT] = {0};
  torc_status st = TORC_OK;
  for (int i = 0; i < n_in && st == TORC_OK; i++)
    if ((cin[i] = torc__to(in[i], TORC_CPU)) == NULL)
      st = torc_last_status();
  for (int i = 0; i < n_out && st == TORC_OK; i++)
    if ((cout[i] = torc__empty(out[i]->shape, out[i]->ndim, out[i]->dtype,
                               TORC_CPU)) == NULL)
      st = torc_last_status();
  if (st == TORC_OK)
    st = torc__kernel_call(op, kdt, (const torc_tensor *const *)cin, n_in,
                           cout, n_out, params, psize);
  for (int i = 0; i < n_out && st == TORC_OK; i++) {
    torc_tensor *o = out[i];
    if (torc_is_contiguous(o)) { /* straight into the device's memory */
      size_t es = torc_dtype_size(o->dtype);
      torc__devtype *d = torc__devtype_get(o->storage->device.type);
      st = torc__copy_from_host(d, o->storage->device.index, o->storage->ptr,
                                (size_t)o->offset * es, cout[i]->storage->ptr,
                                (size_t)torc__numel(o->shape, o->ndim) * es,
                                0);
      continue;
    }
    torc_tensor *back = torc__to(cout[i], o->storage->device);
    if (back == NULL) {
      st = torc_last_status();
      break;
    }
    st = torc__kernel_call(TORC__OP_copy, back->dtype,
                           (const torc_tensor *const *)&back, 1, &out[i], 1,
                           NULL, 0);
    torc_release(back);
  }
  for (int i = 0; i < n_in; i++)
    torc_release(cin[i]);
  for (int i = 0; i < n_out; i++)
    torc_release(cout[i]);
  return st;
}

/* Every kernel for the call declined it. With [torc] fallback = cpu on
 * another device and a cpu kernel for the key, logs the fallback once and
 * returns TORC_OK (the caller runs it on the cpu); otherwise the error
 * names the op, the inputs' and outputs' shapes and dtypes, and each
 * provider that declined. */
static torc_status all_declined(int op, torc_dtype dt, torc_device dev,
                                const torc_tensor *const *in, int n_in,
                                torc_tensor *const *out, int n_out,
                                const char *const *who, int n_who) {
  const char *name = torc__ops[op].name;
  if (fallback_cpu && dev.type != 0 && lookup(0, op, dt)) {
    if (!fallback_logged[dev.type][op]) {
      fallback_logged[dev.type][op] = 1;
      torc_logf(TORC_LOG_WARN,
                "op '%s' (%s): every kernel on %s declined these inputs: "
                "running it on the cpu with copies ([torc] fallback = cpu); "
                "this is slow",
                name, torc_dtype_name(dt), torc__devname(dev));
    }
    return TORC_OK;
  }
  char args[512] = "", provs[256] = "", sh[128];
  size_t al = 0, pl = 0;
  for (int i = 0; i < n_in + n_out && al < sizeof args; i++) {
    const torc_tensor *t = i < n_in ? in[i] : out[i - n_in];
    al += (size_t)snprintf(args + al, sizeof args - al, "%s%s %s",
                           i == 0 ? "" : i == n_in ? " -> " : ", ",
                           torc__shape_str(t->shape, t->ndim, sh, sizeof sh),
                           torc_dtype_name(t->dtype));
  }
  for (int i = 0; i < n_who && pl < sizeof provs; i++) {
    int seen = 0; /* a provider with several kernels for the key */
    for (int j = 0; j < i && !seen; j++)
      seen = strcmp(who[j], who[i]) == 0;
    if (!seen)
      pl += (size_t)snprintf(provs + pl, sizeof provs - pl, "%s%s",
                             pl ? ", " : "", who[i]);
  }
  return torc_set_error(
      TORC_ERR_NO_KERNEL,
      "op '%s' (%s) on %s: every kernel declined this case (%s); providers "
      "that declined: %s. Load a plugin whose kernel supports it%s.",
      name, torc_dtype_name(dt), torc__devname(dev), args, provs,
      dev.type != 0 && !fallback_cpu
          ? ", or set [torc] fallback = cpu to run it on the CPU"
          : "");
}

static void to_ktensor(const torc_tensor *t, torc_ktensor *k) {
  k->data = t->storage->ptr;
  k->offset = t->offset;
  k->dtype = t->dtype;
  k->ndim = t->ndim;
  for (int i = 0; i < t->ndim; i++) {
    k->shape[i] = t->shape[i];
    k->strides[i] = t->strides[i];
  }
  for (int i = t->ndim; i < TORC_KERNEL_MAX_DIMS; i++)
    k->shape[i] = 1, k->strides[i] = 0;
}

/* ---- device scratch for the running kernel (torc_host.kernel_scratch) ----
 * A kernel asks for scratch memory while it runs; the blocks come from the
 * device's caching allocator on the call's stream and go back to it when
 * the call returns, so work the kernel queued on that stream keeps them
 * (stream order) and a later call on the stream reuses them. */

#define SCRATCH_MAX 4

typedef struct scratch_ctx {
  torc_device dev;
  const char *op;
  int n;
  void *ptr[SCRATCH_MAX];
  size_t size[SCRATCH_MAX];
} scratch_ctx;

/* The call now running a kernel on this thread; a nested call (a
 * contiguous copy, a fallback) saves and restores it. */
static _Thread_local scratch_ctx *tl_scratch;

int torc__kernel_scratch(size_t nbytes, void **out) {
  *out = NULL;
  scratch_ctx *sc = tl_scratch;
  if (sc == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "kernel_scratch was called outside a kernel call; "
                          "ask for scratch only while a kernel runs");
  if (nbytes == 0)
    return TORC_OK;
  if (sc->n == SCRATCH_MAX)
    return torc_set_error(TORC_ERR_INVALID,
                          "kernel '%s' on %s asked for scratch %d times in "
                          "one call (at most %d): ask once for the sum",
                          sc->op, torc__devname(sc->dev), sc->n + 1,
                          SCRATCH_MAX);
  torc__devtype *d = torc__devtype_get(sc->dev.type);
  if (d == NULL)
    return torc_set_error(TORC_ERR_DEVICE, "kernel '%s': its device is gone",
                          sc->op);
  torc_status st = torc__mem_alloc(d, sc->dev.index, nbytes, out);
  if (st != TORC_OK) {
    *out = NULL;
    return st;
  }
  sc->ptr[sc->n] = *out;
  sc->size[sc->n++] = nbytes;
  return TORC_OK;
}

/* Runs kernel fn with the call's scratch context current. */
static torc_status run_kernel(torc_kernel_fn fn, const torc_kernel_args *args,
                              scratch_ctx *sc) {
  scratch_ctx *prev = tl_scratch;
  tl_scratch = sc;
  torc_status st = (torc_status)fn(args);
  tl_scratch = prev;
  return st;
}

/* Gives the call's scratch back to the allocator, on the call's stream. */
static void scratch_release(scratch_ctx *sc) {
  torc__devtype *d = sc->n ? torc__devtype_get(sc->dev.type) : NULL;
  for (int i = 0; d && i < sc->n; i++)
    torc__mem_free(d, sc->dev.index, sc->ptr[i], sc->size[i]);
  sc->n = 0;
}

torc_status torc__kernel_call(int op, torc_dtype kdtype,
                              const torc_tensor *const *in, int n_in,
                              torc_tensor *const *out, int n_out,
                              const void *params, size_t params_size) {
  if (torc__trace_on)
    return torc__trace_kernel_call(op, kdtype, in, n_in, out, n_out, params,
                                   params_size);
  const torc_tensor *all[TORC__KCALL_MAX_IN + TORC__KCALL_MAX_OUT];
  int n_all = 0;
  for (int i = 0; i < n_out; i++)
    all[n_all++] = out[i];
  for (int i = 0; i < n_in; i++)
    all[n_all++] = in[i];
  torc_status st = torc__same_device(torc__ops[op].name, all, n_all);
  if (st)
    return st;
  torc_device dev = out[0]->storage->device;
  /* A copy: a pinned lookup's result lives in a per-thread slot that the
   * nested calls below (contiguous copies) would overwrite. */
  kbest kcopy;
  const kbest *k = lookup(dev.type, op, kdtype);
  if (k) {
    kcopy = *k;
    k = &kcopy;
    if (dev.type == 0 &&
        !atomic_load_explicit(&slow_checked[op], memory_order_relaxed))
      slow_provider_check(op, k->owner);
  }
  if (k == NULL) {
    if (fallback_cpu && dev.type != 0 && lookup(0, op, kdtype)) {
      if (!fallback_logged[dev.type][op]) {
        fallback_logged[dev.type][op] = 1;
        torc_logf(TORC_LOG_WARN,
                 "op '%s' (%s) has no kernel on %s: running it on the cpu "
                 "with copies ([torc] fallback = cpu); this is slow",
                 torc__ops[op].name, torc_dtype_name(kdtype),
                 torc__devname(dev));
      }
      return run_fallback(op, kdtype, in, n_in, out, n_out, params,
                          params_size);
    }
    return no_kernel(op, kdtype, dev);
  }
  torc_ktensor kin[TORC__KCALL_MAX_IN], kout[TORC__KCALL_MAX_OUT];
  torc_tensor *tmp[TORC__KCALL_MAX_IN] = {0};
  int made_contig = 0;
  for (int i = 0; i < n_out; i++)
    to_ktensor(out[i], &kout[i]);
  torc_kernel_args args = {
      .struct_size = sizeof args,
      .op = torc__ops[op].name,
      .n_in = n_in,
      .n_out = n_out,
      .in = kin,
      .out = kout,
      .params = params,
      .params_size = params_size,
      .device_index = dev.index,
      .n_threads = torc_get_num_threads(),
      /* The calling thread's current stream of the device (NULL: its
       * default stream). */
      .stream = torc__stream_handle(torc__stream_current(dev.type, dev.index)),
  };
  /* The candidates: k (the pinned or the best kernel), then the ranked
   * rest of the key's list. A decline moves to the next one; the first
   * kernel that accepts is the only one most calls ever reach. */
  scratch_ctx sc = {.dev = dev, .op = torc__ops[op].name, .n = 0};
  const kbest *list = NULL; /* looked up at the first decline */
  int next = -1;            /* -1: the list's head is still to try */
  const char *declined[16];
  int n_declined = 0;
  for (;;) {
    if ((k->flags & TORC_KERNEL_CONTIGUOUS) && !made_contig) {
      made_contig = 1;
      for (int i = 0; i < n_in; i++) {
        if (torc_is_contiguous(in[i]))
          continue;
        if ((tmp[i] = torc__contiguous(in[i])) == NULL) {
          st = torc_last_status();
          goto done;
        }
      }
    }
    int contig = (k->flags & TORC_KERNEL_CONTIGUOUS) != 0;
    for (int i = 0; i < n_in; i++)
      to_ktensor(contig && tmp[i] ? tmp[i] : in[i], &kin[i]);
    args.kernel_data = k->data;
    if (atomic_load_explicit(&torc__prof_on, memory_order_relaxed)) {
      uint64_t t0 = torc__prof_now();
      st = run_kernel(k->fn, &args, &sc);
      if ((int)st != TORC_KERNEL_DECLINED) {
        uint64_t ns = torc__prof_now() - t0;
        torc_kernel_cost cost;
        torc__kernel_cost(op, &args, &cost);
        torc__prof_kernel(op, dev.type,
                          k->owner ? torc__plugin_name(k->owner) : "core", ns,
                          &cost);
      }
    } else {
      st = run_kernel(k->fn, &args, &sc);
    }
    if ((int)st != TORC_KERNEL_DECLINED)
      break;
    if (n_declined < (int)(sizeof declined / sizeof *declined))
      declined[n_declined++] =
          k->owner ? torc__plugin_name(k->owner) : "core";
    /* The next candidate, skipping a pinned kernel met again. */
    uint64_t seq = k->seq;
    k = NULL;
    if (list == NULL)
      list = lookup_list(dev.type, op, kdtype);
    while (list && k == NULL && next < list->n_rest) {
      const kbest *c = next < 0 ? list : &list->rest[next];
      next++;
      if (c->seq != seq && c->seq != kcopy.seq)
        k = c;
    }
    if (k == NULL) {
      st = all_declined(op, kdtype, dev, in, n_in, out, n_out, declined,
                        n_declined);
      if (st == TORC_OK) /* fallback = cpu took it */
        st = run_fallback(op, kdtype, in, n_in, out, n_out, params,
                          params_size);
      goto done;
    }
  }
  if (st != TORC_OK && torc_last_status() == TORC_OK)
    torc_set_error(st, "kernel '%s' (%s) on %s failed without a message",
                   torc__ops[op].name, torc_dtype_name(kdtype),
                   torc__devname(dev));
done:
  scratch_release(&sc);
  for (int i = 0; i < n_in; i++)
    torc_release(tmp[i]);
  return st;
}
