/* core/onnx_module.c — an ONNX model as a torc module: the graph runs
 * through the interpreter (onnx_run.c) with the module's own tensors in
 * place of the initializers, so the model trains, saves and loads like
 * any other module. Float initializers are parameters, the running
 * statistics BatchNormalization reads are buffers, integer initializers
 * stay constants of the model. A dotted initializer name ("features.0.
 * weight", as torch.onnx.export writes a state-dict name) becomes the same
 * path of child modules, so the state dict's keys are PyTorch's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "onnx_internal.h"
#include "torc/autograd.h"
#include "torc/module.h"
#include "torc/onnx.h"

enum { INIT_CONST, INIT_PARAM, INIT_BUFFER };

/* Where initializer i lives: the module holding it and its local name
 * there (INIT_CONST: nowhere, the model's tensor is used). */
typedef struct init_slot {
  int kind;
  torc_module *owner;
  char *local;
} init_slot;

typedef struct onnx_mod {
  torc_onnx_model *model;
  char *path;
  int n_slots;
  init_slot *slots;
  int n_counters; /* num_batches_tracked buffers, one per BatchNormalization */
  torc_module **counter_owner;
  torc_tensor **bind;    /* per run: the tensors given for the initializers */
  torc_tensor **outputs; /* per run: the graph's outputs */
} onnx_mod;

static void onnx_mod_free(onnx_mod *s) {
  if (!s)
    return;
  for (int i = 0; i < s->n_slots; i++)
    free(s->slots[i].local);
  free(s->slots);
  free(s->counter_owner);
  free(s->bind);
  free(s->outputs);
  free(s->path);
  torc_onnx_free(s->model);
  free(s);
}

static void onnx_destroy(torc_module *m) { onnx_mod_free(torc_module_state(m)); }

static torc_tensor *onnx_forward(torc_module *m, const torc_tensor *const *in,
                                 int n_in) {
  onnx_mod *s = torc_module_state(m);
  int n_want = torc_onnx_n_inputs(s->model);
  if (n_in != n_want) {
    const char *first = torc_onnx_input_name(s->model, 0);
    torc_set_error(TORC_ERR_INVALID,
                   "%s takes %d inputs (%s%s), given %d; call "
                   "torc_module_forward_n with all of them",
                   s->path, n_want, first ? first : "none",
                   n_want > 1 ? ", ..." : "", n_in);
    return NULL;
  }
  for (int i = 0; i < s->n_slots; i++) {
    const init_slot *sl = &s->slots[i];
    s->bind[i] = sl->kind == INIT_PARAM
                     ? torc_module_parameter(sl->owner, sl->local)
                 : sl->kind == INIT_BUFFER
                     ? torc_module_buffer(sl->owner, sl->local)
                     : NULL;
  }
  int training = torc_module_is_training(m);
  int n_out = torc_onnx_n_outputs(s->model);
  /* checked by torc_onnx_module_new: not again at every forward */
  if (torc__onnx_run_mode(s->model, in, n_in, s->bind, s->outputs, n_out,
                          training, 1) != TORC_OK)
    return NULL;
  torc_tensor *y = s->outputs[0];
  for (int i = 1; i < n_out; i++)
    torc_release(s->outputs[i]);
  if (training && s->n_counters) { /* num_batches_tracked += 1 */
    torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
    torc_status st = TORC_OK;
    for (int i = 0; i < s->n_counters && st == TORC_OK; i++)
      st = torc_add_scalar_(
          torc_module_buffer(s->counter_owner[i], "num_batches_tracked"), 1);
    torc_set_grad_mode(gm);
    if (st != TORC_OK) {
      torc_release(y);
      return NULL;
    }
  }
  return torc__ret(y); /* owned by the scope the core opened */
}

static int onnx_describe(const torc_module *m, char *buf, size_t size) {
  const onnx_mod *s = torc_module_state(m);
  return snprintf(buf, size, "'%s', opset=%lld, nodes=%zu", s->path,
                  (long long)torc_onnx_opset(s->model),
                  s->model->proto->graph->n_node);
}

static const torc_module_vtable onnx_vt = {
    .struct_size = sizeof(torc_module_vtable),
    .forward = onnx_forward,
    .destroy = onnx_destroy,
    .describe = onnx_describe,
};

/* The modules a dotted name passes through: no forward of their own. */
static const torc_module_vtable scope_vt = {
    .struct_size = sizeof(torc_module_vtable),
};

/* ---- naming ---- */

/* `s` with every character that is not a letter, digit or '_' (a '.'
 * only when keep_dots is 0) replaced by '_'; "_" when empty. */
static char *sanitise(const char *s, size_t len, int keep_dots) {
  char *o = malloc(len + 2);
  if (!o)
    return NULL;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
             (c >= '0' && c <= '9') || c == '_' || (keep_dots && c == '.');
    o[i] = ok ? (char)c : '_';
  }
  o[len] = 0;
  if (len == 0)
    strcpy(o, "_");
  return o;
}

static int taken(const torc_module *m, const char *name) {
  return torc_module_parameter(m, name) || torc_module_buffer(m, name) ||
         torc_module_child(m, name);
}

/* The module at the dotted prefix `path` (len bytes) below root, made as
 * needed; NULL when a component is already a parameter or buffer, or
 * empty (the name then goes flat). */
static torc_module *scope_at(torc_module *root, const char *path, size_t len) {
  torc_module *m = root;
  size_t i = 0;
  while (i < len) {
    size_t j = i;
    while (j < len && path[j] != '.')
      j++;
    if (j == i)
      return NULL;
    char comp[256];
    if (j - i >= sizeof comp)
      return NULL;
    memcpy(comp, path + i, j - i);
    comp[j - i] = 0;
    torc_module *kid = torc_module_child(m, comp);
    if (!kid) {
      if (taken(m, comp))
        return NULL;
      kid = torc_module_new("onnx_scope", &scope_vt, NULL);
      if (!kid || torc_module_add_child(m, comp, kid) != TORC_OK)
        return NULL;
    }
    m = kid;
    i = j + 1;
  }
  return m;
}

/* Registers tensor t (kind) under `name`: its dotted path when every
 * component is free, else flat at the root with dots as '_' and a
 * suffix "_2", "_3", ... until free. Fills *slot. */
static torc_status place(torc_module *root, const char *name, torc_tensor *t,
                         int kind, init_slot *slot) {
  char *clean = sanitise(name, strlen(name), 1);
  if (!clean)
    return torc_set_error(TORC_ERR_OOM, "out of memory");
  torc_module *owner = NULL;
  const char *dot = strrchr(clean, '.');
  const char *leaf = dot ? dot + 1 : clean;
  if (leaf[0]) {
    owner = dot ? scope_at(root, clean, (size_t)(dot - clean)) : root;
    if (owner && taken(owner, leaf))
      owner = NULL;
  }
  char *local = owner ? strdup(leaf) : NULL;
  if (!owner) {
    char *flat = sanitise(name, strlen(name), 0);
    size_t fl = flat ? strlen(flat) : 0;
    local = flat ? malloc(fl + 24) : NULL;
    if (local) {
      strcpy(local, flat);
      for (int k = 2; taken(root, local); k++)
        snprintf(local + fl, 24, "_%d", k);
    }
    free(flat);
    owner = root;
  }
  free(clean);
  if (!local)
    return torc_set_error(TORC_ERR_OOM, "out of memory");
  torc_status st = kind == INIT_PARAM
                       ? torc_module_register_parameter(owner, local, t)
                       : torc_module_register_buffer(owner, local, t, 1);
  if (st != TORC_OK) {
    free(local);
    return st;
  }
  slot->kind = kind;
  slot->owner = owner;
  slot->local = local;
  return TORC_OK;
}

/* ---- building ---- */

static int index_of_init(const torc_onnx_model *m, const char *name) {
  for (int i = 0; i < m->n_inits; i++)
    if (strcmp(m->init_names[i], name) == 0)
      return i;
  return -1;
}

/* Marks the initializers BatchNormalization reads as running statistics
 * (inputs 3 and 4) INIT_BUFFER in kinds[]; the others float ones
 * INIT_PARAM. */
static void classify(const torc_onnx_model *m, int *kinds) {
  for (int i = 0; i < m->n_inits; i++)
    kinds[i] = torc_dtype_is_float(torc_dtype_of(m->inits[i])) ? INIT_PARAM
                                                                : INIT_CONST;
  const Onnx__GraphProto *g = m->proto->graph;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *nd = g->node[i];
    if (strcmp(nd->op_type, "BatchNormalization") != 0 ||
        (nd->domain && nd->domain[0] && strcmp(nd->domain, "ai.onnx")))
      continue;
    for (size_t j = 3; j < 5 && j < nd->n_input; j++) {
      int k = index_of_init(m, nd->input[j]);
      if (k >= 0 && kinds[k] == INIT_PARAM)
        kinds[k] = INIT_BUFFER;
    }
  }
}

/* A num_batches_tracked counter beside each running_mean buffer named
 * "....running_mean" (PyTorch's state dict has one per batch norm). */
static torc_status add_counters(onnx_mod *s) {
  s->counter_owner = calloc((size_t)s->n_slots + 1, sizeof *s->counter_owner);
  if (!s->counter_owner)
    return torc_set_error(TORC_ERR_OOM, "out of memory");
  for (int i = 0; i < s->n_slots; i++) {
    const init_slot *sl = &s->slots[i];
    if (sl->kind != INIT_BUFFER || strcmp(sl->local, "running_mean") != 0 ||
        taken(sl->owner, "num_batches_tracked"))
      continue;
    int scope = torc_scope_begin();
    torc_tensor *z = torc_zeros(NULL, 0, TORC_I64, TORC_CPU);
    torc_status st = z ? torc_module_register_buffer(
                             sl->owner, "num_batches_tracked", z, 1)
                       : torc_last_status();
    torc_scope_end(scope);
    if (st != TORC_OK)
      return st;
    s->counter_owner[s->n_counters++] = sl->owner;
  }
  return TORC_OK;
}

torc_status torc_onnx_module_new(const char *path, torc_module **out) {
  if (out)
    *out = NULL;
  if (!path || !out)
    return torc__null_input("torc_onnx_module_new");
  torc_onnx_model *model = torc_onnx_load(path);
  if (!model)
    return torc_last_status();
  torc_status st = torc_onnx_check(model);
  if (st == TORC_OK && model->n_outputs < 1)
    st = torc_set_error(TORC_ERR_INVALID,
                        "ONNX model '%s' has no graph outputs; a module "
                        "needs one",
                        path);
  if (st != TORC_OK) {
    torc_onnx_free(model);
    return st;
  }
  onnx_mod *s = calloc(1, sizeof *s);
  int *kinds = calloc((size_t)model->n_inits + 1, sizeof *kinds);
  if (s) {
    s->model = model;
    s->path = strdup(path);
    s->slots = calloc((size_t)model->n_inits + 1, sizeof *s->slots);
    s->bind = calloc((size_t)model->n_inits + 1, sizeof *s->bind);
    s->outputs = calloc((size_t)model->n_outputs, sizeof *s->outputs);
  }
  if (!s || !kinds || !s->path || !s->slots || !s->bind || !s->outputs) {
    if (s)
      onnx_mod_free(s);
    else
      torc_onnx_free(model);
    free(kinds);
    return torc_set_error(TORC_ERR_OOM, "out of memory importing '%s'", path);
  }
  torc_module *m = torc_module_new("onnx", &onnx_vt, s);
  if (!m) {
    onnx_mod_free(s);
    free(kinds);
    return torc_set_error(TORC_ERR_OOM, "out of memory importing '%s'", path);
  }
  classify(model, kinds);
  for (int i = 0; i < model->n_inits && st == TORC_OK; i++) {
    s->n_slots = i + 1;
    if (kinds[i] == INIT_CONST)
      continue;
    st = place(m, model->init_names[i], model->inits[i], kinds[i],
               &s->slots[i]);
  }
  s->n_slots = model->n_inits;
  free(kinds);
  if (st == TORC_OK)
    st = add_counters(s);
  if (st != TORC_OK) {
    char *why = strdup(torc_last_error());
    st = torc_set_error(st, "importing '%s': %s", path, why ? why : "");
    free(why);
    torc_module_free(m);
    return st;
  }
  *out = m;
  return TORC_OK;
}
