/* core/config_names.c — PyTorch's names for torc's keys: the one table of
 * accepted aliases (kernel_size for kernel) and far suggestions
 * (learning_rate -> lr) that type keys and section rows share, and its
 * lookups for the resolvers, the reader and the listings.
 */
#include <stdio.h>
#include <string.h>

#include "config_internal.h"

/* One table for every type's keys (layers, losses, optimizers,
 * schedulers, data sources) and the sections' rows. An accepted row is
 * PyTorch's name for the very same key and works in its place wherever
 * `scope` matches and the key exists; a suggested row names a torc key
 * that a PyTorch (or Keras) user is likely to mean but that is too far
 * in edit distance for "did you mean" to find, or would be ambiguous as
 * an alias. Scoped rows come before the general ones they refine. */

typedef struct key_alias {
  const char *scope; /* a type name or section pattern; NULL = any */
  const char *alias;
  const char *key;
  int accept; /* 1: accepted as the key; 0: only suggested */
} key_alias;

static const key_alias key_aliases[] = {
    /* accepted: the same key under PyTorch's name */
    {NULL, "kernel_size", "kernel", 1},
    {NULL, "T_max", "t_max", 1},
    {"groupnorm", "num_groups", "groups", 1},
    /* suggested: close in meaning, not in spelling */
    {"data.*", "num_workers", "workers", 1},
    {"data.*", "prefetch_factor", "prefetch", 0},
    {"onecycle", "lr", "max_lr", 0},
    {"adam", "momentum", "betas", 0},
    {"adamw", "momentum", "betas", 0},
    {"leaky_relu", "alpha", "negative_slope", 0},
    {NULL, "learning_rate", "lr", 0},
    {NULL, "step", "step_size", 0},
    {NULL, "steps", "step_size", 0},
    {NULL, "clip_norm", "clip_grad_norm", 0},
    {NULL, "max_norm", "clip_grad_norm", 0},
    {NULL, "grad_clip", "clip_grad_norm", 0},
    {NULL, "gradient_clip_val", "clip_grad_norm", 0},
    {NULL, "clip_value", "clip_grad_value", 0},
    {NULL, "beta1", "betas", 0},
    {NULL, "beta2", "betas", 0},
    {NULL, "epsilon", "eps", 0},
    {NULL, "decay", "weight_decay", 0},
    {NULL, "rate", "p", 0},
    {NULL, "dropout", "p", 0},
    {NULL, "filters", "out_channels", 0},
    {NULL, "units", "out_features", 0},
    {NULL, "pool_size", "kernel", 0},
    {NULL, "use_bias", "bias", 0},
    {NULL, "num_epochs", "epochs", 0},
    {NULL, "max_epochs", "epochs", 0},
    {NULL, "batch", "batch_size", 0},
    {NULL, NULL, NULL, 0}};

/* scope: a type or section name, or a row's own pattern ("data.*"). */
static int scope_match(const key_alias *a, const char *scope) {
  return a->scope == NULL ||
         (scope && (strcmp(a->scope, scope) == 0 ||
                    pattern_match(a->scope, scope)));
}

static int name_in(const char *key, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], key) == 0)
      return i;
  return -1;
}

int torc__key_alias(const char *scope, const char *key,
                    const char *const *names, int n, int *accepted) {
  for (const key_alias *a = key_aliases; key && a->alias; a++) {
    if (strcmp(a->alias, key) != 0 || !scope_match(a, scope))
      continue;
    int j = name_in(a->key, names, n);
    if (j >= 0) {
      if (accepted)
        *accepted = a->accept;
      return j;
    }
  }
  return -1;
}

const char *torc_config_key_alias(const char *scope, const char *key) {
  for (const key_alias *a = key_aliases; key && a->alias; a++)
    if (a->accept && strcmp(a->key, key) == 0 && scope_match(a, scope))
      return a->alias;
  return NULL;
}

const char *section_alias(const char *section, const char *name) {
  const key_alias *a = key_aliases;
  while (a->alias && !(a->accept && strcmp(a->alias, name) == 0))
    a++;
  if (a->alias == NULL)
    return NULL; /* no one's alias: the rows need not be read */
  const char *key = NULL;
  row_iter it;
  for (ROWS_EACH(it, r)) {
    if (r->key == NULL || !pattern_match(r->section, section))
      continue;
    if (strcmp(r->key, name) == 0)
      return NULL; /* a key of its own */
    const char *rk = r->key;
    int accepted = 0;
    if (key == NULL && torc__key_alias(section, name, &rk, 1, &accepted) == 0 &&
        accepted)
      key = r->key;
  }
  return key;
}

const char *torc__section_key_for(const char *section, const char *name) {
  row_iter it;
  for (ROWS_EACH(it, r)) {
    if (r->key == NULL || r->type == TORC__CFG_ANY ||
        !pattern_match(r->section, section))
      continue;
    const char *rk = r->key;
    if (torc__key_alias(section, name, &rk, 1, NULL) == 0)
      return r->key;
  }
  return NULL;
}

const char *torc__alias_key(const char *scope, const char *alias) {
  for (const key_alias *a = key_aliases; alias && a->alias; a++)
    if (a->accept && strcmp(a->alias, alias) == 0 && scope_match(a, scope))
      return a->key;
  return NULL;
}

/* ---- for `torc help config` ---- */

/* "    PyTorch's names ...: kernel_size for kernel, ..." (every accepted
 * alias of the table, each once) into buf. */
void aliases_line(char *buf, size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  append(buf, n, &len, "  %-20s PyTorch's names for the keys of any [layer], "
                       "[loss], [optimizer] or [scheduler] type work too:",
         "");
  for (const key_alias *a = key_aliases; a->alias; a++)
    if (a->accept && !(a->scope && strchr(a->scope, '.'))) /* not a row's */
      append(buf, n, &len, "%s %s for %s%s%s", a == key_aliases ? "" : ",",
             a->alias, a->scope ? a->scope : "", a->scope ? "'s " : "",
             a->key);
  append(buf, n, &len, "\n");
}
