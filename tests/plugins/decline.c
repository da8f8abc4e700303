/* tests/plugins/decline.c — kernels that decline some cases, for
 * tests/test_decline.c: an f32 "add" on the cpu above ref's that serves
 * even sizes and declines odd ones; a host-memory device "decldev" whose
 * f32 "add" does the same and whose any-dtype "add" declines everything;
 * and the module type "ktdouble", whose forward runs the plugin's own
 * kernel on tensors through api->ktensor_of. Counts what its kernels did
 * in the exported `decline_counts`. decldev's f32 "mul" computes through
 * device scratch from host->kernel_scratch (ABI 1.8) and records the
 * handle; decline_scratch_outside asks for scratch outside any kernel.
 * Built with DECLINE_FAIL it is
 * "decline_fail": one cpu "add" above all others that must never run,
 * and an init that fails, so the core unregisters that kernel again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "torc/module.h"
#include "torc/plugin.h"
#include "torc/plugin_api.h"

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

/* What the kernels did, read by the test through dlsym. */
typedef struct decline_counts_t {
  long served_cpu, served_dev, declined, ktdouble;
  void *scratch;       /* the last scratch handle decldev's mul got */
  int scratch_status;  /* what the last over-the-limit request returned */
} decline_counts_t;
TORC_PLUGIN_EXPORT decline_counts_t decline_counts;

static const torc_host *host;
static const torc_api *api;

static int64_t numel_of(const torc_ktensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    n *= t->shape[i];
  return n;
}

/* Element `flat` (row-major over `shape`) of t, in elements from data. */
static int64_t at(const torc_ktensor *t, const int64_t *shape, int ndim,
                  int64_t flat) {
  int64_t off = t->offset;
  for (int d = ndim - 1; d >= 0; d--) {
    off += (flat % shape[d]) * t->strides[d];
    flat /= shape[d];
  }
  return off;
}

/* out = a + b over strided f32 tensors (broadcast dims have stride 0). */
static void add_f32(const torc_kernel_args *args) {
  const torc_ktensor *o = &args->out[0];
  const float *a = args->in[0].data, *b = args->in[1].data;
  float *y = o->data;
  int64_t n = numel_of(o);
  for (int64_t i = 0; i < n; i++)
    y[at(o, o->shape, o->ndim, i)] = a[at(&args->in[0], o->shape, o->ndim, i)] +
                                     b[at(&args->in[1], o->shape, o->ndim, i)];
}

#ifndef DECLINE_FAIL

/* The cpu's and decldev's f32 add: even sizes only. */
static int add_even(const torc_kernel_args *args) {
  if (numel_of(&args->out[0]) % 2 != 0) {
    decline_counts.declined++;
    return TORC_KERNEL_DECLINED;
  }
  add_f32(args);
  if (args->kernel_data)
    decline_counts.served_dev++;
  else
    decline_counts.served_cpu++;
  return TORC_OK;
}

/* decldev's any-dtype add: declines every case. */
static int add_never(const torc_kernel_args *args) {
  (void)args;
  decline_counts.declined++;
  return TORC_KERNEL_DECLINED;
}

/* ---- decldev: one device backed by host memory ---- */

static int dev_count(void *user) {
  (void)user;
  return 1;
}

static int dev_alloc(void *user, int index, size_t nbytes, void **out) {
  (void)user;
  void *p = malloc(nbytes > 0 ? nbytes : 1);
  if (p == NULL)
    return host->set_error(TORC_ERR_OOM,
                           "decldev:%d: cannot allocate %zu "
                           "bytes",
                           index, nbytes);
  *out = p;
  return TORC_OK;
}

static void dev_free(void *user, int index, void *ptr) {
  (void)user, (void)index;
  free(ptr);
}

static int dev_copy_from_host(void *user, int index, void *dst,
                              size_t dst_offset, const void *src, size_t nbytes,
                              uint32_t flags) {
  (void)user, (void)index, (void)flags;
  if (nbytes > 0)
    memcpy((char *)dst + dst_offset, src, nbytes);
  return TORC_OK;
}

static int dev_copy_to_host(void *user, int index, void *dst, const void *src,
                            size_t src_offset, size_t nbytes) {
  (void)user, (void)index;
  if (nbytes > 0)
    memcpy(dst, (const char *)src + src_offset, nbytes);
  return TORC_OK;
}

static int dev_synchronize(void *user, int index) {
  (void)user, (void)index;
  return TORC_OK;
}

/* decldev's f32 mul: copies a into scratch, then y = scratch * b. A call
 * of 7 elements asks for scratch 5 times, one more than the core allows,
 * and fails with what the fifth request returned. */
static int mul_scratch(const torc_kernel_args *args) {
  const torc_ktensor *o = &args->out[0];
  int64_t n = numel_of(o);
  float *tmp = NULL;
  int st = host->kernel_scratch((size_t)n * sizeof(float), (void **)&tmp);
  if (st != TORC_OK)
    return st;
  decline_counts.scratch = tmp;
  if (n == 7) {
    void *more;
    for (int i = 0; i < 4 && st == TORC_OK; i++)
      st = host->kernel_scratch(16, &more);
    decline_counts.scratch_status = st;
    return st;
  }
  const float *a = args->in[0].data, *b = args->in[1].data;
  for (int64_t i = 0; i < n; i++)
    tmp[i] = a[at(&args->in[0], o->shape, o->ndim, i)];
  float *y = o->data;
  for (int64_t i = 0; i < n; i++)
    y[at(o, o->shape, o->ndim, i)] =
        tmp[i] * b[at(&args->in[1], o->shape, o->ndim, i)];
  return TORC_OK;
}

/* host->kernel_scratch called where no kernel runs: its status. */
TORC_PLUGIN_EXPORT int decline_scratch_outside(void);
int decline_scratch_outside(void) {
  void *p = (void *)1;
  int st = host->kernel_scratch(64, &p);
  return p == NULL ? st : TORC_ERR_INTERNAL;
}

/* ---- ktdouble: y = 2 x by the plugin's own kernel ---- */

/* The plugin's kernel: y (contiguous f32) = 2 x (any strides). */
static void double_f32(const torc_ktensor *x, const torc_ktensor *y) {
  const float *src = x->data;
  float *dst = (float *)y->data + y->offset;
  int64_t n = numel_of(x);
  for (int64_t i = 0; i < n; i++)
    dst[i] = 2.0f * src[at(x, x->shape, x->ndim, i)];
}

static torc_tensor *kt_forward(torc_module *m, const torc_tensor *const *in,
                               int n_in) {
  (void)m, (void)n_in;
  const torc_tensor *x = in[0];
  if (api->dtype_of(x) != TORC_F32 || api->device_of(x).type != 0) {
    host->set_error(TORC_ERR_DTYPE, "ktdouble: takes f32 tensors on the cpu");
    return NULL;
  }
  torc_tensor *y =
      api->empty(api->shape(x), api->ndim(x), TORC_F32, api->device_of(x));
  torc_ktensor kx, ky;
  if (y == NULL || api->ktensor_of(x, &kx) != TORC_OK ||
      api->ktensor_of(y, &ky) != TORC_OK) {
    api->release(y);
    return NULL;
  }
  double_f32(&kx, &ky);
  decline_counts.ktdouble++;
  return y;
}

static const torc_module_vtable kt_vtable = {
    .struct_size = sizeof(torc_module_vtable),
    .forward = kt_forward,
};

static torc_module *kt_create(const char *const *keys,
                              const char *const *values, int n, void *user) {
  (void)keys, (void)values, (void)n, (void)user;
  return api->module_new("ktdouble", &kt_vtable, NULL);
}

static const torc_module_key kt_keys[] = {{NULL, NULL, NULL}};

static const torc_module_type kt_type = {
    .struct_size = sizeof(torc_module_type),
    .name = "ktdouble",
    .description = "2 x, by the plugin's own kernel on api->ktensor_of views",
    .keys = kt_keys,
    .create = kt_create,
};

static int decline_init(const torc_host *h, torc_plugin *self) {
  host = h;
  if (!TORC_HAS_SLOT(h, torc_host, kernel_scratch) ||
      !TORC_API_HAS(h->api, ktensor_of))
    return h->set_error(TORC_ERR_ABI, "decline: needs torc ABI 1.8 (kernel "
                                      "declines, api->ktensor_of, "
                                      "kernel_scratch)");
  api = h->api;
  memset(&decline_counts, 0, sizeof decline_counts);
  static const torc_device_ops ops = {
      .struct_size = sizeof(torc_device_ops),
      .type = "decldev",
      .count = dev_count,
      .alloc = dev_alloc,
      .free = dev_free,
      .copy_from_host = dev_copy_from_host,
      .copy_to_host = dev_copy_to_host,
      .synchronize = dev_synchronize,
  };
  static int on_dev = 1; /* kernel_data: non-NULL marks decldev's kernel */
  const torc_kernel_reg regs[] = {
      {sizeof(torc_kernel_reg), "cpu", "add", TORC_F32, 1000, add_even, NULL,
       0},
      {sizeof(torc_kernel_reg), "decldev", "add", TORC_F32, 10, add_even,
       &on_dev, 0},
      {sizeof(torc_kernel_reg), "decldev", "add", TORC_DTYPE_ANY, 0, add_never,
       &on_dev, 0},
      {sizeof(torc_kernel_reg), "decldev", "mul", TORC_F32, 10, mul_scratch,
       &on_dev, 0},
  };
  int st = h->register_device(self, &ops);
  for (size_t i = 0; st == TORC_OK && i < sizeof regs / sizeof *regs; i++)
    st = h->register_kernel(self, &regs[i]);
  if (st == TORC_OK)
    st = h->register_module_type(self, &kt_type);
  return st;
}

#define DECLINE_NAME "decline"
#define DECLINE_DESC "test plugin whose kernels decline odd sizes"

#else /* DECLINE_FAIL */

static int add_must_not_run(const torc_kernel_args *args) {
  (void)args;
  return host->set_error(TORC_ERR_INTERNAL,
                         "decline_fail: its add ran although its load failed "
                         "and the core unregistered it");
}

static int decline_init(const torc_host *h, torc_plugin *self) {
  host = h;
  api = h->api;
  const torc_kernel_reg reg = {
      sizeof(torc_kernel_reg), "cpu", "add", TORC_F32, 2000,
      add_must_not_run,        NULL,  0};
  int st = h->register_kernel(self, &reg);
  if (st != TORC_OK)
    return st;
  (void)add_f32;
  return h->set_error(TORC_ERR_PLUGIN, "decline_fail: init fails on purpose, "
                                       "after registering a kernel");
}

#define DECLINE_NAME "decline_fail"
#define DECLINE_DESC "test plugin whose init fails after registering a kernel"

#endif /* DECLINE_FAIL */

static const torc_plugin_info decline_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = DECLINE_NAME,
    .version = "0.1.0",
    .description = DECLINE_DESC,
    .provides =
        TORC_PROVIDES_DEVICE | TORC_PROVIDES_KERNELS | TORC_PROVIDES_MODULE,
    .init = decline_init,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &decline_info;
}
