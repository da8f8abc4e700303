/* core/predict.c — torc_module_predict: batch inference through plans kept
 * with the module.
 *
 * The first call for an input's dtype, device and shape traces the module
 * (twice, at the batch and one row less, so that a forward whose ops
 * depend on the data is caught: torc_trace_check) and builds a fused,
 * frozen plan (torc/graph.h); later calls of that shape run the plan,
 * allocating only the result. PREDICT_SHAPES shapes are kept (a data
 * set's batch and its last, smaller one), the least recently used
 * replaced. The plans hold folded and packed copies of the weights, so
 * each call first compares the module tree's signature (every module's
 * address and counts of parameters, buffers and children; every
 * parameter's and buffer's tensor, storage and storage version) with the
 * one the plans were made for, and drops them when it changed: a step of
 * an optimizer, a loaded state dict, a new child or a move to another
 * device or dtype all change it. A forward that cannot be planned runs
 * eagerly (eval mode, no autograd), as does every shape of a module whose
 * forward was found to depend on the data (one warning says so).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_internal.h"
#include "torc/graph.h"
#include "torc/runtime.h"

enum { PREDICT_SHAPES = 2 };

/* A planned input shape (plan NULL: that shape runs eagerly). */
typedef struct pshape {
  int used;
  uint64_t last; /* the call that last used it, for replacement */
  torc_dtype dtype;
  torc_device dev;
  int ndim;
  int64_t shape[TORC_MAX_DIMS];
  torc_plan *plan;
} pshape;

struct torc__predict {
  pthread_mutex_t mu;
  uint64_t *sig; /* the tree's signature when the plans were made */
  size_t n_sig;
  int eager; /* the forward depends on the data: every shape eager */
  uint64_t calls;
  pshape s[PREDICT_SHAPES];
};

/* Creating a module's state (the first call) is serialised here. */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

/* The signature walk: writes (compare 0) or compares (compare 1) the
 * words of m's subtree at buf[*n...] (cap words); returns 1 on a
 * mismatch. With buf NULL it only counts. */
typedef struct walk {
  uint64_t *buf;
  size_t cap, n;
  int compare, differs;
} walk;

static void word(walk *w, uint64_t v) {
  if (w->buf && w->n < w->cap) {
    if (w->compare)
      w->differs |= w->buf[w->n] != v;
    else
      w->buf[w->n] = v;
  } else if (w->compare) {
    w->differs = 1;
  }
  w->n++;
}

static void tensor_words(walk *w, const torc_tensor *t) {
  word(w, (uint64_t)(uintptr_t)t);
  word(w, t ? (uint64_t)(uintptr_t)t->storage : 0);
  word(w, t && t->storage ? (uint64_t)t->storage->version : 0);
}

static void module_words(walk *w, const torc_module *m) {
  word(w, (uint64_t)(uintptr_t)m);
  word(w, ((uint64_t)(uint32_t)m->n_params << 32) | (uint32_t)m->n_bufs);
  word(w, (uint64_t)(uint32_t)m->n_kids);
  for (int i = 0; i < m->n_params; i++)
    tensor_words(w, m->params[i].t);
  for (int i = 0; i < m->n_bufs; i++)
    tensor_words(w, m->bufs[i].t);
  for (int i = 0; i < m->n_kids; i++)
    module_words(w, m->kids[i].m);
}

static void shapes_clear(torc__predict *p) {
  for (int i = 0; i < PREDICT_SHAPES; i++) {
    torc_plan_free(p->s[i].plan);
    memset(&p->s[i], 0, sizeof p->s[i]);
  }
}

void torc__predict_free(torc__predict *p) {
  if (p == NULL)
    return;
  shapes_clear(p);
  torc__free(p->sig);
  pthread_mutex_destroy(&p->mu);
  torc__free(p);
}

void torc_module_predict_clear(torc_module *m) {
  if (m == NULL || m->predict == NULL)
    return;
  torc__predict *p = m->predict;
  pthread_mutex_lock(&p->mu);
  shapes_clear(p);
  p->eager = 0;
  p->n_sig = 0;
  pthread_mutex_unlock(&p->mu);
}

/* m's state, made at the first call; NULL on OOM (error set). */
static torc__predict *state_of(torc_module *m) {
  pthread_mutex_lock(&create_lock);
  if (m->predict == NULL) {
    torc__predict *p = torc__calloc(1, sizeof *p);
    if (p && pthread_mutex_init(&p->mu, NULL) != 0) {
      torc__free(p);
      p = NULL;
    }
    m->predict = p;
  }
  torc__predict *p = m->predict;
  pthread_mutex_unlock(&create_lock);
  if (p == NULL)
    torc_set_error(TORC_ERR_OOM, "torc_module_predict: out of memory");
  return p;
}

/* Compares m's signature with the plans'; when it changed, drops them and
 * records the new one. TORC_ERR_OOM (error set) when it cannot. */
static torc_status check_signature(torc__predict *p, torc_module *m) {
  walk w = {.buf = p->sig, .cap = p->n_sig, .compare = 1};
  module_words(&w, m);
  if (!w.differs && w.n == p->n_sig && p->sig)
    return TORC_OK;
  shapes_clear(p);
  p->eager = 0;
  if (w.n > p->n_sig || p->sig == NULL) {
    uint64_t *s = torc__realloc(p->sig, w.n * sizeof *s);
    if (s == NULL) {
      p->n_sig = 0;
      return torc_set_error(TORC_ERR_OOM, "torc_module_predict: out of "
                                          "memory");
    }
    p->sig = s;
  }
  walk fill = {.buf = p->sig, .cap = w.n};
  module_words(&fill, m);
  p->n_sig = w.n;
  return TORC_OK;
}

static int same_input(const pshape *s, const torc_tensor *x) {
  if (!s->used || s->dtype != x->dtype || s->ndim != x->ndim ||
      s->dev.type != torc_device_of(x).type ||
      s->dev.index != torc_device_of(x).index)
    return 0;
  for (int d = 0; d < x->ndim; d++)
    if (s->shape[d] != x->shape[d])
      return 0;
  return 1;
}

/* Traces m on x (checked against one row less when x has a batch of two
 * or more) and plans it into s; a forward that depends on the data marks
 * the whole module eager (one warning). Any other failure leaves s
 * eager, silently: the eager forward then reports a real error. */
static void plan_shape(torc__predict *p, torc_module *m, const torc_tensor *x,
                       pshape *s) {
  torc_plan_free(s->plan);
  memset(s, 0, sizeof *s);
  s->used = 1;
  s->dtype = x->dtype;
  s->dev = torc_device_of(x);
  s->ndim = x->ndim;
  memcpy(s->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  torc_graph *g = NULL;
  torc_status st;
  int scope = torc_scope_begin();
  if (x->ndim >= 1 && x->shape[0] >= 2) {
    torc_tensor *xb = torc_narrow(x, 0, 0, x->shape[0] - 1);
    st = xb ? torc_trace_check(m, &x, (const torc_tensor *const *)&xb, 1, &g)
            : torc_last_status();
  } else {
    st = torc_trace(m, &x, 1, &g);
  }
  torc_scope_end(scope);
  if (st == TORC_ERR_INVALID) {
    p->eager = 1;
    torc_logf(TORC_LOG_WARN,
              "torc_module_predict: %s; this module runs eagerly from now on "
              "(torc_module_predict_clear tries again)",
              torc_last_error());
  }
  if (st == TORC_OK &&
      torc_plan_new(g, TORC_PLAN_FOLD_BN | TORC_PLAN_FUSE | TORC_PLAN_FREEZE,
                    &s->plan) != TORC_OK)
    s->plan = NULL;
  torc_graph_free(g);
  torc_clear_error();
}

/* The training flags of m's subtree, in walk order, into modes (counting
 * them when modes is NULL), or back from it (restore 1). */
static int modes_walk(torc_module *m, int *modes, int i, int restore) {
  if (modes && restore)
    m->training = modes[i];
  else if (modes)
    modes[i] = m->training;
  i++;
  for (int k = 0; k < m->n_kids; k++)
    i = modes_walk(m->kids[k].m, modes, i, restore);
  return i;
}

/* m's forward on x in eval mode without autograd, each module's mode put
 * back after. */
static torc_tensor *eager(torc_module *m, const torc_tensor *x) {
  int n = modes_walk(m, NULL, 0, 0);
  int *modes = torc__malloc(sizeof(int) * (size_t)n);
  if (modes == NULL) {
    torc_set_error(TORC_ERR_OOM, "torc_module_predict: out of memory");
    return NULL;
  }
  modes_walk(m, modes, 0, 0);
  torc_module_train(m, 0);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc_tensor *y = torc_module_forward(m, x);
  torc_set_grad_mode(gm);
  modes_walk(m, modes, 0, 1);
  torc__free(modes);
  return y;
}

torc_tensor *torc_module_predict(torc_module *m, const torc_tensor *x) {
  if (m == NULL || x == NULL) {
    torc__null_input("torc_module_predict");
    return NULL;
  }
  torc__predict *p = state_of(m);
  if (p == NULL)
    return NULL;
  pthread_mutex_lock(&p->mu);
  torc_tensor *y = NULL;
  if (check_signature(p, m) != TORC_OK) {
    pthread_mutex_unlock(&p->mu);
    return NULL;
  }
  pshape *s = NULL;
  if (!p->eager) {
    p->calls++;
    for (int i = 0; i < PREDICT_SHAPES && s == NULL; i++)
      if (same_input(&p->s[i], x))
        s = &p->s[i];
    if (s == NULL) {
      s = &p->s[0];
      for (int i = 1; i < PREDICT_SHAPES; i++)
        if (p->s[i].last < s->last)
          s = &p->s[i];
      plan_shape(p, m, x, s);
    }
    s->last = p->calls;
  }
  if (s && s->plan) {
    torc_tensor *out = NULL;
    if (torc_plan_run(s->plan, &x, 1, &out) == TORC_OK) {
      pthread_mutex_unlock(&p->mu);
      return torc__ret(out);
    }
    /* an input the plan cannot read (its strides): eager below */
    torc_clear_error();
  }
  y = eager(m, x);
  pthread_mutex_unlock(&p->mu);
  return y;
}
