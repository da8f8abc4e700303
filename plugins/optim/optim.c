/* plugins/optim/optim.c — the "optim" plugin: registers the optimizer types
 * (sgd, adam, adamw, rmsprop, adagrad) and the learning-rate scheduler types
 * (step, multistep, exponential, cosine, plateau, onecycle, cyclic), and
 * the key parsing they share.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "optim_internal.h"

const torc_host *optim_host;
const torc_api *optim_api;

int optim_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int st = optim_host->set_error_v(status, fmt, ap);
  va_end(ap);
  return st;
}

int optim_oom(const char *what) {
  return optim_error(TORC_ERR_OOM, "%s: out of memory; free some memory",
                     what);
}

const char *optim_value(const char *const *keys, const char *const *values,
                        int n, const char *key) {
  for (int i = 0; i < n; i++)
    if (strcmp(keys[i], key) == 0)
      return values[i];
  return NULL;
}

/* strtod over the whole text (blanks allowed around it); 0 on success. */
static int to_double(const char *text, double *out) {
  if (text == NULL)
    return -1;
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text)
    return -1;
  while (*end == ' ' || *end == '\t')
    end++;
  if (*end != '\0' || errno == ERANGE || !isfinite(v))
    return -1;
  *out = v;
  return 0;
}

/* "[lo, hi)" and the like, for messages. */
static void range_text(char *buf, size_t size, double lo, int lo_open,
                       double hi, int hi_open) {
  if (isinf(lo) && isinf(hi))
    snprintf(buf, size, "any finite number");
  else if (isinf(hi))
    snprintf(buf, size, "a number %s %g", lo_open ? ">" : ">=", lo);
  else if (isinf(lo))
    snprintf(buf, size, "a number %s %g", hi_open ? "<" : "<=", hi);
  else
    snprintf(buf, size, "a number in %c%g, %g%c", lo_open ? '(' : '[', lo,
             hi, hi_open ? ')' : ']');
}

int optim_parse_num(const char *type, const char *key, const char *text,
                    double lo, int lo_open, double hi, int hi_open,
                    double *out) {
  double v = 0;
  int ok = to_double(text, &v) == 0;
  if (ok && (v < lo || (lo_open && v == lo) || v > hi || (hi_open && v == hi)))
    ok = 0;
  if (!ok) {
    char range[96];
    range_text(range, sizeof range, lo, lo_open, hi, hi_open);
    return optim_error(TORC_ERR_INVALID,
                       "%s: key '%s' = '%s' is not %s; give %s", type, key,
                       text ? text : "", range, range);
  }
  *out = v;
  return TORC_OK;
}

int optim_parse_int(const char *type, const char *key, const char *text,
                    int64_t min, int64_t max, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = text ? strtoll(text, &end, 10) : 0;
  if (text != NULL && end != text)
    while (*end == ' ' || *end == '\t')
      end++;
  if (text == NULL || end == text || *end != '\0' || errno != 0 || v < min ||
      v > max)
    return optim_error(TORC_ERR_INVALID,
                       "%s: key '%s' = '%s' is not an integer in [%lld, "
                       "%lld]; give one in that range",
                       type, key, text ? text : "", (long long)min,
                       (long long)max);
  *out = (int64_t)v;
  return TORC_OK;
}

int optim_parse_bool(const char *type, const char *key, const char *text,
                     int *out) {
  static const char *const yes[] = {"yes", "true", "on", "1"};
  static const char *const no[] = {"no", "false", "off", "0"};
  for (size_t i = 0; text && i < sizeof yes / sizeof yes[0]; i++) {
    if (strcasecmp(text, yes[i]) == 0) {
      *out = 1;
      return TORC_OK;
    }
    if (strcasecmp(text, no[i]) == 0) {
      *out = 0;
      return TORC_OK;
    }
  }
  return optim_error(TORC_ERR_INVALID,
                     "%s: key '%s' = '%s' is not yes or no; give yes or no",
                     type, key, text ? text : "");
}

int optim_parse_choice(const char *type, const char *key, const char *text,
                       const char *const *choices, int n, int *out) {
  char list[128] = "";
  for (int i = 0; i < n; i++) {
    if (text && strcmp(text, choices[i]) == 0) {
      *out = i;
      return TORC_OK;
    }
    size_t l = strlen(list);
    snprintf(list + l, sizeof list - l, "%s%s", i ? " | " : "", choices[i]);
  }
  return optim_error(TORC_ERR_INVALID,
                     "%s: key '%s' = '%s' is not one of %s; give one of "
                     "those",
                     type, key, text ? text : "", list);
}

int optim_parse_list(const char *type, const char *key, const char *text,
                     double *out, int max, int *n) {
  *n = 0;
  const char *p = text ? text : "";
  for (;;) {
    while (*p == ',' || *p == ' ' || *p == '\t')
      p++;
    if (*p == '\0')
      return TORC_OK;
    size_t len = strcspn(p, ", \t");
    char item[64];
    if (len >= sizeof item || *n == max) {
      return optim_error(TORC_ERR_INVALID,
                         "%s: key '%s' = '%s' has more than %d items or an "
                         "item longer than 63 characters; give at most %d "
                         "numbers separated by commas",
                         type, key, text, max, max);
    }
    memcpy(item, p, len);
    item[len] = '\0';
    if (to_double(item, &out[*n]) != 0)
      return optim_error(TORC_ERR_INVALID,
                         "%s: key '%s' = '%s': '%s' is not a number; give "
                         "numbers separated by commas",
                         type, key, text, item);
    (*n)++;
    p += len;
  }
}

/* ---- the plugin ---- */

static int optim_init(const torc_host *host, torc_plugin *self) {
  if (!TORC_HAS_SLOT(host, torc_host, register_scheduler) ||
      host->register_optimizer == NULL || host->register_scheduler == NULL ||
      host->api == NULL || !TORC_API_HAS(host->api, mul_scalar_))
    return host->set_error(TORC_ERR_ABI,
                           "optim: this torc (ABI %u.%u) cannot take "
                           "optimizers and schedulers from plugins; it needs "
                           "ABI 1.3 or newer: upgrade torc",
                           (unsigned)host->abi_major,
                           (unsigned)host->abi_minor);
  optim_host = host;
  optim_api = host->api;
  const torc_optimizer_type *opts[] = {
      &optim_sgd_type, &optim_adam_type, &optim_adamw_type,
      &optim_rmsprop_type, &optim_adagrad_type};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
    int st = host->register_optimizer(self, opts[i]);
    if (st != TORC_OK)
      return st;
  }
  const torc_scheduler_type *scheds[] = {
      &optim_step_type,   &optim_multistep_type, &optim_exponential_type,
      &optim_cosine_type, &optim_plateau_type,   &optim_onecycle_type,
      &optim_cyclic_type};
  for (size_t i = 0; i < sizeof scheds / sizeof scheds[0]; i++) {
    int st = host->register_scheduler(self, scheds[i]);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}

static const torc_plugin_info optim_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "optim",
    .version = "0.1.0",
    .description = "optimizers (sgd, adam, adamw, rmsprop, adagrad) and "
                   "learning-rate schedulers (step, multistep, exponential, "
                   "cosine, plateau, onecycle, cyclic), as torch.optim",
    .provides = TORC_PROVIDES_OPTIM,
    .flags = 0,
    .keys = NULL,
    .init = optim_init,
    .fini = NULL,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &optim_info;
}
