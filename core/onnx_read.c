/* core/onnx_read.c — reading ONNX: a .onnx file into a torc_onnx_model (the
 * protobuf message, its opset and its initializers as cpu tensors) and a
 * TensorProto (an initializer, a Constant's value or a test's .pb file)
 * into a torc tensor, every size from the file checked before use. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "onnx_internal.h"

/* ---- files ---- */

/* The whole file at path in *buf (malloc'ed) and *len. */
static torc_status read_file(const char *path, uint8_t **buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return torc_set_error(TORC_ERR_IO, "cannot open ONNX file '%s': %s", path,
                          strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    return torc_set_error(TORC_ERR_IO, "ONNX file '%s' is not a regular file",
                          path);
  }
  if ((uint64_t)st.st_size > TORC_ONNX_MAX_FILE) {
    fclose(f);
    return torc_set_error(
        TORC_ERR_IO,
        "ONNX file '%s' is %lld bytes, more than the %zu torc reads; keep the "
        "weights in the file under 1 GiB",
        path, (long long)st.st_size, TORC_ONNX_MAX_FILE);
  }
  size_t n = (size_t)st.st_size;
  uint8_t *b = malloc(n ? n : 1);
  if (!b) {
    fclose(f);
    return torc_set_error(TORC_ERR_OOM, "out of memory reading '%s' (%zu bytes)",
                          path, n);
  }
  if (n && fread(b, 1, n, f) != n) {
    free(b);
    fclose(f);
    return torc_set_error(TORC_ERR_IO, "cannot read ONNX file '%s'", path);
  }
  fclose(f);
  *buf = b;
  *len = n;
  return TORC_OK;
}

/* ---- tensors ---- */

static const char *onnx_type_name(int t) {
  static const char *const names[] = {
      "UNDEFINED", "FLOAT",  "UINT8",   "INT8",      "UINT16",     "INT16",
      "INT32",     "INT64",  "STRING",  "BOOL",      "FLOAT16",    "DOUBLE",
      "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  return (t >= 0 && t < (int)(sizeof names / sizeof names[0])) ? names[t]
                                                               : "unknown";
}

int torc__onnx_dtype(int64_t t, torc_dtype *dt) {
  switch (t) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *dt = TORC_F32; return 1;
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *dt = TORC_F64; return 1;
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: *dt = TORC_F16; return 1;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: *dt = TORC_BF16; return 1;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *dt = TORC_I32; return 1;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *dt = TORC_I64; return 1;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: *dt = TORC_U8; return 1;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *dt = TORC_BOOL; return 1;
  default: return 0;
  }
}

torc_status torc__onnx_tensor(const Onnx__TensorProto *tp, const char *src,
                              torc_tensor **out) {
  const char *nm = (tp->name && tp->name[0]) ? tp->name : "(unnamed)";
  *out = NULL;
  if (tp->has_data_location &&
      tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    return torc_set_error(
        TORC_ERR_UNSUPPORTED,
        "%s: tensor '%s' keeps its data in an external file, which torc does "
        "not read; save the model with its data inside "
        "(onnx.save_model(model, path, save_as_external_data=False))",
        src, nm);
  if (tp->segment)
    return torc_set_error(TORC_ERR_UNSUPPORTED,
                          "%s: tensor '%s' is segmented, which torc does not "
                          "read; save it as one tensor",
                          src, nm);
  torc_dtype dt;
  if (!torc__onnx_dtype(tp->data_type, &dt))
    return torc_set_error(
        TORC_ERR_UNSUPPORTED,
        "%s: tensor '%s' has element type %s (%d), which torc lacks; torc "
        "reads FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT32, INT64, UINT8 and BOOL "
        "(cast the tensor to one of them when exporting)",
        src, nm, onnx_type_name(tp->data_type), (int)tp->data_type);
  if (tp->n_dims > TORC_MAX_DIMS)
    return torc_set_error(TORC_ERR_UNSUPPORTED,
                          "%s: tensor '%s' has %zu dims, more than torc's %d",
                          src, nm, tp->n_dims, TORC_MAX_DIMS);
  int64_t shape[TORC_MAX_DIMS];
  uint64_t numel = 1;
  size_t esize = torc_dtype_size(dt);
  for (size_t i = 0; i < tp->n_dims; i++) {
    int64_t d = tp->dims[i];
    if (d < 0)
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: tensor '%s' has a negative dim %lld (dim %zu); "
                            "dims must be >= 0",
                            src, nm, (long long)d, i);
    /* numel * d * esize must fit the file's cap: checked before the
     * multiply. */
    if (d != 0 && numel > (TORC_ONNX_MAX_FILE / esize) / (uint64_t)d)
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: tensor '%s' has dims whose product is too "
                            "large (more than %zu bytes at dim %zu = %lld)",
                            src, nm, TORC_ONNX_MAX_FILE, i, (long long)d);
    numel *= (uint64_t)d;
    shape[i] = d;
  }
  size_t n = (size_t)numel, have;
  const void *data = NULL;
  void *conv = NULL;
  if (tp->has_raw_data) {
    if (tp->raw_data.len != n * esize)
      return torc_set_error(
          TORC_ERR_INVALID,
          "%s: tensor '%s' has %zu bytes of raw_data, but its dims give %zu "
          "elements of %zu bytes (%zu bytes)",
          src, nm, tp->raw_data.len, n, esize, n * esize);
    data = tp->raw_data.data;
  } else {
    const char *field;
    switch (dt) {
    case TORC_F32: have = tp->n_float_data; data = tp->float_data; field = "float_data"; break;
    case TORC_F64: have = tp->n_double_data; data = tp->double_data; field = "double_data"; break;
    case TORC_I64: have = tp->n_int64_data; data = tp->int64_data; field = "int64_data"; break;
    default: have = tp->n_int32_data; field = "int32_data"; break;
    }
    if (have != n)
      return torc_set_error(
          TORC_ERR_INVALID,
          "%s: tensor '%s' has %zu values in %s, but its dims give %zu "
          "elements",
          src, nm, have, field, n);
    if (!data && n) {
      /* int32_data carries i32 and, one per element, f16/bf16 bits, u8 and
       * bool. */
      conv = malloc(n * esize);
      if (!conv)
        return torc_set_error(TORC_ERR_OOM, "%s: out of memory for tensor '%s'",
                              src, nm);
      for (size_t i = 0; i < n; i++) {
        int32_t v = tp->int32_data[i];
        switch (dt) {
        case TORC_I32: ((int32_t *)conv)[i] = v; break;
        case TORC_F16:
        case TORC_BF16: ((uint16_t *)conv)[i] = (uint16_t)v; break;
        case TORC_BOOL: ((uint8_t *)conv)[i] = v != 0; break;
        default: ((uint8_t *)conv)[i] = (uint8_t)v; break;
        }
      }
      data = conv;
    }
  }
  torc_tensor *t;
  if (n == 0)
    t = torc_zeros(shape, (int)tp->n_dims, dt, TORC_CPU);
  else
    t = torc_from_host(data, shape, (int)tp->n_dims, dt, TORC_CPU);
  free(conv);
  if (!t)
    return torc_last_status();
  if (dt == TORC_BOOL && tp->has_raw_data) {
    /* A bool byte other than 0 and 1 is not a bool torc kernels expect. */
    const uint8_t *b = torc_data(t);
    for (size_t i = 0; i < n; i++)
      if (b[i] > 1) {
        unsigned bad = b[i];
        torc_release(t);
        return torc_set_error(TORC_ERR_INVALID,
                              "%s: tensor '%s' has a BOOL byte %u at element "
                              "%zu; bools are 0 or 1",
                              src, nm, bad, i);
      }
  }
  *out = t;
  return TORC_OK;
}

torc_tensor *torc_onnx_read_tensor(const char *path, char *name_out,
                                   size_t name_size) {
  uint8_t *buf;
  size_t len;
  if (!path) {
    torc__null_input("torc_onnx_read_tensor");
    return NULL;
  }
  if (read_file(path, &buf, &len) != TORC_OK)
    return NULL;
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
  free(buf);
  if (!tp) {
    torc_set_error(TORC_ERR_INVALID,
                   "'%s' is not a serialized ONNX TensorProto (the protobuf "
                   "message does not parse: truncated or not a .pb tensor)",
                   path);
    return NULL;
  }
  torc_tensor *t = NULL;
  torc_status st = torc__onnx_tensor(tp, path, &t);
  if (st == TORC_OK && name_out && name_size) {
    snprintf(name_out, name_size, "%s", tp->name ? tp->name : "");
  }
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return t;
}

/* ---- models ---- */

void torc_onnx_free(torc_onnx_model *m) {
  if (!m)
    return;
  for (int i = 0; i < m->n_inits; i++)
    torc_release(m->inits[i]);
  free(m->inits);
  free(m->init_names);
  free(m->inputs);
  free(m->outputs);
  free(m->name);
  if (m->proto)
    onnx__model_proto__free_unpacked(m->proto, NULL);
  free(m);
}

static int is_init(const torc_onnx_model *m, const char *name) {
  for (int i = 0; i < m->n_inits; i++)
    if (strcmp(m->init_names[i], name) == 0)
      return 1;
  return 0;
}

torc_onnx_model *torc_onnx_load_buffer(const void *buf, size_t len,
                                       const char *name) {
  if (!name)
    name = "(buffer)";
  if (!buf && len) {
    torc__null_input("torc_onnx_load_buffer");
    return NULL;
  }
  if (len > TORC_ONNX_MAX_FILE) {
    torc_set_error(TORC_ERR_IO, "ONNX model '%s' is %zu bytes, more than the "
                   "%zu torc reads", name, len, TORC_ONNX_MAX_FILE);
    return NULL;
  }
  torc_onnx_model *m = calloc(1, sizeof *m);
  if (!m || !(m->name = strdup(name))) {
    free(m);
    torc_set_error(TORC_ERR_OOM, "out of memory loading '%s'", name);
    return NULL;
  }
  m->proto = onnx__model_proto__unpack(NULL, len, buf ? buf : (const void *)"");
  if (!m->proto) {
    torc_set_error(TORC_ERR_INVALID,
                   "'%s' is not an ONNX model (the ModelProto does not parse: "
                   "the file is truncated or not a .onnx file)",
                   name);
    goto fail;
  }
  Onnx__GraphProto *g = m->proto->graph;
  if (!g) {
    torc_set_error(TORC_ERR_INVALID, "ONNX model '%s' has no graph", name);
    goto fail;
  }
  m->opset = -1;
  for (size_t i = 0; i < m->proto->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->proto->opset_import[i];
    if (!o->domain || !o->domain[0] || strcmp(o->domain, "ai.onnx") == 0)
      m->opset = o->has_version ? o->version : 1;
  }
  if (m->opset < 0) {
    /* IR version 3 and later must import the default domain; before it
     * the opset was 1. */
    int default_nodes = 0;
    for (size_t i = 0; i < g->n_node; i++)
      if (!g->node[i]->domain || !g->node[i]->domain[0])
        default_nodes++;
    if (m->proto->has_ir_version && m->proto->ir_version >= 3 && default_nodes) {
      torc_set_error(TORC_ERR_INVALID,
                     "ONNX model '%s' imports no opset of the default domain; "
                     "re-export it with an opset_import for \"\"",
                     name);
      goto fail;
    }
    m->opset = 1;
  }
  if (g->n_initializer > (size_t)INT32_MAX || g->n_input > (size_t)INT32_MAX ||
      g->n_output > (size_t)INT32_MAX) {
    torc_set_error(TORC_ERR_INVALID, "ONNX model '%s' is too large", name);
    goto fail;
  }
  m->inits = calloc(g->n_initializer + 1, sizeof *m->inits);
  m->init_names = calloc(g->n_initializer + 1, sizeof *m->init_names);
  m->inputs = calloc(g->n_input + 1, sizeof *m->inputs);
  m->outputs = calloc(g->n_output + 1, sizeof *m->outputs);
  if (!m->inits || !m->init_names || !m->inputs || !m->outputs) {
    torc_set_error(TORC_ERR_OOM, "out of memory loading '%s'", name);
    goto fail;
  }
  for (size_t i = 0; i < g->n_initializer; i++) {
    const Onnx__TensorProto *tp = g->initializer[i];
    if (!tp->name || !tp->name[0]) {
      torc_set_error(TORC_ERR_INVALID,
                     "ONNX model '%s': initializer %zu has no name", name, i);
      goto fail;
    }
    /* the model holds its own reference, whatever scope is open */
    int scope = torc_scope_begin();
    torc_status st = torc__onnx_tensor(tp, name, &m->inits[i]);
    torc_retain(m->inits[i]);
    torc_scope_end(scope);
    if (st != TORC_OK)
      goto fail;
    m->init_names[i] = tp->name;
    m->n_inits = (int)i + 1;
  }
  for (size_t i = 0; i < g->n_input; i++) {
    const char *in = g->input[i]->name;
    if (!in || !in[0]) {
      torc_set_error(TORC_ERR_INVALID,
                     "ONNX model '%s': graph input %zu has no name", name, i);
      goto fail;
    }
    if (!is_init(m, in))
      m->inputs[m->n_inputs++] = in;
  }
  for (size_t i = 0; i < g->n_output; i++) {
    const char *o = g->output[i]->name;
    if (!o || !o[0]) {
      torc_set_error(TORC_ERR_INVALID,
                     "ONNX model '%s': graph output %zu has no name", name, i);
      goto fail;
    }
    m->outputs[m->n_outputs++] = o;
  }
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *nd = g->node[i];
    if (!nd->op_type || !nd->op_type[0]) {
      torc_set_error(TORC_ERR_INVALID,
                     "ONNX model '%s': node %zu has no op_type", name, i);
      goto fail;
    }
  }
  return m;
fail:
  torc_onnx_free(m);
  return NULL;
}

torc_onnx_model *torc_onnx_load(const char *path) {
  if (!path) {
    torc__null_input("torc_onnx_load");
    return NULL;
  }
  uint8_t *buf;
  size_t len;
  if (read_file(path, &buf, &len) != TORC_OK)
    return NULL;
  torc_onnx_model *m = torc_onnx_load_buffer(buf, len, path);
  free(buf);
  return m;
}

int64_t torc_onnx_opset(const torc_onnx_model *m) { return m ? m->opset : -1; }
int torc_onnx_n_inputs(const torc_onnx_model *m) { return m ? m->n_inputs : 0; }
const char *torc_onnx_input_name(const torc_onnx_model *m, int i) {
  return (m && i >= 0 && i < m->n_inputs) ? m->inputs[i] : NULL;
}
int torc_onnx_n_outputs(const torc_onnx_model *m) {
  return m ? m->n_outputs : 0;
}
const char *torc_onnx_output_name(const torc_onnx_model *m, int i) {
  return (m && i >= 0 && i < m->n_outputs) ? m->outputs[i] : NULL;
}
int torc_onnx_n_initializers(const torc_onnx_model *m) {
  return m ? m->n_inits : 0;
}
const char *torc_onnx_initializer_name(const torc_onnx_model *m, int i) {
  return (m && i >= 0 && i < m->n_inits) ? m->init_names[i] : NULL;
}
torc_tensor *torc_onnx_initializer(const torc_onnx_model *m, int i) {
  return (m && i >= 0 && i < m->n_inits) ? m->inits[i] : NULL;
}
