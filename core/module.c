/* core/module.c — the module tree (torc/module.h): children, parameters and
 * buffers with PyTorch's dotted names, the forward wrapper (device check,
 * error context, summary recording), train/eval, and moving the tree
 * between devices and dtypes. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_internal.h"
#include "torc/autograd.h"
#include "torc/runtime.h"

/* The tree's own names for the types of core/module_internal.h. */
typedef torc__module_slot slot;
typedef torc__module_kid kid;
typedef torc__summary_row rec_row;
typedef torc__summary recorder;

/* Bumped by every add_child: cached paths below may have changed. */
static _Atomic uint64_t tree_gen = 1;

/* The steps of the searches whose length grows with the model (name
 * comparisons, the sequential's release checks), on this thread; the
 * tests check with it that building and running a model is linear. */
_Thread_local uint64_t torc__module_steps;
uint64_t torc__module_work(void) { return torc__module_steps; }

/* ---- creation and the tree ---- */

torc_module *torc_module_new(const char *type, const torc_module_vtable *vt,
                             void *state) {
  if (type == NULL || vt == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_module_new: the type name and the "
                                  "vtable are required");
    return NULL;
  }
  if (vt->struct_size < sizeof(size_t)) {
    torc_set_error(TORC_ERR_INVALID, "torc_module_new: vtable of '%s' has "
                                     "struct_size %zu; set it to "
                                     "sizeof(torc_module_vtable)",
                   type, vt->struct_size);
    return NULL;
  }
  torc_module *m = torc__calloc(1, sizeof *m);
  if (m == NULL || (m->type = torc__strdup(type)) == NULL) {
    torc__free(m);
    torc_set_error(TORC_ERR_OOM, "out of memory for module '%s'", type);
    return NULL;
  }
  m->vt = vt;
  m->state = state;
  m->training = 1;
  m->dev = TORC_CPU;
  m->dtype = TORC_F32;
  m->init_scheme = "default";
  return m;
}

static void module_destroy(torc_module *m) {
  for (int i = 0; i < m->n_kids; i++) {
    m->kids[i].m->parent = NULL;
    module_destroy(m->kids[i].m);
    torc__free(m->kids[i].name);
  }
  if (m->vt && TORC_HAS_SLOT(m->vt, torc_module_vtable, destroy) &&
      m->vt->destroy)
    m->vt->destroy(m);
  for (int i = 0; i < m->n_params; i++) {
    torc_release(m->params[i].t);
    torc__free(m->params[i].name);
  }
  for (int i = 0; i < m->n_bufs; i++) {
    torc_release(m->bufs[i].t);
    torc__free(m->bufs[i].name);
  }
  torc__free(m->kids);
  torc__free(m->names_ix);
  torc__free(m->params);
  torc__free(m->bufs);
  torc__free(m->name);
  torc__free(m->path);
  torc__free(m->type);
  torc__predict_free(m->predict);
  torc__free(m);
}

void torc_module_free(torc_module *m) {
  if (m == NULL)
    return;
  if (m->parent) {
    torc_logf(TORC_LOG_WARN,
              "torc_module_free: module '%s' (%s) belongs to a parent; free "
              "the root module instead (nothing was freed)",
              torc_module_path(m), m->type);
    return;
  }
  module_destroy(m);
}

void *torc_module_state(const torc_module *m) { return m ? m->state : NULL; }
const char *torc_module_type_name(const torc_module *m) {
  return m ? m->type : NULL;
}
torc_module *torc_module_parent(const torc_module *m) {
  return m ? m->parent : NULL;
}

const char *torc_module_path(const torc_module *m) {
  if (m == NULL)
    return "";
  torc_module *mm = (torc_module *)m;
  uint64_t gen = tree_gen;
  if (mm->path && mm->path_gen == gen)
    return mm->path;
  size_t len = 0;
  for (const torc_module *p = m; p->parent; p = p->parent)
    len += strlen(p->name) + 1;
  char *s = torc__malloc(len + 1);
  if (s == NULL)
    return mm->path ? mm->path : "";
  /* Fill from the end: the leaf's name last, each preceded by '.'. */
  size_t pos = len;
  s[len] = '\0';
  for (const torc_module *p = m; p->parent; p = p->parent) {
    size_t n = strlen(p->name);
    pos -= n;
    memcpy(s + pos, p->name, n);
    if (p->parent->parent)
      s[--pos] = '.';
  }
  if (len > 0) /* one byte too many was reserved for separators */
    memmove(s, s + pos, len - pos + 1);
  torc__free(mm->path);
  mm->path = s;
  mm->path_gen = gen;
  return s;
}

/* "linear 'features.3'" or "the root sequential" for messages. */
static const char *who(const torc_module *m, char *buf, size_t size) {
  const char *p = torc_module_path(m);
  if (p[0] == '\0')
    snprintf(buf, size, "%s (the root module)", m->type);
  else
    snprintf(buf, size, "%s '%s'", m->type, p);
  return buf;
}

const char *torc__module_who(const torc_module *m, char *buf, size_t size) {
  return who(m, buf, size);
}

static int valid_name(const char *name) {
  if (name == NULL || name[0] == '\0')
    return 0;
  for (const char *p = name; *p; p++)
    if (!(isalnum((unsigned char)*p) || *p == '_'))
      return 0;
  return 1;
}

/* Parameters, buffers and children share one namespace. A module with
 * more than NAMES_SCAN names indexes them (so that appending layer n to a
 * sequential does not compare n names): open addressing over names_slots
 * slots, each -1 or the code 4 * position + what (NAME_PARAM, NAME_BUF,
 * NAME_KID). Fewer names, or no memory for the index, are searched in
 * order. */
enum { NAMES_SCAN = 8, NAME_PARAM = 0, NAME_BUF = 1, NAME_KID = 2 };

static const char *name_at(const torc_module *m, int code) {
  int i = code >> 2;
  switch (code & 3) {
  case NAME_PARAM:
    return m->params[i].name;
  case NAME_BUF:
    return m->bufs[i].name;
  default:
    return m->kids[i].name;
  }
}

static size_t name_hash(const char *s, size_t len) {
  uint64_t h = 14695981039346656037ull; /* FNV-1a */
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return (size_t)h;
}

static int same_name(const char *a, const char *b, size_t len) {
  return strncmp(a, b, len) == 0 && a[len] == '\0';
}

/* The code of the name [name, name + len) in m, or -1. */
static int name_find(const torc_module *m, const char *name, size_t len) {
  if (m->names_ix) {
    size_t mask = m->names_slots - 1;
    for (size_t i = name_hash(name, len) & mask;; i = (i + 1) & mask) {
      int code = m->names_ix[i];
      torc__module_steps++;
      if (code < 0)
        return -1;
      if (same_name(name_at(m, code), name, len))
        return code;
    }
  }
  for (int i = 0; i < m->n_params; i++)
    if (torc__module_steps++, same_name(m->params[i].name, name, len))
      return 4 * i + NAME_PARAM;
  for (int i = 0; i < m->n_bufs; i++)
    if (torc__module_steps++, same_name(m->bufs[i].name, name, len))
      return 4 * i + NAME_BUF;
  for (int i = 0; i < m->n_kids; i++)
    if (torc__module_steps++, same_name(m->kids[i].name, name, len))
      return 4 * i + NAME_KID;
  return -1;
}

static void names_put(torc_module *m, int code) {
  const char *name = name_at(m, code);
  size_t mask = m->names_slots - 1;
  size_t i = name_hash(name, strlen(name)) & mask;
  while (m->names_ix[i] >= 0)
    i = (i + 1) & mask;
  m->names_ix[i] = code;
}

/* Records the name just added (code) in m's index, building or growing
 * the index as needed; without memory for it, m goes back to searching
 * its names in order. */
static void names_added(torc_module *m, int code) {
  size_t n = (size_t)m->n_params + (size_t)m->n_bufs + (size_t)m->n_kids;
  if (n <= NAMES_SCAN)
    return;
  if (n > INT_MAX / 4) { /* past what a code holds: search in order */
    torc__free(m->names_ix);
    m->names_ix = NULL;
    return;
  }
  if (m->names_ix && 2 * n <= m->names_slots) {
    names_put(m, code);
    return;
  }
  size_t slots = 4 * NAMES_SCAN;
  while (slots < 4 * n)
    slots *= 2;
  torc__free(m->names_ix);
  m->names_ix = torc__malloc(slots * sizeof *m->names_ix);
  if (m->names_ix == NULL)
    return;
  m->names_slots = slots;
  for (size_t i = 0; i < slots; i++)
    m->names_ix[i] = -1;
  for (int i = 0; i < m->n_params; i++)
    names_put(m, 4 * i + NAME_PARAM);
  for (int i = 0; i < m->n_bufs; i++)
    names_put(m, 4 * i + NAME_BUF);
  for (int i = 0; i < m->n_kids; i++)
    names_put(m, 4 * i + NAME_KID);
}

static int name_taken(const torc_module *m, const char *name) {
  return name_find(m, name, strlen(name)) >= 0;
}

static torc_status check_new_name(const torc_module *m, const char *name,
                                  const char *fn) {
  char w[160];
  if (!valid_name(name))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: name '%s' for %s is not valid; use letters, "
                          "digits and '_' ('.' separates path components)",
                          fn, name ? name : "(null)", who(m, w, sizeof w));
  if (name_taken(m, name))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: %s already has a parameter, buffer or child "
                          "named '%s'; pick another name",
                          fn, who(m, w, sizeof w), name);
  return TORC_OK;
}

static torc_status add_slot(slot **arr, int *n, const char *name,
                            torc_tensor *t, int persistent) {
  slot *p = torc__realloc(*arr, (size_t)(*n + 1) * sizeof *p);
  if (p == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory registering '%s'",
                          name);
  *arr = p;
  char *s = torc__strdup(name);
  if (s == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory registering '%s'",
                          name);
  p[*n].name = s;
  p[*n].t = torc_retain(t);
  p[*n].persistent = persistent;
  (*n)++;
  return TORC_OK;
}

torc_status torc_module_register_parameter(torc_module *m, const char *name,
                                           torc_tensor *t) {
  if (m == NULL || t == NULL)
    return torc__null_input("torc_module_register_parameter");
  torc_status st = check_new_name(m, name, "torc_module_register_parameter");
  if (st)
    return st;
  char w[160];
  if (!torc_dtype_is_float(t->dtype))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_module_register_parameter: parameter '%s' of "
                          "%s is %s; parameters must be floating (register "
                          "integer state as a buffer)",
                          name, who(m, w, sizeof w),
                          torc_dtype_name(t->dtype));
  if (t->grad_fn)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_module_register_parameter: parameter '%s' of "
                          "%s is the result of an op (%s), not a leaf; "
                          "register torc_detach() of it",
                          name, who(m, w, sizeof w), torc_grad_fn_name(t));
  st = torc_set_requires_grad(t, 1);
  if (st)
    return st;
  st = add_slot(&m->params, &m->n_params, name, t, 1);
  if (st == TORC_OK)
    names_added(m, 4 * (m->n_params - 1) + NAME_PARAM);
  return st;
}

torc_status torc_module_register_buffer(torc_module *m, const char *name,
                                        torc_tensor *t, int persistent) {
  if (m == NULL || t == NULL)
    return torc__null_input("torc_module_register_buffer");
  torc_status st = check_new_name(m, name, "torc_module_register_buffer");
  if (st)
    return st;
  st = add_slot(&m->bufs, &m->n_bufs, name, t, persistent != 0);
  if (st == TORC_OK)
    names_added(m, 4 * (m->n_bufs - 1) + NAME_BUF);
  return st;
}

torc_status torc_module_set_buffer(torc_module *m, const char *name,
                                   torc_tensor *t) {
  if (m == NULL || t == NULL || name == NULL)
    return torc__null_input("torc_module_set_buffer");
  int code = name_find(m, name, strlen(name));
  if (code >= 0 && (code & 3) == NAME_BUF) {
    torc_retain(t);
    torc_release(m->bufs[code >> 2].t);
    m->bufs[code >> 2].t = t;
    return TORC_OK;
  }
  char w[160];
  return torc_set_error(TORC_ERR_INVALID,
                        "torc_module_set_buffer: %s has no buffer '%s'",
                        who(m, w, sizeof w), name);
}

static int is_ancestor(const torc_module *a, const torc_module *m) {
  for (const torc_module *p = m; p; p = p->parent)
    if (p == a)
      return 1;
  return 0;
}

torc_status torc_module_add_child(torc_module *m, const char *name,
                                  torc_module *child) {
  if (child == NULL) {
    torc__null_input("torc_module_add_child");
    return TORC_ERR_NULL;
  }
  if (m == NULL) {
    if (child->parent == NULL)
      module_destroy(child);
    return torc__null_input("torc_module_add_child");
  }
  char w[160], w2[160];
  torc_status st = TORC_OK;
  if (child->parent)
    st = torc_set_error(TORC_ERR_INVALID,
                        "torc_module_add_child: %s already belongs to a "
                        "parent; a module can have one parent (build a "
                        "second one to use it twice)",
                        who(child, w, sizeof w));
  else if (is_ancestor(child, m))
    st = torc_set_error(TORC_ERR_INVALID,
                        "torc_module_add_child: adding %s under %s would make "
                        "a cycle",
                        who(child, w, sizeof w), who(m, w2, sizeof w2));
  else
    st = check_new_name(m, name, "torc_module_add_child");
  if (st == TORC_OK) {
    kid *p = m->kids;
    if (m->n_kids == m->cap_kids) { /* doubling: appends stay linear */
      int cap = m->cap_kids < INT_MAX / 2 ? (m->cap_kids ? 2 * m->cap_kids : 4)
                                          : INT_MAX;
      p = m->n_kids < cap ? torc__realloc(m->kids, (size_t)cap * sizeof *p) : NULL;
      if (p) {
        m->kids = p;
        m->cap_kids = cap;
      }
    }
    char *s = p ? torc__strdup(name) : NULL;
    char *s2 = s ? torc__strdup(name) : NULL; /* the child's copy */
    if (s2 == NULL) {
      torc__free(s);
      st = torc_set_error(TORC_ERR_OOM, "out of memory adding child '%s'",
                          name);
    } else {
      p[m->n_kids].name = s;
      p[m->n_kids].m = child;
      m->n_kids++;
      child->parent = m;
      child->name = s2;
      names_added(m, 4 * (m->n_kids - 1) + NAME_KID);
      tree_gen++;
      return TORC_OK;
    }
  }
  /* Taking ownership on failure must never free a module a tree owns: a
   * child that is an ancestor of m belongs to the tree above m. */
  if (child->parent == NULL && !is_ancestor(child, m))
    module_destroy(child);
  return st;
}

torc_tensor *torc_module_parameter(const torc_module *m, const char *name) {
  if (m == NULL || name == NULL)
    return NULL;
  int code = name_find(m, name, strlen(name));
  return code >= 0 && (code & 3) == NAME_PARAM ? m->params[code >> 2].t
                                               : NULL;
}

torc_tensor *torc_module_buffer(const torc_module *m, const char *name) {
  if (m == NULL || name == NULL)
    return NULL;
  int code = name_find(m, name, strlen(name));
  return code >= 0 && (code & 3) == NAME_BUF ? m->bufs[code >> 2].t : NULL;
}

torc_module *torc_module_child(const torc_module *m, const char *name) {
  if (m == NULL || name == NULL)
    return NULL;
  int code = name_find(m, name, strlen(name));
  return code >= 0 && (code & 3) == NAME_KID ? m->kids[code >> 2].m : NULL;
}

int torc_module_child_count(const torc_module *m) {
  return m ? m->n_kids : 0;
}
const char *torc_module_child_name(const torc_module *m, int i) {
  return m && i >= 0 && i < m->n_kids ? m->kids[i].name : NULL;
}
torc_module *torc_module_child_at(const torc_module *m, int i) {
  return m && i >= 0 && i < m->n_kids ? m->kids[i].m : NULL;
}

torc_module *torc_module_find(const torc_module *m, const char *path) {
  if (m == NULL || path == NULL) {
    torc__null_input("torc_module_find");
    return NULL;
  }
  const torc_module *cur = m;
  const char *p = path;
  while (*p) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    int code = name_find(cur, p, n);
    const torc_module *next =
        code >= 0 && (code & 3) == NAME_KID ? cur->kids[code >> 2].m : NULL;
    if (next == NULL) {
      char have[512] = "";
      size_t len = 0;
      for (int i = 0; i < cur->n_kids && len + 40 < sizeof have; i++)
        len += (size_t)snprintf(have + len, sizeof have - len, "%s'%s'",
                                i ? ", " : "", cur->kids[i].name);
      char w[160];
      torc_set_error(TORC_ERR_INVALID,
                     "torc_module_find: '%s': %s has no child '%.*s' "
                     "(its children: %s)",
                     path, who(cur, w, sizeof w), (int)n, p,
                     cur->n_kids ? have : "none");
      return NULL;
    }
    cur = next;
    p += n;
    if (*p == '.')
      p++;
  }
  return (torc_module *)cur;
}

void torc__module_set_from(torc_module *m, int from) {
  if (m)
    m->from = from;
}
int torc_module_from(const torc_module *m) {
  return m && (m->kind == KIND_ADD || m->kind == KIND_CONCAT) ? m->from : 0;
}
torc_status torc__module_reset(torc_module *m, const char *scheme,
                               torc_generator *gen) {
  if (!TORC_HAS_SLOT(m->vt, torc_module_vtable, reset) || !m->vt->reset)
    return TORC_OK;
  torc_status st = m->vt->reset(m, scheme, gen);
  if (st != TORC_OK && torc_last_status() == TORC_OK) {
    char w[160];
    torc_set_error(st, "torc_module_init: the reset of %s failed without "
                       "saying why",
                   who(m, w, sizeof w));
  }
  return st;
}

void torc__module_set_lazy(torc_module *m, int lazy) {
  if (m)
    m->lazy = lazy != 0;
}
const char *torc__module_init_scheme(const torc_module *m) {
  return m ? m->init_scheme : "default";
}
void torc__module_set_init_scheme(torc_module *m, const char *scheme) {
  if (m && scheme)
    m->init_scheme = scheme;
}

static void lazy_walk(const torc_module *m, const char **names, int max,
                      int *n) {
  if (m->lazy) {
    if (names && *n < max)
      names[*n] = torc_module_path(m);
    (*n)++;
  }
  for (int i = 0; i < m->n_kids; i++)
    lazy_walk(m->kids[i].m, names, max, n);
}

int torc__module_lazy_paths(const torc_module *m, const char **names,
                            int max) {
  int n = 0;
  if (m)
    lazy_walk(m, names, max, &n);
  return n;
}

/* ---- forward ---- */

_Thread_local recorder *torc__summary_on; /* module_internal.h */
static _Thread_local int tl_depth;
static _Thread_local int tl_annotated;

/* The label of a module's autograd scope (anomaly messages): who() of
 * it. */
static const char *scope_label(const void *key, char *buf, size_t size) {
  return who(key, buf, size);
}

static int rec_begin(const torc_module *m) {
  recorder *r = torc__summary_on;
  if (r->n == r->cap) {
    int cap = r->cap ? r->cap * 2 : 32;
    rec_row *p = torc__realloc(r->rows, (size_t)cap * sizeof *p);
    if (p == NULL) {
      r->oom = 1;
      return -1;
    }
    r->rows = p;
    r->cap = cap;
  }
  rec_row *row = &r->rows[r->n];
  memset(row, 0, sizeof *row);
  row->m = m;
  row->depth = tl_depth;
  return r->n++;
}

static torc_status check_input_device(torc_module *m, const torc_tensor *x) {
  if (m->n_params == 0 && m->n_bufs == 0 && !m->lazy)
    return TORC_OK;
  torc_device want = m->n_params   ? m->params[0].t->storage->device
                     : m->n_bufs ? m->bufs[0].t->storage->device
                                 : m->dev;
  torc_device have = x->storage->device;
  if (torc_device_eq(want, have))
    return TORC_OK;
  char w[160], a[32], b[32];
  torc_device_str(have, a, sizeof a);
  torc_device_str(want, b, sizeof b);
  return torc_set_error(TORC_ERR_DEVICE,
                        "%s: the input is on %s but the module's parameters "
                        "are on %s; move the input with torc_to(x, %s) or "
                        "the model with torc_module_to(model, %s)",
                        who(m, w, sizeof w), a, b, b, a);
}

torc_tensor *torc_module_forward_n(torc_module *m,
                                   const torc_tensor *const *in, int n_in) {
  if (m == NULL) {
    torc__null_input("torc_module_forward");
    return NULL;
  }
  if (n_in < 1 || in == NULL) {
    char w[160];
    torc_set_error(TORC_ERR_INVALID, "torc_module_forward: %s given %d "
                                     "inputs; it needs at least one",
                   who(m, w, sizeof w), n_in);
    return NULL;
  }
  for (int i = 0; i < n_in; i++)
    if (in[i] == NULL) {
      torc__null_input("torc_module_forward");
      return NULL;
    }
  if (m->vt->forward == NULL) {
    char w[160];
    torc_set_error(TORC_ERR_INVALID,
                   "torc_module_forward: %s has no forward (a module list "
                   "or dict only holds modules); call its children with "
                   "torc_module_child_at / torc_module_child",
                   who(m, w, sizeof w));
    return NULL;
  }
  if (check_input_device(m, in[0]))
    return NULL;
  if (tl_depth == 0)
    tl_annotated = 0;
  int row = torc__summary_on ? rec_begin(m) : -1;
  /* The type's forward runs in a scope of its own, so its temporaries
   * (torc_relu(torc_add(...))) go away without a release by hand. */
  int scope = torc_scope_begin();
  if (scope < 0)
    return NULL;
  tl_depth++;
  torc__grad_scope outer = torc__grad_scope_enter(m, scope_label);
  int prof = atomic_load_explicit(&torc__prof_on, memory_order_relaxed);
  torc__prof_work work0 = {0};
  if (prof)
    work0 = torc__prof_thread_work();
  uint64_t t0 = prof ? torc__prof_now() : 0;
  torc_tensor *out = m->vt->forward(m, in, n_in);
  if (prof) {
    char w[160];
    torc__prof_module(m, who(m, w, sizeof w), 0, torc__prof_now() - t0,
                      work0);
  }
  torc__grad_scope_restore(outer);
  tl_depth--;
  if (out)
    torc_scope_keep(out);
  torc_scope_end(scope);
  if (out == NULL) {
    if (!tl_annotated) {
      char w[160];
      torc_status st = torc_last_status();
      if (st == TORC_OK)
        st = TORC_ERR_INTERNAL;
      torc_set_error(st, "%s (in %s)", torc_last_error(),
                     who(m, w, sizeof w));
      tl_annotated = 1;
    }
    return NULL;
  }
  if (row >= 0) {
    rec_row *r = &torc__summary_on->rows[row];
    r->ndim = out->ndim;
    memcpy(r->shape, out->shape, sizeof r->shape);
    r->out_bytes = torc__numel(out->shape, out->ndim) *
                   (int64_t)torc_dtype_size(out->dtype);
    r->done = 1;
  }
  return out;
}

const torc_module_vtable *torc__module_vtable(const torc_module *m) {
  return m ? m->vt : NULL;
}

torc_tensor *torc__module_run_as(torc_module *m,
                                 torc_tensor *(*fn)(void *ctx), void *ctx) {
  torc__grad_scope outer = torc__grad_scope_enter(m, scope_label);
  int prof = atomic_load_explicit(&torc__prof_on, memory_order_relaxed);
  torc__prof_work work0 = {0};
  if (prof)
    work0 = torc__prof_thread_work();
  uint64_t t0 = prof ? torc__prof_now() : 0;
  torc_tensor *out = fn(ctx);
  if (prof) {
    char w[160];
    torc__prof_module(m, who(m, w, sizeof w), 0, torc__prof_now() - t0,
                      work0);
  }
  torc__grad_scope_restore(outer);
  return out;
}

torc_tensor *torc_module_forward(torc_module *m, const torc_tensor *x) {
  return torc_module_forward_n(m, &x, 1);
}

/* ---- modes, devices, dtypes ---- */

void torc_module_train(torc_module *m, int training) {
  if (m == NULL)
    return;
  m->training = training != 0;
  for (int i = 0; i < m->n_kids; i++)
    torc_module_train(m->kids[i].m, training);
}

int torc_module_is_training(const torc_module *m) {
  return m ? m->training : 0;
}
torc_device torc_module_device(const torc_module *m) {
  return m ? m->dev : TORC_CPU;
}
torc_dtype torc_module_dtype(const torc_module *m) {
  return m ? m->dtype : TORC_F32;
}

torc_tensor *torc__prepare_move(const torc_tensor *t, torc_device dev,
                                torc_dtype dtype) {
  torc_tensor *a = torc__to(t, dev);
  if (a == NULL)
    return NULL;
  if (a->dtype != dtype) {
    torc_tensor *b = torc__cast(a, dtype);
    torc_release(a);
    return b;
  }
  if (a == t && !torc_is_contiguous(a)) {
    torc_tensor *b = torc__contiguous(a);
    torc_release(a);
    return b;
  }
  return a;
}

void torc__commit_move(torc_tensor *t, torc_tensor *prepared) {
  if (prepared == NULL)
    return;
  if (prepared != t) {
    torc_storage *s = t->storage;
    t->storage = prepared->storage;
    prepared->storage = s;
    t->dtype = prepared->dtype;
    memcpy(t->strides, prepared->strides, sizeof t->strides);
    t->offset = prepared->offset;
  }
  torc_release(prepared);
}

typedef struct tlist {
  torc_tensor **t;
  int n, cap;
} tlist;

static int tlist_add(tlist *l, torc_tensor *t) {
  for (int i = 0; i < l->n; i++)
    if (l->t[i] == t)
      return 0;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 32;
    torc_tensor **p = torc__realloc(l->t, (size_t)cap * sizeof *p);
    if (p == NULL)
      return -1;
    l->t = p;
    l->cap = cap;
  }
  l->t[l->n++] = t;
  return 0;
}

/* Every parameter, buffer and gradient below m (each once). */
static int collect(const torc_module *m, tlist *l) {
  for (int i = 0; i < m->n_params; i++) {
    if (tlist_add(l, m->params[i].t))
      return -1;
    if (m->params[i].t->grad && tlist_add(l, m->params[i].t->grad))
      return -1;
  }
  for (int i = 0; i < m->n_bufs; i++)
    if (tlist_add(l, m->bufs[i].t))
      return -1;
  for (int i = 0; i < m->n_kids; i++)
    if (collect(m->kids[i].m, l))
      return -1;
  return 0;
}

static void set_place(torc_module *m, int set_dev, torc_device dev,
                      int set_dtype, torc_dtype dtype) {
  if (set_dev)
    m->dev = dev;
  if (set_dtype)
    m->dtype = dtype;
  for (int i = 0; i < m->n_kids; i++)
    set_place(m->kids[i].m, set_dev, dev, set_dtype, dtype);
}

static torc_status move_all(torc_module *m, int set_dev, torc_device dev,
                            int set_dtype, torc_dtype dtype,
                            const char *fn) {
  tlist l = {0};
  if (collect(m, &l)) {
    torc__free(l.t);
    return torc_set_error(TORC_ERR_OOM, "%s: out of memory", fn);
  }
  torc_tensor **prep = torc__calloc((size_t)l.n + 1, sizeof *prep);
  if (prep == NULL) {
    torc__free(l.t);
    return torc_set_error(TORC_ERR_OOM, "%s: out of memory", fn);
  }
  torc_status st = TORC_OK;
  for (int i = 0; i < l.n && st == TORC_OK; i++) {
    torc_tensor *t = l.t[i];
    torc_dtype want = t->dtype;
    if (set_dtype && torc_dtype_is_float(t->dtype))
      want = dtype;
    prep[i] = torc__prepare_move(t, set_dev ? dev : t->storage->device, want);
    if (prep[i] == NULL)
      st = torc_last_status() ? torc_last_status() : TORC_ERR_INTERNAL;
  }
  if (st) { /* nothing changed yet: drop what was prepared */
    for (int i = 0; i < l.n; i++)
      torc_release(prep[i]);
  } else {
    for (int i = 0; i < l.n; i++)
      torc__commit_move(l.t[i], prep[i]);
    set_place(m, set_dev, dev, set_dtype, dtype);
  }
  torc__free(prep);
  torc__free(l.t);
  return st;
}

torc_status torc_module_to(torc_module *m, torc_device dev) {
  if (m == NULL)
    return torc__null_input("torc_module_to");
  if (torc__device_check(dev, "torc_module_to"))
    return torc_last_status();
  return move_all(m, 1, dev, 0, TORC_F32, "torc_module_to");
}

torc_status torc_module_to_dtype(torc_module *m, torc_dtype dtype) {
  if (m == NULL)
    return torc__null_input("torc_module_to_dtype");
  if (!torc_dtype_valid(dtype) || !torc_dtype_is_float(dtype))
    return torc_set_error(TORC_ERR_DTYPE,
                          "torc_module_to_dtype: %s is not a floating dtype; "
                          "use f32, f64, f16 or bf16",
                          torc_dtype_valid(dtype) ? torc_dtype_name(dtype)
                                                  : "(invalid)");
  return move_all(m, 0, TORC_CPU, 1, dtype, "torc_module_to_dtype");
}
