/* core/graph_io.c — torc_graph_save and torc_graph_load: a graph as a
 * safetensors file whose metadata key "torc.graph" holds the nodes and
 * values as JSON and whose tensors are the graph's constants; parameters
 * and buffers are bound by name from a module at load (torc/graph.h).
 * Loading trusts nothing in the file: every count, index, dim, name and
 * params size is checked before it is used. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "graph_internal.h"
#include "torc/safetensors.h"

typedef torc__gvalue gvalue;
typedef torc__gnode gnode;

#define META_KEY "torc.graph"
#define FORMAT_VERSION 1
/* Bounds on what a file may ask for. */
#define MAX_VALUES (1 << 20)
#define MAX_NODES (1 << 20)
#define MAX_DIM ((int64_t)1 << 40)
#define MAX_PARAMS 65536
#define MAX_STRING 4096

/* ---- saving ---- */

static const char *role_of(const gvalue *v) {
  if (v->input >= 0)
    return "input";
  if (v->name)
    return "param";
  if (v->base >= 0)
    return "view";
  if (v->produced)
    return "result";
  return "constant";
}

static json_t *ints_json(const int64_t *d, int n) {
  json_t *a = json_array();
  for (int i = 0; i < n && a; i++)
    if (json_array_append_new(a, json_integer(d[i]))) {
      json_decref(a);
      return NULL;
    }
  return a;
}

static json_t *ids_json(const int *d, int n) {
  int64_t w[TORC__KCALL_MAX_OUT];
  for (int i = 0; i < n; i++)
    w[i] = d[i];
  return ints_json(w, n);
}

/* Sets key to x (a new reference, stolen); non-zero when x is NULL or the
 * set fails. */
static int set(json_t *o, const char *key, json_t *x) {
  return x == NULL || json_object_set_new(o, key, x) != 0;
}

static json_t *value_json(const torc_graph *g, const gvalue *v) {
  json_t *o = json_object();
  if (o == NULL)
    return NULL;
  const char *role = role_of(v);
  int bad = set(o, "role", json_string(role)) ||
            set(o, "dtype", json_string(torc_dtype_name(v->dtype))) ||
            set(o, "shape", ints_json(v->shape, v->ndim)) ||
            set(o, "batch_mask", json_integer(v->batch_mask));
  if (!bad && v->input >= 0)
    bad = set(o, "input", json_integer(v->input));
  if (!bad && v->name) {
    /* The named tensor's own shape, which a view of it does not show. */
    const torc_tensor *nt = NULL;
    for (int k = 0; k < g->n_named && nt == NULL; k++)
      if (strcmp(g->named[k].name, v->name) == 0)
        nt = g->named[k].tensor;
    bad = nt == NULL || set(o, "name", json_string(v->name)) ||
          set(o, "view", json_boolean(v->view)) ||
          set(o, "param_shape", ints_json(torc_shape(nt), torc_ndim(nt)));
  }
  if (!bad && v->name == NULL && v->base >= 0 && v->input < 0)
    bad = set(o, "base", json_integer(v->base));
  if (!bad && ((v->name && v->view) || (v->name == NULL && v->base >= 0)))
    bad = set(o, "strides", ints_json(v->strides, v->ndim)) ||
          set(o, "offset", json_integer(v->offset)) ||
          set(o, "stride_batch_mask", json_integer(v->stride_batch_mask)) ||
          set(o, "offset_batch", json_integer(v->offset_batch)) ||
          set(o, "contiguous_view", json_integer(v->contiguous_view));
  if (bad) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static json_t *node_json(const gnode *n) {
  json_t *o = json_object();
  char *hex = torc__malloc(2 * n->params_size + 1);
  int bad = o == NULL || hex == NULL;
  if (!bad) {
    for (size_t b = 0; b < n->params_size; b++)
      snprintf(hex + 2 * b, 3, "%02x", ((const unsigned char *)n->params)[b]);
    hex[2 * n->params_size] = '\0';
    bad = set(o, "op", json_string(torc__ops[n->op].name)) ||
          set(o, "params", json_string(hex)) ||
          set(o, "kdtype", json_string(torc_dtype_name(n->kdtype))) ||
          set(o, "ins", ids_json(n->in, n->n_in)) ||
          set(o, "outs", ids_json(n->out, n->n_out)) ||
          set(o, "module", json_string(n->module));
  }
  torc__free(hex);
  if (bad) {
    json_decref(o);
    return NULL;
  }
  return o;
}

/* The graph as JSON text (json_dumps's), or NULL on OOM. */
static char *graph_json(const torc_graph *g) {
  torc__json_begin();
  json_t *root = json_object(), *values = json_array(), *nodes = json_array();
  int bad = root == NULL || values == NULL || nodes == NULL;
  for (int i = 0; i < g->n_values && !bad; i++)
    bad = json_array_append_new(values, value_json(g, &g->values[i])) != 0;
  for (int i = 0; i < g->n_nodes && !bad; i++)
    bad = json_array_append_new(nodes, node_json(&g->nodes[i])) != 0;
  if (!bad) {
    bad = set(root, "version", json_integer(FORMAT_VERSION)) ||
          set(root, "n_inputs", json_integer(g->n_inputs)) ||
          set(root, "output", json_integer(g->output)) ||
          set(root, "batch_checked", json_integer(g->batch_checked)) ||
          set(root, "batch", json_integer(g->batch)) ||
          set(root, "values", values) || set(root, "nodes", nodes);
    values = nodes = NULL;
  }
  char *txt = bad ? NULL
                  : json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (torc__json_end() && txt) {
    torc__json_free(txt);
    txt = NULL;
  }
  json_decref(values);
  json_decref(nodes);
  json_decref(root);
  return txt;
}

torc_status torc_graph_save(const torc_graph *g, const char *path) {
  if (g == NULL || path == NULL)
    return torc__null_input("torc_graph_save");
  for (int i = 0; i < g->n_values; i++) {
    const gvalue *v = &g->values[i];
    if (v->produced && v->base < 0 && v->input < 0 && v->name == NULL &&
        !torc__graph_contiguous_value(v))
      return torc_set_error(TORC_ERR_INVALID,
                            "torc_graph_save: value %%%d is written as a "
                            "strided part of a buffer the trace holds no "
                            "value for (a cat along a later dim), which a "
                            "graph file cannot describe; save the module's "
                            "weights instead",
                            i);
  }
  int n_const = 0;
  for (int i = 0; i < g->n_values; i++)
    n_const += strcmp(role_of(&g->values[i]), "constant") == 0;
  char *txt = graph_json(g);
  char **names = torc__calloc((size_t)n_const + 1, sizeof *names);
  const torc_tensor **ts = torc__calloc((size_t)n_const + 1, sizeof *ts);
  torc_status st = TORC_OK;
  if (txt == NULL || names == NULL || ts == NULL)
    st = torc_set_error(TORC_ERR_OOM, "torc_graph_save: out of memory");
  /* A constant broadcast over the batch is saved as one sample. */
  int k = 0;
  for (int i = 0; i < g->n_values && st == TORC_OK; i++) {
    const gvalue *v = &g->values[i];
    if (strcmp(role_of(v), "constant") != 0)
      continue;
    if ((names[k] = torc__malloc(32)) == NULL ||
        (ts[k] = torc__graph_constant_slice(v, v->t)) == NULL) {
      st = torc_set_error(TORC_ERR_OOM, "torc_graph_save: out of memory");
      k += names[k] != NULL;
      break;
    }
    snprintf(names[k], 32, "const.%d", i);
    k++;
  }
  if (st == TORC_OK) {
    const char *key = META_KEY, *val = txt;
    st = torc_safetensors_save(path, (const char *const *)names, ts, k, &key,
                               &val, 1);
  }
  for (int i = 0; i < n_const && names; i++)
    torc__free(names[i]);
  for (int i = 0; i < n_const && ts; i++)
    torc_release((torc_tensor *)ts[i]);
  torc__free(names);
  torc__free(ts);
  if (txt)
    torc__json_free(txt);
  return st;
}

/* ---- loading ---- */

/* What a load knows: the file and the graph being built. */
typedef struct {
  const char *path;
  torc_safetensors *st;
  torc_graph *g;
  torc_module *m;
} loader;

/* One TORC_ERR_INVALID message naming the file, then what is wrong. */
static torc_status bad(const loader *l, const char *fmt, ...)
    TORC_PRINTF(2, 3);
static torc_status bad(const loader *l, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return torc_set_error(TORC_ERR_INVALID, "torc_graph_load %s: %s", l->path,
                        msg);
}

/* An integer member `key` of o in [lo, hi] into *out; a missing member is
 * `def` when def_ok. what names o in the message ("value 3"). */
static torc_status get_int(const loader *l, json_t *o, const char *what,
                           const char *key, int64_t lo, int64_t hi,
                           int def_ok, int64_t def, int64_t *out) {
  json_t *x = json_object_get(o, key);
  if (x == NULL && def_ok && def >= lo && def <= hi) {
    *out = def;
    return TORC_OK;
  }
  if (!json_is_integer(x) && !json_is_boolean(x))
    return bad(l, "%s: \"%s\" is %s, not an integer; the file is damaged or "
                  "not from torc_graph_save",
               what, key, x ? "of another type" : "missing");
  int64_t v = json_is_boolean(x) ? json_is_true(x) : json_integer_value(x);
  if (v < lo || v > hi)
    return bad(l, "%s: \"%s\" is %" PRId64 ", outside [%" PRId64 ", %" PRId64
                  "]; the file is damaged or not from torc_graph_save",
               what, key, v, lo, hi);
  *out = v;
  return TORC_OK;
}

/* A string member `key` of o of at most MAX_STRING bytes. */
static torc_status get_str(const loader *l, json_t *o, const char *what,
                           const char *key, const char **out) {
  json_t *x = json_object_get(o, key);
  if (!json_is_string(x) || json_string_length(x) > MAX_STRING ||
      strlen(json_string_value(x)) != json_string_length(x))
    return bad(l, "%s: \"%s\" is %s; the file is damaged or not from "
                  "torc_graph_save",
               what, key,
               x == NULL ? "missing"
                         : json_is_string(x) ? "too long or holds a NUL"
                                             : "not a string");
  *out = json_string_value(x);
  return TORC_OK;
}

/* An array member `key` of o of at most max integers in [lo, hi]. */
static torc_status get_ints(const loader *l, json_t *o, const char *what,
                            const char *key, size_t max, int64_t lo,
                            int64_t hi, int64_t *out, int *n) {
  json_t *a = json_object_get(o, key);
  if (!json_is_array(a) || json_array_size(a) > max)
    return bad(l, "%s: \"%s\" is %s (at most %zu entries); the file is "
                  "damaged or not from torc_graph_save",
               what, key, json_is_array(a) ? "too long" : "not an array",
               max);
  for (size_t i = 0; i < json_array_size(a); i++) {
    json_t *x = json_array_get(a, i);
    if (!json_is_integer(x) || json_integer_value(x) < lo ||
        json_integer_value(x) > hi)
      return bad(l, "%s: \"%s\"[%zu] is %s, not an integer in [%" PRId64
                    ", %" PRId64 "]; the file is damaged or not from "
                    "torc_graph_save",
                 what, key, i,
                 json_is_integer(x) ? "out of range" : "of another type", lo,
                 hi);
    out[i] = json_integer_value(x);
  }
  *n = (int)json_array_size(a);
  return TORC_OK;
}

static torc_status get_dtype(const loader *l, json_t *o, const char *what,
                             const char *key, torc_dtype *out) {
  const char *s;
  torc_status st = get_str(l, o, what, key, &s);
  if (st)
    return st;
  if (torc_dtype_parse(s, out) != TORC_OK)
    return bad(l, "%s: \"%s\" is \"%s\", not a dtype torc knows", what, key,
               s);
  return TORC_OK;
}

/* The named tensor `name` of the module, or NULL. */
static const torc_named_tensor *find_named(const torc_graph *g,
                                           const char *name) {
  for (int k = 0; k < g->n_named; k++)
    if (strcmp(g->named[k].name, name) == 0)
      return &g->named[k];
  return NULL;
}

/* Whether shape/strides at offset lies inside t's storage. */
static int fits(const torc_tensor *t, const int64_t *shape,
                const int64_t *strides, int ndim, int64_t offset) {
  int64_t lo = offset, hi = offset;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 0)
      return 1;
    int64_t span;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &span) ||
        __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi))
      return 0;
  }
  size_t es = torc_dtype_size(torc_dtype_of(t));
  return lo >= 0 && (uint64_t)hi < t->storage->nbytes / es;
}

/* Binds parameter/buffer value id to the module's tensor by name. */
static torc_status bind_named(loader *l, int id, const char *name,
                              const int64_t *pshape, int pndim) {
  gvalue *v = &l->g->values[id];
  const torc_named_tensor *nt = find_named(l->g, name);
  char want[160], have[160];
  torc__shape_str(pshape, pndim, want, sizeof want);
  if (nt == NULL)
    return bad(l, "value %d is the parameter or buffer \"%s\" (%s%s), which "
                  "the module has not; load into a module built like the "
                  "traced one",
               id, name, torc_dtype_name(v->dtype), want);
  const torc_tensor *t = nt->tensor;
  torc__shape_str(torc_shape(t), torc_ndim(t), have, sizeof have);
  v->name = nt->name;
  if (torc_dtype_of(t) != v->dtype || torc_ndim(t) != pndim ||
      memcmp(torc_shape(t), pshape, (size_t)pndim * sizeof(int64_t)) != 0 ||
      (!v->view && (pndim != v->ndim ||
                    memcmp(pshape, v->shape,
                           (size_t)pndim * sizeof(int64_t)) != 0)))
    return bad(l, "the module's \"%s\" is %s%s but the graph has %s%s; build "
                  "the module with the traced sizes and dtype",
               name, torc_dtype_name(torc_dtype_of(t)), have,
               torc_dtype_name(v->dtype), want);
  torc__shape_str(v->shape, v->ndim, want, sizeof want);
  if (!v->view) {
    v->t = torc_retain((torc_tensor *)t);
    return TORC_OK;
  }
  if (!fits(t, v->shape, v->strides, v->ndim, v->offset))
    return bad(l, "value %d, a view %s at offset %" PRId64 " of \"%s\" (%s), "
                  "does not fit in it; the file is damaged or the module is "
                  "not the traced one",
               id, want, v->offset, name, have);
  v->t = torc__view_of(t, v->shape, v->strides, v->ndim, v->offset);
  return v->t ? TORC_OK
              : torc_set_error(TORC_ERR_OOM, "torc_graph_load: out of memory");
}

/* Reads the constant value id from the file's tensor "const.ID". */
static torc_status load_constant(loader *l, int id) {
  gvalue *v = &l->g->values[id];
  char name[32], want[160], have[160];
  snprintf(name, sizeof name, "const.%d", id);
  torc_dtype dt;
  int ndim;
  int64_t shape[TORC_MAX_DIMS];
  if (torc_safetensors_info(l->st, name, &dt, &ndim, shape) != TORC_OK)
    return bad(l, "value %d is a constant but the file has no tensor \"%s\"",
               id, name);
  /* (one sample of a constant broadcast over the batch) */
  int64_t sample[TORC_MAX_DIMS];
  for (int d = 0; d < v->ndim; d++)
    sample[d] = (v->batch_mask >> d) & 1 ? 1 : v->shape[d];
  torc__shape_str(sample, v->ndim, want, sizeof want);
  torc__shape_str(shape, ndim, have, sizeof have);
  if (dt != v->dtype || ndim != v->ndim ||
      memcmp(shape, sample, (size_t)ndim * sizeof *shape) != 0)
    return bad(l, "tensor \"%s\" is %s%s but value %d is %s%s", name,
               torc_dtype_name(dt), have, id, torc_dtype_name(v->dtype),
               want);
  torc_tensor *t = torc_safetensors_get(l->st, name, l->g->device);
  if (t == NULL)
    return torc_last_status();
  if (!v->batch_mask) {
    v->t = t;
    return TORC_OK;
  }
  torc__contiguous_strides(sample, v->ndim, v->strides);
  for (int d = 0; d < v->ndim; d++)
    if ((v->batch_mask >> d) & 1)
      v->strides[d] = 0;
  v->offset = torc_storage_offset(t);
  v->t = torc__view_of(t, v->shape, v->strides, v->ndim, v->offset);
  torc_release(t);
  return v->t ? TORC_OK
              : torc_set_error(TORC_ERR_OOM, "torc_graph_load: out of memory");
}

/* Value id from its JSON object. */
static torc_status load_value(loader *l, int id, json_t *o) {
  gvalue *v = &l->g->values[id];
  char what[48];
  snprintf(what, sizeof what, "value %d", id);
  v->input = v->base = -1;
  if (!json_is_object(o))
    return bad(l, "%s is not an object", what);
  const char *role;
  int64_t x;
  int n;
  torc_status st;
  if ((st = get_str(l, o, what, "role", &role)) ||
      (st = get_dtype(l, o, what, "dtype", &v->dtype)) ||
      (st = get_ints(l, o, what, "shape", TORC_MAX_DIMS, 0, MAX_DIM,
                     v->shape, &v->ndim)) ||
      (st = get_int(l, o, what, "batch_mask", 0, UINT32_MAX, 1, 0, &x)))
    return st;
  v->batch_mask = (uint32_t)x;
  int64_t numel = 1;
  for (int d = 0; d < v->ndim; d++)
    if (__builtin_mul_overflow(numel, v->shape[d], &numel) ||
        numel > MAX_DIM)
      return bad(l, "%s has %" PRId64 " elements or more, past the %" PRId64
                    " a graph may hold; the file is damaged",
                 what, numel, MAX_DIM);
  if (v->batch_mask >> v->ndim)
    return bad(l, "%s: batch_mask 0x%x names a dim past its %d", what,
               v->batch_mask, v->ndim);
  for (int d = 0; d < v->ndim; d++)
    if (((v->batch_mask >> d) & 1) &&
        (!l->g->batch_checked || v->shape[d] == 0 ||
         v->shape[d] % l->g->batch != 0))
      return bad(l, "%s: dim %d (%" PRId64 ") is marked as following the "
                    "batch %" PRId64 " but is not a multiple of it",
                 what, d, v->shape[d], l->g->batch);
  if (strcmp(role, "input") == 0) {
    if ((st = get_int(l, o, what, "input", 0, l->g->n_inputs - 1, 0, 0, &x)))
      return st;
    v->input = (int)x;
    return TORC_OK;
  }
  int is_view = 0;
  const char *name = NULL;
  if (strcmp(role, "param") == 0) {
    if ((st = get_str(l, o, what, "name", &name)) ||
        (st = get_int(l, o, what, "view", 0, 1, 1, 0, &x)))
      return st;
    v->view = is_view = (int)x;
  } else if (strcmp(role, "view") == 0) {
    if ((st = get_int(l, o, what, "base", 0, id - 1, 0, 0, &x)))
      return st;
    v->base = (int)x;
    if (l->g->values[v->base].dtype != v->dtype)
      return bad(l, "%s is a %s view of value %d, of dtype %s", what,
                 torc_dtype_name(v->dtype), v->base,
                 torc_dtype_name(l->g->values[v->base].dtype));
    is_view = 1;
  } else if (strcmp(role, "result") != 0 && strcmp(role, "constant") != 0) {
    return bad(l, "%s: role \"%.40s\" is not input, param, view, result or "
                  "constant",
               what, role);
  }
  if (is_view) {
    if ((st = get_ints(l, o, what, "strides", TORC_MAX_DIMS, -MAX_DIM,
                       MAX_DIM, v->strides, &n)) ||
        (st = get_int(l, o, what, "offset", 0, MAX_DIM, 0, 0, &v->offset)) ||
        (st = get_int(l, o, what, "stride_batch_mask", 0, UINT32_MAX, 1, 0,
                      &x)))
      return st;
    v->stride_batch_mask = (uint32_t)x;
    if ((st = get_int(l, o, what, "offset_batch", 0, 1, 1, 0, &x)))
      return st;
    v->offset_batch = (int)x;
    if ((st = get_int(l, o, what, "contiguous_view", 0, 1, 1, 0, &x)))
      return st;
    v->contiguous_view = (int)x;
    if (n != v->ndim)
      return bad(l, "%s has %d strides for %d dims", what, n, v->ndim);
    if ((v->stride_batch_mask >> v->ndim) ||
        ((v->stride_batch_mask || v->offset_batch) && !l->g->batch_checked))
      return bad(l, "%s: batch masks on a graph not checked for batches",
                 what);
  }
  if (name) {
    int64_t pshape[TORC_MAX_DIMS];
    int pndim;
    if ((st = get_ints(l, o, what, "param_shape", TORC_MAX_DIMS, 0, MAX_DIM,
                       pshape, &pndim)))
      return st;
    return bind_named(l, id, name, pshape, pndim);
  }
  if (strcmp(role, "constant") == 0)
    return load_constant(l, id);
  v->produced = strcmp(role, "result") == 0;
  return TORC_OK;
}

/* The ids array `key` of node object o into ids (at most max). */
static torc_status get_ids(loader *l, json_t *o, const char *what,
                           const char *key, int max, int *ids, int *n) {
  int64_t w[TORC__KCALL_MAX_OUT];
  torc_status st = get_ints(l, o, what, key, (size_t)max, 0,
                            l->g->n_values - 1, w, n);
  for (int i = 0; i < *n && st == TORC_OK; i++)
    ids[i] = (int)w[i];
  return st;
}

static int hexval(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* Node i from its JSON object. */
static torc_status load_node(loader *l, int i, json_t *o) {
  torc_graph *g = l->g;
  gnode *n = &g->nodes[i];
  char what[48];
  snprintf(what, sizeof what, "node %d", i);
  if (!json_is_object(o))
    return bad(l, "%s is not an object", what);
  const char *op, *hex, *module;
  int in[TORC__KCALL_MAX_IN], out[TORC__KCALL_MAX_OUT];
  torc_status st;
  if ((st = get_str(l, o, what, "op", &op)))
    return st;
  if ((n->op = torc__op_find(op)) < 0) {
    n->op = 0;
    return bad(l, "%s: op \"%.64s\" is not an op of this torc (a newer "
                  "file, or a damaged one); `torc help ops` lists them",
               what, op);
  }
  if ((st = get_str(l, o, what, "params", &hex)) ||
      (st = get_dtype(l, o, what, "kdtype", &n->kdtype)) ||
      (st = get_ids(l, o, what, "ins", TORC__KCALL_MAX_IN, in, &n->n_in)) ||
      (st = get_ids(l, o, what, "outs", TORC__KCALL_MAX_OUT, out,
                    &n->n_out)) ||
      (st = get_str(l, o, what, "module", &module)))
    return st;
  size_t len = strlen(hex), want = torc__graph_params_size(n->op);
  if (len % 2 || len / 2 > MAX_PARAMS ||
      (want != (size_t)-1 && len / 2 != want))
    return bad(l, "%s (%s): params are %zu hex digits; the op's params "
                  "struct takes %zu bytes",
               what, op, len, want == (size_t)-1 ? len / 2 : want);
  if (n->n_out < 1)
    return bad(l, "%s (%s) writes no value", what, op);
  n->in = torc__calloc((size_t)n->n_in + (size_t)n->n_out + 1, sizeof(int));
  n->params = torc__malloc(len / 2 + 1);
  n->module = torc__strdup(module);
  if (n->in == NULL || n->params == NULL || n->module == NULL)
    return torc_set_error(TORC_ERR_OOM, "torc_graph_load: out of memory");
  n->out = n->in + n->n_in;
  memcpy(n->in, in, (size_t)n->n_in * sizeof(int));
  memcpy(n->out, out, (size_t)n->n_out * sizeof(int));
  n->params_size = len / 2;
  for (size_t b = 0; b < len / 2; b++) {
    int hi = hexval(hex[2 * b]), lo = hexval(hex[2 * b + 1]);
    if (hi < 0 || lo < 0)
      return bad(l, "%s (%s): params \"%.32s...\" are not hex digits", what,
                 op, hex);
    ((unsigned char *)n->params)[b] = (unsigned char)(hi << 4 | lo);
  }
  for (int k = 0; k < n->n_out; k++) {
    gvalue *v = &g->values[out[k]];
    if (v->input >= 0 || (!v->produced && v->name == NULL && v->base < 0))
      return bad(l, "%s (%s) writes value %d, an input or constant", what,
                 op, out[k]);
    v->produced = 2; /* a node writes it */
  }
  return TORC_OK;
}

/* The whole graph from the root object. */
static torc_status load_graph(loader *l, json_t *root) {
  torc_graph *g = l->g;
  int64_t x;
  torc_status st;
  if (!json_is_object(root))
    return bad(l, "the \"" META_KEY "\" metadata is not a JSON object");
  if ((st = get_int(l, root, "the graph", "version", FORMAT_VERSION,
                    FORMAT_VERSION, 0, 0, &x)) ||
      (st = get_int(l, root, "the graph", "n_inputs", 1, 1 << 16, 0, 0, &x)))
    return st;
  g->n_inputs = (int)x;
  if ((st = get_int(l, root, "the graph", "batch_checked", 0, 1, 1, 0, &x)))
    return st;
  g->batch_checked = (int)x;
  if ((st = get_int(l, root, "the graph", "batch", g->batch_checked,
                    MAX_DIM, 1, 0, &g->batch)))
    return st;
  json_t *values = json_object_get(root, "values");
  json_t *nodes = json_object_get(root, "nodes");
  if (!json_is_array(values) || json_array_size(values) > MAX_VALUES ||
      json_array_size(values) < 1 || !json_is_array(nodes) ||
      json_array_size(nodes) > MAX_NODES)
    return bad(l, "\"values\" and \"nodes\" must be arrays of at most %d "
                  "entries (values at least 1)",
               MAX_VALUES);
  size_t nv = json_array_size(values), nn = json_array_size(nodes);
  g->values = torc__calloc(nv, sizeof *g->values);
  g->nodes = torc__calloc(nn + 1, sizeof *g->nodes);
  if (g->values == NULL || g->nodes == NULL)
    return torc_set_error(TORC_ERR_OOM, "torc_graph_load: out of memory");
  g->cap_values = (int)nv;
  g->cap_nodes = (int)nn + 1;
  for (size_t i = 0; i < nv; i++) {
    g->n_values = (int)i + 1;
    if ((st = load_value(l, (int)i, json_array_get(values, i))))
      return st;
  }
  if ((st = get_int(l, root, "the graph", "output", 0, (int64_t)nv - 1, 0, 0,
                    &x)))
    return st;
  g->output = (int)x;
  for (size_t i = 0; i < nn; i++) {
    g->n_nodes = (int)i + 1;
    if ((st = load_node(l, (int)i, json_array_get(nodes, i))))
      return st;
    const gnode *n = &g->nodes[i];
    torc__gshape sh[TORC__KCALL_MAX_IN + TORC__KCALL_MAX_OUT];
    for (int k = 0; k < n->n_in + n->n_out; k++) {
      const gvalue *v = &g->values[n->in[k]];
      sh[k] = (torc__gshape){v->ndim, v->shape, v->dtype};
    }
    const char *why = torc__graph_node_shapes(n, sh);
    if (why == torc__graph_unchecked)
      return bad(l, "node %zu (%s): %s, so a saved graph may not hold it "
                 "(docs/graph.md lists the ops a graph file may hold); "
                 "keep the model's INI file and checkpoint instead",
                 i, torc__ops[g->nodes[i].op].name, why);
    if (why)
      return bad(l, "node %zu (%s): %s; the file is damaged", i,
                 torc__ops[g->nodes[i].op].name, why);
  }
  /* Every input once; every result written by a node. */
  char *seen = torc__calloc((size_t)g->n_inputs, 1);
  if (seen == NULL)
    return torc_set_error(TORC_ERR_OOM, "torc_graph_load: out of memory");
  for (int i = 0; i < g->n_values && st == TORC_OK; i++) {
    gvalue *v = &g->values[i];
    if (v->input >= 0 && seen[v->input]++)
      st = bad(l, "input %d is two values", v->input);
    else if (v->produced == 1)
      st = bad(l, "value %d is a result that no node writes", i);
    v->produced = v->produced != 0;
  }
  for (int i = 0; i < g->n_inputs && st == TORC_OK; i++)
    if (!seen[i])
      st = bad(l, "input %d is no value", i);
  torc__free(seen);
  return st;
}

torc_status torc_graph_load(const char *path, torc_module *m,
                            torc_graph **out) {
  if (out)
    *out = NULL;
  if (path == NULL || m == NULL || out == NULL)
    return torc__null_input("torc_graph_load");
  loader l = {path, NULL, NULL, m};
  if ((l.st = torc_safetensors_open(path)) == NULL)
    return torc_last_status();
  torc_status st = TORC_OK;
  const char *txt = torc_safetensors_metadata(l.st, META_KEY);
  if (txt == NULL) {
    st = bad(&l, "no \"" META_KEY "\" metadata: not a graph file (write one "
                 "with torc_graph_save)");
    torc_safetensors_close(l.st);
    return st;
  }
  l.g = torc__calloc(1, sizeof *l.g);
  if (l.g == NULL || torc__graph_add_named(l.g, m))
    st = torc_set_error(TORC_ERR_OOM, "torc_graph_load: out of memory");
  if (st == TORC_OK) {
    l.g->device = torc_module_device(m);
    l.g->loaded = 1;
    json_error_t jerr;
    torc__json_begin();
    json_t *root = json_loads(txt, JSON_REJECT_DUPLICATES, &jerr);
    int oom = torc__json_end();
    if (root == NULL && (oom || json_error_code(&jerr) ==
                                    json_error_out_of_memory))
      st = torc_set_error(TORC_ERR_OOM, "torc_graph_load: out of memory "
                                        "parsing the graph");
    else if (root == NULL)
      st = bad(&l, "the graph's JSON is malformed at line %d, column %d: %s",
               jerr.line, jerr.column, jerr.text);
    else
      st = load_graph(&l, root);
    json_decref(root);
  }
  torc_safetensors_close(l.st);
  if (st) {
    torc_graph_free(l.g);
    return st;
  }
  *out = l.g;
  return TORC_OK;
}
