/* template.c — an out-of-tree torc backend to copy: device type "example"
 * (plain host memory, counted per device, with an optional memory limit)
 * and the kernels that make it usable: fill_ and copy for every dtype,
 * add and mul for f32. Built against the installed headers only; it links
 * nothing of libtorc and reaches the core through the torc_host table.
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <torc/plugin.h>

/* The one exported symbol (everything else is hidden by
 * -fvisibility=hidden and `static`). */
TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

#define EXAMPLE_DEVICES 1

/* Set once by init; valid until the plugin is unloaded. */
static const torc_host *host;

/* Bytes allocated per device, and the limit from the `memory_limit` key
 * (0 = none). Allocations may come from several threads: atomics. */
static _Atomic size_t allocated[EXAMPLE_DEVICES];
static size_t memory_limit;

/* ------------------------------------------------------------------------
 * The device. Each block carries a header with its size, so free can
 * update the counter (the core passes only the pointer back).
 * ---------------------------------------------------------------------- */

typedef union block_header {
  size_t nbytes;
  max_align_t align; /* keeps the payload aligned like malloc's */
} block_header;

static int example_count(void *user) {
  (void)user;
  return EXAMPLE_DEVICES;
}

static int example_alloc(void *user, int index, size_t nbytes, void **out) {
  (void)user;
  size_t used = atomic_load(&allocated[index]);
  if (memory_limit != 0 && (used > memory_limit || nbytes > memory_limit - used))
    return host->set_error(
        TORC_ERR_OOM,
        "example:%d: cannot allocate %zu bytes: %zu of %zu bytes in use; "
        "free tensors or raise memory_limit in [plugin.example]",
        index, nbytes, used, memory_limit);
  if (nbytes > SIZE_MAX - sizeof(block_header))
    return host->set_error(TORC_ERR_OOM,
                           "example:%d: cannot allocate %zu bytes", index,
                           nbytes);
  block_header *b = malloc(sizeof *b + nbytes);
  if (b == NULL)
    return host->set_error(
        TORC_ERR_OOM,
        "example:%d: cannot allocate %zu bytes: out of host memory "
        "(%zu bytes in use)",
        index, nbytes, used);
  b->nbytes = nbytes;
  atomic_fetch_add(&allocated[index], nbytes);
  *out = b + 1;
  return TORC_OK;
}

static void example_free(void *user, int index, void *ptr) {
  (void)user;
  if (ptr == NULL)
    return;
  block_header *b = (block_header *)ptr - 1;
  atomic_fetch_sub(&allocated[index], b->nbytes);
  free(b);
}

static int example_copy_from_host(void *user, int index, void *dst,
                                  size_t dst_offset, const void *src,
                                  size_t nbytes, uint32_t flags) {
  (void)user, (void)index, (void)flags; /* synchronous: flags do not matter */
  if (nbytes > 0)
    memcpy((char *)dst + dst_offset, src, nbytes);
  return TORC_OK;
}

static int example_copy_to_host(void *user, int index, void *dst,
                                const void *src, size_t src_offset,
                                size_t nbytes) {
  (void)user, (void)index;
  if (nbytes > 0)
    memcpy(dst, (const char *)src + src_offset, nbytes);
  return TORC_OK;
}

/* Every kernel runs synchronously, so there is never work to wait for. */
static int example_synchronize(void *user, int index) {
  (void)user, (void)index;
  return TORC_OK;
}

/* (optional slot) One line for `torc plugins`. */
static int example_describe(void *user, int index, char *buf, size_t size) {
  (void)user;
  size_t used = atomic_load(&allocated[index]);
  if (memory_limit != 0)
    snprintf(buf, size, "host memory, %zu of %zu bytes allocated", used,
             memory_limit);
  else
    snprintf(buf, size, "host memory, %zu bytes allocated", used);
  return TORC_OK;
}

/* (optional slot) Called at unload, after every tensor is freed. */
static void example_shutdown(void *user) {
  (void)user;
  for (int i = 0; i < EXAMPLE_DEVICES; i++)
    if (atomic_load(&allocated[i]) != 0)
      host->log(TORC_LOG_WARN, "example:%d: %zu bytes still allocated at "
                               "shutdown", i, atomic_load(&allocated[i]));
}

/* ------------------------------------------------------------------------
 * Kernels. Each receives torc_kernel_args (plugin.h): tensors as a base
 * pointer, an offset and strides in elements, following the op's contract
 * in torc/ops.h. Inputs may be strided (stride 0 on broadcast dims);
 * outputs are contiguous.
 * ---------------------------------------------------------------------- */

static int64_t numel(const torc_ktensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

/* Storage index of element i (row-major order over t's shape). */
static int64_t element_at(const torc_ktensor *t, int64_t i) {
  int64_t at = t->offset;
  for (int d = t->ndim - 1; d >= 0; d--) {
    at += (i % t->shape[d]) * t->strides[d];
    i /= t->shape[d];
  }
  return at;
}

/* "add", "mul" (f32): in[0], in[1] are already broadcast to out's shape. */
static int binary_f32(const torc_kernel_args *args, int is_mul) {
  const torc_ktensor *a = &args->in[0], *b = &args->in[1], *o = &args->out[0];
  const float *pa = a->data, *pb = b->data;
  float *po = o->data;
  int64_t n = numel(o);
  for (int64_t i = 0; i < n; i++) {
    float x = pa[element_at(a, i)], y = pb[element_at(b, i)];
    po[o->offset + i] = is_mul ? x * y : x + y;
  }
  return TORC_OK;
}

static int kernel_add_f32(const torc_kernel_args *args) {
  return binary_f32(args, 0);
}

static int kernel_mul_f32(const torc_kernel_args *args) {
  return binary_f32(args, 1);
}

/* Reads element k of a tensor of `dtype` as a double or an int64 (the
 * latter exact for every integer). */
static double load_f64(const void *p, int dtype, int64_t k) {
  switch (dtype) {
  case TORC_F32: return ((const float *)p)[k];
  case TORC_F64: return ((const double *)p)[k];
  case TORC_F16: return torc_f16_to_f32(((const uint16_t *)p)[k]);
  case TORC_BF16: return torc_bf16_to_f32(((const uint16_t *)p)[k]);
  case TORC_I32: return ((const int32_t *)p)[k];
  case TORC_I64: return (double)((const int64_t *)p)[k];
  case TORC_U8: return ((const uint8_t *)p)[k];
  default: return ((const uint8_t *)p)[k] != 0; /* bool */
  }
}

static int64_t load_i64(const void *p, int dtype, int64_t k) {
  switch (dtype) {
  case TORC_I32: return ((const int32_t *)p)[k];
  case TORC_I64: return ((const int64_t *)p)[k];
  case TORC_U8: return ((const uint8_t *)p)[k];
  case TORC_BOOL: return ((const uint8_t *)p)[k] != 0;
  default: return (int64_t)load_f64(p, dtype, k);
  }
}

/* Writes element k as a C cast would (bool as != 0). */
static void store_f64(void *p, int dtype, int64_t k, double v) {
  switch (dtype) {
  case TORC_F32: ((float *)p)[k] = (float)v; break;
  case TORC_F64: ((double *)p)[k] = v; break;
  case TORC_F16: ((uint16_t *)p)[k] = torc_f32_to_f16((float)v); break;
  case TORC_BF16: ((uint16_t *)p)[k] = torc_f32_to_bf16((float)v); break;
  case TORC_I32: ((int32_t *)p)[k] = (int32_t)(int64_t)v; break;
  case TORC_I64: ((int64_t *)p)[k] = (int64_t)v; break;
  case TORC_U8: ((uint8_t *)p)[k] = (uint8_t)(int64_t)v; break;
  default: ((uint8_t *)p)[k] = v != 0; break; /* bool */
  }
}

static void store_i64(void *p, int dtype, int64_t k, int64_t v) {
  switch (dtype) {
  case TORC_I32: ((int32_t *)p)[k] = (int32_t)v; break;
  case TORC_I64: ((int64_t *)p)[k] = v; break;
  case TORC_U8: ((uint8_t *)p)[k] = (uint8_t)v; break;
  case TORC_BOOL: ((uint8_t *)p)[k] = v != 0; break;
  default: store_f64(p, dtype, k, (double)v); break;
  }
}

static int is_float(int dtype) {
  return dtype == TORC_F32 || dtype == TORC_F64 || dtype == TORC_F16 ||
         dtype == TORC_BF16;
}

/* "fill_" (every dtype): every element of the contiguous out[0] := value
 * (floating dtypes) or ivalue (integers and bool). */
static int kernel_fill(const torc_kernel_args *args) {
  const torc_ktensor *o = &args->out[0];
  const torc_fill_params *p = args->params;
  int64_t n = numel(o);
  for (int64_t i = 0; i < n; i++) {
    if (is_float(o->dtype))
      store_f64(o->data, o->dtype, o->offset + i, p->value);
    else
      store_i64(o->data, o->dtype, o->offset + i, p->ivalue);
  }
  return TORC_OK;
}

/* "copy" (registered for TORC_DTYPE_ANY): out[0] := in[0] cast to out's
 * dtype; in may be strided, out is contiguous. Integer to integer goes
 * through int64 so that large values stay exact. */
static int kernel_copy(const torc_kernel_args *args) {
  const torc_ktensor *s = &args->in[0], *o = &args->out[0];
  int exact = !is_float(s->dtype) && !is_float(o->dtype);
  int64_t n = numel(o);
  for (int64_t i = 0; i < n; i++) {
    int64_t k = element_at(s, i);
    if (exact)
      store_i64(o->data, o->dtype, o->offset + i, load_i64(s->data, s->dtype, k));
    else
      store_f64(o->data, o->dtype, o->offset + i, load_f64(s->data, s->dtype, k));
  }
  return TORC_OK;
}

/* ------------------------------------------------------------------------
 * Registration.
 * ---------------------------------------------------------------------- */

/* Parses "0", "65536", "512K", "64M", "2G" (binary multiples). */
static int parse_size(const char *s, size_t *out) {
  char *end = NULL;
  if (s == NULL || *s < '0' || *s > '9')
    return -1;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned long long mul = 1;
  switch (*end) {
  case '\0': break;
  case 'k': case 'K': mul = 1ull << 10; end++; break;
  case 'm': case 'M': mul = 1ull << 20; end++; break;
  case 'g': case 'G': mul = 1ull << 30; end++; break;
  default: return -1;
  }
  if (*end != '\0' || v > SIZE_MAX / mul)
    return -1;
  *out = (size_t)(v * mul);
  return 0;
}

static int example_init(const torc_host *h, torc_plugin *self) {
  host = h;
  /* Slots appended to the host table in a later minor version must be
   * checked before use, e.g.: if (TORC_HAS_SLOT(h, torc_host, set_error_v)).
   * Every slot used here exists since ABI 1.0. */
  const char *limit = h->config_get(self, "memory_limit");
  if (parse_size(limit, &memory_limit) != 0)
    return h->set_error(TORC_ERR_CONFIG,
                        "example: memory_limit = '%s' is not a size; write "
                        "bytes with an optional K, M or G suffix (e.g. 64M), "
                        "or 0 for no limit",
                        limit ? limit : "");
  for (int i = 0; i < EXAMPLE_DEVICES; i++)
    atomic_store(&allocated[i], 0);

  torc_device_ops ops = {
      .struct_size = sizeof ops, /* always sizeof: tells the core our slots */
      .type = "example",
      .count = example_count,
      .alloc = example_alloc,
      .free = example_free,
      .copy_from_host = example_copy_from_host,
      .copy_to_host = example_copy_to_host,
      .synchronize = example_synchronize,
      .describe = example_describe,
      .shutdown = example_shutdown,
      /* host_alloc/host_free left NULL: plain host memory is pinned enough */
  };
  int st = h->register_device(self, &ops);
  if (st != TORC_OK)
    return st;

  static const struct {
    const char *op;
    int32_t dtype;
    torc_kernel_fn fn;
  } kernels[] = {
      {"add", TORC_F32, kernel_add_f32},
      {"mul", TORC_F32, kernel_mul_f32},
      {"copy", TORC_DTYPE_ANY, kernel_copy},
      {"fill_", TORC_F32, kernel_fill},  {"fill_", TORC_F64, kernel_fill},
      {"fill_", TORC_F16, kernel_fill},  {"fill_", TORC_BF16, kernel_fill},
      {"fill_", TORC_I32, kernel_fill},  {"fill_", TORC_I64, kernel_fill},
      {"fill_", TORC_U8, kernel_fill},   {"fill_", TORC_BOOL, kernel_fill},
  };
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
    torc_kernel_reg reg = {
        .struct_size = sizeof reg,
        .device_type = "example",
        .op = kernels[i].op,
        .dtype = kernels[i].dtype,
        .fn = kernels[i].fn,
    };
    /* On failure the core unregisters what we registered so far. */
    if ((st = h->register_kernel(self, &reg)) != TORC_OK)
      return st;
  }
  h->log(TORC_LOG_INFO, "example: %d device(s), memory limit %zu bytes",
         EXAMPLE_DEVICES, memory_limit);
  return TORC_OK;
}

/* The keys [plugin.example] accepts (any other is an error at its line). */
static const torc_plugin_key example_keys[] = {
    {"memory_limit",
     "bytes the example device may allocate: a number with an optional K, M "
     "or G suffix, 0 for no limit",
     "0"},
    {NULL, NULL, NULL},
};

static const torc_plugin_info example_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "example",
    .version = "0.1.0",
    .description = "template backend: host-memory device, f32 add and mul",
    .provides = TORC_PROVIDES_DEVICE | TORC_PROVIDES_KERNELS,
    .keys = example_keys,
    .init = example_init,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &example_info;
}
