/* plugins/optim/optim_internal.h — what the optim plugin's files share: the
 * host and api tables, the optimizer and scheduler types, and key parsing
 * with errors a user can act on. Internal to the plugin; every symbol is
 * hidden (the plugin exports only torc_plugin_entry).
 */
#ifndef TORC_OPTIM_PLUGIN_INTERNAL_H
#define TORC_OPTIM_PLUGIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "torc/optim.h"
#include "torc/plugin.h"
#include "torc/plugin_api.h"

/* Set by the plugin's init; valid until the plugin is unloaded. */
extern const torc_host *optim_host;
extern const torc_api *optim_api;

/* The optimizer types (optimizers.c) and scheduler types (schedulers.c). */
extern const torc_optimizer_type optim_sgd_type;
extern const torc_optimizer_type optim_adam_type;
extern const torc_optimizer_type optim_adamw_type;
extern const torc_optimizer_type optim_rmsprop_type;
extern const torc_optimizer_type optim_adagrad_type;
extern const torc_scheduler_type optim_step_type;
extern const torc_scheduler_type optim_multistep_type;
extern const torc_scheduler_type optim_exponential_type;
extern const torc_scheduler_type optim_cosine_type;
extern const torc_scheduler_type optim_plateau_type;
extern const torc_scheduler_type optim_onecycle_type;
extern const torc_scheduler_type optim_cyclic_type;

/* Records an error for the calling thread (host->set_error); returns st. */
int optim_error(int status, const char *fmt, ...) TORC_PRINTF(2, 3);

/* TORC_ERR_OOM naming `what`. */
int optim_oom(const char *what);

/* The value of `key` among the n pairs (the core passes every declared
 * key, with defaults filled in), or NULL. */
const char *optim_value(const char *const *keys, const char *const *values,
                        int n, const char *key);

/* Parses a finite number from key `key` of type `type` into *out and checks
 * lo <= *out (lo_open: lo < *out) and *out <= hi (hi_open: *out < hi);
 * TORC_ERR_INVALID naming the type, the key, the value and the accepted
 * range otherwise. Use -INFINITY / INFINITY for no bound. */
int optim_parse_num(const char *type, const char *key, const char *text,
                    double lo, int lo_open, double hi, int hi_open,
                    double *out);

/* Parses an integer in [min, max]. */
int optim_parse_int(const char *type, const char *key, const char *text,
                    int64_t min, int64_t max, int64_t *out);

/* Parses yes|no (also true/false, on/off, 1/0) into *out. */
int optim_parse_bool(const char *type, const char *key, const char *text,
                     int *out);

/* Parses one of the n words `choices` into *out (its index). */
int optim_parse_choice(const char *type, const char *key, const char *text,
                       const char *const *choices, int n, int *out);

/* Parses a list of numbers separated by commas or blanks into out[0..max)
 * and sets *n; an empty text gives *n = 0. Errors name the bad item. */
int optim_parse_list(const char *type, const char *key, const char *text,
                     double *out, int max, int *n);

#endif /* TORC_OPTIM_PLUGIN_INTERNAL_H */
