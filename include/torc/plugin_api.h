/* torc/plugin_api.h — the public functions a plugin may call, as a table of
 * function pointers (SQLite's sqlite3ext.h, Lua's lua_State API). A plugin
 * never links libtorc (torc/plugin.h); the core hands it this table through
 * `host->api`, so a plugin defining a module type, a loss, an optimizer or
 * a data source computes with tensors without a link-time dependency:
 *
 *   #include <torc/plugin.h>
 *   #include <torc/plugin_api.h>
 *   static const torc_api *api;
 *   static int init(const torc_host *host, torc_plugin *self) {
 *     if (!TORC_HAS_SLOT(host, torc_host, register_module_type) ||
 *         !TORC_API_HAS(host->api, module_dtype))
 *       return host->set_error(TORC_ERR_ABI, "... needs torc ABI 1.1");
 *     api = host->api;
 *     ...
 *   }
 *   ... api->mul(alpha, api->tanh(x)) ...
 *
 * Every slot has the exact type of the public function of the same name
 * without the `torc_` prefix (api->module_new is torc_module_new) and the
 * same contract: ownership, scopes, NULL propagation and errors are those
 * written in torc/tensor.h, ops.h, nn.h, autograd.h, module.h and init.h.
 * This header includes those headers for their TYPES only: calling their
 * functions directly from a plugin fails at link time (-Wl,--no-undefined),
 * which is the point — go through the table.
 *
 * Rules (those of every torc table; tests/test_abi.c freezes the offsets):
 *  - struct_size comes first; the core sets it to the size of its table;
 *  - the table is append-only: a slot keeps its offset for the life of the
 *    ABI major version, and new slots go at the end with a minor bump;
 *  - before calling a slot newer than the oldest core you support, check
 *    that the core's table has it: TORC_API_HAS(api, slot). Slots are
 *    appended in order, so checking the newest slot you use covers all the
 *    older ones. The slots exist since ABI 1.1 (host->api itself is new
 *    in 1.1: check TORC_HAS_SLOT(host, torc_host, api) first), those
 *    after the "appended in ABI 1.2" mark since 1.2, those after the
 *    "appended in ABI 1.4" mark since 1.4, and so on for each mark; the
 *    op slots appended from the op table say their version in their row
 *    of torc/ops.def. The op table's section has no rows yet, so slots
 *    written by hand still go before its block (the end of the table);
 *    once it has rows, new hand-written slots go after them.
 *
 * The table is a constant owned by the core, valid from init until the
 * plugin is unloaded. Thread safety is that of the functions themselves.
 */
#ifndef TORC_PLUGIN_API_H
#define TORC_PLUGIN_API_H

#include <stddef.h>
#include <stdint.h>

#include "torc/autograd.h"
#include "torc/init.h"
#include "torc/module.h"
#include "torc/nn.h"
#include "torc/ops.h"
#include "torc/optim.h"
#include "torc/plugin.h"
#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* The kernel descriptor of tensor t, as the dispatcher hands kernels its
 * inputs (torc/plugin.h): the device memory handle of t's storage, its
 * element offset, dtype, ndim, shape and strides (in elements; the unused
 * dims are shape 1, stride 0). For a plugin layer or loss that calls its
 * own kernels on tensors. The view borrows t: it is valid while t is
 * alive and its storage unchanged; t's device runs work in order, so a
 * kernel queued on it after the ops that wrote t sees their results (the
 * device is torc_device_of(t), its index the kernel's device_index).
 * TORC_ERR_NULL for a NULL t or out. */
TORC_API torc_status torc_ktensor_of(const torc_tensor *t, torc_ktensor *out);

/* 1 if the core's api table contains `slot` (see the rules above). */
#define TORC_API_HAS(api, slot) TORC_HAS_SLOT(api, torc_api, slot)

typedef struct torc_api {
  size_t struct_size;

  /* ---- errors (torc/error.h). Set errors with host->set_error. ---- */
  const char *(*last_error)(void);
  torc_status (*last_status)(void);
  void (*clear_error)(void);

  /* ---- references and scopes (torc/tensor.h). A tensor returned while a
   * scope is open belongs to the scope: never release it; helpers open
   * their own scope and keep their result. ---- */
  torc_tensor *(*retain)(torc_tensor *t);
  void (*release)(torc_tensor *t);
  int (*scope_begin)(void);
  void (*scope_end)(int token);
  torc_tensor *(*scope_keep)(torc_tensor *t);

  /* ---- shape queries (borrowed results, valid while t lives) ---- */
  int (*ndim)(const torc_tensor *t);
  const int64_t *(*shape)(const torc_tensor *t);
  int64_t (*size)(const torc_tensor *t, int dim);
  int64_t (*numel)(const torc_tensor *t);
  torc_dtype (*dtype_of)(const torc_tensor *t);
  torc_device (*device_of)(const torc_tensor *t);
  int (*is_contiguous)(const torc_tensor *t);

  /* ---- creation (gen NULL = the default generator) ---- */
  torc_tensor *(*empty)(const int64_t *shape, int ndim, torc_dtype dtype,
                        torc_device dev);
  torc_tensor *(*zeros)(const int64_t *shape, int ndim, torc_dtype dtype,
                        torc_device dev);
  torc_tensor *(*ones)(const int64_t *shape, int ndim, torc_dtype dtype,
                       torc_device dev);
  torc_tensor *(*full)(const int64_t *shape, int ndim, double value,
                       torc_dtype dtype, torc_device dev);
  torc_tensor *(*zeros_like)(const torc_tensor *like);
  torc_tensor *(*ones_like)(const torc_tensor *like);
  torc_tensor *(*from_host)(const void *data, const int64_t *shape, int ndim,
                            torc_dtype dtype, torc_device dev);
  torc_tensor *(*rand)(const int64_t *shape, int ndim, torc_dtype dtype,
                       torc_device dev, torc_generator *gen);
  torc_tensor *(*randn)(const int64_t *shape, int ndim, torc_dtype dtype,
                        torc_device dev, torc_generator *gen);

  /* ---- reading values back to the host ---- */
  torc_status (*to_host)(const torc_tensor *t, void *dst, size_t nbytes);
  torc_status (*item)(const torc_tensor *t, double *out);

  /* ---- views and copies ---- */
  torc_tensor *(*reshape)(const torc_tensor *t, const int64_t *shape,
                          int ndim);
  torc_tensor *(*view)(const torc_tensor *t, const int64_t *shape, int ndim);
  torc_tensor *(*permute)(const torc_tensor *t, const int *dims, int ndim);
  torc_tensor *(*transpose)(const torc_tensor *t, int dim0, int dim1);
  torc_tensor *(*flatten)(const torc_tensor *t, int start_dim, int end_dim);
  torc_tensor *(*unsqueeze)(const torc_tensor *t, int dim);
  torc_tensor *(*squeeze)(const torc_tensor *t, int dim);
  torc_tensor *(*narrow)(const torc_tensor *t, int dim, int64_t start,
                         int64_t length);
  torc_tensor *(*expand)(const torc_tensor *t, const int64_t *shape,
                         int ndim);
  torc_tensor *(*contiguous)(const torc_tensor *t);
  torc_tensor *(*clone)(const torc_tensor *t);
  torc_tensor *(*detach)(const torc_tensor *t);
  torc_tensor *(*to)(const torc_tensor *t, torc_device dev);
  torc_tensor *(*to_dtype)(const torc_tensor *t, torc_dtype dtype);

  /* ---- in place ---- */
  torc_status (*copy_)(torc_tensor *dst, const torc_tensor *src);
  torc_status (*fill_)(torc_tensor *t, double value);
  torc_status (*zero_)(torc_tensor *t);

  /* ---- math (torc/ops.h): broadcasting, PyTorch's promotion,
   * differentiable ---- */
  torc_tensor *(*add)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*sub)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*mul)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*div)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*matmul)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*linear)(const torc_tensor *x, const torc_tensor *weight,
                         const torc_tensor *bias);
  torc_tensor *(*neg)(const torc_tensor *x);
  torc_tensor *(*exp)(const torc_tensor *x);
  torc_tensor *(*log)(const torc_tensor *x);
  torc_tensor *(*sqrt)(const torc_tensor *x);
  torc_tensor *(*tanh)(const torc_tensor *x);
  torc_tensor *(*sigmoid)(const torc_tensor *x);
  torc_tensor *(*relu)(const torc_tensor *x);
  torc_tensor *(*sum)(const torc_tensor *x, const int *dims, int n_dims,
                      int keepdim);
  torc_tensor *(*mean)(const torc_tensor *x, const int *dims, int n_dims,
                       int keepdim);
  torc_tensor *(*add_scalar)(const torc_tensor *x, double c);
  torc_tensor *(*mul_scalar)(const torc_tensor *x, double c);
  torc_tensor *(*pow_scalar)(const torc_tensor *x, double c);
  torc_tensor *(*softmax)(const torc_tensor *x, int dim);
  torc_tensor *(*log_softmax)(const torc_tensor *x, int dim);

  /* ---- neural-network ops (torc/nn.h) ---- */
  torc_tensor *(*conv2d)(const torc_tensor *x, const torc_tensor *weight,
                         const torc_tensor *bias,
                         const torc_conv2d_params *p);
  torc_tensor *(*conv_transpose2d)(const torc_tensor *x,
                                   const torc_tensor *weight,
                                   const torc_tensor *bias,
                                   const torc_conv2d_params *p);
  torc_tensor *(*max_pool2d)(const torc_tensor *x,
                             const torc_pool2d_params *p);
  torc_tensor *(*avg_pool2d)(const torc_tensor *x,
                             const torc_pool2d_params *p);
  torc_tensor *(*adaptive_avg_pool2d)(const torc_tensor *x, int64_t out_h,
                                      int64_t out_w);
  torc_tensor *(*batch_norm)(const torc_tensor *x, torc_tensor *running_mean,
                             torc_tensor *running_var,
                             const torc_tensor *weight,
                             const torc_tensor *bias, int training,
                             double momentum, double eps);
  torc_tensor *(*layer_norm)(const torc_tensor *x,
                             const int64_t *normalized_shape, int n,
                             const torc_tensor *weight,
                             const torc_tensor *bias, double eps);
  torc_tensor *(*group_norm)(const torc_tensor *x, int64_t groups,
                             const torc_tensor *weight,
                             const torc_tensor *bias, double eps);
  torc_tensor *(*dropout)(const torc_tensor *x, double p, int training,
                          torc_generator *gen);
  torc_tensor *(*embedding)(const torc_tensor *indices,
                            const torc_tensor *weight);

  /* ---- autograd (torc/autograd.h) ---- */
  torc_status (*set_requires_grad)(torc_tensor *t, int requires_grad);
  int (*requires_grad)(const torc_tensor *t);
  torc_tensor *(*grad_of)(const torc_tensor *t);
  torc_grad_mode (*set_grad_mode)(torc_grad_mode mode);
  torc_grad_mode (*get_grad_mode)(void);

  /* ---- modules (torc/module.h): what a module type's create, forward,
   * destroy and describe use. A module type's strings, vtable and keys live
   * in the plugin, so every module of a plugin's type must be freed before
   * torc_shutdown unloads the plugin. ---- */
  torc_module *(*module_new)(const char *type, const torc_module_vtable *vtable,
                             void *state);
  void (*module_free)(torc_module *m);
  void *(*module_state)(const torc_module *m);
  const char *(*module_type_name)(const torc_module *m);
  const char *(*module_path)(const torc_module *m);
  torc_status (*module_register_parameter)(torc_module *m, const char *name,
                                           torc_tensor *t);
  torc_status (*module_register_buffer)(torc_module *m, const char *name,
                                        torc_tensor *t, int persistent);
  torc_status (*module_set_buffer)(torc_module *m, const char *name,
                                   torc_tensor *t);
  torc_tensor *(*module_parameter)(const torc_module *m, const char *name);
  torc_tensor *(*module_buffer)(const torc_module *m, const char *name);
  torc_status (*module_add_child)(torc_module *m, const char *name,
                                  torc_module *child);
  torc_module *(*module_child)(const torc_module *m, const char *name);
  torc_tensor *(*module_forward)(torc_module *m, const torc_tensor *x);
  torc_tensor *(*module_forward_n)(torc_module *m,
                                   const torc_tensor *const *in, int n_in);
  int (*module_is_training)(const torc_module *m);
  torc_device (*module_device)(const torc_module *m);
  torc_dtype (*module_dtype)(const torc_module *m);
  /* Builds a child of any registered type (composite modules). */
  torc_module *(*module_build)(const char *type, const char *spec);

  /* ---- parameter initialisation (torc/init.h) ---- */
  torc_status (*init_uniform_)(torc_tensor *t, double low, double high,
                               torc_generator *gen);
  torc_status (*init_normal_)(torc_tensor *t, double mean, double std,
                              torc_generator *gen);
  torc_status (*init_constant_)(torc_tensor *t, double value);
  torc_status (*init_zeros_)(torc_tensor *t);
  torc_status (*init_ones_)(torc_tensor *t);
  torc_status (*init_kaiming_uniform_)(torc_tensor *t, double a,
                                       const char *mode,
                                       const char *nonlinearity,
                                       torc_generator *gen);
  torc_status (*init_kaiming_normal_)(torc_tensor *t, double a,
                                      const char *mode,
                                      const char *nonlinearity,
                                      torc_generator *gen);
  torc_status (*init_xavier_uniform_)(torc_tensor *t, double gain,
                                      torc_generator *gen);
  torc_status (*init_xavier_normal_)(torc_tensor *t, double gain,
                                     torc_generator *gen);
  torc_status (*init_fans)(const torc_tensor *t, int64_t *fan_in,
                           int64_t *fan_out);

  /* ---- appended in ABI 1.2: more math for losses and optimizers ---- */
  torc_tensor *(*abs)(const torc_tensor *x);
  torc_tensor *(*sign)(const torc_tensor *x);
  torc_tensor *(*square)(const torc_tensor *x);
  torc_tensor *(*log1p)(const torc_tensor *x);
  torc_tensor *(*rsqrt)(const torc_tensor *x);
  torc_tensor *(*softplus)(const torc_tensor *x, double beta,
                           double threshold);
  torc_tensor *(*clamp)(const torc_tensor *x, int has_min, double min,
                        int has_max, double max);
  torc_status (*clamp_)(torc_tensor *x, int has_min, double min, int has_max,
                        double max);
  torc_tensor *(*where)(const torc_tensor *cond, const torc_tensor *a,
                        const torc_tensor *b);
  torc_tensor *(*pow)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*maximum)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*minimum)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*eq)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*ne)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*lt)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*le)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*gt)(const torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*ge)(const torc_tensor *a, const torc_tensor *b);
  torc_status (*add_)(torc_tensor *a, const torc_tensor *b);
  torc_status (*sub_)(torc_tensor *a, const torc_tensor *b);
  torc_status (*mul_)(torc_tensor *a, const torc_tensor *b);
  torc_status (*div_)(torc_tensor *a, const torc_tensor *b);
  torc_tensor *(*sub_scalar)(const torc_tensor *x, double c);
  torc_tensor *(*div_scalar)(const torc_tensor *x, double c);
  torc_status (*add_scalar_)(torc_tensor *x, double c);
  torc_status (*mul_scalar_)(torc_tensor *x, double c);
  torc_tensor *(*amax)(const torc_tensor *x, const int *dims, int n_dims,
                       int keepdim);
  torc_tensor *(*amin)(const torc_tensor *x, const int *dims, int n_dims,
                       int keepdim);
  torc_tensor *(*var)(const torc_tensor *x, const int *dims, int n_dims,
                      double correction, int keepdim);
  torc_tensor *(*logsumexp)(const torc_tensor *x, const int *dims, int n_dims,
                            int keepdim);
  torc_tensor *(*norm)(const torc_tensor *x, double p, const int *dims,
                       int n_dims, int keepdim);
  torc_status (*max_dim)(const torc_tensor *x, int dim, int keepdim,
                         torc_tensor **values, torc_tensor **indices);
  torc_tensor *(*argmax)(const torc_tensor *x, const int *dim, int keepdim);
  torc_tensor *(*gather)(const torc_tensor *x, int dim,
                         const torc_tensor *index);
  torc_tensor *(*scatter_add)(const torc_tensor *x, int dim,
                              const torc_tensor *index, const torc_tensor *src);
  torc_tensor *(*index_select)(const torc_tensor *x, int dim,
                               const torc_tensor *index);
  torc_tensor *(*one_hot)(const torc_tensor *indices, int64_t num_classes);
  torc_tensor *(*cat)(const torc_tensor *const *ts, int n, int dim);
  torc_status (*set_grad)(torc_tensor *t, torc_tensor *g);
  torc_status (*zero_grad)(torc_tensor *t, int set_to_none);
  torc_status (*backward)(torc_tensor *root, const torc_tensor *grad,
                          int retain_graph);
  void (*manual_seed)(uint64_t seed);

  /* ---- appended in ABI 1.4: fused ops (check TORC_API_HAS(api,
   * adam_step_) first) ---- */
  torc_tensor *(*cross_entropy)(const torc_tensor *logits,
                                const torc_tensor *target,
                                const torc_tensor *weight,
                                const torc_cross_entropy_params *p);
  torc_status (*sgd_step_)(torc_tensor *param, const torc_tensor *grad,
                           torc_tensor *momentum_buffer,
                           const torc_sgd_step_params *p);
  torc_status (*adam_step_)(torc_tensor *param, const torc_tensor *grad,
                            torc_tensor *exp_avg, torc_tensor *exp_avg_sq,
                            torc_tensor *max_exp_avg_sq,
                            const torc_adam_step_params *p);

  /* ---- appended in ABI 1.7 (check TORC_API_HAS(api, ktensor_of)
   * first) ---- */
  torc_status (*ktensor_of)(const torc_tensor *t, torc_ktensor *out);

  /* ---- appended from the op table: one slot per row of torc/ops.def's
   * last section (fn UNARY_API or BINARY_API), in the table's order, each
   * of the type of its public function. That section is append-only for
   * this reason: a new op that wants a slot goes at its end, with an ABI
   * minor bump (tests/test_abi.c freezes the offsets). ---- */
#define TORC_API_SLOT_UNARY_API(name)                                          \
  torc_tensor *(*name)(const torc_tensor *x);
#define TORC_API_SLOT_BINARY_API(name)                                         \
  torc_tensor *(*name)(const torc_tensor *a, const torc_tensor *b);
#define TORC_API_SLOT_UNARY(name)
#define TORC_API_SLOT_BINARY(name)
#define TORC_API_SLOT_OWN(name)
#define TORC_API_SLOT_NONE(name)
#define TORC_OP(name, kind, rule, fn, ...) TORC_API_SLOT_##fn(name)
#include "torc/ops.def"
#undef TORC_OP
#undef TORC_API_SLOT_UNARY_API
#undef TORC_API_SLOT_BINARY_API
#undef TORC_API_SLOT_UNARY
#undef TORC_API_SLOT_BINARY
#undef TORC_API_SLOT_OWN
#undef TORC_API_SLOT_NONE
} torc_api;

TORC_END_DECLS

#endif /* TORC_PLUGIN_API_H */
