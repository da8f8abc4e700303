/* core/module.c — the module tree (torc/module.h): children, parameters and
 * buffers with PyTorch's dotted names, the forward wrapper (device check,
 * error context, summary recording), train/eval, moving, freezing, repr,
 * summary, the sequential/list/dict containers and the skip-connection
 * nodes, and the registry of module types built from key/value pairs.
 */
#include <ctype.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_internal.h"
#include "registry.h"
#include "torc/autograd.h"
#include "torc/ops.h"
#include "torc/runtime.h"

typedef struct slot {
  char *name;
  torc_tensor *t;
  int persistent;
} slot;

typedef struct kid {
  char *name;
  torc_module *m;
} kid;

enum { KIND_PLAIN, KIND_SEQUENTIAL, KIND_LIST, KIND_DICT, KIND_ADD,
       KIND_CONCAT };

struct torc_module {
  char *type;
  const torc_module_vtable *vt;
  void *state;
  torc_module *parent;
  char *name;          /* local name under the parent */
  char *path;          /* cached dotted path, valid when path_gen matches */
  uint64_t path_gen;
  slot *params, *bufs;
  int n_params, n_bufs;
  kid *kids;
  int n_kids, cap_kids;
  int *names_ix;       /* the index of the names above, or NULL */
  size_t names_slots;  /* its size, a power of two */
  int training;
  int lazy;
  int kind;
  int from;            /* add/concat nodes */
  int concat_dim;
  torc_device dev;
  torc_dtype dtype;
  const char *init_scheme;
};

/* Bumped by every add_child: cached paths below may have changed. */
static _Atomic uint64_t tree_gen = 1;

/* The steps of the searches whose length grows with the model (name
 * comparisons, the sequential's release checks), on this thread; the
 * tests check with it that building and running a model is linear. */
static _Thread_local uint64_t work;
uint64_t torc__module_work(void) { return work; }

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
      work++;
      if (code < 0)
        return -1;
      if (same_name(name_at(m, code), name, len))
        return code;
    }
  }
  for (int i = 0; i < m->n_params; i++)
    if (work++, same_name(m->params[i].name, name, len))
      return 4 * i + NAME_PARAM;
  for (int i = 0; i < m->n_bufs; i++)
    if (work++, same_name(m->bufs[i].name, name, len))
      return 4 * i + NAME_BUF;
  for (int i = 0; i < m->n_kids; i++)
    if (work++, same_name(m->kids[i].name, name, len))
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

/* The summary recorder (torc_module_summary), per thread. */
typedef struct rec_row {
  const torc_module *m;
  int depth;
  int ndim;
  int64_t shape[TORC_MAX_DIMS];
  int done;
  int64_t out_bytes;
} rec_row;

typedef struct recorder {
  rec_row *rows;
  int n, cap;
  int oom;
} recorder;

static _Thread_local recorder *tl_rec;
static _Thread_local torc_module *tl_cur; /* innermost running module */
static _Thread_local int tl_depth;
static _Thread_local int tl_annotated;

static int rec_begin(const torc_module *m) {
  recorder *r = tl_rec;
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
  int row = tl_rec ? rec_begin(m) : -1;
  /* The type's forward runs in a scope of its own, so its temporaries
   * (torc_relu(torc_add(...))) go away without a release by hand. */
  int scope = torc_scope_begin();
  if (scope < 0)
    return NULL;
  tl_depth++;
  torc_module *outer = tl_cur;
  tl_cur = m;
  int prof = atomic_load_explicit(&torc__prof_on, memory_order_relaxed);
  uint64_t t0 = prof ? torc__prof_now() : 0;
  torc_tensor *out = m->vt->forward(m, in, n_in);
  if (prof) {
    char w[160];
    torc__prof_module(m, who(m, w, sizeof w), torc__prof_now() - t0, 0);
  }
  tl_cur = outer;
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
    rec_row *r = &tl_rec->rows[row];
    r->ndim = out->ndim;
    memcpy(r->shape, out->shape, sizeof r->shape);
    r->out_bytes = torc__numel(out->shape, out->ndim) *
                   (int64_t)torc_dtype_size(out->dtype);
    r->done = 1;
  }
  return out;
}

const void *torc__current_module_ptr(void) { return tl_cur; }

const char *torc__current_module(char *buf, size_t size) {
  if (tl_cur == NULL)
    return NULL;
  return who(tl_cur, buf, size);
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

/* ---- enumeration ---- */

typedef struct nlist {
  torc_named_tensor *v;
  int n, cap;
  int oom;
} nlist;

static void nlist_add(nlist *l, const char *prefix, const char *name,
                      torc_tensor *t) {
  if (l->oom)
    return;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 32;
    torc_named_tensor *p = torc__realloc(l->v, (size_t)cap * sizeof *p);
    if (p == NULL) {
      l->oom = 1;
      return;
    }
    l->v = p;
    l->cap = cap;
  }
  size_t n = strlen(prefix) + strlen(name) + 2;
  char *s = torc__malloc(n);
  if (s == NULL) {
    l->oom = 1;
    return;
  }
  snprintf(s, n, "%s%s%s", prefix, prefix[0] ? "." : "", name);
  l->v[l->n].name = s;
  l->v[l->n].tensor = t;
  l->n++;
}

static void walk_named(const torc_module *m, const char *prefix, int params,
                       int persistent_only, nlist *l) {
  if (params)
    for (int i = 0; i < m->n_params; i++)
      nlist_add(l, prefix, m->params[i].name, m->params[i].t);
  else
    for (int i = 0; i < m->n_bufs; i++)
      if (!persistent_only || m->bufs[i].persistent)
        nlist_add(l, prefix, m->bufs[i].name, m->bufs[i].t);
  for (int i = 0; i < m->n_kids && !l->oom; i++) {
    size_t n = strlen(prefix) + strlen(m->kids[i].name) + 2;
    char *p = torc__malloc(n);
    if (p == NULL) {
      l->oom = 1;
      return;
    }
    snprintf(p, n, "%s%s%s", prefix, prefix[0] ? "." : "", m->kids[i].name);
    walk_named(m->kids[i].m, p, params, persistent_only, l);
    torc__free(p);
  }
}

static int named(const torc_module *m, int params, int persistent_only,
                 torc_named_tensor **out) {
  if (out)
    *out = NULL;
  if (m == NULL || out == NULL) {
    torc__null_input("torc_module_named_parameters");
    return -1;
  }
  nlist l = {0};
  walk_named(m, "", params, persistent_only, &l);
  if (l.oom) {
    torc_named_tensors_free(l.v, l.n);
    torc_set_error(TORC_ERR_OOM, "out of memory listing the tensors of a "
                                 "module");
    return -1;
  }
  *out = l.v;
  return l.n;
}

int torc_module_named_parameters(const torc_module *m,
                                 torc_named_tensor **out) {
  return named(m, 1, 0, out);
}

int torc_module_named_buffers(const torc_module *m, int persistent_only,
                              torc_named_tensor **out) {
  return named(m, 0, persistent_only, out);
}

void torc_named_tensors_free(torc_named_tensor *list, int n) {
  if (list == NULL)
    return;
  for (int i = 0; i < n; i++)
    torc__free(list[i].name);
  torc__free(list);
}

static void count_params(const torc_module *m, int trainable, int64_t *n) {
  for (int i = 0; i < m->n_params; i++) {
    const torc_tensor *t = m->params[i].t;
    if (!trainable || t->requires_grad)
      *n += torc__numel(t->shape, t->ndim);
  }
  for (int i = 0; i < m->n_kids; i++)
    count_params(m->kids[i].m, trainable, n);
}

int64_t torc_module_parameter_count(const torc_module *m, int trainable_only) {
  int64_t n = 0;
  if (m)
    count_params(m, trainable_only, &n);
  return n;
}

/* ---- device check, freezing ---- */

torc_status torc_module_check_device(const torc_module *m, torc_device dev) {
  if (m == NULL)
    return torc__null_input("torc_module_check_device");
  torc_named_tensor *p = NULL, *b = NULL;
  int np = torc_module_named_parameters(m, &p);
  int nb = torc_module_named_buffers(m, 0, &b);
  if (np < 0 || nb < 0) {
    torc_named_tensors_free(p, np);
    torc_named_tensors_free(b, nb);
    return torc_last_status();
  }
  char list[700] = "";
  size_t len = 0;
  int bad = 0, shown = 0;
  char dn[32], tn[32];
  torc_device_str(dev, dn, sizeof dn);
  for (int i = 0; i < np + nb; i++) {
    torc_named_tensor *e = i < np ? &p[i] : &b[i - np];
    torc_device d = e->tensor->storage->device;
    if (torc_device_eq(d, dev))
      continue;
    bad++;
    torc_device_str(d, tn, sizeof tn);
    int w = snprintf(NULL, 0, "%s%s on %s", shown ? ", " : "", e->name, tn);
    if (len + (size_t)w + 20 < sizeof list) {
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s on %s",
                              shown ? ", " : "", e->name, tn);
      shown++;
    }
  }
  torc_status st = TORC_OK;
  if (bad) {
    char more[40] = "";
    if (bad > shown)
      snprintf(more, sizeof more, " and %d more", bad - shown);
    st = torc_set_error(TORC_ERR_DEVICE,
                        "%d tensor%s of the model %s not on %s: %s%s; move "
                        "the whole model with torc_module_to(model, %s)",
                        bad, bad == 1 ? "" : "s", bad == 1 ? "is" : "are", dn,
                        list, more, dn);
  }
  torc_named_tensors_free(p, np);
  torc_named_tensors_free(b, nb);
  return st;
}

int torc_module_freeze(torc_module *m, const char *pattern, int freeze) {
  if (m == NULL || pattern == NULL) {
    torc__null_input("torc_module_freeze");
    return -1;
  }
  torc_named_tensor *p = NULL;
  int np = torc_module_named_parameters(m, &p);
  if (np < 0)
    return -1;
  int hits = 0;
  for (int i = 0; i < np; i++)
    if (fnmatch(pattern, p[i].name, 0) == 0)
      hits++;
  if (hits == 0) {
    char list[600] = "";
    size_t len = 0;
    int i = 0;
    for (; i < np && len + 60 < sizeof list; i++)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                              i ? ", " : "", p[i].name);
    if (i < np)
      snprintf(list + len, sizeof list - len, ", ... (%d in all)", np);
    torc_set_error(TORC_ERR_INVALID,
                   "torc_module_%s: pattern '%s' matches no parameter; the "
                   "parameters are: %s",
                   freeze ? "freeze" : "unfreeze", pattern,
                   np ? list : "(none)");
    torc_named_tensors_free(p, np);
    return -1;
  }
  for (int i = 0; i < np; i++)
    if (fnmatch(pattern, p[i].name, 0) == 0)
      torc_set_requires_grad(p[i].tensor, !freeze);
  torc_named_tensors_free(p, np);
  return hits;
}

/* ---- repr and summary ---- */

typedef struct sbuf {
  char *s;
  size_t n, cap;
  int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) TORC_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->oom)
    return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (w < 0)
    return;
  if (b->n + (size_t)w + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + (size_t)w + 1)
      cap *= 2;
    char *p = torc__realloc(b->s, cap);
    if (p == NULL) {
      b->oom = 1;
      return;
    }
    b->s = p;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
  va_end(ap);
  b->n += (size_t)w;
}

static char *sb_finish(sbuf *b) {
  if (b->oom || b->s == NULL) {
    torc__free(b->s);
    torc_set_error(TORC_ERR_OOM, "out of memory formatting a module");
    return NULL;
  }
  return b->s;
}

static void repr_walk(const torc_module *m, sbuf *b, int indent) {
  char extra[256] = "";
  if (TORC_HAS_SLOT(m->vt, torc_module_vtable, describe) && m->vt->describe)
    m->vt->describe(m, extra, sizeof extra);
  if (m->n_kids == 0) {
    sb_printf(b, "%s(%s)", m->type, extra);
    return;
  }
  sb_printf(b, "%s(%s%s\n", m->type, extra, extra[0] ? "," : "");
  for (int i = 0; i < m->n_kids; i++) {
    sb_printf(b, "%*s(%s): ", indent + 2, "", m->kids[i].name);
    repr_walk(m->kids[i].m, b, indent + 2);
    sb_printf(b, "\n");
  }
  sb_printf(b, "%*s)", indent, "");
}

char *torc_module_repr(const torc_module *m) {
  if (m == NULL) {
    torc__null_input("torc_module_repr");
    return NULL;
  }
  sbuf b = {0};
  repr_walk(m, &b, 0);
  return sb_finish(&b);
}

static void save_modes(torc_module *m, int *flags, int *i) {
  flags[(*i)++] = m->training;
  for (int k = 0; k < m->n_kids; k++)
    save_modes(m->kids[k].m, flags, i);
}

static void restore_modes(torc_module *m, const int *flags, int *i) {
  m->training = flags[(*i)++];
  for (int k = 0; k < m->n_kids; k++)
    restore_modes(m->kids[k].m, flags, i);
}

static int count_modules(const torc_module *m) {
  int n = 1;
  for (int k = 0; k < m->n_kids; k++)
    n += count_modules(m->kids[k].m);
  return n;
}

static void add_commas(int64_t v, char *buf, size_t size) {
  char raw[32];
  snprintf(raw, sizeof raw, "%lld", (long long)v);
  size_t n = strlen(raw), o = 0;
  for (size_t i = 0; i < n && o + 2 < size; i++) {
    if (i > 0 && (n - i) % 3 == 0 && raw[i - 1] != '-')
      buf[o++] = ',';
    buf[o++] = raw[i];
  }
  buf[o] = '\0';
}

static int64_t tensor_bytes(const torc_tensor *t) {
  return torc__numel(t->shape, t->ndim) * (int64_t)torc_dtype_size(t->dtype);
}

static void bytes_walk(const torc_module *m, int64_t *pb, int64_t *bb) {
  for (int i = 0; i < m->n_params; i++)
    *pb += tensor_bytes(m->params[i].t);
  for (int i = 0; i < m->n_bufs; i++)
    *bb += tensor_bytes(m->bufs[i].t);
  for (int i = 0; i < m->n_kids; i++)
    bytes_walk(m->kids[i].m, pb, bb);
}

char *torc_module_summary(torc_module *m, const torc_tensor *example) {
  if (m == NULL || example == NULL) {
    torc__null_input("torc_module_summary");
    return NULL;
  }
  if (tl_rec) {
    torc_set_error(TORC_ERR_INVALID, "torc_module_summary: called from "
                                     "inside a forward being summarised");
    return NULL;
  }
  int nm = count_modules(m);
  int *modes = torc__malloc((size_t)nm * sizeof *modes);
  if (modes == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory for a summary");
    return NULL;
  }
  int k = 0;
  save_modes(m, modes, &k);
  torc_module_train(m, 0);
  recorder rec = {0};
  tl_rec = &rec;
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  int scope = torc_scope_begin();
  torc_tensor *y = torc_module_forward(m, example);
  torc_scope_end(scope);
  torc_set_grad_mode(gm);
  tl_rec = NULL;
  k = 0;
  restore_modes(m, modes, &k);
  torc__free(modes);
  if (y == NULL || rec.oom) {
    if (y && rec.oom)
      torc_set_error(TORC_ERR_OOM, "out of memory for a summary");
    torc__free(rec.rows);
    return NULL;
  }

  sbuf b = {0};
  const int wname = 34, wshape = 20, wparam = 12;
  int total_w = wname + wshape + wparam + 2;
  sb_printf(&b, "%-*s %-*s %*s\n", wname, "Layer (type)", wshape,
            "Output shape", wparam, "Param #");
  for (int i = 0; i < total_w; i++)
    sb_printf(&b, "=");
  sb_printf(&b, "\n");
  int64_t act = 0;
  for (int i = 0; i < rec.n; i++) {
    const rec_row *r = &rec.rows[i];
    const torc_module *mm = r->m;
    char label[160], shape[96], pc[32];
    const char *path = torc_module_path(mm);
    if (path[0])
      snprintf(label, sizeof label, "%*s%s (%s)", 2 * r->depth, "", path,
               mm->type);
    else
      snprintf(label, sizeof label, "%*s%s", 2 * r->depth, "", mm->type);
    torc__shape_str(r->shape, r->ndim, shape, sizeof shape);
    int64_t own = 0;
    for (int j = 0; j < mm->n_params; j++)
      own += torc__numel(mm->params[j].t->shape, mm->params[j].t->ndim);
    if (mm->n_params)
      add_commas(own, pc, sizeof pc);
    else
      snprintf(pc, sizeof pc, "--");
    if (mm->n_kids == 0)
      act += r->out_bytes;
    sb_printf(&b, "%-*s %-*s %*s\n", wname, label, wshape,
              r->done ? shape : "?", wparam, pc);
  }
  for (int i = 0; i < total_w; i++)
    sb_printf(&b, "=");
  sb_printf(&b, "\n");
  int64_t total = torc_module_parameter_count(m, 0);
  int64_t train = torc_module_parameter_count(m, 1);
  int64_t pbytes = 0, bbytes = 0;
  bytes_walk(m, &pbytes, &bbytes);
  int64_t in_bytes = tensor_bytes(example);
  char t1[32], t2[32], t3[32];
  add_commas(total, t1, sizeof t1);
  add_commas(train, t2, sizeof t2);
  add_commas(total - train, t3, sizeof t3);
  const double mb = 1024.0 * 1024.0;
  sb_printf(&b, "Total params: %s\nTrainable params: %s\n"
                "Non-trainable params: %s\n",
            t1, t2, t3);
  sb_printf(&b, "Input size (MB): %.2f\n", in_bytes / mb);
  sb_printf(&b, "Forward pass size (MB): %.2f\n", act / mb);
  sb_printf(&b, "Params size (MB): %.2f\n", pbytes / mb);
  sb_printf(&b, "Buffers size (MB): %.2f\n", bbytes / mb);
  sb_printf(&b, "Estimated total size (MB): %.2f\n",
            (in_bytes + act + pbytes + bbytes) / mb);
  torc__free(rec.rows);
  return sb_finish(&b);
}

/* ---- containers ---- */

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
   * next[] of it, ..., -1; each output is checked once, at its last
   * reader, so a forward of n children costs O(n) here. */
  int *first = torc__malloc((size_t)n * sizeof *first);
  int *next = torc__malloc((size_t)n * sizeof *next);
  if (outs == NULL || last == NULL || first == NULL || next == NULL) {
    torc__free(outs), torc__free(last), torc__free(first), torc__free(next);
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
      next[k] = first[last[k]];
      first[last[k]] = k;
    }
  const torc_tensor *x = in[0];
  torc_tensor *y = NULL;
  for (int i = 0; i < n; i++) {
    torc_module *c = m->kids[i].m;
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
    for (int k = first[i]; k >= 0; k = next[k])
      if (work++, outs[k]) {
        torc_release(outs[k]);
        outs[k] = NULL;
      }
  }
  /* y (outs[n - 1] when all ran) goes to the caller; the rest is freed,
   * by index: an identity child returns its input, a second reference. */
  for (int k = 0; k < n; k++)
    if (outs[k] && !(y && k == n - 1))
      torc_release(outs[k]);
  torc__free(outs), torc__free(last), torc__free(first), torc__free(next);
  return y ? torc__ret(y) : NULL;
}

static int sequential_describe(const torc_module *m, char *buf, size_t size) {
  (void)m;
  if (size)
    buf[0] = '\0';
  return 0;
}

static const torc_module_vtable sequential_vt = {
    sizeof(torc_module_vtable), sequential_forward, NULL, sequential_describe};
static const torc_module_vtable list_vt = {sizeof(torc_module_vtable), NULL,
                                           NULL, NULL};

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
      module_destroy(child);
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
        module_destroy(child);
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

static const torc_module_vtable add_vt = {sizeof(torc_module_vtable),
                                          add_forward, NULL, add_describe};

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

/* ---- the type registry ---- */

static torc__oreg module_reg =
    TORC__OREG_INIT("module type", "torc_module_type_register",
                    "the core or the program");
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

/* Parses an integer key's value; 0, or -1 after setting an error. */
static int parse_int_key(const char *key, const char *v, long long *out,
                         const char *type) {
  char *end;
  long long x = strtoll(v, &end, 10);
  if (end == v || *end != '\0') {
    torc_set_error(TORC_ERR_INVALID, "%s: key '%s' = '%s' is not an integer",
                   type, key, v);
    return -1;
  }
  *out = x;
  return 0;
}

static const char *kv(const char *const *k, const char *const *v, int n,
                      const char *key) {
  for (int i = 0; i < n; i++)
    if (strcmp(k[i], key) == 0)
      return v[i];
  return NULL;
}

static torc_module *create_container(const char *const *k,
                                     const char *const *v, int n,
                                     void *user) {
  (void)k, (void)v, (void)n;
  int kind = (int)(intptr_t)user;
  if (kind == KIND_SEQUENTIAL)
    return torc_sequential_new();
  if (kind == KIND_LIST)
    return torc_module_list_new();
  return torc_module_dict_new();
}

static torc_module *create_skip(const char *const *k, const char *const *v,
                                int n, void *user) {
  int kind = (int)(intptr_t)user;
  const char *type = kind == KIND_ADD ? "add" : "concat";
  long long from = 0, dim = 1;
  if (parse_int_key("from", kv(k, v, n, "from"), &from, type))
    return NULL;
  if (from >= 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: key 'from' = %lld must be negative (-1 is the layer "
                   "just before, -2 the one before it, ...)",
                   type, from);
    return NULL;
  }
  if (kind == KIND_CONCAT &&
      parse_int_key("dim", kv(k, v, n, "dim"), &dim, type))
    return NULL;
  return kind == KIND_ADD ? torc_add_node_new((int)from)
                          : torc_concat_node_new((int)from, (int)dim);
}

static const torc_module_key no_keys[] = {{NULL, NULL, NULL}};
static const torc_module_key add_keys[] = {
    {"from", "the earlier layer to add, as a negative offset (-2, -6, ...)",
     NULL},
    {NULL, NULL, NULL}};
static const torc_module_key concat_keys[] = {
    {"from", "the earlier layer to join, as a negative offset", NULL},
    {"dim", "the dim to concatenate along (1 = channels)", "1"},
    {NULL, NULL, NULL}};

static const torc_module_type core_types[] = {
    {sizeof(torc_module_type), "sequential",
     "layers run in order (nn.Sequential)", no_keys, create_container,
     (void *)(intptr_t)KIND_SEQUENTIAL},
    {sizeof(torc_module_type), "module_list",
     "a list of modules without forward (nn.ModuleList)", no_keys,
     create_container, (void *)(intptr_t)KIND_LIST},
    {sizeof(torc_module_type), "module_dict",
     "named modules without forward (nn.ModuleDict)", no_keys,
     create_container, (void *)(intptr_t)KIND_DICT},
    {sizeof(torc_module_type), "add",
     "adds an earlier layer's output to the input (residual connection)",
     add_keys, create_skip, (void *)(intptr_t)KIND_ADD},
    {sizeof(torc_module_type), "concat",
     "joins an earlier layer's output to the input along a dim", concat_keys,
     create_skip, (void *)(intptr_t)KIND_CONCAT},
};

static torc_status reg_add(struct torc__plugin *owner,
                           const torc_module_type *t) {
  if (t == NULL || t->name == NULL || t->create == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_module_type_register: the "
                                         "type, its name and create are "
                                         "required");
  if (t->struct_size < offsetof(torc_module_type, user))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_module_type_register: type '%s' has "
                          "struct_size %zu; set it to "
                          "sizeof(torc_module_type)",
                          t->name, t->struct_size);
  return torc__oreg_add(&module_reg, owner, t, t->name);
}

static void register_builtins(void) {
  for (size_t i = 0; i < sizeof core_types / sizeof core_types[0]; i++)
    reg_add(NULL, &core_types[i]);
  for (int i = 0; torc__builtin_module_types[i]; i++)
    reg_add(NULL, torc__builtin_module_types[i]);
}

/* The registry, with the built-in types in it. */
static torc__oreg *registry(void) {
  pthread_once(&builtins_once, register_builtins);
  return &module_reg;
}

torc_status torc__module_type_register_owned(struct torc__plugin *owner,
                                             const torc_module_type *type) {
  registry();
  return reg_add(owner, type);
}

torc_status torc_module_type_register(const torc_module_type *type) {
  return torc__module_type_register_owned(NULL, type);
}

void torc__module_types_unregister_owner(struct torc__plugin *owner) {
  torc__oreg_remove_owner(&module_reg, owner);
}

const torc_module_type *torc_module_type_find(const char *name) {
  return torc__oreg_find(registry(), name);
}

int torc_module_type_count(void) { return torc__oreg_count(registry()); }

const torc_module_type *torc_module_type_at(int i) {
  return torc__oreg_at(registry(), i);
}

torc_module *torc_module_create(const char *type, const char *const *keys,
                                const char *const *values, int n) {
  if (type == NULL || (n > 0 && (keys == NULL || values == NULL)) || n < 0) {
    torc_set_error(TORC_ERR_NULL, "torc_module_create: the type name (and "
                                  "the key and value arrays when n > 0) "
                                  "are required");
    return NULL;
  }
  const torc_module_type *t = torc__oreg_lookup(registry(), type, "module");
  if (t == NULL)
    return NULL;
  int nk = torc__keys_count(t->keys);
  const char **kk = torc__calloc((size_t)nk + 1, sizeof *kk);
  const char **vv = torc__calloc((size_t)nk + 1, sizeof *vv);
  torc_status st = kk && vv ? TORC_OK
                            : torc_set_error(TORC_ERR_OOM,
                                             "out of memory building a '%s'",
                                             type);
  if (st == TORC_OK)
    st = torc__keys_resolve(type, t->keys, NULL, keys, values, n, NULL, vv);
  torc_module *m = NULL;
  if (st == TORC_OK) {
    for (int j = 0; j < nk; j++)
      kk[j] = t->keys[j].name;
    torc_clear_error();
    m = t->create(kk, vv, nk, t->user);
    if (m == NULL && torc_last_status() == TORC_OK)
      torc_set_error(TORC_ERR_INVALID, "%s: the type's create failed "
                                       "without saying why",
                     type);
  }
  torc__free(kk), torc__free(vv);
  return m;
}

torc_module *torc_module_build(const char *type, const char *spec) {
  torc__spec sp;
  torc_status st = torc__spec_split(&sp, type ? type : "module", spec);
  torc_module *m = st ? NULL : torc_module_create(type, sp.k, sp.v, sp.n);
  torc__spec_free(&sp);
  return m;
}
