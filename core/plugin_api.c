/* core/plugin_api.c — the torc_api table (torc/plugin_api.h) handed to
 * plugins as host->api: one constant filled with the public functions, so
 * a plugin computes with tensors and defines modules without linking
 * libtorc. Append-only, in the header's order; tests/test_abi.c freezes it.
 */
#include "internal.h"

#include "torc/indexing.h"
#include "torc/plugin_api.h"

torc_status torc_ktensor_of(const torc_tensor *t, torc_ktensor *out) {
  if (t == NULL || out == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "torc_ktensor_of: %s is NULL (an earlier call "
                          "failed?)",
                          t == NULL ? "the tensor" : "out");
  memset(out, 0, sizeof *out);
  out->data = t->storage->ptr;
  out->offset = t->offset;
  out->dtype = t->dtype;
  out->ndim = t->ndim;
  for (int i = 0; i < TORC_KERNEL_MAX_DIMS; i++) {
    out->shape[i] = i < t->ndim ? t->shape[i] : 1;
    out->strides[i] = i < t->ndim ? t->strides[i] : 0;
  }
  return TORC_OK;
}

/* Read by plugin.c's host table. */
extern const torc_api torc__api;

const torc_api torc__api = {
    .struct_size = sizeof(torc_api),

    .last_error = torc_last_error,
    .last_status = torc_last_status,
    .clear_error = torc_clear_error,

    .retain = torc_retain,
    .release = torc_release,
    .scope_begin = torc_scope_begin,
    .scope_end = torc_scope_end,
    .scope_keep = torc_scope_keep,

    .ndim = torc_ndim,
    .shape = torc_shape,
    .size = torc_size,
    .numel = torc_numel,
    .dtype_of = torc_dtype_of,
    .device_of = torc_device_of,
    .is_contiguous = torc_is_contiguous,

    .empty = torc_empty,
    .zeros = torc_zeros,
    .ones = torc_ones,
    .full = torc_full,
    .zeros_like = torc_zeros_like,
    .ones_like = torc_ones_like,
    .from_host = torc_from_host,
    .rand = torc_rand,
    .randn = torc_randn,

    .to_host = torc_to_host,
    .item = torc_item,

    .reshape = torc_reshape,
    .view = torc_view,
    .permute = torc_permute,
    .transpose = torc_transpose,
    .flatten = torc_flatten,
    .unsqueeze = torc_unsqueeze,
    .squeeze = torc_squeeze,
    .narrow = torc_narrow,
    .expand = torc_expand,
    .contiguous = torc_contiguous,
    .clone = torc_clone,
    .detach = torc_detach,
    .to = torc_to,
    .to_dtype = torc_to_dtype,

    .copy_ = torc_copy_,
    .fill_ = torc_fill_,
    .zero_ = torc_zero_,

    .add = torc_add,
    .sub = torc_sub,
    .mul = torc_mul,
    .div = torc_div,
    .matmul = torc_matmul,
    .linear = torc_linear,
    .neg = torc_neg,
    .exp = torc_exp,
    .log = torc_log,
    .sqrt = torc_sqrt,
    .tanh = torc_tanh,
    .sigmoid = torc_sigmoid,
    .relu = torc_relu,
    .sum = torc_sum,
    .mean = torc_mean,
    .add_scalar = torc_add_scalar,
    .mul_scalar = torc_mul_scalar,
    .pow_scalar = torc_pow_scalar,
    .softmax = torc_softmax,
    .log_softmax = torc_log_softmax,

    .conv2d = torc_conv2d,
    .conv_transpose2d = torc_conv_transpose2d,
    .max_pool2d = torc_max_pool2d,
    .avg_pool2d = torc_avg_pool2d,
    .adaptive_avg_pool2d = torc_adaptive_avg_pool2d,
    .batch_norm = torc_batch_norm,
    .layer_norm = torc_layer_norm,
    .group_norm = torc_group_norm,
    .dropout = torc_dropout,
    .embedding = torc_embedding,

    .set_requires_grad = torc_set_requires_grad,
    .requires_grad = torc_requires_grad,
    .grad_of = torc_grad_of,
    .set_grad_mode = torc_set_grad_mode,
    .get_grad_mode = torc_get_grad_mode,

    .module_new = torc_module_new,
    .module_free = torc_module_free,
    .module_state = torc_module_state,
    .module_type_name = torc_module_type_name,
    .module_path = torc_module_path,
    .module_register_parameter = torc_module_register_parameter,
    .module_register_buffer = torc_module_register_buffer,
    .module_set_buffer = torc_module_set_buffer,
    .module_parameter = torc_module_parameter,
    .module_buffer = torc_module_buffer,
    .module_add_child = torc_module_add_child,
    .module_child = torc_module_child,
    .module_forward = torc_module_forward,
    .module_forward_n = torc_module_forward_n,
    .module_is_training = torc_module_is_training,
    .module_device = torc_module_device,
    .module_dtype = torc_module_dtype,
    .module_build = torc_module_build,

    .init_uniform_ = torc_init_uniform_,
    .init_normal_ = torc_init_normal_,
    .init_constant_ = torc_init_constant_,
    .init_zeros_ = torc_init_zeros_,
    .init_ones_ = torc_init_ones_,
    .init_kaiming_uniform_ = torc_init_kaiming_uniform_,
    .init_kaiming_normal_ = torc_init_kaiming_normal_,
    .init_xavier_uniform_ = torc_init_xavier_uniform_,
    .init_xavier_normal_ = torc_init_xavier_normal_,
    .init_fans = torc_init_fans,

    .abs = torc_abs,
    .sign = torc_sign,
    .square = torc_square,
    .log1p = torc_log1p,
    .rsqrt = torc_rsqrt,
    .softplus = torc_softplus,
    .clamp = torc_clamp,
    .clamp_ = torc_clamp_,
    .where = torc_where,
    .pow = torc_pow,
    .maximum = torc_maximum,
    .minimum = torc_minimum,
    .eq = torc_eq,
    .ne = torc_ne,
    .lt = torc_lt,
    .le = torc_le,
    .gt = torc_gt,
    .ge = torc_ge,
    .add_ = torc_add_,
    .sub_ = torc_sub_,
    .mul_ = torc_mul_,
    .div_ = torc_div_,
    .sub_scalar = torc_sub_scalar,
    .div_scalar = torc_div_scalar,
    .add_scalar_ = torc_add_scalar_,
    .mul_scalar_ = torc_mul_scalar_,
    .amax = torc_amax,
    .amin = torc_amin,
    .var = torc_var,
    .logsumexp = torc_logsumexp,
    .norm = torc_norm,
    .max_dim = torc_max_dim,
    .argmax = torc_argmax,
    .gather = torc_gather,
    .scatter_add = torc_scatter_add,
    .index_select = torc_index_select,
    .one_hot = torc_one_hot,
    .cat = torc_cat,
    .set_grad = torc_set_grad,
    .zero_grad = torc_zero_grad,
    .backward = torc_backward,
    .manual_seed = torc_manual_seed,

    .cross_entropy = torc_cross_entropy,
    .sgd_step_ = torc_sgd_step_,
    .adam_step_ = torc_adam_step_,

    .ktensor_of = torc_ktensor_of,

/* The op table's slots (torc/ops.def's fn UNARY_API, BINARY_API rows). */
#define TORC_API_SET_UNARY_API(name) .name = torc_##name,
#define TORC_API_SET_BINARY_API(name) .name = torc_##name,
#define TORC_API_SET_UNARY(name)
#define TORC_API_SET_BINARY(name)
#define TORC_API_SET_OWN(name)
#define TORC_API_SET_NONE(name)
#define TORC_OP(name, kind, rule, fn, ...) TORC_API_SET_##fn(name)
#include "torc/ops.def"
#undef TORC_OP
};
