/* core/module_containers.c — the containers (nn.Sequential, nn.ModuleList,
 * nn.ModuleDict) and the add/concat nodes of skip connections
 * (torc/module.h). */
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

#include "internal.h"
#include "layers_internal.h"
#include "module_internal.h"
#include "nn_internal.h"
#include "torc/indexing.h"
#include "torc/ops.h"

/* The module as messages name it (module.c). */
static const char *who(const torc_module *m, char *buf, size_t size) {
  return torc__module_who(m, buf, size);
}

/* ---- containers ---- */

/* A sequential's children run as one fused kernel call under no-grad:
 * nn.Conv2d, then nn.ReLU and/or nn.MaxPool2d, as one "conv2d_act" (what
 * a plan's TORC_PLAN_FUSE makes of them). The activations between them
 * are never made: an evaluation batch of 1000 28x28 images with 32
 * channels holds the pooled 25 MB, not the convolution's and the relu's
 * 100 MB each, and oneDNN's chain keeps each chunk of images in cache. */
typedef struct fused_group {
  int len; /* children it runs; 0: none */
  const torc_tensor *w, *b;
  torc_conv_act_kparams k;
  int64_t ys[4];
} fused_group;

/* The group children i.. of m make for an x of sizes xs (dtype dt on dev):
 * each intermediate must be read by the next child alone (last[k], the
 * last reader of child k's output, is k + 1). g->len 0 when none. */
static void fuse_group(torc_module *m, int i, const int *last,
                       const int64_t *xs, torc_dtype dt, torc_device dev,
                       fused_group *g) {
  g->len = 0;
  torc_conv2d_params cp;
  torc_pool2d_params pp;
  int n = m->n_kids;
  if (i >= n || !torc__layer_conv2d(m->kids[i].m, &cp))
    return;
  int j = i + 1, act = TORC_ACT_NONE, pool = 0;
  if (j < n && last[j - 1] == j && torc__layer_relu(m->kids[j].m))
    act = TORC_ACT_RELU, j++;
  if (j < n && last[j - 1] == j && torc__layer_maxpool2d(m->kids[j].m, &pp))
    pool = 1, j++;
  if (j == i + 1)
    return;
  torc_module *cv = m->kids[i].m;
  g->w = torc_module_parameter(cv, "weight");
  g->b = torc_module_parameter(cv, "bias");
  if (torc__conv2d_act_prepare(xs, dt, dev, g->w, g->b, &cp, act,
                               pool ? &pp : NULL, &g->k, g->ys))
    g->len = j - i;
}

/* 1 when g's convolution reads every row and column of its x of sizes xs
 * (no window leaves the last ones out): the condition for x in blocks of
 * 16 channels (torc_conv_act_kparams). */
static int reads_whole(const fused_group *g, const int64_t *xs) {
  for (int d = 0; d < 2; d++) {
    const torc_conv_kparams *c = &g->k.conv;
    int64_t eff = c->dilation[d] * (torc_shape(g->w)[2 + d] - 1) + 1;
    int64_t span = xs[2 + d] + 2 * c->padding[d] - eff;
    if (span % c->stride[d] > c->padding[d])
      return 0;
  }
  return 1;
}

typedef struct fused_call {
  const torc_tensor *x;
  const fused_group *g;
} fused_call;

static torc_tensor *run_fused(void *ctx) {
  const fused_call *f = ctx;
  return torc__conv2d_act_run(f->x, f->g->w, f->g->b, &f->g->k, f->g->ys);
}

typedef struct linear_call {
  const torc_tensor *x, *w, *b;
} linear_call;

static torc_tensor *run_linear_relu(void *ctx) {
  const linear_call *f = ctx;
  return torc__linear_relu_run(f->x, f->w, f->b);
}

/* 1 when children i, i+1 of m are an nn.Linear read only by the nn.ReLU
 * after it, with an x the fused call takes (2-D, the weight's in
 * features, dtype and device): they then run as one "linear_act". */
static int linear_relu_group(torc_module *m, int i, const int *last,
                             const torc_tensor *x, linear_call *call) {
  if (i + 1 >= m->n_kids || last[i] != i + 1 ||
      !torc__layer_linear(m->kids[i].m) ||
      !torc__layer_relu(m->kids[i + 1].m) ||
      m->kids[i + 1].m->kind != KIND_PLAIN)
    return 0;
  const torc_tensor *w = torc_module_parameter(m->kids[i].m, "weight");
  const torc_tensor *b = torc_module_parameter(m->kids[i].m, "bias");
  if (torc_ndim(x) != 2 || torc_ndim(w) != 2 ||
      torc_shape(x)[1] != torc_shape(w)[1] ||
      torc_dtype_of(x) != torc_dtype_of(w) ||
      (torc_dtype_of(x) != TORC_F32 && torc_dtype_of(x) != TORC_F64) ||
      !torc_device_eq(torc_device_of(x), torc_device_of(w)) ||
      (b && (torc_dtype_of(b) != torc_dtype_of(x) ||
             !torc_device_eq(torc_device_of(b), torc_device_of(x)))))
    return 0;
  /* Only where a fused kernel ranks at least as high as the product's
   * (a backend without one, or with only ref's, runs the layers). */
  int dt = torc_dtype_of(x), dev = torc_device_of(x).type;
  int have = torc__kernel_rank(dev, TORC__OP_linear_act, dt);
  if (have == INT_MIN || have < torc__kernel_rank(dev, TORC__OP_matmul, dt))
    return 0;
  *call = (linear_call){x, w, b};
  return 1;
}

/* 1 when children i, i+1 of m are an nn.ReLU read only by the
 * nn.MaxPool2d after it. They then run the other way round, the pool
 * first: max commutes with relu (a non-decreasing function), so the output
 * is the same bit for bit, and so is the gradient (the pool's window
 * winner is the same element, the relu's mask is read there), but the
 * relu and its backward touch a quarter of the elements of a 2x2 pool and
 * the relu's full-size output is never made (nor, tracing a batch, held
 * beside the convolution's). Not while a summary shows each layer's
 * output. */
static int relu_pool_swap(torc_module *m, int i, const int *last) {
  torc_pool2d_params pp;
  return i + 1 < m->n_kids && last[i] == i + 1 &&
         m->kids[i].m->kind == KIND_PLAIN &&
         m->kids[i + 1].m->kind == KIND_PLAIN &&
         torc__layer_relu(m->kids[i].m) &&
         torc__layer_maxpool2d(m->kids[i + 1].m, &pp) &&
         torc__summary_on == NULL;
}

/* Child c of a sequential on x: its output, a reference of the caller's
 * (the child's scope closed), or NULL. */
static torc_tensor *run_child(torc_module *c, const torc_tensor *x) {
  int scope = torc_scope_begin();
  if (scope < 0)
    return NULL;
  torc_tensor *y = torc_module_forward(c, x);
  if (y)
    torc_retain(y);
  torc_scope_end(scope);
  return y;
}

/* Frees the outputs whose last reader is one of children j0..j1 (the
 * list first[j], next_of[] of it, ...: each checked once). */
static void release_read_by(torc_tensor **outs, const int *first,
                            const int *next_of, int j0, int j1) {
  for (int j = j0; j <= j1; j++)
    for (int k = first[j]; k >= 0; k = next_of[k])
      if (torc__module_steps++, outs[k]) {
        torc_release(outs[k]);
        outs[k] = NULL;
      }
}

static torc_tensor *sequential_forward(torc_module *m,
                                       const torc_tensor *const *in,
                                       int n_in) {
  char w[160];
  if (n_in != 1) {
    torc_set_error(TORC_ERR_INVALID, "%s takes one input, given %d",
                   who(m, w, sizeof w), n_in);
    return NULL;
  }
  if (m->n_kids == 0) /* nn.Sequential() passes its input through */
    return torc__ret(torc_retain((torc_tensor *)in[0]));
  /* Each child's output is ours (a reference of our own) until its last
   * reader has run: the next child, or a later add/concat node that
   * reaches back to it. Freed then, not at the end of the forward, so an
   * eval pass holds only what later layers still read (as PyTorch, which
   * frees a tensor when its last Python reference goes). */
  int n = m->n_kids;
  torc_tensor **outs = torc__calloc((size_t)n, sizeof *outs);
  int *last = torc__calloc((size_t)n, sizeof *last);
  /* The outputs whose last reader is child i, in order: first[i], then
   * next_of[] of it, ..., -1; each output is checked once, at its last
   * reader, so a forward of n children costs O(n) here. */
  int *first = torc__malloc((size_t)n * sizeof *first);
  int *next_of = torc__malloc((size_t)n * sizeof *next_of);
  if (outs == NULL || last == NULL || first == NULL || next_of == NULL) {
    torc__free(outs), torc__free(last), torc__free(first), torc__free(next_of);
    torc_set_error(TORC_ERR_OOM, "out of memory running %s",
                   who(m, w, sizeof w));
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    last[i] = i + 1;
    first[i] = -1;
    torc_module *c = m->kids[i].m;
    if ((c->kind == KIND_ADD || c->kind == KIND_CONCAT) && i + c->from >= 0 &&
        last[i + c->from] < i)
      last[i + c->from] = i;
  }
  for (int k = n - 1; k >= 0; k--)
    if (last[k] < n) {
      next_of[k] = first[last[k]];
      first[last[k]] = k;
    }
  const torc_tensor *x = in[0];
  torc_tensor *y = NULL;
  /* Fused groups: under no-grad, not while a trace or a summary records
   * the layers one by one, nor under autocast (whose casts the layers
   * make). A group's result that only the next group reads is handed over
   * in blocks of 16 channels. */
  int fuse = torc_get_grad_mode() != TORC_GRAD_ENABLED &&
             torc__trace_on == NULL && torc__summary_on == NULL &&
             torc__autocast_tl == TORC_F32;
  fused_group next = {0};
  for (int i = 0; i < n; i++) {
    torc_module *c = m->kids[i].m;
    fused_group g = {0};
    if (next.len)
      g = next, next.len = 0;
    else if (fuse && c->kind == KIND_PLAIN && torc_ndim(x) == 4)
      fuse_group(m, i, last, torc_shape(x), torc_dtype_of(x),
                 torc_device_of(x), &g);
    if (g.len) {
      int e = i + g.len - 1; /* the group's last child */
      if (e + 1 < n && last[e] == e + 1 && g.ys[1] % 16 == 0) {
        fuse_group(m, e + 1, last, g.ys, torc_dtype_of(x), torc_device_of(x),
                   &next);
        if (next.len && reads_whole(&next, g.ys))
          g.k.y_blocked = next.k.x_blocked = 1;
        else
          next.len = 0;
      }
      int scope = torc_scope_begin();
      fused_call call = {x, &g};
      y = scope < 0 ? NULL : torc__module_run_as(c, run_fused, &call);
      if (scope >= 0)
        torc_scope_end(scope);
      if (y == NULL)
        break;
      outs[e] = y;
      x = y;
      release_read_by(outs, first, next_of, i, e);
      i = e;
      continue;
    }
    linear_call lc;
    if (fuse && c->kind == KIND_PLAIN &&
        linear_relu_group(m, i, last, x, &lc)) {
      int scope = torc_scope_begin();
      y = scope < 0 ? NULL : torc__module_run_as(c, run_linear_relu, &lc);
      if (scope >= 0)
        torc_scope_end(scope);
      if (y == NULL)
        break;
      outs[i + 1] = y;
      x = y;
      release_read_by(outs, first, next_of, i, i + 1);
      i++;
      continue;
    }
    if (relu_pool_swap(m, i, last)) {
      torc_tensor *p = run_child(m->kids[i + 1].m, x);
      /* The relu's input (the pool's) dies at the pool now: freed before
       * the relu makes its output, in a trace too. */
      if (p)
        release_read_by(outs, first, next_of, i, i + 1);
      torc__trace_drop();
      y = p ? run_child(c, p) : NULL;
      torc_release(p);
      if (y == NULL)
        break;
      outs[i + 1] = y;
      x = y;
      i++;
      continue;
    }
    int scope = torc_scope_begin();
    if (scope < 0) {
      y = NULL;
      break;
    }
    if (c->kind == KIND_ADD || c->kind == KIND_CONCAT) {
      int j = i + c->from;
      const torc_tensor *pair[2] = {x, j < 0 ? in[0] : outs[j]};
      y = torc_module_forward_n(c, pair, 2);
    } else {
      y = torc_module_forward(c, x);
    }
    if (y)
      torc_retain(y); /* ours; the scope's reference goes now */
    torc_scope_end(scope);
    if (y == NULL)
      break;
    outs[i] = y;
    x = y;
    release_read_by(outs, first, next_of, i, i);
  }
  /* y (outs[n - 1] when all ran) goes to the caller; the rest is freed,
   * by index: an identity child returns its input, a second reference. */
  for (int k = 0; k < n; k++)
    if (outs[k] && !(y && k == n - 1))
      torc_release(outs[k]);
  torc__free(outs), torc__free(last), torc__free(first), torc__free(next_of);
  return y ? torc__ret(y) : NULL;
}

static int sequential_describe(const torc_module *m, char *buf, size_t size) {
  (void)m;
  if (size)
    buf[0] = '\0';
  return 0;
}

static const torc_module_vtable sequential_vt = {
    sizeof(torc_module_vtable), sequential_forward, NULL, sequential_describe,
    NULL};
static const torc_module_vtable list_vt = {sizeof(torc_module_vtable), NULL,
                                           NULL, NULL, NULL};

static torc_module *container_new(const char *type,
                                  const torc_module_vtable *vt, int kind) {
  torc_module *m = torc_module_new(type, vt, NULL);
  if (m)
    m->kind = kind;
  return m;
}

torc_module *torc_sequential_new(void) {
  return container_new("sequential", &sequential_vt, KIND_SEQUENTIAL);
}
torc_module *torc_module_list_new(void) {
  return container_new("module_list", &list_vt, KIND_LIST);
}
torc_module *torc_module_dict_new(void) {
  return container_new("module_dict", &list_vt, KIND_DICT);
}

torc_status torc_sequential_append(torc_module *seq, torc_module *child) {
  if (seq == NULL || child == NULL) {
    torc_module_free(child && child->parent == NULL ? child : NULL);
    return torc__null_input("torc_sequential_append");
  }
  char w[160];
  if (seq->kind != KIND_SEQUENTIAL && seq->kind != KIND_LIST) {
    torc_status st =
        torc_set_error(TORC_ERR_INVALID,
                       "torc_sequential_append: %s is not a sequential or a "
                       "module list; use torc_module_add_child with a name",
                       who(seq, w, sizeof w));
    if (child->parent == NULL)
      torc_module_free(child);
    return st;
  }
  int idx = seq->n_kids;
  if ((child->kind == KIND_ADD || child->kind == KIND_CONCAT) &&
      seq->kind == KIND_SEQUENTIAL) {
    if (child->from >= 0 || idx + child->from < -1) {
      torc_status st = torc_set_error(
          TORC_ERR_INVALID,
          "torc_sequential_append: %s node at index %d has from = %d; it "
          "must be negative and reach at most back to the sequential's input "
          "(from >= %d here)",
          child->type, idx, child->from, -idx - 1);
      if (child->parent == NULL)
        torc_module_free(child);
      return st;
    }
  }
  char name[24];
  snprintf(name, sizeof name, "%d", idx);
  return torc_module_add_child(seq, name, child);
}

/* ---- skip-connection nodes ---- */

static torc_tensor *add_forward(torc_module *m, const torc_tensor *const *in,
                                int n_in) {
  char w[160];
  if (n_in != 2) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s takes two inputs (inside a sequential: the previous "
                   "layer's output and that of layer %+d), given %d",
                   who(m, w, sizeof w), m->from, n_in);
    return NULL;
  }
  const torc_tensor *a = in[0], *b = in[1];
  if (m->kind == KIND_ADD) {
    if (a->ndim != b->ndim ||
        memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0])) {
      char sa[96], sb[96], what[64];
      torc__shape_str(a->shape, a->ndim, sa, sizeof sa);
      torc__shape_str(b->shape, b->ndim, sb, sizeof sb);
      /* Inside a sequential the node's name is its index: from it, say
       * whether the other path is an earlier layer or the input. */
      int at = m->parent && m->parent->kind == KIND_SEQUENTIAL
                   ? atoi(m->name) + m->from
                   : 0;
      if (at < 0)
        snprintf(what, sizeof what, "the sequential's input");
      else
        snprintf(what, sizeof what, "the output of the layer %d back",
                 -m->from);
      torc_set_error(TORC_ERR_SHAPE,
                     "add: the input %s and %s %s differ in shape; both "
                     "paths must give the same shape (match channels and "
                     "strides, or use a 1x1 conv on the skip path)",
                     sa, what, sb);
      return NULL;
    }
    return torc_add(a, b);
  }
  const torc_tensor *pair[2] = {a, b};
  return torc_cat(pair, 2, m->concat_dim);
}

static int add_describe(const torc_module *m, char *buf, size_t size) {
  if (m->kind == KIND_CONCAT)
    return snprintf(buf, size, "from=%d, dim=%d", m->from, m->concat_dim);
  return snprintf(buf, size, "from=%d", m->from);
}

static const torc_module_vtable add_vt = {
    sizeof(torc_module_vtable), add_forward, NULL, add_describe, NULL};

torc_module *torc_add_node_new(int from) {
  torc_module *m = container_new("add", &add_vt, KIND_ADD);
  if (m)
    m->from = from;
  return m;
}

torc_module *torc_concat_node_new(int from, int dim) {
  torc_module *m = container_new("concat", &add_vt, KIND_CONCAT);
  if (m) {
    m->from = from;
    m->concat_dim = dim;
  }
  return m;
}
