/* plugins/losses/losses.c — the "losses" plugin: registers the loss types
 * (mse, l1, smooth_l1, huber, bce, bce_with_logits, kl_div, cross_entropy,
 * nll), and what they share: option parsing, input checks, reductions.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "losses_internal.h"

const torc_host *loss_host;
const torc_api *loss_api;

int loss_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int st = loss_host->set_error_v(status, fmt, ap);
  va_end(ap);
  return st;
}

/* ---- options ---- */

static const char *value_of(const char *const *keys, const char *const *values,
                            int n, const char *key) {
  for (int i = 0; i < n; i++)
    if (strcmp(keys[i], key) == 0)
      return values[i];
  return NULL;
}

/* strtod over the whole of text (blanks around allowed); 0 on success. */
static int parse_double(const char *text, double *out) {
  if (text == NULL)
    return -1;
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || errno == ERANGE)
    return -1;
  while (*end == ' ' || *end == '\t')
    end++;
  if (*end != '\0' || !isfinite(v))
    return -1;
  *out = v;
  return 0;
}

/* A number v with lo <= v (lo < v when lo_open) and v <= hi; `range` says
 * so in words for the message ("a number >= 0"). */
static int parse_number(const char *name, const char *key, const char *text,
                        double lo, int lo_open, double hi, const char *range,
                        const char *eg, double *out) {
  double v;
  if (parse_double(text, &v) != 0 || v < lo || v > hi || (lo_open && v == lo))
    return loss_error(TORC_ERR_INVALID,
                      "%s: key '%s' = '%s' is not %s; give one, e.g. %s=%s",
                      name, key, text ? text : "", range, key, eg);
  *out = v;
  return TORC_OK;
}

static int parse_reduction(const char *name, const char *text,
                           loss_reduction *out) {
  static const char *const names[] = {"mean", "sum", "none", "batchmean"};
  int allow_batchmean = strcmp(name, "kl_div") == 0;
  for (int i = 0; i < 4; i++) {
    if (i == LOSS_BATCHMEAN && !allow_batchmean)
      break;
    if (text && strcasecmp(text, names[i]) == 0) {
      *out = (loss_reduction)i;
      return TORC_OK;
    }
  }
  return loss_error(TORC_ERR_INVALID,
                    "%s: key 'reduction' = '%s' is not one of %s; give one "
                    "of them",
                    name, text ? text : "",
                    allow_batchmean ? "mean, batchmean, sum, none"
                                    : "mean, sum, none");
}

static int parse_bool(const char *name, const char *key, const char *text,
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
  return loss_error(TORC_ERR_INVALID,
                    "%s: key '%s' = '%s' is not yes or no; give yes or no",
                    name, key, text ? text : "");
}

static int parse_int64(const char *name, const char *key, const char *text,
                       int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = text ? strtoll(text, &end, 10) : 0;
  if (text != NULL && end != text)
    while (*end == ' ' || *end == '\t')
      end++;
  if (text == NULL || end == text || *end != '\0' || errno != 0)
    return loss_error(TORC_ERR_INVALID,
                      "%s: key '%s' = '%s' is not an integer; give a class "
                      "index to skip, e.g. %s=-100",
                      name, key, text ? text : "", key);
  *out = (int64_t)v;
  return TORC_OK;
}

/* "none" or "" gives no list; else comma-separated finite numbers. */
static int parse_list(const char *name, const char *key, const char *text,
                      double **out, int *n_out) {
  *out = NULL;
  *n_out = 0;
  const char *p = text ? text : "";
  while (*p == ' ' || *p == '\t')
    p++;
  if (*p == '\0' || strcasecmp(p, "none") == 0)
    return TORC_OK;
  int cap = 1;
  for (const char *q = p; *q; q++)
    cap += *q == ',';
  if (cap > LOSS_MAX_WEIGHTS)
    return loss_error(TORC_ERR_INVALID,
                      "%s: key '%s' has %d entries, more than %d; give one "
                      "per class",
                      name, key, cap, LOSS_MAX_WEIGHTS);
  double *v = malloc(sizeof *v * (size_t)cap);
  if (v == NULL)
    return loss_error(TORC_ERR_OOM, "%s: out of memory parsing key '%s'",
                      name, key);
  int n = 0;
  while (1) {
    size_t len = strcspn(p, ",");
    char item[64];
    double x;
    int bad = len >= sizeof item;
    if (!bad) {
      memcpy(item, p, len);
      item[len] = '\0';
      bad = parse_double(item, &x) != 0;
    }
    if (bad) {
      free(v);
      return loss_error(TORC_ERR_INVALID,
                        "%s: key '%s' = '%s': entry %d ('%.*s') is not a "
                        "finite number; give a comma-separated list, e.g. "
                        "%s=1,2.5,0.5 (or none)",
                        name, key, text, n + 1, (int)(len < 40 ? len : 40), p,
                        key);
    }
    v[n++] = x;
    if (p[len] == '\0')
      break;
    p += len + 1;
  }
  *out = v;
  *n_out = n;
  return TORC_OK;
}

int loss_create(const char *const *keys, const char *const *values, int n,
                void *user, void **state) {
  const char *name = user;
  loss_state *s = calloc(1, sizeof *s);
  if (s == NULL)
    return loss_error(TORC_ERR_OOM, "%s: out of memory", name);
  s->name = name;
  s->reduction = LOSS_MEAN;
  s->beta = 1.0;
  s->delta = 1.0;
  s->ignore_index = -100;
  s->checks_left = 8;
  const char *v;
  int st = TORC_OK;
  if ((v = value_of(keys, values, n, "reduction")) != NULL)
    st = parse_reduction(name, v, &s->reduction);
  if (st == TORC_OK && (v = value_of(keys, values, n, "beta")) != NULL)
    st = parse_number(name, "beta", v, 0, 0, INFINITY, "a number >= 0", "1.0",
                      &s->beta);
  if (st == TORC_OK && (v = value_of(keys, values, n, "delta")) != NULL)
    st = parse_number(name, "delta", v, 0, 1, INFINITY, "a number > 0", "1.0",
                      &s->delta);
  if (st == TORC_OK &&
      (v = value_of(keys, values, n, "label_smoothing")) != NULL)
    st = parse_number(name, "label_smoothing", v, 0, 0, 1,
                      "a number in [0, 1]", "0.1", &s->label_smoothing);
  if (st == TORC_OK && (v = value_of(keys, values, n, "ignore_index")) != NULL)
    st = parse_int64(name, "ignore_index", v, &s->ignore_index);
  if (st == TORC_OK && (v = value_of(keys, values, n, "class_dim")) != NULL) {
    if (strcmp(v, "1") == 0 || strcmp(v, "-1") == 0)
      s->class_last = v[0] == '-';
    else
      st = loss_error(TORC_ERR_CONFIG,
                      "%s: key 'class_dim' is '%s'; give 1 (logits [N, C, "
                      "d...], PyTorch's layout) or -1 (logits [N, L, C], as "
                      "a language model's last linear layer gives them)",
                      name, v);
  }
  if (st == TORC_OK && (v = value_of(keys, values, n, "log_target")) != NULL)
    st = parse_bool(name, "log_target", v, &s->log_target);
  if (st == TORC_OK && (v = value_of(keys, values, n, "weight")) != NULL)
    st = parse_list(name, "weight", v, &s->weight, &s->n_weight);
  if (st == TORC_OK && (v = value_of(keys, values, n, "pos_weight")) != NULL)
    st = parse_list(name, "pos_weight", v, &s->pos_weight,
                    &s->n_pos_weight);
  if (st != TORC_OK) {
    loss_destroy(s);
    return st;
  }
  *state = s;
  return TORC_OK;
}

void loss_destroy(void *state) {
  loss_state *s = state;
  if (s == NULL)
    return;
  free(s->weight);
  free(s->pos_weight);
  free(s);
}

/* ---- checks ---- */

const char *loss_shape_str(const torc_tensor *t, char *buf, size_t size) {
  int nd = loss_api->ndim(t);
  const int64_t *sh = loss_api->shape(t);
  size_t len = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < nd && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "",
                            (long long)sh[i]);
  if (len < size)
    snprintf(buf + len, size - len, "]");
  return buf;
}

const char *loss_dtype_str(torc_dtype dt) {
  static const char *const names[] = {"f32", "f64", "f16", "bf16",
                                      "i32", "i64", "u8",  "bool"};
  return dt >= 0 && dt < TORC_DTYPE_COUNT ? names[dt] : "?";
}

int loss_check_inputs(const loss_state *s, const torc_tensor *input,
                      const torc_tensor *target) {
  if (input == NULL || target == NULL) {
    /* Keep the message of the call that failed, if it is still there. */
    if (loss_api->last_status() != TORC_OK)
      return loss_api->last_status();
    return loss_error(TORC_ERR_NULL,
                      "%s: the %s is NULL (an earlier call failed; see its "
                      "error)",
                      s->name, input == NULL ? "input" : "target");
  }
  torc_dtype dt = loss_api->dtype_of(input);
  if (!torc_dtype_is_float(dt)) {
    char b[96];
    return loss_error(TORC_ERR_DTYPE,
                      "%s: the input %s is %s; it must be floating (f32, "
                      "f64, f16 or bf16): convert it with torc_to_dtype",
                      s->name, loss_shape_str(input, b, sizeof b),
                      loss_dtype_str(dt));
  }
  torc_device di = loss_api->device_of(input);
  torc_device dg = loss_api->device_of(target);
  if (di.type != dg.type || di.index != dg.index)
    return loss_error(TORC_ERR_DEVICE,
                      "%s: the input and the target are on different "
                      "devices; move the target to the input's with "
                      "torc_to",
                      s->name);
  return TORC_OK;
}

static int same_shape(const torc_tensor *a, const torc_tensor *b) {
  int nd = loss_api->ndim(a);
  if (nd != loss_api->ndim(b))
    return 0;
  const int64_t *sa = loss_api->shape(a), *sb = loss_api->shape(b);
  for (int i = 0; i < nd; i++)
    if (sa[i] != sb[i])
      return 0;
  return 1;
}

int loss_check_same(const loss_state *s, const torc_tensor *input,
                    const torc_tensor *target, const char *what) {
  int st = loss_check_inputs(s, input, target);
  if (st != TORC_OK)
    return st;
  char bi[96], bt[96];
  if (!same_shape(input, target))
    return loss_error(TORC_ERR_SHAPE,
                      "%s: target %s does not match input %s; give %s of "
                      "the input's shape %s",
                      s->name, loss_shape_str(target, bt, sizeof bt),
                      loss_shape_str(input, bi, sizeof bi), what, bi);
  torc_dtype di = loss_api->dtype_of(input), dt = loss_api->dtype_of(target);
  if (di != dt)
    return loss_error(TORC_ERR_DTYPE,
                      "%s: target %s is %s but the input is %s; give %s of "
                      "the input's dtype %s (torc_to_dtype)",
                      s->name, loss_shape_str(target, bt, sizeof bt),
                      loss_dtype_str(dt), loss_dtype_str(di), what,
                      loss_dtype_str(di));
  return TORC_OK;
}

/* ---- tensors ---- */

torc_tensor *loss_reduce(const loss_state *s, const torc_tensor *t) {
  switch (s->reduction) {
  case LOSS_MEAN:
    return loss_api->mean(t, NULL, 0, 0);
  case LOSS_SUM:
    return loss_api->sum(t, NULL, 0, 0);
  case LOSS_BATCHMEAN: {
    torc_tensor *sum = loss_api->sum(t, NULL, 0, 0);
    if (loss_api->ndim(t) == 0)
      return sum;
    return loss_api->div_scalar(sum, (double)loss_api->size(t, 0));
  }
  case LOSS_NONE:
  default:
    /* A new reference (or the scope's), as every op returns. */
    return loss_api->view(t, loss_api->shape(t), loss_api->ndim(t));
  }
}

torc_tensor *loss_vector(const double *v, int n, torc_dtype dt,
                         torc_device dev) {
  const int64_t shape[1] = {n};
  int scope = loss_api->scope_begin();
  torc_tensor *t = loss_api->from_host(v, shape, 1, TORC_F64, dev);
  torc_tensor *r = t ? loss_api->to_dtype(t, dt) : NULL;
  return loss_finish(scope, r);
}

torc_tensor *loss_scalar(double v, torc_dtype dt, torc_device dev) {
  return loss_api->full(NULL, 0, v, dt, dev);
}

int loss_read2(const torc_tensor *t, double out[2]) {
  int scope = loss_api->scope_begin();
  torc_tensor *d = loss_api->to_dtype(t, TORC_F64);
  torc_status st = d ? loss_api->to_host(d, out, 2 * sizeof(double))
                     : loss_api->last_status();
  loss_api->scope_end(scope);
  return st;
}

torc_tensor *loss_finish(int token, torc_tensor *out) {
  if (out)
    loss_api->scope_keep(out);
  loss_api->scope_end(token);
  return out;
}

/* ---- the plugin ---- */

static int losses_init(const torc_host *host, torc_plugin *self) {
  if (!TORC_HAS_SLOT(host, torc_host, register_loss) ||
      host->register_loss == NULL || host->api == NULL ||
      !TORC_API_HAS(host->api, manual_seed))
    return host->set_error(TORC_ERR_ABI,
                           "losses: this torc (ABI %u.%u) cannot take loss "
                           "types from plugins; it needs ABI 1.3 or newer: "
                           "upgrade torc",
                           (unsigned)host->abi_major,
                           (unsigned)host->abi_minor);
  loss_host = host;
  loss_api = host->api;
  const torc_loss_type *types[] = {
      &loss_mse_type,           &loss_l1_type,     &loss_smooth_l1_type,
      &loss_huber_type,         &loss_bce_type,    &loss_bce_with_logits_type,
      &loss_kl_div_type,        &loss_cross_entropy_type,
      &loss_nll_type};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    int st = host->register_loss(self, types[i]);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}

static const torc_plugin_info losses_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "losses",
    .version = "0.1.0",
    .description = "loss functions: mse, l1, smooth_l1, huber, "
                   "cross_entropy, nll, bce, bce_with_logits, kl_div",
    .provides = TORC_PROVIDES_LOSS,
    .flags = 0,
    .keys = NULL,
    .init = losses_init,
    .fini = NULL,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &losses_info;
}
