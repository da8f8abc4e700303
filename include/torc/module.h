/* torc/module.h — modules (torch.nn.Module): a tree of named children, each
 * holding named parameters and buffers, with a forward function. Names
 * and layouts equal PyTorch's for the same architecture ("features.0.weight",
 * linear weight [out, in], conv weight OIHW, "bn.running_mean",
 * "bn.num_batches_tracked"), so a state dict moves between the two through
 * safetensors (torc/state.h).
 *
 * Ownership: a module belongs to whoever created it until it is added to a
 * parent (torc_module_add_child and the container helpers), which then
 * owns and frees it with itself. A module has at most one parent: sharing
 * one module in two places is refused (tie weights explicitly instead).
 * Parameters and buffers are tensors the module holds a reference to;
 * accessors return borrowed pointers valid while the module lives.
 *
 * A plain C array of modules is not a module list: parameters are found
 * only through children registered with torc_module_add_child (or the
 * sequential / module_list / module_dict helpers), exactly as a Python list
 * of modules is invisible to model.parameters().
 *
 * Errors follow the rest of the API: a status (or NULL) and one message in
 * torc_last_error() naming the module by its dotted path and type, the
 * values involved and the fix. A NULL module argument keeps the first
 * error, so `torc_sequential_append(seq, torc_linear_new(0, 10, 1))` needs
 * one check. Modules are not thread-safe: one thread builds, trains or
 * moves a module at a time (forward in inference from several threads is
 * fine once every lazy parameter exists).
 */
#ifndef TORC_MODULE_H
#define TORC_MODULE_H

#include <stdio.h>

#include "torc/nn.h"
#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* A module. Opaque. */
typedef struct torc_module torc_module;

/* ------------------------------------------------------------------------
 * Defining a module type
 * ---------------------------------------------------------------------- */

/* What a module type implements. Tables are append-only (struct_size
 * first), like the plugin tables. */
typedef struct torc_module_vtable {
  size_t struct_size;
  /* Computes the output from n_in inputs (1, or 2 for the add and concat
   * nodes of a skip connection). Returns a tensor as ops do (a new
   * reference, or owned by the open scope), or NULL after setting an
   * error. It runs inside a scope the core opens around each call, so
   * intermediate results need no release: torc_relu(torc_add(a, b)) is
   * fine. May register parameters the first time it runs (lazy shapes):
   * use torc_module_device/dtype for where to create them. NULL = the
   * module has no forward (module_list, module_dict). */
  torc_tensor *(*forward)(torc_module *m, const torc_tensor *const *in,
                          int n_in);
  /* (optional) Frees the type's own state (torc_module_state). Children,
   * parameters and buffers are released by the core. */
  void (*destroy)(torc_module *m);
  /* (optional) Writes the module's settings, as PyTorch's extra_repr:
   * "784, 128, bias=True". Returns the length it wanted (snprintf). */
  int (*describe)(const torc_module *m, char *buf, size_t size);
  /* (optional; a table whose struct_size ends before this slot, such as
   * one built against an older torc, has none) Re-initialises the module's
   * own parameters and buffers, as PyTorch's reset_parameters():
   * torc_module_init, and so an INI model's [model] init, calls it for
   * every module of the tree (a module before its children), with
   * autograd off. `scheme` is "default" (the type's own init, as at
   * construction) or another scheme torc_module_init accepts
   * ("kaiming_normal", ...); a type with no use for a scheme applies its
   * default. Draw random numbers from `gen` (NULL: the default generator)
   * so that one seed gives one model. Children are reset by their own
   * slot. Returns TORC_OK, or an error status after setting the error.
   * NULL = nothing to re-initialise (activations, containers). */
  torc_status (*reset)(torc_module *m, const char *scheme,
                       torc_generator *gen);
} torc_module_vtable;

/* A new, empty module of type `type` (a short name shown in messages and
 * summaries: "linear", "MyNet") with the given vtable (borrowed: it must
 * outlive the module — make it static) and type state (handed back by
 * torc_module_state, freed by vtable->destroy). The module starts in
 * training mode on the cpu in f32. NULL on OOM or a NULL argument; the
 * state is then NOT freed. */
TORC_API torc_module *torc_module_new(const char *type,
                                      const torc_module_vtable *vtable,
                                      void *state);

/* Frees a module and, recursively, its children, parameters and buffers
 * (releasing the module's references). Refused (a warning, nothing freed)
 * for a module that has a parent: free the root. NULL is ignored. */
TORC_API void torc_module_free(torc_module *m);

/* The type state given to torc_module_new. */
TORC_API void *torc_module_state(const torc_module *m);

/* The module's type name ("linear"). */
TORC_API const char *torc_module_type_name(const torc_module *m);

/* The module's dotted path from its root ("features.0"; "" for the root).
 * The string belongs to the module and changes when it is added to a
 * parent. */
TORC_API const char *torc_module_path(const torc_module *m);

/* Registers a parameter: the module takes a reference to t (the caller
 * keeps its own) and sets requires_grad on it. `name` must be a non-empty
 * identifier without '.', unique among the module's parameters, buffers
 * and children. Errors: TORC_ERR_NULL, TORC_ERR_INVALID (bad or taken
 * name; t not floating; t not a leaf). */
TORC_API torc_status torc_module_register_parameter(torc_module *m,
                                                    const char *name,
                                                    torc_tensor *t);

/* Registers a buffer (running statistics, counters): state that is not
 * trained. Persistent buffers are part of the state dict; others are not
 * (PyTorch's persistent=False). The module takes a reference. Errors as
 * torc_module_register_parameter (any dtype is fine). */
TORC_API torc_status torc_module_register_buffer(torc_module *m,
                                                 const char *name,
                                                 torc_tensor *t,
                                                 int persistent);

/* Adds `child` under `name` and takes ownership of it — also on failure,
 * when child is freed (so a failed constructor call needs no cleanup):
 * errors TORC_ERR_NULL (child NULL: the first error is kept), and
 * TORC_ERR_INVALID (bad or taken name, child already has a parent, child
 * is m or one of its ancestors). */
TORC_API torc_status torc_module_add_child(torc_module *m, const char *name,
                                           torc_module *child);

/* Borrowed lookups by local name; NULL when absent (no error recorded). */
TORC_API torc_tensor *torc_module_parameter(const torc_module *m,
                                            const char *name);
TORC_API torc_tensor *torc_module_buffer(const torc_module *m,
                                         const char *name);
TORC_API torc_module *torc_module_child(const torc_module *m,
                                        const char *name);

/* The module at dotted path `path` below m ("features.3"; "" is m), or
 * NULL with TORC_ERR_INVALID naming the first component not found and the
 * children that exist there. */
TORC_API torc_module *torc_module_find(const torc_module *m, const char *path);

/* Number of direct children, and child i's name and module (i in
 * registration order). Out of range gives NULL. */
TORC_API int torc_module_child_count(const torc_module *m);
TORC_API const char *torc_module_child_name(const torc_module *m, int i);
TORC_API torc_module *torc_module_child_at(const torc_module *m, int i);

/* The parent, or NULL for a root. */
TORC_API torc_module *torc_module_parent(const torc_module *m);

/* Replaces a registered buffer's tensor (taking a reference and releasing
 * the old one), keeping its persistence. Errors: TORC_ERR_INVALID (no such
 * buffer). */
TORC_API torc_status torc_module_set_buffer(torc_module *m, const char *name,
                                            torc_tensor *t);

/* ------------------------------------------------------------------------
 * Using a module
 * ---------------------------------------------------------------------- */

/* Runs the module on one input. Before calling the type's forward the
 * core checks that x is on the module's device (else TORC_ERR_DEVICE
 * naming both and the two ways to fix it); a failure inside names the
 * module path and type in the message. Returns a tensor as ops do. NULL
 * for a NULL module or input (first error kept). */
TORC_API torc_tensor *torc_module_forward(torc_module *m, const torc_tensor *x);

/* As torc_module_forward with n_in inputs (add/concat nodes take two). */
TORC_API torc_tensor *torc_module_forward_n(torc_module *m,
                                            const torc_tensor *const *in,
                                            int n_in);

/* Sets training mode (1) or evaluation mode (0) on m and every module
 * below it, as model.train() / model.eval(): dropout and batch norm
 * behave differently. */
TORC_API void torc_module_train(torc_module *m, int training);

/* 1 if m is in training mode. */
TORC_API int torc_module_is_training(const torc_module *m);

/* The device and dtype the module's parameters live on (set by
 * torc_module_to / torc_module_to_dtype; lazy parameters are created
 * there). */
TORC_API torc_device torc_module_device(const torc_module *m);
TORC_API torc_dtype torc_module_dtype(const torc_module *m);

/* Moves every parameter, buffer and gradient below m to `dev`, as
 * model.to(device). Parameters keep their identity (an optimizer built
 * before the move still holds them: their storage moves). All-or-nothing:
 * on failure (TORC_ERR_DEVICE, TORC_ERR_OOM) nothing moved. */
TORC_API torc_status torc_module_to(torc_module *m, torc_device dev);

/* Converts every floating parameter and buffer (and gradient) below m to
 * the floating dtype `dtype` (integer buffers such as num_batches_tracked
 * keep theirs). All-or-nothing like torc_module_to. */
TORC_API torc_status torc_module_to_dtype(torc_module *m, torc_dtype dtype);

/* Checks that every parameter and buffer below m is on `dev`. Returns
 * TORC_OK, or TORC_ERR_DEVICE with a message listing every one that is
 * elsewhere ("features.0.weight on cpu"), and the fix. */
TORC_API torc_status torc_module_check_device(const torc_module *m,
                                              torc_device dev);

/* Freezes (requires_grad off, freeze 1) or unfreezes (freeze 0) every
 * parameter whose dotted name matches the shell pattern (fnmatch: '*'
 * crosses dots, so "features.*" is everything below features). Returns
 * the number of parameters matched, or -1 with TORC_ERR_INVALID when
 * none matched (a typo must not pass silently; the message lists the
 * parameter names). */
TORC_API int torc_module_freeze(torc_module *m, const char *pattern,
                                int freeze);

/* Number of parameter elements below m (trainable_only: only those with
 * requires_grad). */
TORC_API int64_t torc_module_parameter_count(const torc_module *m,
                                             int trainable_only);

/* ------------------------------------------------------------------------
 * Enumerating parameters and buffers
 * ---------------------------------------------------------------------- */

/* A named tensor, as listed by the enumeration functions. `name` is the
 * dotted name from the module the listing started at; `tensor` is
 * borrowed from the module (no reference is taken). */
typedef struct torc_named_tensor {
  char *name;
  torc_tensor *tensor;
} torc_named_tensor;

/* Lists every parameter below m in PyTorch's order (a module's own
 * parameters in registration order, then each child's, depth first) with
 * dotted names ("features.0.weight"). *out receives a malloc'ed array
 * freed with torc_named_tensors_free. Returns the count, or -1 on OOM. */
TORC_API int torc_module_named_parameters(const torc_module *m,
                                          torc_named_tensor **out);

/* As torc_module_named_parameters, for buffers (persistent_only: leave out
 * the non-persistent ones, as state_dict does). */
TORC_API int torc_module_named_buffers(const torc_module *m,
                                       int persistent_only,
                                       torc_named_tensor **out);

/* Frees a listing (and its names). NULL is ignored. */
TORC_API void torc_named_tensors_free(torc_named_tensor *list, int n);

/* ------------------------------------------------------------------------
 * Describing a module
 * ---------------------------------------------------------------------- */

/* The module tree as PyTorch prints it:
 *   Sequential(
 *     (0): Conv2d(1, 32, kernel_size=(3, 3), ...)
 *   )
 * A malloc'ed string (free it), or NULL on OOM. */
TORC_API char *torc_module_repr(const torc_module *m);

/* Runs m once on `example` (a batch) in evaluation mode without autograd
 * (so lazy parameters take their shapes, no running statistic changes,
 * and the training flag is restored after) and returns the summary table
 * torchsummary prints: one row per module with its path, type, output
 * shape and parameter count, then totals (parameters, trainable ones,
 * their size, buffer size, the forward pass's activation size). A
 * malloc'ed string, or NULL with the forward's error. */
TORC_API char *torc_module_summary(torc_module *m, const torc_tensor *example);

/* ------------------------------------------------------------------------
 * Containers
 * ---------------------------------------------------------------------- */

/* nn.Sequential: children named "0", "1", ... run in order. Under no-grad
 * an nn.Conv2d child and the nn.ReLU and/or nn.MaxPool2d children right
 * after it run as one fused "conv2d_act" kernel call where the device's
 * kernel for it ranks at least as high as its conv2d's (docs/inference.md,
 * "Eager no-grad forwards"): the same values up to rounding, without the
 * full-size intermediates. */
TORC_API torc_module *torc_sequential_new(void);

/* Appends `child` (taking ownership, also on failure) under the next
 * index. If the child is an add or concat node its `from` offset is
 * checked against the layers already there. */
TORC_API torc_status torc_sequential_append(torc_module *seq,
                                            torc_module *child);

/* nn.ModuleList: children named "0", "1", ...; no forward (iterate with
 * torc_module_child_at). Append with torc_sequential_append. */
TORC_API torc_module *torc_module_list_new(void);

/* nn.ModuleDict: children under names given with torc_module_add_child;
 * no forward. */
TORC_API torc_module *torc_module_dict_new(void);

/* ------------------------------------------------------------------------
 * Built-in layers. Every constructor returns a new root module (NULL with
 * an error for bad arguments: the message names the argument, its value
 * and the accepted range), on the cpu in f32, initialised as PyTorch
 * initialises the same layer (from the default generator), in training
 * mode. A 0 for in_features / in_channels / num_features means "infer it
 * at the first forward" (PyTorch's Lazy* modules): the parameters are
 * created then, on the module's device and dtype.
 * ---------------------------------------------------------------------- */

/* nn.Linear: y = x W^T + b; weight [out, in], bias [out]. */
TORC_API torc_module *torc_linear_new(int64_t in_features,
                                      int64_t out_features, int bias);

/* nn.Conv2d: weight [out, in/groups, kh, kw], bias [out]; geometry as in
 * nn.h (NULL = stride 1, padding 0, dilation 1, groups 1). */
TORC_API torc_module *torc_conv2d_new(int64_t in_channels,
                                      int64_t out_channels, int64_t kh,
                                      int64_t kw, const torc_conv2d_params *p,
                                      int bias);

/* nn.ConvTranspose2d: weight [in, out/groups, kh, kw], bias [out]. */
TORC_API torc_module *torc_conv_transpose2d_new(int64_t in_channels,
                                                int64_t out_channels,
                                                int64_t kh, int64_t kw,
                                                const torc_conv2d_params *p,
                                                int bias);

/* nn.Conv1d: weight [out, in/groups, kernel], bias [out]; input
 * [N, C, L] or one unbatched [C, L]; geometry as torc_conv1d (nn.h; NULL =
 * the defaults). in_channels 0 infers it at the first forward. */
TORC_API torc_module *torc_conv1d_new(int64_t in_channels,
                                      int64_t out_channels, int64_t kernel,
                                      const torc_conv1d_params *p, int bias);

/* nn.Conv3d: weight [out, in/groups, kD, kH, kW] (kernel {kD, kH, kW}),
 * bias [out]; input [N, C, D, H, W] or one unbatched [C, D, H, W];
 * geometry as torc_conv3d (nn.h; NULL = the defaults). */
TORC_API torc_module *torc_conv3d_new(int64_t in_channels,
                                      int64_t out_channels,
                                      const int64_t kernel[3],
                                      const torc_conv3d_params *p, int bias);

/* nn.BatchNorm1d / nn.BatchNorm2d with affine weight/bias and running
 * statistics (running_mean, running_var, num_batches_tracked). momentum
 * 0.1 and eps 1e-5 are PyTorch's defaults. */
TORC_API torc_module *torc_batchnorm1d_new(int64_t num_features, double eps,
                                           double momentum);
TORC_API torc_module *torc_batchnorm2d_new(int64_t num_features, double eps,
                                           double momentum);

/* nn.LayerNorm over the last n dims of shape `normalized_shape` (n 0 =
 * lazy: the last dim of the first input). */
TORC_API torc_module *torc_layernorm_new(const int64_t *normalized_shape,
                                         int n, double eps,
                                         int elementwise_affine);

/* nn.GroupNorm: `groups` groups over num_channels (0 = lazy). */
TORC_API torc_module *torc_groupnorm_new(int64_t groups, int64_t num_channels,
                                         double eps, int affine);

/* nn.Dropout(p), using the default generator. */
TORC_API torc_module *torc_dropout_new(double p);

/* nn.PReLU: parameter "weight" [num_parameters] (1, or the input's
 * channels, its dim 1), every slope init (PyTorch's default 0.25); forward
 * is torc_prelu (torc/nn.h). */
TORC_API torc_module *torc_prelu_new(int64_t num_parameters, double init);

/* nn.Embedding: weight [num_embeddings, dim] ~ N(0, 1). */
TORC_API torc_module *torc_embedding_new(int64_t num_embeddings, int64_t dim);

/* nn.Embedding(num_embeddings, dim, padding_idx): as torc_embedding_new,
 * with row padding_idx (negative counts from the end, as PyTorch) zero at
 * init and at every torc_module_init, and its gradient kept zero (the
 * lookups of that index pass no gradient to the weight). padding_idx
 * outside -num_embeddings .. num_embeddings-1 is TORC_ERR_INVALID. */
TORC_API torc_module *torc_embedding_padded_new(int64_t num_embeddings,
                                                int64_t dim,
                                                int64_t padding_idx);

/* Pools: nn.MaxPool2d, nn.AvgPool2d (geometry as nn.h), and
 * nn.AdaptiveAvgPool2d to out_h x out_w. */
TORC_API torc_module *torc_maxpool2d_new(const torc_pool2d_params *p);
TORC_API torc_module *torc_avgpool2d_new(const torc_pool2d_params *p);

/* nn.MaxPool1d / nn.AvgPool1d over [N, C, L] (or [C, L]), and
 * nn.MaxPool3d / nn.AvgPool3d over [N, C, D, H, W] (or [C, D, H, W]);
 * geometry as nn.h's torc_pool1d_params / torc_pool3d_params. */
TORC_API torc_module *torc_maxpool1d_new(const torc_pool1d_params *p);
TORC_API torc_module *torc_avgpool1d_new(const torc_pool1d_params *p);
TORC_API torc_module *torc_maxpool3d_new(const torc_pool3d_params *p);
TORC_API torc_module *torc_avgpool3d_new(const torc_pool3d_params *p);
TORC_API torc_module *torc_adaptive_avgpool2d_new(int64_t out_h,
                                                  int64_t out_w);

/* nn.Flatten(start_dim, end_dim) (PyTorch's defaults: 1, -1). */
TORC_API torc_module *torc_flatten_new(int start_dim, int end_dim);

/* nn.Identity. */
TORC_API torc_module *torc_identity_new(void);

/* Skip-connection nodes. Inside a sequential, an add node at index i adds
 * the output of layer i + from (from < 0; index -1 is the sequential's
 * input) to its input (the output of layer i - 1); a concat node joins the
 * two along `dim` (1, channels, by default): [input, earlier]. Outside a
 * sequential they take two inputs (torc_module_forward_n). */
TORC_API torc_module *torc_add_node_new(int from);
TORC_API torc_module *torc_concat_node_new(int from, int dim);

/* The `from` offset of an add/concat node (0 for other modules). */
TORC_API int torc_module_from(const torc_module *m);

/* ------------------------------------------------------------------------
 * Recurrent layers (nn.LSTM, nn.GRU, nn.RNN), with PyTorch's parameter
 * names, layouts, equations and default init, so state dicts move both
 * ways. Per layer k (and direction: a "_reverse" suffix for the backward
 * one): weight_ih_l{k} [G*hidden, in], weight_hh_l{k} [G*hidden, hidden],
 * bias_ih_l{k} [G*hidden], bias_hh_l{k} [G*hidden], where G is 4 (LSTM,
 * gates i, f, g, o), 3 (GRU, gates r, z, n, with n = tanh(W_in x + b_in +
 * r * (W_hn h + b_hn))) or 1 (RNN); `in` is input_size for layer 0 and
 * hidden_size * directions above. Every parameter starts U(-1/sqrt(hidden),
 * 1/sqrt(hidden)), as PyTorch's reset_parameters (the reset slot applies
 * that whatever the scheme).
 * ---------------------------------------------------------------------- */

/* The settings of a recurrent layer, with PyTorch's meaning and defaults
 * (set them from torc_rnn_options_default). */
typedef struct torc_rnn_options {
  int64_t input_size;  /* features per step, up to 2^31; 0 = infer at the
                        * first forward */
  int64_t hidden_size; /* features of the state, 1 to 2^31 (required) */
  int num_layers;      /* stacked layers, >= 1 (default 1) */
  int bias;            /* 1: bias_ih and bias_hh (default 1) */
  int batch_first;     /* 1: input and output [N, L, F]; 0: [L, N, F]
                        * (default 0, as PyTorch); states are always
                        * [num_layers * directions, N, hidden] */
  double dropout;      /* dropout on each layer's output but the last,
                        * training only, 0 <= p <= 1 (default 0) */
  int bidirectional;   /* 1: a backward direction too, outputs joined
                        * [forward, backward] on the last dim (default 0) */
  const char *nonlinearity; /* torc_rnn_new only: "tanh" (default, NULL)
                             * or "relu" */
} torc_rnn_options;

/* The defaults above with hidden_size (and input_size 0: inferred). */
TORC_API torc_rnn_options torc_rnn_options_default(int64_t hidden_size);

/* nn.LSTM, nn.GRU and nn.RNN (torc type names lstm, gru, rnn). o NULL is
 * an error (hidden_size is required). torc_module_forward takes the input
 * [L, N, input_size] ([N, L, input_size] with batch_first; or one
 * unbatched sequence [L, input_size]) and returns the output sequence
 * [L, N, directions * hidden] (likewise laid out), with zero initial
 * states; torc_rnn_forward gives the final states too. Errors
 * (TORC_ERR_INVALID) name the option, its value and the accepted range. */
TORC_API torc_module *torc_lstm_new(const torc_rnn_options *o);
TORC_API torc_module *torc_gru_new(const torc_rnn_options *o);
TORC_API torc_module *torc_rnn_new(const torc_rnn_options *o);

/* Runs a recurrent layer m (lstm, gru or rnn) on x with initial states h0
 * and, for an LSTM, c0 (each [num_layers * directions, N, hidden], or
 * [num_layers * directions, hidden] for an unbatched x; NULL = zeros).
 * lengths (NULL = every sequence is full length) is an i64 [N] tensor on
 * the cpu of each sequence's length, 1 .. L in any order: as PyTorch's
 * pack_padded_sequence (enforce_sorted=False), steps at or after a
 * sequence's length leave its state alone and give zero outputs, so the
 * final states are those at each sequence's last valid step (the backward
 * direction starts there). *out receives the output sequence, *h_n the
 * final hidden states and *c_n (LSTM only; NULL for the others) the final
 * cell states, all [num_layers * directions, N, hidden] but *out, owned
 * as ops return tensors (by the open scope, else the caller). Any of the
 * three pointers may be NULL. Returns TORC_OK, or an error status with a
 * message naming the shapes (TORC_ERR_SHAPE: x not 2-D/3-D, its features
 * not input_size, h0/c0 not the shape above; TORC_ERR_INVALID: m not a
 * recurrent layer, c0 for a GRU/RNN, bad lengths). Differentiable with
 * respect to x, h0, c0 and every parameter. */
TORC_API torc_status torc_rnn_forward(torc_module *m, const torc_tensor *x,
                                      const torc_tensor *h0,
                                      const torc_tensor *c0,
                                      const torc_tensor *lengths,
                                      torc_tensor **out, torc_tensor **h_n,
                                      torc_tensor **c_n);

/* The last time step of a batch of sequences: [N, L, F] -> [N, F] (torc
 * type last_step), so an INI classifier can be lstm (batch_first) ->
 * last_step -> linear. A 2-D [L, F] input gives [F]. */
TORC_API torc_module *torc_last_step_new(void);

/* ------------------------------------------------------------------------
 * Attention and transformer layers (nn.MultiheadAttention,
 * nn.TransformerEncoderLayer, nn.TransformerDecoderLayer) with PyTorch's
 * parameter names, layouts, init and equations, so state dicts move both
 * ways; and positional embeddings (docs/transformer.md).
 *
 * Masks follow PyTorch's MultiheadAttention (not scaled_dot_product_
 * attention's opposite bool rule): a bool mask is true where a key must
 * be IGNORED; a floating mask is added to the scores (-inf ignores).
 *   key_padding_mask  [N, S] ([S] for an unbatched input): per sequence,
 *                     the keys that are padding.
 *   attn_mask         [L, S], or [N * num_heads, L, S] (for an unbatched
 *                     input [num_heads, L, S]): per query, the keys it
 *                     must not see.
 * L is the query's length, S the key's, N the batch.
 * ---------------------------------------------------------------------- */

/* The settings of a multihead_attention, with PyTorch's meaning and
 * defaults (set them from torc_mha_options_default). */
typedef struct torc_mha_options {
  int64_t embed_dim; /* E: the query's features and the output's (>= 1) */
  int64_t num_heads; /* heads, dividing embed_dim (head dim E / heads) */
  double dropout;    /* dropout on the attention weights, training only,
                      * 0 <= p < 1 (default 0) */
  int bias;          /* 1: in_proj_bias and out_proj.bias (default 1) */
  int64_t kdim;      /* the key's features (0 = embed_dim) */
  int64_t vdim;      /* the value's features (0 = embed_dim) */
  int batch_first;   /* 1: inputs and output [N, L, E]; 0: [L, N, E]
                      * (default 0, as PyTorch) */
  int causal;        /* 1: query i sees keys j <= i only, at every forward
                      * (a torc option; PyTorch passes is_causal per call);
                      * default 0 */
} torc_mha_options;

/* The defaults above with embed_dim and num_heads. */
TORC_API torc_mha_options torc_mha_options_default(int64_t embed_dim,
                                                   int64_t num_heads);

/* nn.MultiheadAttention (torc type multihead_attention). Parameters in
 * PyTorch's order: in_proj_weight [3E, E] when kdim == vdim == E, else
 * q_proj_weight [E, E], k_proj_weight [E, kdim], v_proj_weight [E, vdim];
 * then in_proj_bias [3E] (bias only); and a child out_proj (a linear E ->
 * E: out_proj.weight, out_proj.bias). Init as PyTorch's
 * _reset_parameters: xavier_uniform_ on the projection weights, zero
 * in_proj_bias and out_proj.bias, out_proj.weight as a linear's default.
 * torc_module_forward(m, x) is self-attention (query = key = value = x);
 * torc_module_forward_n with 3 inputs takes query, key and value. Inputs
 * are [L, N, E] ([N, L, E] with batch_first), key [S, N, kdim], value
 * [S, N, vdim], or unbatched [L, E], [S, kdim], [S, vdim]; the output has
 * the query's layout. o NULL or a bad option is TORC_ERR_INVALID naming
 * it. */
TORC_API torc_module *torc_multihead_attention_new(const torc_mha_options *o);

/* Runs a multihead_attention m with masks (see above; NULL = none):
 * key_padding_mask bool or floating (added), attn_mask bool or floating;
 * is_causal 1 adds the causal mask (query i sees keys j <= i, top-left
 * aligned) to any given, as does the module's causal option. *out
 * receives the output; *weights (when weights is not NULL) the attention
 * weights averaged over the heads, [N, L, S] ([L, S] unbatched), as
 * need_weights = True with average_attn_weights = True (before dropout;
 * no gradient is promised through them: they are computed apart from the
 * fused attention). Both owned as ops return tensors (by the open scope,
 * else the caller). out may be NULL. Errors: TORC_ERR_SHAPE naming the
 * shapes and the expected ones (inputs, masks); TORC_ERR_DTYPE (a mask
 * neither bool nor floating, or not floating input); TORC_ERR_INVALID (m
 * not a multihead_attention). Differentiable in query, key, value and the
 * parameters. */
TORC_API torc_status torc_mha_forward(torc_module *m, const torc_tensor *query,
                                      const torc_tensor *key,
                                      const torc_tensor *value,
                                      const torc_tensor *key_padding_mask,
                                      const torc_tensor *attn_mask,
                                      int is_causal, torc_tensor **out,
                                      torc_tensor **weights);

/* The settings of a transformer_encoder_layer / transformer_decoder_layer,
 * with PyTorch's meaning and defaults (torc_transformer_layer_options_
 * default). */
typedef struct torc_transformer_layer_options {
  int64_t d_model;         /* the features of the sequence (>= 1) */
  int64_t nhead;           /* attention heads, dividing d_model */
  int64_t dim_feedforward; /* the feed-forward's hidden size (2048) */
  double dropout;          /* every dropout of the layer (0.1) */
  const char *activation;  /* the feed-forward's: "relu" (default, NULL) or
                            * "gelu" (exact) */
  double layer_norm_eps;   /* the layer norms' eps (1e-5) */
  int batch_first;         /* 1: [N, L, d_model]; 0: [L, N, d_model]
                            * (default 0, as PyTorch) */
  int norm_first;          /* 1: pre-norm (x + f(norm(x))); 0: post-norm
                            * (norm(x + f(x))) (default 0) */
  int bias;                /* 1: the linears and the attention learn
                            * biases (default 1; PyTorch 2.1's bias, which
                            * also drops the layer norms' biases: torc's
                            * keep theirs) */
  int causal;              /* 1: the self-attention is causal at every
                            * forward (a torc option: an encoder layer with
                            * it is a decoder-only GPT block) (default 0) */
} torc_transformer_layer_options;

/* The defaults above with d_model and nhead. */
TORC_API torc_transformer_layer_options
torc_transformer_layer_options_default(int64_t d_model, int64_t nhead);

/* nn.TransformerEncoderLayer (torc type transformer_encoder_layer), its
 * children named as PyTorch's: self_attn (a multihead_attention), linear1
 * (d_model -> dim_feedforward), dropout, linear2, norm1, norm2, dropout1,
 * dropout2. Forward, as PyTorch's: post-norm x = norm1(x + sa(x)),
 * x = norm2(x + ff(x)); pre-norm x = x + sa(norm1(x)), x = x + ff(norm2(x));
 * sa(x) = dropout1(self_attn(x, x, x)), ff(x) = dropout2(linear2(dropout(
 * activation(linear1(x))))). torc_module_forward takes src [L, N, d_model]
 * ([N, L, d_model] with batch_first, or unbatched [L, d_model]). */
TORC_API torc_module *
torc_transformer_encoder_layer_new(const torc_transformer_layer_options *o);

/* Runs a transformer_encoder_layer m on src with src_mask (attn_mask of
 * its self_attn), src_key_padding_mask and is_causal (as torc_mha_forward;
 * NULL / 0 = none). *out as torc_mha_forward's. Errors as
 * torc_mha_forward's; TORC_ERR_INVALID when m is not an encoder layer. */
TORC_API torc_status torc_transformer_encoder_layer_forward(
    torc_module *m, const torc_tensor *src, const torc_tensor *src_mask,
    const torc_tensor *src_key_padding_mask, int is_causal,
    torc_tensor **out);

/* nn.TransformerDecoderLayer (torc type transformer_decoder_layer):
 * children self_attn, multihead_attn (the attention over the memory),
 * linear1, dropout, linear2, norm1, norm2, norm3, dropout1, dropout2,
 * dropout3, and PyTorch's forward (post-norm or pre-norm, as the encoder
 * layer's with the memory block between). torc_module_forward_n takes
 * (tgt, memory); memory [S, N, d_model] ([N, S, d_model] with batch_first).
 * The causal option makes the self-attention causal. */
TORC_API torc_module *
torc_transformer_decoder_layer_new(const torc_transformer_layer_options *o);

/* Runs a transformer_decoder_layer m on tgt and memory with tgt_mask and
 * tgt_key_padding_mask (its self-attention's masks), memory_mask and
 * memory_key_padding_mask (its attention over the memory's), tgt_is_causal
 * and memory_is_causal (NULL / 0 = none). *out as torc_mha_forward's.
 * Errors as torc_mha_forward's; TORC_ERR_INVALID when m is not a decoder
 * layer. */
TORC_API torc_status torc_transformer_decoder_layer_forward(
    torc_module *m, const torc_tensor *tgt, const torc_tensor *memory,
    const torc_tensor *tgt_mask, const torc_tensor *memory_mask,
    const torc_tensor *tgt_key_padding_mask,
    const torc_tensor *memory_key_padding_mask, int tgt_is_causal,
    int memory_is_causal, torc_tensor **out);

/* A positional embedding (torc type positional_embedding; PyTorch users
 * write it by hand): forward adds position p's vector to x[..., p, :] for
 * x [N, L, d_model] (or unbatched [L, d_model]), then dropout (training
 * only; 0 = none). kind "learned": a parameter "weight" [max_len, d_model]
 * drawn N(0, 1) as nn.Embedding's (GPT-2's wpe, which a checkpoint
 * overwrites anyway). kind "sinusoidal": the table of "Attention is all
 * you need", pe[p, 2i] = sin(p / 10000^(2i/d)), pe[p, 2i+1] = cos(...),
 * a non-persistent buffer "pe" (not in the state dict). L beyond max_len
 * is TORC_ERR_SHAPE; a bad option TORC_ERR_INVALID naming it. Under an
 * incremental decode, positions start at the number of tokens already
 * seen. */
TORC_API torc_module *torc_positional_embedding_new(const char *kind,
                                                    int64_t max_len,
                                                    int64_t d_model,
                                                    double dropout);

/* ------------------------------------------------------------------------
 * Module types by name (what the INI trainer and plugins use)
 * ---------------------------------------------------------------------- */

/* A key a module type accepts. */
typedef struct torc_module_key {
  const char *name;
  const char *help;          /* one line, with the accepted values */
  const char *default_value; /* or NULL when required */
} torc_module_key;

/* A module type that can be built from key/value pairs. */
typedef struct torc_module_type {
  size_t struct_size;
  const char *name;        /* "linear": letters, digits, '_' */
  const char *description; /* one line */
  const torc_module_key *keys; /* terminated by {NULL} */
  /* Builds a module. Every key is one of `keys` (the core checked), and
   * every key with a default that was not given is passed with it.
   * Returns NULL after setting an error naming the key and value. */
  torc_module *(*create)(const char *const *keys, const char *const *values,
                         int n, void *user);
  void *user;
} torc_module_type;

/* Registers a module type (the struct and its strings are borrowed: they
 * must outlive the registration). A name already registered is
 * TORC_ERR_INVALID. Built-in types: every layer above and every
 * activation (relu, leaky_relu, elu, gelu, silu, sigmoid, tanh, softplus,
 * softmax, log_softmax, ...). */
TORC_API torc_status torc_module_type_register(const torc_module_type *type);

/* Looks up a module type; NULL (no error recorded) when unknown. */
TORC_API const torc_module_type *torc_module_type_find(const char *name);

/* Number of registered module types, and type i (in name order). */
TORC_API int torc_module_type_count(void);
TORC_API const torc_module_type *torc_module_type_at(int i);

/* Builds a module of type `type` from n key/value pairs. Errors
 * (TORC_ERR_INVALID): unknown type (the message lists the types and the
 * nearest name), unknown key (the type's keys and the nearest one), a
 * required key missing, a key given twice, and the type's own value
 * errors. */
TORC_API torc_module *torc_module_create(const char *type,
                                         const char *const *keys,
                                         const char *const *values, int n);

/* As torc_module_create from a string of "key=value" pairs separated by
 * commas or spaces: torc_module_build("conv2d", "out_channels=32,
 * kernel=3, padding=1"). spec may be NULL or "". */
TORC_API torc_module *torc_module_build(const char *type, const char *spec);

/* ------------------------------------------------------------------------
 * Models from INI files
 * ---------------------------------------------------------------------- */

struct torc_config;

/* Builds the model of an INI file (docs/config.md): a sequential with
 * one module per [layer] section, in file order, each made by
 * torc_module_create from the section's keys (all but `type`). [model]
 * `input` is the shape of one sample; the model is run once, in eval mode
 * without autograd, on zeros of shape [1, input...] (of
 * torc_model_input_dtype), so every lazy size
 * (in_features, in_channels, num_features) is inferred before the model is
 * returned; [model] `init` then re-initialises (torc_module_init). The
 * model is on the cpu in f32, in training mode. sample_shape (room for
 * TORC_MAX_DIMS sizes) and sample_ndim receive the input shape (either may
 * be NULL). Errors: TORC_ERR_CONFIG "FILE:LINE: key 'k' in [layer]: layer
 * 3 (conv2d): ..." naming the layer's index and type and the key at fault
 * (the section's line when no key is), including a layer that does not fit
 * the shape reaching it. With [model] onnx = FILE.onnx the model is
 * torc_onnx_module_new's import of that file instead (torc/onnx.h), and
 * [layer] sections or an init scheme are TORC_ERR_CONFIG. */
TORC_API torc_module *torc_module_from_config(const struct torc_config *cfg,
                                              int64_t *sample_shape,
                                              int *sample_ndim);

/* The dtype of the model's samples: [model] input_dtype (f32 or i64), or
 * with `auto` (the default) i64 when the first [layer] is an embedding
 * (token ids) and f32 otherwise. torc_module_from_config runs the model on
 * zeros of this dtype. */
TORC_API torc_dtype torc_model_input_dtype(const struct torc_config *cfg);

TORC_END_DECLS

#endif /* TORC_MODULE_H */
