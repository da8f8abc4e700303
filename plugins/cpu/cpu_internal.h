/* plugins/cpu/cpu_internal.h — shared by the cpu plugin's files: the
 * kernels (GEMM-backed matmul in gemm.c, im2col convolution in conv.c) and
 * the small helpers they share. Internal to the plugin.
 */
#ifndef TORC_CPU_INTERNAL_H
#define TORC_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "torc/plugin.h"

/* The host's error setter (set by init before any kernel runs). */
extern int (*torc_cpu__set_error)(int status, const char *fmt, ...);

/* The kernels (f32 and f64 only; every other dtype stays on ref). */
int torc_cpu__k_matmul(const torc_kernel_args *a);
int torc_cpu__k_conv2d(const torc_kernel_args *a);
int torc_cpu__k_conv2d_backward_input(const torc_kernel_args *a);
int torc_cpu__k_conv2d_backward_weight(const torc_kernel_args *a);

/* C = alpha op(A) op(B) + beta C, row-major, through cblas_sgemm/dgemm by
 * dtype (TORC_F32 or TORC_F64); ta/tb nonzero transpose. Pointers are to
 * the first element. */
void torc_cpu__gemm(int32_t dtype, int ta, int tb, int64_t m, int64_t n,
                    int64_t k, double alpha, const void *a, int64_t lda,
                    const void *b, int64_t ldb, double beta, void *c,
                    int64_t ldc);

/* Sets OpenBLAS's thread count to n (>= 1) when it differs from the last
 * one set: a kernel calls it with its args' n_threads, so a later
 * torc_set_num_threads takes effect. */
void torc_cpu__threads(int n);

/* Element size of f32/f64. */
static inline size_t cpu_esize(int32_t dtype) {
  return dtype == TORC_F64 ? sizeof(double) : sizeof(float);
}

/* Address of element `i` (in elements) of t. */
static inline void *cpu_ptr(const torc_ktensor *t, int64_t i) {
  return (char *)t->data + (size_t)(t->offset + i) * cpu_esize(t->dtype);
}

#endif /* TORC_CPU_INTERNAL_H */
