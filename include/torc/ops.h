/* torc/ops.h — the ops: elementwise math, broadcasting binary ops with
 * PyTorch's type promotion, reductions and matmul. Every op runs on the
 * device of its inputs, through the kernel a plugin registered for (device
 * type, op, dtype); see `torc plugins` for which provider serves what.
 *
 * Ownership and errors as in tensor.h: a new reference is returned (or
 * owned by the open scope), NULL on failure with torc_last_error() set, and
 * a NULL input gives NULL while keeping the first error. Inputs on two
 * different devices are an error naming both (torc never copies silently).
 *
 * The op table, torc/ops.def, is the reference for every op: one row per
 * op with its dtype rule, its kernel's inputs, outputs and params, its
 * backward and a line saying what it computes; docs/plugins.md lists the
 * rows. The plain unary and binary ops are declared from it (below), so
 * their row is their documentation.
 *
 * Kernel contracts (what a backend's kernel for each op receives; the core
 * checks shapes, broadcasts, promotes and allocates before calling):
 *  - unary ops: in[0] and out[0] have the same shape; out is contiguous;
 *    in may be strided. Kernel dtype = in's dtype; out's dtype is the same,
 *    except for the rows with rule FLOAT on integers, which the core first
 *    casts to f32, and LOGICAL, which write bool. FLOATONLY ops take
 *    floating dtypes only.
 *  - binary ops: in[0], in[1] already broadcast to out's shape (stride 0 on
 *    broadcast dims) and cast to one dtype, the kernel dtype; comparisons
 *    (rule CMP) write bool, the others the kernel dtype. For in-place ops
 *    out[0] is in[0] itself.
 *  - reductions: see torc_reduce_params in plugin.h; out has dtype i64 for
 *    sum/prod of integers and bools, else the input dtype.
 *  - every other op: its row in torc/ops.def (params, inputs -> outputs),
 *    with the params struct's comment in torc/plugin.h.
 *  - linear has no kernel of its own: the core composes matmul and add.
 */
#ifndef TORC_OPS_H
#define TORC_OPS_H

#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* ---- the plain elementwise ops, declared from the op table ----
 * One function per row of torc/ops.def whose fn column is UNARY or
 * UNARY_API, torc_tensor *torc_NAME(const torc_tensor *x) (same shape as
 * x), or BINARY or BINARY_API, torc_tensor *torc_NAME(const torc_tensor
 * *a, const torc_tensor *b) (broadcasting, with PyTorch's type
 * promotion), named for the row: torc_neg, torc_exp, torc_add, torc_eq and
 * the others. The row's last column says what it computes and its rule
 * which dtypes it takes. */
#define TORC_OP_DECL_UNARY(name)                                               \
  TORC_API torc_tensor *torc_##name(const torc_tensor *x);
#define TORC_OP_DECL_BINARY(name)                                              \
  TORC_API torc_tensor *torc_##name(const torc_tensor *a, const torc_tensor *b);
#define TORC_OP_DECL_UNARY_API(name) TORC_OP_DECL_UNARY(name)
#define TORC_OP_DECL_BINARY_API(name) TORC_OP_DECL_BINARY(name)
#define TORC_OP_DECL_OWN(name)
#define TORC_OP_DECL_NONE(name)
#define TORC_OP(name, kind, rule, fn, ...) TORC_OP_DECL_##fn(name)
#include "torc/ops.def"
#undef TORC_OP
#undef TORC_OP_DECL_UNARY
#undef TORC_OP_DECL_BINARY
#undef TORC_OP_DECL_UNARY_API
#undef TORC_OP_DECL_BINARY_API
#undef TORC_OP_DECL_OWN
#undef TORC_OP_DECL_NONE

/* ---- activations with parameters (floating dtypes only, as in
 * PyTorch) ---- */

/* x where x > 0, else negative_slope * x (PyTorch's default slope 0.01). */
TORC_API torc_tensor *torc_leaky_relu(const torc_tensor *x,
                                      double negative_slope);
/* x where x > 0, else alpha * (e^x - 1) (PyTorch's default alpha 1). */
TORC_API torc_tensor *torc_elu(const torc_tensor *x, double alpha);
/* x where x > 0, else alpha (e^(x / alpha) - 1) (nn.CELU; PyTorch's default
 * alpha 1), as x where x > 0 else elu(x (1 / alpha), alpha): its gradient
 * is theirs. alpha must not be 0. */
TORC_API torc_tensor *torc_celu(const torc_tensor *x, double alpha);
/* min_val where x < min_val, max_val where x > max_val, else x
 * (nn.Hardtanh; PyTorch's defaults -1 and 1); the gradient passes only
 * where min_val < x < max_val (0 at both bounds, as PyTorch's). min_val
 * must be below max_val. */
TORC_API torc_tensor *torc_hardtanh(const torc_tensor *x, double min_val,
                                    double max_val);
/* torc_hardtanh(x, 0, 6) (nn.ReLU6). */
TORC_API torc_tensor *torc_relu6(const torc_tensor *x);
/* x * Phi(x). approximate 0: the exact erf form, x/2 (1 + erf(x/sqrt 2));
 * 1: the tanh form, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) —
 * PyTorch's approximate='none' / 'tanh'. Other values are an error. */
TORC_API torc_tensor *torc_gelu(const torc_tensor *x, int approximate);
/* log(1 + e^(beta x)) / beta, and x itself where beta x > threshold
 * (PyTorch's defaults: beta 1, threshold 20). beta must not be 0. */
TORC_API torc_tensor *torc_softplus(const torc_tensor *x, double beta,
                                    double threshold);

/* ---- clamp ---- */

/* min(max(x, min), max), each bound applied only when its has_ flag is
 * set (at least one must be); a NaN bound or element gives NaN. When
 * min > max every element becomes max (as PyTorch). An integer x with a
 * non-integral bound gives f32 (PyTorch's scalar promotion); bool is not
 * allowed. The gradient passes where min <= x <= max. */
TORC_API torc_tensor *torc_clamp(const torc_tensor *x, int has_min, double min,
                                 int has_max, double max);
/* In place: clamp x (the result must keep x's dtype). */
TORC_API torc_status torc_clamp_(torc_tensor *x, int has_min, double min,
                                 int has_max, double max);
/* In place: max(x, 0). */
TORC_API torc_status torc_relu_(torc_tensor *x);

/* ---- where ---- */

/* cond ? a : b elementwise. cond must be bool; the three broadcast to one
 * shape; a and b promote as in torc_add. Gradients flow to a where cond
 * and to b elsewhere. */
TORC_API torc_tensor *torc_where(const torc_tensor *cond, const torc_tensor *a,
                                 const torc_tensor *b);

/* ---- binary in place ---- */

/* In place: a += b (b broadcast to a's shape; the result dtype must be
 * a's dtype, e.g. an int tensor cannot take a float in place). Bumps a's
 * version. Returns a status, as all in-place ops. */
TORC_API torc_status torc_add_(torc_tensor *a, const torc_tensor *b);
/* In place: a -= b. */
TORC_API torc_status torc_sub_(torc_tensor *a, const torc_tensor *b);
/* In place: a *= b. */
TORC_API torc_status torc_mul_(torc_tensor *a, const torc_tensor *b);
/* In place: a /= b (a must be floating). */
TORC_API torc_status torc_div_(torc_tensor *a, const torc_tensor *b);

/* ---- with a scalar (PyTorch's Python-number rules) ----
 * The scalar c counts as a Python int when it is integral (and within
 * int64), else as a Python float. It never changes the dtype within a
 * category: an i32 tensor + 2 stays i32, an f16 tensor * 0.5 stays f16;
 * an integer or bool tensor with a non-integral c gives f32 (the default
 * float), and a bool tensor with an integral c gives i64. */

/* x + c. */
TORC_API torc_tensor *torc_add_scalar(const torc_tensor *x, double c);
/* x - c (bool x is an error, as torc_sub). */
TORC_API torc_tensor *torc_sub_scalar(const torc_tensor *x, double c);
/* x * c. */
TORC_API torc_tensor *torc_mul_scalar(const torc_tensor *x, double c);
/* x / c, true division: integer x gives f32. */
TORC_API torc_tensor *torc_div_scalar(const torc_tensor *x, double c);
/* x ^ c. */
TORC_API torc_tensor *torc_pow_scalar(const torc_tensor *x, double c);
/* In place: x += c (an integer x cannot take a non-integral c). */
TORC_API torc_status torc_add_scalar_(torc_tensor *x, double c);
/* In place: x *= c. */
TORC_API torc_status torc_mul_scalar_(torc_tensor *x, double c);

/* ---- reductions ---- */

/* Sum over `dims` (n_dims of them; n_dims = 0 means every dim), keeping
 * reduced dims with size 1 when keepdim. Integers and bool sum to i64. */
TORC_API torc_tensor *torc_sum(const torc_tensor *x, const int *dims,
                               int n_dims, int keepdim);
/* Mean over dims (floating dtypes only, as torch.mean). */
TORC_API torc_tensor *torc_mean(const torc_tensor *x, const int *dims,
                                int n_dims, int keepdim);
/* Product over dims. */
TORC_API torc_tensor *torc_prod(const torc_tensor *x, const int *dims,
                                int n_dims, int keepdim);
/* Maximum over dims (values only; NaN propagates). Empty dims are an
 * error, as in PyTorch. */
TORC_API torc_tensor *torc_amax(const torc_tensor *x, const int *dims,
                                int n_dims, int keepdim);
/* Minimum over dims (values only). */
TORC_API torc_tensor *torc_amin(const torc_tensor *x, const int *dims,
                                int n_dims, int keepdim);

/* Variance over dims: sum((x - mean)^2) / (N - correction), N the number
 * of reduced elements (PyTorch's default correction is 1, Bessel's); when
 * N - correction <= 0 the result is inf or NaN, as PyTorch. Floating
 * dtypes only. */
TORC_API torc_tensor *torc_var(const torc_tensor *x, const int *dims,
                               int n_dims, double correction, int keepdim);
/* Standard deviation: sqrt of torc_var. */
TORC_API torc_tensor *torc_std(const torc_tensor *x, const int *dims,
                               int n_dims, double correction, int keepdim);
/* log(sum(e^x)) over dims, computed stably (the maximum subtracted first);
 * over no elements -inf. Floating dtypes only. */
TORC_API torc_tensor *torc_logsumexp(const torc_tensor *x, const int *dims,
                                     int n_dims, int keepdim);
/* Vector norm over dims (n_dims 0: all): p = 1 (sum |x|), 2 (Euclidean) or
 * INFINITY (max |x|; empty dims are an error). Floating dtypes only. The
 * 2-norm's gradient at 0 is 0, as PyTorch's. */
TORC_API torc_tensor *torc_norm(const torc_tensor *x, double p,
                                const int *dims, int n_dims, int keepdim);

/* ---- along one dim ---- */

/* Maximum along `dim`: *values (x's dtype) and *indices (i64) receive new
 * references (owned by the open scope, if any) — the first index among
 * ties, a NaN beating numbers. keepdim keeps dim with size 1. Only values
 * are differentiable: the gradient goes to the one selected element. An
 * empty dim is an error. Either output pointer may be NULL when not
 * wanted. */
TORC_API torc_status torc_max_dim(const torc_tensor *x, int dim, int keepdim,
                                  torc_tensor **values, torc_tensor **indices);
/* Minimum along `dim`, as torc_max_dim. */
TORC_API torc_status torc_min_dim(const torc_tensor *x, int dim, int keepdim,
                                  torc_tensor **values, torc_tensor **indices);
/* Index (i64) of the maximum along *dim; dim NULL: of the flattened x (a
 * 0-dim result, or all-ones dims with keepdim). First index on ties. */
TORC_API torc_tensor *torc_argmax(const torc_tensor *x, const int *dim,
                                  int keepdim);
/* Index of the minimum, as torc_argmax. */
TORC_API torc_tensor *torc_argmin(const torc_tensor *x, const int *dim,
                                  int keepdim);
/* Cumulative sum along dim (integers and bool give i64, as PyTorch). */
TORC_API torc_tensor *torc_cumsum(const torc_tensor *x, int dim);
/* softmax along dim: e^(x - max) / sum(e^(x - max)). Floating only. */
TORC_API torc_tensor *torc_softmax(const torc_tensor *x, int dim);
/* log(softmax(x)) along dim, computed stably as x - max - log(sum(e^(x -
 * max))). Floating only. */
TORC_API torc_tensor *torc_log_softmax(const torc_tensor *x, int dim);

/* ---- linear algebra ---- */

/* Matrix product with torch.matmul's rules: 1-D x 1-D is a dot product;
 * 2-D x 2-D a matrix product; a 1-D operand gets a dim prepended (left) or
 * appended (right) and removed afterwards; batch dims broadcast. */
TORC_API torc_tensor *torc_matmul(const torc_tensor *a, const torc_tensor *b);

/* x @ weight^T + bias, PyTorch's layout: x [..., in], weight [out, in],
 * bias [out] or NULL; the result is [..., out]. grad_fn "LinearBackward". */
TORC_API torc_tensor *torc_linear(const torc_tensor *x, const torc_tensor *weight,
                                  const torc_tensor *bias);

TORC_END_DECLS

#endif /* TORC_OPS_H */
