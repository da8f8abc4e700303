/* examples/plugin-loss/focal.c — a third-party loss plugin: the focal loss
 * of Lin et al. (2017), FL = -(1 - p_t)^gamma * log p_t averaged over the
 * batch, for logits [N, C] and class indices [N] (i64). Built out of tree
 * against the installed headers (see Makefile); loaded from an INI file:
 *
 *   [plugin.focal]
 *   module = /path/to/focal.so
 *   [loss]
 *   type = focal
 *   gamma = 2
 *
 * A plugin links nothing of libtorc: it computes through host->api, and
 * autograd differentiates those ops, so the loss needs no backward. With
 * gamma = 0 it is cross-entropy exactly.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <torc/plugin.h>
#include <torc/plugin_api.h>

static const torc_host *host;

typedef struct focal {
  double gamma;
} focal;

static const torc_module_key focal_keys[] = {
    {"gamma", "focusing parameter, >= 0 (0: cross-entropy)", "2"},
    {NULL, NULL, NULL}};

static int focal_create(const char *const *keys, const char *const *values,
                        int n, void *user, void **state) {
  (void)user;
  focal *f = malloc(sizeof *f);
  if (f == NULL)
    return host->set_error(TORC_ERR_OOM, "focal: out of memory");
  f->gamma = 2;
  for (int i = 0; i < n; i++) {
    char *end;
    double g = strtod(values[i], &end); /* the core passes known keys only */
    if (*end || !(g >= 0) || !isfinite(g)) {
      free(f);
      return host->set_error(TORC_ERR_CONFIG,
                             "focal: key '%s' = '%s' is not a number >= 0; "
                             "try gamma = 2",
                             keys[i], values[i]);
    }
    f->gamma = g;
  }
  *state = f;
  return TORC_OK;
}

static void focal_destroy(void *state) { free(state); }

static torc_tensor *focal_forward(void *state, const torc_tensor *x,
                                  const torc_tensor *target) {
  const torc_api *A = host->api;
  const focal *f = state;
  if (A->ndim(x) != 2 || A->ndim(target) != 1 ||
      A->dtype_of(target) != TORC_I64 || A->size(x, 0) != A->size(target, 0)) {
    host->set_error(TORC_ERR_SHAPE, "focal expects logits [N, C] and class "
                                    "indices [N] (i64)");
    return NULL;
  }
  /* log p_t, then (1 - p_t)^gamma * log p_t; every op is differentiable. */
  torc_tensor *logpt =
      A->gather(A->log_softmax(x, 1), 1, A->unsqueeze(target, 1));
  torc_tensor *term = logpt;
  if (f->gamma != 0) {
    torc_tensor *one_minus = A->neg(A->sub_scalar(A->exp(logpt), 1.0));
    term = A->mul(A->pow_scalar(one_minus, f->gamma), logpt);
  }
  return A->neg(A->mean(term, NULL, 0, 0));
}

static const torc_loss_type focal_type = {
    .struct_size = sizeof(torc_loss_type),
    .name = "focal",
    .description = "focal loss (Lin et al. 2017): logits [N, C], class "
                   "indices [N] (i64); gamma = 0 is cross-entropy",
    .keys = focal_keys,
    .create = focal_create,
    .destroy = focal_destroy,
    .forward = focal_forward,
};

static int focal_init(const torc_host *h, torc_plugin *self) {
  host = h;
  if (!TORC_HAS_SLOT(h, torc_host, register_loss) || h->api == NULL)
    return TORC_ERR_ABI; /* a torc older than ABI 1.3 */
  return h->register_loss(self, &focal_type);
}

static const torc_plugin_info focal_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "focal",
    .version = "1.0.0",
    .description = "a focal loss, as a third party would ship it",
    .provides = TORC_PROVIDES_LOSS,
    .init = focal_init,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);
TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &focal_info;
}
