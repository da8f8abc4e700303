/* core/gradcheck.c — torc_gradcheck (torch.autograd.gradcheck): compares
 * the analytic Jacobian autograd computes with central finite differences,
 * element by element, in f64.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

torc_status torc_gradcheck(torc_fn fn, void *user, torc_tensor *const *inputs,
                           int n, double eps, double atol, double rtol) {
  if (fn == NULL || inputs == NULL || n < 1)
    return torc_set_error(TORC_ERR_INVALID, "torc_gradcheck: no function or "
                                            "inputs");
  for (int i = 0; i < n; i++)
    if (inputs[i] && inputs[i]->requires_grad && inputs[i]->dtype != TORC_F64)
      return torc_set_error(TORC_ERR_DTYPE,
                            "torc_gradcheck: input %d is %s; gradcheck needs "
                            "f64 inputs for finite differences to be "
                            "meaningful",
                            i, torc_dtype_name(inputs[i]->dtype));
  /* Everything below is owned by this scope: nothing is released by hand. */
  int scope = torc_scope_begin();
  torc_status st = TORC_OK;
  torc_tensor *out = fn(inputs, n, user);
  if (out == NULL) {
    st = torc_last_status();
    goto done;
  }
  int64_t n_out = torc__numel(out->shape, out->ndim);
  for (int i = 0; i < n && st == TORC_OK; i++) {
    torc_tensor *x = inputs[i];
    if (x == NULL || !x->requires_grad)
      continue;
    int64_t nx = torc__numel(x->shape, x->ndim);
    /* Numeric Jacobian column by column: perturb element j of x. */
    double *num = torc__calloc((size_t)(nx * n_out + 1), sizeof(double));
    double *ana = torc__calloc((size_t)(nx * n_out + 1), sizeof(double));
    double *xv = torc__malloc(sizeof(double) * (size_t)(nx + 1));
    if (!num || !ana || !xv) {
      st = torc_set_error(TORC_ERR_OOM, "torc_gradcheck: out of memory");
    } else if ((st = torc_to_host(x, xv, sizeof(double) * (size_t)nx)) ==
               TORC_OK) {
      torc_tensor *flat = torc_reshape(x, (const int64_t[]){nx}, 1);
      torc_grad_mode m = torc_set_grad_mode(TORC_NO_GRAD);
      for (int64_t j = 0; j < nx && st == TORC_OK; j++) {
        double v[2];
        torc_tensor *elem = torc_select(flat, 0, j);
        for (int side = 0; side < 2 && st == TORC_OK; side++) {
          torc_tensor *val =
              torc_full(NULL, 0, xv[j] + (side ? -eps : eps), TORC_F64,
                        x->storage->device);
          st = torc_copy_(elem, val);
          torc_tensor *o = st == TORC_OK ? fn(inputs, n, user) : NULL;
          torc_tensor *od = o ? torc_to_dtype(o, TORC_F64) : NULL;
          double *ov = torc__malloc(sizeof(double) * (size_t)(n_out + 1));
          if (od == NULL || ov == NULL)
            st = st ? st : torc_last_status();
          else if ((st = torc_to_host(od, ov, sizeof(double) * (size_t)n_out)) ==
                   TORC_OK)
            for (int64_t k = 0; k < n_out; k++)
              num[k * nx + j] += (side ? -ov[k] : ov[k]) / (2 * eps);
          torc__free(ov);
          (void)v;
        }
        torc_tensor *orig = torc_full(NULL, 0, xv[j], TORC_F64,
                                      x->storage->device);
        if (st == TORC_OK)
          st = torc_copy_(elem, orig);
      }
      torc_set_grad_mode(m);
      /* The writes above bumped x's version; the graph of `out` saved x
       * before them, so recompute the output for the analytic pass. */
      torc_tensor *out2 = st == TORC_OK ? fn(inputs, n, user) : NULL;
      if (st == TORC_OK && out2 == NULL)
        st = torc_last_status();
      /* Analytic Jacobian row by row: backward of each output element. */
      for (int64_t k = 0; k < n_out && st == TORC_OK; k++) {
        torc_tensor *go = torc_zeros(out2->shape, out2->ndim, out2->dtype,
                                     out2->storage->device);
        torc_tensor *gof = torc_reshape(go, (const int64_t[]){n_out}, 1);
        torc_tensor *one = torc_full(NULL, 0, 1.0, out2->dtype,
                                     out2->storage->device);
        torc_tensor *gk = torc_select(gof, 0, k);
        torc_tensor *gx = NULL;
        if ((st = torc_copy_(gk, one)) == TORC_OK)
          st = torc_grad(&out2, (const torc_tensor *const *)&go, 1, &x, 1, &gx,
                         1, 1);
        if (st == TORC_OK && gx) {
          double *gv = torc__malloc(sizeof(double) * (size_t)(nx + 1));
          torc_tensor *gd = torc_to_dtype(gx, TORC_F64);
          if (gv && gd &&
              (st = torc_to_host(gd, gv, sizeof(double) * (size_t)nx)) ==
                  TORC_OK)
            for (int64_t j = 0; j < nx; j++)
              ana[k * nx + j] = gv[j];
          torc__free(gv);
        }
      }
      for (int64_t k = 0; k < n_out && st == TORC_OK; k++)
        for (int64_t j = 0; j < nx; j++) {
          double a = ana[k * nx + j], nm = num[k * nx + j];
          if (!(fabs(a - nm) <= atol + rtol * fabs(nm))) {
            st = torc_set_error(
                TORC_ERR_AUTOGRAD,
                "gradcheck: input %d, element %lld, output element %lld: "
                "analytic gradient %.10g but numeric %.10g (difference %.3g; "
                "atol %g, rtol %g)",
                i, (long long)j, (long long)k, a, nm, fabs(a - nm), atol, rtol);
            break;
          }
        }
    }
    torc__free(num), torc__free(ana), torc__free(xv);
  }
done:
  torc_scope_end(scope);
  return st;
}
