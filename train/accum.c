/* train/accum.c — the trainer's figures kept on the device: the loss and
 * correct-count sums of a log window and an epoch, and the non-finite-loss
 * guard, so a training step needs no blocking read; read back per window.
 */
#include <math.h>
#include <string.h>

#include "train_internal.h"

typedef torc_train__accum accum;

/* A 0-d tensor of `value` on dev, owned by the caller (not by a scope
 * the caller of the trainer may have open). */
torc_tensor *torc_train__owned_scalar(double value, torc_dtype dt,
                                      torc_device dev) {
  int scope = torc_scope_begin();
  torc_tensor *t = torc_full(NULL, 0, value, dt, dev);
  if (t)
    torc_retain(t);
  torc_scope_end(scope);
  return t;
}

static torc_tensor *scalar(double value, torc_dtype dt, torc_device dev) {
  return torc_train__owned_scalar(value, dt, dev);
}

void torc_train__accum_free(accum *a) {
  torc_tensor **all[] = {&a->wl,    &a->el,    &a->wc,    &a->ec,
                         &a->alive, &a->bad,   &a->badv,  &a->last,
                         &a->steps, &a->cur_l, &a->cur_c, &a->inf};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
    torc_release(*all[i]);
    *all[i] = NULL;
  }
}

torc_status torc_train__accum_init(accum *a, torc_device dev, double wl,
                                   double el, int64_t wc, int64_t ec,
                                   int64_t gstep) {
  memset(a, 0, sizeof *a);
  a->dev = dev;
  a->host = torc_device_is_host(dev);
  a->wl = scalar(wl, TORC_F64, dev);
  a->el = scalar(el, TORC_F64, dev);
  a->wc = scalar((double)wc, TORC_F64, dev);
  a->ec = scalar((double)ec, TORC_F64, dev);
  a->alive = scalar(1, TORC_BOOL, dev);
  a->bad = scalar(0, TORC_F64, dev);
  a->badv = scalar(0, TORC_F64, dev);
  a->last = scalar(NAN, TORC_F64, dev);
  a->steps = scalar((double)gstep, TORC_F64, dev);
  a->inf = scalar(INFINITY, TORC_F64, dev);
  if (!a->inf || !a->wl || !a->el || !a->wc || !a->ec || !a->alive || !a->bad ||
      !a->badv || !a->last || !a->steps) {
    torc_status st = torc_last_status();
    torc_train__accum_free(a);
    return st;
  }
  return TORC_OK;
}

/* Whether `target` holds class indices for `out` (the count is kept). */
int torc_train__classifies(const torc_tensor *out, const torc_tensor *target) {
  return torc_dtype_of(target) == TORC_I64 && torc_ndim(out) == 2 &&
         torc_ndim(target) == 1;
}

/* The number of rows of `out` whose argmax is `target`, as a 0-d f64
 * tensor of the current scope (NULL after an error). */
static torc_tensor *correct_count(const torc_tensor *out,
                                  const torc_tensor *target) {
  int dim = 1;
  return torc_to_dtype(
      torc_sum(torc_eq(torc_argmax(out, &dim, 0), target), NULL, 0, 0),
      TORC_F64);
}

torc_status torc_train__batch_sums(torc_tensor *out, const torc_tensor *target,
                                   torc_tensor *loss, int64_t samples,
                                   torc_tensor *loss_sum,
                                   torc_tensor *correct_sum, int *classify) {
  int scope = torc_scope_begin();
  torc_status st = TORC_OK;
  /* loss * samples in double, as the host's lv * (double)bs. */
  torc_tensor *l =
      torc_mul_scalar(torc_to_dtype(loss, TORC_F64), (double)samples);
  if (l == NULL || (st = torc_add_(loss_sum, l)))
    goto done;
  if (!torc_train__classifies(out, target)) {
    *classify = 0;
    goto done;
  }
  torc_tensor *c = correct_count(out, target);
  st = c ? torc_add_(correct_sum, c) : torc_last_status();
done:
  if (st == TORC_OK && l == NULL)
    st = torc_last_status();
  torc_scope_end(scope);
  return st;
}

/* The double inside a 0-d f64 host tensor (the sums and the guard's
 * figures on the host). */
static double *host_f64(torc_tensor *t) { return (double *)torc_data(t); }

/* accum_step on the host, where reading is free: the same sums and guard
 * computed in the host's doubles, written into the same 0-d tensors (so
 * the reads and the guard's message are shared), without the ~20 small
 * ops the device needs. l and c are f64 exactly as the device path's, and
 * the doubles are added in its order, so the figures agree bit for bit. */
static torc_status host_step(accum *a, torc_tensor *l, torc_tensor *c,
                             torc_tensor *gnorm, int64_t samples) {
  double lv = *host_f64(l), gv = 0;
  torc_status st = gnorm ? torc_item(gnorm, &gv) : TORC_OK;
  if (st)
    return st;
  double ls = lv * (double)samples;
  *host_f64(a->wl) += ls;
  *host_f64(a->el) += ls;
  if (c) {
    double cv = *host_f64(c);
    *host_f64(a->wc) += cv;
    *host_f64(a->ec) += cv;
  }
  int fin = fabs(lv) < INFINITY && (gnorm == NULL || fabs(gv) < INFINITY);
  unsigned char *alive = (unsigned char *)torc_data(a->alive);
  *host_f64(a->steps) += 1;
  if (*alive && !fin) {
    *host_f64(a->bad) = *host_f64(a->steps);
    *host_f64(a->badv) = lv;
  }
  *alive = *alive && fin;
  if (*alive)
    *host_f64(a->last) = lv;
  return TORC_OK;
}

torc_status torc_train__accum_step(accum *a, torc_tensor *out,
                                   const torc_tensor *target, torc_tensor *loss,
                                   torc_tensor *gnorm, int64_t samples,
                                   int *classify) {
  torc_release(a->cur_l), torc_release(a->cur_c);
  a->cur_l = a->cur_c = NULL;
  int classifies = torc_train__classifies(out, target);
  if (!classifies)
    *classify = 0;
  if (a->host) {
    int scope = torc_scope_begin();
    torc_tensor *l = torc_contiguous(torc_to_dtype(loss, TORC_F64));
    torc_tensor *c =
        l && classifies ? torc_contiguous(correct_count(out, target)) : NULL;
    torc_status st = l == NULL || (classifies && c == NULL)
                         ? torc_last_status()
                         : host_step(a, l, c, gnorm, samples);
    if (st == TORC_OK) {
      a->cur_l = torc_retain(l);
      a->cur_c = c ? torc_retain(c) : NULL;
    }
    torc_scope_end(scope);
    return st;
  }
  /* This step's loss and count (kept for a read), then both sums gain
   * them: the product loss * samples made once. */
  int scope = torc_scope_begin();
  torc_status st = TORC_OK;
  torc_tensor *last = NULL, *l = torc_to_dtype(loss, TORC_F64);
  torc_tensor *ls = l ? torc_mul_scalar(l, (double)samples) : NULL;
  if (ls == NULL || (st = torc_add_(a->wl, ls)) || (st = torc_add_(a->el, ls)))
    goto done;
  a->cur_l = torc_retain(l);
  if (classifies) {
    torc_tensor *c = correct_count(out, target);
    if (c == NULL || (st = torc_add_(a->wc, c)) || (st = torc_add_(a->ec, c)))
      goto done;
    a->cur_c = torc_retain(c);
  }
  /* The guard: the first step whose loss is not finite (NaN fails the
   * comparison too) clears `alive` for good and records its number. */
  torc_tensor *inf = a->inf;
  torc_tensor *fin = l ? torc_lt(torc_abs(l), inf) : NULL;
  if (fin && gnorm) { /* and the gradients', when clipping computed it */
    torc_tensor *gn = torc_to_dtype(gnorm, TORC_F64);
    fin = gn ? torc_logical_and(fin, torc_lt(torc_abs(gn), inf)) : NULL;
  }
  if ((st = torc_add_scalar_(a->steps, 1)))
    goto done;
  torc_tensor *first_bad =
      fin ? torc_logical_and(a->alive, torc_logical_not(fin)) : NULL;
  torc_tensor *bad = first_bad ? torc_where(first_bad, a->steps, a->bad) : NULL;
  torc_tensor *badv = first_bad ? torc_where(first_bad, l, a->badv) : NULL;
  torc_tensor *alive = fin ? torc_logical_and(a->alive, fin) : NULL;
  last = alive ? torc_where(alive, l, a->last) : NULL;
  if (st == TORC_OK && (bad == NULL || badv == NULL || last == NULL))
    st = torc_last_status();
  if (st == TORC_OK && !(st = torc_copy_(a->bad, bad)) &&
      !(st = torc_copy_(a->badv, badv)) && !(st = torc_copy_(a->alive, alive)))
    st = torc_copy_(a->last, last);
done:
  if (st == TORC_OK && (a->cur_l == NULL || last == NULL))
    st = torc_last_status();
  torc_scope_end(scope);
  return st;
}

int torc_train__accum_alive(const accum *a) {
  double v = 0;
  return torc_item(a->alive, &v) == TORC_OK && v != 0;
}

torc_status torc_train__accum_check(const accum *a, int64_t epoch,
                                    int64_t epoch_first_step) {
  double alive = 0, bad = 0, last = NAN, lv = NAN;
  torc_status st = torc_item(a->alive, &alive);
  if (st || alive != 0)
    return st;
  if ((st = torc_item(a->bad, &bad)) || (st = torc_item(a->last, &last)) ||
      (st = torc_item(a->badv, &lv)))
    return st;
  int64_t step = (int64_t)bad;
  char lastb[96];
  if (step > 1 && !isnan(last))
    snprintf(lastb, sizeof lastb, "%.6g at step %lld", last,
             (long long)step - 1);
  else
    snprintf(lastb, sizeof lastb, "none (the first step)");
  char what[96];
  if (isfinite(lv))
    snprintf(what, sizeof what,
             "the loss is %.6g but the gradients' norm is "
             "not finite",
             lv);
  else
    snprintf(what, sizeof what, "the loss is %s",
             isnan(lv) ? "NaN" : "infinite");
  return torc_set_error(
      TORC_ERR_INVALID,
      "step %lld (epoch %lld, batch %lld): %s; the last "
      "finite loss was %s. The weights were not updated by this step or "
      "those after it. Try a lower learning rate ([optimizer] lr), clip "
      "gradients ([train] clip_grad_norm = 1.0), or check the data for "
      "NaN/Inf (torc_set_anomaly_mode names the op that made one)",
      (long long)step, (long long)epoch + 1,
      (long long)(step - epoch_first_step), what, lastb);
}

torc_status torc_train__accum_read(const accum *a, torc_tensor *const *ts,
                                   int n, double *out) {
  int scope = torc_scope_begin();
  torc_tensor *parts[9];
  torc_status st = TORC_OK;
  parts[0] = torc_to_dtype(a->alive, TORC_F64);
  for (int i = 0; i < n && i < 8; i++)
    parts[i + 1] = ts[i] ? ts[i] : torc_zeros(NULL, 0, TORC_F64, a->dev);
  for (int i = 0; i <= n && st == TORC_OK; i++)
    if (parts[i] == NULL)
      st = torc_last_status();
  torc_tensor *all =
      st == TORC_OK ? torc_stack((const torc_tensor *const *)parts, n + 1, 0)
                    : NULL;
  double v[9];
  if (st == TORC_OK)
    st = all ? torc_to_host(all, v, sizeof(double) * (size_t)(n + 1))
             : torc_last_status();
  torc_scope_end(scope);
  if (st)
    return st;
  for (int i = 0; i < n; i++)
    out[i] = v[i + 1];
  return v[0] != 0 ? TORC_OK : TORC_ERR_INVALID;
}
