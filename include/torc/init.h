/* torc/init.h — parameter initialisation (torch.nn.init). Each function
 * fills a floating tensor in place, without recording autograd (as under
 * torch.no_grad()), drawing from `gen` (NULL = the default generator), so
 * one seed gives the same values on every device. fan_in / fan_out follow
 * PyTorch's _calculate_fan_in_and_fan_out: for a tensor [d0, d1, k...],
 * fan_in = d1 * prod(k), fan_out = d0 * prod(k); tensors with fewer than
 * 2 dims are TORC_ERR_SHAPE for the fan-based schemes.
 *
 * Errors: TORC_ERR_NULL, TORC_ERR_DTYPE (not floating), TORC_ERR_SHAPE,
 * TORC_ERR_INVALID (bad mode or nonlinearity name, negative std).
 */
#ifndef TORC_INIT_H
#define TORC_INIT_H

#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* Recommended gain for a nonlinearity, as torch.nn.init.calculate_gain:
 * "linear", "conv2d", "sigmoid" 1; "tanh" 5/3; "relu" sqrt(2);
 * "leaky_relu" sqrt(2 / (1 + param^2)); "selu" 3/4. Returns -1 (and
 * TORC_ERR_INVALID) for an unknown name. */
TORC_API double torc_init_gain(const char *nonlinearity, double param);

/* fan_in and fan_out of t (either pointer may be NULL). */
TORC_API torc_status torc_init_fans(const torc_tensor *t, int64_t *fan_in,
                                    int64_t *fan_out);

/* U(low, high) and N(mean, std). */
TORC_API torc_status torc_init_uniform_(torc_tensor *t, double low,
                                        double high, torc_generator *gen);
TORC_API torc_status torc_init_normal_(torc_tensor *t, double mean,
                                       double std, torc_generator *gen);

/* Constant fills. */
TORC_API torc_status torc_init_constant_(torc_tensor *t, double value);
TORC_API torc_status torc_init_zeros_(torc_tensor *t);
TORC_API torc_status torc_init_ones_(torc_tensor *t);

/* Kaiming (He) init: std = gain / sqrt(fan), with fan = fan_in (mode
 * "fan_in") or fan_out ("fan_out") and gain = torc_init_gain(nonlinearity,
 * a). Uniform: U(-sqrt(3) std, sqrt(3) std). PyTorch's default for linear
 * and conv weights is kaiming_uniform with a = sqrt(5), "fan_in",
 * "leaky_relu": U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
TORC_API torc_status torc_init_kaiming_uniform_(torc_tensor *t, double a,
                                                const char *mode,
                                                const char *nonlinearity,
                                                torc_generator *gen);
TORC_API torc_status torc_init_kaiming_normal_(torc_tensor *t, double a,
                                               const char *mode,
                                               const char *nonlinearity,
                                               torc_generator *gen);

/* Xavier (Glorot) init: std = gain sqrt(2 / (fan_in + fan_out)). */
TORC_API torc_status torc_init_xavier_uniform_(torc_tensor *t, double gain,
                                               torc_generator *gen);
TORC_API torc_status torc_init_xavier_normal_(torc_tensor *t, double gain,
                                              torc_generator *gen);

/* (Semi-)orthogonal init (Saxe et al. 2013), as torch.nn.init.orthogonal_:
 * t viewed as [d0, rest] gets orthonormal rows (or columns, whichever are
 * fewer) from the QR decomposition of a normal matrix, times gain. */
TORC_API torc_status torc_init_orthogonal_(torc_tensor *t, double gain,
                                           torc_generator *gen);

/* Re-initialises every module below m with scheme `scheme`: "default"
 * (each layer's PyTorch init, as at construction), or one of
 * "kaiming_uniform", "kaiming_normal" (relu gain, fan_in), "xavier_uniform",
 * "xavier_normal", "orthogonal" for the weights of linear and conv layers,
 * whose biases are then zeroed. Norm layers keep ones/zeros; embeddings
 * N(0, 1). Each module is re-initialised by its type's reset slot
 * (torc_module_vtable.reset), so the module types of programs and plugins
 * take part; a type without one is left as it is. Errors: TORC_ERR_INVALID
 * for an unknown scheme (the message lists them), and a reset's own error.
 * Lazy parameters not yet created get the scheme when they are. */
struct torc_module;
TORC_API torc_status torc_module_init(struct torc_module *m,
                                      const char *scheme,
                                      torc_generator *gen);

TORC_END_DECLS

#endif /* TORC_INIT_H */
