/* torc/plugin.h — the plugin ABI. A plugin includes only this header (and
 * the plain-type headers it pulls in) and links nothing of libtorc: it
 * reaches the core only through the torc_host table it is handed.
 *
 * A plugin is a shared object exporting exactly one symbol,
 * `torc_plugin_entry`, which returns a torc_plugin_info. The core checks
 * the ABI major version, then calls `init` with the host table; init
 * registers devices, kernels and module types (later: data sources, losses,
 * optimizers, ...).
 *
 * ABI rules (learned from ggml, whose tables changed layout under an
 * unchanged version number):
 *  - every table, in both directions, begins with its struct_size;
 *  - tables are append-only: a slot, once released, keeps its offset for
 *    the life of the ABI major version (tests/test_abi.c freezes them);
 *  - a reader calls a slot only if it lies within the writer's struct_size
 *    (TORC_HAS_SLOT); a plugin built against a newer minor version checks
 *    the host's struct_size before using newer host slots;
 *  - ops are named by stable strings ("add", "matmul"), never by an enum
 *    that could renumber; dtypes and status codes are fixed integers.
 */
#ifndef TORC_PLUGIN_H
#define TORC_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "torc/dtype.h"
#include "torc/error.h"

TORC_BEGIN_DECLS

/* ABI version. A plugin whose major differs from the core's is refused. */
#define TORC_ABI_MAJOR 1
/* Minor version: grows when slots are appended. 1.1: torc_host.api and
 * torc_host.register_module_type. 1.2: torc_host.register_data_source.
 * 1.3: torc_host.register_loss, register_optimizer, register_scheduler.
 * 1.4: torc_api.cross_entropy, sgd_step_, adam_step_ (fused ops).
 * 1.5: torc_plugin_info.requires. 1.6: torc_module_vtable.reset.
 * 1.7: torc_device_ops.flags and mem_info (the caching allocator);
 *      TORC_KERNEL_DECLINED, torc_api.ktensor_of; streams and events:
 *      torc_device_ops.stream_new .. copy_from_host_async (appended after
 *      mem_info), torc_kernel_args.stream, TORC_EVENT_NOT_READY;
 *      torc_optimizer_type.fused (multi-tensor steps);
 *      torc_device_ops.no_device_reason.
 * 1.8: torc_host.kernel_scratch (device scratch for a running kernel),
 *      torc_host.deterministic_algorithms.
 * 1.9: torc_host.register_comm (communicators, torc_comm_type). */
#define TORC_ABI_MINOR 9

/* Name of the one symbol a plugin exports. */
#define TORC_PLUGIN_ENTRY_SYMBOL "torc_plugin_entry"

/* Marks the entry symbol as exported from a -fvisibility=hidden build. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define TORC_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define TORC_PLUGIN_EXPORT
#endif

/* Most dimensions a kernel tensor has (equals TORC_MAX_DIMS). */
#define TORC_KERNEL_MAX_DIMS 8

/* 1 if the table `tbl` (whose writer set struct_size) contains `field`. */
#define TORC_HAS_SLOT(tbl, type, field)                                        \
  ((tbl)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))

/* Opaque handle the core gives each loaded plugin; pass it back to the host
 * functions that take one. */
typedef struct torc_plugin torc_plugin;

/* Declared in torc/plugin_api.h and torc/module.h; a plugin that uses them
 * includes those headers. */
struct torc_api;
struct torc_module_type;
struct torc_data_source_type; /* torc/data.h */
struct torc_loss_type;        /* torc/optim.h */
struct torc_optimizer_type;   /* torc/optim.h */
struct torc_scheduler_type;   /* torc/optim.h */

/* ------------------------------------------------------------------------
 * What a kernel sees.
 * ---------------------------------------------------------------------- */

/* A tensor as handed to a kernel: the storage's base pointer (a host
 * pointer, or a device handle the core never dereferences), an offset and
 * strides in elements (stride 0 marks a broadcast dimension). */
typedef struct torc_ktensor {
  void *data;     /* storage base: host pointer or device handle */
  int64_t offset; /* first element, in elements from data */
  int32_t dtype;  /* a torc_dtype */
  int32_t ndim;
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  int64_t strides[TORC_KERNEL_MAX_DIMS];
} torc_ktensor;

/* The arguments of one kernel call. Inputs and outputs follow the op's
 * contract (include/torc/ops.h, "Kernel contracts", and the op's row in
 * the op table, torc/ops.def: its inputs -> outputs and params). Pointers are valid
 * only during the call: a device that runs kernels asynchronously copies
 * what it needs (params_size tells how many bytes of params). */
typedef struct torc_kernel_args {
  size_t struct_size;
  const char *op;          /* the op's name */
  int32_t n_in, n_out;
  const torc_ktensor *in;  /* n_in inputs */
  const torc_ktensor *out; /* n_out outputs (already allocated) */
  const void *params;      /* op-specific parameters, or NULL */
  size_t params_size;
  int32_t device_index;    /* which device of the kernel's type */
  int32_t n_threads;       /* CPU threads the kernel may use */
  void *kernel_data;       /* the `data` given at registration */
  /* (1.7) The stream to queue the kernel on (a handle from the device's
   * stream_new), or NULL for the device's default stream. Read it only
   * when TORC_HAS_SLOT(args, torc_kernel_args, stream): an older core
   * passes a shorter struct, meaning the default stream. */
  void *stream;
} torc_kernel_args;

/* A kernel: returns TORC_OK, an error (after host->set_error), or
 * TORC_KERNEL_DECLINED. */
typedef int (*torc_kernel_fn)(const torc_kernel_args *args);

/* What a kernel returns (ABI 1.7) for a case it does not support — an odd
 * size, a layout, a params value — having written nothing and set no
 * error: the dispatcher then calls the key's next kernel in priority
 * order (the other kernels for the exact dtype, then the TORC_DTYPE_ANY
 * ones), then, on a device other than the cpu with [torc] fallback = cpu,
 * the cpu's; when every one declines, the call fails with
 * TORC_ERR_NO_KERNEL naming the op, the shapes and dtypes and each
 * provider that declined. Not a torc_status (none is negative). A core
 * older than 1.7 takes it for an error: decline only when
 * host->abi_minor >= 7. */
enum { TORC_KERNEL_DECLINED = -1 };

/* What torc_device_ops.event_query returns (ABI 1.7) for an event whose
 * work has not finished yet. Like TORC_KERNEL_DECLINED, not a
 * torc_status and not an error: no error is set. */
enum { TORC_EVENT_NOT_READY = -2 };

/* Op parameters (the layouts are frozen, as tables are). Which op takes
 * which struct is the params column of its row in torc/ops.def; each
 * comment below says what the fields mean for its ops. */

/* Reductions ("sum", "mean", "prod", "amax", "amin"): reduce the dims whose
 * bit is set in dims_mask. The output always has the input's ndim, with
 * size 1 on reduced dims (the core drops them when keepdim is off). */
typedef struct torc_reduce_params {
  uint32_t dims_mask;
  int32_t reserved;
  double correction; /* for variance-like reductions */
} torc_reduce_params;

/* "fill_": set every output element to `value` (floating dtypes) or
 * `ivalue` (integer and bool dtypes, exact for all of int64). */
typedef struct torc_fill_params {
  double value;
  int64_t ivalue;
} torc_fill_params;

/* "uniform_", "normal_", "randint_": element i (in row-major order of the
 * contiguous output) is drawn from torc/philox.h at counter offset + i. */
typedef struct torc_random_params {
  uint64_t seed;
  uint64_t offset;
  double a, b;       /* uniform_: [a, b); normal_: mean a, std b */
  int64_t low, high; /* randint_: [low, high) */
} torc_random_params;

/* Elementwise ops with scalar parameters ("leaky_relu": a = negative
 * slope; "elu": a = alpha; "gelu": flags 1 = tanh form, 0 = erf form;
 * "softplus": a = beta, b = threshold; "clamp": a = min (when flags bit 0),
 * b = max (when flags bit 1), ia/ib the same bounds for integer dtypes). */
typedef struct torc_scalar_params {
  double a, b;
  int64_t ia, ib;
  uint32_t flags;
  int32_t reserved;
} torc_scalar_params;

/* Ops along one dim ("cumsum", "max_dim", "min_dim", "softmax",
 * "log_softmax"): the dim, already wrapped to 0 <= dim < ndim (0 for a
 * 0-dim input). */
typedef struct torc_dim_params {
  int32_t dim;
  int32_t reserved;
} torc_dim_params;

/* "norm": the reduced dims as in torc_reduce_params and the order p
 * (1, 2 or INFINITY). */
typedef struct torc_norm_params {
  uint32_t dims_mask;
  int32_t reserved;
  double p;
} torc_norm_params;

/* Indexing ops ("gather", "scatter", "index_select", "index_add"; see
 * torc/indexing.h): the dim, already wrapped to 0 <= dim < ndim; reduce
 * (scatter only): 0 = replace, 1 = add. */
typedef struct torc_index_params {
  int32_t dim;
  int32_t reduce;
} torc_index_params;

/* "pad", "pad_backward": per dim (in dim order, all ndim of them) the
 * amounts added before and after (negative crops, constant mode only);
 * mode 0 constant (value), 1 reflect, 2 replicate. */
typedef struct torc_pad_params {
  int32_t mode;
  int32_t reserved;
  double value;
  int64_t before[TORC_KERNEL_MAX_DIMS];
  int64_t after[TORC_KERNEL_MAX_DIMS];
} torc_pad_params;

/* "interpolate", "interpolate_backward" over the last two dims: mode 0
 * nearest, 1 bilinear; align_corners 0 or 1 (bilinear only). */
typedef struct torc_interp_params {
  int32_t mode;
  int32_t align_corners;
} torc_interp_params;

/* "topk": the k largest (largest = 1) or smallest elements along dim,
 * sorted, ties by lower index, NaN above every number. */
typedef struct torc_topk_params {
  int64_t k;
  int32_t dim;
  int32_t largest;
} torc_topk_params;

/* Neural-network ops (include/torc/nn.h); every geometry pair is
 * {height, width}, fully resolved by the core (no zero defaults).
 * "conv2d": in x [N, C, H, W], w [O, C/groups, kH, kW] and optionally a
 * bias [O] (n_in 3); out [N, O, OH, OW].
 * "conv2d_backward_input": in gy [N, O, OH, OW], w; out gx [N, C, H, W].
 * "conv_transpose2d": as conv2d_backward_input (x in the place of gy, w
 * [C_in, C_out/groups, kH, kW]) plus an optional bias [C_out] (n_in 3).
 * "conv2d_backward_weight": in x, gy; out gw (w's shape). */
typedef struct torc_conv_kparams {
  int64_t stride[2], padding[2], dilation[2];
  int64_t groups;
} torc_conv_kparams;

/* "max_pool2d" (in x; out y and i64 indices into each H*W plane),
 * "max_pool2d_backward" (in gy, indices; out gx), "avg_pool2d",
 * "avg_pool2d_backward" (in gy; out gx). The output sizes are the out
 * tensors'; ceil_mode only changed them. divisor: avg_pool2d's
 * divisor_override, 0 = none. "adaptive_avg_pool2d" and its backward take
 * no params. */
typedef struct torc_pool_kparams {
  int64_t kernel[2], stride[2], padding[2], dilation[2];
  int32_t count_include_pad;
  int32_t ceil_mode;
  int64_t divisor;
} torc_pool_kparams;

/* The activation a fused inference kernel applies (TORC_ACT_*): none, or
 * relu with the relu op's NaN rule (relu(NaN) = NaN). */
enum { TORC_ACT_NONE = 0, TORC_ACT_RELU = 1 };

/* "linear_act": in x [M, K], w [K, N] (any strides: a linear layer's
 * weight [N, K] read transposed) and optionally b [N] (n_in 3); out y
 * [M, N], contiguous: y = act(x w + b), what matmul, add and the
 * activation give one after the other (ref rounds as they do; a fast
 * kernel agrees to a matmul's tolerance, NaN and infinities included).
 * A planned forward (torc_plan_new with TORC_PLAN_FUSE) runs a linear
 * layer and its activation as this one call. Not differentiable. */
typedef struct torc_linear_act_kparams {
  int32_t act;   /* TORC_ACT_* */
  int32_t flags; /* TORC_FUSED_CONST_WEIGHTS or 0 */
  /* With TORC_FUSED_CONST_WEIGHTS: w and b hold the same values at every
   * call that passes the same weights_id (a frozen plan's), so a kernel
   * may keep w in a layout of its own, made at the first such call, under
   * (w's address, weights_id). */
  uint64_t weights_id;
} torc_linear_act_kparams;

/* torc_linear_act_kparams.flags: the weights are constant (above). */
enum { TORC_FUSED_CONST_WEIGHTS = 1 };

/* "conv2d_act": in x, w and optionally b, as "conv2d"; out y: y =
 * pool(act(conv2d(x, w) + b)), where pool is "max_pool2d" with the
 * params `pool` when has_pool is 1 (y then has the pool's output sizes;
 * its indices are not made), and nothing when 0 (y has conv2d's sizes).
 * NaN propagates as through the separate ops (a window holding a NaN
 * gives NaN). A planned forward (TORC_PLAN_FUSE) runs a convolution, its
 * activation and the max pool after it as this one call. Not
 * differentiable. */
typedef struct torc_conv_act_kparams {
  torc_conv_kparams conv;
  int32_t act;      /* TORC_ACT_* */
  int32_t has_pool; /* 1: a max pool follows the activation */
  torc_pool_kparams pool;
  /* 1: x's (y's) memory holds its [N, C, H, W] elements in blocks of 16
   * channels, oneDNN's nChw16c: element (n, c, h, w) at ((n * C / 16 +
   * c / 16) * H * W + h * W + w) * 16 + c % 16, C a multiple of 16. A
   * planned forward hands a tensor that only the next conv2d_act reads
   * over in this layout, so that neither call reorders it; every kernel
   * of conv2d_act must honour both fields. */
  int32_t x_blocked, y_blocked;
} torc_conv_act_kparams;

/* "batch_norm": in x [N, C, *], w [C], b [C] and, when n_in is 5, the
 * running mean and var [C] (contiguous; updated in place when training,
 * with momentum and the unbiased variance); out y, mean [C], invstd [C]
 * (the batch's when training, else the running ones').
 * "batch_norm_backward": in gy, x, w, mean, invstd; out gx, gw, gb.
 * "layer_norm": in x (M rows of K elements), w, b (K); out y, mean [M],
 * rstd [M]. "group_norm": in x [N, C, *], w [C], b [C]; out y, mean and
 * rstd [N * groups]. Their backwards: in gy, x, w, mean, rstd; out gx, gw,
 * gb. */
typedef struct torc_norm_kparams {
  double eps;
  double momentum;
  int64_t groups;  /* group_norm */
  int32_t training; /* batch_norm */
  int32_t reserved;
} torc_norm_kparams;

/* "dropout": in x; out y and the mask (x's dtype: 0 or 1/(1-p)). Element
 * i (row-major) is kept when torc_philox_uniform(seed, offset + i) >= p. */
typedef struct torc_dropout_kparams {
  uint64_t seed;
  uint64_t offset;
  double p;
} torc_dropout_kparams;

/* "scaled_dot_product_attention": in q [B..., L, E], k [B..., S, E],
 * v [B..., S, Ev] (+ mask, broadcast to [B..., L, S] with stride 0, bool:
 * true takes part, or floating: added to the scores); out o [B..., L, Ev]
 * and lse [B..., L] (the log-sum-exp of each row's scaled, masked scores).
 * Its backward: in gy, q, k, v, o, lse (+ mask); out gq, gk, gv. With
 * dropout_p > 0 the weight of (row r of the flattened [B..., L], key j) is
 * kept when torc_philox_uniform(seed, offset + r * S + j) >= dropout_p. */
typedef struct torc_attention_kparams {
  double scale;     /* the scores' factor, already resolved */
  double dropout_p; /* 0: no dropout */
  uint64_t seed;
  uint64_t offset;
  int32_t is_causal; /* key j takes part in row i only when j <= i */
  int32_t has_mask;  /* in[3] (forward) or in[6] (backward) is the mask */
} torc_attention_kparams;

/* Kernel registration flags. */
enum {
  /* The kernel needs contiguous inputs; the core makes copies if needed. */
  TORC_KERNEL_CONTIGUOUS = 1u << 0
};

/* One kernel registration: (device type, op name, dtype) -> fn. Among the
 * kernels for one key, the highest plugin priority + `priority` wins (the
 * later registration on a tie); when it declines a case, the next one in
 * that order runs (TORC_KERNEL_DECLINED). */
typedef struct torc_kernel_reg {
  size_t struct_size;
  const char *device_type; /* "cpu", "sim", ... */
  const char *op;          /* "add", "matmul", ... */
  int32_t dtype;           /* a torc_dtype, or TORC_DTYPE_ANY */
  int32_t priority;        /* added to the plugin's priority */
  torc_kernel_fn fn;
  void *data;              /* handed back in torc_kernel_args.kernel_data */
  uint32_t flags;          /* TORC_KERNEL_* */
} torc_kernel_reg;

/* ------------------------------------------------------------------------
 * Devices.
 * ---------------------------------------------------------------------- */

/* Copy flags for copy_from_host. */
enum {
  /* The source is pinned memory from host_alloc and the caller keeps it
   * alive and unchanged until the next synchronize: the copy may be
   * queued without staging. */
  TORC_COPY_ASYNC_PINNED = 1u << 0
};

/* Device flags (torc_device_ops.flags). */
enum {
  /* The core caches the device's memory in its block allocator (pools of
   * segments split into blocks and merged back, as PyTorch's CUDA caching
   * allocator): alloc is called for whole segments (2 MiB and up) only,
   * free only with a handle alloc returned. The device promises that a
   * handle plus a byte offset inside its allocation is a valid handle
   * (kernels, copies), as CUDA device pointers are. */
  TORC_DEVICE_CACHING = 1u << 0
};

/* A device type. The core calls these with the `user` pointer given here.
 * Slots marked optional may be NULL. Memory handles returned by alloc are
 * opaque to the core: it passes them to kernels and back to free/copy. */
typedef struct torc_device_ops {
  size_t struct_size;
  const char *type; /* the type name, e.g. "sim" (letters, digits, '_') */
  void *user;
  /* Number of devices (0 is fine: the type exists, no hardware found). */
  int (*count)(void *user);
  /* Allocates nbytes (nbytes may be 0); TORC_ERR_OOM with a message naming
   * the request, the used and the total bytes when it cannot. */
  int (*alloc)(void *user, int index, size_t nbytes, void **out);
  /* Frees after the work queued so far (stream order). */
  void (*free)(void *user, int index, void *ptr);
  /* Copies host memory to dst + dst_offset bytes. Unless flags has
   * TORC_COPY_ASYNC_PINNED, src may be reused as soon as this returns. */
  int (*copy_from_host)(void *user, int index, void *dst, size_t dst_offset,
                        const void *src, size_t nbytes, uint32_t flags);
  /* Copies src + src_offset bytes to host memory; waits for queued work. */
  int (*copy_to_host)(void *user, int index, void *dst, const void *src,
                      size_t src_offset, size_t nbytes);
  /* Waits for queued work; reports errors of asynchronous kernels. */
  int (*synchronize)(void *user, int index);
  /* (optional) Pinned host memory for fast copies; NULL = plain memory. */
  int (*host_alloc)(void *user, size_t nbytes, void **out);
  /* (optional) Frees host_alloc memory, but only after the queued copies
   * that read it have run (stream order): the core frees a pinned tensor
   * as soon as its last reference goes, even right after an async copy. */
  void (*host_free)(void *user, void *ptr);
  /* (optional) One line describing device `index`, e.g. its memory. */
  int (*describe)(void *user, int index, char *buf, size_t size);
  /* (optional) Called at unload, after every tensor is freed. */
  void (*shutdown)(void *user);
  /* (1.7) TORC_DEVICE_* flags; 0 (or a table without the slot): the core
   * calls alloc and free for every tensor storage, uncached. */
  uint32_t flags;
  /* (optional, 1.7) The device's free and total bytes, for out-of-memory
   * messages and torc_memory_summary. */
  int (*mem_info)(void *user, int index, size_t *free_bytes,
                  size_t *total_bytes);

  /* ---- (optional, 1.7) Streams and events, as CUDA's. A device has a
   * default stream (the handle NULL), which the slots above use; these
   * add more. A stream is a FIFO of work on one device; an event marks a
   * point of a stream. The core uses streams only when stream_new,
   * stream_free, event_new, event_record, stream_wait_event, event_query,
   * event_synchronize and event_free are all set; without them the device
   * has one stream and the core's stream API is synchronous (an event is
   * complete once recorded, after a synchronize). With streams, `free`
   * (above) frees after the work queued so far on every stream of the
   * device, and copy_to_host waits for every stream. ---- */

  /* A new stream of device `index` in *out (never NULL). */
  int (*stream_new)(void *user, int index, void **out);
  /* Frees a stream after the work queued on it has run. */
  void (*stream_free)(void *user, int index, void *stream);
  /* A new event of device `index` in *out, not recorded yet (waiting on
   * it or querying it finds it complete, as in CUDA). */
  int (*event_new)(void *user, int index, void **out);
  /* Records `event` on `stream` (NULL: the default stream): it completes
   * when the work queued on that stream so far has run. Recording again
   * moves it to the new point. */
  int (*event_record)(void *user, int index, void *event, void *stream);
  /* Makes `stream` of device `index` wait, on the device, until `event`
   * (as last recorded when this is called) completes: the host does not
   * wait. The event may belong to another device of the same type. */
  int (*stream_wait_event)(void *user, int index, void *stream, void *event);
  /* TORC_OK when `event` completed (or was never recorded),
   * TORC_EVENT_NOT_READY when not yet, or an error. Never blocks. */
  int (*event_query)(void *user, int index, void *event);
  /* Blocks the host until `event` completes; reports errors of
   * asynchronous work, as synchronize does. */
  int (*event_synchronize)(void *user, int index, void *event);
  /* Frees an event; work still queued to record or wait on it runs as if
   * it were alive. */
  void (*event_free)(void *user, int index, void *event);
  /* (optional) Queues a copy of src + src_offset bytes of device `index`
   * to dst, host memory from host_alloc, on `stream` and returns at once:
   * the data is in dst once an event recorded on that stream after the
   * call has completed. dst must stay allocated until then. */
  int (*copy_to_host_async)(void *user, int index, void *dst, const void *src,
                            size_t src_offset, size_t nbytes, void *stream);
  /* (optional) Copies between two devices of this type without the host:
   * queued on `stream`, a stream of src_index (NULL: its default), after
   * the work queued so far on it. The core makes that stream wait for the
   * destination's stream first, and the destination's stream wait for an
   * event recorded after the copy. */
  int (*copy_device_to_device)(void *user, int dst_index, void *dst,
                               size_t dst_offset, int src_index,
                               const void *src, size_t src_offset,
                               size_t nbytes, void *stream);
  /* (optional) copy_from_host queued on `stream` (NULL: the default one);
   * the old slot means the default stream. */
  int (*copy_from_host_async)(void *user, int index, void *dst,
                              size_t dst_offset, const void *src,
                              size_t nbytes, uint32_t flags, void *stream);
  /* (optional, 1.7) Why count is 0, for the message of a device that does
   * not exist: one sentence with the runtime's own words and what to do,
   * e.g. "no CUDA device was found (...): ...". Writes a NUL-terminated
   * text into buf; TORC_OK, or an error status for "no reason known". */
  int (*no_device_reason)(void *user, char *buf, size_t size);
} torc_device_ops;

/* ------------------------------------------------------------------------
 * Communicators (ABI 1.9): the collectives of data-parallel training, on
 * an engine the field runs (MPI, NCCL). The core calls them from one
 * thread at a time.
 * ---------------------------------------------------------------------- */

/* Reductions, fixed integers (torc_dist_op in torc/dist.h). */
enum { TORC_COMM_SUM = 0, TORC_COMM_AVG = 1, TORC_COMM_MAX = 2 };

/* What a communicator's init gets. */
typedef struct torc_comm_init_args {
  size_t struct_size;
  int rank, world; /* as the launcher set them */
  int device_index; /* the device this rank computes on (its GPU) */
  /* The bytes rank 0's get_unique_id made, the same on every rank (the
   * core sends them over the bootstrap communicator); NULL for a backend
   * without get_unique_id. */
  const void *unique_id;
  size_t unique_id_size;
  double timeout_s; /* [dist] timeout: a collective that has not completed
                       by then fails */
} torc_comm_init_args;

/* A communicator type. Buffers are a device memory handle (as the device's
 * alloc gave it; the host pointer on the cpu) and a byte offset into it;
 * `stream` is the device's stream the collective runs on (NULL on the
 * cpu). A collective with `work` non-NULL may return before it completes,
 * with a handle in *work for test and wait; with `work` NULL it completes
 * before returning. Every rank calls the collectives in the same order. */
typedef struct torc_comm_type {
  size_t struct_size;
  const char *name;        /* "mpi", "nccl": [dist] backend */
  const char *device_type; /* the tensors it moves: "cpu", "cuda" */
  const char *description; /* one line */
  /* (optional) Writes a new unique id into buf (at most *size bytes) and
   * its length into *size; rank 0 calls it before init. */
  int (*get_unique_id)(void *buf, size_t *size);
  /* Joins the world: rank and world from args, or the backend's own (MPI
   * knows them); returns the handle in *comm. */
  int (*init)(const torc_comm_init_args *args, void **comm);
  /* The rank and world size the backend sees. */
  int (*rank)(void *comm);
  int (*world)(void *comm);
  /* In place: buf[0..count) of dtype dt reduced across ranks with op
   * (TORC_COMM_*). */
  int (*all_reduce)(void *comm, void *buf, size_t offset, size_t count,
                    torc_dtype dt, int op, void *stream, void **work);
  /* nbytes of root's buf to every rank's. */
  int (*broadcast)(void *comm, void *buf, size_t offset, size_t nbytes,
                   int root, void *stream, void **work);
  /* Rank r's nbytes of send to recv + r * nbytes, on every rank. */
  int (*all_gather)(void *comm, const void *send, size_t send_offset,
                    void *recv, size_t recv_offset, size_t nbytes,
                    void *stream, void **work);
  /* send (world * count elements) reduced across ranks with op; rank r
   * keeps block r in recv (count elements). */
  int (*reduce_scatter)(void *comm, const void *send, size_t send_offset,
                        void *recv, size_t recv_offset, size_t count,
                        torc_dtype dt, int op, void *stream, void **work);
  /* Progress: *done = 1 when work completed (work is then released). */
  int (*test)(void *comm, void *work, int *done);
  /* Waits for work at most timeout_s seconds: TORC_OK (work released), or
   * TORC_ERR_DIST naming the collective and the timeout, or another error. */
  int (*wait)(void *comm, void *work, double timeout_s);
  /* Every rank reaches it, within timeout_s. */
  int (*barrier)(void *comm, double timeout_s);
  /* Leaves the world. With `abort`, after a failure: the other ranks are
   * stopped too (MPI_Abort, ncclCommAbort), and the process may end. */
  void (*destroy)(void *comm, int abort);
} torc_comm_type;

/* ------------------------------------------------------------------------
 * The host table: what the core offers a plugin.
 * ---------------------------------------------------------------------- */

typedef struct torc_host {
  size_t struct_size;
  uint32_t abi_major, abi_minor;
  const char *core_version;
  /* Records an error for the calling thread; returns status. */
  int (*set_error)(int status, const char *fmt, ...) TORC_PRINTF(2, 3);
  /* Logs a line to the core's log (stderr by default). */
  void (*log)(int level, const char *fmt, ...) TORC_PRINTF(2, 3);
  /* The value of one of the plugin's declared keys from its [plugin.NAME]
   * section, or its declared default, or NULL. Valid during init. */
  const char *(*config_get)(torc_plugin *self, const char *key);
  /* Registers a device type. */
  int (*register_device)(torc_plugin *self, const torc_device_ops *ops);
  /* Registers a kernel. Ops the core does not know are logged and
   * ignored (a newer plugin on an older core). */
  int (*register_kernel)(torc_plugin *self, const torc_kernel_reg *reg);
  /* The thread count set by [torc] threads (>= 1). */
  int (*num_threads)(void);
  /* The core's vsnprintf-style error setter, for plugins forwarding errors
   * collected on their own threads. */
  int (*set_error_v)(int status, const char *fmt, va_list ap);

  /* ---- ABI 1.1 (check TORC_HAS_SLOT(host, torc_host, api) first) ---- */

  /* The core's public functions as a table (torc/plugin_api.h): tensors,
   * ops, autograd, modules, init. Valid until the plugin is unloaded. */
  const struct torc_api *api;
  /* Registers a module type (torc/module.h), so that torc_module_create /
   * torc_module_build and the INI trainer can build it by name. The struct,
   * its strings and keys are borrowed: they live in the plugin. The type is
   * unregistered when the plugin is unloaded (torc_shutdown), so every
   * module built from it must be freed before then. Errors:
   * TORC_ERR_INVALID for a bad name or one already registered (the message
   * names both owners). A plugin whose info.provides lacks
   * TORC_PROVIDES_MODULE is accepted with a warning. */
  int (*register_module_type)(torc_plugin *self,
                              const struct torc_module_type *type);

  /* ---- ABI 1.2 (check TORC_HAS_SLOT(host, torc_host,
   * register_data_source) first) ---- */

  /* Registers a data source type (torc/data.h), so that torc_dataset_open
   * and [data.*] INI sections can open it by name. The struct, its strings
   * and keys are borrowed: they live in the plugin. The type is
   * unregistered when the plugin is unloaded (torc_shutdown) or when its
   * init fails, so every dataset opened from it must be closed before then.
   * Errors: TORC_ERR_INVALID for a bad name, a missing open/length/get/close
   * or a name already registered (the message names both owners). A plugin
   * whose info.provides lacks TORC_PROVIDES_DATA is accepted with a
   * warning. */
  int (*register_data_source)(torc_plugin *self,
                              const struct torc_data_source_type *type);

  /* ---- ABI 1.3 (check TORC_HAS_SLOT(host, torc_host,
   * register_scheduler) first) ---- */

  /* Register a loss, optimizer or learning-rate scheduler type
   * (torc/optim.h), so that torc_loss_build / torc_optimizer_build /
   * torc_scheduler_build and the [loss], [optimizer] and [scheduler] INI
   * sections can build it by name. The struct, its strings and keys are
   * borrowed: they live in the plugin. The type is unregistered when the
   * plugin is unloaded (torc_shutdown) or when its init fails, so every
   * loss, optimizer and scheduler built from it must be freed before then.
   * Errors: TORC_ERR_INVALID for a bad name, a missing required function
   * (loss: forward; optimizer: update, and "lr" among its keys; scheduler:
   * lr) or a name already registered (the message names both owners). A
   * plugin whose info.provides lacks TORC_PROVIDES_LOSS (losses) or
   * TORC_PROVIDES_OPTIM (optimizers, schedulers) is accepted with a
   * warning. */
  int (*register_loss)(torc_plugin *self, const struct torc_loss_type *type);
  int (*register_optimizer)(torc_plugin *self,
                            const struct torc_optimizer_type *type);
  int (*register_scheduler)(torc_plugin *self,
                            const struct torc_scheduler_type *type);

  /* ---- ABI 1.8 (check TORC_HAS_SLOT(host, torc_host, kernel_scratch)
   * first) ---- */

  /* Scratch memory for the kernel now running on this thread (cuDNN's
   * workspace, a sort's buffers): at least nbytes of the call's device, a
   * memory handle in *out (NULL for nbytes 0), from the core's caching
   * allocator on the call's stream. It is the kernel's until the call
   * returns; then the core takes it back, and work the kernel queued on
   * its stream may still use it (a later allocation on that stream runs
   * after it). At most 4 requests per call. TORC_OK, TORC_ERR_OOM (with
   * the allocator's message), or TORC_ERR_INVALID outside a kernel call. */
  int (*kernel_scratch)(size_t nbytes, void **out);
  /* 1 when deterministic algorithms are asked for ([torc] deterministic =
   * yes, torc_use_deterministic_algorithms): a kernel then avoids
   * atomics-ordered sums and algorithms chosen by timing. Read it per
   * call: a program may switch it at any time. */
  int (*deterministic_algorithms)(void);

  /* ---- ABI 1.9 (check TORC_HAS_SLOT(host, torc_host, register_comm)
   * first) ---- */

  /* Registers a communicator type ([dist] backend, torc_dist_init). The
   * struct and its strings are borrowed: they live in the plugin.
   * TORC_ERR_INVALID for a bad name, a missing init, rank, world,
   * all_reduce, broadcast, wait, barrier or destroy, or a name already
   * registered. A plugin whose info.provides lacks TORC_PROVIDES_COMM is
   * accepted with a warning. */
  int (*register_comm)(torc_plugin *self, const torc_comm_type *type);
} torc_host;

/* ------------------------------------------------------------------------
 * The plugin's side.
 * ---------------------------------------------------------------------- */

/* What a plugin provides (torc_plugin_info.provides). */
enum {
  TORC_PROVIDES_DEVICE = 1u << 0,
  TORC_PROVIDES_KERNELS = 1u << 1,
  TORC_PROVIDES_DATA = 1u << 2,
  TORC_PROVIDES_LOSS = 1u << 3,
  TORC_PROVIDES_OPTIM = 1u << 4,
  TORC_PROVIDES_MODULE = 1u << 5,
  TORC_PROVIDES_COMM = 1u << 6
};

/* Plugin flags (torc_plugin_info.flags). */
enum {
  /* Never dlclose (plugins pulling CUDA or an OpenMP runtime). */
  TORC_PLUGIN_NO_UNLOAD = 1u << 0
};

/* A key the plugin accepts in its [plugin.NAME] section. */
typedef struct torc_plugin_key {
  const char *name;
  const char *help;          /* one line, with the accepted values */
  const char *default_value; /* or NULL */
} torc_plugin_key;

/* The plugin's descriptor, returned by torc_plugin_entry. */
typedef struct torc_plugin_info {
  size_t struct_size;
  uint32_t abi_major, abi_minor; /* TORC_ABI_MAJOR, TORC_ABI_MINOR */
  const char *name;              /* short name: letters, digits, '_', '-' */
  const char *version;
  const char *description;       /* one line */
  uint32_t provides;             /* TORC_PROVIDES_* */
  uint32_t flags;                /* TORC_PLUGIN_* */
  const torc_plugin_key *keys;   /* terminated by {NULL}; may be NULL */
  /* Registers what the plugin provides. Returns TORC_OK, or an error after
   * host->set_error (the core then unregisters everything it added). */
  int (*init)(const torc_host *host, torc_plugin *self);
  /* (optional) Releases the plugin's resources; called at shutdown. */
  void (*fini)(torc_plugin *self);
  /* (optional, ABI 1.5) The plugins this one stacks on, by name,
   * terminated by NULL: the core loads each that is not loaded yet (from
   * the same search path, priority 0) before calling init, so a backend
   * that provides only fast kernels can rely on ref for the rest.
   * E.g. (const char *const[]){"ref", NULL}. */
  const char *const *requires;
} torc_plugin_info;

/* The entry point's type. */
typedef const torc_plugin_info *(*torc_plugin_entry_fn)(void);

TORC_END_DECLS

#endif /* TORC_PLUGIN_H */
