/* tools/conformance.c — the backend conformance suite's runner (DESIGN
 * §13): each row of the table (conformance_ops.c) x dtype x input variant
 * runs on the device under test and on the cpu (ref), outputs and
 * gradients compared, plus a gradcheck in f64 on the device for every
 * differentiable op.
 *
 * Oracle: every non-cpu device type is compared with cpu, whose kernels
 * ref serves. Future work: a fast cpu plugin registers for "cpu" too, so
 * certifying it needs ref's kernels reachable under another name (or a
 * "run with provider" switch); today `torc test-backend` only checks the
 * non-cpu device types a plugin registers.
 *
 * Tolerances: integers and bool must be equal. Floats pass when
 * |dev - cpu| <= atol + rtol |cpu| with (atol, rtol) = (1e-12, 1e-10) for
 * f64, (1e-5, 1e-5) for f32, (1e-2, 1e-2) for f16, (2e-2, 2e-2) for bf16:
 * a backend may sum in another order or use its own transcendental
 * functions, which moves f32 results by a few ulps on these small inputs
 * (at most 12 elements summed), and f16/bf16 by about one ulp of their
 * 11/8-bit mantissas. NaN equals NaN, an infinity equals the same one.
 */
#include "conformance.h"
#include "conformance_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

static const char *const variant_names[V_COUNT] = {
    "contiguous", "non-contiguous", "broadcast", "empty", "size-1"};

static const torc_dtype dtypes[] = {TORC_F32, TORC_F64,  TORC_F16, TORC_BF16,
                                    TORC_I32, TORC_I64,  TORC_U8,  TORC_BOOL};

/* ---- building inputs ---- */

static int is_float(torc_dtype dt) {
  return dt == TORC_F32 || dt == TORC_F64 || dt == TORC_F16 ||
         dt == TORC_BF16;
}

static int64_t shape_numel(const int64_t *s, int nd) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    n *= s[i];
  return n;
}

/* Value i of operand k: distinct within an operand (7 is prime to 17, and
 * operands hold at most 17 elements... or repeat harmlessly beyond), never
 * 0 for floats, the two operands of a binary op never tied. */
static double value(int kind, torc_dtype dt, int k, int64_t i, int64_t range) {
  int64_t m = (i * 7 + k * 5 + 3) % 17;
  switch (kind) {
  case O_INDEX:
    return (double)((i * 5 + k + 1) % (range > 0 ? range : 1));
  case O_BOOL:
    return (double)((i * 3 + 1) % 2);
  case O_POS:
  case O_CONST:
    if (is_float(dt))
      return 0.5 + (double)m * 0.25 + 0.05 * k;
    return dt == TORC_BOOL ? 1.0 : (double)(1 + m % 5);
  default:
    if (is_float(dt))
      return (double)(m - 8) * 0.25 + 0.1 * (k + 1);
    if (dt == TORC_BOOL)
      return (double)((i + k) % 2);
    return dt == TORC_U8 ? (double)m : (double)(m - 8);
  }
}

/* A contiguous cpu tensor of shape s with operand k's values. */
static torc_tensor *make_base(int kind, torc_dtype dt, int k, const int64_t *s,
                              int nd, int64_t range) {
  int64_t n = shape_numel(s, nd);
  double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  if (v == NULL)
    return NULL;
  for (int64_t i = 0; i < n; i++)
    v[i] = value(kind, dt, k, i, range);
  torc_tensor *t = torc_from_host(v, s, nd, TORC_F64, TORC_CPU);
  free(v);
  torc_dtype want = kind == O_INDEX ? TORC_I64
                    : kind == O_BOOL ? TORC_BOOL
                                     : dt;
  return t ? torc_to_dtype(t, want) : NULL;
}

/* ---- comparing ---- */

static double *host_f64(const torc_tensor *t, int64_t *n) {
  torc_tensor *c = torc_to(t, TORC_CPU);
  c = c ? torc_to_dtype(c, TORC_F64) : NULL;
  c = c ? torc_contiguous(c) : NULL;
  if (c == NULL)
    return NULL;
  *n = torc_numel(c);
  double *v = malloc(sizeof *v * (size_t)(*n ? *n : 1));
  if (v && torc_to_host(c, v, sizeof *v * (size_t)*n) != TORC_OK) {
    free(v);
    return NULL;
  }
  return v;
}

static void tolerance(torc_dtype dt, double *atol, double *rtol) {
  switch (dt) {
  case TORC_F64:
    *atol = 1e-12, *rtol = 1e-10;
    break;
  case TORC_F32:
    *atol = 1e-5, *rtol = 1e-5;
    break;
  case TORC_F16:
    *atol = 1e-2, *rtol = 1e-2;
    break;
  case TORC_BF16:
    *atol = 2e-2, *rtol = 2e-2;
    break;
  default:
    *atol = 0, *rtol = 0;
  }
}

/* Compares device tensor d with cpu tensor c; 0 if equal within the
 * tolerance of their dtype. *dev receives the largest |d - c|; why, a
 * message on mismatch. */
static int compare(const torc_tensor *d, const torc_tensor *c, double *dev,
                   char *why, size_t size) {
  *dev = 0;
  if (torc_dtype_of(d) != torc_dtype_of(c)) {
    snprintf(why, size, "dtype %s, cpu gives %s",
             torc_dtype_name(torc_dtype_of(d)),
             torc_dtype_name(torc_dtype_of(c)));
    return 1;
  }
  int same = torc_ndim(d) == torc_ndim(c);
  for (int i = 0; same && i < torc_ndim(d); i++)
    same = torc_size(d, i) == torc_size(c, i);
  if (!same) {
    char a[128], b[128];
    torc_describe(d, a, sizeof a), torc_describe(c, b, sizeof b);
    snprintf(why, size, "shape differs: %s, cpu gives %s", a, b);
    return 1;
  }
  int64_t nd = 0, nc = 0;
  double *vd = host_f64(d, &nd), *vc = host_f64(c, &nc);
  if (vd == NULL || vc == NULL || nd != nc) {
    snprintf(why, size, "cannot read the result back: %s", torc_last_error());
    free(vd), free(vc);
    return 1;
  }
  double atol, rtol;
  tolerance(torc_dtype_of(c), &atol, &rtol);
  int bad = 0;
  for (int64_t i = 0; i < nd; i++) {
    double a = vd[i], b = vc[i];
    if ((isnan(a) && isnan(b)) || a == b)
      continue;
    double e = fabs(a - b);
    if (isnan(e) || isinf(e))
      e = INFINITY;
    if (e > *dev)
      *dev = e;
    if (!(e <= atol + rtol * fabs(b)) && !bad) {
      bad = 1;
      snprintf(why, size, "element %lld: %.9g, cpu gives %.9g", (long long)i,
               a, b);
    }
  }
  free(vd), free(vc);
  return bad;
}

/* ---- running ---- */

typedef struct suite {
  const char *type;
  torc_device dev;
  int verbose;
  FILE *out;
  torc_conformance_result *res;
  const char *pin; /* a cpu provider certified against ref, or NULL */
  /* Per row: bit d set when dtypes[d] had no kernel forward; LACK_BACKWARD
   * when the backward or the gradcheck had none. */
  uint32_t *lacks;
} suite;

#define LACK_BACKWARD (1u << 31)

/* The dispatcher's provider pin (core/dispatch.c; exported for tools). */
TORC_API void torc__dispatch_pin(const char *provider);

/* Before a reference computation: ref's kernels; before the candidate's:
 * the pinned provider's (no-ops when no provider is pinned). */
static void as_reference(const suite *s) {
  if (s->pin)
    torc__dispatch_pin("ref");
}
static void as_candidate(const suite *s) {
  if (s->pin)
    torc__dispatch_pin(s->pin);
}
static void unpin(const suite *s) {
  if (s->pin)
    torc__dispatch_pin(NULL);
}

static void report(suite *s, int verdict, const char *op, const char *dtype,
                   const char *variant, const char *what, double dev,
                   const char *why) {
  static const char *const names[] = {"PASS", "FAIL", "SKIP"};
  if (verdict == 0)
    s->res->passed++;
  else if (verdict == 1)
    s->res->failed++;
  else
    s->res->skipped++;
  if (!s->verbose && verdict != 1)
    return;
  if (verdict == 2)
    fprintf(s->out, "SKIP: %s %s %s on %s (%s): %s\n", op, dtype, variant,
            s->type, what, why);
  else
    fprintf(s->out, "%s: %s %s %s on %s (%s): max deviation %.3g%s%s\n",
            names[verdict], op, dtype, variant, s->type, what, dev,
            why && *why ? "; " : "", why ? why : "");
}

/* First line of the last error, short enough for one report line. */
static void last_error(char *buf, size_t size) {
  snprintf(buf, size, "%s", torc_last_error());
  char *nl = strchr(buf, '\n');
  if (nl)
    *nl = '\0';
}

/* The operands of a case on one device: bases (leaves) and the views the
 * op receives. */
static int build_inputs(const op_row *r, torc_dtype dt, int variant,
                        const shapes *sh, torc_device dev, int grad,
                        torc_tensor **base, torc_tensor **in) {
  for (int k = 0; k < r->n_in; k++) {
    int64_t s[MAXD];
    int nd = sh->nd[k];
    memcpy(s, sh->s[k], sizeof s);
    int transpose = variant == V_NONCONTIG && nd >= 2;
    if (transpose) {
      int64_t t = s[nd - 1];
      s[nd - 1] = s[nd - 2], s[nd - 2] = t;
    }
    torc_tensor *b = make_base(r->kind[k], dt, k, s, nd, r->index_range);
    if (b && !torc_device_eq(dev, TORC_CPU))
      b = torc_to(b, dev);
    if (b == NULL)
      return -1;
    if (grad && is_float(torc_dtype_of(b)) && r->kind[k] != O_CONST &&
        torc_set_requires_grad(b, 1) != TORC_OK)
      return -1;
    torc_tensor *v = b;
    if (transpose)
      v = torc_transpose(v, nd - 2, nd - 1);
    if (v && sh->exp_nd[k] > 0)
      v = torc_expand(v, sh->exp[k], sh->exp_nd[k]);
    if (v == NULL)
      return -1;
    base[k] = b;
    in[k] = v;
  }
  return 0;
}

/* sum(out * w) with fixed weights w, backward; 0 or a status. */
static torc_status backward_weighted(torc_tensor *out) {
  int64_t n = torc_numel(out);
  double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  if (v == NULL)
    return TORC_ERR_OOM;
  for (int64_t i = 0; i < n; i++)
    v[i] = 0.5 + (double)((i * 3) % 7) * 0.25;
  torc_tensor *w =
      torc_from_host(v, torc_shape(out), torc_ndim(out), TORC_F64, TORC_CPU);
  free(v);
  w = w ? torc_to_dtype(w, torc_dtype_of(out)) : NULL;
  w = w ? torc_to(w, torc_device_of(out)) : NULL;
  torc_tensor *loss = w ? torc_sum(torc_mul(out, w), NULL, 0, 0) : NULL;
  if (loss == NULL)
    return torc_last_status();
  return torc_backward(loss, NULL, 0);
}

/* Records a case skipped for want of a kernel, for the summary. */
static void note_lack(suite *s, const op_row *r, torc_dtype dt, int backward) {
  uint32_t bit = LACK_BACKWARD;
  if (backward && (s->lacks[r - conf_rows] & 1u << 1) && dt == TORC_F64)
    return; /* gradcheck in f64 where the forward has no f64 kernel */
  if (!backward)
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
      if (dtypes[d] == dt)
        bit = 1u << d;
  s->lacks[r - conf_rows] |= bit;
}

/* The summary's second line: the ops whose cases were skipped because the
 * backend has no kernel for them, each with the dtypes it lacks. */
static void print_lacks(const suite *s) {
  int n = 0;
  for (size_t i = 0; i < conf_n_rows; i++)
    n += s->lacks[i] != 0;
  if (n == 0)
    return;
  fprintf(s->out, "ops with no kernel on %s (%d; their cases are skipped):",
          s->pin ? s->pin : s->type, n);
  const char *sep = " ";
  for (size_t i = 0; i < conf_n_rows; i++) {
    if (s->lacks[i] == 0)
      continue;
    fprintf(s->out, "%s%s (", sep, conf_rows[i].name);
    const char *dsep = "";
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
      if (s->lacks[i] & (1u << d)) {
        fprintf(s->out, "%s%s", dsep, torc_dtype_name(dtypes[d]));
        dsep = ", ";
      }
    if (s->lacks[i] & LACK_BACKWARD)
      fprintf(s->out, "%sbackward", dsep);
    fputc(')', s->out);
    sep = ", ";
  }
  fputc('\n', s->out);
}

static void run_case(suite *s, const op_row *r, torc_dtype dt, int variant) {
  const char *dname = torc_dtype_name(dt), *vname = variant_names[variant];
  shapes sh;
  memset(&sh, 0, sizeof sh);
  if (!r->shape(variant, r->n_in, &sh))
    return; /* the variant does not apply to this op's inputs */
  int grad = r->diff && is_float(dt);
  char msg_c[512], msg_d[512], why[600];
  int scope = torc_scope_begin();
  torc_tensor *base_c[MAXIN] = {0}, *base_d[MAXIN] = {0};
  torc_tensor *in_c[MAXIN] = {0}, *in_d[MAXIN] = {0};
  if (build_inputs(r, dt, variant, &sh, TORC_CPU, grad, base_c, in_c) ||
      build_inputs(r, dt, variant, &sh, s->dev, grad, base_d, in_d)) {
    last_error(msg_d, sizeof msg_d);
    snprintf(why, sizeof why, "cannot build the inputs: %s", msg_d);
    report(s, 1, r->name, dname, vname, "forward", 0, why);
    torc_scope_end(scope);
    return;
  }
  torc_clear_error();
  as_reference(s);
  torc_tensor *out_c = r->call(in_c);
  torc_status st_c = out_c ? TORC_OK : torc_last_status();
  last_error(msg_c, sizeof msg_c);
  torc_clear_error();
  as_candidate(s);
  torc_tensor *out_d = r->call(in_d);
  unpin(s);
  torc_status st_d = out_d ? TORC_OK : torc_last_status();
  last_error(msg_d, sizeof msg_d);

  if (st_c != TORC_OK && st_d != TORC_OK) {
    snprintf(why, sizeof why, "not defined here (cpu ref refuses too: %s)",
             msg_c);
    report(s, 2, r->name, dname, vname, "forward", 0, why);
  } else if (st_c != TORC_OK) {
    snprintf(why, sizeof why, "succeeds where cpu ref refuses: %s", msg_c);
    report(s, 1, r->name, dname, vname, "forward", 0, why);
  } else if (st_d == TORC_ERR_NO_KERNEL) {
    snprintf(why, sizeof why, "no kernel: %s", msg_d);
    report(s, 2, r->name, dname, vname, "forward", 0, why);
    note_lack(s, r, dt, 0);
  } else if (st_d != TORC_OK) {
    snprintf(why, sizeof why, "%s: %s", torc_status_name(st_d), msg_d);
    report(s, 1, r->name, dname, vname, "forward", 0, why);
  } else {
    double dev = 0;
    why[0] = '\0';
    int bad = compare(out_d, out_c, &dev, why, sizeof why);
    if (!bad && !torc_device_eq(torc_device_of(out_d), s->dev)) {
      char a[64];
      snprintf(why, sizeof why, "the result is on %s, not on the device",
               torc_device_str(torc_device_of(out_d), a, sizeof a));
      bad = 1;
    }
    report(s, bad, r->name, dname, vname, "forward", dev, why);
    if (!bad && grad && torc_requires_grad(out_c)) {
      as_reference(s);
      torc_status bc = backward_weighted(out_c);
      last_error(msg_c, sizeof msg_c);
      as_candidate(s);
      torc_status bd = bc == TORC_OK ? backward_weighted(out_d) : TORC_OK;
      unpin(s);
      last_error(msg_d, sizeof msg_d);
      if (bc != TORC_OK) {
        snprintf(why, sizeof why, "backward fails on cpu ref too: %s", msg_c);
        report(s, 2, r->name, dname, vname, "backward", 0, why);
      } else if (bd == TORC_ERR_NO_KERNEL) {
        snprintf(why, sizeof why, "no kernel: %s", msg_d);
        report(s, 2, r->name, dname, vname, "backward", 0, why);
        note_lack(s, r, dt, 1);
      } else if (bd != TORC_OK) {
        snprintf(why, sizeof why, "%s: %s", torc_status_name(bd), msg_d);
        report(s, 1, r->name, dname, vname, "backward", 0, why);
      } else {
        double worst = 0;
        int gbad = 0;
        why[0] = '\0';
        for (int k = 0; k < r->n_in && !gbad; k++) {
          torc_tensor *gc = torc_grad_of(base_c[k]);
          torc_tensor *gd = torc_grad_of(base_d[k]);
          if ((gc == NULL) != (gd == NULL)) {
            snprintf(why, sizeof why, "input %d: gradient %s on the device",
                     k, gd ? "present" : "missing");
            gbad = 1;
          } else if (gc) {
            double e = 0;
            char w2[500];
            gbad = compare(gd, gc, &e, w2, sizeof w2);
            if (gbad)
              snprintf(why, sizeof why, "gradient of input %d: %s", k, w2);
            if (e > worst)
              worst = e;
          }
        }
        report(s, gbad, r->name, dname, vname, "backward", worst, why);
      }
    }
  }
  torc_scope_end(scope);
  torc_clear_error();
}

/* gradcheck's function: the row's call, its temporaries released. */
static torc_tensor *gc_call(torc_tensor *const *in, int n, void *user) {
  (void)n;
  const op_row *r = user;
  int scope = torc_scope_begin();
  torc_tensor *out = r->call(in);
  if (out)
    out = torc_scope_keep(out);
  torc_scope_end(scope);
  return out;
}

static void run_gradcheck(suite *s, const op_row *r) {
  shapes sh;
  memset(&sh, 0, sizeof sh);
  r->shape(V_CONTIG, r->n_in, &sh);
  torc_tensor *base[MAXIN] = {0}, *in[MAXIN] = {0};
  char msg[512], why[600];
  int scope = torc_scope_begin();
  int st = build_inputs(r, TORC_F64, V_CONTIG, &sh, s->dev, 0, base, in);
  for (int k = 0; st == 0 && k < r->n_in; k++) {
    in[k] = torc_scope_keep(base[k]);
    if (r->kind[k] != O_INDEX && r->kind[k] != O_BOOL &&
        r->kind[k] != O_CONST &&
        torc_set_requires_grad(in[k], 1) != TORC_OK)
      st = -1;
  }
  torc_scope_end(scope);
  if (st == 0) {
    torc_clear_error();
    as_candidate(s);
    torc_status gs = torc_gradcheck(gc_call, (void *)r, in, r->n_in, 1e-6,
                                    1e-7, 1e-5);
    unpin(s);
    last_error(msg, sizeof msg);
    if (gs == TORC_ERR_NO_KERNEL) {
      snprintf(why, sizeof why, "no kernel: %s", msg);
      report(s, 2, r->name, "f64", "contiguous", "gradcheck", 0, why);
      note_lack(s, r, TORC_F64, 1);
    } else {
      snprintf(why, sizeof why, "%s", gs == TORC_OK ? "" : msg);
      report(s, gs != TORC_OK, r->name, "f64", "contiguous", "gradcheck", 0,
             why);
    }
  } else {
    last_error(msg, sizeof msg);
    snprintf(why, sizeof why, "cannot build the inputs: %s", msg);
    report(s, 1, r->name, "f64", "contiguous", "gradcheck", 0, why);
  }
  for (int k = 0; k < r->n_in; k++)
    torc_release(in[k]);
  torc_clear_error();
}

static int run_suite(const char *device_type, const char *pin, int verbose,
                     FILE *out, torc_conformance_result *res) {
  memset(res, 0, sizeof *res);
  uint32_t *lacks = calloc(conf_n_rows, sizeof *lacks);
  if (lacks == NULL) {
    fprintf(stderr, "torc test-backend: out of memory\n");
    return -1;
  }
  suite s = {device_type, {0, 0}, verbose, out, res, pin, lacks};
  char name[64];
  snprintf(name, sizeof name, "%s:0", device_type);
  int count = torc_device_count(device_type);
  if (count <= 0 || torc_device_parse(name, &s.dev) != TORC_OK) {
    fprintf(stderr,
            "torc test-backend: device type '%s' has no usable device "
            "(%s)\n",
            device_type,
            count < 0 ? "not registered" : count == 0 ? "no hardware found"
                                                      : torc_last_error());
    free(lacks);
    return -1;
  }
  for (size_t i = 0; i < conf_n_rows; i++) {
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
      for (int v = 0; v < V_COUNT; v++)
        run_case(&s, &conf_rows[i], dtypes[d], v);
    if (conf_rows[i].diff)
      run_gradcheck(&s, &conf_rows[i]);
  }
  if (pin)
    fprintf(out, "conformance of %s on cpu (against ref): %d passed, %d "
                 "failed, %d skipped\n",
            pin, res->passed, res->failed, res->skipped);
  else
    fprintf(out, "conformance on %s: %d passed, %d failed, %d skipped\n",
            device_type, res->passed, res->failed, res->skipped);
  print_lacks(&s);
  free(lacks);
  return 0;
}

int torc_conformance_run(const char *device_type, int verbose, FILE *out,
                         torc_conformance_result *res) {
  return run_suite(device_type, NULL, verbose, out, res);
}

int torc_conformance_run_provider(const char *provider, int verbose,
                                  FILE *out, torc_conformance_result *res) {
  return run_suite("cpu", provider, verbose, out, res);
}
