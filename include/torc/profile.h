/* torc/profile.h — the roofline side of the profiler: what one kernel call
 * costs (FLOPs, bytes), the machine's measured fp32 peak, and the profile
 * as FLOPs and GFLOP/s per op and per module against that peak (what
 * `torc bench --roofline` prints). The profiler itself
 * (torc_profile_enable, torc_profile_report) is in torc/runtime.h.
 */
#ifndef TORC_PROFILE_H
#define TORC_PROFILE_H

#include <stdint.h>

#include "torc/error.h"

TORC_BEGIN_DECLS

/* One kernel call's arguments (torc/plugin.h). */
struct torc_kernel_args;

/* The cost of one kernel call, counted from its op and operand shapes. */
typedef struct torc_kernel_cost {
  /* Floating-point operations, a multiply-add counting 2; -1 when the op
   * has no formula (copies, indexing, pooling, normalisation, optimizer
   * steps, ...). core/kcost.c lists the formulas. */
  int64_t flops;
  /* Bytes read and written: every input once, every output once, a
   * broadcast (stride 0) dimension once; -1 when unknown. */
  int64_t bytes;
  /* 1 for an op whose time is the memory it moves (every op but matmul,
   * linear_act, the convolutions and attention), else 0. */
  int memory_bound;
} torc_kernel_cost;

/* The cost of the kernel call `args` (its op named by args->op, its
 * operands' shapes and dtypes as a kernel sees them): e.g. "matmul" of
 * [M, K] and [K, N] is 2 * M * N * K FLOPs. An unknown op, or NULL: flops
 * and bytes -1. */
TORC_API torc_kernel_cost torc_kernel_cost_of(
    const struct torc_kernel_args *args);

/* The machine's fp32 FMA peak in GFLOP/s on `threads` threads (<= 0: the
 * torc_get_num_threads() count; at most 256): each thread runs independent
 * chains of fused multiply-adds held in registers (16 AVX-512 or 12 AVX2
 * accumulators, whichever is the widest the CPU and the OS enable), the
 * best of a few short runs, about a fifth of a second in all. Measured
 * once per thread count in a process, then remembered. *isa (may be NULL)
 * is set to "avx512", "avx2", or "none" where there is neither (or the CPU
 * is not x86), which returns 0. *used_threads (may be NULL) is set to the
 * thread count measured on. */
TORC_API double torc_cpu_peak_gflops(int threads, const char **isa,
                                     int *used_threads);

/* The profile since torc_profile_enable(1) as a roofline: kernels by op
 * (the `top` costliest by time; 0 = all) with their FLOPs per step,
 * achieved GFLOP/s and percentage of `peak_gflops`, and, for the
 * memory-bound ops, bytes moved per step and GB/s; the time outside
 * kernels; forward and backward time and FLOPs per module with its
 * GFLOP/s and percentage of the peak; a last line with the whole step's
 * FLOPs and GFLOP/s against the peak. Figures are per step when `steps`
 * > 0. An op without a FLOP formula shows "-"; peak_gflops <= 0 shows "-"
 * for every percentage. A malloc'ed string (free it), or NULL on OOM. */
TORC_API char *torc_profile_roofline(int top, int64_t steps,
                                     double peak_gflops);

TORC_END_DECLS

#endif /* TORC_PROFILE_H */
