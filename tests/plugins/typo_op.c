/* tests/plugins/typo_op.c — a plugin whose kernel table names an op torc
 * does not have ("rleu" for "relu"), after registering a device type and a
 * good kernel. Built as typo_op, its load must fail naming the typo and the
 * nearest op, with both registrations rolled back; built with
 * TYPO_OP_IGNORES as typo_op_ignores, whose init ignores that refusal and
 * returns success, the same; built with TYPO_OP_NEWER as typo_op_newer, a
 * plugin of a newer minor ABI, it loads and its kernels for ops this torc
 * lacks are skipped (tests/test_plugin.c). */
#include "torc/plugin.h"

#ifdef TYPO_OP_NEWER
#define TYPO_NAME "typo_op_newer"
#define TYPO_ABI_MINOR (TORC_ABI_MINOR + 1)
#define TYPO_OP "op_of_a_later_torc"
#elif defined TYPO_OP_IGNORES
#define TYPO_NAME "typo_op_ignores"
#define TYPO_ABI_MINOR TORC_ABI_MINOR
#define TYPO_OP "rleu"
#else
#define TYPO_NAME "typo_op"
#define TYPO_ABI_MINOR TORC_ABI_MINOR
#define TYPO_OP "rleu"
#endif

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

static const torc_host *typo_host;

#define NOOP_DEVICE_HOST typo_host
#define NOOP_DEVICE_USED TYPO_NAME ": device used"
#include "noop_device.h"

/* Would shadow ref's cpu add kernel if the registration survived. */
static int typo_add(const torc_kernel_args *args) {
  (void)args;
  return typo_host->set_error(TORC_ERR_INTERNAL,
                              TYPO_NAME ": add kernel called");
}

static int typo_relu(const torc_kernel_args *args) {
  (void)args;
  return typo_host->set_error(TORC_ERR_INTERNAL,
                              TYPO_NAME ": kernel of an unknown op called");
}

static int typo_init(const torc_host *host, torc_plugin *self) {
  typo_host = host;
  torc_device_ops dev = noop_device_ops(TYPO_NAME "dev");
  int st = host->register_device(self, &dev);
  if (st != TORC_OK)
    return st;
  torc_kernel_reg reg = {
      .struct_size = sizeof reg,
      .device_type = "cpu",
      .op = "add",
      .dtype = TORC_F32,
      .priority = 1000,
      .fn = typo_add,
  };
  st = host->register_kernel(self, &reg);
  if (st != TORC_OK)
    return st;
  /* Two kernels for the unknown op: a newer plugin's skip is logged once. */
  static const torc_dtype dtypes[] = {TORC_F32, TORC_F64};
  for (int i = 0; i < 2; i++) {
    reg.op = TYPO_OP;
    reg.dtype = dtypes[i];
    reg.fn = typo_relu;
    st = host->register_kernel(self, &reg);
#ifndef TYPO_OP_IGNORES
    if (st != TORC_OK)
      return st;
#endif
  }
  return TORC_OK;
}

static const torc_plugin_info typo_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TYPO_ABI_MINOR,
    .name = TYPO_NAME,
    .version = "0.0.1",
    .description = "test plugin whose kernel table names an unknown op",
    .provides = TORC_PROVIDES_DEVICE | TORC_PROVIDES_KERNELS,
    .init = typo_init,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &typo_info;
}
