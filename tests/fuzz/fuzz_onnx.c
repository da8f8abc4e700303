/* tests/fuzz/fuzz_onnx.c — libFuzzer harness of the ONNX reader and
 * interpreter (core/onnx_read.c, core/onnx_run.c): the input is a model and
 * the graph's input tensors, each part after a 4-byte little-endian length
 * (the model first, then up to 8 serialized TensorProtos). The model is
 * loaded from the buffer and from a file, checked, its unsupported list
 * and initializers read, each tensor is read with torc_onnx_read_tensor,
 * and when the model checks and every input is given, the graph runs:
 * under a memory limit of 1 MiB, so that a model whose shapes ask for
 * more (ConstantOfShape, Expand, a broadcast) is an error, not a finding.
 */
#include "fuzz_common.h"

#define MAX_INPUTS 8

static char model_path[1100], tensor_path[1100];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_setup();
  fuzz_load_plugin("ref");
  fuzz_path(model_path, sizeof model_path, "model.onnx");
  fuzz_path(tensor_path, sizeof tensor_path, "input.pb");
  if (torc_device_set_memory_limit(TORC_CPU, (size_t)1 << 20) != TORC_OK)
    abort();
  return 0;
}

static void read_model(const torc_onnx_model *m) {
  (void)torc_onnx_opset(m);
  char buf[256];
  (void)torc_onnx_unsupported(m, buf, sizeof buf);
  (void)torc_onnx_unsupported(m, NULL, 0);
  for (int i = 0; i < torc_onnx_n_inputs(m); i++)
    (void)torc_onnx_input_name(m, i);
  for (int i = 0; i < torc_onnx_n_outputs(m); i++)
    (void)torc_onnx_output_name(m, i);
  int n = torc_onnx_n_initializers(m);
  for (int i = 0; i < n && i < FUZZ_MAX_ITEMS; i++) {
    (void)torc_onnx_initializer_name(m, i);
    (void)torc_numel(torc_onnx_initializer(m, i));
  }
  (void)torc_onnx_check(m);
  torc_clear_error();
}

static void run_model(const torc_onnx_model *m, torc_tensor **in, int n_in) {
  int n_out = torc_onnx_n_outputs(m);
  if (torc_onnx_n_inputs(m) != n_in || n_out < 1 || n_out > MAX_INPUTS ||
      torc_onnx_check(m) != TORC_OK) {
    torc_clear_error();
    return;
  }
  torc_tensor *out[MAX_INPUTS] = {NULL};
  if (torc_onnx_run(m, (const torc_tensor *const *)in, n_in, NULL, out,
                    n_out) == TORC_OK)
    for (int i = 0; i < n_out; i++) {
      (void)torc_numel(out[i]);
      torc_release(out[i]);
    }
  torc_clear_error();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *model, *rest;
  size_t n_model, n_rest;
  if (!fuzz_split(data, size, &model, &n_model, &rest, &n_rest))
    return 0;
  torc_onnx_model *m = torc_onnx_load_buffer(model, n_model, "model.onnx");
  torc_clear_error();
  /* The file path reads the same bytes; it must agree with the buffer. */
  fuzz_write(model_path, model, n_model);
  torc_onnx_model *mf = torc_onnx_load(model_path);
  torc_clear_error();
  if ((m == NULL) != (mf == NULL))
    abort();
  torc_onnx_free(mf);
  torc_tensor *in[MAX_INPUTS] = {NULL};
  int n_in = 0;
  while (n_in < MAX_INPUTS && n_rest > 0) {
    const uint8_t *t;
    size_t nt;
    if (!fuzz_split(rest, n_rest, &t, &nt, &rest, &n_rest))
      break;
    fuzz_write(tensor_path, t, nt);
    char name[64];
    in[n_in] = torc_onnx_read_tensor(tensor_path, name, sizeof name);
    torc_clear_error();
    if (in[n_in] == NULL)
      break;
    n_in++;
  }
  if (m) {
    read_model(m);
    run_model(m, in, n_in);
  }
  for (int i = 0; i < n_in; i++)
    torc_release(in[i]);
  torc_onnx_free(m);
  return 0;
}
