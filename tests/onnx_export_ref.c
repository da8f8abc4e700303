/* tests/onnx_export_ref.c — for tests/test_onnx_export_cli.sh: builds the
 * model of an INI file (as torc export does), gives its batch-norm
 * statistics and 1-D parameters values away from their defaults (so that
 * a wrong mapping shows), saves the weights as DIR/weights.safetensors and,
 * for each batch size given, fixed inputs DIR/input_B.bin and torc's eager
 * eval-mode outputs DIR/output_B.bin (raw little-endian f32).
 *
 *   onnx_export_ref FILE.ini DIR B...
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

static int die(const char *what) {
  fprintf(stderr, "onnx_export_ref: %s: %s\n", what, torc_last_error());
  return 1;
}

/* Sets every 1-D tensor of the list to values in [lo, lo + 1). */
static int perturb(torc_named_tensor *list, int n, unsigned *seed) {
  for (int i = 0; i < n; i++) {
    torc_tensor *t = list[i].tensor;
    if (torc_ndim(t) != 1 || torc_dtype_of(t) != TORC_F32)
      continue;
    int64_t k = torc_numel(t);
    float *v = malloc((size_t)k * sizeof *v + 1);
    float lo = strstr(list[i].name, "running_var") ? 0.5f : -0.5f;
    for (int64_t j = 0; j < k; j++) {
      *seed = *seed * 1103515245u + 12345u;
      v[j] = lo + (float)((*seed >> 8) & 0xffff) / 65536.0f;
    }
    torc_tensor *src = torc_from_host(v, &k, 1, TORC_F32, TORC_CPU);
    free(v);
    if (src == NULL || torc_copy_(t, src) != TORC_OK)
      return -1;
    torc_release(src);
  }
  return 0;
}

static int write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "onnx_export_ref: cannot write %s\n", path);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: onnx_export_ref FILE.ini DIR B...\n");
    return 2;
  }
  torc_config *cfg = torc_config_load(argv[1]);
  if (cfg == NULL || torc_config_apply(cfg) != TORC_OK)
    return die(argv[1]);
  int64_t shape[TORC_MAX_DIMS + 1];
  int nd = 0;
  torc_module *m = torc_module_from_config(cfg, shape + 1, &nd);
  if (m == NULL)
    return die("the model");
  unsigned seed = 12345;
  torc_grad_mode mode = torc_set_grad_mode(TORC_NO_GRAD);
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(m, &list);
  int bad = n < 0 || perturb(list, n, &seed);
  torc_named_tensors_free(list, n);
  n = torc_module_named_buffers(m, 1, &list);
  bad = bad || n < 0 || perturb(list, n, &seed);
  torc_named_tensors_free(list, n);
  char path[4096];
  snprintf(path, sizeof path, "%s/weights.safetensors", argv[2]);
  if (bad || torc_module_save(m, path) != TORC_OK)
    return die("the weights");
  torc_module_train(m, 0);
  torc_set_grad_mode(TORC_INFERENCE);
  for (int a = 3; a < argc; a++) {
    shape[0] = atoi(argv[a]);
    int64_t k = 1;
    for (int d = 0; d <= nd; d++)
      k *= shape[d];
    float *x = malloc((size_t)k * sizeof *x);
    for (int64_t j = 0; j < k; j++)
      x[j] = 1.5f * sinf(0.37f * (float)j + 0.1f * (float)shape[0]);
    torc_tensor *xt = torc_from_host(x, shape, nd + 1, TORC_F32, TORC_CPU);
    torc_tensor *y = xt ? torc_module_forward(m, xt) : NULL;
    if (y == NULL)
      return die("the forward");
    size_t ny = (size_t)torc_numel(y);
    float *yv = malloc(ny * sizeof *yv);
    if (torc_to_host(y, yv, ny * sizeof *yv) != TORC_OK)
      return die("the output");
    snprintf(path, sizeof path, "%s/input_%s.bin", argv[2], argv[a]);
    if (write_file(path, x, (size_t)k * sizeof *x))
      return 1;
    snprintf(path, sizeof path, "%s/output_%s.bin", argv[2], argv[a]);
    if (write_file(path, yv, ny * sizeof *yv))
      return 1;
    free(x);
    free(yv);
    torc_release(xt);
    torc_release(y);
  }
  torc_set_grad_mode(mode);
  torc_module_free(m);
  torc_config_free(cfg);
  return 0;
}
