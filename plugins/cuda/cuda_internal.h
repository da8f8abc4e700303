/* plugins/cuda/cuda_internal.h — what the cuda plugin's files share: the
 * per-device state (its stream, the last op launched on it), the host's
 * error setter and the settings of [plugin.cuda]. Included by C (cuda.c)
 * and by nvcc's C++ (ew.cu), hence the plain types and TORC_BEGIN_DECLS.
 */
#ifndef TORC_CUDA_INTERNAL_H
#define TORC_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>

#include "torc/plugin.h"

TORC_BEGIN_DECLS

/* The settings of [plugin.cuda] (cuda_keys.c), read at init: parsed and
 * validated now, consulted by the cuBLAS/cuDNN kernels that come later. */
typedef struct torc_cuda_settings {
  int tf32;          /* matmul and conv may use TF32 tensor cores */
  int benchmark;     /* cuDNN picks its algorithms by timing them */
  int deterministic; /* only algorithms with reproducible results */
} torc_cuda_settings;

extern torc_cuda_settings torc_cuda__settings;

/* 1 when kernels must choose deterministic algorithms: [plugin.cuda]
 * deterministic = yes, or the core asks for it ([torc] deterministic =
 * yes, torc_use_deterministic_algorithms). Read per call. */
int torc_cuda__deterministic(void);
extern const torc_plugin_key torc_cuda__keys[];

/* Reads and checks every key of [plugin.cuda] into torc_cuda__settings;
 * TORC_ERR_CONFIG (after set_error, naming the key, the value and the
 * accepted ones) for a bad value. */
int torc_cuda__read_keys(const torc_host *host, torc_plugin *self);

/* The host's error setter (set at init). */
extern int (*torc_cuda__set_error)(int status, const char *fmt, ...)
    TORC_PRINTF(2, 3);

/* The stream every CUDA call for device `index` is queued on, created on
 * first use (and the device made current on this thread); NULL after
 * set_error when the device cannot be set up. One stream per device now;
 * when the core hands kernels their stream, this is where it is chosen. */
cudaStream_t torc_cuda__stream(int index);

/* The stream a kernel call queues its work on: the one the core chose
 * (args->stream, a handle from stream_new) or, when it names none, the
 * device's default stream. Makes the device current on this thread first;
 * NULL after set_error when the device cannot be set up. */
cudaStream_t torc_cuda__kstream(const torc_kernel_args *args);

/* Registers fn as the cuda kernel of (op, dtype) with the given priority
 * (added to the plugin's) and flags (TORC_KERNEL_CONTIGUOUS, ...): the
 * host's register_kernel status. */
int torc_cuda__register(const torc_host *host, torc_plugin *self,
                        const char *op, int32_t dtype, torc_kernel_fn fn,
                        int32_t priority, uint32_t flags);

/* After a kernel of op `op` was launched on device `index`: records the op
 * (synchronize names it when an asynchronous error surfaces), checks the
 * launch and, under TORC_CUDA_SYNC=1, waits for the kernel and reports its
 * error. TORC_OK or an error after set_error. */
int torc_cuda__after_launch(int index, const char *op);

/* Device scratch memory of at least `nbytes` for kernel call `a`: valid for
 * the work this call queues on torc_cuda__kstream(a), and given back when
 * the call returns with torc_cuda__workspace_done (stream order keeps the
 * queued work's use of it safe). *out is NULL for nbytes == 0. TORC_OK, or
 * TORC_ERR_OOM after set_error with the size asked for. */
int torc_cuda__workspace(const torc_kernel_args *a, size_t nbytes, void **out);

/* Gives back what torc_cuda__workspace handed out for call `a` (NULL: a
 * no-op). Call it once the call's work is queued. */
void torc_cuda__workspace_done(const torc_kernel_args *a, void *ptr);

struct torc_cuda_kerr;

/* The device's record of data errors (kerr.h) for kernel call `a` to pass
 * its kernels: they claim it for the first bad index they meet (and never
 * touch memory out of range), and the next wait on the device reports it
 * as one message naming the op, the value and the range. TORC_OK, or an
 * error after set_error when it cannot be set up. */
int torc_cuda__kerr(const torc_kernel_args *a, struct torc_cuda_kerr **out);

/* Registers the elementwise kernels of ew.cu for device type "cuda". */
int torc_cuda__register_ew(const torc_host *host, torc_plugin *self);

/* Registers "matmul" on cuBLAS (blas.c) for f32, f64, f16 and bf16. */
int torc_cuda__register_blas(const torc_host *host, torc_plugin *self);

/* Registers the reductions (sum ... amax, logsumexp, var, std, norm) and
 * softmax, log_softmax, max_dim, min_dim of reduce.cu for f32, f16, bf16. */
int torc_cuda__register_reduce(const torc_host *host, torc_plugin *self);

/* Registers the random ops of rand.cu (uniform_, normal_, randint_,
 * dropout). */
int torc_cuda__register_rand(const torc_host *host, torc_plugin *self);

/* Registers tiled_mm.cu's "matmul": the only one for i32, i64 and u8
 * (cuBLAS has no integer GEMM), and below cuBLAS's for f32, f64, f16 and
 * bf16 (the layouts and sizes cuBLAS's kernel declines). */
int torc_cuda__register_tiled_mm(const torc_host *host, torc_plugin *self);

/* Registers conv2d, conv2d_backward_input, conv2d_backward_weight and
 * conv_transpose2d on cuDNN (dnn.c), and pool.cu's kernels through
 * torc_cuda__register_pool, for f32, f64, f16 and bf16. */
int torc_cuda__register_dnn(const torc_host *host, torc_plugin *self);

/* Registers pool.cu's max_pool2d, avg_pool2d, adaptive_avg_pool2d, their
 * backwards, batch_norm and batch_norm_backward. */
int torc_cuda__register_pool(const torc_host *host, torc_plugin *self);

/* Queues y += b (b [C] per channel of the NCHW tensor y, one dtype each)
 * on stream s for call a (pool.cu; dnn.c's convolution bias). TORC_OK or
 * an error after set_error. */
int torc_cuda__bias_add(const torc_kernel_args *a, cudaStream_t s,
                        const torc_ktensor *y, const torc_ktensor *b);
/* Registers the indexing and shape ops of index.cu (gather, scatter,
 * index_select, index_add, embedding and its backward, cumsum, topk, pad,
 * interpolate and their backwards) for every dtype ref has for each. */
int torc_cuda__register_index(const torc_host *host, torc_plugin *self);
/* Registers the elementwise kernels of ew2.cu: the comparisons and
 * logical ops (bool out), copy (TORC_DTYPE_ANY), fill_ and where, for every
 * dtype. */
int torc_cuda__register_ew2(const torc_host *host, torc_plugin *self);
/* Registers layer_norm, group_norm, their backwards and cross_entropy,
 * cross_entropy_backward of nn.cu for f32, f64, f16 and bf16. */
int torc_cuda__register_nn(const torc_host *host, torc_plugin *self);

/* Registers the optimizer steps and the foreach ops of optim.cu
 * (sgd_step_, adam_step_, foreach_add_, foreach_mul_, foreach_norm,
 * foreach_sgd_step_, foreach_adam_step_) for f32, f64, f16 and bf16. */
int torc_cuda__register_optim(const torc_host *host, torc_plugin *self);

#ifdef TORC_HAVE_NCCL
/* Registers the "nccl" communicator (nccl.c): collectives on cuda tensors.
 * Needs a core of ABI 1.9 (host->register_comm). */
int torc_cuda__register_nccl(const torc_host *host, torc_plugin *self);
#endif

/* Destroys the cuBLAS handles (blas.c), at the plugin's fini. */
void torc_cuda__blas_shutdown(void);

/* Destroys the cuDNN handles and empties the algorithm cache (dnn.c), at
 * the plugin's fini. */
void torc_cuda__dnn_shutdown(void);

TORC_END_DECLS

#endif /* TORC_CUDA_INTERNAL_H */
