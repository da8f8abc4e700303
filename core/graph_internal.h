/* core/graph_internal.h — the layout of a torc_graph (torc/graph.h), for
 * the core files that read or rewrite graphs: tracing and printing
 * (graph.c), ONNX export and planned execution. */
#ifndef TORC_GRAPH_INTERNAL_H
#define TORC_GRAPH_INTERNAL_H

#include "internal.h"
#include "torc/graph.h"

/* A value: a tensor the forward read or wrote (a reference is kept until
 * the graph is freed, so no pointer is reused while tracing). */
typedef struct {
  torc_tensor *t;
  torc_dtype dtype;
  int ndim;
  int64_t shape[TORC_MAX_DIMS];
  int produced; /* a node wrote it */
  int input;    /* graph input index, or -1 */
  char *name;   /* parameter or buffer name, or NULL */
  int view;     /* shares the named tensor's storage but is not it */
  int base;     /* an earlier value whose storage it views, or -1 */
  int64_t strides[TORC_MAX_DIMS];
  int64_t offset; /* storage offset, in elements */
  /* torc_trace_check: the dims that follow the batch (bit d: shape[d] is
   * k * batch, and is k * B when the graph runs at batch B) */
  uint32_t batch_mask;
  /* ... for a view: the strides that scale with the batch likewise, and
   * whether the offset does; contiguous_view: contiguous in both traces,
   * its strides are recomputed from the shape */
  uint32_t stride_batch_mask;
  int offset_batch;
  int contiguous_view;
} torc__gvalue;

/* A node: one kernel call (op id into torc__ops, the kernel dtype, the
 * params bytes as passed, value ids read and written, the module path). */
typedef struct {
  int op;
  torc_dtype kdtype;
  void *params;
  size_t params_size;
  int n_in, n_out;
  int *in, *out;
  char *module;
} torc__gnode;

/* The graph: values, nodes in call order, the module's named tensors. */
struct torc_graph {
  torc__gvalue *values;
  int n_values, cap_values;
  torc__gnode *nodes;
  int n_nodes, cap_nodes;
  torc_named_tensor *named;
  int n_named;
  int n_inputs;
  int output; /* the forward's result */
  torc_status error; /* the first recording failure (OOM) */
  int batch_checked; /* made by torc_trace_check: runs at other batches */
  int64_t batch;     /* the traced batch (dim 0 of the inputs that have it) */
  /* A graph from torc_graph_load holds no tensor (t is NULL) for the
   * values nodes write and for views of values; they are made on device. */
  torc_device device;
  int loaded; /* from torc_graph_load: runs check each node's shapes */
  /* The forward's first read of a value to the host ("torc_item in
   * module \"1\""), or NULL: what it did after may depend on the data. */
  char *host_read;
};

/* A view of t (a constant of value v's geometry) with v's dims that
 * follow the batch taken as 1: one sample of a broadcast; NULL on OOM. */
torc_tensor *torc__graph_constant_slice(const torc__gvalue *v,
                                        torc_tensor *t);

/* A value's geometry as a kernel sees it. */
typedef struct {
  int ndim;
  const int64_t *shape;
  torc_dtype dtype;
} torc__gshape;

/* What is wrong with the shapes and dtypes sh (node n's inputs, then its
 * outputs) for its op's kernel, or NULL: for the ops whose shape logic is
 * plain (elementwise ops, matmul, reductions, ops along a dim) and for
 * conv2d, the pools, batch and layer norm and dropout, the shapes the
 * core itself gives their kernels. For any other op it returns
 * torc__graph_unchecked. */
/* Whether value v's recorded strides are the contiguous ones of its shape
 * (dims of size 1 aside). A node's output that is not (a strided part of
 * a buffer no value of the trace holds, as the first piece of a cat along
 * a later dim) can be neither planned nor saved. */
int torc__graph_contiguous_value(const torc__gvalue *v);

const char *torc__graph_node_shapes(const torc__gnode *n,
                                    const torc__gshape *sh);

/* torc__graph_node_shapes' answer for an op whose shapes it cannot
 * verify (a graph file may not hold it). */
extern const char torc__graph_unchecked[];

/* Appends m's parameters and buffers (all of them, by state-dict name) to
 * g->named; non-zero on OOM. */
int torc__graph_add_named(torc_graph *g, const torc_module *m);

/* x (k * from, a dim, stride or offset that follows the batch) as
 * k * to; -1 when that overflows int64. */
int64_t torc__graph_rebatch(int64_t x, int64_t from, int64_t to);

/* Node n of g's params as text into buf, without braces: the fields of
 * its op's params struct by name ("stride=[1,1] padding=[0,0] ..."), or
 * hex bytes for an op whose struct has no writer or whose size is not
 * that struct's; "" for none (core/graph_params.c). */
void torc__graph_params_str(const torc_graph *g, const torc__gnode *n,
                            char *buf, size_t size);

/* The size of op's params struct (0 for none), or (size_t)-1 when the op
 * id is out of range or its struct is not known. */
size_t torc__graph_params_size(int op);

/* The name of op's params struct as its ops.def row gives it ("void",
 * "torc_conv_kparams"); "" for an op id out of range. */
const char *torc__graph_params_struct(int op);

#endif
