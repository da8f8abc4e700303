/* core/autograd.c — the tape and the engine. Ops whose inputs require grad
 * record a node (formula, saved tensors with their versions, edges to the
 * inputs' producers); backward walks the nodes in dependency order,
 * summing gradients per node output, and accumulates into leaves' .grad.
 * The formulas themselves live in derivatives.c, torc_gradcheck in
 * gradcheck.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static _Thread_local torc_grad_mode tl_mode = TORC_GRAD_ENABLED;
static _Thread_local int tl_anomaly;
static _Thread_local torc__grad_scope tl_scope; /* innermost open scope */
static _Atomic uint64_t node_seq;

/* A hook on a tensor: a gradient hook (fn), or a post-accumulate hook
 * (post), run after the leaf's .grad took the gradient. */
typedef struct hook_entry {
  int id;
  torc_grad_hook fn;
  torc_post_accumulate_hook post;
  void *user;
} hook_entry;

/* End-of-backward callbacks queued by hooks of the running backward
 * (torc_autograd_queue_callback), run once the walk is done. */
typedef struct queued_cb {
  torc_backward_callback fn;
  void *user;
} queued_cb;
static _Thread_local queued_cb tl_cbs[16];
static _Thread_local int tl_n_cbs;
static _Thread_local int tl_in_backward;

struct torc__hooks {
  int n, cap, next_id;
  hook_entry *h;
};

/* ---- modes ---- */

torc_grad_mode torc_set_grad_mode(torc_grad_mode mode) {
  torc_grad_mode old = tl_mode;
  if (mode >= TORC_GRAD_ENABLED && mode <= TORC_INFERENCE)
    tl_mode = mode;
  return old;
}

torc_grad_mode torc_get_grad_mode(void) { return tl_mode; }
void torc_set_anomaly_mode(int on) { tl_anomaly = on != 0; }
int torc_get_anomaly_mode(void) { return tl_anomaly; }
int torc__inference_mode(void) { return tl_mode == TORC_INFERENCE; }

int torc__should_record(const torc_tensor *const *in, int n) {
  if (tl_mode != TORC_GRAD_ENABLED)
    return 0;
  for (int i = 0; i < n; i++)
    if (in[i] && in[i]->requires_grad)
      return 1;
  return 0;
}

/* ---- the current scope (internal.h) ----
 *
 * Kept here, not in the module code, so recording a node never calls up
 * into modules: the module forward wrapper enters a scope per module with
 * a label function of its own, and nodes take the key and label from it. */

torc__grad_scope torc__grad_scope_enter(const void *key,
                                        torc__scope_label_fn label) {
  torc__grad_scope outer = tl_scope;
  tl_scope.key = key;
  tl_scope.label = label;
  return outer;
}

void torc__grad_scope_restore(torc__grad_scope outer) { tl_scope = outer; }

const void *torc__grad_scope_key(void) { return tl_scope.key; }

const char *torc__grad_scope_label(char *buf, size_t size) {
  if (tl_scope.key == NULL || tl_scope.label == NULL)
    return NULL;
  return tl_scope.label(tl_scope.key, buf, size);
}

/* ---- nodes ---- */

/* Nodes with at most this many inputs come from a per-thread pool, at the
 * size of this many. */
enum { POOLED_INPUTS = 2 };

static torc__node *node_alloc(int n_in) {
  size_t per = sizeof(torc__edge) + sizeof(torc__inmeta);
  torc__node *n =
      n_in <= POOLED_INPUTS
          ? torc__obj_alloc(TORC__POOL_NODE,
                            sizeof(torc__node) + POOLED_INPUTS * per)
          : torc__calloc(1, sizeof(torc__node) + (size_t)n_in * per);
  if (n == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory recording an autograd node");
    return NULL;
  }
  n->refcount = 1;
  n->n_in = n_in;
  n->next = (torc__edge *)(n + 1);
  n->in = (torc__inmeta *)(n->next + n_in);
  n->seq = atomic_fetch_add(&node_seq, 1);
  return n;
}

static void meta_of(const torc_tensor *t, torc__inmeta *m) {
  m->ndim = t->ndim;
  m->dtype = t->dtype;
  m->device = t->storage->device;
  memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
}

/* The AccumulateGrad node of a leaf that requires grad (created once, kept
 * alive by the graphs that use it; the leaf points back weakly). */
static torc__node *grad_accumulator(torc_tensor *leaf) {
  if (leaf->grad_acc) {
    atomic_fetch_add(&leaf->grad_acc->refcount, 1);
    return leaf->grad_acc;
  }
  torc__node *n = node_alloc(0);
  if (n == NULL)
    return NULL;
  n->name = "AccumulateGrad";
  n->op = "leaf";
  n->n_out = 1;
  meta_of(leaf, &n->out[0]);
  n->leaf = torc_retain(leaf);
  leaf->grad_acc = n;
  return n;
}

torc__node *torc__node_new(const char *name, const char *op,
                           torc__backward_fn fn, const torc_tensor *const *in,
                           int n_in) {
  torc__node *n = node_alloc(n_in);
  if (n == NULL)
    return NULL;
  n->name = name;
  n->op = op;
  n->fn = fn;
  if (atomic_load_explicit(&torc__prof_on, memory_order_relaxed))
    n->prof_module = tl_scope.key;
  if (tl_anomaly) {
    char where[256];
    const char *mod = torc__grad_scope_label(where, sizeof where);
    if (mod)
      n->module = torc__strdup(mod); /* NULL on OOM: the message just omits it */
  }
  for (int i = 0; i < n_in; i++) {
    torc_tensor *t = (torc_tensor *)in[i];
    if (t == NULL)
      continue;
    meta_of(t, &n->in[i]);
    if (!t->requires_grad)
      continue;
    if (t->grad_fn) {
      atomic_fetch_add(&t->grad_fn->refcount, 1);
      n->next[i].node = t->grad_fn;
      n->next[i].input_nr = t->output_nr;
    } else if ((n->next[i].node = grad_accumulator(t)) == NULL) {
      torc__node_release(n);
      return NULL;
    }
  }
  return n;
}

torc_status torc__node_save(torc__node *n, const torc_tensor *t) {
  if (n->n_saved == TORC__MAX_SAVED)
    return torc_set_error(TORC_ERR_INTERNAL, "%s saves too many tensors",
                          n->name);
  torc_tensor *v = NULL;
  if (t) {
    /* A detached view: it keeps the data alive, shares the version
     * counter, and holds no grad_fn (so no reference cycle). */
    v = torc__view_of(t, t->shape, t->strides, t->ndim, t->offset);
    if (v == NULL)
      return torc_last_status();
    n->saved_version[n->n_saved] = t->storage->version;
  }
  n->saved[n->n_saved++] = v;
  return TORC_OK;
}

void torc__node_attach(torc__node *n, torc_tensor *const *out, int n_out) {
  n->n_out = n_out;
  for (int i = 0; i < n_out; i++) {
    torc_tensor *t = out[i];
    meta_of(t, &n->out[i]);
    if (i > 0)
      atomic_fetch_add(&n->refcount, 1);
    if (t->grad_fn) /* an in-place op re-points its target */
      torc__node_release(t->grad_fn);
    t->grad_fn = n;
    t->output_nr = (int16_t)i;
    t->requires_grad = 1;
    n->out_weak[i] = t;
  }
  if (n_out == 0)
    torc__node_release(n);
}

static void free_saved(torc__node *n) {
  for (int i = 0; i < n->n_saved; i++) {
    torc_release(n->saved[i]);
    n->saved[i] = NULL;
  }
}

void torc__node_release(torc__node *n) {
  /* Iterative, so that freeing a long chain does not recurse deeply. */
  torc__node *stack[64];
  int sp = 0;
  torc__node **heap = NULL;
  int hcap = 0;
  if (n)
    stack[sp++] = n;
  while (sp > 0) {
    torc__node *cur = sp > 64 ? heap[sp - 65] : stack[sp - 1];
    sp--;
    if (atomic_fetch_sub(&cur->refcount, 1) != 1)
      continue;
    free_saved(cur);
    if (cur->leaf) {
      cur->leaf->grad_acc = NULL;
      torc_release(cur->leaf);
    }
    for (int i = 0; i < cur->n_in; i++) {
      torc__node *nx = cur->next[i].node;
      if (nx == NULL)
        continue;
      if (sp < 64) {
        stack[sp++] = nx;
      } else {
        if (sp - 64 >= hcap) {
          hcap = hcap ? hcap * 2 : 256;
          torc__node **p = torc__realloc(heap, (size_t)hcap * sizeof *p);
          if (p == NULL) { /* cannot defer: recurse instead */
            torc__node_release(nx);
            continue;
          }
          heap = p;
        }
        heap[sp - 64] = nx;
        sp++;
      }
    }
    torc__free(cur->module);
    if (cur->n_in <= POOLED_INPUTS)
      torc__obj_free(TORC__POOL_NODE, cur);
    else
      torc__free(cur);
  }
  torc__free(heap);
}

void torc__autograd_release(torc_tensor *t) {
  if (t->grad_fn) {
    if (t->grad_fn->out_weak[t->output_nr] == t)
      t->grad_fn->out_weak[t->output_nr] = NULL;
    torc__node_release(t->grad_fn);
    t->grad_fn = NULL;
  }
  torc_release(t->grad);
  t->grad = NULL;
  if (t->hooks) {
    torc__free(t->hooks->h);
    torc__free(t->hooks);
    t->hooks = NULL;
  }
}

torc_status torc__record_op(int op, const torc_tensor *const *in, int n_in,
                            torc_tensor *out, const void *params,
                            size_t psize) {
  const torc__derivative *d = &torc__derivatives[op];
  if (d->fn == NULL || !torc__should_record(in, n_in))
    return TORC_OK;
  torc__node *n = torc__node_new(d->name, torc__ops[op].name, d->fn, in, n_in);
  if (n == NULL)
    return torc_last_status();
  if (params && psize <= sizeof n->params)
    memcpy(n->params, params, psize);
  torc_status st = TORC_OK;
  for (int i = 0; i < n_in && st == TORC_OK; i++)
    if (d->save & (1u << i))
      st = torc__node_save(n, in[i]);
  if (st == TORC_OK && (d->save & 0x80u))
    st = torc__node_save(n, out);
  if (st != TORC_OK) {
    torc__node_release(n);
    return st;
  }
  torc__node_attach(n, &out, 1);
  return TORC_OK;
}

torc_status torc__check_inplace(const torc_tensor *t, const char *fn) {
  if (tl_mode != TORC_GRAD_ENABLED)
    return TORC_OK;
  if (t->requires_grad && t->grad_fn == NULL)
    return torc_set_error(
        TORC_ERR_AUTOGRAD,
        "%s: the target is a leaf tensor that requires grad (a parameter?); "
        "an in-place change would make its gradient wrong. Do the update "
        "under no-grad (torc_set_grad_mode(TORC_NO_GRAD)), or use the "
        "out-of-place op",
        fn);
  if (t->requires_grad && t->grad_fn && t->grad_fn->view)
    return torc_set_error(
        TORC_ERR_AUTOGRAD,
        "%s: the target is a view (made by %s) of a tensor that requires "
        "grad; an in-place change through a view is not tracked. Clone the "
        "view first (torc_clone), or do it under no-grad",
        fn, t->grad_fn->op);
  return TORC_OK;
}

/* ---- requires_grad, .grad ---- */

torc_status torc_set_requires_grad(torc_tensor *t, int requires_grad) {
  if (t == NULL)
    return torc__null_input("torc_set_requires_grad");
  if (t->grad_fn)
    return torc_set_error(
        TORC_ERR_AUTOGRAD,
        "torc_set_requires_grad: the tensor is not a leaf (it was made by "
        "%s); only leaves can change requires_grad. Use torc_detach(t) to "
        "get a leaf sharing its data",
        t->grad_fn->op);
  if (requires_grad && !torc_dtype_is_float(t->dtype))
    return torc_set_error(TORC_ERR_DTYPE,
                          "torc_set_requires_grad: only floating tensors can "
                          "require grad; this one is %s. Cast it with "
                          "torc_to_dtype first",
                          torc_dtype_name(t->dtype));
  t->requires_grad = requires_grad != 0;
  return TORC_OK;
}

int torc_requires_grad(const torc_tensor *t) { return t && t->requires_grad; }
int torc_is_leaf(const torc_tensor *t) { return t && t->grad_fn == NULL; }
torc_tensor *torc_grad_of(const torc_tensor *t) { return t ? t->grad : NULL; }

const char *torc_grad_fn_name(const torc_tensor *t) {
  if (t == NULL)
    return NULL;
  if (t->grad_fn)
    return t->grad_fn->name;
  return t->requires_grad ? "AccumulateGrad" : NULL;
}

torc_status torc_set_grad(torc_tensor *t, torc_tensor *g) {
  if (t == NULL)
    return torc__null_input("torc_set_grad");
  if (g && (g->ndim != t->ndim || g->dtype != t->dtype ||
            memcmp(g->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim) ||
            !torc_device_eq(g->storage->device, t->storage->device))) {
    char a[160], b[160];
    return torc_set_error(TORC_ERR_SHAPE,
                          "torc_set_grad: the gradient is %s but the tensor "
                          "is %s; they must match",
                          torc_describe(g, a, sizeof a),
                          torc_describe(t, b, sizeof b));
  }
  torc_retain(g);
  torc_release(t->grad);
  t->grad = g;
  return TORC_OK;
}

torc_status torc_zero_grad(torc_tensor *t, int set_to_none) {
  if (t == NULL)
    return torc__null_input("torc_zero_grad");
  if (t->grad == NULL)
    return TORC_OK;
  if (set_to_none) {
    torc_release(t->grad);
    t->grad = NULL;
    return TORC_OK;
  }
  torc_grad_mode m = torc_set_grad_mode(TORC_NO_GRAD);
  torc_status st = torc_zero_(t->grad);
  torc_set_grad_mode(m);
  return st;
}

torc_status torc_retain_grad(torc_tensor *t) {
  if (t == NULL)
    return torc__null_input("torc_retain_grad");
  if (!t->requires_grad)
    return torc_set_error(TORC_ERR_AUTOGRAD,
                          "torc_retain_grad: the tensor does not require grad, "
                          "so it will never have one");
  if (t->grad_fn)
    t->retain_grad = 1;
  return TORC_OK;
}

/* Appends a hook entry to t; its id, or -1. */
static int add_hook(torc_tensor *t, const char *fn, hook_entry e,
                    int given) {
  if (t == NULL) {
    torc__null_input(fn);
    return -1;
  }
  if (!t->requires_grad || !given) {
    torc_set_error(TORC_ERR_AUTOGRAD, "%s: %s", fn,
                   given ? "the tensor does not require grad, so no "
                           "gradient will flow into it"
                         : "the hook is NULL");
    return -1;
  }
  if (t->hooks == NULL && (t->hooks = torc__calloc(1, sizeof *t->hooks)) == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory registering a hook");
    return -1;
  }
  struct torc__hooks *h = t->hooks;
  if (h->n == h->cap) {
    int cap = h->cap ? h->cap * 2 : 4;
    hook_entry *p = torc__realloc(h->h, (size_t)cap * sizeof *p);
    if (p == NULL) {
      torc_set_error(TORC_ERR_OOM, "out of memory registering a hook");
      return -1;
    }
    h->h = p;
    h->cap = cap;
  }
  e.id = ++h->next_id;
  h->h[h->n++] = e;
  return e.id;
}

int torc_register_hook(torc_tensor *t, torc_grad_hook hook, void *user) {
  return add_hook(t, "torc_register_hook",
                  (hook_entry){.fn = hook, .user = user}, hook != NULL);
}

int torc_register_post_accumulate_grad_hook(torc_tensor *t,
                                            torc_post_accumulate_hook hook,
                                            void *user) {
  if (t && t->grad_fn) {
    torc_set_error(TORC_ERR_AUTOGRAD,
                   "torc_register_post_accumulate_grad_hook: the tensor is "
                   "not a leaf (it was made by op %s), so nothing "
                   "accumulates into its .grad; register it on a parameter",
                   torc_grad_fn_name(t));
    return -1;
  }
  return add_hook(t, "torc_register_post_accumulate_grad_hook",
                  (hook_entry){.post = hook, .user = user}, hook != NULL);
}

torc_status torc_autograd_queue_callback(torc_backward_callback fn,
                                         void *user) {
  if (fn == NULL)
    return torc__null_input("torc_autograd_queue_callback");
  if (!tl_in_backward)
    return torc_set_error(TORC_ERR_AUTOGRAD,
                          "torc_autograd_queue_callback: no backward is "
                          "running on this thread; queue the callback from "
                          "a hook that backward calls");
  for (int i = 0; i < tl_n_cbs; i++)
    if (tl_cbs[i].fn == fn && tl_cbs[i].user == user)
      return TORC_OK;
  if (tl_n_cbs == (int)(sizeof tl_cbs / sizeof tl_cbs[0]))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_autograd_queue_callback: at most %d "
                          "callbacks per backward",
                          (int)(sizeof tl_cbs / sizeof tl_cbs[0]));
  tl_cbs[tl_n_cbs++] = (queued_cb){fn, user};
  return TORC_OK;
}

torc_status torc_remove_hook(torc_tensor *t, int id) {
  if (t == NULL)
    return torc__null_input("torc_remove_hook");
  struct torc__hooks *h = t->hooks;
  for (int i = 0; h && i < h->n; i++)
    if (h->h[i].id == id) {
      memmove(&h->h[i], &h->h[i + 1], (size_t)(h->n - i - 1) * sizeof *h->h);
      h->n--;
      return TORC_OK;
    }
  return torc_set_error(TORC_ERR_INVALID,
                        "torc_remove_hook: no hook with id %d on this tensor",
                        id);
}

/* ---- helpers the engine and formulas share ---- */

torc_tensor *torc__sum_to(const torc_tensor *g, const int64_t *shape,
                          int ndim) {
  int dims[TORC_MAX_DIMS], nd = 0;
  int lead = g->ndim - ndim;
  if (lead < 0) {
    torc_set_error(TORC_ERR_INTERNAL, "sum_to: gradient has fewer dims");
    return NULL;
  }
  for (int i = 0; i < g->ndim; i++)
    if (i < lead || (shape[i - lead] == 1 && g->shape[i] != 1))
      dims[nd++] = i;
  torc_tensor *s = nd ? torc_sum(g, dims, nd, 1) : torc_retain((torc_tensor *)g);
  if (s == NULL)
    return NULL;
  if (lead == 0)
    return s;
  torc_tensor *r = torc_reshape(s, shape, ndim);
  torc_release(s);
  return r;
}

/* Brings a formula's gradient to the input's shape, dtype and device. */
static torc_tensor *conform(torc_tensor *g, const torc__inmeta *m,
                            const torc__node *n, int i) {
  torc_tensor *cur = g, *tmp;
  if (cur->ndim != m->ndim ||
      memcmp(cur->shape, m->shape, sizeof(int64_t) * (size_t)m->ndim)) {
    tmp = torc__sum_to(cur, m->shape, m->ndim);
    torc_release(cur);
    if (tmp == NULL)
      return NULL;
    cur = tmp;
    if (cur->ndim != m->ndim ||
        memcmp(cur->shape, m->shape, sizeof(int64_t) * (size_t)m->ndim)) {
      char a[128], b[128];
      torc_set_error(TORC_ERR_INTERNAL,
                     "%s gave input %d a gradient of shape %s for an input of "
                     "shape %s",
                     n->name, i, torc__shape_str(cur->shape, cur->ndim, a, sizeof a),
                     torc__shape_str(m->shape, m->ndim, b, sizeof b));
      torc_release(cur);
      return NULL;
    }
  }
  if (cur->dtype != m->dtype) {
    tmp = torc_to_dtype(cur, m->dtype);
    torc_release(cur);
    if ((cur = tmp) == NULL)
      return NULL;
  }
  if (!torc_device_eq(cur->storage->device, m->device)) {
    tmp = torc_to(cur, m->device);
    torc_release(cur);
    if ((cur = tmp) == NULL)
      return NULL;
  }
  return cur;
}

/* 1 if g has a NaN or an infinity. */
static int has_nonfinite(const torc_tensor *g, torc_status *st) {
  if (!torc_dtype_is_float(g->dtype))
    return 0;
  torc_tensor *inf = torc_full(NULL, 0, INFINITY, g->dtype, g->storage->device);
  torc_tensor *a = torc_abs(g);
  torc_tensor *bad = torc_eq(a, inf);
  torc_tensor *nan = torc_ne(g, g);
  torc_tensor *both = torc_add(bad, nan);
  torc_tensor *any = torc_amax(both, NULL, 0, 0);
  double v = 0;
  *st = any ? torc_item(any, &v) : torc_last_status();
  torc_release(inf), torc_release(a), torc_release(bad), torc_release(nan);
  torc_release(both), torc_release(any);
  return v != 0;
}

static torc_status run_hooks(const torc_tensor *t, torc_tensor **g) {
  if (t == NULL || t->hooks == NULL)
    return TORC_OK;
  for (int i = 0; i < t->hooks->n; i++) {
    if (t->hooks->h[i].fn == NULL)
      continue;
    torc_tensor *r = t->hooks->h[i].fn(*g, t->hooks->h[i].user);
    if (r == NULL)
      continue;
    if (r->ndim != (*g)->ndim ||
        memcmp(r->shape, (*g)->shape, sizeof(int64_t) * (size_t)r->ndim)) {
      char a[128], b[128];
      torc_status st = torc_set_error(
          TORC_ERR_AUTOGRAD,
          "a gradient hook returned shape %s for a gradient of shape %s",
          torc__shape_str(r->shape, r->ndim, a, sizeof a),
          torc__shape_str((*g)->shape, (*g)->ndim, b, sizeof b));
      torc_release(r);
      return st;
    }
    torc_release(*g);
    *g = r;
  }
  return TORC_OK;
}

/* The post-accumulate hooks of leaf t, after its .grad took a gradient. */
static torc_status run_post_hooks(torc_tensor *t) {
  for (int i = 0; t->hooks && i < t->hooks->n; i++) {
    if (t->hooks->h[i].post == NULL)
      continue;
    torc_status st = t->hooks->h[i].post(t, t->hooks->h[i].user);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}

/* Adds g into *slot (taking g's reference). *own (may be NULL) is set
 * when the slot holds a tensor the engine made itself, which nothing else
 * references, so that later gradients may be added into it in place. */
static torc_status accumulate(torc_tensor **slot, unsigned char *own,
                              torc_tensor *g) {
  if (*slot == NULL) {
    *slot = g;
    if (own)
      *own = 0;
    return TORC_OK;
  }
  torc_tensor *s = torc_add(*slot, g);
  torc_release(g);
  if (s == NULL)
    return torc_last_status();
  torc_release(*slot);
  *slot = s;
  if (own)
    *own = 1;
  return TORC_OK;
}

/* The gradient g of a select or slice view (kind, p as the view node
 * recorded them) added into the region of *slot, the gradient of the
 * viewed tensor (meta m), in place: a sequence read step by step through
 * L such views costs O(L) steps of one region each, not L full-size
 * zero tensors summed (O(L^2)). *slot is first made a tensor of the
 * engine's own (zeros, plus what it held). */
static torc_status accumulate_region(torc_tensor **slot, unsigned char *own,
                                     const torc__inmeta *m, int kind,
                                     const int64_t *p, const torc_tensor *g) {
  torc_status st = TORC_OK;
  if (*slot == NULL || !*own) {
    torc_tensor *z = torc_zeros(m->shape, m->ndim, m->dtype, m->device);
    if (z == NULL)
      return torc_last_status();
    if (*slot && (st = torc_add_(z, *slot)) != TORC_OK) {
      torc_release(z);
      return st;
    }
    torc_release(*slot);
    *slot = z;
    *own = 1;
  }
  torc_tensor *v = kind == TORC__VIEW_SLICE
                       ? torc_slice(*slot, (int)p[0], p[1], p[2], p[3])
                       : torc_select(*slot, (int)p[0], p[1]);
  st = v ? torc_add_(v, g) : torc_last_status();
  torc_release(v);
  return st;
}

/* 1 if a leaf's first gradient can be g itself instead of a copy: the
 * walk holds g's only reference and its storage's (so nothing else sees
 * that memory, even when g was made as a view of a base since freed), g
 * fills its storage exactly, and it has t's dtype, device and dense
 * layout (so .grad reads as t does). A weight gradient, fresh from its
 * GEMM, then costs no copy, as in PyTorch's AccumulateGrad. */
static int grad_stealable(const torc_tensor *t, const torc_tensor *g) {
  size_t bytes = (size_t)torc_numel(g) * torc_dtype_size(g->dtype);
  if (atomic_load(&g->refcount) != 1 ||
      atomic_load(&g->storage->refcount) != 1 || g->grad_fn ||
      g->requires_grad || g->hooks || g->offset != 0 ||
      g->storage->nbytes != bytes || g->dtype != t->dtype ||
      g->ndim != t->ndim ||
      !torc_device_eq(g->storage->device, t->storage->device) ||
      !torc_is_contiguous(g) || !torc_is_contiguous(t))
    return 0;
  for (int d = 0; d < t->ndim; d++)
    if (g->shape[d] != t->shape[d])
      return 0;
  return 1;
}

/* Adds g into a leaf's (or retained non-leaf's) .grad. The stored gradient
 * is always its own contiguous tensor, so later in-place accumulation never
 * writes through a view or a stride-0 expansion: g itself when may_steal
 * (a leaf's) and grad_stealable, else a copy. */
static torc_status accumulate_grad(torc_tensor *t, const torc_tensor *g,
                                   int may_steal) {
  if (t->grad == NULL) {
    if (may_steal && grad_stealable(t, g)) {
      t->grad = torc_retain((torc_tensor *)g);
      return TORC_OK;
    }
    torc_tensor *c = torc_clone(g);
    if (c == NULL)
      return torc_last_status();
    t->grad = c;
    return TORC_OK;
  }
  return torc_add_(t->grad, g);
}

/* ---- the engine ---- */

typedef struct walk {
  uint64_t gen;
  torc__node **nodes;
  int n, cap;
  int *deps;
  torc_tensor **buf; /* n * TORC__MAX_OUTPUTS gradients */
  unsigned char *own; /* per buf entry: accumulate's *own */
} walk;

static _Atomic uint64_t walk_generation;

/* The node's index in this walk, or -1: nodes carry the walk's generation
 * and their index, so lookups are O(1). */
static int walk_index(const walk *w, const torc__node *n) {
  return n->walk_gen == w->gen ? n->walk_idx : -1;
}

static torc_status walk_add(walk *w, torc__node *n) {
  if (w->n == w->cap) {
    int cap = w->cap ? w->cap * 2 : 64;
    torc__node **p = torc__realloc(w->nodes, (size_t)cap * sizeof *p);
    int *d = torc__realloc(w->deps, (size_t)cap * sizeof *d);
    if (p)
      w->nodes = p;
    if (d)
      w->deps = d;
    if (!p || !d)
      return torc_set_error(TORC_ERR_OOM, "out of memory in backward");
    w->cap = cap;
  }
  w->nodes[w->n] = n;
  w->deps[w->n] = 0;
  n->walk_gen = w->gen;
  n->walk_idx = w->n;
  w->n++;
  return TORC_OK;
}

/* Collects every node reachable from the roots and counts, for each, the
 * edges that reach it from other collected nodes. */
static torc_status collect(walk *w, torc__node *const *roots, int n_roots) {
  torc_status st;
  for (int r = 0; r < n_roots; r++)
    if (roots[r] && walk_index(w, roots[r]) < 0 &&
        (st = walk_add(w, roots[r])))
      return st;
  for (int i = 0; i < w->n; i++) {
    torc__node *n = w->nodes[i];
    for (int e = 0; e < n->n_in; e++) {
      torc__node *nx = n->next[e].node;
      if (nx == NULL)
        continue;
      int k = walk_index(w, nx);
      if (k < 0) {
        if ((st = walk_add(w, nx)))
          return st;
        k = w->n - 1;
      }
      w->deps[k]++;
    }
  }
  return TORC_OK;
}

typedef struct capture {
  torc__node *node;
  int output_nr;
  torc_tensor *grad;
} capture;

static torc_status engine(torc_tensor *const *roots, torc_tensor **root_grads,
                          int n_roots, int retain_graph, capture *caps,
                          int n_caps) {
  walk w = {0};
  w.gen = atomic_fetch_add(&walk_generation, 1) + 1;
  torc__node *rnodes[64];
  torc_status st = TORC_OK;
  if (n_roots > 64)
    return torc_set_error(TORC_ERR_INVALID, "backward: at most 64 outputs");
  for (int r = 0; r < n_roots; r++)
    rnodes[r] = roots[r]->grad_fn ? roots[r]->grad_fn : roots[r]->grad_acc;
  if ((st = collect(&w, rnodes, n_roots)))
    goto out;
  w.buf = torc__calloc((size_t)w.n * TORC__MAX_OUTPUTS, sizeof *w.buf);
  w.own = torc__calloc((size_t)w.n * TORC__MAX_OUTPUTS, sizeof *w.own);
  if (w.buf == NULL || w.own == NULL) {
    st = torc_set_error(TORC_ERR_OOM, "out of memory in backward");
    goto out;
  }
  for (int r = 0; r < n_roots; r++) {
    int k = walk_index(&w, rnodes[r]);
    int nr = roots[r]->grad_fn ? roots[r]->output_nr : 0;
    if ((st = accumulate(&w.buf[k * TORC__MAX_OUTPUTS + nr], NULL,
                         torc_retain(root_grads[r]))))
      goto out;
  }
  /* Ready stack: nodes no collected node still has to feed. */
  int *ready = torc__malloc(sizeof(int) * (size_t)w.n);
  int n_ready = 0;
  if (ready == NULL) {
    st = torc_set_error(TORC_ERR_OOM, "out of memory in backward");
    goto out;
  }
  for (int i = 0; i < w.n; i++)
    if (w.deps[i] == 0)
      ready[n_ready++] = i;
  while (n_ready > 0 && st == TORC_OK) {
    int idx = ready[--n_ready];
    torc__node *n = w.nodes[idx];
    torc_tensor **gout = &w.buf[idx * TORC__MAX_OUTPUTS];

    /* Missing output gradients are zeros; hooks and retain_grad. */
    for (int k = 0; k < n->n_out && st == TORC_OK; k++) {
      if (gout[k] == NULL)
        gout[k] = torc_zeros(n->out[k].shape, n->out[k].ndim, n->out[k].dtype,
                             n->out[k].device);
      if (gout[k] == NULL) {
        st = torc_last_status();
        break;
      }
      torc_tensor *t = n->leaf ? n->leaf : n->out_weak[k];
      if ((st = run_hooks(t, &gout[k])))
        break;
      if (t && t->retain_grad && !n->leaf && n_caps == 0)
        st = accumulate_grad(t, gout[k], 0);
      for (int c = 0; c < n_caps; c++)
        if (caps[c].node == n && caps[c].output_nr == k && caps[c].grad == NULL)
          caps[c].grad = torc_retain(gout[k]);
    }
    if (st)
      break;
    if (n->leaf) {
      if (n_caps == 0)
        st = accumulate_grad(n->leaf, gout[0], 1);
      if (n_caps == 0 && st == TORC_OK)
        st = run_post_hooks(n->leaf);
      continue;
    }
    if (n->freed && n->n_saved > 0) {
      st = torc_set_error(
          TORC_ERR_AUTOGRAD,
          "backward through %s (from op '%s') a second time: its saved "
          "tensors were freed by the first backward. Pass retain_graph = 1 "
          "to the first torc_backward if you need to run backward twice",
          n->name, n->op);
      break;
    }
    for (int s = 0; s < n->n_saved; s++) {
      torc_tensor *sv = n->saved[s];
      if (sv && sv->storage->version != n->saved_version[s]) {
        char b[128];
        st = torc_set_error(
            TORC_ERR_AUTOGRAD,
            "backward: a tensor of shape %s saved by op '%s' (%s) was "
            "modified in place after it was saved: it was at version %llu "
            "and is now at version %llu. Find the in-place op (a torc_*_ "
            "call) applied to it after '%s', and use its out-of-place form "
            "or clone the tensor first",
            torc__shape_str(sv->shape, sv->ndim, b, sizeof b), n->op, n->name,
            (unsigned long long)n->saved_version[s],
            (unsigned long long)sv->storage->version, n->op);
        break;
      }
    }
    if (st)
      break;
    int vkind;
    int64_t vp[4];
    if (!tl_anomaly && n->n_in == 1 && n->next[0].node &&
        torc__view_region(n, &vkind, vp) &&
        gout[0]->dtype == n->in[0].dtype &&
        torc_device_eq(gout[0]->storage->device, n->in[0].device)) {
      /* a select or slice: its gradient goes straight into its region */
      int k = walk_index(&w, n->next[0].node);
      size_t si = (size_t)k * TORC__MAX_OUTPUTS + (size_t)n->next[0].input_nr;
      st = accumulate_region(&w.buf[si], &w.own[si], &n->in[0], vkind, vp,
                             gout[0]);
      if (st == TORC_OK && --w.deps[k] == 0)
        ready[n_ready++] = k;
      if (!retain_graph && st == TORC_OK)
        n->freed = 1;
      continue;
    }
    /* the inputs' gradients: on the stack for most nodes, allocated for
     * one with many inputs (a stack or cat of a long sequence's steps) */
    torc_tensor *gin_small[64] = {0}, **gin = gin_small;
    if (n->n_in > 64 &&
        (gin = torc__calloc((size_t)n->n_in, sizeof *gin)) == NULL) {
      st = torc_set_error(TORC_ERR_OOM, "out of memory in backward");
      break;
    }
    if (n->prof_module &&
        atomic_load_explicit(&torc__prof_on, memory_order_relaxed)) {
      torc__prof_work work0 = torc__prof_thread_work();
      uint64_t t0 = torc__prof_now();
      st = n->fn(n, gout, gin);
      torc__prof_module(n->prof_module, NULL, 1, torc__prof_now() - t0,
                        work0);
    } else {
      st = n->fn(n, gout, gin);
    }
    for (int i = 0; i < n->n_in && st == TORC_OK; i++) {
      if (gin[i] == NULL || n->next[i].node == NULL) {
        torc_release(gin[i]);
        gin[i] = NULL;
        continue;
      }
      torc_tensor *g = conform(gin[i], &n->in[i], n, i);
      gin[i] = NULL;
      if (g == NULL) {
        st = torc_last_status();
        break;
      }
      if (tl_anomaly && has_nonfinite(g, &st)) {
        torc_release(g);
        char in_mod[300] = "";
        if (n->module)
          snprintf(in_mod, sizeof in_mod, ", in module %s", n->module);
        st = torc_set_error(
            TORC_ERR_AUTOGRAD,
            "anomaly: the gradient computed by %s for input %d of op '%s' "
            "contains NaN or Inf (the forward op '%s'%s produced the output "
            "whose gradient it is); check that op's inputs for values out "
            "of its domain (log of 0, division by 0, overflow)",
            n->name, i, n->op, n->op, in_mod);
        break;
      }
      int k = walk_index(&w, n->next[i].node);
      size_t si = (size_t)k * TORC__MAX_OUTPUTS + (size_t)n->next[i].input_nr;
      st = accumulate(&w.buf[si], &w.own[si], g);
      if (st == TORC_OK && --w.deps[k] == 0)
        ready[n_ready++] = k;
    }
    for (int i = 0; i < n->n_in; i++)
      torc_release(gin[i]);
    if (gin != gin_small)
      torc__free(gin);
    if (!retain_graph && st == TORC_OK) {
      free_saved(n);
      n->freed = 1;
    }
  }
  torc__free(ready);
out:
  if (w.buf)
    for (int i = 0; i < w.n * TORC__MAX_OUTPUTS; i++)
      torc_release(w.buf[i]);
  torc__free(w.buf);
  torc__free(w.own);
  torc__free(w.nodes);
  torc__free(w.deps);
  return st;
}

/* Roots and their starting gradients (ones for one-element roots). */
static torc_status root_grads(const char *fn, torc_tensor *const *roots,
                              const torc_tensor *const *grads, int n,
                              torc_tensor **out) {
  for (int i = 0; i < n; i++) {
    const torc_tensor *r = roots[i];
    if (r == NULL)
      return torc__null_input(fn);
    if (!r->requires_grad)
      return torc_set_error(
          TORC_ERR_AUTOGRAD,
          "%s: the output does not require grad, so there is nothing to "
          "differentiate: none of its inputs required grad (set "
          "torc_set_requires_grad on the parameters), or it was computed "
          "under no-grad",
          fn);
    const torc_tensor *g = grads ? grads[i] : NULL;
    if (g == NULL) {
      if (torc__numel(r->shape, r->ndim) != 1) {
        char b[128];
        return torc_set_error(
            TORC_ERR_AUTOGRAD,
            "%s: the output has shape %s; a gradient can be implied only "
            "for a one-element output. Reduce it (torc_sum, torc_mean) or "
            "pass the gradient",
            fn, torc__shape_str(r->shape, r->ndim, b, sizeof b));
      }
      out[i] = torc_ones(r->shape, r->ndim, r->dtype, r->storage->device);
      if (out[i] == NULL)
        return torc_last_status();
    } else {
      if (g->ndim != r->ndim ||
          memcmp(g->shape, r->shape, sizeof(int64_t) * (size_t)r->ndim)) {
        char a[128], b[128];
        return torc_set_error(
            TORC_ERR_SHAPE, "%s: the gradient has shape %s but the output %s",
            fn, torc__shape_str(g->shape, g->ndim, a, sizeof a),
            torc__shape_str(r->shape, r->ndim, b, sizeof b));
      }
      out[i] = torc_retain((torc_tensor *)g);
    }
  }
  return TORC_OK;
}

/* Runs `body` with grad mode off and scope tracking suspended. */
#define ENGINE_CALL(call)                                                      \
  do {                                                                         \
    torc_grad_mode m_ = torc_set_grad_mode(TORC_NO_GRAD);                      \
    int ac_ = torc__autocast_suspend();                                        \
    torc__scope_suspend(1);                                                    \
    call;                                                                      \
    torc__scope_suspend(-1);                                                   \
    torc__autocast_resume(ac_);                                                \
    torc_set_grad_mode(m_);                                                    \
  } while (0)

torc_status torc_backward(torc_tensor *root, const torc_tensor *grad,
                          int retain_graph) {
  torc_tensor *g0 = NULL;
  torc_status st;
  ENGINE_CALL({
    st = root_grads("torc_backward", &root, grad ? &grad : NULL, 1, &g0);
    if (st == TORC_OK) {
      /* End-of-backward callbacks: queued by this walk's hooks, run after
       * it (even when it failed, so that a callback can end what its hooks
       * began; the walk's error is kept). */
      int outer = tl_in_backward;
      int n0 = tl_n_cbs;
      tl_in_backward = 1;
      st = engine(&root, &g0, 1, retain_graph, NULL, 0);
      for (int i = n0; i < tl_n_cbs; i++) {
        torc_status cs = tl_cbs[i].fn(tl_cbs[i].user);
        if (st == TORC_OK)
          st = cs;
      }
      tl_n_cbs = n0;
      tl_in_backward = outer;
    }
    torc_release(g0);
  });
  return st;
}

torc_status torc_grad(torc_tensor *const *outputs,
                      const torc_tensor *const *grad_outputs, int n_outputs,
                      torc_tensor *const *inputs, int n_inputs,
                      torc_tensor **grads_out, int retain_graph,
                      int allow_unused) {
  if (n_outputs < 1 || n_outputs > 64 || n_inputs < 1 || outputs == NULL ||
      inputs == NULL || grads_out == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_grad: give 1 to 64 outputs and at least one "
                          "input, and an array for the gradients");
  for (int i = 0; i < n_inputs; i++)
    grads_out[i] = NULL;
  capture *caps = torc__calloc((size_t)n_inputs, sizeof *caps);
  torc_tensor *g0[64] = {0};
  if (caps == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory in torc_grad");
  torc_status st = TORC_OK;
  ENGINE_CALL({
    for (int i = 0; i < n_inputs && st == TORC_OK; i++) {
      torc_tensor *x = inputs[i];
      if (x == NULL) {
        st = torc__null_input("torc_grad");
      } else if (!x->requires_grad) {
        st = torc_set_error(TORC_ERR_AUTOGRAD,
                            "torc_grad: input %d does not require grad", i);
      } else if (x->grad_fn) {
        caps[i].node = x->grad_fn;
        caps[i].output_nr = x->output_nr;
      } else {
        caps[i].node = x->grad_acc; /* NULL: never used, so unused */
      }
    }
    if (st == TORC_OK)
      st = root_grads("torc_grad", outputs, grad_outputs, n_outputs, g0);
    if (st == TORC_OK)
      st = engine(outputs, g0, n_outputs, retain_graph, caps, n_inputs);
    for (int i = 0; i < n_outputs; i++)
      torc_release(g0[i]);
    for (int i = 0; i < n_inputs && st == TORC_OK; i++) {
      if (caps[i].grad == NULL && !allow_unused) {
        st = torc_set_error(TORC_ERR_AUTOGRAD,
                            "torc_grad: input %d was not used to compute the "
                            "outputs; pass allow_unused = 1 to get NULL for it",
                            i);
        break;
      }
      grads_out[i] = caps[i].grad ? torc_clone(caps[i].grad) : NULL;
    }
    for (int i = 0; i < n_inputs; i++)
      torc_release(caps[i].grad);
    if (st != TORC_OK)
      for (int i = 0; i < n_inputs; i++) {
        torc_release(grads_out[i]);
        grads_out[i] = NULL;
      }
  });
  torc__free(caps);
  if (st == TORC_OK)
    st = torc__ret_all(grads_out, n_inputs);
  return st;
}
