/* core/graph.c — torc_trace: a module's forward recorded as a graph of
 * kernel calls (torc/graph.h), and its printing. */
#include <inttypes.h>
#include <string.h>

#include "graph_internal.h"
#include "torc/autograd.h"
#include "torc/module.h"

typedef torc__gvalue gvalue;
typedef torc__gnode gnode;

_Thread_local torc_graph *torc__trace_on; /* internal.h */

/* The id of t's value, added (with a reference) when new; -1 on OOM. */
static int value_of(torc_graph *g, const torc_tensor *t) {
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i].t == t)
      return i;
  if (g->n_values == g->cap_values) {
    int cap = g->cap_values ? 2 * g->cap_values : 16;
    gvalue *v = torc__realloc(g->values, (size_t)cap * sizeof *v);
    if (v == NULL)
      return -1;
    g->values = v;
    g->cap_values = cap;
  }
  gvalue *v = &g->values[g->n_values];
  memset(v, 0, sizeof *v);
  v->t = torc_retain((torc_tensor *)t);
  v->dtype = torc_dtype_of(t);
  v->ndim = torc_ndim(t);
  memcpy(v->shape, torc_shape(t), (size_t)v->ndim * sizeof(int64_t));
  v->input = -1;
  v->base = -1;
  memcpy(v->strides, torc_strides(t), (size_t)v->ndim * sizeof(int64_t));
  v->offset = torc_storage_offset(t);
  for (int k = 0; k < g->n_named && v->name == NULL; k++)
    if (g->named[k].tensor == t ||
        torc_shares_storage(g->named[k].tensor, t)) {
      v->name = g->named[k].name;
      v->view = g->named[k].tensor != t;
    }
  for (int k = 0; k < g->n_values && v->name == NULL && v->base < 0; k++)
    if (torc_shares_storage(g->values[k].t, t))
      v->base = k;
  return g->n_values++;
}

int torc__graph_contiguous_value(const gvalue *v) {
  int64_t want = 1;
  for (int d = v->ndim - 1; d >= 0; d--) {
    if (v->shape[d] != 1 && v->strides[d] != want)
      return 0;
    want *= v->shape[d];
  }
  return 1;
}

static int record(torc_graph *g, int op, torc_dtype kdtype, const torc_tensor *const *in,
                  int n_in, torc_tensor *const *out, int n_out,
                  const void *params, size_t params_size) {
  if (g->n_nodes == g->cap_nodes) {
    int cap = g->cap_nodes ? 2 * g->cap_nodes : 16;
    gnode *n = torc__realloc(g->nodes, (size_t)cap * sizeof *n);
    if (n == NULL)
      return -1;
    g->nodes = n;
    g->cap_nodes = cap;
  }
  gnode *n = &g->nodes[g->n_nodes];
  memset(n, 0, sizeof *n);
  n->op = op;
  n->kdtype = kdtype;
  n->n_in = n_in;
  n->n_out = n_out;
  n->in = torc__calloc((size_t)n_in + (size_t)n_out + 1, sizeof(int));
  n->params = torc__malloc(params_size ? params_size : 1);
  const torc_module *m = torc__grad_scope_key();
  const char *path = m ? torc_module_path(m) : "";
  n->module = torc__strdup(path ? path : "");
  if (n->in == NULL || n->params == NULL || n->module == NULL) {
    torc__free(n->in);
    torc__free(n->params);
    torc__free(n->module);
    return -1;
  }
  g->n_nodes++;
  n->out = n->in + n_in;
  if (params_size)
    memcpy(n->params, params, params_size);
  n->params_size = params_size;
  for (int i = 0; i < n_in; i++)
    if ((n->in[i] = value_of(g, in[i])) < 0)
      return -1;
  for (int i = 0; i < n_out; i++) {
    if ((n->out[i] = value_of(g, out[i])) < 0)
      return -1;
    g->values[n->out[i]].produced = 1;
  }
  return 0;
}

/* The root of value v's storage (following the bases). */
static int root_value(const torc_graph *g, int v) {
  while (g->values[v].base >= 0)
    v = g->values[v].base;
  return v;
}

/* Drops the graph's references to intermediates the forward let go of:
 * a node's result (or a view of one) that no parameter, buffer or input
 * shares, held by nothing but the graph, its storage by nothing but the
 * values. No run reads their elements (a replay and a plan make new
 * tensors of the recorded geometry, as for a loaded graph), so an
 * evaluation batch's activations are freed as the forward frees them,
 * not when the graph is. The value keeps its geometry; its t is NULL, so
 * no later tensor at the same address is taken for it. Views go before
 * their bases (higher ids first). */
static void drop_released(torc_graph *g) {
  for (int i = g->n_values - 1; i >= 0; i--) {
    torc__gvalue *v = &g->values[i];
    torc_tensor *t = v->t;
    if (t == NULL || v->name || v->input >= 0 || v->view ||
        atomic_load(&t->refcount) != 1 ||
        !torc_device_eq(t->storage->device, g->device))
      continue;
    const torc__gvalue *r = &g->values[root_value(g, i)];
    if (!r->produced || r->name || r->input >= 0)
      continue;
    /* a root: no view of its storage lives outside the graph, and the
     * plan's check of strided results needs none */
    if (v->base < 0 && (atomic_load(&t->storage->refcount) != 1 ||
                        !torc__graph_contiguous_value(v)))
      continue;
    v->t = NULL;
    torc_release(t);
  }
}

torc_status torc__trace_kernel_call(int op, torc_dtype kdtype,
                                    const torc_tensor *const *in, int n_in,
                                    torc_tensor *const *out, int n_out,
                                    const void *params, size_t params_size) {
  torc_graph *g = torc__trace_on;
  /* Off for the call: the copies it makes inside are not recorded. */
  torc__trace_on = NULL;
  torc_status st =
      torc__kernel_call(op, kdtype, in, n_in, out, n_out, params, params_size);
  torc__trace_on = g;
  if (st == TORC_OK && g->error == TORC_OK &&
      record(g, op, kdtype, in, n_in, out, n_out, params, params_size))
    g->error = TORC_ERR_OOM;
  if (g->error == TORC_OK)
    drop_released(g);
  return st;
}

void torc__trace_drop(void) {
  torc_graph *g = torc__trace_on;
  if (g && g->error == TORC_OK)
    drop_released(g);
}

void torc__trace_host_read(const char *fn) {
  torc_graph *g = torc__trace_on;
  if (g == NULL || g->host_read)
    return;
  const torc_module *m = torc__grad_scope_key();
  const char *path = m ? torc_module_path(m) : "";
  char buf[512];
  snprintf(buf, sizeof buf, "%s in module \"%s\"", fn, path ? path : "");
  g->host_read = torc__strdup(buf); /* (NULL on OOM: not noted) */
}

void torc_graph_free(torc_graph *g) {
  if (g == NULL)
    return;
  torc__free(g->host_read);
  for (int i = 0; i < g->n_values; i++)
    torc_release(g->values[i].t);
  for (int i = 0; i < g->n_nodes; i++) {
    torc__free(g->nodes[i].in);
    torc__free(g->nodes[i].params);
    torc__free(g->nodes[i].module);
  }
  torc__free(g->values);
  torc__free(g->nodes);
  torc_named_tensors_free(g->named, g->n_named);
  torc__free(g);
}

static int add_named(torc_graph *g, torc_named_tensor *list, int n) {
  if (n < 0)
    return -1;
  torc_named_tensor *all = torc__realloc(
      g->named, ((size_t)g->n_named + (size_t)n + 1) * sizeof *all);
  if (all == NULL) {
    torc_named_tensors_free(list, n);
    return -1;
  }
  g->named = all;
  if (n)
    memcpy(all + g->n_named, list, (size_t)n * sizeof *all);
  g->n_named += n;
  torc__free(list); /* the names now belong to g->named */
  return 0;
}

int torc__graph_add_named(torc_graph *g, const torc_module *m) {
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(m, &list);
  int bad = add_named(g, list, n);
  list = NULL;
  if (!bad) {
    n = torc_module_named_buffers(m, 0, &list);
    bad = add_named(g, list, n);
  }
  return bad;
}

torc_status torc_trace(torc_module *m, const torc_tensor *const *inputs,
                       int n_in, torc_graph **out) {
  if (out)
    *out = NULL;
  if (m == NULL || out == NULL || (n_in > 0 && inputs == NULL))
    return torc__null_input("torc_trace");
  if (n_in < 1)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_trace: %d inputs; pass at least one example "
                          "input",
                          n_in);
  for (int i = 0; i < n_in; i++)
    if (inputs[i] == NULL)
      return torc__null_input("torc_trace");
  if (torc__trace_on)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_trace: a trace is already running on this "
                          "thread; trace one module at a time");
  torc_graph *g = torc__calloc(1, sizeof *g);
  if (g == NULL)
    return torc_set_error(TORC_ERR_OOM, "torc_trace: out of memory");
  int bad = torc__graph_add_named(g, m);
  for (int i = 0; i < n_in && !bad; i++) {
    int id = value_of(g, inputs[i]);
    if (id < 0)
      bad = 1;
    else
      g->values[id].input = i;
  }
  g->n_inputs = n_in;
  /* the device of the intermediates drop_released lets go */
  g->device = torc_device_of(inputs[0]);
  if (bad) {
    torc_graph_free(g);
    return torc_set_error(TORC_ERR_OOM, "torc_trace: out of memory");
  }
  int training = torc_module_is_training(m);
  torc_module_train(m, 0);
  torc_grad_mode mode = torc_set_grad_mode(TORC_INFERENCE);
  /* The forward runs in a scope of its own, which owns its result (the
   * graph takes a reference), whether or not the caller has one open. */
  int scope = torc_scope_begin();
  torc__trace_on = g;
  torc_tensor *y = torc_module_forward_n(m, inputs, n_in);
  torc__trace_on = NULL;
  torc_set_grad_mode(mode);
  torc_module_train(m, training);
  torc_status st = y == NULL ? torc_last_status() : g->error;
  if (st == TORC_OK && (g->output = value_of(g, y)) < 0)
    st = torc_set_error(TORC_ERR_OOM, "torc_trace: out of memory");
  else if (st == TORC_ERR_OOM && y != NULL)
    torc_set_error(TORC_ERR_OOM, "torc_trace: out of memory recording "
                                 "the graph");
  torc_scope_end(scope);
  if (st) {
    torc_graph_free(g);
    return st;
  }
  *out = g;
  return TORC_OK;
}

int torc_graph_n_nodes(const torc_graph *g) { return g ? g->n_nodes : 0; }

const char *torc_graph_node_op(const torc_graph *g, int i) {
  return g && i >= 0 && i < g->n_nodes ? torc__ops[g->nodes[i].op].name
                                       : NULL;
}

const char *torc_graph_node_module(const torc_graph *g, int i) {
  return g && i >= 0 && i < g->n_nodes ? g->nodes[i].module : NULL;
}

static void print_value(const torc_graph *g, int id, FILE *f) {
  const gvalue *v = &g->values[id];
  if (v->name && !v->produced)
    fprintf(f, "@%s%s", v->name, v->view ? "(view)" : "");
  else
    fprintf(f, "%%%d", id);
}

static void print_dims(const int64_t *d, int n, FILE *f) {
  fputc('[', f);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%" PRId64, i ? "," : "", d[i]);
  fputc(']', f);
}

static void print_type(const gvalue *v, FILE *f) {
  fputs(torc_dtype_name(v->dtype), f);
  print_dims(v->shape, v->ndim, f);
}

/* A line for each view value node i reads, before its first reader. */
static void print_views(const torc_graph *g, const gnode *n, char *shown,
                        FILE *f) {
  for (int k = 0; k < n->n_in; k++) {
    int id = n->in[k];
    const gvalue *v = &g->values[id];
    if (v->base < 0 || v->produced || v->input >= 0 || shown[id])
      continue;
    shown[id] = 1;
    fprintf(f, "%%%d = view(%%%d) {strides=", id, v->base);
    print_dims(v->strides, v->ndim, f);
    fprintf(f, " offset=%" PRId64 "} ", v->offset);
    print_type(v, f);
    fputc('\n', f);
  }
}

void torc_graph_print(const torc_graph *g, FILE *f) {
  if (g == NULL || f == NULL)
    return;
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i].input >= 0) {
      fprintf(f, "input %d: %%%d ", g->values[i].input, i);
      print_type(&g->values[i], f);
      fputc('\n', f);
    }
  char *shown = torc__calloc((size_t)g->n_values + 1, 1);
  for (int i = 0; i < g->n_nodes; i++) {
    const gnode *n = &g->nodes[i];
    if (shown)
      print_views(g, n, shown, f);
    for (int k = 0; k < n->n_out; k++) {
      fputs(k ? ", " : "", f);
      print_value(g, n->out[k], f);
    }
    fprintf(f, " = %s(", torc__ops[n->op].name);
    for (int k = 0; k < n->n_in; k++) {
      fputs(k ? ", " : "", f);
      print_value(g, n->in[k], f);
    }
    char params[1024];
    torc__graph_params_str(g, n, params, sizeof params);
    fprintf(f, ") {%s} ", params);
    for (int k = 0; k < n->n_out; k++) {
      fputs(k ? ", " : "", f);
      print_type(&g->values[n->out[k]], f);
    }
    fprintf(f, "  # %s\n", n->module);
  }
  torc__free(shown);
}

static int same_dims(const torc__gshape *a, const torc__gshape *b) {
  return a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) == 0;
}

static int64_t gnumel(const torc__gshape *v) {
  return torc__numel(v->shape, v->ndim);
}

static int is_vec(const torc__gshape *v, int64_t n) {
  return v->ndim == 1 && v->shape[0] == n;
}

/* conv2d: x [N, C, H, W], w [O, C/groups, kH, kW], bias [O] -> [N, O, OH,
 * OW], the sizes the core computes. */
static const char *conv_shapes(const gnode *n, const torc__gshape *sh) {
  torc_conv_kparams p;
  if ((n->n_in != 2 && n->n_in != 3) || n->n_out != 1 ||
      n->params_size != sizeof p)
    return "conv2d takes 2 or 3 inputs and 1 output";
  memcpy(&p, n->params, sizeof p);
  const torc__gshape *x = &sh[0], *w = &sh[1], *o = &sh[n->n_in];
  if (x->ndim != 4 || w->ndim != 4 || o->ndim != 4 || p.groups < 1 ||
      x->shape[1] != w->shape[1] * p.groups || w->shape[0] % p.groups ||
      o->shape[0] != x->shape[0] || o->shape[1] != w->shape[0] ||
      (n->n_in == 3 && !is_vec(&sh[2], w->shape[0])))
    return "its shapes are not x [N, C, H, W], w [O, C/groups, kH, kW], "
           "bias [O] -> [N, O, OH, OW]";
  for (int d = 0; d < 2; d++) {
    if (p.stride[d] < 1 || p.dilation[d] < 1 || p.padding[d] < 0 ||
        p.padding[d] > ((int64_t)1 << 32) || p.dilation[d] > ((int64_t)1 << 32))
      return "its stride, dilation or padding is out of range";
    int64_t span = p.dilation[d] * (w->shape[2 + d] - 1) + 1;
    int64_t want = (x->shape[2 + d] + 2 * p.padding[d] - span) / p.stride[d] + 1;
    if (x->shape[2 + d] + 2 * p.padding[d] < span || o->shape[2 + d] != want)
      return "its output size is not the convolution's";
  }
  for (int k = 0; k < n->n_in + n->n_out; k++)
    if (sh[k].dtype != n->kdtype)
      return "a value's dtype is not the kernel dtype";
  return NULL;
}

/* max_pool2d (y and indices), avg_pool2d: [N, C, H, W] -> [N, C, OH, OW],
 * OH at most the ceil-mode size. */
static const char *pool_shapes(const gnode *n, const torc__gshape *sh) {
  torc_pool_kparams p;
  int max = strcmp(torc__ops[n->op].name, "max_pool2d") == 0;
  if (n->n_in != 1 || n->n_out != (max ? 2 : 1) || n->params_size != sizeof p)
    return "a pool takes 1 input";
  memcpy(&p, n->params, sizeof p);
  const torc__gshape *x = &sh[0], *o = &sh[1];
  if (x->ndim != 4 || o->ndim != 4 || o->shape[0] != x->shape[0] ||
      o->shape[1] != x->shape[1] || x->dtype != n->kdtype ||
      o->dtype != n->kdtype ||
      (max && (sh[2].dtype != TORC_I64 || sh[2].ndim != 4 ||
               memcmp(sh[2].shape, o->shape, 4 * sizeof(int64_t)))))
    return "its shapes are not [N, C, H, W] -> [N, C, OH, OW]";
  for (int d = 0; d < 2; d++) {
    if (p.kernel[d] < 1 || p.stride[d] < 1 || p.dilation[d] < 1 ||
        p.padding[d] < 0 || p.kernel[d] > ((int64_t)1 << 32) ||
        p.padding[d] > ((int64_t)1 << 32) || p.dilation[d] > ((int64_t)1 << 32))
      return "its kernel, stride, dilation or padding is out of range";
    int64_t span = p.dilation[d] * (p.kernel[d] - 1) + 1;
    int64_t room = x->shape[2 + d] + 2 * p.padding[d] - span;
    if (room < 0 || o->shape[2 + d] > (room + p.stride[d] - 1) / p.stride[d] + 1)
      return "its output size is past the pool's";
  }
  return NULL;
}

/* batch_norm: x [N, C, *], w, b [C] (and running mean, var [C]) -> y (x's
 * shape), mean, invstd [C]; layer_norm: x of M rows of K, w, b [K] -> y,
 * mean, rstd [M]; dropout: x -> y, mask (x's shape). */
static const char *nn_shapes(const gnode *n, const torc__gshape *sh) {
  const char *op = torc__ops[n->op].name;
  if (strcmp(op, "conv2d") == 0)
    return conv_shapes(n, sh);
  if (strcmp(op, "max_pool2d") == 0 || strcmp(op, "avg_pool2d") == 0)
    return pool_shapes(n, sh);
  int bn = strcmp(op, "batch_norm") == 0, ln = strcmp(op, "layer_norm") == 0;
  if (bn || ln) {
    if (!(n->n_in == 3 || (bn && n->n_in == 5)) || n->n_out != 3)
      return "a norm takes 3 inputs (batch_norm 3 or 5) and 3 outputs";
    const torc__gshape *x = &sh[0], *y = &sh[n->n_in];
    int64_t c = bn ? (x->ndim >= 2 ? x->shape[1] : -1) : gnumel(&sh[1]);
    int64_t rows = c > 0 && !bn ? gnumel(x) / c : c;
    if (c < 0 || (!bn && (c == 0 || gnumel(x) % c)) || y->ndim != x->ndim ||
        memcmp(y->shape, x->shape, (size_t)x->ndim * sizeof(int64_t)))
      return "its input and output shapes do not match";
    for (int k = 1; k < n->n_in; k++)
      if (gnumel(&sh[k]) != c)
        return "a weight, bias or running statistic has the wrong size";
    for (int k = 1; k < 3; k++)
      if (gnumel(&sh[n->n_in + k]) != rows)
        return "a mean or inverse deviation has the wrong size";
    for (int k = 0; k < n->n_in + n->n_out; k++)
      if (sh[k].dtype != n->kdtype)
        return "a value's dtype is not the kernel dtype";
    return NULL;
  }
  if (strcmp(op, "dropout") == 0) {
    if (n->n_in != 1 || n->n_out != 2)
      return "dropout takes 1 input and 2 outputs";
    for (int k = 1; k < 3; k++)
      if (!same_dims(&sh[0], &sh[k]))
        return "its inputs and outputs differ in shape";
    return NULL;
  }
  return torc__graph_unchecked;
}

const char torc__graph_unchecked[] = "torc cannot verify this op's shapes";

const char *torc__graph_node_shapes(const gnode *n, const torc__gshape *sh) {
  const torc__gshape *o = &sh[n->n_in];
  const torc__gshape *i0 = n->n_in ? &sh[0] : NULL;
  const char *ps = torc__graph_params_struct(n->op);
  int plain = strcmp(ps, "void") == 0 || strcmp(ps, "torc_scalar_params") == 0;
  switch (torc__ops[n->op].kind) {
  case TORC__OPK_UNARY:
  case TORC__OPK_BINARY:
  case TORC__OPK_WHERE:
  case TORC__OPK_COPY:
    /* (pad and interpolate are unary ops that change the shape) */
    if (!plain)
      return torc__graph_unchecked;
    for (int k = 0; k < n->n_in + n->n_out; k++) {
      const torc__gshape *v = &sh[k];
      if (!same_dims(v, o))
        return "its inputs and outputs differ in shape";
      int is_in = k < n->n_in, cond = torc__ops[n->op].kind ==
                                          TORC__OPK_WHERE && k == 0;
      if (torc__ops[n->op].kind != TORC__OPK_COPY && !cond &&
          v->dtype != n->kdtype && !(!is_in && v->dtype == TORC_BOOL))
        return "a value's dtype is not the kernel dtype";
    }
    return NULL;
  case TORC__OPK_MATMUL: {
    if (n->n_in != 2 || n->n_out != 1)
      return "matmul takes 2 inputs and 1 output";
    const torc__gshape *a = i0, *b = &sh[1];
    int d = o->ndim;
    if (d < 2 || a->ndim != d || b->ndim != d ||
        memcmp(a->shape, o->shape, (size_t)(d - 2) * sizeof(int64_t)) ||
        memcmp(b->shape, o->shape, (size_t)(d - 2) * sizeof(int64_t)) ||
        a->shape[d - 2] != o->shape[d - 2] ||
        b->shape[d - 1] != o->shape[d - 1] ||
        a->shape[d - 1] != b->shape[d - 2])
      return "the shapes are not [.., M, K] x [.., K, N] -> [.., M, N]";
    if (a->dtype != n->kdtype || b->dtype != n->kdtype ||
        o->dtype != n->kdtype)
      return "a value's dtype is not the kernel dtype";
    return NULL;
  }
  case TORC__OPK_REDUCE: {
    torc_reduce_params p; /* torc_norm_params begins alike */
    if (strcmp(ps, "torc_reduce_params") != 0 &&
        strcmp(ps, "torc_norm_params") != 0)
      return torc__graph_unchecked;
    if (n->n_in != 1 || n->params_size != sizeof p)
      return "a reduction takes 1 input";
    memcpy(&p, n->params, sizeof p);
    for (int k = 0; k < n->n_out; k++) {
      const torc__gshape *v = &sh[n->n_in + k];
      if (v->ndim != i0->ndim)
        return "an output's rank is not the input's";
      for (int d = 0; d < v->ndim; d++)
        if (v->shape[d] != ((p.dims_mask >> d) & 1 ? 1 : i0->shape[d]))
          return "an output's shape is not the input's reduced";
    }
    return NULL;
  }
  case TORC__OPK_DIM: {
    torc_dim_params p;
    if (strcmp(ps, "torc_dim_params") != 0) /* the indexing ops, topk */
      return torc__graph_unchecked;
    if (n->n_in != 1 || n->params_size != sizeof p)
      return "an op along a dim takes 1 input";
    memcpy(&p, n->params, sizeof p);
    if (p.dim < 0 || (p.dim >= i0->ndim && !(i0->ndim == 0 && p.dim == 0)))
      return "its dim is past the input's dims";
    for (int k = 0; k < n->n_out; k++) {
      const torc__gshape *v = &sh[n->n_in + k];
      if (v->ndim != i0->ndim)
        return "an output's rank is not the input's";
      for (int d = 0; d < v->ndim; d++)
        if (v->shape[d] != i0->shape[d] && !(d == p.dim && v->shape[d] == 1))
          return "an output's shape is not the input's";
    }
    return NULL;
  }
  case TORC__OPK_NN:
    return nn_shapes(n, sh);
  default:
    return torc__graph_unchecked;
  }
}

/* A replay: the graph, its tensors so far, the traced batch and the
 * batch it runs at (equal unless the graph was checked). */
typedef struct {
  const torc_graph *g;
  torc_tensor **vals;
  int64_t from, to;
} replay;

/* x, a dim, stride or offset of the trace, at the replay's batch when
 * `follows`; -1 on overflow. */
static int64_t at_batch(const replay *r, int64_t x, int follows) {
  return follows && r->from != r->to ? torc__graph_rebatch(x, r->from, r->to)
                                     : x;
}

/* v's shape at the replay's batch into shape; -1 on overflow. */
static int shape_at(const replay *r, const gvalue *v, int64_t *shape) {
  for (int d = 0; d < v->ndim; d++)
    if ((shape[d] = at_batch(r, v->shape[d], (v->batch_mask >> d) & 1)) < 0)
      return -1;
  return 0;
}

/* Whether a view of shape/strides at offset lies inside b's storage. */
static int view_fits(const torc_tensor *b, const int64_t *shape,
                     const int64_t *strides, int ndim, int64_t offset) {
  int64_t lo = offset, hi = offset;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 0)
      return offset >= 0;
    int64_t span;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &span) ||
        __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi))
      return 0;
  }
  size_t es = torc_dtype_size(torc_dtype_of(b));
  return lo >= 0 && (uint64_t)hi < b->storage->nbytes / es;
}

torc_tensor *torc__graph_constant_slice(const gvalue *v, torc_tensor *t) {
  int64_t shape[TORC_MAX_DIMS];
  for (int d = 0; d < v->ndim; d++)
    shape[d] = (v->batch_mask >> d) & 1 ? 1 : v->shape[d];
  return torc__view_of(t, shape, torc_strides(t), torc_ndim(t),
                       torc_storage_offset(t));
}

static torc_tensor *replay_value(const replay *r, int id);

static torc_tensor *overflow(const replay *r, int id) {
  torc_set_error(TORC_ERR_SHAPE,
                 "torc_graph_run: value %%%d's size overflows at batch "
                 "%" PRId64 "; run at a smaller batch",
                 id, r->to);
  return NULL;
}

static torc_tensor *oom(int id) {
  torc_set_error(TORC_ERR_OOM, "torc_graph_run: out of memory for value %%%d",
                 id);
  return NULL;
}

/* Value id (a view) rebuilt as a view of its base value, or for a view of
 * a parameter or buffer at another batch, of the tensor the trace read. */
static torc_tensor *replay_view(const replay *r, int id) {
  const torc_graph *g = r->g;
  const gvalue *v = &g->values[id];
  torc_tensor *b;
  int64_t boff;
  if (v->base >= 0) {
    if ((b = replay_value(r, v->base)) == NULL)
      return NULL;
    const gvalue *bv = &g->values[v->base];
    boff = at_batch(r, bv->offset, bv->offset_batch);
  } else {
    b = v->t;
    boff = torc_storage_offset(b);
  }
  int64_t shape[TORC_MAX_DIMS], strides[TORC_MAX_DIMS];
  if (shape_at(r, v, shape))
    return overflow(r, id);
  if (v->contiguous_view && r->from != r->to)
    torc__contiguous_strides(shape, v->ndim, strides);
  else
    for (int d = 0; d < v->ndim; d++)
      if ((strides[d] = at_batch(r, v->strides[d],
                                 (v->stride_batch_mask >> d) & 1)) < 0)
        return overflow(r, id);
  int64_t off = at_batch(r, v->offset, v->offset_batch);
  if (off < 0 || boff < 0 ||
      __builtin_sub_overflow(off, boff, &off) ||
      __builtin_add_overflow(off, torc_storage_offset(b), &off))
    return overflow(r, id);
  if (!view_fits(b, shape, strides, v->ndim, off)) {
    char want[160];
    torc__shape_str(shape, v->ndim, want, sizeof want);
    torc_set_error(TORC_ERR_SHAPE,
                   "torc_graph_run: the view %%%d %s at offset %" PRId64
                   " does not fit in the storage it views; its geometry "
                   "cannot follow these inputs: trace again at this batch",
                   id, want, off);
    return NULL;
  }
  torc_tensor *t = torc__view_of(b, shape, strides, v->ndim, off);
  return t ? t : oom(id);
}

/* The replay's tensor for value id, made on first use: the caller's
 * input, the recorded parameter, buffer or constant itself, a view
 * rebuilt from the recorded geometry, or a new tensor for a node's
 * output. NULL (error set) on failure. */
static torc_tensor *replay_value(const replay *r, int id) {
  torc_tensor **vals = r->vals;
  if (vals[id])
    return vals[id];
  const gvalue *v = &r->g->values[id];
  /* (a view of a parameter, or a constant broadcast over the batch, at
   * another batch: a new view of the tensor the trace read) */
  if ((v->base >= 0 && v->input < 0) ||
      (v->batch_mask && r->from != r->to && v->input < 0 && !v->produced)) {
    if ((vals[id] = replay_view(r, id)) == NULL)
      return NULL;
  } else if (v->produced && v->name == NULL) {
    int64_t shape[TORC_MAX_DIMS];
    if (shape_at(r, v, shape))
      return overflow(r, id);
    vals[id] = torc__empty(shape, v->ndim, v->dtype,
                           v->t ? torc_device_of(v->t) : r->g->device);
    if (vals[id] == NULL)
      return oom(id);
  } else {
    vals[id] = torc_retain(v->t);
  }
  return vals[id];
}

static int same_shape(const int64_t *shape, int ndim, const torc_tensor *t) {
  return torc_ndim(t) == ndim &&
         memcmp(torc_shape(t), shape, (size_t)ndim * sizeof(int64_t)) == 0;
}

/* The batch the inputs are at: the traced one, or for a checked graph the
 * one the first batched input's dim 0 gives (-1 when it is not k * B). */
static int64_t inputs_batch(const torc_graph *g,
                            const torc_tensor *const *inputs) {
  if (!g->batch_checked)
    return g->batch;
  for (int i = 0; i < g->n_values; i++) {
    const gvalue *v = &g->values[i];
    if (v->input < 0 || !(v->batch_mask & 1) || inputs[v->input] == NULL ||
        torc_ndim(inputs[v->input]) < 1)
      continue;
    int64_t k = v->shape[0] / g->batch, n = torc_shape(inputs[v->input])[0];
    return k > 0 && n > 0 && n % k == 0 ? n / k : -1;
  }
  return g->batch;
}

/* Checks input value v against t at r's batch; binds it. */
static torc_status bind_input(const replay *r, int id, const torc_tensor *t) {
  const gvalue *v = &r->g->values[id];
  int64_t want[TORC_MAX_DIMS];
  if (t == NULL)
    return torc__null_input("torc_graph_run");
  int ok = (!r->g->batch_checked || r->to > 0) && shape_at(r, v, want) == 0;
  if (!ok || torc_dtype_of(t) != v->dtype || !same_shape(want, v->ndim, t)) {
    char traced[160], got[160];
    torc__shape_str(v->shape, v->ndim, traced, sizeof traced);
    torc__shape_str(torc_shape(t), torc_ndim(t), got, sizeof got);
    if (r->g->batch_checked)
      return torc_set_error(
          TORC_ERR_SHAPE,
          "torc_graph_run: input %d is %s%s but the graph was traced with "
          "%s%s at batch %" PRId64 "; pass an input of the traced dtype and "
          "shape, differing only in the dims that follow the batch (mask "
          "0x%x)",
          v->input, torc_dtype_name(torc_dtype_of(t)), got,
          torc_dtype_name(v->dtype), traced, r->g->batch, v->batch_mask);
    return torc_set_error(TORC_ERR_SHAPE,
                          "torc_graph_run: input %d is %s%s but the graph "
                          "was traced with %s%s; pass an input of the "
                          "traced dtype and shape, or trace with "
                          "torc_trace_check to run at other batches",
                          v->input, torc_dtype_name(torc_dtype_of(t)), got,
                          torc_dtype_name(v->dtype), traced);
  }
  r->vals[id] = torc_retain((torc_tensor *)t);
  return TORC_OK;
}

/* A loaded graph's node i checked on the tensors it is about to get. */
static torc_status check_shapes(const gnode *n, int i,
                                const torc_tensor *const *in,
                                torc_tensor *const *out) {
  torc__gshape sh[TORC__KCALL_MAX_IN + TORC__KCALL_MAX_OUT];
  for (int k = 0; k < n->n_in + n->n_out; k++) {
    const torc_tensor *t = k < n->n_in ? in[k] : out[k - n->n_in];
    sh[k] = (torc__gshape){torc_ndim(t), torc_shape(t), torc_dtype_of(t)};
  }
  const char *why = torc__graph_node_shapes(n, sh);
  if (why == NULL || why == torc__graph_unchecked) /* refused at load */
    return TORC_OK;
  return torc_set_error(TORC_ERR_SHAPE,
                        "torc_graph_run: node %d (%s) of the loaded graph: "
                        "%s at this batch; the file's batch masks are wrong: "
                        "save the graph again",
                        i, torc__ops[n->op].name, why);
}

torc_status torc_graph_run(const torc_graph *g,
                           const torc_tensor *const *inputs, int n_in,
                           torc_tensor **outputs, int n_out) {
  if (outputs)
    for (int i = 0; i < n_out; i++)
      outputs[i] = NULL;
  if (g == NULL || outputs == NULL || (n_in > 0 && inputs == NULL))
    return torc__null_input("torc_graph_run");
  if (n_in != g->n_inputs || n_out != 1)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_graph_run: %d inputs and %d outputs given; "
                          "the graph takes %d inputs and gives 1 output",
                          n_in, n_out, g->n_inputs);
  torc_tensor **vals = torc__calloc((size_t)g->n_values + 1, sizeof *vals);
  if (vals == NULL)
    return torc_set_error(TORC_ERR_OOM, "torc_graph_run: out of memory");
  replay r = {g, vals, g->batch, inputs_batch(g, inputs)};
  torc_status st = TORC_OK;
  for (int i = 0; i < g->n_values && st == TORC_OK; i++)
    if (g->values[i].input >= 0)
      st = bind_input(&r, i, inputs[g->values[i].input]);
  for (int i = 0; i < g->n_nodes && st == TORC_OK; i++) {
    const gnode *n = &g->nodes[i];
    const torc_tensor *in[TORC__KCALL_MAX_IN];
    torc_tensor *out[TORC__KCALL_MAX_OUT];
    for (int k = 0; k < n->n_in && st == TORC_OK; k++)
      if ((in[k] = replay_value(&r, n->in[k])) == NULL)
        st = torc_last_status();
    for (int k = 0; k < n->n_out && st == TORC_OK; k++)
      if ((out[k] = replay_value(&r, n->out[k])) == NULL)
        st = torc_last_status();
    if (st == TORC_OK && g->loaded)
      st = check_shapes(n, i, in, out);
    if (st == TORC_OK)
      st = torc__kernel_call(n->op, n->kdtype, in, n->n_in, out, n->n_out,
                             n->params, n->params_size);
  }
  if (st == TORC_OK) {
    outputs[0] = replay_value(&r, g->output);
    if (outputs[0] == NULL)
      st = torc_last_status();
    else
      torc_retain(outputs[0]);
  }
  for (int i = 0; i < g->n_values; i++)
    torc_release(vals[i]);
  torc__free(vals);
  return st;
}
