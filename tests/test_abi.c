/* tests/test_abi.c — freezes the plugin ABI: every slot offset of every
 * table in torc/plugin.h (x86-64 / LP64), the sizes of the structs passed
 * in arrays, and the numeric values of dtypes, status codes and flags.
 * A failure here means a released layout changed: append instead. */
#include <assert.h>
#include <stdbool.h>

#include "testutil.h"

#include "torc/plugin.h"

/* The offsets below are for LP64 (8-byte pointers, size_t and long, 8-byte
 * aligned int64_t), the layout of x86-64 and every other 64-bit Linux. */
#if defined(__SIZEOF_POINTER__) && __SIZEOF_POINTER__ == 8 &&                  \
    defined(__SIZEOF_SIZE_T__) && __SIZEOF_SIZE_T__ == 8 &&                    \
    defined(__SIZEOF_LONG__) && __SIZEOF_LONG__ == 8
#define TEST_ABI_LP64 1
#else
#define TEST_ABI_LP64 0
#endif

#define FROZEN(type, field, off)                                               \
  static_assert(offsetof(type, field) == (off),                                \
                #type "." #field " moved: slots are append-only")
#define FROZEN_SIZE(type, size)                                                \
  static_assert(sizeof(type) == (size),                                        \
                "sizeof(" #type ") changed: it is passed in arrays")
#define FROZEN_VALUE(name, value)                                              \
  static_assert((name) == (value), #name " was renumbered")

/* ---- numeric values: the same on every platform ---- */

FROZEN_VALUE(TORC_ABI_MAJOR, 1);
FROZEN_VALUE(TORC_KERNEL_MAX_DIMS, 8);

FROZEN_VALUE(TORC_F32, 0);
FROZEN_VALUE(TORC_F64, 1);
FROZEN_VALUE(TORC_F16, 2);
FROZEN_VALUE(TORC_BF16, 3);
FROZEN_VALUE(TORC_I32, 4);
FROZEN_VALUE(TORC_I64, 5);
FROZEN_VALUE(TORC_U8, 6);
FROZEN_VALUE(TORC_BOOL, 7);
FROZEN_VALUE(TORC_DTYPE_ANY, -1);

FROZEN_VALUE(TORC_OK, 0);
FROZEN_VALUE(TORC_ERR_INVALID, 1);
FROZEN_VALUE(TORC_ERR_NULL, 2);
FROZEN_VALUE(TORC_ERR_SHAPE, 3);
FROZEN_VALUE(TORC_ERR_DTYPE, 4);
FROZEN_VALUE(TORC_ERR_DEVICE, 5);
FROZEN_VALUE(TORC_ERR_OOM, 6);
FROZEN_VALUE(TORC_ERR_NO_KERNEL, 7);
FROZEN_VALUE(TORC_ERR_RANGE, 8);
FROZEN_VALUE(TORC_ERR_IO, 9);
FROZEN_VALUE(TORC_ERR_CONFIG, 10);
FROZEN_VALUE(TORC_ERR_PLUGIN, 11);
FROZEN_VALUE(TORC_ERR_ABI, 12);
FROZEN_VALUE(TORC_ERR_PERMISSION, 13);
FROZEN_VALUE(TORC_ERR_UNSUPPORTED, 14);
FROZEN_VALUE(TORC_ERR_AUTOGRAD, 15);
FROZEN_VALUE(TORC_ERR_INTERNAL, 16);

FROZEN_VALUE(TORC_LOG_ERROR, 0);
FROZEN_VALUE(TORC_LOG_WARN, 1);
FROZEN_VALUE(TORC_LOG_INFO, 2);
FROZEN_VALUE(TORC_LOG_DEBUG, 3);

FROZEN_VALUE(TORC_KERNEL_CONTIGUOUS, 1u);
FROZEN_VALUE(TORC_COPY_ASYNC_PINNED, 1u);
FROZEN_VALUE(TORC_PLUGIN_NO_UNLOAD, 1u);
FROZEN_VALUE(TORC_PROVIDES_DEVICE, 1u);
FROZEN_VALUE(TORC_PROVIDES_KERNELS, 2u);
FROZEN_VALUE(TORC_PROVIDES_DATA, 4u);
FROZEN_VALUE(TORC_PROVIDES_LOSS, 8u);
FROZEN_VALUE(TORC_PROVIDES_OPTIM, 16u);
FROZEN_VALUE(TORC_PROVIDES_MODULE, 32u);
FROZEN_VALUE(TORC_PROVIDES_COMM, 64u);

#if TEST_ABI_LP64

/* ---- tables with a struct_size: offsets frozen, may grow at the end ---- */

FROZEN(torc_host, struct_size, 0);
FROZEN(torc_host, abi_major, 8);
FROZEN(torc_host, abi_minor, 12);
FROZEN(torc_host, core_version, 16);
FROZEN(torc_host, set_error, 24);
FROZEN(torc_host, log, 32);
FROZEN(torc_host, config_get, 40);
FROZEN(torc_host, register_device, 48);
FROZEN(torc_host, register_kernel, 56);
FROZEN(torc_host, num_threads, 64);
FROZEN(torc_host, set_error_v, 72);

FROZEN(torc_plugin_info, struct_size, 0);
FROZEN(torc_plugin_info, abi_major, 8);
FROZEN(torc_plugin_info, abi_minor, 12);
FROZEN(torc_plugin_info, name, 16);
FROZEN(torc_plugin_info, version, 24);
FROZEN(torc_plugin_info, description, 32);
FROZEN(torc_plugin_info, provides, 40);
FROZEN(torc_plugin_info, flags, 44);
FROZEN(torc_plugin_info, keys, 48);
FROZEN(torc_plugin_info, init, 56);
FROZEN(torc_plugin_info, fini, 64);
FROZEN(torc_plugin_info, requires, 72);

FROZEN(torc_device_ops, struct_size, 0);
FROZEN(torc_device_ops, type, 8);
FROZEN(torc_device_ops, user, 16);
FROZEN(torc_device_ops, count, 24);
FROZEN(torc_device_ops, alloc, 32);
FROZEN(torc_device_ops, free, 40);
FROZEN(torc_device_ops, copy_from_host, 48);
FROZEN(torc_device_ops, copy_to_host, 56);
FROZEN(torc_device_ops, synchronize, 64);
FROZEN(torc_device_ops, host_alloc, 72);
FROZEN(torc_device_ops, host_free, 80);
FROZEN(torc_device_ops, describe, 88);
FROZEN(torc_device_ops, shutdown, 96);
FROZEN(torc_device_ops, flags, 104);
FROZEN(torc_device_ops, mem_info, 112);
FROZEN(torc_device_ops, stream_new, 120);
FROZEN(torc_device_ops, stream_free, 128);
FROZEN(torc_device_ops, event_new, 136);
FROZEN(torc_device_ops, event_record, 144);
FROZEN(torc_device_ops, stream_wait_event, 152);
FROZEN(torc_device_ops, event_query, 160);
FROZEN(torc_device_ops, event_synchronize, 168);
FROZEN(torc_device_ops, event_free, 176);
FROZEN(torc_device_ops, copy_to_host_async, 184);
FROZEN(torc_device_ops, copy_device_to_device, 192);
FROZEN(torc_device_ops, copy_from_host_async, 200);
FROZEN(torc_device_ops, no_device_reason, 208);

FROZEN(torc_kernel_reg, struct_size, 0);
FROZEN(torc_kernel_reg, device_type, 8);
FROZEN(torc_kernel_reg, op, 16);
FROZEN(torc_kernel_reg, dtype, 24);
FROZEN(torc_kernel_reg, priority, 28);
FROZEN(torc_kernel_reg, fn, 32);
FROZEN(torc_kernel_reg, data, 40);
FROZEN(torc_kernel_reg, flags, 48);

FROZEN(torc_kernel_args, struct_size, 0);
FROZEN(torc_kernel_args, op, 8);
FROZEN(torc_kernel_args, n_in, 16);
FROZEN(torc_kernel_args, n_out, 20);
FROZEN(torc_kernel_args, in, 24);
FROZEN(torc_kernel_args, out, 32);
FROZEN(torc_kernel_args, params, 40);
FROZEN(torc_kernel_args, params_size, 48);
FROZEN(torc_kernel_args, device_index, 56);
FROZEN(torc_kernel_args, n_threads, 60);
FROZEN(torc_kernel_args, kernel_data, 64);
FROZEN(torc_kernel_args, stream, 72);

/* The tables' sizes today (ABI 1.0): a minor version may only grow them. */
static_assert(sizeof(torc_host) >= 80, "torc_host shrank");
static_assert(sizeof(torc_plugin_info) >= 72, "torc_plugin_info shrank");
static_assert(sizeof(torc_device_ops) >= 216, "torc_device_ops shrank");
static_assert(sizeof(torc_kernel_reg) >= 56, "torc_kernel_reg shrank");
static_assert(sizeof(torc_kernel_args) >= 72, "torc_kernel_args shrank");

/* ---- structs without struct_size (arrays, op parameters): frozen whole ---- */

FROZEN(torc_ktensor, data, 0);
FROZEN(torc_ktensor, offset, 8);
FROZEN(torc_ktensor, dtype, 16);
FROZEN(torc_ktensor, ndim, 20);
FROZEN(torc_ktensor, shape, 24);
FROZEN(torc_ktensor, strides, 88);
FROZEN_SIZE(torc_ktensor, 152);

FROZEN(torc_reduce_params, dims_mask, 0);
FROZEN(torc_reduce_params, reserved, 4);
FROZEN(torc_reduce_params, correction, 8);
FROZEN_SIZE(torc_reduce_params, 16);

FROZEN(torc_fill_params, value, 0);
FROZEN(torc_fill_params, ivalue, 8);
FROZEN_SIZE(torc_fill_params, 16);

FROZEN(torc_random_params, seed, 0);
FROZEN(torc_random_params, offset, 8);
FROZEN(torc_random_params, a, 16);
FROZEN(torc_random_params, b, 24);
FROZEN(torc_random_params, low, 32);
FROZEN(torc_random_params, high, 40);
FROZEN_SIZE(torc_random_params, 48);

FROZEN(torc_plugin_key, name, 0);
FROZEN(torc_plugin_key, help, 8);
FROZEN(torc_plugin_key, default_value, 16);
FROZEN_SIZE(torc_plugin_key, 24);

#endif /* TEST_ABI_LP64 */

/* ---- run-time checks ---- */

/* TORC_HAS_SLOT: a slot counts only if it lies wholly within struct_size. */
static void test_has_slot_short_tables(void **state) {
  (void)state;
  torc_device_ops ops;
  memset(&ops, 0, sizeof ops);
  ops.struct_size = offsetof(torc_device_ops, host_alloc);
  assert_true(TORC_HAS_SLOT(&ops, torc_device_ops, count));
  assert_true(TORC_HAS_SLOT(&ops, torc_device_ops, synchronize));
  assert_false(TORC_HAS_SLOT(&ops, torc_device_ops, host_alloc));
  assert_false(TORC_HAS_SLOT(&ops, torc_device_ops, shutdown));
  /* A size ending inside a slot does not contain it. */
  ops.struct_size = offsetof(torc_device_ops, host_alloc) + 4;
  assert_false(TORC_HAS_SLOT(&ops, torc_device_ops, host_alloc));
  ops.struct_size = sizeof ops;
  assert_true(TORC_HAS_SLOT(&ops, torc_device_ops, shutdown));

  torc_plugin_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = offsetof(torc_plugin_info, fini);
  assert_true(TORC_HAS_SLOT(&info, torc_plugin_info, init));
  assert_false(TORC_HAS_SLOT(&info, torc_plugin_info, fini));

  torc_host host;
  memset(&host, 0, sizeof host);
  host.struct_size = offsetof(torc_host, set_error_v);
  assert_true(TORC_HAS_SLOT(&host, torc_host, num_threads));
  assert_false(TORC_HAS_SLOT(&host, torc_host, set_error_v));
}

/* Element sizes are part of what kernels assume. */
static void test_dtype_sizes(void **state) {
  (void)state;
  static const size_t want[TORC_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8, 1, 1};
  for (int d = 0; d < TORC_DTYPE_COUNT; d++)
    assert_int_equal(torc_dtype_size((torc_dtype)d), want[d]);
  assert_int_equal(torc_dtype_size(TORC_DTYPE_ANY), 0);
}

/* The library's status names match the header's list (a library built from
 * another list would report the wrong error for a plugin's status). */
static void test_status_names(void **state) {
  (void)state;
#define CHECK_STATUS(name, value, text)                                        \
  assert_string_equal(torc_status_name((torc_status)(value)), "TORC_" #name); \
  assert_string_equal(torc_status_str((torc_status)(value)), text);
  TORC_STATUS_LIST(CHECK_STATUS)
#undef CHECK_STATUS
}

static char abi_log[4096];

static void abi_log_cb(int level, const char *line, void *user) {
  (void)level, (void)user;
  size_t used = strlen(abi_log);
  snprintf(abi_log + used, sizeof abi_log - used, "%s\n", line);
}

/* The host table the core hands a plugin is the whole table of this
 * header, with this ABI version (goodkeys logs what it received). */
static void test_host_table_as_plugins_see_it(void **state) {
  (void)state;
  const char *dir = getenv("TORC_TEST_PLUGIN_DIR");
  if (dir == NULL) {
    print_message("TORC_TEST_PLUGIN_DIR is unset (run through make check): "
                  "skipping the host-table check\n");
    skip();
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/goodkeys.so", dir);
  abi_log[0] = '\0';
  torc_set_log_level(TORC_LOG_DEBUG);
  torc_set_log_callback(abi_log_cb, NULL);
  torc_status st = torc_plugin_load(path, NULL);
  torc_set_log_callback(NULL, NULL);
  torc_set_log_level(TORC_LOG_WARN);
  if (st != TORC_OK) {
    print_error("loading %s: %s\n", path, torc_last_error());
    fail();
  }
  char want[128];
  snprintf(want, sizeof want, "host table %zu bytes, ABI %d.%d",
           sizeof(torc_host), TORC_ABI_MAJOR, TORC_ABI_MINOR);
  assert_contains(abi_log, want);

  torc_plugin_summary s;
  assert_ok(torc_plugin_get(0, &s));
  assert_string_equal(s.name, "goodkeys");
  assert_int_equal(s.abi_major, TORC_ABI_MAJOR);
  assert_int_equal(s.abi_minor, 0);
  torc_shutdown();
}

int main(void) {
  if (!TEST_ABI_LP64 || sizeof(void *) != 8) {
    printf("test_abi: the frozen offsets are for LP64 (x86-64); this build "
           "has %zu-byte pointers, so the layout checks do not apply\n",
           sizeof(void *));
    return TEST_SKIP_STATUS;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_has_slot_short_tables),
      cmocka_unit_test(test_dtype_sizes),
      cmocka_unit_test(test_status_names),
      cmocka_unit_test(test_host_table_as_plugins_see_it),
  };
  return cmocka_run_group_tests_name("abi", tests, NULL, NULL);
}

/* ---- ABI 1.1: module types from plugins, and the api table ---- */

#include "torc/plugin_api.h"

#if TEST_ABI_LP64

FROZEN(torc_host, api, 80);
FROZEN(torc_host, register_module_type, 88);
static_assert(sizeof(torc_host) >= 96, "torc_host shrank");

/* torc_api (torc/plugin_api.h): a sample across its groups, the first and
 * the last slot of 1.1; each group's order is frozen with them. */
FROZEN(torc_api, struct_size, 0);
FROZEN(torc_api, last_error, 8);
FROZEN(torc_api, retain, 32);
FROZEN(torc_api, release, 40);
FROZEN(torc_api, scope_begin, 48);
FROZEN(torc_api, scope_end, 56);
FROZEN(torc_api, scope_keep, 64);
FROZEN(torc_api, ndim, 72);
FROZEN(torc_api, empty, 128);
FROZEN(torc_api, full, 152);
FROZEN(torc_api, from_host, 176);
FROZEN(torc_api, to_host, 200);
FROZEN(torc_api, reshape, 216);
FROZEN(torc_api, copy_, 328);
FROZEN(torc_api, add, 352);
FROZEN(torc_api, mul, 368);
FROZEN(torc_api, matmul, 384);
FROZEN(torc_api, tanh, 432);
FROZEN(torc_api, conv2d, 512);
FROZEN(torc_api, batch_norm, 552);
FROZEN(torc_api, dropout, 576);
FROZEN(torc_api, set_requires_grad, 592);
FROZEN(torc_api, grad_of, 608);
FROZEN(torc_api, module_new, 632);
FROZEN(torc_api, module_register_parameter, 672);
FROZEN(torc_api, module_forward, 728);
FROZEN(torc_api, module_dtype, 760);
FROZEN(torc_api, module_build, 768);
FROZEN(torc_api, init_uniform_, 776);
FROZEN(torc_api, init_kaiming_uniform_, 816);
FROZEN(torc_api, init_fans, 848);
static_assert(sizeof(torc_api) >= 856, "torc_api shrank");

/* What a plugin hands the core to define a module type (torc/module.h). */
FROZEN(torc_module_type, struct_size, 0);
FROZEN(torc_module_type, name, 8);
FROZEN(torc_module_type, description, 16);
FROZEN(torc_module_type, keys, 24);
FROZEN(torc_module_type, create, 32);
FROZEN(torc_module_type, user, 40);
static_assert(sizeof(torc_module_type) >= 48, "torc_module_type shrank");

FROZEN(torc_module_vtable, struct_size, 0);
FROZEN(torc_module_vtable, forward, 8);
FROZEN(torc_module_vtable, destroy, 16);
FROZEN(torc_module_vtable, describe, 24);
FROZEN(torc_module_vtable, reset, 32);
static_assert(sizeof(torc_module_vtable) >= 40, "torc_module_vtable shrank");

FROZEN(torc_module_key, name, 0);
FROZEN(torc_module_key, help, 8);
FROZEN(torc_module_key, default_value, 16);
FROZEN_SIZE(torc_module_key, 24);

#endif /* TEST_ABI_LP64 */

/* ---- ABI 1.2: data sources from plugins ---- */

#include "torc/data.h"

#if TEST_ABI_LP64

FROZEN(torc_host, register_data_source, 96);
static_assert(sizeof(torc_host) >= 104, "torc_host shrank");

/* What a plugin hands the core to define a data source (torc/data.h). */
FROZEN(torc_data_source_type, struct_size, 0);
FROZEN(torc_data_source_type, name, 8);
FROZEN(torc_data_source_type, description, 16);
FROZEN(torc_data_source_type, keys, 24);
FROZEN(torc_data_source_type, open, 32);
FROZEN(torc_data_source_type, length, 40);
FROZEN(torc_data_source_type, get, 48);
FROZEN(torc_data_source_type, close, 56);
FROZEN(torc_data_source_type, describe, 64);
FROZEN(torc_data_source_type, num_classes, 72);
FROZEN(torc_data_source_type, class_name, 80);
FROZEN(torc_data_source_type, user, 88);
static_assert(sizeof(torc_data_source_type) >= 96,
              "torc_data_source_type shrank");

FROZEN(torc_data_key, name, 0);
FROZEN(torc_data_key, help, 8);
FROZEN(torc_data_key, default_value, 16);
FROZEN(torc_data_key, is_path, 24);
FROZEN_SIZE(torc_data_key, 32);

#endif /* TEST_ABI_LP64 */

/* ---- ABI 1.3: loss, optimizer and scheduler types from plugins ---- */

#include "torc/optim.h"

#if TEST_ABI_LP64

FROZEN(torc_host, register_loss, 104);
FROZEN(torc_host, register_optimizer, 112);
FROZEN(torc_host, register_scheduler, 120);
static_assert(sizeof(torc_host) >= 128, "torc_host shrank");
/* ABI 1.8 */
FROZEN(torc_host, kernel_scratch, 128);
FROZEN(torc_host, deterministic_algorithms, 136);

/* What a plugin hands the core to define each type (torc/optim.h). */
FROZEN(torc_loss_type, struct_size, 0);
FROZEN(torc_loss_type, name, 8);
FROZEN(torc_loss_type, description, 16);
FROZEN(torc_loss_type, keys, 24);
FROZEN(torc_loss_type, create, 32);
FROZEN(torc_loss_type, destroy, 40);
FROZEN(torc_loss_type, forward, 48);
FROZEN(torc_loss_type, user, 56);
static_assert(sizeof(torc_loss_type) >= 64, "torc_loss_type shrank");

FROZEN(torc_optimizer_type, struct_size, 0);
FROZEN(torc_optimizer_type, name, 8);
FROZEN(torc_optimizer_type, description, 16);
FROZEN(torc_optimizer_type, keys, 24);
FROZEN(torc_optimizer_type, state_names, 32);
FROZEN(torc_optimizer_type, create, 40);
FROZEN(torc_optimizer_type, destroy, 48);
FROZEN(torc_optimizer_type, update, 56);
FROZEN(torc_optimizer_type, user, 64);
FROZEN(torc_optimizer_type, state_used, 72);
FROZEN(torc_optimizer_type, fused, 80); /* 1.7 */
static_assert(sizeof(torc_optimizer_type) >= 88,
              "torc_optimizer_type shrank");
FROZEN(torc_optimizer_fused, kind, 0);
FROZEN(torc_optimizer_fused, sgd, 8);
FROZEN(torc_optimizer_fused, adam, 56);
static_assert(TORC_OPTIMIZER_FUSED_SGD == 1 && TORC_OPTIMIZER_FUSED_ADAM == 2,
              "the fused step kinds are frozen");

FROZEN(torc_scheduler_type, struct_size, 0);
FROZEN(torc_scheduler_type, name, 8);
FROZEN(torc_scheduler_type, description, 16);
FROZEN(torc_scheduler_type, keys, 24);
FROZEN(torc_scheduler_type, create, 32);
FROZEN(torc_scheduler_type, destroy, 40);
FROZEN(torc_scheduler_type, lr, 48);
FROZEN(torc_scheduler_type, save, 56);
FROZEN(torc_scheduler_type, load, 64);
FROZEN(torc_scheduler_type, user, 72);
static_assert(sizeof(torc_scheduler_type) >= 80,
              "torc_scheduler_type shrank");

#endif /* TEST_ABI_LP64 */

/* ---- ABI 1.4 and 1.7: the fused-op slots, ktensor_of, and the kernel
 * status that declines a case ---- */

FROZEN_VALUE(TORC_KERNEL_DECLINED, -1);
FROZEN_VALUE(TORC_EVENT_NOT_READY, -2);

#if TEST_ABI_LP64

FROZEN(torc_api, cross_entropy, 1192);
FROZEN(torc_api, sgd_step_, 1200);
FROZEN(torc_api, adam_step_, 1208);
FROZEN(torc_api, ktensor_of, 1216);
static_assert(sizeof(torc_api) >= 1224, "torc_api shrank");

#endif /* TEST_ABI_LP64 */
