/* core/loss.c — losses (torc/optim.h): configured losses built from
 * key/value pairs and their forward with error context; and what the
 * optim files share: the owner-tracked registries of loss, optimizer and
 * scheduler types, key resolution and the spec splitter.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "optim_internal.h"

/* ---- registries ---- */

torc__oreg torc__loss_reg =
    TORC__OREG_INIT("loss type", "torc_loss_type_register", "the program");
torc__oreg torc__optimizer_reg =
    TORC__OREG_INIT("optimizer type", "torc_optimizer_type_register",
                    "the program");
torc__oreg torc__scheduler_reg =
    TORC__OREG_INIT("scheduler type", "torc_scheduler_type_register",
                    "the program");

void torc__optim_types_unregister_owner(struct torc__plugin *owner) {
  torc__oreg_remove_owner(&torc__loss_reg, owner);
  torc__oreg_remove_owner(&torc__optimizer_reg, owner);
  torc__oreg_remove_owner(&torc__scheduler_reg, owner);
}

torc_status torc__loss_type_register_owned(struct torc__plugin *owner,
                                           const torc_loss_type *t) {
  if (t == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_loss_type_register: the type "
                                         "is NULL");
  if (t->struct_size < offsetof(torc_loss_type, user))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_loss_type_register: loss type '%s' has "
                          "struct_size %zu; set it to sizeof(torc_loss_type)",
                          t->name ? t->name : "(null)", t->struct_size);
  if (t->forward == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_loss_type_register: loss type '%s' has no "
                          "forward; set it",
                          t->name ? t->name : "(null)");
  return torc__oreg_add(&torc__loss_reg, owner, t, t->name);
}

torc_status torc_loss_type_register(const torc_loss_type *type) {
  return torc__loss_type_register_owned(NULL, type);
}

const torc_loss_type *torc_loss_type_find(const char *name) {
  return torc__oreg_find(&torc__loss_reg, name);
}
int torc_loss_type_count(void) { return torc__oreg_count(&torc__loss_reg); }
const torc_loss_type *torc_loss_type_at(int i) {
  return torc__oreg_at(&torc__loss_reg, i);
}

torc_status torc__optim_parse_double(const char *type, const char *key,
                                     const char *v, double *out) {
  char *end;
  errno = 0;
  double x = v ? strtod(v, &end) : 0;
  if (v == NULL || end == v || *end != '\0' || errno == ERANGE)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: key '%s' = '%s' is not a number; give one "
                          "such as 0.01 or 1e-3",
                          type, key, v ? v : "(null)");
  *out = x;
  return TORC_OK;
}

/* ---- losses ---- */

struct torc_loss {
  const torc_loss_type *type;
  void *state;
};

torc_loss *torc_loss_create(const char *type, const char *const *keys,
                            const char *const *values, int n) {
  if (type == NULL || n < 0 || (n > 0 && (keys == NULL || values == NULL))) {
    torc_set_error(TORC_ERR_NULL, "torc_loss_create: the type name (and the "
                                  "key and value arrays when n > 0) are "
                                  "required");
    return NULL;
  }
  const torc_loss_type *t = torc__oreg_lookup(&torc__loss_reg, type, "loss");
  if (t == NULL)
    return NULL;
  int nk = torc__keys_count(t->keys);
  const char **vv = torc__calloc((size_t)nk + 1, sizeof *vv);
  const char **kk = torc__calloc((size_t)nk + 1, sizeof *kk);
  torc_loss *loss = torc__calloc(1, sizeof *loss);
  torc_status st = TORC_OK;
  if (vv == NULL || kk == NULL || loss == NULL)
    st = torc_set_error(TORC_ERR_OOM, "out of memory building loss '%s'", type);
  if (st == TORC_OK)
    st = torc__keys_resolve(type, t->keys, NULL, keys, values, n, NULL, vv);
  if (st == TORC_OK) {
    for (int j = 0; j < nk; j++)
      kk[j] = t->keys[j].name;
    loss->type = t;
    if (t->create) {
      torc_clear_error();
      st = t->create(kk, vv, nk, t->user, &loss->state);
      if (st != TORC_OK && torc_last_status() == TORC_OK)
        torc_set_error(st, "%s: the loss's create failed without saying why",
                       type);
    }
  }
  torc__free(vv), torc__free(kk);
  if (st != TORC_OK) {
    torc__free(loss);
    return NULL;
  }
  return loss;
}

torc_loss *torc_loss_build(const char *type, const char *spec) {
  torc__spec s;
  torc_status st = torc__spec_split(&s, type ? type : "loss", spec);
  torc_loss *loss = st ? NULL : torc_loss_create(type, s.k, s.v, s.n);
  torc__spec_free(&s);
  return loss;
}

void torc_loss_free(torc_loss *loss) {
  if (loss == NULL)
    return;
  if (loss->type->destroy && loss->state)
    loss->type->destroy(loss->state);
  torc__free(loss);
}

const char *torc_loss_name(const torc_loss *loss) {
  return loss ? loss->type->name : NULL;
}

torc_tensor *torc_loss_forward(torc_loss *loss, const torc_tensor *input,
                               const torc_tensor *target) {
  if (input == NULL || target == NULL) {
    torc__null_input("torc_loss_forward");
    return NULL;
  }
  if (loss == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_loss_forward: the loss is NULL; "
                                  "check the torc_loss_build that made it");
    return NULL;
  }
  /* Losses run in f32 under autocast. The type's temporaries go with a
   * scope of its own. */
  TORC__AC_BEGIN(TORC_AUTOCAST_F32, &input, &target);
  int scope = torc_scope_begin();
  torc_tensor *out = loss->type->forward(loss->state, input, target);
  if (out)
    torc_scope_keep(out);
  torc_scope_end(scope);
  TORC__AC_END();
  if (out == NULL) {
    torc_status st = torc_last_status();
    if (st == TORC_OK)
      st = TORC_ERR_INTERNAL;
    torc_set_error(st, "%s (in loss '%s')",
                   torc_last_error()[0] ? torc_last_error()
                                        : "the loss failed without saying "
                                          "why",
                   loss->type->name);
  }
  return out;
}
