/* train/eval.c — evaluation on [data.test]: the pass the trainer runs
 * after its epochs, and torc_evaluate (torc eval) with a checkpoint's
 * weights, its confusion matrix and the predictions it prints.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

typedef torc_train__run run;
typedef torc_train__eval_out eval_out;

torc_status torc_train__evaluate(run *r, int64_t epoch, int want_confusion,
                                 int predict, FILE *pf, eval_out *e) {
  memset(e, 0, sizeof *e);
  torc_module_train(r->model, 0);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc_status st = torc_loader_start(r->test, epoch, 0);
  double lsum = 0;
  int64_t correct = 0, n = 0, printed = 0;
  int classify = 1;
  torc_batch b = {0};
  int got;
  while (st == TORC_OK && (got = torc_loader_next(r->test, &b)) == 1) {
    int scope = torc_scope_begin();
    torc_tensor *out = torc_module_forward(r->model, b.input);
    torc_tensor *loss = out ? torc_loss_forward(r->loss, out, b.target) : NULL;
    double lv;
    int64_t c;
    st = loss ? torc_train__batch_metrics(out, b.target, loss, &lv, &c)
              : torc_last_status();
    if (st == TORC_OK) {
      lsum += lv * (double)b.size;
      n += b.size;
      if (c < 0)
        classify = 0;
      else
        correct += c;
      if (classify && want_confusion) {
        int64_t k = torc_shape(out)[1];
        if (e->confusion == NULL) {
          e->classes = k;
          e->confusion = calloc((size_t)(k * k), sizeof(int64_t));
          if (e->confusion == NULL)
            st = torc_set_error(TORC_ERR_OOM, "out of memory");
        }
        int dim = 1;
        torc_tensor *pred = torc_to(torc_argmax(out, &dim, 0), TORC_CPU);
        torc_tensor *tgt = torc_to(b.target, TORC_CPU);
        if (st == TORC_OK && pred && tgt) {
          const int64_t *p = torc_data(torc_contiguous(pred)),
                        *t = torc_data(torc_contiguous(tgt));
          for (int64_t i = 0; i < b.size; i++)
            if (t[i] >= 0 && t[i] < k && p[i] >= 0 && p[i] < k)
              e->confusion[t[i] * k + p[i]]++;
        }
      }
      for (int64_t i = 0; i < b.size && printed < predict && st == TORC_OK;
           i++, printed++) {
        torc_tensor *row = torc_to(torc_select(out, 0, i), TORC_CPU);
        torc_tensor *rf = row ? torc_to_dtype(row, TORC_F64) : NULL;
        if (rf == NULL) {
          st = torc_last_status();
          break;
        }
        const double *v = torc_data(torc_contiguous(rf));
        int64_t m = torc_numel(rf);
        for (int64_t j = 0; j < m; j++)
          fprintf(pf, "%s%.6g", j ? " " : "", v[j]);
        fputc('\n', pf);
      }
    }
    torc_scope_end(scope);
    torc_batch_clear(&b);
  }
  if (st == TORC_OK && got < 0)
    st = torc_last_status();
  torc_set_grad_mode(gm);
  e->samples = n;
  e->loss = n ? lsum / (double)n : NAN;
  e->accuracy = classify && n ? (double)correct / (double)n : NAN;
  if (!classify) {
    free(e->confusion);
    e->confusion = NULL;
    e->classes = 0;
  }
  return st;
}

torc_status torc_evaluate(const torc_config *cfg, const char *checkpoint,
                          int predict, FILE *out, torc_eval_result *res) {
  if (cfg == NULL || checkpoint == NULL)
    return torc_train__null_input("torc_evaluate");
  if (res)
    memset(res, 0, sizeof *res);
  run r;
  torc_status st = torc_train__build(&r, cfg, 0);
  if (st == TORC_OK) {
    /* A torc checkpoint (its "model." part) or a plain state dict. */
    torc_state_dict *sd = torc_state_dict_load(checkpoint, r.dev);
    if (sd == NULL) {
      st = torc_last_status();
    } else {
      const char *fmt = torc_state_dict_meta(sd, "torc.format");
      if (fmt && strcmp(fmt, "checkpoint") == 0)
        st = torc_checkpoint_load_module(sd, r.model, NULL, NULL);
      else
        st = torc_module_load_state_dict(r.model, sd, NULL, NULL);
    }
    torc_state_dict_free(sd);
  }
  eval_out ev = {0};
  if (st == TORC_OK)
    st = torc_train__evaluate(&r, 0, 1, predict, out ? out : stdout, &ev);
  torc_train__free(&r);
  if (st == TORC_OK && res) {
    res->loss = ev.loss;
    res->accuracy = ev.accuracy;
    res->samples = ev.samples;
    res->classes = ev.classes;
    res->confusion = ev.confusion;
  } else {
    free(ev.confusion);
  }
  return st;
}
