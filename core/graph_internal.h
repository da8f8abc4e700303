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
};

#endif
