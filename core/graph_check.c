/* core/graph_check.c — torc_trace_check: a forward traced at two batch
 * sizes and the traces compared node by node, so that the graph can run
 * at any batch, or the reason it cannot is named (torc/graph.h). */
#include <inttypes.h>
#include <string.h>

#include "graph_internal.h"

typedef torc__gvalue gvalue;
typedef torc__gnode gnode;

#define CAUSE                                                                  \
  "the forward branches on the data or on a shape other than the batch; "     \
  "such a model cannot be traced"

int64_t torc__graph_rebatch(int64_t x, int64_t from, int64_t to) {
  if (from <= 0 || x % from != 0)
    return -1;
  int64_t r;
  if (__builtin_mul_overflow(x / from, to, &r))
    return -1;
  return r;
}

/* What the comparison knows: the two traces and their batches. */
typedef struct {
  torc_graph *a, *b;
  int64_t ba, bb;
  char *seen; /* values already compared */
} check;

/* "node 3 (relu in module "1")" into buf. */
static const char *where(const torc_graph *g, int i, char *buf, size_t size) {
  const gnode *n = &g->nodes[i];
  snprintf(buf, size, "node %d (%s in module \"%s\")", i,
           torc__ops[n->op].name, n->module);
  return buf;
}

/* "f32[2, 3]" into buf. */
static const char *type_str(const gvalue *v, char *buf, size_t size) {
  char dims[160];
  torc__shape_str(v->shape, v->ndim, dims, sizeof dims);
  snprintf(buf, size, "%s%s", torc_dtype_name(v->dtype), dims);
  return buf;
}

/* x of trace a and y of trace b: 0 when equal, 1 when both k * batch
 * (then *follows is set), -1 otherwise. */
static int follows(const check *c, int64_t x, int64_t y, int *follows_out) {
  *follows_out = 0;
  if (x == y)
    return 0;
  if (x > 0 && torc__graph_rebatch(x, c->ba, c->bb) == y) {
    *follows_out = 1;
    return 1;
  }
  return -1;
}

static int is_contiguous_geom(const gvalue *v) {
  int64_t s[TORC_MAX_DIMS];
  torc__contiguous_strides(v->shape, v->ndim, s);
  for (int d = 0; d < v->ndim; d++)
    if (v->shape[d] != 1 && s[d] != v->strides[d])
      return 0;
  return 1;
}

/* The first element where the host copies pa and pb of a constant differ,
 * written as "element i is X in one trace and Y in the other". */
static void element_str(torc_dtype dt, const unsigned char *p, char *buf,
                        size_t size) {
  switch (dt) {
  case TORC_F32: {
    float x;
    memcpy(&x, p, sizeof x);
    snprintf(buf, size, "%.9g", (double)x);
    break;
  }
  case TORC_F64: {
    double x;
    memcpy(&x, p, sizeof x);
    snprintf(buf, size, "%.17g", x);
    break;
  }
  case TORC_I32: {
    int32_t x;
    memcpy(&x, p, sizeof x);
    snprintf(buf, size, "%" PRId32, x);
    break;
  }
  case TORC_I64: {
    int64_t x;
    memcpy(&x, p, sizeof x);
    snprintf(buf, size, "%" PRId64, x);
    break;
  }
  case TORC_U8:
  case TORC_BOOL:
    snprintf(buf, size, "%u", (unsigned)p[0]);
    break;
  default: {
    size_t es = torc_dtype_size(dt), k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < es && k + 3 < size; i++, k += 2)
      snprintf(buf + k, size - k, "%02x", p[i]);
  }
  }
}

/* Compares constant value id (the same shape in both traces) by its
 * elements; the error names node i, which reads it. */
static torc_status compare_constant(const check *c, int id, int i) {
  const gvalue *va = &c->a->values[id], *vb = &c->b->values[id];
  if (va->t == vb->t)
    return TORC_OK;
  /* A broadcast over the batch (stride 0 there) is compared on one
   * sample: the dims that follow the batch taken as 1. */
  torc_tensor *ta = torc__graph_constant_slice(va, va->t);
  torc_tensor *tb = torc__graph_constant_slice(va, vb->t);
  size_t es = torc_dtype_size(va->dtype);
  size_t nbytes = ta ? (size_t)torc_numel(ta) * es : 0;
  unsigned char *pa = torc__malloc(nbytes + 1), *pb = torc__malloc(nbytes + 1);
  torc_status st = TORC_OK;
  if (ta == NULL || tb == NULL || pa == NULL || pb == NULL)
    st = torc_set_error(TORC_ERR_OOM, "torc_trace_check: out of memory");
  else if ((st = torc_to_host(ta, pa, nbytes)) == TORC_OK &&
           (st = torc_to_host(tb, pb, nbytes)) == TORC_OK &&
           memcmp(pa, pb, nbytes) != 0) {
    size_t k = 0;
    while (memcmp(pa + k * es, pb + k * es, es) == 0)
      k++;
    char w[200], xa[64], xb[64];
    element_str(va->dtype, pa + k * es, xa, sizeof xa);
    element_str(va->dtype, pb + k * es, xb, sizeof xb);
    st = torc_set_error(TORC_ERR_INVALID,
                        "torc_trace_check: %s reads a constant %%%d whose "
                        "element %zu is %s with batch %" PRId64
                        " but %s with batch %" PRId64 "; " CAUSE,
                        where(c->a, i, w, sizeof w), id, k, xa, c->ba, xb,
                        c->bb);
  }
  torc__free(pa);
  torc__free(pb);
  torc_release(ta);
  torc_release(tb);
  return st;
}

/* Compares value id of both traces (read or written by node i), and
 * records in trace a which of its dims, strides and offset follow the
 * batch. */
static torc_status compare_value(check *c, int id, int i) {
  if (c->seen[id])
    return TORC_OK;
  c->seen[id] = 1;
  gvalue *va = &c->a->values[id];
  const gvalue *vb = &c->b->values[id];
  char w[200], ta[200], tb[200];
  const char *role = NULL;
  if (va->produced != vb->produced || va->input != vb->input ||
      va->view != vb->view || va->base != vb->base ||
      (va->name == NULL) != (vb->name == NULL) ||
      (va->name && strcmp(va->name, vb->name) != 0))
    role = "is a different kind of value (input, parameter, view or "
           "result) in the two traces";
  else if (va->dtype != vb->dtype || va->ndim != vb->ndim)
    role = "has a different dtype or rank in the two traces";
  if (role)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_trace_check: %s: value %%%d %s (%s with "
                          "batch %" PRId64 ", %s with batch %" PRId64
                          "); " CAUSE,
                          where(c->a, i, w, sizeof w), id, role,
                          type_str(va, ta, sizeof ta), c->ba,
                          type_str(vb, tb, sizeof tb), c->bb);
  va->batch_mask = 0;
  for (int d = 0; d < va->ndim; d++) {
    int f;
    if (follows(c, va->shape[d], vb->shape[d], &f) < 0)
      return torc_set_error(
          TORC_ERR_INVALID,
          "torc_trace_check: %s: value %%%d is %s with batch %" PRId64
          " but %s with batch %" PRId64 ": dim %d differs and is not a "
          "multiple of the batch; " CAUSE,
          where(c->a, i, w, sizeof w), id, type_str(va, ta, sizeof ta),
          c->ba, type_str(vb, tb, sizeof tb), c->bb, d);
    va->batch_mask |= (uint32_t)f << d;
  }
  int is_view = va->base >= 0 || va->view;
  int constant = !va->produced && va->input < 0 && va->name == NULL &&
                 va->base < 0;
  int broadcast = constant && va->offset == vb->offset;
  for (int d = 0; d < va->ndim && broadcast; d++)
    broadcast = (va->batch_mask >> d) & 1
                    ? va->strides[d] == 0 && vb->strides[d] == 0
                    : va->strides[d] == vb->strides[d];
  if (constant && va->batch_mask && !broadcast)
    return torc_set_error(
        TORC_ERR_INVALID,
        "torc_trace_check: %s: value %%%d is %s with batch %" PRId64
        " but %s with batch %" PRId64 ", a %s made without a kernel call "
        "whose shape follows the batch; the replay cannot make it at "
        "another batch: create it with a kernel (torc_zeros, torc_full) or "
        "from the input",
        where(c->a, i, w, sizeof w), id, type_str(va, ta, sizeof ta), c->ba,
        type_str(vb, tb, sizeof tb), c->bb, "constant");
  if (constant)
    return compare_constant(c, id, i);
  if (!is_view)
    return TORC_OK;
  va->stride_batch_mask = 0;
  va->offset_batch = 0;
  va->contiguous_view = 0;
  if (va->batch_mask && is_contiguous_geom(va) && is_contiguous_geom(vb) &&
      va->offset == 0 && vb->offset == 0) {
    va->contiguous_view = 1;
    return TORC_OK;
  }
  int bad = -1, f;
  for (int d = 0; d < va->ndim && bad < 0; d++) {
    if (follows(c, va->strides[d], vb->strides[d], &f) < 0)
      bad = d;
    va->stride_batch_mask |= (uint32_t)f << d;
  }
  if (bad < 0 && follows(c, va->offset, vb->offset, &va->offset_batch) >= 0)
    return TORC_OK;
  char sa[160], sb[160];
  torc__shape_str(va->strides, va->ndim, sa, sizeof sa);
  torc__shape_str(vb->strides, vb->ndim, sb, sizeof sb);
  return torc_set_error(
      TORC_ERR_INVALID,
      "torc_trace_check: %s: the view %%%d has strides %s offset %" PRId64
      " with batch %" PRId64 " but strides %s offset %" PRId64
      " with batch %" PRId64 ", a geometry that does not follow the batch "
      "(neither contiguous nor a multiple of it); make the view of a "
      "contiguous tensor (torc_contiguous first)",
      where(c->a, i, w, sizeof w), id, sa, va->offset, c->ba, sb,
      vb->offset, c->bb);
}

/* The params bytes of node i compared; random ops draw from a counter the
 * generator advances between the traces, so their seed and offset (the
 * first 16 bytes) may differ. */
static int same_params(const gnode *na, const gnode *nb) {
  if (na->params_size != nb->params_size)
    return 0;
  const char *name = torc__ops[na->op].name;
  size_t skip = 0;
  if ((strcmp(name, "uniform_") == 0 || strcmp(name, "normal_") == 0 ||
       strcmp(name, "randint_") == 0 || strcmp(name, "dropout") == 0) &&
      na->params_size >= 16)
    skip = 16;
  return memcmp((const char *)na->params + skip,
                (const char *)nb->params + skip,
                na->params_size - skip) == 0;
}

/* The params of node i in both traces, as "{...}" text. */
static torc_status params_differ(const check *c, int i) {
  char w[200], pa[600], pb[600];
  torc__graph_params_str(c->a, &c->a->nodes[i], pa, sizeof pa);
  torc__graph_params_str(c->b, &c->b->nodes[i], pb, sizeof pb);
  return torc_set_error(TORC_ERR_INVALID,
                        "torc_trace_check: %s has params {%s} with batch "
                        "%" PRId64 " but {%s} with batch %" PRId64 "; " CAUSE,
                        where(c->a, i, w, sizeof w), pa, c->ba, pb, c->bb);
}

static torc_status compare_node(check *c, int i) {
  const gnode *na = &c->a->nodes[i], *nb = &c->b->nodes[i];
  char wa[200];
  if (na->op != nb->op || strcmp(na->module, nb->module) != 0 ||
      na->kdtype != nb->kdtype || na->n_in != nb->n_in ||
      na->n_out != nb->n_out)
    return torc_set_error(
        TORC_ERR_INVALID,
        "torc_trace_check: the traces differ at node %d: %s in module \"%s\" "
        "(%s, %d inputs) with batch %" PRId64 " but %s in module \"%s\" (%s, "
        "%d inputs) with batch %" PRId64 "; " CAUSE,
        i, torc__ops[na->op].name, na->module, torc_dtype_name(na->kdtype),
        na->n_in, c->ba, torc__ops[nb->op].name, nb->module,
        torc_dtype_name(nb->kdtype), nb->n_in, c->bb);
  if (!same_params(na, nb))
    return params_differ(c, i);
  for (int k = 0; k < na->n_in + na->n_out; k++)
    if (na->in[k] != nb->in[k])
      return torc_set_error(
          TORC_ERR_INVALID,
          "torc_trace_check: %s %s %s %d is value %%%d with batch %" PRId64
          " but %%%d with batch %" PRId64 "; " CAUSE,
          where(c->a, i, wa, sizeof wa), "reads a different value:",
          k < na->n_in ? "input" : "output",
          k < na->n_in ? k : k - na->n_in, na->in[k], c->ba, nb->in[k],
          c->bb);
  torc_status st = TORC_OK;
  for (int k = 0; k < na->n_in + na->n_out && st == TORC_OK; k++)
    st = compare_value(c, na->in[k], i);
  return st;
}

static torc_status compare(check *c) {
  int n = c->a->n_nodes < c->b->n_nodes ? c->a->n_nodes : c->b->n_nodes;
  for (int i = 0; i < n; i++) {
    torc_status st = compare_node(c, i);
    if (st)
      return st;
  }
  if (c->a->n_nodes != c->b->n_nodes) {
    const check *more = c->a->n_nodes > c->b->n_nodes ? c : NULL;
    const torc_graph *g = more ? c->a : c->b;
    char w[200];
    return torc_set_error(
        TORC_ERR_INVALID,
        "torc_trace_check: the trace with batch %" PRId64 " has %d nodes "
        "and the one with batch %" PRId64 " %d: %s is only in the one with "
        "batch %" PRId64 "; " CAUSE,
        c->ba, c->a->n_nodes, c->bb, c->b->n_nodes, where(g, n, w, sizeof w),
        more ? c->ba : c->bb);
  }
  if (c->a->n_values != c->b->n_values || c->a->output != c->b->output)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_trace_check: the forward returns a "
                          "different value with batch %" PRId64 " (%%%d) "
                          "than with batch %" PRId64 " (%%%d); " CAUSE,
                          c->ba, c->a->output, c->bb, c->b->output);
  /* Inputs no node reads, and an output no node wrote. */
  for (int id = 0; id < c->a->n_values; id++)
    if (!c->seen[id]) {
      gvalue *va = &c->a->values[id];
      const gvalue *vb = &c->b->values[id];
      if (va->ndim != vb->ndim)
        return torc_set_error(TORC_ERR_INVALID,
                              "torc_trace_check: value %%%d differs in "
                              "rank; " CAUSE,
                              id);
      va->batch_mask = 0;
      for (int d = 0; d < va->ndim; d++) {
        int f;
        if (follows(c, va->shape[d], vb->shape[d], &f) < 0)
          return torc_set_error(TORC_ERR_INVALID,
                                "torc_trace_check: value %%%d differs in "
                                "dim %d; " CAUSE,
                                id, d);
        va->batch_mask |= (uint32_t)f << d;
      }
    }
  return TORC_OK;
}

/* Checks the two example batches: the same count of inputs, each the same
 * dtype and rank in both, equal in every dim but the first, and the first
 * dims of the inputs that differ all the batch a / batch b. */
static torc_status check_inputs(const torc_tensor *const *ia,
                                const torc_tensor *const *ib, int n_in,
                                int64_t *ba, int64_t *bb) {
  *ba = *bb = -1;
  for (int i = 0; i < n_in; i++) {
    const torc_tensor *a = ia[i], *b = ib[i];
    char sa[160], sb[160];
    torc__shape_str(torc_shape(a), torc_ndim(a), sa, sizeof sa);
    torc__shape_str(torc_shape(b), torc_ndim(b), sb, sizeof sb);
    int bad = torc_dtype_of(a) != torc_dtype_of(b) ||
              torc_ndim(a) != torc_ndim(b);
    for (int d = 1; d < torc_ndim(a) && !bad; d++)
      bad = torc_shape(a)[d] != torc_shape(b)[d];
    if (bad)
      return torc_set_error(TORC_ERR_SHAPE,
                            "torc_trace_check: input %d is %s%s in the "
                            "first batch but %s%s in the second; the two "
                            "example batches may differ only in dim 0",
                            i, torc_dtype_name(torc_dtype_of(a)), sa,
                            torc_dtype_name(torc_dtype_of(b)), sb);
    if (torc_ndim(a) == 0 || torc_shape(a)[0] == torc_shape(b)[0])
      continue;
    if (*ba < 0) {
      *ba = torc_shape(a)[0];
      *bb = torc_shape(b)[0];
    } else if (torc_shape(a)[0] != *ba || torc_shape(b)[0] != *bb) {
      return torc_set_error(TORC_ERR_SHAPE,
                            "torc_trace_check: input %d is %s and %s but an "
                            "earlier input has batch %" PRId64 " and %" PRId64
                            "; give every batched input the same batch",
                            i, sa, sb, *ba, *bb);
    }
  }
  if (*ba < 0)
    return torc_set_error(TORC_ERR_SHAPE,
                          "torc_trace_check: no input differs in dim 0 "
                          "between the two example batches; pass two "
                          "batches of different sizes (e.g. 2 and 3)");
  if (*ba == 0 || *bb == 0)
    return torc_set_error(TORC_ERR_SHAPE,
                          "torc_trace_check: an example batch of size 0; "
                          "pass batches of at least one sample");
  return TORC_OK;
}

/* The number of m's parameters and buffers (-1 on OOM). */
static int named_count(const torc_module *m) {
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(m, &list);
  if (n >= 0)
    torc_named_tensors_free(list, n);
  list = NULL;
  int k = torc_module_named_buffers(m, 0, &list);
  if (k >= 0)
    torc_named_tensors_free(list, k);
  return n < 0 || k < 0 ? -1 : n + k;
}

torc_status torc_trace_check(torc_module *m,
                             const torc_tensor *const *inputs_a,
                             const torc_tensor *const *inputs_b, int n_in,
                             torc_graph **out) {
  if (out)
    *out = NULL;
  if (m == NULL || out == NULL ||
      (n_in > 0 && (inputs_a == NULL || inputs_b == NULL)))
    return torc__null_input("torc_trace_check");
  if (n_in < 1)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_trace_check: %d inputs; pass at least one "
                          "example input per batch",
                          n_in);
  for (int i = 0; i < n_in; i++)
    if (inputs_a[i] == NULL || inputs_b[i] == NULL)
      return torc__null_input("torc_trace_check");
  check c = {0};
  torc_status st = check_inputs(inputs_a, inputs_b, n_in, &c.ba, &c.bb);
  if (st)
    return st;
  /* A module whose first forward creates its lazy parameters is traced
   * again once they exist, so that both traces bind them by name. */
  int before = named_count(m);
  if ((st = torc_trace(m, inputs_a, n_in, &c.a)) == TORC_OK &&
      named_count(m) != before) {
    torc_graph_free(c.a);
    c.a = NULL;
    st = torc_trace(m, inputs_a, n_in, &c.a);
  }
  if (st != TORC_OK ||
      (st = torc_trace(m, inputs_b, n_in, &c.b)) != TORC_OK) {
    torc_graph_free(c.a);
    return st;
  }
  c.seen = torc__calloc((size_t)c.a->n_values + 1, 1);
  if (c.seen == NULL)
    st = torc_set_error(TORC_ERR_OOM, "torc_trace_check: out of memory");
  else
    st = compare(&c);
  torc__free(c.seen);
  /* Equal traces of a forward that read a value to the host: the data
   * may still choose its branch. (A difference is reported first.) */
  const char *hr = c.a->host_read ? c.a->host_read : c.b->host_read;
  if (st == TORC_OK && hr)
    st = torc_set_error(TORC_ERR_INVALID,
                        "torc_trace_check: the forward reads a tensor's value "
                        "to the host (%s), so what it does after may depend on "
                        "the data, which a trace freezes into the branch it "
                        "saw: such a forward cannot be traced (compute both "
                        "branches and pick with torc_where, or keep the read "
                        "out of the forward)",
                        hr);
  torc_graph_free(c.b);
  if (st) {
    torc_graph_free(c.a);
    return st;
  }
  c.a->batch_checked = 1;
  c.a->batch = c.ba;
  *out = c.a;
  return TORC_OK;
}
