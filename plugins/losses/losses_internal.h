/* plugins/losses/losses_internal.h — what the losses plugin's files share:
 * the host and api tables, the parsed options of a loss (one struct for
 * every type), key parsing, checks of input and target with errors a user
 * can act on, and the reduction. Internal: every symbol is hidden.
 */
#ifndef TORC_LOSSES_PLUGIN_INTERNAL_H
#define TORC_LOSSES_PLUGIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "torc/optim.h"
#include "torc/plugin.h"
#include "torc/plugin_api.h"

/* Set by the plugin's init; valid until the plugin is unloaded. */
extern const torc_host *loss_host;
extern const torc_api *loss_api;

/* Reductions: mean, sum, none, and kl_div's batchmean (sum / batch). */
typedef enum loss_reduction {
  LOSS_MEAN = 0,
  LOSS_SUM = 1,
  LOSS_NONE = 2,
  LOSS_BATCHMEAN = 3
} loss_reduction;

/* Most class weights (or pos_weight entries) a loss takes. */
#define LOSS_MAX_WEIGHTS 65536

/* The options of one configured loss; which fields count depends on the
 * type (the others keep their defaults). */
typedef struct loss_state {
  const char *name;          /* the type's name, for messages */
  loss_reduction reduction;
  double beta;               /* smooth_l1 */
  double delta;              /* huber */
  double label_smoothing;    /* cross_entropy */
  int64_t ignore_index;      /* cross_entropy, nll */
  int class_last;            /* cross_entropy, nll: classes on the last
                                dim ([N, L, C]) rather than dim 1 */
  int log_target;            /* kl_div */
  double *weight;            /* class weights or per-last-dim weights */
  int n_weight;              /* 0: none */
  double *pos_weight;        /* bce_with_logits */
  int n_pos_weight;
  int checks_left;           /* cross_entropy: forwards still checked for
                                the extra-softmax mistake */
} loss_state;

/* The loss types (elementwise.c, classify.c). */
extern const torc_loss_type loss_mse_type;
extern const torc_loss_type loss_l1_type;
extern const torc_loss_type loss_smooth_l1_type;
extern const torc_loss_type loss_huber_type;
extern const torc_loss_type loss_bce_type;
extern const torc_loss_type loss_bce_with_logits_type;
extern const torc_loss_type loss_kl_div_type;
extern const torc_loss_type loss_cross_entropy_type;
extern const torc_loss_type loss_nll_type;

/* Records an error for the calling thread; returns st. */
int loss_error(int status, const char *fmt, ...) TORC_PRINTF(2, 3);

/* The shared create and destroy: parses every key the type declares (the
 * core passes all of them, defaults filled in) into a loss_state. `user`
 * is the type (for its name). */
int loss_create(const char *const *keys, const char *const *values, int n,
                void *user, void **state);
void loss_destroy(void *state);

/* "[32, 10]" (or "[]" for a scalar) into buf; returns buf. */
const char *loss_shape_str(const torc_tensor *t, char *buf, size_t size);

/* The dtype's short name ("f32", "i64"). */
const char *loss_dtype_str(torc_dtype dt);

/* Checks that neither is NULL (TORC_ERR_NULL, keeping an earlier failure's
 * message), that the input is floating and that both are on one device.
 * Returns TORC_OK or the error's status. */
int loss_check_inputs(const loss_state *s, const torc_tensor *input,
                      const torc_tensor *target);

/* Checks that input is floating and that target has input's shape, dtype
 * and device; `what` names what the target holds ("targets",
 * "probabilities"). Returns TORC_OK or an error naming the shapes. */
int loss_check_same(const loss_state *s, const torc_tensor *input,
                    const torc_tensor *target, const char *what);

/* Applies the reduction to elementwise losses `t` (of the input's shape);
 * batchmean divides the sum by the input's first dim. */
torc_tensor *loss_reduce(const loss_state *s, const torc_tensor *t);

/* A 1-D tensor of the n values on dev, of dtype dt. */
torc_tensor *loss_vector(const double *v, int n, torc_dtype dt,
                         torc_device dev);

/* The scalar `v` as a 0-dim tensor of dtype dt on dev. */
torc_tensor *loss_scalar(double v, torc_dtype dt, torc_device dev);

/* Reads the values of the first two elements of a 2-element tensor. */
int loss_read2(const torc_tensor *t, double out[2]);

/* Finishes a forward: keeps `out` (when not NULL) out of the scope opened
 * with `token`, closes the scope and returns out. */
torc_tensor *loss_finish(int token, torc_tensor *out);

#endif /* TORC_LOSSES_PLUGIN_INTERNAL_H */
