/* plugins/data/synthetic.c — the "synthetic" source: N(0, 1) f32 inputs and
 * uniform class targets computed from Philox keyed by (seed, index), so
 * any sample is the same on any thread, in any order, with no state.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"
#include "torc/philox.h"

/* Targets are drawn under a key of their own, so they are independent of
 * the inputs' stream. */
#define SYN_TARGET_KEY 0x9E3779B97F4A7C15ull

typedef struct syn_ds {
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  int ndim;
  int64_t numel;
  int64_t classes, samples;
  uint64_t seed;
} syn_ds;

/* Parses "1,28,28" into ds->shape. */
static int syn_shape(const char *text, syn_ds *ds) {
  const char *p = text ? text : "";
  ds->ndim = 0;
  ds->numel = 1;
  for (;;) {
    while (*p == ' ' || *p == '\t')
      p++;
    char *end = NULL;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 1 || v > (1LL << 24) ||
        ds->ndim == TORC_KERNEL_MAX_DIMS - 1)
      goto bad;
    ds->shape[ds->ndim++] = v;
    ds->numel *= v;
    if (ds->numel > (1LL << 28))
      goto bad;
    p = end;
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p == '\0')
      return TORC_OK;
    if (*p != ',' && *p != 'x')
      goto bad;
    p++;
  }
bad:
  return dsrc_error(TORC_ERR_INVALID,
                    "synthetic: key 'shape' = '%s' is not a sample shape; "
                    "give 1 to %d sizes >= 1, comma-separated, e.g. "
                    "1,28,28 (at most 2^28 elements)",
                    text ? text : "", TORC_KERNEL_MAX_DIMS - 1);
}

static int syn_open(const char *const *keys, const char *const *values, int n,
                    void *user, void **handle) {
  (void)user;
  *handle = NULL;
  syn_ds *ds = calloc(1, sizeof *ds);
  if (ds == NULL)
    return dsrc_oom("synthetic", sizeof *ds);
  int64_t seed = 0;
  int st = syn_shape(dsrc_value(keys, values, n, "shape"), ds);
  if (st == TORC_OK)
    st = dsrc_parse_int("synthetic", "classes",
                        dsrc_value(keys, values, n, "classes"), 1,
                        (int64_t)1 << 31, &ds->classes);
  if (st == TORC_OK)
    st = dsrc_parse_int("synthetic", "samples",
                        dsrc_value(keys, values, n, "samples"), 1,
                        (int64_t)1 << 40, &ds->samples);
  if (st == TORC_OK)
    st = dsrc_parse_int("synthetic", "seed",
                        dsrc_value(keys, values, n, "seed"), 0, INT64_MAX,
                        &seed);
  if (st == TORC_OK && ds->samples > ((int64_t)1 << 62) / ds->numel)
    st = dsrc_error(TORC_ERR_INVALID,
                    "synthetic: samples = %" PRId64 " of %" PRId64
                    " elements each exceeds 2^62 elements; give fewer "
                    "samples or a smaller shape",
                    ds->samples, ds->numel);
  if (st != TORC_OK) {
    free(ds);
    return st;
  }
  ds->seed = (uint64_t)seed;
  *handle = ds;
  return TORC_OK;
}

static int64_t syn_length(void *handle) {
  return ((syn_ds *)handle)->samples;
}

/* Element j of sample i is torc_philox_normal(seed, i * numel + j); the
 * target is torc_philox_randint(seed ^ SYN_TARGET_KEY, i, 0, classes). */
static int syn_get(void *handle, int64_t index, torc_tensor **input,
                   torc_tensor **target) {
  const syn_ds *ds = handle;
  float *buf = malloc(sizeof *buf * (size_t)ds->numel);
  if (buf == NULL)
    return dsrc_oom("synthetic", sizeof *buf * (size_t)ds->numel);
  uint64_t base = (uint64_t)index * (uint64_t)ds->numel;
  for (int64_t j = 0; j < ds->numel; j++)
    buf[j] = (float)torc_philox_normal(ds->seed, base + (uint64_t)j);
  int st = dsrc_tensor(buf, ds->shape, ds->ndim, TORC_F32, input);
  free(buf);
  if (st != TORC_OK)
    return st;
  int64_t cls = torc_philox_randint(ds->seed ^ SYN_TARGET_KEY,
                                    (uint64_t)index, 0, ds->classes);
  st = dsrc_class_target(cls, target);
  if (st != TORC_OK) {
    dsrc_api->release(*input);
    *input = NULL;
  }
  return st;
}

static void syn_close(void *handle) { free(handle); }

static int syn_describe(void *handle, char *buf, size_t size) {
  const syn_ds *ds = handle;
  char shape[160];
  dsrc_shape_str(shape, sizeof shape, ds->shape, ds->ndim);
  snprintf(buf, size,
           "%" PRId64 " samples, input %s f32 (N(0, 1), seed %" PRIu64
           "), %" PRId64 " classes",
           ds->samples, shape, ds->seed, ds->classes);
  return TORC_OK;
}

static int64_t syn_num_classes(void *handle) {
  return ((syn_ds *)handle)->classes;
}

static const torc_data_key syn_keys[] = {
    {"shape", "one sample's shape, comma-separated, e.g. 1,28,28", NULL, 0},
    {"classes", "number of classes (>= 1); targets are uniform over them",
     "10", 0},
    {"samples", "number of samples (>= 1)", "1000", 0},
    {"seed", "seed of the Philox stream (an integer >= 0); sample i depends "
             "only on (seed, i)",
     "0", 0},
    {NULL, NULL, NULL, 0},
};

const torc_data_source_type dsrc_synthetic_type = {
    .struct_size = sizeof(torc_data_source_type),
    .name = "synthetic",
    .description = "random N(0, 1) f32 inputs with uniform class targets, "
                   "deterministic per (seed, index): for smoke tests and "
                   "benchmarks",
    .keys = syn_keys,
    .open = syn_open,
    .length = syn_length,
    .get = syn_get,
    .close = syn_close,
    .describe = syn_describe,
    .num_classes = syn_num_classes,
    .class_name = NULL,
    .user = NULL,
};
