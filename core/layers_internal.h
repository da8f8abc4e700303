/* core/layers_internal.h — what the built-in layer files share (layers.c:
 * helpers, linear, conv, embedding; layers_norm.c; layers_simple.c:
 * dropout, pools, flatten, identity, activations; layers_types.c: the
 * module type table). Not installed. */
#ifndef TORC_LAYERS_INTERNAL_H
#define TORC_LAYERS_INTERNAL_H

#include <stddef.h>

#include "internal.h"
#include "module_internal.h"

/* Every built-in layer's state starts with this: the module it belongs
 * to, set by torc__layer_new. */
typedef struct torc__layer_head {
  torc_module *self;
} torc__layer_head;

/* A new module of a built-in type with `state` (malloc'ed, starting with a
 * torc__layer_head that this fills in); frees state when it fails. */
torc_module *torc__layer_new(const char *type, const torc_module_vtable *vt,
                             void *state);

/* The vtables' destroy: frees the state. */
void torc__layer_destroy(torc_module *m);

/* Registers a parameter of `shape` (zeros, on m's device and dtype) under
 * `name`; returns it (borrowed from m) or NULL with the error. */
torc_tensor *torc__layer_param(torc_module *m, const char *name,
                               const int64_t *shape, int nd);

/* Registers a persistent buffer filled with `value`, in `dtype` on m's
 * device; returns it (borrowed) or NULL. */
torc_tensor *torc__layer_buffer(torc_module *m, const char *name,
                                const int64_t *shape, int nd,
                                torc_dtype dtype, double value);

/* The error for a forward given n_in != 1 inputs; NULL returned. */
torc_tensor *torc__layer_one_input(const torc_module *m, int n_in);

/* Runs f on x, adding a batch dim first and removing it after when x is
 * an unbatched [C, H, W] image (as PyTorch's 2-D layers accept). x must
 * have 3 or 4 dims (checked by the caller). */
typedef torc_tensor *(*torc__image_fn)(torc_module *m, const torc_tensor *x);
torc_tensor *torc__layer_image(torc_module *m, const torc_tensor *x,
                               torc__image_fn f);

/* Python's repr of a float ("1e-05", "0.1", "20.0"), as extra_repr shows
 * it. Returns buf. */
char *torc__pyfloat(char *buf, size_t size, double v);

/* A pair as PyTorch prints it: "(3, 5)", or "3" when both are equal and
 * !tuple. Returns buf. */
char *torc__pair_str(char *buf, size_t size, const int64_t p[2], int tuple);

/* "True" / "False". */
static inline const char *torc__pybool(int b) { return b ? "True" : "False"; }

/* The activation modules (layers_simple.c): `type` is one of relu,
 * leaky_relu (a = negative slope), elu (a = alpha), gelu (flags 1 = tanh
 * form), silu, sigmoid, tanh, softplus (a = beta, b = threshold), softmax
 * and log_softmax (dim). NULL with an error for a bad parameter. */
torc_module *torc__activation_new(const char *type, double a, double b,
                                  int dim, int flags);

/* What a no-grad forward of a sequential may run as one fused call
 * (module_containers.c). torc__layer_conv2d: 1 when m is an nn.Conv2d
 * (not transposed) whose weight exists, its params (PyTorch's defaults
 * filled in) into *p. torc__layer_relu: 1 when m is an nn.ReLU.
 * torc__layer_maxpool2d: 1 when m is an nn.MaxPool2d, its params into
 * *p. */
int torc__layer_conv2d(const torc_module *m, torc_conv2d_params *p);
/* 1 when m is an nn.Linear whose weight exists (its sizes are known). */
int torc__layer_linear(const torc_module *m);
int torc__layer_relu(const torc_module *m);
int torc__layer_maxpool2d(const torc_module *m, torc_pool2d_params *p);

#endif /* TORC_LAYERS_INTERNAL_H */
