/* torc/graph.h — a module's forward recorded as a static graph.
 *
 * torc_trace runs a module's forward once on example inputs and records
 * every kernel call it makes (the outermost ones: copies a kernel call
 * makes internally are not recorded) as a node: the op's name, its params
 * bytes as passed, the values it read and wrote, and the module path it
 * ran in. Values that the forward read without a node producing them are
 * the graph's inputs, the module's parameters and buffers (by their
 * state-dict names, also when read through a view of their storage), or
 * other tensors, shown as views or constants. torc_trace_check makes a
 * graph that runs at any batch size; torc_graph_save and torc_graph_load
 * keep one in a file.
 */
#ifndef TORC_GRAPH_H
#define TORC_GRAPH_H

#include <stdio.h>

#include "torc/error.h"
#include "torc/module.h"
#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* A recorded forward; free with torc_graph_free. */
typedef struct torc_graph torc_graph;

/* Runs m's forward once on the n_in inputs and records it into *out.
 * The forward runs in inference mode (TORC_INFERENCE) with m in eval
 * mode; both modes are restored afterwards. Control flow that depends on
 * the data is frozen into the one branch taken; the trace notes the
 * forward's first read of a value to the host (torc_item, torc_to_host),
 * which torc_trace_check then refuses. Returns TORC_OK, or the forward's
 * error (then *out is NULL). */
TORC_API torc_status torc_trace(torc_module *m,
                                const torc_tensor *const *inputs, int n_in,
                                torc_graph **out);

/* Traces m twice, on two example batches inputs_a and inputs_b (n_in
 * inputs each) that differ only in dim 0 (the batch; at least one input
 * must differ there, and every input that does has the same batch as the
 * others), compares the two traces node by node and returns the first in
 * *out, which torc_graph_run then also runs at other batches: each value's
 * dims that are a multiple k * B of the batch in both traces follow it
 * (reshapes that fold the batch into another dim included). Anything else
 * that differs is TORC_ERR_INVALID with one message naming the node (its
 * index, op and module path), what differed with both values, and the
 * cause: a different count or order of ops, params (a scalar computed from
 * the batch), a dim not a multiple of the batch, a constant's value or a
 * view whose geometry cannot follow the batch; such a forward branches on
 * the data or on a shape other than the batch and cannot be traced. A
 * forward that reads a value to the host (torc_item, torc_to_host: what
 * it does next may depend on it, even where both traces took the same
 * branch) is TORC_ERR_INVALID too, naming the call and module.
 * A constant the forward broadcasts over the batch follows it too; a
 * module whose first forward creates lazy parameters is traced once more.
 * TORC_ERR_SHAPE when the inputs do not differ in dim 0 only; the forward's
 * error when it fails. *out is NULL on error. */
TORC_API torc_status torc_trace_check(torc_module *m,
                                      const torc_tensor *const *inputs_a,
                                      const torc_tensor *const *inputs_b,
                                      int n_in, torc_graph **out);

/* The number of nodes (kernel calls recorded). */
TORC_API int torc_graph_n_nodes(const torc_graph *g);

/* Node i's op name ("matmul"), or NULL when i is out of range. */
TORC_API const char *torc_graph_node_op(const torc_graph *g, int i);

/* The path of the module node i ran in ("features.3"; "" for the root),
 * or NULL when i is out of range. */
TORC_API const char *torc_graph_node_module(const torc_graph *g, int i);

/* Writes the graph readably to f, one line per node:
 * `%3 = matmul(%0, @0.weight) {} f32[8,16]  # 0`, where %N is value N
 * and @name a parameter or buffer. Params show as the fields of the op's
 * params struct (torc/plugin.h) by name, `{stride=[1,1] padding=[1,1]
 * dilation=[1,1] groups=1}` for conv2d, `{dims=[1]}` for a reduction, or
 * as hex bytes for a struct without names. A view
 * the forward made without a kernel call (reshape, flatten, transpose)
 * shows as `%7 = view(%5) {strides=[64,1] offset=0} f32[3,64]` before its
 * first reader. */
TORC_API void torc_graph_print(const torc_graph *g, FILE *f);

/* Runs g again: each node's kernel is called with its recorded params on
 * new tensors of the recorded shapes, views are rebuilt from the recorded
 * geometry, and parameters, buffers and constants are the tensors the
 * trace read (so the replay follows the module's current weights). The
 * n_in inputs must have the traced dtypes and shapes, or for a graph from
 * torc_trace_check may differ in the dims that follow the batch, all at
 * one new batch B (TORC_ERR_SHAPE otherwise, and when a view cannot be
 * rebuilt at B); n_out is 1 and outputs[0] receives the result, which the
 * caller releases. On error every output is NULL. */
TORC_API torc_status torc_graph_run(const torc_graph *g,
                                    const torc_tensor *const *inputs,
                                    int n_in, torc_tensor **outputs,
                                    int n_out);

/* Writes g to `path` as a safetensors file: its metadata key "torc.graph"
 * holds the graph as JSON (nodes with the op by name, params as hex, the
 * kernel dtype, value ids read and written and the module path; values
 * with dtype, shape, batch mask, role, name and view geometry), and its
 * tensors are the graph's constants ("const.ID"). Parameters and buffers
 * are saved by name only: save the module's weights apart. Atomic, as
 * torc_safetensors_save: a previous file at path stays whole on error.
 * Errors: TORC_ERR_NULL, TORC_ERR_OOM, TORC_ERR_IO (the message names the
 * file and the reason). */
TORC_API torc_status torc_graph_save(const torc_graph *g, const char *path);

/* Reads a graph torc_graph_save wrote into *out, binding its parameters
 * and buffers by name to m's (which must have each, of the saved dtype
 * and shape; views of them must fit) and putting its constants and the
 * tensors it makes at run on m's device. The file is not trusted: every
 * count, index, dim (at most 2^40 elements a value), name, op name and
 * params size (the op's params struct) is checked before use, and any
 * fault is TORC_ERR_INVALID with one message naming the file, the value or
 * node and what is wrong (TORC_ERR_IO when it cannot be read). *out is
 * NULL on error; nothing leaks. */
TORC_API torc_status torc_graph_load(const char *path, torc_module *m,
                                     torc_graph **out);

/* Frees g and the references it holds. NULL is ignored. */
TORC_API void torc_graph_free(torc_graph *g);

/* ---- planned execution ----
 *
 * A plan runs a graph for its traced shapes without allocating: every
 * intermediate value gets a slot of one arena, assigned once from the
 * values' lifetimes (a value lives from the node that writes it to its
 * last reader; a view keeps its base alive), so values never live at the
 * same time share memory. An elementwise unary node whose input dies at
 * it writes into its input's slot. The result is a new tensor
 * (torc_plan_run) or the caller's (torc_plan_run_into: then a call
 * allocates nothing). Parameters and buffers are read as the graph reads
 * them, so a plan follows the module's current weights, except the
 * weights a rewrite made at torc_plan_new. */

/* A graph prepared for repeated runs; free with torc_plan_free. */
typedef struct torc_plan torc_plan;

/* torc_plan_new flag: folds each batch norm (eval mode) into the conv2d
 * or linear (matmul + add) before it when nothing else reads that node's
 * output: new weights w * gamma / sqrt(var + eps) and bias (b - mean) *
 * gamma / sqrt(var + eps) + beta, computed in f64 from the current
 * parameters and owned by the plan. Results then differ from eager by
 * rounding (about 1e-6 relative in f32). */
#define TORC_PLAN_FOLD_BN 1

/* torc_plan_new flag: fuse, where the plan's device has the fused kernel,
 * a linear layer (matmul, bias add) with the relu after it into one
 * "linear_act" call, and a conv2d with the relu and the max pool after it
 * (whose indices nothing reads) into one "conv2d_act" call; the
 * intermediates between them are then never written. On the reference
 * kernels the result is the eager forward's bit for bit; fast kernels
 * agree to a matmul's or convolution's rounding (oneDNN's: within 1e-5 of
 * the output's magnitude in the tests). NaN and infinities propagate as
 * through the separate ops. */
#define TORC_PLAN_FUSE 2

/* torc_plan_new flag: the weights of the fused layers are constant for the
 * plan's life, as an inference runtime's are: a fused kernel may repack
 * them once, at the first run, into a layout of its own (oneDNN's blocked
 * matmul weights: ~6% off the benchmark MLP's products). A plan built with
 * it does not see later changes to those weights (as with folded batch
 * norms): build a new plan after changing them. */
#define TORC_PLAN_FREEZE 4

/* torc_plan_new flag: run the batch in tiles of rows when the plan can and
 * a whole batch's intermediates would not fit the caches (see
 * torc_plan_tile_rows): the arena shrinks to a tile's (the benchmark CNN
 * at batch 1000: 3.9 MB instead of 37.6 MB) for a few percent of speed
 * (more kernel calls, each on fewer rows). For large inputs and small
 * memory budgets. */
#define TORC_PLAN_TILE 8

/* Builds a plan for g into *out; the plan keeps what it needs (the
 * parameters it reads, not the trace's intermediates), so g may be freed
 * right after. flags: 0 or TORC_PLAN_FOLD_BN, TORC_PLAN_FUSE,
 * TORC_PLAN_FREEZE and TORC_PLAN_TILE or'ed (batch norms are folded
 * before the fusing).
 * Errors (then *out is NULL): unknown flags, values
 * on more than one device, a view the arena cannot hold (TORC_ERR_INVALID;
 * torc_graph_run still runs such a graph), out of memory. */
TORC_API torc_status torc_plan_new(const torc_graph *g, int flags,
                                   torc_plan **out);

/* Runs the plan on n_in inputs of the traced dtypes and shapes
 * (TORC_ERR_SHAPE otherwise, naming both) and returns the result, a new
 * contiguous tensor the caller releases, in *out (NULL on error). The
 * plan's arena is reused, so calls on one plan must not overlap. */
TORC_API torc_status torc_plan_run(torc_plan *p,
                                   const torc_tensor *const *inputs,
                                   int n_in, torc_tensor **out);

/* torc_plan_run into out, a contiguous tensor of the result's dtype and
 * shape on the plan's device (TORC_ERR_SHAPE otherwise): a call then
 * allocates nothing. */
TORC_API torc_status torc_plan_run_into(torc_plan *p,
                                        const torc_tensor *const *inputs,
                                        int n_in, torc_tensor *out);

/* The arena's size in bytes: the memory the plan's intermediates share. */
TORC_API size_t torc_plan_arena_bytes(const torc_plan *p);

/* The number of kernel calls a run makes (after the rewrites). */
TORC_API int torc_plan_n_nodes(const torc_plan *p);

/* How many nodes run in place (write into their input's slot). */
TORC_API int torc_plan_n_in_place(const torc_plan *p);

/* How many batch norms were folded away. */
TORC_API int torc_plan_n_folded(const torc_plan *p);

/* How many fused kernel calls ("linear_act", "conv2d_act") the plan makes
 * in place of the ops they fuse (TORC_PLAN_FUSE). */
TORC_API int torc_plan_n_fused(const torc_plan *p);

/* The rows of the batch a plan runs at a time: 0 when it runs the whole
 * batch at once. A plan built with TORC_PLAN_TILE whose every node
 * computes each row of the batch (dim 0) from that row alone
 * (convolutions, pools, batch norm on running statistics, elementwise
 * ops, a linear layer's product) and whose intermediates of a whole batch
 * would not fit the caches (about 4 MiB) runs tiles of rows through all
 * its nodes, each tile's result copied into its rows of the result: the
 * arena then holds one tile's intermediates. The result is the same as
 * untiled (the rows are independent). */
TORC_API int64_t torc_plan_tile_rows(const torc_plan *p);

/* Frees p and the tensors it owns. NULL is ignored. */
TORC_API void torc_plan_free(torc_plan *p);

/* ---- batch inference ---- */

/* m's output for x as an inference runtime computes it: m in eval mode,
 * no autograd (model.eval() under torch.inference_mode(), without
 * changing m's mode). Returns a tensor as ops do (NULL on error).
 * The first call for x's dtype, device and shape traces m twice (at x's
 * batch and one row less, as torc_trace_check) and keeps a plan for that
 * shape with m (batch norms folded, layers fused, weights frozen:
 * TORC_PLAN_FOLD_BN | TORC_PLAN_FUSE | TORC_PLAN_FREEZE); later calls of
 * that shape run it and allocate only the result. Two shapes are kept (a
 * data set's batch and its last one), the least recently used replaced.
 * Each call checks that m is as the plans saw it (its modules, and each
 * parameter's and buffer's tensor, storage and version: an optimizer's
 * step, a loaded state dict, torc_module_to) and plans again when not.
 * A forward that cannot be planned runs eagerly; one whose ops depend on
 * the data (torc_trace_check's TORC_ERR_INVALID) runs eagerly for every
 * shape from then on, with one warning naming the op and module.
 * Weights written through raw pointers (torc_data) change no version:
 * call torc_module_predict_clear after. Calls on one module are
 * serialised; different modules run in parallel. */
TORC_API torc_tensor *torc_module_predict(torc_module *m, const torc_tensor *x);

/* Drops the plans torc_module_predict keeps with m (the next call traces
 * again), and forgets a forward found to depend on the data. */
TORC_API void torc_module_predict_clear(torc_module *m);

TORC_END_DECLS

#endif
