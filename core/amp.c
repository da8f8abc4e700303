/* core/amp.c — autocast (torch.autocast): a thread's stack of regions,
 * the op policy and the cast of each op's inputs, with the parameters'
 * casts cached within a region.
 *
 * The policy is PyTorch's, for every device: the ops whose work is
 * products (matmul, linear, the convolutions, attention, the recurrent
 * cells) run in the region's dtype; the ops that need range or accuracy
 * (exp, log, pow, softmax, log_softmax, the norms, the losses, the
 * reductions that sum) run in f32; the rest follow their inputs, whose
 * type promotion puts a bf16 and an f32 operand into f32. An op's public
 * function asks torc__autocast_inputs for its inputs and releases them
 * with torc__autocast_done; a cast is a tracked copy, so autograd hands
 * the gradient back in the input's dtype.
 */
#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#include "internal.h"
#include "torc/amp.h"

#define AC_MAX_DEPTH 64

/* A parameter's cast: src (a reference) at storage version `version`,
 * made with grad mode `grad` (a cast made under no-grad carries no
 * gradient and is not reused in grad mode, nor the other way). */
typedef struct ac_entry {
  torc_tensor *src, *cast;
  uint64_t version;
  int grad;
} ac_entry;

_Thread_local torc_dtype torc__autocast_tl = TORC_F32;
static _Thread_local int tl_depth;
static _Thread_local torc_dtype tl_stack[AC_MAX_DEPTH];
static _Thread_local ac_entry *tl_cache;
static _Thread_local int tl_n_cache, tl_cap_cache;

static void cache_clear(void) {
  for (int i = 0; i < tl_n_cache; i++) {
    torc_release(tl_cache[i].src);
    torc_release(tl_cache[i].cast);
  }
  torc__free(tl_cache);
  tl_cache = NULL;
  tl_n_cache = tl_cap_cache = 0;
}

torc_status torc_autocast_begin(torc_dtype dtype) {
  if (dtype != TORC_BF16 && dtype != TORC_F16 && dtype != TORC_F32)
    return torc_set_error(
        TORC_ERR_INVALID,
        "torc_autocast_begin: dtype %s; autocast runs in TORC_BF16 or "
        "TORC_F16, and TORC_F32 turns it off inside a region",
        torc_dtype_valid(dtype) ? torc_dtype_name(dtype) : "(invalid)");
  if (tl_depth == AC_MAX_DEPTH)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_autocast_begin: %d regions are open, the "
                          "most that nest; end one with torc_autocast_end "
                          "(a begin without its end?)",
                          AC_MAX_DEPTH);
  tl_stack[tl_depth++] = torc__autocast_tl;
  torc__autocast_tl = dtype;
  return TORC_OK;
}

torc_status torc_autocast_end(void) {
  if (tl_depth == 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_autocast_end: no autocast region is open on "
                          "this thread; each torc_autocast_begin takes one "
                          "end");
  torc__autocast_tl = tl_stack[--tl_depth];
  if (tl_depth == 0)
    cache_clear();
  return TORC_OK;
}

torc_dtype torc_autocast_dtype(void) { return torc__autocast_tl; }

int torc__autocast_suspend(void) {
  int was = (int)torc__autocast_tl;
  torc__autocast_tl = TORC_F32;
  return was;
}

void torc__autocast_resume(int was) { torc__autocast_tl = (torc_dtype)was; }

/* ---- the policy ---- */

static const char *const lower_ops[] = {
    "matmul",          "linear",
    "linear_act",      "conv1d",
    "conv2d",          "conv3d",
    "conv_transpose2d", "conv2d_act",
    "scaled_dot_product_attention", "prelu",
    NULL};

static const char *const f32_ops[] = {
    "exp",          "log",        "log1p",      "pow",
    "reciprocal",   "rsqrt",      "softplus",   "sum",
    "mean",         "prod",       "cumsum",     "var",
    "std",          "logsumexp",  "norm",       "foreach_norm",
    "softmax",      "log_softmax", "cross_entropy", "loss",
    "layer_norm",   "group_norm", "lstm_cell",
    "gru_cell",     NULL};

static int in_list(const char *const *l, const char *name) {
  for (; *l; l++)
    if (strcmp(*l, name) == 0)
      return 1;
  return 0;
}

torc_autocast_cast torc_autocast_policy(const char *name) {
  if (name == NULL)
    return TORC_AUTOCAST_FOLLOW;
  if (strncmp(name, "torc_", 5) == 0)
    name += 5;
  if (in_list(lower_ops, name))
    return TORC_AUTOCAST_LOWER;
  if (in_list(f32_ops, name))
    return TORC_AUTOCAST_F32;
  return TORC_AUTOCAST_FOLLOW;
}

/* The policy of each op of the table, by id. */
static unsigned char op_policy[TORC__OP_COUNT];
static pthread_once_t op_policy_once = PTHREAD_ONCE_INIT;

static void op_policy_init(void) {
  for (int i = 0; i < TORC__OP_COUNT; i++)
    op_policy[i] = (unsigned char)torc_autocast_policy(torc__ops[i].name);
}

int torc__autocast_op_policy(int op) {
  pthread_once(&op_policy_once, op_policy_init);
  return op >= 0 && op < TORC__OP_COUNT ? op_policy[op] : 0;
}

/* ---- the casts ---- */

/* A tracked cast of t to dt: from the cache for a parameter (a leaf that
 * requires grad) that has not changed since, else new (and cached for a
 * parameter). A new reference, or NULL with the error set. */
static torc_tensor *cast_arg(const torc_tensor *t, torc_dtype dt) {
  int param = t->requires_grad && t->grad_fn == NULL && !t->is_view;
  int grad = torc_get_grad_mode() == TORC_GRAD_ENABLED;
  uint64_t ver = atomic_load(&t->storage->version);
  ac_entry *e = NULL;
  if (param)
    for (int i = 0; i < tl_n_cache; i++)
      if (tl_cache[i].src == t && tl_cache[i].cast->dtype == dt) {
        e = &tl_cache[i];
        break;
      }
  if (e && e->version == ver && e->grad == grad)
    return torc_retain(e->cast);
  torc_tensor *c =
      torc__record_view(torc__cast(t, dt), t, TORC__VIEW_IDENTITY, NULL, 0);
  if (c == NULL || !param)
    return c;
  if (e == NULL) {
    if (tl_n_cache == tl_cap_cache) {
      int cap = tl_cap_cache ? 2 * tl_cap_cache : 32;
      ac_entry *n = torc__realloc(tl_cache, (size_t)cap * sizeof *n);
      if (n == NULL)
        return c; /* not cached: the next op casts again */
      tl_cache = n, tl_cap_cache = cap;
    }
    e = &tl_cache[tl_n_cache++];
    e->src = torc_retain((torc_tensor *)t);
  } else {
    torc_release(e->cast);
  }
  e->cast = torc_retain(c);
  e->version = ver;
  e->grad = grad;
  return c;
}

torc_status torc__autocast_inputs(torc__ac *ac, int policy,
                                  const torc_tensor **in, int n) {
  ac->n = 0;
  torc_dtype low = torc__autocast_tl;
  if (low == TORC_F32 || policy == TORC_AUTOCAST_FOLLOW)
    return TORC_OK;
  for (int i = 0; i < n; i++) {
    const torc_tensor *t = in[i];
    if (t == NULL || !torc_dtype_is_float(t->dtype) || t->dtype == TORC_F64)
      continue;
    torc_dtype to = policy == TORC_AUTOCAST_LOWER ? low : TORC_F32;
    if (t->dtype == to)
      continue;
    if (ac->n == TORC__AC_MAX) {
      torc__autocast_done(ac);
      return torc_set_error(TORC_ERR_INVALID,
                            "autocast: an op with more than %d inputs to "
                            "cast",
                            TORC__AC_MAX);
    }
    torc_tensor *c = cast_arg(t, to);
    if (c == NULL) {
      torc__autocast_done(ac);
      return torc_last_status();
    }
    ac->held[ac->n++] = c;
    in[i] = c;
  }
  return TORC_OK;
}

void torc__autocast_done(torc__ac *ac) {
  for (int i = 0; i < ac->n; i++)
    torc_release(ac->held[i]);
  ac->n = 0;
}

torc_status torc__autocast_args(torc__ac *ac, int policy, ...) {
  const torc_tensor **slot[TORC__AC_MAX];
  const torc_tensor *in[TORC__AC_MAX];
  int n = 0;
  va_list ap;
  va_start(ap, policy);
  for (const torc_tensor **p; (p = va_arg(ap, const torc_tensor **));)
    if (n < TORC__AC_MAX)
      slot[n] = p, in[n] = *p, n++;
  va_end(ap);
  torc_status st = torc__autocast_inputs(ac, policy, in, n);
  if (st == TORC_OK)
    for (int i = 0; i < n; i++)
      *slot[i] = in[i];
  return st;
}
