/* plugins/onednn/onednn.c — the onednn plugin: oneDNN 2.6 (v2 C API)
 * kernels for the core's "cpu" device at a priority above the cpu plugin:
 * conv2d forward and both backwards (and conv_transpose2d), max/avg
 * pooling and batch norm with their backwards, in f32 (oneDNN has no f64;
 * f64 stays with cpu/ref); the fused inference kernels linear_act (one
 * matmul primitive) and conv2d_act (convolution, relu and max pool in
 * oneDNN's blocked layout) in f32 (fused.c); matmul, conv2d, pooling and
 * batch norm (inference) in bf16 where the CPU has native bf16 (bf16.c).
 * oneDNN's OpenMP threads follow each kernel's n_threads. `torc
 * test-backend onednn` certifies it against ref.
 */
#include <stdlib.h>
#include <string.h>

#include "onednn_internal.h"

int (*torc_dnn__set_error)(int status, const char *fmt, ...) = NULL;
dnnl_engine_t torc_dnn__engine;
dnnl_stream_t torc_dnn__stream;

/* [plugin.onednn] layout: 0 auto, 1 plain, 2 blocked. */
static int layout_mode;
int torc_dnn__conv_auto;

int torc_dnn__use_plain(int64_t C, int64_t O, int forward) {
  if (layout_mode != 0)
    return layout_mode == 1;
  /* auto: oneDNN's direct (JIT) kernels want channel blocks of 16; in
   * plain layouts it runs im2col + GEMM, 2-4x slower here even with the
   * reorders counted (CNN layers 1->32 and 32->64 channels). Only the
   * backward passes of layers with under 16 channels on both sides
   * measured faster plain. */
  return !forward && C < 16 && O < 16;
}

typedef struct dnn_kernel {
  const char *op;
  torc_kernel_fn fn;
  unsigned flags; /* TORC_KERNEL_* */
} dnn_kernel;

enum { CONTIG = TORC_KERNEL_CONTIGUOUS };

static const dnn_kernel kernels[] = {
    {"conv2d", torc_dnn__k_conv2d, CONTIG},
    {"conv2d_backward_input", torc_dnn__k_conv2d_backward_input, CONTIG},
    {"conv_transpose2d", torc_dnn__k_conv2d_backward_input, CONTIG},
    {"conv2d_backward_weight", torc_dnn__k_conv2d_backward_weight, CONTIG},
    {"max_pool2d", torc_dnn__k_max_pool2d, CONTIG},
    {"max_pool2d_backward", torc_dnn__k_max_pool2d_backward, CONTIG},
    {"avg_pool2d", torc_dnn__k_avg_pool2d, CONTIG},
    {"avg_pool2d_backward", torc_dnn__k_avg_pool2d_backward, CONTIG},
    {"batch_norm", torc_dnn__k_batch_norm, CONTIG},
    {"batch_norm_backward", torc_dnn__k_batch_norm_backward, CONTIG},
    /* x and w strided: the matmul reads a transposed weight in place */
    {"linear_act", torc_dnn__k_linear_act, 0},
    {"conv2d_act", torc_dnn__k_conv2d_act, CONTIG},
};

static const torc_plugin_key keys[] = {
    {"layout",
     "convolution memory layouts: auto (blocked where oneDNN's direct "
     "kernels pay for the reorders), plain (NCHW/OIHW, no reorders) or "
     "blocked (whatever oneDNN prefers)",
     "auto"},
    {"algorithm",
     "convolution algorithm: direct (exact to a few ulps, as PyTorch's "
     "oneDNN path) or auto (oneDNN may choose Winograd for 3x3 stride-1 "
     "layers: faster, slightly larger rounding error)",
     "direct"},
    {NULL, NULL, NULL}};

static void dnn_fini(torc_plugin *self) {
  (void)self;
  torc_dnn__cache_clear();
  if (torc_dnn__stream)
    dnnl_stream_destroy(torc_dnn__stream);
  if (torc_dnn__engine)
    dnnl_engine_destroy(torc_dnn__engine);
  torc_dnn__stream = NULL;
  torc_dnn__engine = NULL;
}

static int dnn_init(const torc_host *host, torc_plugin *self) {
  if (!TORC_HAS_SLOT(host, torc_host, num_threads) || !host->set_error ||
      !host->register_kernel || !host->num_threads)
    return TORC_ERR_ABI; /* no way to report more: the core names us */
  torc_dnn__set_error = host->set_error;
  const char *lay = host->config_get ? host->config_get(self, "layout") : NULL;
  if (lay == NULL || strcmp(lay, "auto") == 0)
    layout_mode = 0;
  else if (strcmp(lay, "plain") == 0)
    layout_mode = 1;
  else if (strcmp(lay, "blocked") == 0)
    layout_mode = 2;
  else
    return host->set_error(TORC_ERR_CONFIG,
                           "[plugin.onednn] layout = %s: expected auto, "
                           "plain or blocked",
                           lay);
  const char *alg =
      host->config_get ? host->config_get(self, "algorithm") : NULL;
  if (alg == NULL || strcmp(alg, "direct") == 0)
    torc_dnn__conv_auto = 0;
  else if (strcmp(alg, "auto") == 0)
    torc_dnn__conv_auto = 1;
  else
    return host->set_error(TORC_ERR_CONFIG,
                           "[plugin.onednn] algorithm = %s: expected direct "
                           "or auto",
                           alg);
  dnnl_status_t s = dnnl_engine_create(&torc_dnn__engine, dnnl_cpu, 0);
  if (s == dnnl_success)
    s = dnnl_stream_create(&torc_dnn__stream, torc_dnn__engine,
                           dnnl_stream_default_flags);
  if (s != dnnl_success) {
    dnn_fini(self);
    return host->set_error(TORC_ERR_PLUGIN,
                           "onednn: cannot create the cpu engine (oneDNN "
                           "status %d)",
                           (int)s);
  }
  torc_dnn__threads(host->num_threads());
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
    torc_kernel_reg reg = {
        .struct_size = sizeof reg,
        .device_type = "cpu",
        .op = kernels[i].op,
        .dtype = TORC_F32,
        .priority = TORC_DNN_PRIORITY,
        .fn = kernels[i].fn,
        .data = NULL,
        .flags = kernels[i].flags,
    };
    int st = host->register_kernel(self, &reg);
    if (st != TORC_OK) {
      dnn_fini(self);
      return st;
    }
  }
  int st = torc_dnn__register_bf16(host, self);
  if (st != TORC_OK)
    dnn_fini(self);
  return st;
}

static const torc_plugin_info dnn_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "onednn",
    .version = "0.1.0",
    .description = "oneDNN kernels for cpu: conv2d (forward, backward, "
                   "transposed), max/avg pooling, batch norm and the fused "
                   "linear_act and conv2d_act, f32; matmul, conv2d, "
                   "pooling, batch norm in bf16",
    .provides = TORC_PROVIDES_KERNELS,
    /* libgomp's threads must outlive any dlclose. */
    .flags = TORC_PLUGIN_NO_UNLOAD,
    .keys = keys,
    .init = dnn_init,
    .fini = dnn_fini,
    /* ref serves every op this plugin does not (uniform_ for the
     * initialisers, integer dtypes, ...): loaded with it when absent. */
    .requires = (const char *const[]){"ref", NULL},
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);
TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &dnn_info;
}
