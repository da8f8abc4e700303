/* torc/nn.h — the neural-network ops (torch.nn.functional's core):
 * convolution, pooling, normalisation, dropout, embedding. Ownership and
 * errors as in ops.h: a new reference is returned (or owned by the open
 * scope), NULL on failure with torc_last_error() set, a NULL input gives
 * NULL keeping the first error. Every op runs on its inputs' device and is
 * differentiable through autograd (indices and running statistics aside).
 *
 * Inputs are floating tensors; weights, biases and running statistics must
 * have the input's dtype and device. Images are [N, C, H, W].
 *
 * Kernel contracts (beyond the params structs in plugin.h): the nn kernels
 * may ask for contiguous inputs; outputs are contiguous. Backward passes
 * dispatch their own kernels ("conv2d_backward_input",
 * "conv2d_backward_weight", "max_pool2d_backward", "avg_pool2d_backward",
 * "adaptive_avg_pool2d_backward", "batch_norm_backward",
 * "layer_norm_backward", "group_norm_backward", "embedding_backward"), so a
 * fast backend replaces them as it replaces the forward ones.
 *  - "embedding": in indices (i64), weight [num, D]; out [indices..., D].
 *    "embedding_backward": in gy, indices; out gw [num, D].
 * (Gradients of these ops are first-order: their backward is not itself
 * differentiable.)
 */
#ifndef TORC_NN_H
#define TORC_NN_H

#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* ---- convolution ---- */

/* Geometry of a 2-D convolution; each pair is {height, width}. A zeroed
 * struct (or NULL) means PyTorch's defaults: stride 1, padding 0,
 * dilation 1, output_padding 0, groups 1 (a 0 field takes its default;
 * negative values are errors). */
typedef struct torc_conv2d_params {
  int64_t stride[2];
  int64_t padding[2];
  int64_t dilation[2];
  int64_t output_padding[2]; /* conv_transpose2d only */
  int64_t groups;
} torc_conv2d_params;

/* 2-D convolution (cross-correlation, as torch.nn.functional.conv2d):
 * x [N, C, H, W], weight [O, C/groups, kH, kW], bias [O] or NULL; returns
 * [N, O, OH, OW] with OH = (H + 2 pad - dil (kH - 1) - 1) / stride + 1. */
TORC_API torc_tensor *torc_conv2d(const torc_tensor *x,
                                  const torc_tensor *weight,
                                  const torc_tensor *bias,
                                  const torc_conv2d_params *p);

/* Transposed convolution (the gradient of conv2d with respect to its
 * input, as torch.nn.functional.conv_transpose2d): x [N, C, H, W], weight
 * [C, O/groups, kH, kW], bias [O] or NULL; returns [N, O, OH, OW] with
 * OH = (H - 1) stride - 2 pad + dil (kH - 1) + output_padding + 1.
 * output_padding must be smaller than stride or dilation. */
TORC_API torc_tensor *torc_conv_transpose2d(const torc_tensor *x,
                                            const torc_tensor *weight,
                                            const torc_tensor *bias,
                                            const torc_conv2d_params *p);

/* ---- pooling ---- */

/* Geometry of 2-D pooling; each pair is {height, width}. kernel is
 * required; zero fields take PyTorch's defaults: stride = kernel, padding
 * 0, dilation 1 (max_pool2d only). Padding may be at most half the
 * (dilated) kernel. ceil_mode: the output size rounds up (a window must
 * still start inside the input or its left padding). exclude_pad:
 * avg_pool2d divides by the number of non-padding elements
 * (count_include_pad=False in PyTorch; the default counts the padding).
 * divisor_override: avg_pool2d's divisor, 0 = none. */
typedef struct torc_pool2d_params {
  int64_t kernel[2];
  int64_t stride[2];
  int64_t padding[2];
  int64_t dilation[2];
  int ceil_mode;
  int exclude_pad;
  int64_t divisor_override;
} torc_pool2d_params;

/* Max pooling of x [N, C, H, W]; NaN propagates. */
TORC_API torc_tensor *torc_max_pool2d(const torc_tensor *x,
                                      const torc_pool2d_params *p);

/* As torc_max_pool2d, also returning in *indices (a new reference, or
 * owned by the open scope) the i64 position of each maximum in its
 * H * W plane, as return_indices=True. */
TORC_API torc_tensor *torc_max_pool2d_with_indices(const torc_tensor *x,
                                                   const torc_pool2d_params *p,
                                                   torc_tensor **indices);

/* Average pooling of x [N, C, H, W]. */
TORC_API torc_tensor *torc_avg_pool2d(const torc_tensor *x,
                                      const torc_pool2d_params *p);

/* ---- 1-D and 3-D convolution and pooling ----
 * Composed of the 2-D ops, so they run wherever those do and are
 * differentiable: a 1-D op is the 2-D one on a height of 1; a 3-D one runs
 * the 2-D op over depth slices and sums (or maxes) the results. */

/* Geometry of a 1-D convolution; zero fields take PyTorch's defaults
 * (stride 1, padding 0, dilation 1, groups 1). */
typedef struct torc_conv1d_params {
  int64_t stride, padding, dilation, groups;
} torc_conv1d_params;

/* 1-D convolution (torch.nn.functional.conv1d): x [N, C, L], weight
 * [O, C/groups, k], bias [O] or NULL; returns [N, O, OL] with
 * OL = (L + 2 pad - dil (k - 1) - 1) / stride + 1. p may be NULL. */
TORC_API torc_tensor *torc_conv1d(const torc_tensor *x,
                                  const torc_tensor *weight,
                                  const torc_tensor *bias,
                                  const torc_conv1d_params *p);

/* Geometry of 1-D pooling: kernel required; stride 0 = kernel; padding at
 * most half the (dilated) kernel; dilation (max only) 0 = 1; ceil_mode and
 * exclude_pad as in torc_pool2d_params. */
typedef struct torc_pool1d_params {
  int64_t kernel, stride, padding, dilation;
  int ceil_mode;
  int exclude_pad;
} torc_pool1d_params;

/* Max pooling of x [N, C, L] (torch.nn.functional.max_pool1d). */
TORC_API torc_tensor *torc_max_pool1d(const torc_tensor *x,
                                      const torc_pool1d_params *p);

/* Average pooling of x [N, C, L] (torch.nn.functional.avg_pool1d). */
TORC_API torc_tensor *torc_avg_pool1d(const torc_tensor *x,
                                      const torc_pool1d_params *p);

/* Geometry of a 3-D convolution, each triple {depth, height, width}; zero
 * fields take PyTorch's defaults (stride 1, padding 0, dilation 1, groups
 * 1). */
typedef struct torc_conv3d_params {
  int64_t stride[3];
  int64_t padding[3];
  int64_t dilation[3];
  int64_t groups;
} torc_conv3d_params;

/* 3-D convolution (torch.nn.functional.conv3d): x [N, C, D, H, W],
 * weight [O, C/groups, kD, kH, kW], bias [O] or NULL; returns
 * [N, O, OD, OH, OW], each as conv2d's. p may be NULL. */
TORC_API torc_tensor *torc_conv3d(const torc_tensor *x,
                                  const torc_tensor *weight,
                                  const torc_tensor *bias,
                                  const torc_conv3d_params *p);

/* Geometry of 3-D pooling, each triple {depth, height, width}: kernel
 * required; stride 0 = kernel; padding at most half the (dilated) kernel;
 * dilation (max only) 0 = 1; exclude_pad as count_include_pad=False.
 * ceil_mode is not supported (an error). */
typedef struct torc_pool3d_params {
  int64_t kernel[3];
  int64_t stride[3];
  int64_t padding[3];
  int64_t dilation[3];
  int ceil_mode;
  int exclude_pad;
} torc_pool3d_params;

/* Max pooling of a floating x [N, C, D, H, W] (max_pool3d). */
TORC_API torc_tensor *torc_max_pool3d(const torc_tensor *x,
                                      const torc_pool3d_params *p);

/* Average pooling of a floating x [N, C, D, H, W] (avg_pool3d). */
TORC_API torc_tensor *torc_avg_pool3d(const torc_tensor *x,
                                      const torc_pool3d_params *p);

/* Adaptive average pooling of x [N, C, H, W] to [N, C, out_h, out_w]:
 * output row i averages input rows floor(i H / out_h) to
 * ceil((i + 1) H / out_h) - 1 (likewise for columns). */
TORC_API torc_tensor *torc_adaptive_avg_pool2d(const torc_tensor *x,
                                               int64_t out_h, int64_t out_w);

/* ---- normalisation ---- */

/* Batch normalisation of x [N, C] or [N, C, *] over every dim but C.
 * Training: the batch's mean and biased variance normalise x, and the
 * running statistics (if given: both [C], contiguous) are updated in place
 * as PyTorch does: r = (1 - momentum) r + momentum s, with the unbiased
 * variance for running_var. Eval (training 0): running_mean and
 * running_var (required) normalise x. weight and bias [C] may be NULL
 * (1 and 0). eps is added to the variance (PyTorch: 1e-5; momentum 0.1).
 * weight and bias are x's dtype, or f32 (both) beside a bf16 or f16 x
 * (mixed precision: y in x's dtype, their gradients in f32); the running
 * statistics any floating dtype. Autocast leaves it to x's dtype. */
TORC_API torc_tensor *torc_batch_norm(const torc_tensor *x,
                                      torc_tensor *running_mean,
                                      torc_tensor *running_var,
                                      const torc_tensor *weight,
                                      const torc_tensor *bias, int training,
                                      double momentum, double eps);

/* Layer normalisation over the last n dims of x, which must equal
 * normalized_shape; weight and bias (that shape) may be NULL. */
TORC_API torc_tensor *torc_layer_norm(const torc_tensor *x,
                                      const int64_t *normalized_shape, int n,
                                      const torc_tensor *weight,
                                      const torc_tensor *bias, double eps);

/* Group normalisation of x [N, C, *]: the C channels split into `groups`
 * (which must divide C), each (sample, group) normalised; weight and bias
 * [C] (may be NULL) then scale and shift per channel. */
TORC_API torc_tensor *torc_group_norm(const torc_tensor *x, int64_t groups,
                                      const torc_tensor *weight,
                                      const torc_tensor *bias, double eps);

/* ---- dropout, embedding ---- */

/* Dropout: when training and p > 0, each element is zeroed with
 * probability p (a Philox mask drawn from gen, NULL = the default
 * generator: the same bits on every device) and the kept ones scaled by
 * 1 / (1 - p); otherwise x itself (a new reference). 0 <= p <= 1. */
TORC_API torc_tensor *torc_dropout(const torc_tensor *x, double p,
                                   int training, torc_generator *gen);

/* Embedding lookup: indices (i64 or i32, any shape) into the rows of
 * weight [num_embeddings, dim]; returns [indices..., dim]. An index
 * outside 0..num_embeddings-1 is TORC_ERR_RANGE naming it. */
TORC_API torc_tensor *torc_embedding(const torc_tensor *indices,
                                     const torc_tensor *weight);

/* PReLU: x where x > 0, else weight x, the weight (floating, [1] or one
 * slope per channel, [C] with C = x's dim 1) broadcast along dim 1, as
 * torch.nn.functional.prelu. Differentiable in x and in weight. Another
 * weight size is TORC_ERR_SHAPE naming both shapes. */
TORC_API torc_tensor *torc_prelu(const torc_tensor *x,
                                 const torc_tensor *weight);

/* ---- fused losses ---- */

/* How a loss reduces its per-sample values: their mean (weighted, see
 * torc_cross_entropy), their sum, or none (one value per sample). */
typedef enum torc_reduction {
  TORC_REDUCTION_MEAN = 0,
  TORC_REDUCTION_SUM = 1,
  TORC_REDUCTION_NONE = 2
} torc_reduction;

/* Options of torc_cross_entropy, as torch.nn.functional.cross_entropy's.
 * NULL means TORC_CROSS_ENTROPY_DEFAULTS (note that a zeroed struct
 * ignores class 0). This struct is also the params of the "cross_entropy"
 * and "cross_entropy_backward" kernels (a frozen layout). */
typedef struct torc_cross_entropy_params {
  int64_t ignore_index;   /* targets equal to it add nothing (-100) */
  double label_smoothing; /* in [0, 1]: share spread over all classes */
  int32_t reduction;      /* a torc_reduction */
  int32_t reserved;       /* 0 */
} torc_cross_entropy_params;

/* PyTorch's defaults: ignore_index -100, no smoothing, mean. */
#define TORC_CROSS_ENTROPY_DEFAULTS {-100, 0.0, TORC_REDUCTION_MEAN, 0}

/* Cross-entropy of logits against class indices in one fused op
 * (log_softmax, the pick of each target, label smoothing and the
 * reduction in one kernel, and one kernel for the gradient):
 * logits [N, C] or [N, C, d...] (or [C] for one sample) of a floating
 * dtype, target i64 [N] or [N, d...] (or []) holding class indices in
 * [0, C) or ignore_index. With smoothing eps and class weights w (weight
 * [C] of the logits' dtype and device, or NULL for ones), the loss of a
 * sample with target t is
 *   (1 - eps) * -w[t] logp[t] + eps / C * sum_c -w[c] logp[c]
 * (0 when t == ignore_index), logp = log_softmax(logits) over dim 1.
 * Reduction mean divides the sum by the summed w[t] of the targets not
 * ignored (NaN when all are); sum adds; none returns the target's shape.
 * The result is differentiable in the logits (first order; the weight
 * gets no gradient: a weight that requires grad is an error, as in
 * PyTorch). A target outside [0, C) that is not ignore_index is
 * TORC_ERR_RANGE naming it (found by the kernel: on an asynchronous
 * device, at the next synchronisation). Probability targets are not
 * taken here: compose them from torc_log_softmax (the losses plugin's
 * cross_entropy does).
 *
 * Kernel contract: "cross_entropy": in x [N, C, S] (the logits with the
 * trailing dims flattened into S; 2-D logits have S = 1), target i64
 * [N, S] and, when n_in is 3, weight [C]; out loss (x's dtype: [] for
 * mean and sum, [N, S] for none), the row statistics max [N, S] and
 * logsum [N, S] (log-softmax of a row is (x - max) - logsum, which keeps
 * its precision for large logits; f64 for f64 logits, else f32) and
 * total_weight [] (their dtype: the summed weights of the targets not
 * ignored).
 * "cross_entropy_backward": in gy (loss's shape, x's dtype), x, target,
 * max, logsum, total_weight (and weight when n_in is 7); out gx [N, C, S].
 * Both take torc_cross_entropy_params (already validated); N, C or S may
 * be 0; the core passes every operand of both contiguous. */
TORC_API torc_tensor *torc_cross_entropy(const torc_tensor *logits,
                                         const torc_tensor *target,
                                         const torc_tensor *weight,
                                         const torc_cross_entropy_params *p);

/* ---- recurrent cells ---- */

/* The elementwise part of one LSTM step (torch.nn.LSTMCell after its two
 * matmuls), fused:
 *   i, f, g, o = gates split in four along dim 1 (PyTorch's order)
 *   c' = sigmoid(f) * c + sigmoid(i) * tanh(g)
 *   h' = sigmoid(o) * tanh(c')
 * gates [N, 4H] is W_ih x + b_ih + W_hh h + b_hh (the caller's matmuls,
 * e.g. torc_linear); c [N, H] the cell state; both one floating dtype
 * (f32, f64, f16, bf16 where a kernel serves it) and one device. *h_out and
 * *c_out receive new references (owned by the open scope, if any), or
 * NULL on failure; either pointer may be NULL when not wanted.
 * Differentiable in gates and c through one LstmCellBackward node: its
 * kernel reads the activated gates and tanh(c') that the forward saved,
 * so the backward costs one pass over N x 5H elements.
 * Errors: a NULL input (TORC_ERR_NULL); integer or bool dtypes, or gates
 * and c of different dtypes (TORC_ERR_DTYPE); gates not [N, 4H] for c
 * [N, H] (TORC_ERR_SHAPE, naming both shapes); inputs on two devices.
 *
 * Kernel contract: "lstm_cell": in gates [N, 4H], c [N, H]; out h', c'
 * [N, H], act [N, 4H] (sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)),
 * tanh(c') [N, H]. "lstm_cell_backward": in gh', gc' [N, H], act, c,
 * tanh(c'); out ggates [N, 4H], gc [N, H]. No params; every operand of
 * one dtype and contiguous (the core makes them so); N or H may be 0. */
TORC_API torc_status torc_lstm_cell(const torc_tensor *gates,
                                    const torc_tensor *c,
                                    torc_tensor **h_out,
                                    torc_tensor **c_out);

/* The elementwise part of one GRU step (torch.nn.GRUCell after its two
 * matmuls), fused:
 *   r = sigmoid(xr + hr), z = sigmoid(xz + hz)
 *   n = tanh(xn + r * hn), h' = (1 - z) * n + z * h
 * xg [N, 3H] is W_ih x + b_ih and hg [N, 3H] is W_hh h + b_hh, each split
 * in three along dim 1 (PyTorch's order r, z, n: hn enters inside r's
 * product, so the two projections stay apart); h [N, H] the state. All
 * three of one floating dtype and one device. Returns h' [N, H] (a new
 * reference), or NULL with the error set; a NULL input gives NULL
 * (TORC_ERR_NULL), so calls chain. Differentiable in xg, hg and h through
 * one GruCellBackward node, which reads the saved activations r, z, n.
 * Errors as torc_lstm_cell: dtypes (TORC_ERR_DTYPE), xg or hg not
 * [N, 3H] for h [N, H] (TORC_ERR_SHAPE, naming the three shapes),
 * devices.
 *
 * Kernel contract: "gru_cell": in xg, hg [N, 3H], h [N, H]; out h' [N, H],
 * act [N, 3H] (r, z, n). "gru_cell_backward": in gh' [N, H], act, hg, h;
 * out gxg, ghg [N, 3H], gh [N, H]. No params; contiguous operands of one
 * dtype; N or H may be 0. */
TORC_API torc_tensor *torc_gru_cell(const torc_tensor *xg,
                                    const torc_tensor *hg,
                                    const torc_tensor *h);

/* ---- attention and its masks ---- */

/* The lower triangle of the last two dims of x (any dtype, at least 2-D;
 * the leading dims are a batch): element [..., i, j] is kept where
 * j - i <= diagonal and zeroed elsewhere, as torch.tril. diagonal 0 is
 * the main diagonal, > 0 above it, < 0 below. Differentiable: the
 * gradient passes through the same mask. A 0-D or 1-D x is
 * TORC_ERR_SHAPE. Contiguous result. */
TORC_API torc_tensor *torc_tril(const torc_tensor *x, int64_t diagonal);

/* The upper triangle, as torch.triu: [..., i, j] kept where
 * j - i >= diagonal. Otherwise as torc_tril. */
TORC_API torc_tensor *torc_triu(const torc_tensor *x, int64_t diagonal);

/* x with `value` where mask is true, as torch.Tensor.masked_fill: the mask
 * is bool and broadcasts to x's shape (x's shape is the result's); the
 * value is cast to x's dtype (truncated for integers). Differentiable in
 * x: the gradient is zero where the mask is set. A mask of another dtype
 * is TORC_ERR_DTYPE, one that does not broadcast TORC_ERR_SHAPE naming
 * both shapes. */
TORC_API torc_tensor *torc_masked_fill(const torc_tensor *x,
                                       const torc_tensor *mask, double value);

/* Scaled dot-product attention, as
 * torch.nn.functional.scaled_dot_product_attention (PyTorch 2):
 *   softmax(q k^T * scale + mask) v
 * with q [..., L, E], k [..., S, E], v [..., S, Ev] of one floating dtype
 * and the same leading (batch, head) dims; the result is [..., L, Ev].
 *   attn_mask  NULL, or broadcastable to [..., L, S]: bool (true: the key
 *              takes part; false: its score is -inf) or q's dtype (added
 *              to the scores). A row whose keys are all masked out gives
 *              NaN, as softmax over -infs.
 *   dropout_p  the probability of dropping each attention weight (the
 *              kept ones scaled by 1 / (1 - dropout_p)), from gen's Philox
 *              stream (NULL: the default generator). As in PyTorch, the
 *              function has no training flag: pass 0 in evaluation.
 *   is_causal  query i attends to keys j <= i (PyTorch's top-left aligned
 *              causal mask, also when L != S). Giving attn_mask too is
 *              TORC_ERR_INVALID, as in PyTorch.
 *   scale      the factor of the scores; 0 means the default 1/sqrt(E).
 * Differentiable in q, k and v (the mask gets no gradient). Memory stays
 * linear in L and S: the backward recomputes the weights from each row's
 * saved log-sum-exp. Mismatched shapes are TORC_ERR_SHAPE naming them;
 * another mask dtype TORC_ERR_DTYPE.
 *
 * Kernel contract: "scaled_dot_product_attention" and its backward take
 * torc_attention_kparams (torc/plugin.h, which lists their operands). */
TORC_API torc_tensor *torc_scaled_dot_product_attention(
    const torc_tensor *q, const torc_tensor *k, const torc_tensor *v,
    const torc_tensor *attn_mask, double dropout_p, int is_causal,
    double scale, torc_generator *gen);

TORC_END_DECLS

#endif /* TORC_NN_H */
