/* core/state_load.c — loading a state dict into a module all-or-nothing,
 * with PyTorch's strict / non-strict rules and one message naming every
 * missing, unexpected and mismatched key; saving and loading a module's
 * safetensors file.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_internal.h"
#include "state_internal.h"
#include "torc/safetensors.h"

/* ------------------------------------------------------------------------
 * Loading into a module
 * ---------------------------------------------------------------------- */

void torc_load_report_clear(torc_load_report *r) {
  if (r == NULL)
    return;
  for (int i = 0; i < r->n_missing; i++)
    torc__free(r->missing[i]);
  for (int i = 0; i < r->n_unexpected; i++)
    torc__free(r->unexpected[i]);
  for (int i = 0; i < r->n_mismatched; i++)
    torc__free(r->mismatched[i]);
  torc__free(r->missing);
  torc__free(r->unexpected);
  torc__free(r->mismatched);
  memset(r, 0, sizeof *r);
}

/* A growable list of malloc'ed strings. */
typedef struct strlist {
  int n, cap;
  char **v;
} strlist;

static int strlist_add(strlist *l, char *s) { /* takes s; 0 on OOM */
  if (s == NULL)
    return 0;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 8;
    char **v = torc__realloc(l->v, (size_t)cap * sizeof *v);
    if (v == NULL) {
      torc__free(s);
      return 0;
    }
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = s;
  return 1;
}

static void strlist_free(strlist *l) {
  for (int i = 0; i < l->n; i++)
    torc__free(l->v[i]);
  torc__free(l->v);
  memset(l, 0, sizeof *l);
}

static char *xprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = n >= 0 ? torc__malloc((size_t)n + 1) : NULL;
  if (s) {
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  return s;
}

/* "title (n): a, b, c" within `budget` characters: items that do not fit
 * become ", ... and K more". Written to buf (at least budget + 1 bytes);
 * returns 1 if something was left out. */
static int render_list(char *buf, size_t budget, const char *title,
                       const strlist *l) {
  size_t len = (size_t)snprintf(buf, budget + 1, "%s (%d): ", title, l->n);
  if (len > budget)
    len = budget;
  size_t full = len;
  for (int i = 0; i < l->n; i++)
    full += strlen(l->v[i]) + (i ? 2 : 0);
  if (full <= budget) {
    for (int i = 0; i < l->n; i++)
      len += (size_t)snprintf(buf + len, budget + 1 - len, "%s%s",
                              i ? ", " : "", l->v[i]);
    return 0;
  }
  for (int i = 0; i < l->n; i++) {
    size_t item = strlen(l->v[i]) + (i ? 2 : 0);
    /* Room to say how many are left out, unless this is the last one. */
    size_t tail = i + 1 < l->n ? 32 : 0;
    if (len + item + tail > budget) {
      snprintf(buf + len, budget + 1 - len, "%s... and %d more", i ? ", " : "",
               l->n - i);
      return 1;
    }
    len += (size_t)snprintf(buf + len, budget + 1 - len, "%s%s", i ? ", " : "",
                            l->v[i]);
  }
  return 0;
}

static size_t list_len(const char *title, const strlist *l) {
  size_t len = strlen(title) + 16;
  for (int i = 0; i < l->n; i++)
    len += strlen(l->v[i]) + 2;
  return len;
}

/* The message is one sentence in torc_last_error (1024 bytes): the three
 * lists share what the fixed parts leave, shorter lists first so that the
 * space one does not use goes to the others. */
#define MSG_MAX 1000

static torc_status load_error(const char *what, const torc_module *m,
                              const strlist *missing, const strlist *unexpected,
                              const strlist *mismatched, int module_hint,
                              int any_dtype, int any_shape) {
  char fix[512];
  size_t fl = 0;
  fix[0] = '\0';
  if (module_hint)
    fl += (size_t)snprintf(
        fix + fl, sizeof fix - fl,
        " The unexpected keys start with \"module.\" (a state dict saved "
        "from DataParallel / DistributedDataParallel): set "
        "torc_load_opts.strip_module_prefix = 1 to strip it.");
  else if (missing->n || unexpected->n)
    fl += (size_t)snprintf(fix + fl, sizeof fix - fl,
                           " Load a state dict of the same architecture, or "
                           "set torc_load_opts.non_strict = 1 to load only "
                           "the keys that match.");
  if (any_dtype & 1)
    fl += (size_t)snprintf(fix + fl, sizeof fix - fl,
                           " Set torc_load_opts.allow_dtype_cast = 1 to "
                           "convert floating tensors.");
  if (any_dtype & 2)
    fl += (size_t)snprintf(fix + fl, sizeof fix - fl,
                           " Integer and bool tensors are never cast: convert "
                           "them in the state dict (torc_to_dtype).");
  if (any_shape)
    snprintf(fix + fl, sizeof fix - fl,
             " A shape mismatch is an error even with non_strict: the "
             "architectures differ.");
  char head[256];
  snprintf(head, sizeof head,
           "%s: the state dict does not fit the %s module "
           "(nothing was loaded): ",
           what, torc_module_type_name(m));
  const char *titles[3] = {"missing", "unexpected", "mismatched"};
  const strlist *lists[3] = {missing, unexpected, mismatched};
  size_t want[3], give[3] = {0, 0, 0};
  int order[3] = {0, 1, 2};
  for (int i = 0; i < 3; i++)
    want[i] = lists[i]->n ? list_len(titles[i], lists[i]) : 0;
  for (int i = 1; i < 3; i++) /* sort by want */
    for (int j = i; j > 0 && want[order[j - 1]] > want[order[j]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  size_t fixed = strlen(head) + strlen(fix) + 64;
  size_t room = fixed < MSG_MAX ? MSG_MAX - fixed : 0;
  int left = (lists[0]->n > 0) + (lists[1]->n > 0) + (lists[2]->n > 0);
  for (int i = 0; i < 3; i++) {
    int j = order[i];
    if (!lists[j]->n)
      continue;
    size_t share = room / (size_t)left--;
    give[j] = want[j] < share ? want[j] : share;
    room -= give[j];
  }
  char parts[3][MSG_MAX + 1];
  int cut = 0;
  for (int i = 0; i < 3; i++) {
    parts[i][0] = '\0';
    if (lists[i]->n)
      cut |= render_list(parts[i], give[i], titles[i], lists[i]);
  }
  char body[3 * (MSG_MAX + 1) + 8];
  size_t bl = 0;
  body[0] = '\0';
  for (int i = 0; i < 3; i++)
    if (parts[i][0])
      bl += (size_t)snprintf(body + bl, sizeof body - bl, "%s%s",
                             bl ? "; " : "", parts[i]);
  return torc_set_error(TORC_ERR_INVALID, "%s%s%s.%s", head, body,
                        cut ? " (every key is in the torc_load_report)" : "",
                        fix);
}

/* Copies a strlist into report arrays (taking the strings). */
static void give_list(strlist *l, int *n, char ***v) {
  *n = l->n;
  *v = l->v;
  memset(l, 0, sizeof *l);
}

/* The loader behind every load: `what` names the caller (and file) in
 * messages. */
static torc_status load_into(torc_module *m, const torc_state_dict *sd,
                             const torc_load_opts *opts,
                             torc_load_report *report, const char *what) {
  torc_load_opts o = {0};
  if (opts)
    o = *opts;
  if (report)
    memset(report, 0, sizeof *report);
  if (m == NULL)
    return torc_last_status()
               ? torc_last_status()
               : torc_set_error(TORC_ERR_NULL, "%s: the module is NULL", what);
  if (sd == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: the state dict is NULL", what);

  /* Lazy parameters: nothing to load them into yet. */
  const char *lazy[8] = {NULL};
  int n_lazy = torc__module_lazy_paths(m, lazy, 8);
  if (n_lazy > 0) {
    char list[512];
    size_t len = 0;
    list[0] = '\0';
    for (int i = 0; i < 8 && lazy[i]; i++)
      len +=
          (size_t)snprintf(list + len, sizeof list - len, "%s'%s'",
                           i ? ", " : "", lazy[i][0] ? lazy[i] : "(the root)");
    if (len >= sizeof list)
      strcpy(list + sizeof list - 5, "...");
    else if (n_lazy > 8)
      snprintf(list + len, sizeof list - len, " and %d more", n_lazy - 8);
    return torc_set_error(
        TORC_ERR_INVALID,
        "%s: the %s module has layers whose parameters are created at the "
        "first forward (lazy: %s) and do not exist yet; run one forward "
        "first (e.g. torc_module_summary(m, example_batch)), then load",
        what, torc_module_type_name(m), len ? list : "some layer");
  }

  torc_state_dict *model = torc_state_dict_new();
  torc_state_dict *cand = torc_state_dict_new();
  int *orig = torc__malloc((size_t)(sd->n ? sd->n : 1) * sizeof *orig);
  char *used = torc__calloc((size_t)(sd->n ? sd->n : 1), 1);
  int *pair = NULL; /* pair[j]: candidate loaded into model entry j, or -1 */
  strlist missing = {0}, unexpected = {0}, mismatched = {0};
  torc_status s = TORC_OK;
  if (model == NULL || cand == NULL || orig == NULL || used == NULL) {
    s = torc_set_error(TORC_ERR_OOM, "%s: out of memory", what);
    goto out;
  }
  if ((s = torc__sd_walk(m, "", model)) != TORC_OK)
    goto out;
  if ((pair = torc__malloc((size_t)(model->n ? model->n : 1) * sizeof *pair)) ==
      NULL) {
    s = torc_set_error(TORC_ERR_OOM, "%s: out of memory", what);
    goto out;
  }

  /* The keys considered, with the prefixes removed. */
  size_t plen = o.prefix ? strlen(o.prefix) : 0;
  for (int i = 0; i < sd->n; i++) {
    const char *name = sd->names[i];
    if (o.prefix && !starts_with(name, o.prefix))
      continue;
    name += plen;
    if (o.strip_module_prefix && starts_with(name, "module."))
      name += 7;
    int k = torc__sd_find(cand, name);
    if (k >= 0) {
      s = torc_set_error(TORC_ERR_INVALID,
                         "%s: the keys '%s' and '%s' both become '%s' once "
                         "the prefix is removed, so which to load is "
                         "ambiguous; remove one of them from the state dict",
                         what, sd->names[orig[k]], sd->names[i], name);
      goto out;
    }
    if (name[0] == '\0') /* the prefix itself: nothing in a module */
      continue;
    if ((s = torc_state_dict_set(cand, name, sd->tensors[i])) != TORC_OK)
      goto out;
    orig[cand->n - 1] = i;
  }

  /* Match. */
  int any_dtype = 0, any_shape = 0, ok = 1;
  for (int j = 0; j < model->n && ok; j++) {
    pair[j] = -1;
    const torc_tensor *t = model->tensors[j];
    int k = torc__sd_find(cand, model->names[j]);
    if (k < 0) {
      ok = strlist_add(&missing, torc__strdup(model->names[j]));
      continue;
    }
    used[k] = 1;
    const torc_tensor *f = cand->tensors[k];
    int same_shape = torc_ndim(f) == torc_ndim(t);
    for (int d = 0; same_shape && d < torc_ndim(t); d++)
      same_shape = torc_shape(f)[d] == torc_shape(t)[d];
    torc_dtype fd = torc_dtype_of(f), td = torc_dtype_of(t);
    int same_dtype =
        fd == td || (o.allow_dtype_cast && torc_dtype_is_float(fd) &&
                     torc_dtype_is_float(td));
    if (same_shape && same_dtype) {
      pair[j] = k;
      continue;
    }
    any_shape |= !same_shape;
    if (!same_dtype)
      any_dtype |= torc_dtype_is_float(fd) && torc_dtype_is_float(td) ? 1 : 2;
    char b1[160], b2[160];
    ok = strlist_add(
        &mismatched,
        xprintf("%s: %s %s in the file, %s %s in the model", model->names[j],
                torc__shape_str(torc_shape(f), torc_ndim(f), b1, sizeof b1),
                torc_dtype_name(fd),
                torc__shape_str(torc_shape(t), torc_ndim(t), b2, sizeof b2),
                torc_dtype_name(td)));
  }
  /* A "module." prefix explains the unexpected keys when every one has it
   * and, stripped, some name a missing parameter. */
  int module_hint = 0, n_unexpected = 0, n_fixed = 0, all_module = 1;
  for (int k = 0; k < cand->n && ok; k++) {
    if (used[k])
      continue;
    n_unexpected++;
    const char *name = cand->names[k];
    if (!starts_with(name, "module."))
      all_module = 0;
    else if (torc__sd_find(model, name + 7) >= 0 &&
             torc__sd_find(cand, name + 7) < 0)
      n_fixed++;
    ok = strlist_add(&unexpected, torc__strdup(sd->names[orig[k]]));
  }
  if (!ok) {
    s = torc_set_error(TORC_ERR_OOM, "%s: out of memory", what);
    goto out;
  }
  module_hint =
      !o.strip_module_prefix && n_unexpected > 0 && all_module && n_fixed > 0;
  int fail = mismatched.n > 0 || module_hint ||
             (!o.non_strict && (missing.n > 0 || unexpected.n > 0));
  if (fail) {
    s = load_error(what, m, &missing, &unexpected, &mismatched, module_hint,
                   any_dtype, any_shape);
    goto out;
  }

  /* Stage every converted tensor before anything in the module changes. */
  int scope = torc_scope_begin();
  torc_tensor **staged =
      torc__calloc((size_t)(model->n ? model->n : 1), sizeof *staged);
  if (staged == NULL)
    s = torc_set_error(TORC_ERR_OOM, "%s: out of memory", what);
  for (int j = 0; j < model->n && s == TORC_OK; j++) {
    if (pair[j] < 0)
      continue;
    torc_tensor *t = model->tensors[j];
    torc_tensor *x = cand->tensors[pair[j]];
    if (x == t) /* a module's own state dict loaded into it */
      continue;
    if (torc_dtype_of(x) != torc_dtype_of(t))
      x = torc_to_dtype(x, torc_dtype_of(t));
    x = torc_contiguous(torc_to(x, torc_device_of(t)));
    if (x == NULL) {
      char dn[64], msg[700];
      snprintf(msg, sizeof msg, "%s", torc_last_error());
      s = torc_set_error(
          torc_last_status() ? torc_last_status() : TORC_ERR_DEVICE,
          "%s: copying '%s' onto %s failed, so nothing was "
          "loaded: %s",
          what, model->names[j],
          torc_device_str(torc_device_of(t), dn, sizeof dn), msg);
    }
    staged[j] = x;
  }
  if (s == TORC_OK) {
    /* Parameters are leaves that require grad: write them as the
     * optimizer does, without recording. The copies are on the same
     * device with the same shape and dtype, so they do not fail short of
     * a device fault. */
    torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
    for (int j = 0; j < model->n && s == TORC_OK; j++) {
      if (pair[j] < 0)
        continue;
      if (staged[j])
        s = torc_copy_(model->tensors[j], staged[j]);
      if (s == TORC_OK && report)
        report->n_loaded++;
    }
    torc_set_grad_mode(gm);
    if (s != TORC_OK && report)
      report->n_loaded = 0;
  }
  torc__free(staged);
  torc_scope_end(scope);

out:
  if (report && s != TORC_ERR_OOM) {
    give_list(&missing, &report->n_missing, &report->missing);
    give_list(&unexpected, &report->n_unexpected, &report->unexpected);
    give_list(&mismatched, &report->n_mismatched, &report->mismatched);
  }
  strlist_free(&missing);
  strlist_free(&unexpected);
  strlist_free(&mismatched);
  torc__free(pair);
  torc__free(used);
  torc__free(orig);
  torc_state_dict_free(cand);
  torc_state_dict_free(model);
  return s;
}

torc_status torc_module_load_state_dict(torc_module *m,
                                        const torc_state_dict *sd,
                                        const torc_load_opts *opts,
                                        torc_load_report *report) {
  return load_into(m, sd, opts, report, "torc_module_load_state_dict");
}

torc_status torc_module_save(const torc_module *m, const char *path) {
  if (path == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_module_save: the path is NULL");
  torc_state_dict *sd = torc_state_dict_new();
  if (sd == NULL)
    return TORC_ERR_OOM;
  torc_status s = torc_module_state_dict(m, NULL, sd);
  /* The tag the Python library's save_model writes, which Hugging Face
   * loaders check. */
  if (s == TORC_OK)
    s = torc_state_dict_set_meta(sd, "format", "pt");
  if (s == TORC_OK)
    s = torc_state_dict_save(sd, path);
  torc_state_dict_free(sd);
  return s;
}

int torc__sd_is_checkpoint(const torc_state_dict *sd) {
  const char *f = torc_state_dict_meta(sd, "torc.format");
  return f && strcmp(f, "checkpoint") == 0;
}

/* Loads sd's "model." part (then opts->prefix within it) into m. */
torc_status torc__sd_load_model_part(torc_module *m, const torc_state_dict *sd,
                                     const torc_load_opts *opts,
                                     torc_load_report *report,
                                     const char *what) {
  torc_load_opts o = {0};
  if (opts)
    o = *opts;
  char *pfx = torc__sd_join3("model.", o.prefix ? o.prefix : "", "");
  if (pfx == NULL)
    return torc_set_error(TORC_ERR_OOM, "%s: out of memory", what);
  o.prefix = pfx;
  torc_status s = load_into(m, sd, &o, report, what);
  torc__free(pfx);
  return s;
}

torc_status torc_module_load(torc_module *m, const char *path,
                             const torc_load_opts *opts,
                             torc_load_report *report) {
  if (report)
    memset(report, 0, sizeof *report);
  if (m == NULL)
    return torc_last_status()
               ? torc_last_status()
               : torc_set_error(TORC_ERR_NULL, "torc_module_load: the module "
                                               "is NULL");
  if (path == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_module_load: the path is NULL");
  torc_state_dict *sd = torc_state_dict_load(path, torc_module_device(m));
  if (sd == NULL)
    return torc_last_status() ? torc_last_status() : TORC_ERR_IO;
  char *what = xprintf("torc_module_load %s", path);
  torc_status s;
  if (what == NULL)
    s = torc_set_error(TORC_ERR_OOM, "torc_module_load: out of memory");
  else if (torc__sd_is_checkpoint(sd))
    s = torc__sd_load_model_part(m, sd, opts, report, what);
  else
    s = load_into(m, sd, opts, report, what);
  torc__free(what);
  torc_state_dict_free(sd);
  return s;
}
