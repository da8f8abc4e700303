/* plugins/ref/kernels_rnn_cell.c — reference kernels of the fused
 * recurrent cells: "lstm_cell", "gru_cell" and their backwards (contracts
 * in torc/nn.h). The equations are torch.nn.LSTMCell's and GRUCell's
 * after their matmuls, element by element in double, each stored value
 * rounded once. Registered with TORC_KERNEL_CONTIGUOUS: row n, column j of
 * an [N, kH] operand is at offset + n * kH + j.
 */
#include <math.h>

#include "ref_fused.h"

static double sigmoid(double x) {
  if (x >= 0)
    return 1 / (1 + exp(-x));
  double e = exp(x);
  return e / (1 + e);
}

/* H from an [N, H] operand and N; checks the other operands' sizes, which
 * the core has validated (a mismatch here is a core bug). */
static int cell_dims(const torc_kernel_args *a, const torc_ktensor *state,
                     int64_t *N, int64_t *H) {
  if (state->ndim != 2)
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel '%s': the state has %d dims, expected "
                     "[N, H]",
                     a->op, (int)state->ndim);
  *N = state->shape[0];
  *H = state->shape[1];
  for (int i = 0; i < a->n_in + a->n_out; i++) {
    const torc_ktensor *t = i < a->n_in ? &a->in[i] : &a->out[i - a->n_in];
    int64_t n = ref_numel(t->ndim, t->shape);
    if (t->dtype != state->dtype ||
        (n != *N * *H && n != 3 * *N * *H && n != 4 * *N * *H))
      return ref_error(TORC_ERR_INTERNAL,
                       "ref kernel '%s': operand %d is %s of %lld elements "
                       "for a state [%lld, %lld] of %s",
                       a->op, i, ref_dtype_name(t->dtype), (long long)n,
                       (long long)*N, (long long)*H,
                       ref_dtype_name(state->dtype));
  }
  return TORC_OK;
}

/* in gates [N, 4H], c [N, H]; out h', c', act [N, 4H], tanh(c'). */
int torc_ref_k_lstm_cell(const torc_kernel_args *a) {
  int64_t N, H;
  int st = ref_check_args(a, 2, 4);
  if (st || (st = cell_dims(a, &a->in[1], &N, &H)))
    return st;
  const torc_ktensor *gt = &a->in[0], *c = &a->in[1];
  const torc_ktensor *h2 = &a->out[0], *c2 = &a->out[1], *act = &a->out[2];
  const torc_ktensor *tc = &a->out[3];
  for (int64_t n = 0; n < N; n++)
    for (int64_t j = 0; j < H; j++) {
      int64_t g = n * 4 * H + j, k = n * H + j;
      double i = sigmoid(nn_ld(gt, g)), f = sigmoid(nn_ld(gt, g + H));
      double gg = tanh(nn_ld(gt, g + 2 * H)), o = sigmoid(nn_ld(gt, g + 3 * H));
      double cn = f * nn_ld(c, k) + i * gg, t = tanh(cn);
      nn_st(act, g, i);
      nn_st(act, g + H, f);
      nn_st(act, g + 2 * H, gg);
      nn_st(act, g + 3 * H, o);
      nn_st(c2, k, cn);
      nn_st(tc, k, t);
      nn_st(h2, k, o * t);
    }
  return TORC_OK;
}

/* in gh', gc', act, c, tanh(c'); out ggates [N, 4H], gc [N, H]:
 *   dc' = gc' + gh' o (1 - tanh(c')^2)
 *   di = dc' g i (1 - i), df = dc' c f (1 - f), dg = dc' i (1 - g^2),
 *   do = gh' tanh(c') o (1 - o), dc = dc' f. */
int torc_ref_k_lstm_cell_backward(const torc_kernel_args *a) {
  int64_t N, H;
  int st = ref_check_args(a, 5, 2);
  if (st || (st = cell_dims(a, &a->in[3], &N, &H)))
    return st;
  const torc_ktensor *gh = &a->in[0], *gc = &a->in[1], *act = &a->in[2];
  const torc_ktensor *c = &a->in[3], *tc = &a->in[4];
  const torc_ktensor *gg = &a->out[0], *gcp = &a->out[1];
  for (int64_t n = 0; n < N; n++)
    for (int64_t j = 0; j < H; j++) {
      int64_t g = n * 4 * H + j, k = n * H + j;
      double i = nn_ld(act, g), f = nn_ld(act, g + H);
      double gv = nn_ld(act, g + 2 * H), o = nn_ld(act, g + 3 * H);
      double t = nn_ld(tc, k), dh = nn_ld(gh, k);
      double dc = nn_ld(gc, k) + dh * o * (1 - t * t);
      nn_st(gg, g, dc * gv * i * (1 - i));
      nn_st(gg, g + H, dc * nn_ld(c, k) * f * (1 - f));
      nn_st(gg, g + 2 * H, dc * i * (1 - gv * gv));
      nn_st(gg, g + 3 * H, dh * t * o * (1 - o));
      nn_st(gcp, k, dc * f);
    }
  return TORC_OK;
}

/* in xg, hg [N, 3H], h [N, H]; out h' [N, H], act [N, 3H] (r, z, n). */
int torc_ref_k_gru_cell(const torc_kernel_args *a) {
  int64_t N, H;
  int st = ref_check_args(a, 3, 2);
  if (st || (st = cell_dims(a, &a->in[2], &N, &H)))
    return st;
  const torc_ktensor *xg = &a->in[0], *hg = &a->in[1], *h = &a->in[2];
  const torc_ktensor *h2 = &a->out[0], *act = &a->out[1];
  for (int64_t n = 0; n < N; n++)
    for (int64_t j = 0; j < H; j++) {
      int64_t g = n * 3 * H + j, k = n * H + j;
      double r = sigmoid(nn_ld(xg, g) + nn_ld(hg, g));
      double z = sigmoid(nn_ld(xg, g + H) + nn_ld(hg, g + H));
      double nv = tanh(nn_ld(xg, g + 2 * H) + r * nn_ld(hg, g + 2 * H));
      nn_st(act, g, r);
      nn_st(act, g + H, z);
      nn_st(act, g + 2 * H, nv);
      nn_st(h2, k, (1 - z) * nv + z * nn_ld(h, k));
    }
  return TORC_OK;
}

/* in gh', act, hg, h; out gxg, ghg [N, 3H], gh [N, H]:
 *   dn = gh' (1 - z) (1 - n^2), dz = gh' (h - n) z (1 - z),
 *   dr = dn hn r (1 - r); gxg = (dr, dz, dn), ghg = (dr, dz, dn r),
 *   gh = gh' z. */
int torc_ref_k_gru_cell_backward(const torc_kernel_args *a) {
  int64_t N, H;
  int st = ref_check_args(a, 4, 3);
  if (st || (st = cell_dims(a, &a->in[3], &N, &H)))
    return st;
  const torc_ktensor *gh = &a->in[0], *act = &a->in[1], *hg = &a->in[2];
  const torc_ktensor *h = &a->in[3];
  const torc_ktensor *gx = &a->out[0], *ghg = &a->out[1], *ghp = &a->out[2];
  for (int64_t n = 0; n < N; n++)
    for (int64_t j = 0; j < H; j++) {
      int64_t g = n * 3 * H + j, k = n * H + j;
      double r = nn_ld(act, g), z = nn_ld(act, g + H);
      double nv = nn_ld(act, g + 2 * H), d = nn_ld(gh, k);
      double dn = d * (1 - z) * (1 - nv * nv);
      double dz = d * (nn_ld(h, k) - nv) * z * (1 - z);
      double dr = dn * nn_ld(hg, g + 2 * H) * r * (1 - r);
      nn_st(gx, g, dr);
      nn_st(gx, g + H, dz);
      nn_st(gx, g + 2 * H, dn);
      nn_st(ghg, g, dr);
      nn_st(ghg, g + H, dz);
      nn_st(ghg, g + 2 * H, dn * r);
      nn_st(ghp, k, d * z);
    }
  return TORC_OK;
}
