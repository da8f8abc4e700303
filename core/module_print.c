/* core/module_print.c — describing a module tree: the repr PyTorch prints
 * and the torchsummary-style table of output shapes and parameter counts
 * (torc/module.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_internal.h"
#include "torc/autograd.h"

typedef torc__summary_row rec_row;
typedef torc__summary recorder;

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
  if (torc__summary_on) {
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
  torc__summary_on = &rec;
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  int scope = torc_scope_begin();
  torc_tensor *y = torc_module_forward(m, example);
  torc_scope_end(scope);
  torc_set_grad_mode(gm);
  torc__summary_on = NULL;
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
