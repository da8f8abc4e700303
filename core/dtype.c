/* core/dtype.c — dtype names, parsing, PyTorch's promotion table, and
 * host-side element loads/stores used where the core itself fills or reads
 * host memory (printing, item, arange).
 */
#include <math.h>
#include <strings.h>

#include "internal.h"

static const char *const dtype_names[TORC_DTYPE_COUNT] = {
    "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"};

const char *torc_dtype_name(torc_dtype dt) {
  if (dt == TORC_DTYPE_ANY)
    return "any";
  return torc_dtype_valid(dt) ? dtype_names[dt] : "invalid";
}

static const struct {
  const char *name;
  torc_dtype dt;
} dtype_aliases[] = {
    {"f32", TORC_F32},       {"float32", TORC_F32},  {"float", TORC_F32},
    {"f64", TORC_F64},       {"float64", TORC_F64},  {"double", TORC_F64},
    {"f16", TORC_F16},       {"float16", TORC_F16},  {"half", TORC_F16},
    {"bf16", TORC_BF16},     {"bfloat16", TORC_BF16}, {"i32", TORC_I32},
    {"int32", TORC_I32},     {"int", TORC_I32},      {"i64", TORC_I64},
    {"int64", TORC_I64},     {"long", TORC_I64},     {"u8", TORC_U8},
    {"uint8", TORC_U8},      {"bool", TORC_BOOL},
};

torc_status torc_dtype_parse(const char *name, torc_dtype *out) {
  if (name != NULL)
    for (size_t i = 0; i < sizeof dtype_aliases / sizeof dtype_aliases[0]; i++)
      if (strcasecmp(name, dtype_aliases[i].name) == 0) {
        *out = dtype_aliases[i].dt;
        return TORC_OK;
      }
  return torc_set_error(TORC_ERR_DTYPE,
                        "unknown dtype '%s'; expected one of f32, f64, f16, "
                        "bf16, i32, i64, u8, bool (or PyTorch's names: "
                        "float32, float64, float16, bfloat16, int32, int64, "
                        "uint8)",
                        name ? name : "(null)");
}

/* torch.promote_types for the eight dtypes, row a, column b. */
static const signed char promote_table[TORC_DTYPE_COUNT][TORC_DTYPE_COUNT] = {
    /*          f32       f64       f16       bf16      i32       i64       u8        bool */
    /* f32 */ {TORC_F32, TORC_F64, TORC_F32, TORC_F32, TORC_F32, TORC_F32, TORC_F32, TORC_F32},
    /* f64 */ {TORC_F64, TORC_F64, TORC_F64, TORC_F64, TORC_F64, TORC_F64, TORC_F64, TORC_F64},
    /* f16 */ {TORC_F32, TORC_F64, TORC_F16, TORC_F32, TORC_F16, TORC_F16, TORC_F16, TORC_F16},
    /* bf16*/ {TORC_F32, TORC_F64, TORC_F32, TORC_BF16, TORC_BF16, TORC_BF16, TORC_BF16, TORC_BF16},
    /* i32 */ {TORC_F32, TORC_F64, TORC_F16, TORC_BF16, TORC_I32, TORC_I64, TORC_I32, TORC_I32},
    /* i64 */ {TORC_F32, TORC_F64, TORC_F16, TORC_BF16, TORC_I64, TORC_I64, TORC_I64, TORC_I64},
    /* u8  */ {TORC_F32, TORC_F64, TORC_F16, TORC_BF16, TORC_I32, TORC_I64, TORC_U8, TORC_U8},
    /* bool*/ {TORC_F32, TORC_F64, TORC_F16, TORC_BF16, TORC_I32, TORC_I64, TORC_U8, TORC_BOOL},
};

torc_dtype torc_promote_types(torc_dtype a, torc_dtype b) {
  if (!torc_dtype_valid(a) || !torc_dtype_valid(b))
    return TORC_DTYPE_ANY;
  return (torc_dtype)promote_table[a][b];
}

double torc__load_f64(torc_dtype dt, const void *p) {
  switch (dt) {
  case TORC_F32: return *(const float *)p;
  case TORC_F64: return *(const double *)p;
  case TORC_F16: return torc_f16_to_f32(*(const uint16_t *)p);
  case TORC_BF16: return torc_bf16_to_f32(*(const uint16_t *)p);
  case TORC_I32: return *(const int32_t *)p;
  case TORC_I64: return (double)*(const int64_t *)p;
  case TORC_U8: return *(const uint8_t *)p;
  case TORC_BOOL: return *(const uint8_t *)p != 0;
  default: return NAN;
  }
}

int64_t torc__load_i64(torc_dtype dt, const void *p) {
  switch (dt) {
  case TORC_I32: return *(const int32_t *)p;
  case TORC_I64: return *(const int64_t *)p;
  case TORC_U8: return *(const uint8_t *)p;
  case TORC_BOOL: return *(const uint8_t *)p != 0;
  default: {
    double v = torc__load_f64(dt, p);
    if (!(v >= -9.2233720368547758e18 && v < 9.2233720368547758e18))
      return 0; /* NaN or out of range: no undefined behaviour */
    return (int64_t)v;
  }
  }
}

void torc__store_f64(torc_dtype dt, void *p, double v) {
  switch (dt) {
  case TORC_F32: *(float *)p = (float)v; break;
  case TORC_F64: *(double *)p = v; break;
  case TORC_F16: *(uint16_t *)p = torc_f32_to_f16((float)v); break;
  case TORC_BF16: *(uint16_t *)p = torc_f32_to_bf16((float)v); break;
  case TORC_BOOL: *(uint8_t *)p = v != 0; break;
  default: {
    int64_t i = 0;
    if (v >= -9.2233720368547758e18 && v < 9.2233720368547758e18)
      i = (int64_t)v;
    torc__store_i64(dt, p, i);
  }
  }
}

void torc__store_i64(torc_dtype dt, void *p, int64_t v) {
  switch (dt) {
  case TORC_I32: *(int32_t *)p = (int32_t)v; break;
  case TORC_I64: *(int64_t *)p = v; break;
  case TORC_U8: *(uint8_t *)p = (uint8_t)v; break;
  case TORC_BOOL: *(uint8_t *)p = v != 0; break;
  default: torc__store_f64(dt, p, (double)v);
  }
}
