/* plugins/cuda/tiled_mm_body.h — the arithmetic of the cuda plugin's
 * tiled "matmul" (tiled_mm.cu: the integer dtypes, which cuBLAS lacks, and
 * the floating ones where cuBLAS declines a layout), for device code and
 * host C alike (tests/test_cuda_tiled_mm_bodies.c): where batch b of each
 * operand starts, how one tile of the product is walked, and ref's sums —
 * wrapping int64 for integers (associative modulo 2^64, so any order gives
 * ref's bits), and for floats a double accumulator fed k = 0, 1, ... in
 * ref's order with separately rounded products and sums, which is ref's
 * sum bit for bit.
 */
#ifndef TORC_CUDA_TILED_MM_BODY_H
#define TORC_CUDA_TILED_MM_BODY_H

#include <stdint.h>

#include "torc/plugin.h"

#ifdef __CUDACC__
#define TORC_CUDA_IMHD __host__ __device__ static inline
#else
#define TORC_CUDA_IMHD static inline
#endif

/* Device code rounds each double product and sum on its own (nvcc would
 * otherwise fuse them into an FMA, which ref's host code does not). */
#ifdef __CUDA_ARCH__
#define TORC_CUDA_MM_DMUL(x, y) __dmul_rn((x), (y))
#define TORC_CUDA_MM_DADD(x, y) __dadd_rn((x), (y))
#else
#define TORC_CUDA_MM_DMUL(x, y) ((x) * (y))
#define TORC_CUDA_MM_DADD(x, y) ((x) + (y))
#endif

/* The side of the square tile one thread block computes. */
#define TORC_CUDA_IMM_TILE 16

/* The batch walk of a product [B..., M, K] x [B..., K, N] -> [B..., M, N]:
 * the batch dims' sizes (nb of them) and each operand's strides over them
 * (x, w, y), in elements. */
typedef struct torc_cuda_imm_batch {
  int32_t nb;
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  int64_t st[3][TORC_KERNEL_MAX_DIMS];
} torc_cuda_imm_batch;

/* The offsets (in elements, before each operand's own offset) where batch
 * b (row-major over the batch dims) of x, w and y starts. */
TORC_CUDA_IMHD void torc_cuda_imm_batch_offsets(const torc_cuda_imm_batch *bw,
                                                int64_t b, int64_t off[3]) {
  off[0] = off[1] = off[2] = 0;
  for (int d = bw->nb - 1; d >= 0; d--) {
    int64_t i = b % bw->shape[d];
    b /= bw->shape[d];
    for (int k = 0; k < 3; k++)
      off[k] += i * bw->st[k][d];
  }
}

/* acc + x * w in int64 arithmetic that wraps (as ref's ref_iadd and
 * ref_imul), without C's signed overflow. */
TORC_CUDA_IMHD int64_t torc_cuda_imm_fma(int64_t acc, int64_t x, int64_t w) {
  return (int64_t)((uint64_t)acc + (uint64_t)x * (uint64_t)w);
}

/* acc + x * w for floating operands, in double, each operation rounded on
 * its own as ref's. */
TORC_CUDA_IMHD double torc_cuda_mm_dfma(double acc, double x, double w) {
  return TORC_CUDA_MM_DADD(acc, TORC_CUDA_MM_DMUL(x, w));
}

/* The int64 sum stored into the output: i32 and u8 keep its low bits, as
 * ref's store. */
TORC_CUDA_IMHD int32_t torc_cuda_imm_to_i32(int64_t v) {
  return (int32_t)(uint32_t)(uint64_t)v;
}
TORC_CUDA_IMHD uint8_t torc_cuda_imm_to_u8(int64_t v) {
  return (uint8_t)(uint64_t)v;
}

/* The number of tiles along a dim of n elements. */
TORC_CUDA_IMHD int64_t torc_cuda_imm_tiles(int64_t n) {
  return (n + TORC_CUDA_IMM_TILE - 1) / TORC_CUDA_IMM_TILE;
}

#endif /* TORC_CUDA_TILED_MM_BODY_H */
