/* plugins/data/npy.c — the "npy" source: two NumPy .npy files (format
 * versions 1, 2 and 3), inputs [N, ...] and targets [N] (class indices) or
 * [N] / [N, k] floats (regression); sample i is row i of each.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"
#include "torc/checked.h"

/* One loaded array. */
typedef struct npy_array {
  torc_dtype dtype;
  size_t itemsize;
  int ndim;
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  char *file;        /* the whole file */
  const char *data;  /* the elements, inside file */
} npy_array;

typedef struct npy_ds {
  npy_array in, tg;
  int64_t n;
  int64_t row_in;    /* elements per input row */
  int classification;
  int64_t k;         /* regression: targets per row */
  float *targets_f;  /* regression targets as f32 (n * k) */
  int64_t n_classes;
} npy_ds;

/* The dtypes torc reads, as NumPy writes them (descr). */
static const struct {
  const char *descr;
  torc_dtype dtype;
  size_t size;
} npy_dtypes[] = {
    {"<f4", TORC_F32, 4}, {"<f8", TORC_F64, 8}, {"<i8", TORC_I64, 8},
    {"<i4", TORC_I32, 4}, {"|u1", TORC_U8, 1},
};

/* Element i of an integer array as int64 (memcpy: a hand-written file's
 * data need not be aligned). */
static int64_t npy_int_at(const npy_array *a, int64_t i) {
  const char *p = a->data + (size_t)i * a->itemsize;
  if (a->dtype == TORC_I64) {
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  if (a->dtype == TORC_I32) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  return (uint8_t)*p;
}

/* Element i of a floating array as f32. */
static float npy_float_at(const npy_array *a, int64_t i) {
  const char *p = a->data + (size_t)i * a->itemsize;
  if (a->dtype == TORC_F32) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  double v;
  memcpy(&v, p, sizeof v);
  return (float)v;
}

/* Skips spaces. */
static const char *npy_ws(const char *p, const char *e) {
  while (p < e && isspace((unsigned char)*p))
    p++;
  return p;
}

/* Parses a quoted Python string at p into out; returns the position after
 * it or NULL. */
static const char *npy_str(const char *p, const char *e, char *out,
                           size_t size) {
  if (p >= e || (*p != '\'' && *p != '"'))
    return NULL;
  char q = *p++;
  size_t n = 0;
  while (p < e && *p != q) {
    if (n + 1 < size)
      out[n++] = *p;
    p++;
  }
  if (p >= e)
    return NULL;
  out[n] = '\0';
  return p + 1;
}

static int npy_bad_header(const char *key, const char *path,
                          const char *what) {
  return dsrc_error(TORC_ERR_IO,
                    "npy: %s file '%s' has a bad header: %s; write it with "
                    "numpy.save",
                    key, path, what);
}

/* Parses the header dict {'descr': '<f4', 'fortran_order': False,
 * 'shape': (60000, 28, 28), } into a. */
static int npy_parse_dict(const char *key, const char *path, const char *p,
                          const char *e, npy_array *a) {
  char descr[32] = "";
  int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0;
  p = npy_ws(p, e);
  if (p >= e || *p != '{')
    return npy_bad_header(key, path, "it is not a Python dict");
  p++;
  for (;;) {
    p = npy_ws(p, e);
    if (p < e && *p == '}')
      break;
    char name[32];
    p = npy_str(p, e, name, sizeof name);
    if (p == NULL)
      return npy_bad_header(key, path, "a key is not a quoted string");
    p = npy_ws(p, e);
    if (p >= e || *p != ':')
      return npy_bad_header(key, path, "a key has no ':'");
    p = npy_ws(p + 1, e);
    if (strcmp(name, "descr") == 0) {
      p = npy_str(p, e, descr, sizeof descr);
      if (p == NULL)
        return npy_bad_header(key, path,
                              "'descr' is not a string (structured dtypes "
                              "are not supported)");
      have_descr = 1;
    } else if (strcmp(name, "fortran_order") == 0) {
      if (e - p >= 4 && memcmp(p, "True", 4) == 0) {
        fortran = 1;
        p += 4;
      } else if (e - p >= 5 && memcmp(p, "False", 5) == 0) {
        p += 5;
      } else {
        return npy_bad_header(key, path,
                              "'fortran_order' is not True or False");
      }
      have_order = 1;
    } else if (strcmp(name, "shape") == 0) {
      if (p >= e || *p != '(')
        return npy_bad_header(key, path, "'shape' is not a tuple");
      p++;
      a->ndim = 0;
      for (;;) {
        p = npy_ws(p, e);
        if (p < e && *p == ')') {
          p++;
          break;
        }
        if (p >= e || !isdigit((unsigned char)*p))
          return npy_bad_header(key, path,
                                "'shape' holds something other than "
                                "non-negative integers");
        if (a->ndim == TORC_KERNEL_MAX_DIMS)
          return dsrc_error(TORC_ERR_UNSUPPORTED,
                            "npy: %s file '%s' has more than %d dimensions; "
                            "torc tensors have at most %d: reshape the "
                            "array",
                            key, path, TORC_KERNEL_MAX_DIMS,
                            TORC_KERNEL_MAX_DIMS);
        int64_t v = 0;
        while (p < e && isdigit((unsigned char)*p)) {
          if (v > ((int64_t)1 << 50))
            return npy_bad_header(key, path, "a dimension is too large");
          v = v * 10 + (*p++ - '0');
        }
        if (p < e && *p == 'L') /* Python 2 longs */
          p++;
        a->shape[a->ndim++] = v;
        p = npy_ws(p, e);
        if (p < e && *p == ',')
          p++;
      }
      have_shape = 1;
    } else {
      return npy_bad_header(key, path, "it has a key other than 'descr', "
                                       "'fortran_order' and 'shape'");
    }
    p = npy_ws(p, e);
    if (p < e && *p == ',')
      p++;
  }
  if (!have_descr || !have_order || !have_shape)
    return npy_bad_header(key, path,
                          !have_descr ? "'descr' is missing"
                          : !have_order ? "'fortran_order' is missing"
                                        : "'shape' is missing");
  a->dtype = (torc_dtype)-1;
  for (size_t i = 0; i < sizeof npy_dtypes / sizeof npy_dtypes[0]; i++)
    if (strcmp(descr, npy_dtypes[i].descr) == 0 ||
        /* One-byte types are written '|u1', sometimes '<u1'. */
        (npy_dtypes[i].size == 1 && descr[0] == '<' &&
         strcmp(descr + 1, npy_dtypes[i].descr + 1) == 0)) {
      a->dtype = npy_dtypes[i].dtype;
      a->itemsize = npy_dtypes[i].size;
    }
  if ((int)a->dtype < 0)
    return dsrc_error(TORC_ERR_UNSUPPORTED,
                      "npy: %s file '%s' has dtype '%s', which torc does "
                      "not read; save it as one of '<f4' (float32), '<f8', "
                      "'<i8' (int64), '<i4', '|u1' (uint8), e.g. "
                      "numpy.save(path, a.astype('<f4'))",
                      key, path, descr);
  if (fortran)
    return dsrc_error(TORC_ERR_UNSUPPORTED,
                      "npy: %s file '%s' is in Fortran order "
                      "(fortran_order: True); torc reads C order only: save "
                      "numpy.ascontiguousarray(a) instead",
                      key, path);
  if (a->ndim == 0)
    return dsrc_error(TORC_ERR_SHAPE,
                      "npy: %s file '%s' holds a 0-dim array; give an array "
                      "whose first dim is the sample",
                      key, path);
  return TORC_OK;
}

/* Loads and checks one .npy file. */
static int npy_load(const char *key, const char *path, uint64_t max_bytes,
                    npy_array *a) {
  char *buf;
  size_t size;
  int st = dsrc_read_file("npy", key, path, max_bytes, "max_bytes", &buf,
                          &size);
  if (st != TORC_OK)
    return st;
  a->file = buf;
  if (size < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
    return dsrc_error(TORC_ERR_IO,
                      "npy: %s file '%s' is not a .npy file (it does not "
                      "begin with \\x93NUMPY); write it with numpy.save "
                      "(an .npz archive must be unpacked first)",
                      key, path);
  unsigned major = (unsigned char)buf[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = (size_t)(unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      return npy_bad_header(key, path, "the file ends inside the header");
    hlen = (size_t)(unsigned char)buf[8] |
           (size_t)(unsigned char)buf[9] << 8 |
           (size_t)(unsigned char)buf[10] << 16 |
           (size_t)(unsigned char)buf[11] << 24;
    hstart = 12;
  } else {
    return dsrc_error(TORC_ERR_UNSUPPORTED,
                      "npy: %s file '%s' has format version %u.%u; torc "
                      "reads versions 1, 2 and 3: save it with numpy.save",
                      key, path, major, (unsigned char)buf[7]);
  }
  if (hstart + hlen > size)
    return npy_bad_header(key, path, "the file ends inside the header");
  st = npy_parse_dict(key, path, buf + hstart, buf + hstart + hlen, a);
  if (st != TORC_OK)
    return st;
  /* The sizes are checked before they are compared with the data: a shape
   * whose product wraps (e.g. (2^32, 2^32, 0)) must not pass as empty. */
  uint64_t numel, want64;
  char shape[160];
  dsrc_shape_str(shape, sizeof shape, a->shape, a->ndim);
  if (torc_checked_numel(a->shape, a->ndim, UINT64_MAX, &numel) ||
      torc_checked_bytes(numel, a->itemsize, UINT64_MAX, &want64))
    return dsrc_error(TORC_ERR_IO,
                      "npy: %s file '%s' has a bad header: its shape %s of "
                      "%s has more bytes than can be counted (the file holds "
                      "%zu); the file is corrupt: save it again",
                      key, path, shape, dsrc_dtype_str(a->dtype), size);
  uint64_t have = size - hstart - hlen;
  if (have != want64)
    return dsrc_error(TORC_ERR_IO,
                      "npy: %s file '%s' holds %" PRIu64 " bytes of data but "
                      "its header's shape %s of %s needs %" PRIu64 "; the "
                      "file is %s: save it again",
                      key, path, have, shape, dsrc_dtype_str(a->dtype),
                      want64, have < want64 ? "truncated" : "damaged");
  a->data = buf + hstart + hlen;
  return TORC_OK;
}

static void npy_close(void *handle) {
  npy_ds *ds = handle;
  if (ds == NULL)
    return;
  free(ds->in.file);
  free(ds->tg.file);
  free(ds->targets_f);
  free(ds);
}

static int npy_open(const char *const *keys, const char *const *values, int n,
                    void *user, void **handle) {
  (void)user;
  *handle = NULL;
  const char *inputs = dsrc_value(keys, values, n, "inputs");
  const char *targets = dsrc_value(keys, values, n, "targets");
  uint64_t max_bytes;
  int st = dsrc_limit("npy", "max_bytes", keys, values, n, DSRC_NPY_MAX_BYTES,
                      &max_bytes);
  if (st != TORC_OK)
    return st;
  npy_ds *ds = calloc(1, sizeof *ds);
  if (ds == NULL)
    return dsrc_oom("npy", sizeof *ds);
  st = npy_load("inputs", inputs, max_bytes, &ds->in);
  if (st == TORC_OK)
    st = npy_load("targets", targets, max_bytes, &ds->tg);
  if (st != TORC_OK)
    goto fail;
  if (ds->in.shape[0] != ds->tg.shape[0]) {
    st = dsrc_error(TORC_ERR_SHAPE,
                    "npy: inputs file '%s' has %" PRId64 " rows but targets "
                    "file '%s' has %" PRId64 "; give one target per input "
                    "(the first dim of both is the sample)",
                    inputs, ds->in.shape[0], targets, ds->tg.shape[0]);
    goto fail;
  }
  ds->n = ds->in.shape[0];
  if (ds->n == 0) {
    st = dsrc_error(TORC_ERR_SHAPE,
                    "npy: inputs file '%s' has 0 rows; give at least one "
                    "sample",
                    inputs);
    goto fail;
  }
  /* Bounded by the data's size, which npy_load matched to the shape. */
  ds->row_in = 1;
  for (int i = 1; i < ds->in.ndim; i++)
    ds->row_in *= ds->in.shape[i];
  if (ds->row_in == 0) {
    char shape[160];
    dsrc_shape_str(shape, sizeof shape, ds->in.shape, ds->in.ndim);
    st = dsrc_error(TORC_ERR_SHAPE,
                    "npy: inputs file '%s' has shape %s: every sample has 0 "
                    "elements; give inputs with at least one element per "
                    "row",
                    inputs, shape);
    goto fail;
  }
  torc_dtype tdt = ds->tg.dtype;
  if (tdt == TORC_I64 || tdt == TORC_I32 || tdt == TORC_U8) {
    if (ds->tg.ndim != 1) {
      char shape[160];
      dsrc_shape_str(shape, sizeof shape, ds->tg.shape, ds->tg.ndim);
      st = dsrc_error(TORC_ERR_SHAPE,
                      "npy: targets file '%s' holds integers of shape %s; "
                      "integer targets are class indices, one per sample "
                      "(shape [N]): for regression save floats",
                      targets, shape);
      goto fail;
    }
    ds->classification = 1;
    int64_t max = -1;
    for (int64_t i = 0; i < ds->n; i++) {
      int64_t v = npy_int_at(&ds->tg, i);
      if (v < 0) {
        st = dsrc_error(TORC_ERR_RANGE,
                        "npy: targets file '%s' has class index %" PRId64
                        " at row %" PRId64 "; class indices must be >= 0",
                        targets, v, i);
        goto fail;
      }
      if (v > max)
        max = v;
    }
    ds->n_classes = max + 1;
  } else {
    if (ds->tg.ndim > 2) {
      st = dsrc_error(TORC_ERR_SHAPE,
                      "npy: targets file '%s' has %d dims; regression "
                      "targets are [N] or [N, k]: reshape them",
                      targets, ds->tg.ndim);
      goto fail;
    }
    ds->k = ds->tg.ndim == 2 ? ds->tg.shape[1] : 1;
    if (ds->k == 0) {
      st = dsrc_error(TORC_ERR_SHAPE,
                      "npy: targets file '%s' has shape [%" PRId64 ", 0]: "
                      "0 targets per row; give at least one",
                      targets, ds->n);
      goto fail;
    }
    size_t bytes = sizeof(float) * (size_t)(ds->n * ds->k);
    ds->targets_f = malloc(bytes ? bytes : 1);
    if (ds->targets_f == NULL) {
      st = dsrc_oom("npy", bytes);
      goto fail;
    }
    for (int64_t i = 0; i < ds->n * ds->k; i++)
      ds->targets_f[i] = npy_float_at(&ds->tg, i);
    /* The f32 copy is all get() reads. */
    free(ds->tg.file);
    ds->tg.file = NULL;
    ds->tg.data = NULL;
  }
  *handle = ds;
  return TORC_OK;
fail:
  npy_close(ds);
  return st;
}

static int64_t npy_length(void *handle) { return ((npy_ds *)handle)->n; }

static int npy_get(void *handle, int64_t index, torc_tensor **input,
                   torc_tensor **target) {
  const npy_ds *ds = handle;
  int st = dsrc_tensor(ds->in.data + (size_t)(index * ds->row_in) *
                                         ds->in.itemsize,
                       ds->in.shape + 1, ds->in.ndim - 1, ds->in.dtype,
                       input);
  if (st != TORC_OK)
    return st;
  if (ds->classification) {
    st = dsrc_class_target(npy_int_at(&ds->tg, index), target);
  } else {
    const int64_t shape[1] = {ds->k};
    st = dsrc_tensor(ds->targets_f + index * ds->k, shape, 1, TORC_F32,
                     target);
  }
  if (st != TORC_OK) {
    dsrc_api->release(*input);
    *input = NULL;
  }
  return st;
}

static int npy_describe(void *handle, char *buf, size_t size) {
  const npy_ds *ds = handle;
  char shape[160];
  dsrc_shape_str(shape, sizeof shape, ds->in.shape + 1, ds->in.ndim - 1);
  if (ds->classification)
    snprintf(buf, size,
             "%" PRId64 " samples, input %s %s, %" PRId64 " classes", ds->n,
             shape, dsrc_dtype_str(ds->in.dtype), ds->n_classes);
  else
    snprintf(buf, size,
             "%" PRId64 " samples, input %s %s, regression targets [%" PRId64
             "] f32",
             ds->n, shape, dsrc_dtype_str(ds->in.dtype), ds->k);
  return TORC_OK;
}

static int64_t npy_num_classes(void *handle) {
  const npy_ds *ds = handle;
  return ds->classification ? ds->n_classes : 0;
}

static const torc_data_key npy_keys[] = {
    {"inputs", ".npy file of inputs [N, ...]: '<f4', '<f8', '<i8', '<i4' "
               "or '|u1', C order",
     NULL, 1},
    {"targets", ".npy file of targets: integers [N] (class indices) or "
                "floats [N] / [N, k] (regression, read as f32)",
     NULL, 1},
    {"max_bytes", "the largest .npy file read, each of inputs and targets "
                  "(K, M, G suffixes); a larger one, or a device or pipe, "
                  "is refused before reading",
     DSRC_NPY_MAX_BYTES, 0},
    {NULL, NULL, NULL, 0},
};

const torc_data_source_type dsrc_npy_type = {
    .struct_size = sizeof(torc_data_source_type),
    .name = "npy",
    .description = "NumPy .npy inputs and targets: sample i is row i of "
                   "each",
    .keys = npy_keys,
    .open = npy_open,
    .length = npy_length,
    .get = npy_get,
    .close = npy_close,
    .describe = npy_describe,
    .num_classes = npy_num_classes,
    .class_name = NULL,
    .user = NULL,
};
