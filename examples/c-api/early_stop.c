/* examples/c-api/early_stop.c — early stopping on the test loss with the
 * trainer's callbacks (torc/train.h): trains FILE.ini as `torc train`
 * does (the same progress lines, metrics CSV and checkpoints), and ends
 * the run, with a checkpoint that --resume goes on from, once the test
 * loss has not improved by more than MIN_DELTA for PATIENCE evaluations.
 *
 *   cc early_stop.c $(pkg-config --cflags --libs torc) -o early_stop
 *   ./early_stop FILE.ini [PATIENCE [MIN_DELTA]]
 *
 * `make check` runs it on a small synthetic problem (early_stop.sh).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <torc/torc.h>

typedef struct early_stop {
  int patience;     /* evaluations without improvement before stopping */
  double min_delta; /* what counts as an improvement */
  double best;      /* the best test loss so far */
  int bad;          /* evaluations since the last improvement */
} early_stop;

/* Called after each evaluation on [data.test]. */
static int on_eval(const torc_train_event *ev, void *user) {
  early_stop *es = user;
  if (ev->test_loss < es->best - es->min_delta) {
    es->best = ev->test_loss;
    es->bad = 0;
    return TORC_TRAIN_CONTINUE;
  }
  if (++es->bad < es->patience)
    return TORC_TRAIN_CONTINUE;
  printf("early stopping: test loss %.4f, no better than %.4f for %d "
         "evaluations\n",
         ev->test_loss, es->best, es->bad);
  return TORC_TRAIN_STOP; /* the run ends once this epoch is done */
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE.ini [PATIENCE [MIN_DELTA]]\n", argv[0]);
    return 2;
  }
  early_stop es = {.patience = argc > 2 ? atoi(argv[2]) : 3,
                   .min_delta = argc > 3 ? atof(argv[3]) : 0.0,
                   .best = INFINITY};
  torc_config *cfg = torc_config_load(argv[1]);
  if (cfg == NULL || torc_config_apply(cfg) != TORC_OK) {
    fprintf(stderr, "%s\n", torc_last_error());
    torc_config_free(cfg);
    return 2;
  }
  torc_train_callbacks cb = {
      .struct_size = sizeof cb, .user = &es, .on_eval = on_eval};
  torc_train_opts opts = {.handle_sigint = 1};
  torc_train_result res;
  torc_status st = torc_train_ex(cfg, &opts, &cb, &res);
  torc_config_free(cfg);
  if (st != TORC_OK) {
    fprintf(stderr, "%s\n", torc_last_error());
    return st == TORC_ERR_INTERRUPTED ? 130 : 1;
  }
  printf("done: epochs=%lld best_test_loss=%.4f checkpoint=%s\n",
         (long long)res.epochs, es.best,
         res.checkpoint[0] ? res.checkpoint : "(none)");
  return 0;
}
