/* core/kcost.c — what one kernel call costs, counted from its op and the
 * shapes of its operands: the floating-point operations (FLOPs) and the
 * bytes it reads and writes. The roofline profile (`torc bench
 * --roofline`) sums them per op and per module.
 *
 * FLOPs, a multiply-add counting 2:
 *   matmul            in [B..., M, K] x [B..., K, N]: 2 * B * M * N * K
 *   linear_act        x [M, K], w [K, N]: 2 * M * N * K (the bias and the
 *                     activation not counted)
 *   conv2d, conv2d_act, conv2d_backward_input, conv2d_backward_weight,
 *   conv_transpose2d  2 * N * C_out * OH * OW * C_in / groups * kH * kW
 *                     (OH, OW the convolution's output sizes; a transposed
 *                     convolution is the backward_input of one with the
 *                     roles of C_in and C_out swapped)
 *   scaled_dot_product_attention
 *                     q [B..., L, E], k [B..., S, E], v [B..., S, Ev]:
 *                     the dense QK^T and PV matmuls, 2 * B * L * S * (E +
 *                     Ev), a causal mask's skipped half counted too
 *   scaled_dot_product_attention_backward
 *                     QK^T again (from the saved log-sum-exp), dV, dP, dQ
 *                     and dK: 2 * B * L * S * (3 E + 2 Ev)
 *   lstm_cell, gru_cell and their backwards
 *                     the arithmetic of their equations (plugins/ref's
 *                     kernels), a sigmoid or tanh counting 1: per element
 *                     of the [N, H] state 9 (LSTM), 22 (its backward), 11
 *                     (GRU), 16 (its backward)
 *   elementwise ops   1 per output element (the unary, binary and where
 *                     ops, comparisons and activations' backwards too)
 *   sum, mean, prod, amax, amin
 *                     1 per input element
 * Every other op has no formula (-1): copies, fills, random numbers,
 * indexing, pooling, normalisation, softmax, losses, dropout, optimizer
 * steps, var/std/norm/logsumexp.
 *
 * Bytes: every input read once and every output written once, a broadcast
 * (stride 0) dimension counted once — the least memory traffic the call
 * can have. The ops outside the matmul, convolution and attention rows
 * are memory-bound: their time is the bytes they move, not their FLOPs.
 */
#include <string.h>

#include "internal.h"
#include "torc/plugin.h"

/* numel of a kernel tensor. */
static int64_t knumel(const torc_ktensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

/* The bytes a kernel tensor's elements take in memory: a stride-0
 * (broadcast) dimension holds one element. */
static int64_t kbytes(const torc_ktensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] == 0)
      return 0;
    if (t->strides[d] != 0)
      n *= t->shape[d];
  }
  size_t es = torc_dtype_valid((torc_dtype)t->dtype)
                  ? torc_dtype_size((torc_dtype)t->dtype)
                  : 0;
  return n * (int64_t)es;
}

/* The params of a call when they are a T (NULL when too short). */
#define PARAMS(a, T)                                                           \
  ((a)->params && (a)->params_size >= sizeof(T) ? (const T *)(a)->params      \
                                                : NULL)

/* 2 * numel(y) * numel(w) / w.shape[0]: a convolution whose output (or
 * output gradient) is y and whose weight's first dim is the channel count
 * y carries. */
static int64_t conv_flops(const torc_ktensor *y, const torc_ktensor *w) {
  if (w->ndim != 4 || w->shape[0] <= 0)
    return -1;
  return 2 * knumel(y) * (knumel(w) / w->shape[0]);
}

/* conv2d_act: the convolution's output sizes from x's and the params (the
 * pool after it changed the output's). */
static int64_t conv_act_flops(const torc_kernel_args *a) {
  const torc_conv_act_kparams *p = PARAMS(a, torc_conv_act_kparams);
  const torc_ktensor *x = &a->in[0], *w = &a->in[1];
  if (p == NULL || x->ndim != 4 || w->ndim != 4 || w->shape[0] <= 0)
    return -1;
  int64_t o[2];
  for (int i = 0; i < 2; i++) {
    int64_t s = p->conv.stride[i] > 0 ? p->conv.stride[i] : 1;
    int64_t d = p->conv.dilation[i] > 0 ? p->conv.dilation[i] : 1;
    int64_t span = x->shape[2 + i] + 2 * p->conv.padding[i] -
                   d * (w->shape[2 + i] - 1) - 1;
    o[i] = span < 0 ? 0 : span / s + 1;
  }
  return 2 * x->shape[0] * w->shape[0] * o[0] * o[1] *
         (knumel(w) / w->shape[0]);
}

/* Attention: B * L * S, E and Ev from q [B..., L, E], k [B..., S, E] and
 * v [B..., S, Ev]; 0 when the shapes are not that. */
static int attn_dims(const torc_ktensor *q, const torc_ktensor *k,
                     const torc_ktensor *v, int64_t *bls, int64_t *e,
                     int64_t *ev) {
  if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2)
    return 0;
  int64_t L = q->shape[q->ndim - 2], S = k->shape[k->ndim - 2];
  *e = q->shape[q->ndim - 1];
  *ev = v->shape[v->ndim - 1];
  *bls = L * *e > 0 ? knumel(q) / *e * S : 0;
  return 1;
}

static int64_t flops_of(int op, const torc_kernel_args *a) {
  const torc_ktensor *in = a->in, *out = a->out;
  int64_t bls, e, ev;
  switch (op) {
  case TORC__OP_matmul:
    if (a->n_in < 2 || a->n_out < 1 || in[0].ndim < 1)
      return -1;
    return 2 * knumel(&out[0]) * in[0].shape[in[0].ndim - 1];
  case TORC__OP_linear_act:
    if (a->n_in < 2 || a->n_out < 1 || in[0].ndim != 2)
      return -1;
    return 2 * knumel(&out[0]) * in[0].shape[1];
  case TORC__OP_conv2d:
    /* x, w (+ b) -> y */
    return a->n_in >= 2 && a->n_out >= 1 ? conv_flops(&out[0], &in[1]) : -1;
  case TORC__OP_conv2d_backward_input:
    /* gy, w -> gx */
    return a->n_in >= 2 ? conv_flops(&in[0], &in[1]) : -1;
  case TORC__OP_conv2d_backward_weight:
    /* x, gy -> gw */
    return a->n_in >= 2 && a->n_out >= 1 ? conv_flops(&in[1], &out[0]) : -1;
  case TORC__OP_conv_transpose2d:
    /* x [N, C_in, H, W] (as gy), w [C_in, C_out/groups, kH, kW] */
    return a->n_in >= 2 ? conv_flops(&in[0], &in[1]) : -1;
  case TORC__OP_conv2d_act:
    return a->n_in >= 2 ? conv_act_flops(a) : -1;
  case TORC__OP_scaled_dot_product_attention:
    if (a->n_in < 3 || !attn_dims(&in[0], &in[1], &in[2], &bls, &e, &ev))
      return -1;
    return 2 * bls * (e + ev);
  case TORC__OP_scaled_dot_product_attention_backward:
    /* gy, q, k, v, o, lse */
    if (a->n_in < 4 || !attn_dims(&in[1], &in[2], &in[3], &bls, &e, &ev))
      return -1;
    return 2 * bls * (3 * e + 2 * ev);
  case TORC__OP_lstm_cell: /* gates, c -> h', c', act, tanh(c') */
    return a->n_in >= 2 ? 9 * knumel(&in[1]) : -1;
  case TORC__OP_lstm_cell_backward: /* gh', gc', act, c, tanh(c') */
    return a->n_in >= 4 ? 22 * knumel(&in[3]) : -1;
  case TORC__OP_gru_cell: /* xg, hg, h -> h', act */
    return a->n_in >= 3 ? 11 * knumel(&in[2]) : -1;
  case TORC__OP_gru_cell_backward: /* gh', act, hg, h */
    return a->n_in >= 4 ? 16 * knumel(&in[3]) : -1;
  case TORC__OP_sum:
  case TORC__OP_mean:
  case TORC__OP_prod:
  case TORC__OP_amax:
  case TORC__OP_amin:
    return a->n_in >= 1 ? knumel(&in[0]) : -1;
  case TORC__OP_pad:
  case TORC__OP_pad_backward:
  case TORC__OP_interpolate:
  case TORC__OP_interpolate_backward:
    return -1; /* data movement (pad) or resampling: no formula */
  default:
    break;
  }
  switch (torc__ops[op].kind) {
  case TORC__OPK_UNARY:
  case TORC__OPK_BINARY:
  case TORC__OPK_WHERE:
    return a->n_out >= 1 ? knumel(&out[0]) : -1;
  default:
    return -1;
  }
}

/* 1 for the ops whose time is their arithmetic: matmul, convolution,
 * attention. */
static int compute_bound(int op) {
  switch (op) {
  case TORC__OP_matmul:
  case TORC__OP_linear_act:
  case TORC__OP_conv2d:
  case TORC__OP_conv2d_backward_input:
  case TORC__OP_conv2d_backward_weight:
  case TORC__OP_conv_transpose2d:
  case TORC__OP_conv2d_act:
  case TORC__OP_scaled_dot_product_attention:
  case TORC__OP_scaled_dot_product_attention_backward:
    return 1;
  default:
    return 0;
  }
}

void torc__kernel_cost(int op, const torc_kernel_args *a,
                       torc_kernel_cost *c) {
  c->flops = -1;
  c->bytes = 0;
  c->memory_bound = 0;
  if (op < 0 || op >= TORC__OP_COUNT || a == NULL ||
      (a->n_in > 0 && a->in == NULL) || (a->n_out > 0 && a->out == NULL)) {
    c->bytes = -1;
    return;
  }
  for (int i = 0; i < a->n_in; i++)
    c->bytes += kbytes(&a->in[i]);
  for (int i = 0; i < a->n_out; i++)
    c->bytes += kbytes(&a->out[i]);
  c->flops = flops_of(op, a);
  c->memory_bound = !compute_bound(op);
}

torc_kernel_cost torc_kernel_cost_of(const torc_kernel_args *args) {
  torc_kernel_cost c;
  torc__kernel_cost(args ? torc__op_find(args->op) : -1, args, &c);
  return c;
}
