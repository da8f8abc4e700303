/* tests/plugins/init_fail.c — a plugin whose init registers a device type
 * and a kernel, then fails as a plugin missing its vendor driver would. The
 * loader must report the plugin's message and roll both registrations back
 * (tests/test_plugin.c checks the kernel count and the device type). */
#include "torc/plugin.h"

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

static const torc_host *init_fail_host;

#define NOOP_DEVICE_HOST init_fail_host
#define NOOP_DEVICE_USED "init_fail: device used after a failed init"
#include "noop_device.h"

/* Would shadow the cpu add kernel if the registration survived. */
static int init_fail_add(const torc_kernel_args *args) {
  (void)args;
  return init_fail_host->set_error(
      TORC_ERR_INTERNAL, "init_fail: kernel called after a failed init");
}

static int init_fail_init(const torc_host *host, torc_plugin *self) {
  init_fail_host = host;
  torc_device_ops dev = noop_device_ops("initfaildev");
  int st = host->register_device(self, &dev);
  if (st != TORC_OK)
    return st;
  torc_kernel_reg reg = {
      .struct_size = sizeof reg,
      .device_type = "cpu",
      .op = "add",
      .dtype = TORC_F32,
      .priority = 1000,
      .fn = init_fail_add,
  };
  st = host->register_kernel(self, &reg);
  if (st != TORC_OK)
    return st;
  return host->set_error(TORC_ERR_PLUGIN,
                         "init_fail: the widget driver is not installed; "
                         "install it or remove [plugin.init_fail]");
}

static const torc_plugin_info init_fail_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "init_fail",
    .version = "0.0.1",
    .description = "test plugin whose init fails after registering",
    .provides = TORC_PROVIDES_DEVICE | TORC_PROVIDES_KERNELS,
    .init = init_fail_init,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &init_fail_info;
}
