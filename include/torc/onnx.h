/* torc/onnx.h — ONNX models: reading a .onnx file or a serialized
 * TensorProto, running the model's graph with torc's ops (so autograd
 * works through it), and importing it as a module to fine-tune
 * (torc_onnx_module_new). docs/onnx.md lists the operators supported. */
#ifndef TORC_ONNX_H
#define TORC_ONNX_H

#include <stddef.h>

#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* A loaded ONNX model: its graph, initializers (as cpu tensors) and the
 * opset of the default domain. Not thread-safe: one thread at a time. */
typedef struct torc_onnx_model torc_onnx_model;

/* The largest .onnx or .pb file torc_onnx_load and torc_onnx_read_tensor
 * read (1 GiB). */
#define TORC_ONNX_MAX_FILE ((size_t)1 << 30)

/* Reads the ONNX model at `path`. Returns a new model (free it with
 * torc_onnx_free) or NULL with one message naming the file: TORC_ERR_IO
 * (cannot be read, or larger than TORC_ONNX_MAX_FILE), TORC_ERR_INVALID
 * (not a ModelProto, no graph, an initializer with bad dims or data),
 * TORC_ERR_UNSUPPORTED (external data, an element type torc lacks). */
TORC_API torc_onnx_model *torc_onnx_load(const char *path);

/* As torc_onnx_load, from `len` bytes at `buf` (copied where needed);
 * `name` names the source in messages. */
TORC_API torc_onnx_model *torc_onnx_load_buffer(const void *buf, size_t len,
                                                const char *name);

/* Frees a model (NULL is a no-op). */
TORC_API void torc_onnx_free(torc_onnx_model *m);

/* The opset version of the default ("" or "ai.onnx") domain. */
TORC_API int64_t torc_onnx_opset(const torc_onnx_model *m);

/* The graph's runtime inputs (its inputs that are not initializers), in
 * order, and its outputs. Names belong to the model. */
TORC_API int torc_onnx_n_inputs(const torc_onnx_model *m);
TORC_API const char *torc_onnx_input_name(const torc_onnx_model *m, int i);
TORC_API int torc_onnx_n_outputs(const torc_onnx_model *m);
TORC_API const char *torc_onnx_output_name(const torc_onnx_model *m, int i);

/* The initializers (name and tensor, borrowed from the model). */
TORC_API int torc_onnx_n_initializers(const torc_onnx_model *m);
TORC_API const char *torc_onnx_initializer_name(const torc_onnx_model *m,
                                                int i);
TORC_API torc_tensor *torc_onnx_initializer(const torc_onnx_model *m, int i);

/* Checks that every node's operator is supported for the model's opset
 * and that nodes come in topological order. TORC_OK, or
 * TORC_ERR_UNSUPPORTED with one message listing every unsupported op
 * type with its node names ("unsupported ONNX operators: Foo (node n1),
 * Bar (node n2)"), or TORC_ERR_INVALID naming the node whose input is not
 * defined by an earlier node, an initializer or a graph input. */
TORC_API torc_status torc_onnx_check(const torc_onnx_model *m);

/* The number of nodes whose operator torc does not run at the model's
 * opset; their list ("Foo (node n1), Bar (node n2)", each op type once
 * with all its nodes, truncated to size) into buf when buf is not NULL. */
TORC_API int torc_onnx_unsupported(const torc_onnx_model *m, char *buf,
                                   size_t size);

/* Runs the graph: inputs[i] is the value of torc_onnx_input_name(m, i)
 * (n_inputs must equal torc_onnx_n_inputs), outputs receives
 * torc_onnx_n_outputs new references (n_outputs of them). An initializer
 * may be replaced for this call by giving a non-NULL `params` of
 * torc_onnx_n_initializers tensors (NULL entries keep the model's).
 * Errors: torc_onnx_check's, and those of the op a node runs, prefixed
 * with the node's name and op type; on error no output is written. */
TORC_API torc_status torc_onnx_run(const torc_onnx_model *m,
                                   const torc_tensor *const *inputs,
                                   int n_inputs,
                                   torc_tensor *const *params,
                                   torc_tensor **outputs, int n_outputs);

/* Reads a serialized TensorProto (.pb) file into a new cpu tensor; the
 * tensor's name, when name_out is not NULL, is copied into name_out
 * (size name_size, truncated). Errors as torc_onnx_load. */
TORC_API torc_tensor *torc_onnx_read_tensor(const char *path, char *name_out,
                                            size_t name_size);

/* ---- importing a model as a module ---- */

struct torc_module;

/* Reads the ONNX model at `path` into *out: a new root module (type
 * "onnx"; free it with torc_module_free) whose forward runs the graph
 * with torc's ops, taking the graph's inputs in order
 * (torc_module_forward_n for more than one) and returning its first
 * output. The model's float initializers become parameters (requires
 * grad, in named_parameters and the state dict), except the running mean
 * and variance a BatchNormalization node reads (its inputs 3 and 4),
 * which are persistent buffers with a num_batches_tracked counter beside
 * a "...running_mean"; integer initializers stay constants. Names are the
 * initializers': a dotted one ("features.0.weight") is the same path of
 * child modules, so the state dict's keys are PyTorch's; a character
 * other than a letter, digit, '_' or '.' becomes '_', and a name that
 * still does not fit the tree goes flat at the root with its dots as '_'
 * (a suffix _2, _3, ... when taken). In training mode (the default, as
 * torc_module_train) BatchNormalization normalises with the batch's
 * statistics and updates the running ones, and Dropout drops; in eval
 * mode both are inference. Errors: torc_onnx_load's and torc_onnx_check's
 * (every unsupported operator, with its nodes, in one message), and
 * TORC_ERR_INVALID for a model without outputs; *out is then NULL. */
TORC_API torc_status torc_onnx_module_new(const char *path,
                                          struct torc_module **out);

/* ---- export: a torc module written as an ONNX model (docs/export.md) ---- */

/* How torc_onnx_export writes a model. A zero-initialised struct (or a
 * NULL pointer) takes every default. */
typedef struct torc_onnx_export_options {
  /* The default domain's opset, 13 to 17; 0 takes 17. */
  int opset;
  /* 0 (the default): dim 0 of the inputs and the output is the symbolic
   * "batch", so the model runs at any batch size; 1: the traced sizes are
   * written as numbers. */
  int fixed_batch;
  /* The graph inputs' names, one per example input, or NULL: "input"
   * (one input) or "input0", "input1"... */
  const char *const *input_names;
  /* The graph output's name, or NULL: "output". */
  const char *output_name;
} torc_onnx_export_options;

/* The lowest and highest opsets torc_onnx_export writes. */
#define TORC_ONNX_EXPORT_MIN_OPSET 13
#define TORC_ONNX_EXPORT_MAX_OPSET 17

/* Traces m's forward (eval mode, torc_trace) on the n_in example inputs
 * and writes it as an ONNX model to `path`: parameters and buffers are
 * initializers named by their state-dict names, every kernel call one or
 * a few ONNX nodes (docs/export.md lists them). The file is written to a
 * temporary name beside `path` and renamed, so a failure leaves no file.
 * Errors: TORC_ERR_RANGE (opset outside 13..17), TORC_ERR_UNSUPPORTED
 * (one message listing every node with no ONNX mapping: its index, op and
 * module path, also for a dynamic batch a reshape or broadcast along the
 * batch dim), TORC_ERR_SHAPE (dynamic batch, but the traced graph differs
 * between two batch sizes), TORC_ERR_IO (path not writable: nothing is
 * left behind), the forward's own errors. */
TORC_API torc_status torc_onnx_export(struct torc_module *m,
                                      const torc_tensor *const *example_inputs,
                                      int n_in,
                                      const torc_onnx_export_options *opt,
                                      const char *path);

/* As torc_onnx_export, into memory: *out receives a malloc'ed buffer of
 * *len bytes (release it with free), or NULL on error. */
TORC_API torc_status torc_onnx_export_buffer(
    struct torc_module *m, const torc_tensor *const *example_inputs, int n_in,
    const torc_onnx_export_options *opt, void **out, size_t *len);

TORC_END_DECLS

#endif /* TORC_ONNX_H */
