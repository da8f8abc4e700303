/* plugins/onednn/onednn_internal.h — shared by the onednn plugin's files:
 * the engine, the primitive cache (one bounded LRU of primitives keyed by
 * op, shapes and parameters, each with its reorders to and from torc's
 * plain layouts) and the kernels. Internal to the plugin.
 */
#ifndef TORC_ONEDNN_INTERNAL_H
#define TORC_ONEDNN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <dnnl.h>

#include "torc/plugin.h"

/* The host's error setter (set by init before any kernel runs). */
extern int (*torc_dnn__set_error)(int status, const char *fmt, ...);

/* The plugin's engine and stream (created by init). */
extern dnnl_engine_t torc_dnn__engine;
extern dnnl_stream_t torc_dnn__stream;

/* Kernels are registered at ref's priority + this (above cpu's + 10). */
enum { TORC_DNN_PRIORITY = 20 };

/* Most arguments one cached primitive binds, most key words. */
enum { DNN_MAX_ARGS = 10, DNN_KEY_WORDS = 32 };

/* A cache key: the op (a DNN_OP_*), the thread count the primitive was
 * made for, and the op's shapes and parameters. Unused words are 0. */
typedef struct dnn_key {
  int32_t op, n_threads;
  int64_t v[DNN_KEY_WORDS];
} dnn_key;

/* The ops that own cache entries. */
enum {
  DNN_OP_CONV_FWD = 1,
  DNN_OP_CONV_BWD_DATA,
  DNN_OP_CONV_BWD_WEIGHTS,
  DNN_OP_POOL_FWD,
  DNN_OP_POOL_BWD,
  DNN_OP_BN_FWD,
  DNN_OP_BN_BWD,
  DNN_OP_MATMUL,
  DNN_OP_LINEAR_ACT,
  DNN_OP_CONV_ACT
};

/* One argument of a cached primitive: `user` wraps torc's plain buffer
 * (its handle is set on every call); when the primitive wants another
 * layout, `prim` is its buffer (in the shared arena) and `reorder` copies
 * user -> prim before the call (inputs) or prim -> user after it
 * (outputs). A `scratch_only` argument (a workspace) has no user side. */
typedef struct dnn_arg {
  int arg;     /* DNNL_ARG_* */
  int is_out;  /* 1: written by the primitive */
  int scratch_only;
  dnnl_memory_t user, prim;
  dnnl_primitive_t reorder;
  size_t prim_bytes, arena_off;
} dnn_arg;

/* A cached primitive. */
typedef struct dnn_entry {
  dnn_key key;
  uint64_t used; /* LRU clock */
  dnnl_primitive_t prim;
  const char *impl; /* oneDNN's implementation name (owned by pd) */
  dnnl_primitive_desc_t pd;
  int n_args;
  dnn_arg args[DNN_MAX_ARGS];
  dnnl_memory_t scratch; /* user-managed scratchpad (arena), or NULL */
  size_t scratch_bytes, scratch_off;
  size_t arena_bytes; /* everything above, laid out in the arena */
  int64_t aux[8];     /* op-specific facts (e.g. workspace layout) */
  int unsupported;    /* oneDNN has no primitive: the caller's loops run */
  /* A kernel's own state beyond one primitive (fused.c's chains), freed
   * with the entry by ext_free(ext). */
  void *ext;
  void (*ext_free)(void *ext);
} dnn_entry;

/* Fills a new entry whose key is set: creates e->pd, adds the arguments
 * (torc_dnn__entry_arg) and finishes it (torc_dnn__entry_finish). Returns
 * TORC_OK, TORC_ERR_UNSUPPORTED (no error set: oneDNN has no primitive
 * for it, and the entry is cached as unsupported) or an error. */
typedef int (*dnn_build_fn)(dnn_entry *e, const void *ctx);

/* Locks the plugin (one kernel at a time: entries and the arena are
 * shared). */
void torc_dnn__lock(void);
void torc_dnn__unlock(void);

/* Returns the entry for `key` (the caller holds the lock), building it
 * with build(e, ctx) on a miss; NULL (error set) when building fails. An
 * entry with `unsupported` set has no primitive. */
dnn_entry *torc_dnn__cache_get(const dnn_key *key, dnn_build_fn build,
                               const void *ctx);

/* Finishes an entry whose pd is set: creates the primitive and the
 * user-managed scratchpad. */
int torc_dnn__entry_finish(dnn_entry *e);

/* Adds argument `arg` with torc's layout `user_md`; the primitive's own
 * layout is queried from e->pd. A workspace (user_md NULL) lives in the
 * arena only. */
int torc_dnn__entry_arg(dnn_entry *e, int arg, const dnnl_memory_desc_t *user_md,
                        int is_out);

/* Runs the entry with the user buffers ptrs[i] for args[i] (NULL for a
 * workspace): input reorders, the primitive, output reorders. */
int torc_dnn__run(dnn_entry *e, void *const *ptrs);

/* The shared arena grown to at least n bytes (its contents are not
 * kept), for a kernel that lays out its own buffers in it; NULL (error
 * set) when out of memory. Valid until the next run or reserve. */
void *torc_dnn__arena(size_t n);

/* The arena address of a workspace argument after a run. */
void *torc_dnn__arg_buffer(const dnn_entry *e, int arg);

/* Sets the OpenMP thread count of the calling thread to n (when it
 * changed) and returns it. */
int torc_dnn__threads(int n);

/* Frees every entry and the arena (at fini). */
void torc_dnn__cache_clear(void);

/* Reports a oneDNN failure: "onednn kernel 'op': what failed (status)". */
int torc_dnn__fail(const char *op, const char *what, dnnl_status_t s);

/* A plain f32 memory descriptor of ndim dims with the given dims and
 * element strides. */
int torc_dnn__md(dnnl_memory_desc_t *md, int ndim, const int64_t *dims,
                 const int64_t *strides, dnnl_data_type_t dt);

/* 1 when a convolution of C -> O channels (its forward pass, or a
 * backward one) runs in torc's plain layouts, 0 when oneDNN may choose
 * blocked ones ([plugin.onednn] layout). */
int torc_dnn__use_plain(int64_t C, int64_t O, int forward);

/* The geometry of one convolution: x [N, C, H, W] (its input), w [O, Cg,
 * kH, kW], y [N, O, OH, OW]; Hv, Wv the rows and columns of x it reads. */
typedef struct dnn_conv_geo {
  int64_t N, C, H, W, O, OH, OW, kH, kW, G, Hv, Wv;
  int64_t S[2], PL[2], PR[2], D[2];
  int bias;
  int32_t dt; /* TORC_F32 or TORC_BF16 (x, w and y; the bias is f32) */
} dnn_conv_geo;

/* Fills g from x, w, y (y of the convolution's output sizes) and the
 * torc_conv_kparams at a->params (a struct that begins with one, as
 * torc_conv_act_kparams does, serves too); TORC_ERR_SHAPE or
 * TORC_ERR_INTERNAL (error set) when they do not fit (conv.c). */
int torc_dnn__conv_geo(const torc_kernel_args *a, dnn_conv_geo *g,
                       const torc_ktensor *x, const torc_ktensor *w,
                       const torc_ktensor *y);

/* A conv2d_act call's (or one chunk's) geometry: the convolution (g, of
 * g.N images), its activation (TORC_ACT_*), the pool's (has_pool: kernel
 * K, stride S, padding PL/PR, dilation D) and y's sizes PH x PW. */
typedef struct dnn_act_geo {
  dnn_conv_geo g;
  int32_t act, has_pool;
  int32_t x_blocked, y_blocked; /* x, y in nChw16c (torc/plugin.h) */
  int64_t K[2], S[2], PL[2], PR[2], D[2], PH, PW;
} dnn_act_geo;

/* conv2d_act by direct.c's kernel (one group, O a multiple of 16): the
 * one for a convolution with few input taps (C x kH x kW <= DNN_FEW_TAPS,
 * x in NCHW: a first layer), and for any it can serve, the exact path of
 * oneDNN's chain for a chunk of images holding a NaN or an infinity.
 * torc_dnn__direct_bytes: the scratch bytes a call of cg's geometry needs
 * (64-byte aligned), or 0 when the kernel cannot serve it.
 * torc_dnn__direct_run: y's images [n0, n0 + count) from x [N, C, H, W]
 * (nChw16c when cg->x_blocked), w [O, C, kH, kW] and b [O] (or NULL),
 * scratch holding torc_dnn__direct_bytes(cg). */
enum { DNN_FEW_TAPS = 64 };
/* torc_dnn__pool_blocked: y's images [n0, n0 + count) from cd, their
 * convolution outputs (no activation applied) in nChw16c (O a multiple of
 * 16): cg's max pool, then its relu, NaN kept (direct.c). */
void torc_dnn__pool_blocked(const dnn_act_geo *cg, const float *cd, float *y,
                            int64_t n0, int64_t count);
size_t torc_dnn__direct_bytes(const dnn_act_geo *cg);
void torc_dnn__direct_run(const dnn_act_geo *cg, const float *x,
                          const float *w, const float *b, float *y, int64_t n0,
                          int64_t count, void *scratch);

/* torc's plain layouts of a convolution: x (a view of its first Hv x Wv),
 * w (OIHW, or GOIHW with groups), y, the f32 bias. */
typedef struct dnn_conv_mds {
  dnnl_memory_desc_t x, w, y, b;
} dnn_conv_mds;
int torc_dnn__conv_mds(const dnn_conv_geo *g, dnn_conv_mds *m);

/* 1 when [plugin.onednn] algorithm = auto (oneDNN may pick Winograd), 0
 * for direct convolutions only. */
extern int torc_dnn__conv_auto;

/* The kernels. */
int torc_dnn__k_conv2d(const torc_kernel_args *a);
int torc_dnn__k_conv2d_backward_input(const torc_kernel_args *a);
int torc_dnn__k_conv2d_backward_weight(const torc_kernel_args *a);
int torc_dnn__k_max_pool2d(const torc_kernel_args *a);
int torc_dnn__k_max_pool2d_backward(const torc_kernel_args *a);
int torc_dnn__k_avg_pool2d(const torc_kernel_args *a);
int torc_dnn__k_avg_pool2d_backward(const torc_kernel_args *a);
int torc_dnn__k_batch_norm(const torc_kernel_args *a);
int torc_dnn__k_batch_norm_backward(const torc_kernel_args *a);
int torc_dnn__k_linear_act(const torc_kernel_args *a);
int torc_dnn__k_conv2d_act(const torc_kernel_args *a);

/* 1 when init found native bf16 support (AVX-512 BF16 or AMX): the bf16
 * kernels are registered and the f32 ones accept bf16 operands. */
extern int torc_dnn__bf16;

/* Registers the bf16 kernels (bf16.c) when torc_dnn__bf16 is set. */
int torc_dnn__register_bf16(const torc_host *host, torc_plugin *self);

/* "matmul" in bf16 (bf16.c). */
int torc_dnn__k_matmul(const torc_kernel_args *a);

/* Bytes per element of an f32 or bf16 tensor. */
static inline size_t dnn_esize(int32_t dt) { return dt == TORC_BF16 ? 2 : 4; }

/* oneDNN's data type for an f32 or bf16 tensor. */
static inline dnnl_data_type_t dnn_dt(int32_t dt) {
  return dt == TORC_BF16 ? dnnl_bf16 : dnnl_f32;
}

/* 1 when dt is a dtype the plugin's kernels compute in (f32; bf16 when the
 * CPU has it). */
static inline int dnn_float_ok(int32_t dt) {
  return dt == TORC_F32 || (dt == TORC_BF16 && torc_dnn__bf16);
}

/* Address of element `i` of an f32 or bf16 tensor. */
static inline void *dnn_at(const torc_ktensor *t, int64_t i) {
  return (char *)t->data + (size_t)(t->offset + i) * dnn_esize(t->dtype);
}

/* bf16 <-> f32 (round to nearest even; NaN kept quiet). */
static inline float dnn_bf16_to_f32(uint16_t h) {
  union { uint32_t u; float f; } v = {(uint32_t)h << 16};
  return v.f;
}
static inline uint16_t dnn_f32_to_bf16(float f) {
  union { float f; uint32_t u; } v = {f};
  uint32_t r = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16;
  uint32_t q = (v.u >> 16) | 0x40u; /* without branches: loops vectorise */
  return (uint16_t)((v.u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

/* Element c of a float vector of dtype f32, f64 or bf16, and its store. */
static inline double dnn_ld(const torc_ktensor *t, int64_t c) {
  switch (t->dtype) {
  case TORC_F64:
    return ((const double *)t->data)[t->offset + c];
  case TORC_BF16:
    return dnn_bf16_to_f32(((const uint16_t *)t->data)[t->offset + c]);
  default:
    return ((const float *)t->data)[t->offset + c];
  }
}
static inline void dnn_st(const torc_ktensor *t, int64_t c, double v) {
  switch (t->dtype) {
  case TORC_F64:
    ((double *)t->data)[t->offset + c] = v;
    break;
  case TORC_BF16:
    ((uint16_t *)t->data)[t->offset + c] = dnn_f32_to_bf16((float)v);
    break;
  default:
    ((float *)t->data)[t->offset + c] = (float)v;
  }
}

/* Address of element `i` (in elements) of an f32 tensor. */
static inline float *dnn_f32(const torc_ktensor *t, int64_t i) {
  return (float *)t->data + t->offset + i;
}

/* Product of dims [from, ndim). */
static inline int64_t dnn_numel(const torc_ktensor *t, int from) {
  int64_t n = 1;
  for (int i = from; i < t->ndim; i++)
    n *= t->shape[i];
  return n;
}

#endif /* TORC_ONEDNN_INTERNAL_H */
