/* core/onnx_internal.h — what the ONNX reader (onnx_read.c) and the graph
 * interpreter (onnx_run.c) share: the model struct, TensorProto
 * conversion and the operator table's lookup. */
#ifndef TORC_CORE_ONNX_INTERNAL_H
#define TORC_CORE_ONNX_INTERNAL_H

#include "onnx.pb-c.h"
#include "torc/onnx.h"

struct torc_onnx_model {
  Onnx__ModelProto *proto;
  char *name;           /* the file (or buffer) name, for messages */
  int64_t opset;        /* the default domain's opset */
  int n_inits;
  const char **init_names; /* borrowed from proto */
  torc_tensor **inits;
  int n_inputs;
  const char **inputs;
  int n_outputs;
  const char **outputs;
};

/* A TensorProto as a new cpu tensor in *out; `src` and the tensor's name
 * are in messages. TORC_OK or the error (message set). */
torc_status torc__onnx_tensor(const Onnx__TensorProto *tp, const char *src,
                              torc_tensor **out);

/* The torc dtype of ONNX's TensorProto.DataType t in *dt: 1, or 0 when
 * torc has none (INT8, INT16, the unsigned ones above 8 bits, STRING,
 * COMPLEX). */
int torc__onnx_dtype(int64_t t, torc_dtype *dt);

/* The interpreter's row for op_type at `opset`: 1 if supported, else 0. */
int torc__onnx_op_supported(const char *op_type, int64_t opset);

/* torc_onnx_run, with `training` 1 for a module in training mode:
 * BatchNormalization normalises with batch statistics and updates its
 * running ones (inputs 3 and 4) in place, Dropout drops. `checked` 1: the
 * model passed torc_onnx_check already (it is not checked again). */
torc_status torc__onnx_run_mode(const torc_onnx_model *m,
                                const torc_tensor *const *inputs, int n_inputs,
                                torc_tensor *const *params,
                                torc_tensor **outputs, int n_outputs,
                                int training, int checked);

#endif /* TORC_CORE_ONNX_INTERNAL_H */
