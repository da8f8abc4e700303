/* core/internal.h — libtorc's private structures and the functions its
 * files share (prefix torc__). Nothing here is installed or part of the ABI.
 */
#ifndef TORC_INTERNAL_H
#define TORC_INTERNAL_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The core's own layer of the public API; a file that builds on modules,
 * data, optimizers or state dicts includes their headers itself. */
#include "torc/amp.h"
#include "torc/autograd.h"
#include "torc/config.h"
#include "torc/device.h"
#include "torc/dtype.h"
#include "torc/error.h"
#include "torc/ops.h"
#include "torc/plugin.h"
#include "torc/profile.h"
#include "torc/runtime.h"
#include "torc/tensor.h"

#define TORC__MAX_DEVICE_TYPES TORC_MAX_DEVICE_TYPES

/* ---- heap memory (mem.c) ----
 * Every heap allocation of the core goes through these (never malloc and
 * friends directly), so torc/testing.h can count them and make the Nth
 * fail. They return the C library's memory as it is. Memory from
 * elsewhere (open_memstream, a device's alloc, a plugin) is freed with the
 * matching foreign call, not torc__free. */
void *torc__malloc(size_t n);
void *torc__calloc(size_t count, size_t size);
/* On failure p stays valid and owned by the caller. */
void *torc__realloc(void *p, size_t n);
char *torc__strdup(const char *s);
void torc__free(void *p);
/* Frees a string from json_dumps (jansson's allocator, whichever it is). */
void torc__json_free(void *p);
/* Brackets the core's use of jansson on this thread. Inside, the first
 * failed allocation makes every later one fail too (jansson goes on after
 * some failures and then overruns a buffer that came up short); end
 * returns 1 if one failed: a failed parse was then out of memory, and a
 * text json_dumps returned may lack a key. */
void torc__json_begin(void);
int torc__json_end(void);
/* One allocation attempt that does not go through the wrappers above (a
 * pooled object, a device block): counts it and returns 1 when the
 * injector says it must fail. */
int torc__alloc_fault(void);
/* Adjusts the live-block count (+1 taken, -1 given back) for memory that
 * bypasses the wrappers but should count (pooled objects). */
void torc__alloc_track(int delta);

/* ---- errors (error.c) ---- */

/* Formats into the thread's error slot; returns status. */
int torc__set_error_v(int status, const char *fmt, va_list ap);

/* An error from a NULL input: keeps the first error if one is recorded,
 * otherwise records TORC_ERR_NULL naming `fn`. Returns TORC_ERR_NULL. */
torc_status torc__null_input(const char *fn);

/* " (did you mean 'x'?)" into buf when one of the n candidates is close to
 * `got` (edit distance), else "". For unknown-name messages. */
void torc__suggest(const char *got, const char *const *cands, int n,
                   char *buf, size_t size);

/* PyTorch's names for torc's keys (config_names.c). For `key`, not one
 * of names[0..n) of `scope` (a type name such as "conv2d", or a section
 * name such as "data.train"): the index of the name it stands for, with
 * *accepted (when not NULL) 1 when it is PyTorch's name for that very key
 * (use it in its place) and 0 when it is only to be suggested ("did you
 * mean"); -1 when it stands for none of them. */
int torc__key_alias(const char *scope, const char *key,
                    const char *const *names, int n, int *accepted);

/* The key of `section`'s own rows (not a type's keys) that `name` is a
 * PyTorch name for ("workers" for "num_workers" in "data.train"), or
 * NULL: for the builders that pass a section's other keys to a type. */
const char *torc__section_key_for(const char *section, const char *name);

/* The key that `alias` is an accepted name for in `scope`, or NULL. */
const char *torc__alias_key(const char *scope, const char *alias);

/* ---- dtypes (dtype.c): host-side element access for printing, item and
 * the creation functions that fill on the host (arange, linspace, eye) ---- */
double torc__load_f64(torc_dtype dt, const void *p);
int64_t torc__load_i64(torc_dtype dt, const void *p);
void torc__store_f64(torc_dtype dt, void *p, double v);
void torc__store_i64(torc_dtype dt, void *p, int64_t v);

/* ---- devices (device.c) ---- */

typedef struct torc__plugin torc__plugin;
struct torc_stream; /* stream_internal.h */

typedef struct torc__devtype {
  int used;
  int id; /* its slot: the torc_device.type of its devices */
  char name[TORC_DEVICE_TYPE_MAX];
  torc_device_ops ops; /* the plugin's table, missing slots zeroed */
  torc__plugin *owner; /* NULL for the built-in cpu */
  int count;
  _Atomic size_t *allocated; /* bytes allocated, per index */
  _Atomic size_t *limit; /* torc_device_set_memory_limit, per index; 0 none */
  struct torc__cache *cache; /* caching allocator per index, or NULL */
} torc__devtype;

/* The caching allocator (alloc.c). */
typedef struct torc__cache torc__cache;
/* Gives d a cache per index when caching is on. */
torc_status torc__cache_create(torc__devtype *d);
/* Frees every cached block and the cache. */
void torc__cache_destroy(torc__devtype *d);
/* nbytes of memory on (d, index): from the cache, else from d->ops.alloc
 * (rounded up to the size class). */
torc_status torc__mem_alloc(torc__devtype *d, int index, size_t nbytes,
                            void **out);
/* Returns memory from torc__mem_alloc (the same nbytes) to the cache. */
void torc__mem_free(torc__devtype *d, int index, void *ptr, size_t nbytes);
/* torc__mem_free of memory also used on the n streams `used` besides the
 * one it was allocated on (record_stream): the block allocator hands it
 * out again only after the work queued on them now has run. */
void torc__mem_free_on(torc__devtype *d, int index, void *ptr, size_t nbytes,
                       struct torc_stream *const *used, int n);

/* Per-thread pools of fixed-size objects (alloc.c): `kind` one of
 * TORC__POOL_*, the same size on every call of a kind. obj_alloc returns
 * zeroed memory or NULL. */
enum { TORC__POOL_TENSOR, TORC__POOL_STORAGE, TORC__POOL_NODE };
void *torc__obj_alloc(int kind, size_t size);
void torc__obj_free(int kind, void *p);
/* Frees the calling thread's pooled objects (torc_shutdown). */
void torc__pool_drain(void);

/* The device type with id `type`, or NULL. */
torc__devtype *torc__devtype_get(int type);

/* The id of a registered type name, or -1. */
int torc__devtype_find(const char *name);

/* Registers a device type for `owner`; returns its id or -1 (error set). */
int torc__devtype_register(torc__plugin *owner, const torc_device_ops *ops);

/* Removes every device type `owner` registered. */
void torc__devtype_unregister_owner(torc__plugin *owner);

/* Communicator types (dist.c): registered by plugins, dropped with them. */
torc_status torc__comm_register(torc__plugin *owner,
                                const torc_comm_type *type);
void torc__comm_unregister_owner(torc__plugin *owner);

/* Validates that dev names a registered type and an existing index. */
torc_status torc__device_check(torc_device dev, const char *what);

/* "cpu", "sim:0" into a static-per-thread buffer (for messages). */
const char *torc__devname(torc_device dev);

/* ---- storage and tensors (tensor.c) ---- */

typedef struct torc_storage {
  _Atomic int refcount;
  torc_device device;
  void *ptr; /* device pointer or handle */
  size_t nbytes;
  _Atomic uint64_t version;
  uint8_t host_alloc; /* from torc_host_alloc(pinned_for): free it there */
  uint8_t pinned;     /* ... and the device really pinned it */
  torc_device pinned_for;
  /* streams (stream.c): the current stream at allocation (NULL: the
   * default one), and the others it was used on (record_stream) */
  struct torc_stream *alloc_stream;
  struct torc_stream **used;
  int n_used;
  /* host_alloc memory of a pinned buffer pool: freed back into it */
  struct torc__pin_pool *pool;
} torc_storage;

/* A pool of pinned staging buffers for device `dev` (pin_pool.c), keeping
 * up to cap freed buffers until the copies that read them completed. Its
 * owner drops it with torc__pin_pool_drop; buffers still out keep it. */
typedef struct torc__pin_pool torc__pin_pool;
torc__pin_pool *torc__pin_pool_new(torc_device dev, int cap);
void torc__pin_pool_drop(torc__pin_pool *p);
/* nbytes of pinned memory: a pooled buffer whose copies completed, else a
 * new one; NULL with the error set. */
void *torc__pin_pool_get(torc__pin_pool *p, size_t nbytes);
/* Returns a buffer from torc__pin_pool_get (the storage's release). */
void torc__pin_pool_put(torc__pin_pool *p, void *ptr, size_t nbytes);
/* torc_empty_pinned over a buffer of pool p (untracked by scopes). */
torc_tensor *torc__empty_pinned_pooled(const int64_t *shape, int ndim,
                                       torc_dtype dtype, torc__pin_pool *p,
                                       torc_device for_dev);

struct torc_tensor {
  _Atomic int refcount;
  torc_dtype dtype;
  int ndim;
  int64_t shape[TORC_MAX_DIMS];
  int64_t strides[TORC_MAX_DIMS];
  int64_t offset;
  torc_storage *storage;
  /* autograd (autograd.c) */
  uint8_t requires_grad;
  uint8_t retain_grad;
  uint8_t is_view;          /* shares storage with a base tensor */
  int16_t output_nr;        /* which output of grad_fn this is */
  struct torc__node *grad_fn;  /* producer (strong); NULL for leaves */
  struct torc__node *grad_acc; /* leaf's AccumulateGrad (weak) */
  torc_tensor *grad;           /* accumulated gradient (strong) */
  struct torc__hooks *hooks;
};

/* Allocates a storage of nbytes on dev (refcount 1). */
torc_storage *torc__storage_new(torc_device dev, size_t nbytes);
void torc__storage_release(torc_storage *s);

/* A new contiguous tensor on a new storage; NOT tracked by scopes. */
torc_tensor *torc__empty(const int64_t *shape, int ndim, torc_dtype dtype,
                         torc_device dev);

/* A new tensor viewing t's storage with the given geometry; NOT tracked. */
torc_tensor *torc__view_of(const torc_tensor *t, const int64_t *shape,
                           const int64_t *strides, int ndim, int64_t offset);

/* Contiguous strides for shape. */
void torc__contiguous_strides(const int64_t *shape, int ndim, int64_t *out);

/* numel of a shape (1 for ndim 0). */
int64_t torc__numel(const int64_t *shape, int ndim);

/* Validates a shape (ndim range, sizes >= 0); `fn` names the caller. */
torc_status torc__check_shape(const int64_t *shape, int ndim, const char *fn);

/* Normalises a possibly-negative dim against ndim; error naming fn. */
torc_status torc__wrap_dim(int dim, int ndim, const char *fn, int *out);

/* "[2, 3]" into buf. */
char *torc__shape_str(const int64_t *shape, int ndim, char *buf, size_t size);

/* torc__expand, but t itself (retained) when it has that shape already:
 * for kernel inputs only, never for a result the user sees. */
torc_tensor *torc__expand_or_self(const torc_tensor *t, const int64_t *shape,
                                  int ndim);

/* ---- autocast (amp.c) ---- */

/* The thread's autocast dtype: TORC_F32 when off. */
extern _Thread_local torc_dtype torc__autocast_tl;
/* The casts an op made of its inputs under autocast (released by
 * torc__autocast_done). */
#define TORC__AC_MAX 8
typedef struct torc__ac {
  torc_tensor *held[TORC__AC_MAX];
  int n;
} torc__ac;
/* Casts the n inputs of an op of `policy` (TORC_AUTOCAST_*) in place in
 * in[] when autocast is on: a parameter's cast comes from the region's
 * cache. NULL entries and non-float or f64 inputs stay. Nothing to do
 * (ac->n = 0) when autocast is off. */
torc_status torc__autocast_inputs(torc__ac *ac, int policy,
                                  const torc_tensor **in, int n);
void torc__autocast_done(torc__ac *ac);
/* torc__autocast_inputs over the tensors that the NULL-ended list of
 * `const torc_tensor **` points to, replacing each with its cast. */
torc_status torc__autocast_args(torc__ac *ac, int policy, ...);
/* In an op's public function: casts the parameters given by address
 * (`&x, &weight`) per `policy` when autocast is on, or returns NULL on an
 * error; TORC__AC_END releases the casts once the op ran. */
#define TORC__AC_BEGIN(policy, ...)                                            \
  torc__ac ac_ = {.n = 0};                                                     \
  if (torc__autocast_tl != TORC_F32 &&                                         \
      torc__autocast_args(&ac_, policy, __VA_ARGS__,                           \
                          (const torc_tensor **)NULL))                         \
  return NULL
#define TORC__AC_END() torc__autocast_done(&ac_)
/* The policy (TORC_AUTOCAST_*) of op-table op `op`. */
int torc__autocast_op_policy(int op);
/* Turns autocast off for the backward pass (returns what to resume). */
int torc__autocast_suspend(void);
void torc__autocast_resume(int was);

/* Untracked internal versions of public functions (scope-free). */
torc_tensor *torc__contiguous(const torc_tensor *t);
torc_tensor *torc__to(const torc_tensor *t, torc_device dev);
torc_tensor *torc__cast(const torc_tensor *t, torc_dtype dtype);
torc_tensor *torc__expand(const torc_tensor *t, const int64_t *shape, int ndim);
torc_tensor *torc__reshape(const torc_tensor *t, const int64_t *shape, int ndim,
                           int allow_copy);

/* Bumps the version counter of t's storage (in-place writes). */
void torc__bump_version(torc_tensor *t);

/* ---- scopes (scope.c) ---- */

/* Hands a freshly created tensor to the innermost open scope of this
 * thread, if any. Every public function returning a tensor ends with
 * `return torc__ret(t);`; internal code uses untracked tensors. When the
 * scope cannot record it (out of memory), t is released and NULL returned
 * with the error set. */
torc_tensor *torc__ret(torc_tensor *t);
/* torc__ret for the n results of one call (NULL entries skipped): all are
 * recorded, or (out of memory) all released and set to NULL and
 * TORC_ERR_OOM returned. */
torc_status torc__ret_all(torc_tensor **ts, int n);

/* Frees this thread's scope bookkeeping (at shutdown of the thread). */
void torc__scope_thread_cleanup(void);

/* ---- ops and dispatch (dispatch.c, ops.c) ---- */

typedef enum torc__op_kind {
  TORC__OPK_COPY,
  TORC__OPK_FILL,
  TORC__OPK_RANDOM,
  TORC__OPK_UNARY,
  TORC__OPK_BINARY,
  TORC__OPK_REDUCE,
  TORC__OPK_MATMUL,
  TORC__OPK_WHERE, /* cond, a, b broadcast to one shape */
  TORC__OPK_DIM,   /* along one dim: scans, max/min with indices, softmax */
  TORC__OPK_NN     /* nn ops (ops_nn.def): shape logic per op, ops_nn.c */
} torc__op_kind;

/* Dtype rules of the op table (torc/ops.def's rule column). */
typedef enum torc__op_rule {
  TORC__R_NONE,
  TORC__R_NUMERIC,  /* unary on any non-bool dtype, same dtype out */
  TORC__R_FLOAT,    /* unary floating op: integers and bool cast to f32 */
  TORC__R_ARITH,    /* binary, promoted dtype out, bool allowed */
  TORC__R_NOBOOL,   /* binary, promoted dtype out, bool rejected */
  TORC__R_TRUEDIV,  /* binary, integers promote to f32 */
  TORC__R_CMP,      /* binary comparison, bool out */
  TORC__R_SUM,      /* reduction: integers and bool -> i64 */
  TORC__R_MEAN,     /* reduction: floating only */
  TORC__R_SAME,     /* reduction: same dtype, non-empty */
  TORC__R_FLOATONLY, /* unary: floating dtypes only (activations) */
  TORC__R_LOGICAL   /* unary on any dtype, bool out */
} torc__op_rule;

/* The op ids, in the order of the op table (torc/ops.def). */
enum {
#define TORC_OP(name, ...) TORC__OP_##name,
#include "torc/ops.def"
#undef TORC_OP
  TORC__OP_COUNT
};

typedef struct torc__opinfo {
  const char *name;
  torc__op_kind kind;
  torc__op_rule rule;
} torc__opinfo;

/* "torc_NAME", "torc_NAME_", "torc_NAME_scalar", "torc_NAME_scalar_" per
 * op, for messages. */
extern const char *const torc__op_fn[4][TORC__OP_COUNT];
extern const torc__opinfo torc__ops[TORC__OP_COUNT];

/* The id of an op name, or -1. */
int torc__op_find(const char *name);

/* The most inputs and outputs one kernel call takes: room for the list
 * ops (torc/foreach.h), which split longer lists into calls of this size. */
#define TORC__KCALL_MAX_IN 32
#define TORC__KCALL_MAX_OUT 64

/* torc_host.kernel_scratch: device scratch for the kernel running on this
 * thread, taken back when its call returns (core/dispatch.c). */
int torc__kernel_scratch(size_t nbytes, void **out);

/* The effective priority of the kernel that serves (device type, op,
 * dtype), INT_MIN when none does. */
int torc__kernel_rank(int devtype, int op, torc_dtype dt);

/* Runs op `op` on the device of out[0] with kernel dtype `kdtype`: looks up
 * the kernel (error listing where it exists), checks every tensor is on
 * that device, makes inputs contiguous when the kernel asks, calls it. */
torc_status torc__kernel_call(int op, torc_dtype kdtype,
                              const torc_tensor *const *in, int n_in,
                              torc_tensor *const *out, int n_out,
                              const void *params, size_t params_size);

/* The graph torc_trace is recording on this thread, or NULL (core/graph.c):
 * while set, torc__kernel_call records each call through
 * torc__trace_kernel_call, which runs the call with recording off. */
extern _Thread_local struct torc_graph *torc__trace_on;
/* Notes on the running trace (torc__trace_on set) that the forward read a
 * tensor's value to the host through fn (the first such read is kept:
 * graph.c). */
void torc__trace_host_read(const char *fn);
/* Lets the running trace (if any) drop the intermediates the forward has
 * let go of since its last kernel call, as each call does after itself:
 * for a forward that frees a large value before its next call makes one. */
void torc__trace_drop(void);
torc_status torc__trace_kernel_call(int op, torc_dtype kdtype,
                                    const torc_tensor *const *in, int n_in,
                                    torc_tensor *const *out, int n_out,
                                    const void *params, size_t params_size);

/* Untracked elementwise ops by id (the public torc_add etc. wrap these). */
torc_tensor *torc__unary(int op, const torc_tensor *x);
torc_tensor *torc__binary(int op, const torc_tensor *a, const torc_tensor *b);

/* Checks that every tensor is on the same device; names both on error. */
torc_status torc__same_device(const char *fn, const torc_tensor *const *ts,
                              int n);

/* Registers a kernel for `owner` (from the host table). */
int torc__kernel_register(torc__plugin *owner, const torc_kernel_reg *reg);

/* Removes every kernel `owner` registered. */
void torc__kernel_unregister_owner(torc__plugin *owner);

/* Empties the registry (shutdown). */
void torc__registry_clear(void);

/* [torc] fallback = cpu: run ops missing on a device on the cpu, with
 * copies, logged once per (op, device). */
void torc__set_fallback(int on);

/* Makes this thread prefer the kernels of plugin `provider` (by name) over
 * the registry's winner wherever that plugin has one; NULL restores the
 * registry's choice. For the conformance suite, which certifies a plugin
 * that overrides ref on the cpu by running each case once pinned to ref
 * and once pinned to the plugin. Exported for tools/, not public API. */
TORC_API void torc__dispatch_pin(const char *provider);

/* ---- autograd (autograd.c: the tape and the engine; derivatives.c: the
 * backward formulas) ---- */

#define TORC__MAX_SAVED 8
#define TORC__MAX_OUTPUTS 4

typedef struct torc__node torc__node;

/* A backward formula: from the gradients of the node's outputs (gout[i],
 * never NULL: missing ones are zeros) compute the gradients of its inputs
 * into gin[i] (new references) for each i with torc__needs_grad(n, i).
 * Runs in no-grad mode with scopes suspended, so it may call the public
 * ops freely and must release what it creates. A gradient may have the
 * broadcast shape or another dtype/device than the input: the engine sums
 * it to the input's shape and casts/moves it. */
typedef torc_status (*torc__backward_fn)(torc__node *n,
                                         torc_tensor *const *gout,
                                         torc_tensor **gin);

typedef struct torc__edge {
  torc__node *node; /* strong; NULL when the input needs no grad */
  int input_nr;     /* which output of `node` the input was */
} torc__edge;

typedef struct torc__inmeta {
  int ndim;
  torc_dtype dtype;
  torc_device device;
  int64_t shape[TORC_MAX_DIMS];
} torc__inmeta;

struct torc__node {
  _Atomic int refcount;
  const char *name;     /* "MulBackward" */
  const char *op;       /* forward op name, for messages */
  torc__backward_fn fn; /* NULL for AccumulateGrad */
  uint64_t seq;         /* creation order */
  int n_in, n_out;
  torc__edge *next;     /* n_in */
  torc__inmeta *in;     /* n_in */
  torc__inmeta out[TORC__MAX_OUTPUTS];
  torc_tensor *out_weak[TORC__MAX_OUTPUTS]; /* for retain_grad and hooks */
  torc_tensor *saved[TORC__MAX_SAVED];      /* detached views */
  uint64_t saved_version[TORC__MAX_SAVED];
  int n_saved;
  int freed;            /* saved tensors released by a backward */
  torc_tensor *leaf;    /* AccumulateGrad: the leaf (strong) */
  uint8_t view;         /* made by a view op: outputs share the input's data */
  uint64_t walk_gen;    /* engine bookkeeping (autograd.c) */
  int walk_idx;
  _Alignas(16) unsigned char params[96]; /* op parameters the formula needs */
  char *module; /* anomaly mode: "features.3 (linear)" running it, or NULL */
  const void *prof_module; /* profiling: the module that recorded it */
};

/* ---- the profiler (profile.c) ---- */

/* Nonzero while torc_profile_enable(1) is in effect. */
extern _Atomic int torc__prof_on;
/* Monotonic nanoseconds. */
uint64_t torc__prof_now(void);
/* Charges one kernel call of `op` on device type `devtype`, served by the
 * plugin named `provider`, that took `ns` and cost `cost` (its FLOPs also
 * go to the calling thread's count, torc__prof_thread_work). */
void torc__prof_kernel(int op, int devtype, const char *provider,
                       uint64_t ns, const torc_kernel_cost *cost);
/* The work of the kernels this thread has run while profiling: FLOPs with
 * a formula, and the calls without one. A module's share is the change
 * across its forward (or a backward formula it recorded). */
typedef struct torc__prof_work {
  uint64_t flops, uncounted;
} torc__prof_work;
torc__prof_work torc__prof_thread_work(void);
/* Charges forward (backward 0) or backward (1) time `ns` to module m, with
 * the kernels' work since `since` (a torc__prof_thread_work of this thread
 * at the pass's start). `name` "PATH (TYPE)" at its first forward; NULL:
 * charge only a module already seen. */
void torc__prof_module(const void *m, const char *name, int backward,
                       uint64_t ns, torc__prof_work since);
/* The cost of kernel call `a` of op id `op` (torc_kernel_cost_of). */
void torc__kernel_cost(int op, const torc_kernel_args *a,
                       torc_kernel_cost *c);
/* Frees the profiler's tables (torc_shutdown). */
void torc__profile_clear(void);
/* The current scope of autograd (autograd.c), per thread: the region of
 * code whose ops are running (the module forward wrapper enters one per
 * module). Nodes recorded in it carry its key for the profiler and, in
 * anomaly mode, its label, so a NaN gradient names the layer. `label`
 * writes the key's name into buf and returns it (NULL: no name). */
typedef const char *(*torc__scope_label_fn)(const void *key, char *buf,
                                            size_t size);
typedef struct torc__grad_scope {
  const void *key;
  torc__scope_label_fn label;
} torc__grad_scope;

/* Makes (key, label) the current scope and returns the one it replaces,
 * which the caller hands back to torc__grad_scope_restore when its region
 * ends. */
torc__grad_scope torc__grad_scope_enter(const void *key,
                                        torc__scope_label_fn label);
void torc__grad_scope_restore(torc__grad_scope outer);

/* The current scope's key, or NULL outside any scope. */
const void *torc__grad_scope_key(void);

/* The current scope's label written into buf, or NULL outside any scope. */
const char *torc__grad_scope_label(char *buf, size_t size);

/* 1 if ops should record: grad mode enabled and some input requires grad. */
int torc__should_record(const torc_tensor *const *in, int n);

/* 1 in inference mode (no version bumps). */
int torc__inference_mode(void);

/* A node for op `op` over n inputs (edges to their producers); NULL and an
 * error on OOM. The caller saves what the formula needs, then attaches the
 * outputs with torc__node_attach (which hands the reference over). */
torc__node *torc__node_new(const char *name, const char *op,
                           torc__backward_fn fn, const torc_tensor *const *in,
                           int n_in);

/* Saves t (as a detached view, with its current version) in slot order. */
torc_status torc__node_save(torc__node *n, const torc_tensor *t);

/* Makes the outputs non-leaves produced by n; consumes the caller's
 * reference to n. */
void torc__node_attach(torc__node *n, torc_tensor *const *out, int n_out);

/* Releases a node reference (recursively frees the graph behind it). */
void torc__node_release(torc__node *n);

/* 1 if input i of n needs a gradient. */
static inline int torc__needs_grad(const torc__node *n, int i) {
  return n->next[i].node != NULL;
}

/* Records op `op` of torc/ops.def for a unary/binary op with the formula in
 * derivatives.c's table (no-op if the op is not differentiable or nothing
 * requires grad). Returns an error only on OOM. */
torc_status torc__record_op(int op, const torc_tensor *const *in, int n_in,
                            torc_tensor *out, const void *params,
                            size_t psize);

/* The derivatives table: formula and what to save, per op id. */
typedef struct torc__derivative {
  const char *name;      /* "ExpBackward" */
  torc__backward_fn fn;  /* NULL: not differentiable */
  unsigned save;         /* bit i: input i; bit 7: the output */
} torc__derivative;
extern const torc__derivative torc__derivatives[TORC__OP_COUNT];

/* Releases the autograd fields of a tensor being freed. */
void torc__autograd_release(torc_tensor *t);

/* Scope tracking is suspended while > 0 (the engine runs formulas so). */
void torc__scope_suspend(int delta);

/* Checks an in-place write to t is allowed by autograd (not a leaf that
 * requires grad in grad mode, not a view of a tensor requiring grad).
 * `fn` names the op. */
torc_status torc__check_inplace(const torc_tensor *t, const char *fn);

/* View-like ops' records (derivatives.c). `p` holds the op's integers:
 * PERMUTE: the dims; TRANSPOSE: d0, d1; SLICE: dim, start, end, step;
 * SELECT: dim, index; RESHAPE, EXPAND, IDENTITY: nothing. Records when
 * `in` requires grad; returns out, or NULL (releasing out) on failure. */
enum {
  TORC__VIEW_RESHAPE,
  TORC__VIEW_PERMUTE,
  TORC__VIEW_TRANSPOSE,
  TORC__VIEW_EXPAND,
  TORC__VIEW_SLICE,
  TORC__VIEW_SELECT,
  TORC__VIEW_IDENTITY /* clone, contiguous, to, to_dtype: not a view */
};
torc_tensor *torc__record_view(torc_tensor *out, const torc_tensor *in,
                               int kind, const int64_t *p, int np);

/* When n is the node of a SELECT or SLICE view: its kind and parameters
 * (p as torc__record_view took them), returning 1; 0 for any other node.
 * The engine adds such a view's gradient into its region in place. */
int torc__view_region(const torc__node *n, int *kind, int64_t p[4]);

/* Records matmul on its original operands (a_vec/b_vec: a 1-D operand was
 * promoted to a matrix). */
torc_status torc__record_matmul(const torc_tensor *a, const torc_tensor *b,
                                torc_tensor *out, int a_vec, int b_vec);

/* Records a reduction (params: the mask and keepdim). */
torc_status torc__record_reduce(int op, const torc_tensor *in,
                                torc_tensor *out, uint32_t mask, int keepdim);

/* Sums g over the dims that broadcasting expanded, giving `shape`. */
torc_tensor *torc__sum_to(const torc_tensor *g, const int64_t *shape, int ndim);

/* ---- shared by ops.c, ops_elementwise.c and ops_reduce.c ---- */

/* torch.result_type of two tensors (0-dim operands promote only across
 * categories). */
torc_dtype torc__result_type(const torc_tensor *a, const torc_tensor *b);

/* Broadcast shape of a and b into out (error naming fn). */
torc_status torc__broadcast_shapes(const char *fn, const torc_tensor *a,
                                   const torc_tensor *b, int64_t *out,
                                   int *out_ndim);

/* t cast to dt: a new reference (t itself, retained, when it already is). */
torc_tensor *torc__as_dtype(const torc_tensor *t, torc_dtype dt);

/* torc__unary with kernel parameters (recorded into node->params). */
torc_tensor *torc__unary_p(int op, const torc_tensor *x, const void *params,
                           size_t psize);

/* a op= b as the public torc_add_ etc. (b broadcast to a, a's dtype). */
torc_status torc__binary_inplace(int op, torc_tensor *a, const torc_tensor *b);

/* A 0-dim tensor holding v, untracked (integer dtypes take it exactly
 * when it is integral). */
torc_tensor *torc__scalar(double v, torc_dtype dt, torc_device dev);

/* Untracked matmul (torc_matmul's rules, recorded as MatmulBackward). */
torc_tensor *torc__matmul(const torc_tensor *a, const torc_tensor *b);

/* Records max_dim/min_dim (op) on x: only `values` gets the node; dim is
 * wrapped. */
torc_status torc__record_max_dim(int op, const torc_tensor *x,
                                 torc_tensor *values,
                                 const torc_tensor *indices, int dim,
                                 int keepdim);

/* Records linear (bias may be NULL) as one LinearBackward node. */
torc_status torc__record_linear(const torc_tensor *x, const torc_tensor *w,
                                const torc_tensor *b, torc_tensor *out);

/* var/std reductions' record: params {mask, keepdim, correction}. */
torc_status torc__record_reduce_c(int op, const torc_tensor *in,
                                  torc_tensor *out, uint32_t mask, int keepdim,
                                  double correction);

/* ---- plugins (plugin.c) ---- */

/* Name of a plugin ("ref"), for messages. */
const char *torc__plugin_name(const torc__plugin *p);

/* The plugin's effective priority. */
int torc__plugin_priority(const torc__plugin *p);

/* The minor ABI version the plugin was built for (its descriptor's). */
uint32_t torc__plugin_abi_minor(const torc__plugin *p);

/* Counts a kernel the plugin registered for an op this core lacks;
 * returns how many it had registered before (0 on the first). */
int torc__plugin_note_unknown_op(torc__plugin *p);

/* Records that a kernel of the plugin was refused for naming an op this
 * core lacks (`msg`, the error): its load fails with the first such
 * message even when its init goes on and returns success. */
void torc__plugin_refuse_op(torc__plugin *p, const char *msg);

/* Unloads every plugin (shutdown). */
void torc__plugins_unload_all(void);

/* 1 when a plugin of this name is loaded. */
int torc__plugin_loaded(const char *name);

/* 1 when NAME.so exists in `search_path` (colon-separated, may be NULL),
 * TORC_PLUGIN_PATH or the install folder: the plugin could be loaded. */
int torc__plugin_findable(const char *name, const char *search_path);

/* 1 when a loaded plugin's info.provides has one of the `bits`. */
int torc__plugin_provides_any(uint32_t bits);

/* The host table handed to plugins. */
extern const torc_host torc__host;

/* ---- random (random.c) ---- */

/* Reserves `n` counters from gen (NULL = default): returns seed and the
 * first offset, advancing the generator's offset by n. Thread-safe. */
void torc__generator_take(torc_generator *gen, uint64_t n, uint64_t *seed,
                          uint64_t *offset);

/* ---- configuration schema (config_schema.c) ----
 * The schema registry: each row describes one key of a section, or (key
 * NULL, type TORC__CFG_SECTION) the section itself. Other parts of the core
 * add their sections ([data.train], [model], [layer], ...) by registering a
 * static table of rows, Lua-style:
 *
 *   static const torc__config_row layer_rows[] = {
 *     {"layer", NULL, TORC__CFG_SECTION, NULL, NULL, TORC__CFG_REPEAT,
 *      "one layer of the model, in order"},
 *     {"layer", "type", TORC__CFG_ENUM, NULL, "conv2d|relu|linear",
 *      TORC__CFG_REQUIRED, "the layer's kind"},
 *     {"layer", "kernel", TORC__CFG_INT, "3", "1..", 0, "kernel size"},
 *     {NULL}};
 *   torc__config_schema_add(layer_rows);
 *
 * `section` is a name or a pattern where '*' stands for one NAME (letters,
 * digits, '_', '-'; '*' must end the pattern or precede a '.'), as in
 * "plugin.*". `key` "*" accepts any other key of the section unchecked
 * (type TORC__CFG_ANY: [plugin.NAME] passes them to the plugin).
 * `accepted`: for INT, UINT and FLOAT an inclusive range "LO..HI" where
 * either side may be left out ("1..", "0..1", NULL = any); for ENUM the
 * values separated by '|'; for STRING a description used in messages.
 * `def` is the default as text (validated at registration), NULL = none.
 * Relative PATH values (and MODULE values containing '/') resolve against
 * the INI file's folder; [plugins]-style PATHS lists resolve each entry.
 */
typedef enum torc__config_type {
  TORC__CFG_SECTION, /* the row describes the section (key NULL) */
  TORC__CFG_INT,     /* int64, optional range */
  TORC__CFG_UINT,    /* uint64 (seeds), optional range */
  TORC__CFG_FLOAT,   /* finite double, optional range */
  TORC__CFG_BOOL,    /* yes|no|true|false|on|off|1|0 */
  TORC__CFG_ENUM,    /* one of accepted ("a|b|c") */
  TORC__CFG_STRING,  /* any non-empty text */
  TORC__CFG_PATH,    /* a file or folder; resolved against the INI folder */
  TORC__CFG_PATHS,   /* colon-separated folders, each resolved */
  TORC__CFG_BYTES,   /* 4096, 512K, 1M, 2G, 1T (powers of 1024) */
  TORC__CFG_MODULE,  /* a plugin name, or a path (contains '/') resolved */
  TORC__CFG_ANY      /* key "*": anything, checked by someone else */
} torc__config_type;

/* Row flags. */
enum {
  TORC__CFG_REQUIRED = 1u << 0, /* key: must be present in each occurrence */
  TORC__CFG_REPEAT = 1u << 1    /* section: may occur more than once */
};

typedef struct torc__config_row {
  const char *section; /* name or pattern ("plugin.*"); NULL ends a table */
  const char *key;     /* NULL for the section row; "*" = any other key */
  torc__config_type type;
  const char *def;      /* default as text, or NULL */
  const char *accepted; /* range, '|'-list or description; see above */
  unsigned flags;       /* TORC__CFG_REQUIRED, TORC__CFG_REPEAT */
  const char *help;     /* one line for `torc help config` */
} torc__config_row;

/* Adds a table of rows, terminated by a row whose section is NULL. The
 * table must stay valid for the life of the process (a static array);
 * adding the same table twice is a no-op. Checks every row (known type,
 * pattern syntax, enum list, a default that passes its own check, no
 * (section, key) defined twice) and adds nothing on error (TORC_ERR_INVALID,
 * naming the row). Thread-safe. Exported (TORC_API, though not public) so
 * that tests can register sections of their own. */
TORC_API torc_status torc__config_schema_add(const torc__config_row *rows);

/* The steps config.c's searches took on this thread so far (comparisons
 * of key and section names): reading a file of n sections or keys costs
 * O(n log n) of them. Exported for the tests. */
TORC_API uint64_t torc__config_work(void);

/* Row i (0-based) of the registry, across tables in registration order
 * (the core's own rows first), or NULL past the end: for `torc help
 * config`. */
const torc__config_row *torc__config_schema_row(int i);

/* Index of the first occurrence of `section` in cfg, or -1. */
int torc__config_find(const torc_config *cfg, const char *section);

/* The value of `key` in section occurrence i as torc_config_section_get
 * (path values resolved), else the schema's default, else NULL. */
const char *torc__config_value(const torc_config *cfg, int i, const char *key);

/* The folder cfg's relative values resolve against (NULL: the current
 * one), for keys the schema does not type (a data source's paths). */
const char *torc__config_dir(const torc_config *cfg);

/* Line of section occurrence i / of `key` in it (0: absent or --set). */
int torc__config_section_line(const torc_config *cfg, int i);
int torc__config_key_line(const torc_config *cfg, int i, const char *key);

/* Typed reads of a validated key of occurrence i, the schema default
 * applied. TORC_ERR_CONFIG (with file:line) when the key is absent and has
 * no default, or when the value does not have the asked-for type. */
torc_status torc__config_int(const torc_config *cfg, int i, const char *key,
                             int64_t *out);
torc_status torc__config_uint(const torc_config *cfg, int i, const char *key,
                              uint64_t *out);
torc_status torc__config_float(const torc_config *cfg, int i, const char *key,
                               double *out);
torc_status torc__config_bool(const torc_config *cfg, int i, const char *key,
                              int *out);
torc_status torc__config_bytes(const torc_config *cfg, int i, const char *key,
                               uint64_t *out);

/* Records `status` with the message "FILE:LINE: key 'KEY' in [SECTION]:
 * <fmt...>" for key `key` of occurrence i (LINE: the key's, else the
 * section's; "--set section.key" for overrides; key NULL: "FILE:LINE:
 * [SECTION]: ..."). For builders that find a problem in a validated value
 * (a layer size that does not fit its input). Returns status. */
torc_status torc__config_error(const torc_config *cfg, int i, const char *key,
                               torc_status status, const char *fmt, ...)
    TORC_PRINTF(5, 6);

/* The status for torc__config_error when it re-records the last error (a
 * builder's) with the file's line: TORC_ERR_OOM stays so, as the file is
 * not at fault; anything else is TORC_ERR_CONFIG. */
static inline torc_status torc__config_rewrap_status(void) {
  return torc_last_status() == TORC_ERR_OOM ? TORC_ERR_OOM : TORC_ERR_CONFIG;
}

/* ---- runtime (runtime.c) ---- */

/* Creates the cpu device and reads TORC_LOG once; idempotent. Returns
 * TORC_OK, or the error (out of memory) that kept the cpu device from
 * registering: the next call tries again. */
torc_status torc__ensure_init(void);

/* Log with the plugin's name as prefix, used by the host table. */
void torc__log_v(int level, const char *fmt, va_list ap);


/* A 3-D window op's geometry (core/ops_nn_nd.c): kernel, stride,
 * dilation and the pads before and after each of depth, height, width;
 * groups for convolution; exclude_pad for average pooling. */
typedef struct torc__window3d {
  int64_t k[3], s[3], d[3], pb[3], pe[3];
  int64_t groups;
  int exclude_pad;
} torc__window3d;
enum { TORC__W3_CONV, TORC__W3_MAX, TORC__W3_AVG };
/* Convolution (w [O, C/groups, kD, kH, kW], bias b or NULL), max or
 * average pooling of x [N, C, D, H, W] with g, pads applied explicitly
 * (so they may be uneven); the result comes out of its own scope. */
torc_tensor *torc__window3d_run(const torc_tensor *x, const torc_tensor *w,
                                const torc_tensor *b, int kind,
                                const torc__window3d *g);

#endif /* TORC_INTERNAL_H */
