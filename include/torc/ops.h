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
 * Kernel contracts (what a backend's kernel for each op receives; the core
 * checks shapes, broadcasts, promotes and allocates before calling):
 *  - unary ops: in[0] and out[0] have the same shape; out is contiguous;
 *    in may be strided. Kernel dtype = in's dtype; out's dtype is the same,
 *    except for the floating ops on integers (exp, log, sqrt, sin, cos,
 *    tanh, sigmoid, reciprocal), which the core first casts to f32.
 *  - binary ops: in[0], in[1] already broadcast to out's shape (stride 0 on
 *    broadcast dims) and cast to one dtype, the kernel dtype; comparisons
 *    write bool, the others the kernel dtype. For in-place ops out[0] is
 *    in[0] itself.
 *  - reductions: see torc_reduce_params in plugin.h; out has dtype i64 for
 *    sum/prod of integers and bools, else the input dtype.
 *  - matmul: in[0] is [B..., M, K], in[1] is [B..., K, N] with equal batch
 *    dims (stride 0 where broadcast), out is [B..., M, N], contiguous.
 *  - copy: in[0] and out[0] have the same shape and any two dtypes (the
 *    kernel casts as a C cast would, bool as != 0); both may be strided
 *    (torc_copy_ into a view writes through out's strides).
 *  - fill_, uniform_, normal_, randint_: no input; out[0] is contiguous.
 */
#ifndef TORC_OPS_H
#define TORC_OPS_H

#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* ---- elementwise unary (same shape as x) ---- */

/* -x. */
TORC_API torc_tensor *torc_neg(const torc_tensor *x);
/* |x|. */
TORC_API torc_tensor *torc_abs(const torc_tensor *x);
/* -1, 0 or 1 by the sign of x. */
TORC_API torc_tensor *torc_sign(const torc_tensor *x);
/* x * x. */
TORC_API torc_tensor *torc_square(const torc_tensor *x);
/* max(x, 0). */
TORC_API torc_tensor *torc_relu(const torc_tensor *x);
/* e^x (integers promote to f32, as all the floating ops below). */
TORC_API torc_tensor *torc_exp(const torc_tensor *x);
/* Natural logarithm. */
TORC_API torc_tensor *torc_log(const torc_tensor *x);
/* Square root. */
TORC_API torc_tensor *torc_sqrt(const torc_tensor *x);
/* Sine. */
TORC_API torc_tensor *torc_sin(const torc_tensor *x);
/* Cosine. */
TORC_API torc_tensor *torc_cos(const torc_tensor *x);
/* Hyperbolic tangent. */
TORC_API torc_tensor *torc_tanh(const torc_tensor *x);
/* 1 / (1 + e^-x), computed stably for large |x|. */
TORC_API torc_tensor *torc_sigmoid(const torc_tensor *x);
/* 1 / x. */
TORC_API torc_tensor *torc_reciprocal(const torc_tensor *x);

/* ---- binary, broadcasting, with PyTorch's type promotion ---- */

/* a + b. */
TORC_API torc_tensor *torc_add(const torc_tensor *a, const torc_tensor *b);
/* a - b (not defined for bool, as in PyTorch). */
TORC_API torc_tensor *torc_sub(const torc_tensor *a, const torc_tensor *b);
/* a * b. */
TORC_API torc_tensor *torc_mul(const torc_tensor *a, const torc_tensor *b);
/* a / b, true division: integer inputs give f32 (as torch.div). */
TORC_API torc_tensor *torc_div(const torc_tensor *a, const torc_tensor *b);
/* a ^ b. */
TORC_API torc_tensor *torc_pow(const torc_tensor *a, const torc_tensor *b);
/* Elementwise maximum (NaN propagates). */
TORC_API torc_tensor *torc_maximum(const torc_tensor *a, const torc_tensor *b);
/* Elementwise minimum (NaN propagates). */
TORC_API torc_tensor *torc_minimum(const torc_tensor *a, const torc_tensor *b);
/* a == b, as bool. */
TORC_API torc_tensor *torc_eq(const torc_tensor *a, const torc_tensor *b);
/* a != b, as bool. */
TORC_API torc_tensor *torc_ne(const torc_tensor *a, const torc_tensor *b);
/* a < b, as bool. */
TORC_API torc_tensor *torc_lt(const torc_tensor *a, const torc_tensor *b);
/* a <= b, as bool. */
TORC_API torc_tensor *torc_le(const torc_tensor *a, const torc_tensor *b);
/* a > b, as bool. */
TORC_API torc_tensor *torc_gt(const torc_tensor *a, const torc_tensor *b);
/* a >= b, as bool. */
TORC_API torc_tensor *torc_ge(const torc_tensor *a, const torc_tensor *b);

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

/* ---- linear algebra ---- */

/* Matrix product with torch.matmul's rules: 1-D x 1-D is a dot product;
 * 2-D x 2-D a matrix product; a 1-D operand gets a dim prepended (left) or
 * appended (right) and removed afterwards; batch dims broadcast. */
TORC_API torc_tensor *torc_matmul(const torc_tensor *a, const torc_tensor *b);

TORC_END_DECLS

#endif /* TORC_OPS_H */
