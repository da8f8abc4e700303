/* plugins/cpu/cpu_internal.h — shared by the cpu plugin's files: the
 * kernels (GEMM-backed matmul in gemm.c, im2col convolution in conv.c,
 * elementwise ops in ew.c over the per-ISA loops of ew_kern.h), the thread
 * pool (pool.c) and the small helpers they share. Internal to the plugin.
 */
#ifndef TORC_CPU_INTERNAL_H
#define TORC_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "torc/plugin.h"

/* The host's error setter (set by init before any kernel runs). */
extern int (*torc_cpu__set_error)(int status, const char *fmt, ...);

/* Kernels are registered at ref's priority + this. */
enum { TORC_CPU_PRIORITY = 10 };

/* One row of a kernel table: the op, the kernel, its TORC_KERNEL_* flags. */
typedef struct torc_cpu_kernel {
  const char *op;
  torc_kernel_fn fn;
  uint32_t flags;
} torc_cpu_kernel;

/* Registers every row of `table` for device "cpu" once per dtype of
 * `dtypes`, at TORC_CPU_PRIORITY. */
int torc_cpu__register_table(const torc_host *host, torc_plugin *self,
                             const torc_cpu_kernel *table, size_t n,
                             const int32_t *dtypes, size_t n_dtypes);

/* Each file's kernels (ew.c: elementwise, reductions, softmax; fused.c:
 * fused kernels), registered by init. */
int torc_cpu__register_ew(const torc_host *host, torc_plugin *self);
int torc_cpu__register_fused(const torc_host *host, torc_plugin *self);
/* rnn_cell.c: the fused LSTM and GRU cells and their backwards. */
int torc_cpu__register_rnn_cell(const torc_host *host, torc_plugin *self);
/* attention.c: the fused attention forward. */
int torc_cpu__register_attention(const torc_host *host, torc_plugin *self);
/* nn.c: dropout, layer_norm (+ backward), gelu_backward, embedding (+
 * backward). */
int torc_cpu__register_nn(const torc_host *host, torc_plugin *self);
/* bnorm.c: batch_norm and its backward, f32 and bf16. */
int torc_cpu__register_bnorm(const torc_host *host, torc_plugin *self);
/* maxpool.c: bf16 max_pool2d (2x2, stride 2) and its backward. */
int torc_cpu__register_maxpool(const torc_host *host, torc_plugin *self);

/* The kernels (f32 and f64 only; every other dtype stays on ref). */
int torc_cpu__k_matmul(const torc_kernel_args *a);
/* "linear_act": matmul, then the bias and the activation (gemm.c). */
int torc_cpu__k_linear_act(const torc_kernel_args *a);
int torc_cpu__k_conv2d(const torc_kernel_args *a);
int torc_cpu__k_conv2d_backward_input(const torc_kernel_args *a);
int torc_cpu__k_conv2d_backward_weight(const torc_kernel_args *a);

/* C = alpha op(A) op(B) + beta C, row-major, by dtype (TORC_F32 or
 * TORC_F64): f32 through the selected provider (cblas_sgemm or
 * dnnl_sgemm), f64 through cblas_dgemm, big ones split across the pool;
 * ta/tb nonzero transpose. Pointers are to the first element. */
void torc_cpu__gemm(int32_t dtype, int ta, int tb, int64_t m, int64_t n,
                    int64_t k, double alpha, const void *a, int64_t lda,
                    const void *b, int64_t ldb, double beta, void *c,
                    int64_t ldc);

/* Sets the thread count (>= 1) that torc_cpu__gemm splits a big GEMM
 * across (the plugin's pool; OpenBLAS itself stays single-threaded): a
 * kernel calls it with its args' n_threads, so a later
 * torc_set_num_threads takes effect. */
void torc_cpu__threads(int n);

/* Element size of the kernels' float dtypes (f32, f64, bf16). */
static inline size_t cpu_esize(int32_t dtype) {
  return dtype == TORC_F64                         ? sizeof(double)
         : dtype == TORC_BF16 || dtype == TORC_F16 ? sizeof(uint16_t)
                                                   : sizeof(float);
}

/* f32 bits -> bf16 bits as torc_f32_to_bf16 (nearest, ties to even; a NaN
 * stays a quiet NaN with its sign and top payload bits), without branches
 * so that loops of it vectorise. */
static inline uint16_t cpu_bf16_round(uint32_t u) {
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t q = (u >> 16) | 0x40u;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

/* 1 if t is row-major contiguous from its offset (size-1 dims any
 * stride). */
static inline int cpu_rowmajor(const torc_ktensor *t) {
  int64_t want = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] != 1 && t->strides[d] != want)
      return 0;
    want *= t->shape[d];
  }
  return 1;
}

/* The number of elements of t. */
static inline int64_t cpu_numel(const torc_ktensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

/* Address of element `i` (in elements) of t. */
static inline void *cpu_ptr(const torc_ktensor *t, int64_t i) {
  return (char *)t->data + (size_t)(t->offset + i) * cpu_esize(t->dtype);
}


/* ---- the thread pool (pool.c) ---- */

/* A slice of a parallel loop: elements [begin, end) of the job. */
typedef void (*torc_cpu_task)(void *ctx, int64_t begin, int64_t end);

/* Runs fn over [0, n) split into at most n_threads contiguous slices of at
 * least `grain` elements, the caller taking the first; returns when every
 * slice is done. Serial when one slice suffices, from inside a worker, or
 * while another thread's job runs. */
void torc_cpu__parallel_for(int n_threads, int64_t n, int64_t grain,
                            torc_cpu_task fn, void *ctx);

/* As torc_cpu__parallel_for, but the threads claim chunks of `chunk`
 * elements one at a time until none is left (fn may run several times on
 * one thread, in any order): a preempted thread then holds up at most one
 * chunk. At most ceil(n / chunk) threads take part. */
void torc_cpu__parallel_dyn(int n_threads, int64_t n, int64_t chunk,
                            torc_cpu_task fn, void *ctx);

/* Joins the pool's workers (plugin fini). */
void torc_cpu__pool_fini(void);

/* Elementwise work below this many elements runs on the calling thread. */
enum { TORC_CPU_PAR_MIN = 32768 };

/* ---- per-ISA elementwise loops (ew_kern.h, compiled once per
 * ISA in ew_scalar.c, ew_avx2.c, ew_avx512.c) ---- */

/* Unary op codes (cpu_isa.unary). */
enum {
  CPU_U_NEG, CPU_U_ABS, CPU_U_SQUARE, CPU_U_RELU, CPU_U_EXP, CPU_U_LOG,
  CPU_U_SQRT, CPU_U_TANH, CPU_U_SIGMOID, CPU_U_RECIPROCAL, CPU_U_RSQRT,
  CPU_U_SILU, CPU_U_LEAKY_RELU, CPU_U_GELU, CPU_U_CLAMP, CPU_U_SIGN,
  CPU_U_COUNT
};

/* Binary op codes (cpu_isa.binary); CPU_B_EQ and after write bool. */
enum {
  CPU_B_ADD, CPU_B_SUB, CPU_B_MUL, CPU_B_DIV, CPU_B_MAX, CPU_B_MIN,
  CPU_B_RELU_BW, /* u = the gradient, v = relu's output */
  CPU_B_EQ, CPU_B_NE, CPU_B_LT, CPU_B_LE, CPU_B_GT, CPU_B_GE, CPU_B_COUNT
};

/* Reduction op codes (cpu_isa.reduce, colreduce). */
enum { CPU_R_SUM, CPU_R_MAX, CPU_R_MIN };

/* Recurrent cell op codes (cpu_isa.cell; contracts in torc/nn.h). */
enum {
  CPU_CELL_LSTM,    /* p: gates, c, h', c', act, tanh(c') */
  CPU_CELL_LSTM_BW, /* p: gh', gc', act, c, tanh(c'), ggates, gc */
  CPU_CELL_GRU,     /* p: xg, hg, h, h', act */
  CPU_CELL_GRU_BW   /* p: gh', act, hg, h, gxg, ghg, gh */
};

/* One ISA's contiguous loops, for dt TORC_F32 or TORC_F64; unary, binary,
 * reduce and colreduce also take TORC_BF16 (f32 arithmetic inside, the
 * results rounded to bf16 once; ew_kern.h). */
typedef struct cpu_isa {
  const char *name;
  /* y[i] = op(x[i]), i < n; p: the op's torc_scalar_params or NULL. */
  void (*unary)(int32_t dt, int op, const void *x, void *y, int64_t n,
                const void *p);
  /* y[i] = a[i*sa] op b[i*sb], sa and sb 0 (broadcast) or 1, not both 0;
   * comparisons write uint8 0/1. */
  void (*binary)(int32_t dt, int op, const void *a, int sa, const void *b,
                 int sb, void *y, int64_t n);
  /* acc = acc op x[0..n) (sum in double; max/min propagate NaN). */
  void (*reduce)(int32_t dt, int op, const void *x, int64_t n, double *acc);
  /* acc[j] = acc[j] op x[j], j < n (one row into column accumulators). */
  void (*colreduce)(int32_t dt, int op, const void *x, int64_t n,
                    double *acc);
  /* Softmax (or log-softmax when log_form) of one contiguous row. */
  void (*softmax)(int32_t dt, int log_form, const void *x, void *y,
                  int64_t n);
  /* Rows [r0, r1) of recurrent cell op `op` (CPU_CELL_*) with H columns:
   * p[] the kernel's operands, inputs then outputs, each row-major [N, H]
   * or [N, kH] from its first element. */
  void (*cell)(int32_t dt, int op, void *const *p, int64_t r0, int64_t r1,
               int64_t H);
  /* keep[i] = 1 when torc_philox_uniform(seed, off + i) >= p, i < n, with
   * thresh = torc_cpu__keep_threshold(p) (nn_kern.h). */
  void (*philox_keep)(uint64_t seed, uint64_t off, uint64_t thresh,
                      uint8_t *keep, int64_t n);
  /* dropout of bf16: y[i] = x[i] keep[i] scale and m[i] = keep[i] scale,
   * i < n, rounded as ref rounds them (nn_kern.h). */
  void (*drop_bf16)(const uint8_t *keep, const uint16_t *x, double scale,
                    uint16_t *y, uint16_t *m, int64_t n);
  /* y[i] = g[i] gelu'(x[i]), the tanh approximation's when tanh_form. */
  void (*gelu_bw)(int32_t dt, int tanh_form, const void *g, const void *x,
                  void *y, int64_t n);
  /* y[i] = e^(x[i] - m) (0 where x[i] is -inf), i < n; returns their
   * sum (attention's weights). */
  double (*exp_sum)(int32_t dt, const void *x, void *y, int64_t n, double m);
  /* One layer_norm row of K: y, and its mean and rstd. */
  void (*ln_row)(int32_t dt, const void *x, const void *w, const void *b,
                 void *y, int64_t K, double eps, double *mean, double *rstd);
  /* Its backward: gx, and gy xh and gy added into aw[K], ab[K]. */
  void (*ln_row_bw)(int32_t dt, const void *gy, const void *x, const void *w,
                    double mean, double rstd, void *gx, int64_t K, double *aw,
                    double *ab);
  /* batch_norm over one contiguous run of a channel, x f32 or bf16
   * (bn_kern.h): *s += the sum of x (pass 1) or of (x - mean)^2 (pass 2);
   * y = (x - mean) sc + sh; and the backward's sums and gx. */
  void (*bn_stat)(int32_t dt, const void *x, int64_t n, int pass,
                  double mean, double *s);
  void (*bn_apply)(int32_t dt, const void *x, void *y, int64_t n,
                   float mean, float sc, float sh);
  void (*bn_bw_sums)(int32_t dt, const void *g, const void *x, int64_t n,
                     double mean, double *sg, double *sgx);
  void (*bn_bw_apply)(int32_t dt, const void *g, const void *x, void *gx,
                      int64_t n, float mean, float k1, float k2, float k3);
  /* One output row of n of the bf16 2x2, stride-2 max pool (mp_kern.h):
   * rows r0, r1 of width W; y and the i64 indices from corner. */
  void (*mp2_row_bf16)(const uint16_t *r0, const uint16_t *r1, int64_t W,
                       int64_t n, int64_t corner, uint16_t *y, int64_t *ix);
} cpu_isa;

/* The integer threshold of the Philox keep test u >= p: u is bits * 2^-53
 * (53 bits, exact in double), so u >= p exactly when bits >= ceil(p 2^53);
 * p <= 0 keeps everything, p >= 1 nothing. */
static inline uint64_t torc_cpu__keep_threshold(double p) {
  if (!(p > 0))
    return 0;
  if (p >= 1)
    return 1ull << 53;
  return (uint64_t)__builtin_ceil(p * 9007199254740992.0);
}

/* The three builds; one built without its ISA's flags (a non-x86 host)
 * has name NULL and is never selected. */
extern const cpu_isa torc_cpu__isa_scalar;
extern const cpu_isa torc_cpu__isa_avx2;
extern const cpu_isa torc_cpu__isa_avx512;

/* The ISA chosen at init (cpuid.c): the best the CPU and OS support,
 * lowered by TORC_CPU_ISA=scalar|avx2|avx512. */
extern const cpu_isa *torc_cpu__isa;
void torc_cpu__isa_select(void);

/* The best the CPU and OS support, whatever TORC_CPU_ISA says: 0 scalar,
 * 1 AVX2 + FMA, 2 AVX-512 (F, DQ, BW, VL). */
int torc_cpu__machine_isa(void);

/* ---- GEMM provider (gemm.c) ---- */

/* Chooses the f32 GEMM provider: "auto", "openblas" or "onednn" (the
 * [plugin.cpu] gemm key). Returns TORC_OK or an error for an unknown or
 * unavailable name. */
int torc_cpu__gemm_select(const char *name);

/* The f32 provider in use: "openblas" or "onednn". */
const char *torc_cpu__gemm_name(void);

#endif /* TORC_CPU_INTERNAL_H */
