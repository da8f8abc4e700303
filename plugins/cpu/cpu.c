/* plugins/cpu/cpu.c — the cpu plugin: fast kernels for the core's "cpu"
 * device at a priority above ref (which keeps every op this plugin does
 * not serve): GEMM-backed matmul, linear_act and conv2d (OpenBLAS or
 * oneDNN sgemm, the `gemm` key), vectorised elementwise ops, reductions
 * and softmax (the ISA picked at load), fused kernels; its own thread pool
 * sized by [torc] threads, joined at fini. `torc test-backend cpu` certifies it against
 * ref by pinning the dispatcher to each provider in turn.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

int (*torc_cpu__set_error)(int status, const char *fmt, ...) = NULL;

/* The GEMM and convolution kernels of gemm.c and conv.c. */
static const torc_cpu_kernel blas_kernels[] = {
    {"matmul", torc_cpu__k_matmul, 0},
    {"linear_act", torc_cpu__k_linear_act, 0},
    {"conv2d", torc_cpu__k_conv2d, TORC_KERNEL_CONTIGUOUS},
    {"conv2d_backward_input", torc_cpu__k_conv2d_backward_input,
     TORC_KERNEL_CONTIGUOUS},
    {"conv_transpose2d", torc_cpu__k_conv2d_backward_input,
     TORC_KERNEL_CONTIGUOUS},
    {"conv2d_backward_weight", torc_cpu__k_conv2d_backward_weight,
     TORC_KERNEL_CONTIGUOUS},
};

int torc_cpu__register_table(const torc_host *host, torc_plugin *self,
                             const torc_cpu_kernel *table, size_t n,
                             const int32_t *dtypes, size_t n_dtypes) {
  for (size_t i = 0; i < n; i++)
    for (size_t d = 0; d < n_dtypes; d++) {
      torc_kernel_reg reg = {
          .struct_size = sizeof reg,
          .device_type = "cpu",
          .op = table[i].op,
          .dtype = dtypes[d],
          .priority = TORC_CPU_PRIORITY,
          .fn = table[i].fn,
          .data = NULL,
          .flags = table[i].flags,
      };
      int st = host->register_kernel(self, &reg);
      if (st != TORC_OK)
        return st;
    }
  return TORC_OK;
}

static int register_fast(const torc_host *host, torc_plugin *self) {
  static const int32_t dtypes[] = {TORC_F32, TORC_F64};
  int st = torc_cpu__register_table(host, self, blas_kernels,
                                    sizeof blas_kernels / sizeof blas_kernels[0],
                                    dtypes, 2);
  if (st == TORC_OK)
    st = torc_cpu__register_ew(host, self);
  if (st == TORC_OK)
    st = torc_cpu__register_fused(host, self);
  if (st == TORC_OK)
    st = torc_cpu__register_attention(host, self);
  if (st == TORC_OK)
    st = torc_cpu__register_rnn_cell(host, self);
  if (st == TORC_OK)
    st = torc_cpu__register_nn(host, self);
  if (st == TORC_OK)
    st = torc_cpu__register_bnorm(host, self);
  if (st == TORC_OK)
    st = torc_cpu__register_maxpool(host, self);
  return st;
}

static int cpu_init(const torc_host *host, torc_plugin *self) {
  if (!TORC_HAS_SLOT(host, torc_host, num_threads) || !host->set_error ||
      !host->register_kernel || !host->num_threads)
    return TORC_ERR_ABI; /* no way to report more: the core names us */
  torc_cpu__set_error = host->set_error;
  torc_cpu__threads(host->num_threads());
  const char *gemm = host->config_get ? host->config_get(self, "gemm") : NULL;
  int st = torc_cpu__gemm_select(gemm);
  if (st != TORC_OK)
    return st;
  st = register_fast(host, self);
  if (st == TORC_OK && host->log)
    host->log(TORC_LOG_DEBUG, "cpu plugin: %s elementwise loops, %s sgemm",
              torc_cpu__isa->name, torc_cpu__gemm_name());
  return st;
}

/* Joins the pool's threads; the core has unregistered the kernels. */
static void cpu_fini(torc_plugin *self) {
  (void)self;
  torc_cpu__pool_fini();
}

static const torc_plugin_key cpu_keys[] = {
    {"gemm",
     "f32 GEMM provider: auto (onednn on AVX-512 machines whose "
     "OpenBLAS lacks AVX-512 kernels, else openblas), openblas or onednn "
     "(the environment's TORC_CPU_GEMM overrides)",
     "auto"},
    {NULL, NULL, NULL},
};

static const torc_plugin_info cpu_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "cpu",
    .version = "0.1.0",
    .description = "fast kernels for cpu: matmul and conv2d through "
                   "OpenBLAS or oneDNN sgemm; vectorised, threaded "
                   "elementwise ops, reductions, softmax; f32 and f64",
    .provides = TORC_PROVIDES_KERNELS,
    .flags = 0,
    .keys = cpu_keys,
    .init = cpu_init,
    .fini = cpu_fini,
    /* ref serves every op this plugin does not (uniform_ for the
     * initialisers, integer dtypes, ...): loaded with it when absent. */
    .requires = (const char *const[]){"ref", NULL},
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);
TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &cpu_info;
}
