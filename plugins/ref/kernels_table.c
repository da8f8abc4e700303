/* plugins/ref/kernels_table.c — the list of reference kernels, derived from
 * the op table (torc/ops.def's ref column): which (op, dtype) each
 * torc_ref_k_* function serves. The ref plugin registers these rows for
 * device "cpu"; the sim plugin runs them on its own device.
 */
#include "ref_util.h"
#include "ref_nn.h" /* the neural-network and indexing kernels */
#include "ref_index.h"
#include "ref_fused.h"

int (*torc_ref_set_error)(int status, const char *fmt, ...) = NULL;

/* Rows for a set of dtypes: {op, dtype, fn, flags}. The strided kernels
 * walk any strides; the C sets (the nn and fused kernels) ask for
 * contiguous inputs. */
#define ROW(op, dt, name) {op, dt, torc_ref_k_##name, 0},
#define CROW(op, dt, name) {op, dt, torc_ref_k_##name, TORC_KERNEL_CONTIGUOUS},
#define ANY(op, name) ROW(op, TORC_DTYPE_ANY, name)
#define FLOATS(op, name)                                                       \
  ROW(op, TORC_F32, name) ROW(op, TORC_F64, name) ROW(op, TORC_F16, name)      \
  ROW(op, TORC_BF16, name)
#define INTS(op, name)                                                         \
  ROW(op, TORC_I32, name) ROW(op, TORC_I64, name) ROW(op, TORC_U8, name)
#define NUMERIC(op, name) FLOATS(op, name) INTS(op, name) /* all but bool */
#define ALL(op, name) NUMERIC(op, name) ROW(op, TORC_BOOL, name)
#define CFLOATS(op, name)                                                      \
  CROW(op, TORC_F32, name) CROW(op, TORC_F64, name)                            \
  CROW(op, TORC_F16, name) CROW(op, TORC_BF16, name)
#define NOROWS(op, name)

/* The ref column: REF(dtypes, kernel) or NOREF. */
#define REF(set, kernel) set, kernel
#define NOREF NOROWS, none
#define ROWS(op, ...) ROWS_(op, __VA_ARGS__)
#define ROWS_(op, set, kernel) set(op, kernel)
#define TORC_OP(name, kind, rule, fn, io, params, ref, ...) ROWS(#name, ref)

const torc_ref_kernel torc_ref_kernels[] = {
#include "torc/ops.def"
};

const size_t torc_ref_n_kernels =
    sizeof torc_ref_kernels / sizeof torc_ref_kernels[0];
