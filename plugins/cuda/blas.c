/* plugins/cuda/blas.c — "matmul" on cuBLAS: f32 (TF32 only when
 * [plugin.cuda] tf32 is on), f16 and bf16 with f32 accumulation, f64; one
 * cuBLAS handle per device, created on first use and bound to its stream.
 * The layout (transposes, leading dims, batches) is blas_plan.h's; layouts
 * cuBLAS cannot express and sizes past its ints are declined, and
 * tiled_mm.cu's kernel (registered below this one) serves them.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>

#include "blas_plan.h"
#include "cuda_internal.h"

/* Devices past this index get an error naming it (a machine with more
 * GPUs than this raises the constant). */
#define BLAS_MAX_DEVICES 64

static struct {
  cublasHandle_t h[BLAS_MAX_DEVICES];
  pthread_mutex_t lock;
  /* Held from binding a handle to the call's stream until its work is
   * queued: a handle has one stream at a time, and two host threads may
   * run products on different streams. */
  pthread_mutex_t call;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .call = PTHREAD_MUTEX_INITIALIZER};

static const char *dtype_name(int dt) {
  switch (dt) {
  case TORC_F32: return "f32";
  case TORC_F64: return "f64";
  case TORC_F16: return "f16";
  case TORC_BF16: return "bf16";
  default: return "an integer dtype";
  }
}

static void shape_str(const torc_ktensor *t, char *buf, size_t size) {
  size_t n = 0;
  n += (size_t)snprintf(buf, size, "[");
  for (int32_t d = 0; d < t->ndim && n < size; d++)
    n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "",
                          (long long)t->shape[d]);
  if (n < size)
    snprintf(buf + n, size - n, "]");
}

/* "f32 [2, 3, 4] x [2, 4, 5] -> [2, 3, 5]", for messages. */
static void call_str(const torc_kernel_args *a, char *buf, size_t size) {
  char s[3][160];
  shape_str(&a->in[0], s[0], sizeof s[0]);
  shape_str(&a->in[1], s[1], sizeof s[1]);
  shape_str(&a->out[0], s[2], sizeof s[2]);
  snprintf(buf, size, "%s %s x %s -> %s", dtype_name(a->in[0].dtype), s[0],
           s[1], s[2]);
}

static int blas_error(const torc_kernel_args *a, const char *what,
                      cublasStatus_t s) {
  char c[600];
  call_str(a, c, sizeof c);
  return torc_cuda__set_error(
      s == CUBLAS_STATUS_ALLOC_FAILED ? TORC_ERR_OOM : TORC_ERR_DEVICE,
      "cuda:%d: '%s' (%s): %s failed: %s: %s%s", a->device_index, a->op, c,
      what, cublasGetStatusName(s), cublasGetStatusString(s),
      s == CUBLAS_STATUS_ALLOC_FAILED
          ? "; cuBLAS could not allocate its workspace: free device memory "
            "or use a smaller batch"
          : "");
}

/* The handle of device `index`, bound to its stream; NULL after set_error.
 * The math mode follows [plugin.cuda] tf32: TF32 tensor cores for f32
 * products only when it is on (f32 otherwise rounds as IEEE f32). */
static cublasHandle_t handle(const torc_kernel_args *a, cudaStream_t s) {
  int i = a->device_index;
  if (i >= BLAS_MAX_DEVICES) {
    torc_cuda__set_error(TORC_ERR_DEVICE,
                         "cuda:%d: cuBLAS handles are kept for devices 0 to "
                         "%d only; set CUDA_VISIBLE_DEVICES to fewer devices",
                         i, BLAS_MAX_DEVICES - 1);
    return NULL;
  }
  pthread_mutex_lock(&g.lock);
  cublasHandle_t h = g.h[i];
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  const char *what = "cublasCreate";
  if (h == NULL) {
    st = cublasCreate(&h); /* on the current device: the stream set it */
    if (st == CUBLAS_STATUS_SUCCESS) {
      what = "cublasSetMathMode";
      st = cublasSetMathMode(h, torc_cuda__settings.tf32
                                    ? CUBLAS_TF32_TENSOR_OP_MATH
                                    : CUBLAS_DEFAULT_MATH);
      if (st != CUBLAS_STATUS_SUCCESS) {
        (void)cublasDestroy(h);
        h = NULL;
      }
    }
    g.h[i] = h;
  }
  pthread_mutex_unlock(&g.lock);
  if (st == CUBLAS_STATUS_SUCCESS) {
    what = "cublasSetStream";
    st = cublasSetStream(h, s);
  }
  if (st != CUBLAS_STATUS_SUCCESS) {
    blas_error(a, what, st);
    return NULL;
  }
  return h;
}

void torc_cuda__blas_shutdown(void) {
  pthread_mutex_lock(&g.lock);
  for (int i = 0; i < BLAS_MAX_DEVICES; i++)
    if (g.h[i] != NULL) {
      (void)cudaSetDevice(i);
      (void)cublasDestroy(g.h[i]);
      g.h[i] = NULL;
    }
  pthread_mutex_unlock(&g.lock);
}

static size_t elem_size(int dt) {
  return dt == TORC_F64 ? 8 : dt == TORC_F32 ? 4 : 2;
}

static cublasOperation_t op_of(const torc_cuda_gemm_operand *o) {
  return o->trans ? CUBLAS_OP_T : CUBLAS_OP_N;
}

static int gemm(const torc_kernel_args *a, cudaStream_t s,
                const torc_cuda_gemm_plan *pl, int64_t M, int64_t N,
                int64_t K, size_t es);

static int k_matmul(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel 'matmul': %d inputs and %d "
                                "outputs, expected 2 and 1",
                                a->n_in, a->n_out);
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  int nd = y->ndim;
  int ok = nd >= 2 && x->ndim == nd && w->ndim == nd;
  for (int d = 0; ok && d < nd - 2; d++)
    ok = x->shape[d] == y->shape[d] && w->shape[d] == y->shape[d];
  if (ok)
    ok = x->shape[nd - 2] == y->shape[nd - 2] &&
         w->shape[nd - 1] == y->shape[nd - 1] &&
         x->shape[nd - 1] == w->shape[nd - 2];
  if (!ok || x->dtype != y->dtype || w->dtype != y->dtype) {
    char c[600];
    call_str(a, c, sizeof c);
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel 'matmul' got %s (expected one "
                                "dtype and [B..., M, K] x [B..., K, N] -> "
                                "[B..., M, N])",
                                c);
  }
  int64_t M = y->shape[nd - 2], N = y->shape[nd - 1], K = x->shape[nd - 1];
  int64_t numel = M * N;
  for (int d = 0; d < nd - 2; d++)
    numel *= y->shape[d];
  if (numel == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  size_t es = elem_size(y->dtype);
  char *py = (char *)y->data + y->offset * (int64_t)es;
  if (K == 0) {
    /* An empty sum: zeros (out is contiguous by the op's contract). */
    cudaError_t e = cudaMemsetAsync(py, 0, (size_t)numel * es, s);
    if (e != cudaSuccess)
      return torc_cuda__set_error(TORC_ERR_DEVICE,
                                  "cuda:%d: 'matmul' with K = 0: "
                                  "cudaMemsetAsync failed: %s",
                                  a->device_index, cudaGetErrorString(e));
    return torc_cuda__after_launch(a->device_index, a->op);
  }
  torc_cuda_gemm_plan pl;
  if (!torc_cuda_gemm_plan_of(x, w, y, &pl))
    return TORC_KERNEL_DECLINED; /* neither rows nor columns contiguous */
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX || pl.w.ld > INT_MAX ||
      pl.x.ld > INT_MAX || pl.y.ld > INT_MAX || pl.count > INT_MAX)
    return TORC_KERNEL_DECLINED; /* past cuBLAS's int sizes */
  pthread_mutex_lock(&g.call);
  int st = gemm(a, s, &pl, M, N, K, es);
  pthread_mutex_unlock(&g.call);
  return st != TORC_OK ? st : torc_cuda__after_launch(a->device_index, a->op);
}

/* Queues the product's cuBLAS calls (g.call held). */
static int gemm(const torc_kernel_args *a, cudaStream_t s,
                const torc_cuda_gemm_plan *pl_, int64_t M, int64_t N,
                int64_t K, size_t es) {
  const torc_cuda_gemm_plan pl = *pl_;
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  cublasHandle_t h = handle(a, s);
  if (h == NULL)
    return TORC_ERR_DEVICE;

  cudaDataType dt = CUDA_R_32F;
  cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
  switch (y->dtype) {
  case TORC_F32:
    ct = torc_cuda__settings.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                  : CUBLAS_COMPUTE_32F;
    break;
  case TORC_F16: dt = CUDA_R_16F; break;
  case TORC_BF16: dt = CUDA_R_16BF; break;
  case TORC_F64:
    dt = CUDA_R_64F;
    ct = CUBLAS_COMPUTE_64F;
    break;
  default: return TORC_KERNEL_DECLINED; /* integers: the cpu fallback */
  }
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const void *alpha = y->dtype == TORC_F64 ? (const void *)&one_d
                                           : (const void *)&one_f;
  const void *beta = y->dtype == TORC_F64 ? (const void *)&zero_d
                                          : (const void *)&zero_f;
  for (int64_t c = 0; c < pl.n_calls; c++) {
    int64_t off[3];
    torc_cuda_gemm_call(&pl, c, off);
    cublasStatus_t st = cublasGemmStridedBatchedEx(
        h, op_of(&pl.w), op_of(&pl.x), (int)N, (int)M, (int)K, alpha,
        (const char *)w->data + (w->offset + off[1]) * (int64_t)es, dt,
        (int)pl.w.ld, pl.sb_w,
        (const char *)x->data + (x->offset + off[0]) * (int64_t)es, dt,
        (int)pl.x.ld, pl.sb_x, beta,
        (char *)y->data + (y->offset + off[2]) * (int64_t)es, dt,
        (int)pl.y.ld, pl.sb_y, (int)pl.count, ct, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
      return blas_error(a, "cublasGemmStridedBatchedEx", st);
  }
  return TORC_OK;
}

int torc_cuda__register_blas(const torc_host *host, torc_plugin *self) {
  static const int dtypes[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16};
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
    int st = torc_cuda__register(host, self, "matmul", dtypes[i],
                                 k_matmul, 0, 0);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}
