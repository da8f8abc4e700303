/* plugins/ref/kernels_table.c — the one list of reference kernels: which
 * (op, dtype) each function serves. The ref plugin registers these rows
 * for device "cpu"; the sim plugin runs them on its own device.
 */
#include "ref_util.h"
#include "ref_nn.h" /* the neural-network and indexing kernels */
#include "ref_index.h"
#include "ref_fused.h"

int (*torc_ref_set_error)(int status, const char *fmt, ...) = NULL;

/* Rows for a set of dtypes: {op, dtype, fn, flags}. No kernel needs
 * contiguous inputs: all of them walk strides. */
#define ROW(op, dt, name) {op, dt, torc_ref_k_##name, 0},
#define FLOATS(op, name)                                                       \
  ROW(op, TORC_F32, name) ROW(op, TORC_F64, name) ROW(op, TORC_F16, name)      \
  ROW(op, TORC_BF16, name)
#define INTS(op, name)                                                         \
  ROW(op, TORC_I32, name) ROW(op, TORC_I64, name) ROW(op, TORC_U8, name)
#define NUMERIC(op, name) FLOATS(op, name) INTS(op, name) /* all but bool */
#define ALL(op, name) NUMERIC(op, name) ROW(op, TORC_BOOL, name)

const torc_ref_kernel torc_ref_kernels[] = {
    /* op            dtypes  kernel */
    ROW("copy", TORC_DTYPE_ANY, copy)
    ALL("fill_", fill)
    FLOATS("uniform_", uniform)
    FLOATS("normal_", normal)
    NUMERIC("randint_", randint)

    NUMERIC("neg", neg)
    NUMERIC("abs", abs)
    NUMERIC("sign", sign)
    NUMERIC("square", square)
    NUMERIC("relu", relu)
    FLOATS("exp", exp)
    FLOATS("log", log)
    FLOATS("sqrt", sqrt)
    FLOATS("sin", sin)
    FLOATS("cos", cos)
    FLOATS("tanh", tanh)
    FLOATS("sigmoid", sigmoid)
    FLOATS("reciprocal", reciprocal)

    ALL("add", add)
    NUMERIC("sub", sub)
    ALL("mul", mul)
    FLOATS("div", div) /* integers reach div as f32 (true division) */
    NUMERIC("pow", pow)
    ALL("maximum", maximum)
    ALL("minimum", minimum)
    ALL("eq", eq)
    ALL("ne", ne)
    ALL("lt", lt)
    ALL("le", le)
    ALL("gt", gt)
    ALL("ge", ge)

    ALL("sum", sum)
    ALL("prod", prod)
    FLOATS("mean", mean)
    ALL("amax", amax)
    ALL("amin", amin)

    NUMERIC("matmul", matmul)

    FLOATS("log1p", log1p)
    FLOATS("rsqrt", rsqrt)
    FLOATS("silu", silu)
    FLOATS("leaky_relu", leaky_relu)
    FLOATS("elu", elu)
    FLOATS("gelu", gelu)
    FLOATS("gelu_backward", gelu_backward)
    FLOATS("relu_backward", relu_backward)
    FLOATS("softplus", softplus)
    NUMERIC("clamp", clamp)
    ALL("logical_not", logical_not)
    ALL("logical_and", logical_and)
    ALL("logical_or", logical_or)
    ALL("where", where)
    FLOATS("var", var)
    FLOATS("std", std)
    FLOATS("logsumexp", logsumexp)
    FLOATS("norm", norm)
    ALL("cumsum", cumsum)
    ALL("max_dim", max_dim)
    ALL("min_dim", min_dim)
    FLOATS("softmax", softmax)
    FLOATS("log_softmax", log_softmax)

    /* Neural-network and indexing ops: their rows live with their
     * kernels. */
#include "kernels_nn.inc"
#include "kernels_index.inc"
#include "kernels_fused.inc"
};

const size_t torc_ref_n_kernels =
    sizeof torc_ref_kernels / sizeof torc_ref_kernels[0];
