/* tests/test_fixtures.c — PyTorch parity: runs every case of
 * tests/fixtures/ops.safetensors (written by tests/fixtures/gen_ops.py with
 * PyTorch) on cpu (ref) and on sim, and compares outputs and the gradients
 * of sum(out * w) with PyTorch's, and sim with cpu bit for bit. Table-driven:
 * the cases come from the file; this file maps op names to torc calls.
 */
#include <math.h>

#include "testutil.h"

/* Tolerances, as |torc - torch| <= tol * max(|torch|, 1) (relative for
 * values above 1, absolute below, where cancellation makes a relative error
 * meaningless):
 *  - f32: 1e-6, about 8 ulp (2^-23 = 1.19e-7). PyTorch's CPU kernels use
 *    their own vectorised exp/log/sin/tanh (SLEEF, within 1 ulp) and
 *    accumulate sums and matmuls in another order than ref (vectorised,
 *    blocked), so results differ by a few ulp; with O(1) inputs and at most
 *    24 terms per reduction the rounding bound n * eps is 3e-6, and what is
 *    seen is far below it: 1.8e-7 (1.5 ulp) when this was written.
 *  - f64: 1e-12, the same reasoning with 2^-52 = 2.2e-16; seen: 2.4e-16.
 * Integer and bool results must be equal. The test prints the largest
 * deviation per dtype and where it occurred. */
static const double tol_f32 = 1e-6, tol_f64 = 1e-12;

/* ---- case parameters: "op=sum dims=0,2 keepdim=1" ---- */

#define MAX_PARAMS 8
typedef struct params {
  char op[32];
  int n;
  char key[MAX_PARAMS][16];
  int64_t val[MAX_PARAMS][TORC_MAX_DIMS];
  int nval[MAX_PARAMS];
} params;

static int parse_params(const char *spec, params *p) {
  memset(p, 0, sizeof *p);
  const char *s = spec;
  while (*s) {
    while (*s == ' ')
      s++;
    if (!*s)
      break;
    const char *eq = strchr(s, '=');
    if (eq == NULL || eq - s >= 16)
      return -1;
    char key[16];
    memcpy(key, s, (size_t)(eq - s));
    key[eq - s] = '\0';
    s = eq + 1;
    if (strcmp(key, "op") == 0) {
      size_t len = strcspn(s, " ");
      if (len >= sizeof p->op)
        return -1;
      memcpy(p->op, s, len);
      p->op[len] = '\0';
      s += len;
      continue;
    }
    if (p->n == MAX_PARAMS)
      return -1;
    snprintf(p->key[p->n], sizeof p->key[p->n], "%s", key);
    for (;;) {
      char *end;
      long long v = strtoll(s, &end, 10);
      if (end == s || p->nval[p->n] == TORC_MAX_DIMS)
        return -1;
      p->val[p->n][p->nval[p->n]++] = v;
      s = end;
      if (*s != ',')
        break;
      s++;
    }
    p->n++;
  }
  return p->op[0] ? 0 : -1;
}

/* The values of key k (their count, 0 if absent). */
static int plist(const params *p, const char *k, const int64_t **out) {
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->key[i], k) == 0) {
      *out = p->val[i];
      return p->nval[i];
    }
  *out = NULL;
  return 0;
}

static int64_t pint(const params *p, const char *k, int64_t def) {
  const int64_t *v;
  return plist(p, k, &v) ? v[0] : def;
}

/* ---- the op table: one row per op name used in the fixture ---- */

typedef torc_tensor *(*custom_fn)(torc_tensor *const *in, const params *p);

typedef struct op_row {
  const char *name;
  torc_tensor *(*unary)(const torc_tensor *);
  torc_tensor *(*binary)(const torc_tensor *, const torc_tensor *);
  torc_tensor *(*reduce)(const torc_tensor *, const int *, int, int);
  custom_fn custom;
} op_row;

static torc_tensor *v_transpose(torc_tensor *const *in, const params *p) {
  return torc_transpose(in[0], (int)pint(p, "d0", 0), (int)pint(p, "d1", 1));
}
static torc_tensor *v_permute(torc_tensor *const *in, const params *p) {
  const int64_t *v;
  int n = plist(p, "dims", &v), dims[TORC_MAX_DIMS];
  for (int i = 0; i < n; i++)
    dims[i] = (int)v[i];
  return torc_permute(in[0], dims, n);
}
static torc_tensor *v_reshape(torc_tensor *const *in, const params *p) {
  const int64_t *v;
  int n = plist(p, "shape", &v);
  return torc_reshape(in[0], v, n);
}
static torc_tensor *v_expand(torc_tensor *const *in, const params *p) {
  const int64_t *v;
  int n = plist(p, "shape", &v);
  return torc_expand(in[0], v, n);
}
static torc_tensor *v_slice(torc_tensor *const *in, const params *p) {
  return torc_slice(in[0], (int)pint(p, "dim", 0), pint(p, "start", 0),
                    pint(p, "end", TORC_END), pint(p, "step", 1));
}
static torc_tensor *v_select(torc_tensor *const *in, const params *p) {
  return torc_select(in[0], (int)pint(p, "dim", 0), pint(p, "index", 0));
}
static torc_tensor *v_narrow(torc_tensor *const *in, const params *p) {
  return torc_narrow(in[0], (int)pint(p, "dim", 0), pint(p, "start", 0),
                     pint(p, "length", 0));
}
static torc_tensor *v_squeeze(torc_tensor *const *in, const params *p) {
  return torc_squeeze(in[0], (int)pint(p, "dim", 0));
}
static torc_tensor *v_unsqueeze(torc_tensor *const *in, const params *p) {
  return torc_unsqueeze(in[0], (int)pint(p, "dim", 0));
}
static torc_tensor *v_flatten(torc_tensor *const *in, const params *p) {
  return torc_flatten(in[0], (int)pint(p, "start", 0), (int)pint(p, "end", -1));
}

#define UN(n)                                                                  \
  { #n, torc_##n, NULL, NULL, NULL }
#define BIN(n)                                                                 \
  { #n, NULL, torc_##n, NULL, NULL }
#define RED(n)                                                                 \
  { #n, NULL, NULL, torc_##n, NULL }
#define VIEW(n)                                                                \
  { #n, NULL, NULL, NULL, v_##n }
static const op_row op_table[] = {
    UN(neg),         UN(abs),       UN(sign),      UN(square),
    UN(relu),        UN(exp),       UN(log),       UN(sqrt),
    UN(sin),         UN(cos),       UN(tanh),      UN(sigmoid),
    UN(reciprocal),  BIN(add),      BIN(sub),      BIN(mul),
    BIN(div),        BIN(pow),      BIN(maximum),  BIN(minimum),
    BIN(eq),         BIN(ne),       BIN(lt),       BIN(le),
    BIN(gt),         BIN(ge),       BIN(matmul),   RED(sum),
    RED(mean),       RED(prod),     RED(amax),     RED(amin),
    VIEW(transpose), VIEW(permute), VIEW(reshape), VIEW(expand),
    VIEW(slice),     VIEW(select),  VIEW(narrow),  VIEW(squeeze),
    VIEW(unsqueeze), VIEW(flatten),
};
#undef UN
#undef BIN
#undef RED
#undef VIEW

static const op_row *find_op(const char *name) {
  for (size_t i = 0; i < sizeof op_table / sizeof *op_table; i++)
    if (strcmp(op_table[i].name, name) == 0)
      return &op_table[i];
  return NULL;
}

static torc_tensor *run_op(const op_row *op, torc_tensor *const *in, int n,
                           const params *p) {
  if (op->unary && n == 1)
    return op->unary(in[0]);
  if (op->binary && n == 2)
    return op->binary(in[0], in[1]);
  if (op->reduce && n == 1) {
    const int64_t *v;
    int nd = plist(p, "dims", &v), dims[TORC_MAX_DIMS];
    for (int i = 0; i < nd; i++)
      dims[i] = (int)v[i];
    return op->reduce(in[0], dims, nd, (int)pint(p, "keepdim", 0));
  }
  if (op->custom && n == 1)
    return op->custom(in, p);
  torc_set_error(TORC_ERR_INVALID, "op %s does not take %d inputs", op->name,
                 n);
  return NULL;
}

/* ---- comparing ---- */

typedef struct stats {
  double max_dev;   /* largest |torc - torch| / max(|torch|, 1) */
  char where[96];   /* the case and tensor where it was seen */
  int64_t compared; /* elements compared */
} stats;

static stats st_f32, st_f64;
static int64_t exact_compared;
static int n_failures;

/* A growable array of doubles: everything one run of a case computed,
 * for the sim-vs-cpu comparison. */
typedef struct dvec {
  double *v;
  size_t n, cap;
} dvec;

static void dvec_add(dvec *d, const double *v, size_t n) {
  if (d->n + n > d->cap) {
    d->cap = (d->n + n) * 2;
    d->v = realloc(d->v, d->cap * sizeof *d->v);
    assert_non_null(d->v);
  }
  memcpy(d->v + d->n, v, n * sizeof *v);
  d->n += n;
}

#define FAILF(...)                                                             \
  do {                                                                         \
    fprintf(stderr, "FAIL " __VA_ARGS__);                                      \
    n_failures++;                                                              \
  } while (0)

/* Compares got (any device) with the fixture's tensor `name`: dtype and
 * shape exactly, values within the dtype's tolerance (exactly for integer
 * and bool). Appends got's values to `all`. */
static void compare(const torc_safetensors *st, const char *name,
                    const torc_tensor *got, const char *devname, dvec *all) {
  torc_tensor *want = torc_safetensors_get(st, name, TORC_CPU);
  assert_torc(want);
  char bg[64], bw[64];
  if (torc_dtype_of(got) != torc_dtype_of(want) ||
      torc_ndim(got) != torc_ndim(want) ||
      memcmp(torc_shape(got), torc_shape(want),
             sizeof(int64_t) * (size_t)torc_ndim(got)) != 0) {
    FAILF("%s on %s: torc gives %s, torch %s\n", name, devname,
          torc_describe(got, bg, sizeof bg),
          torc_describe(want, bw, sizeof bw));
    return;
  }
  int64_t n = torc_numel(want);
  double *g = test_values(got), *w = test_values(want);
  assert_non_null(g);
  assert_non_null(w);
  torc_dtype dt = torc_dtype_of(want);
  stats *s = dt == TORC_F32 ? &st_f32 : dt == TORC_F64 ? &st_f64 : NULL;
  double tol = dt == TORC_F32 ? tol_f32 : tol_f64;
  for (int64_t i = 0; i < n; i++) {
    if (s == NULL) {
      exact_compared++;
      if (g[i] != w[i]) {
        FAILF("%s on %s: element %lld is %.17g, torch %.17g\n", name, devname,
              (long long)i, g[i], w[i]);
        break;
      }
      continue;
    }
    double dev = fabs(g[i] - w[i]) / fmax(fabs(w[i]), 1.0);
    if (!(dev <= tol)) { /* NaN fails too */
      FAILF("%s on %s: element %lld is %.17g, torch %.17g (deviation %.3g > "
            "%g)\n",
            name, devname, (long long)i, g[i], w[i], dev, tol);
      break;
    }
    s->compared++;
    if (dev > s->max_dev) {
      s->max_dev = dev;
      snprintf(s->where, sizeof s->where, "%s[%lld]", name, (long long)i);
    }
  }
  dvec_add(all, g, (size_t)n);
  free(g);
  free(w);
}

/* Runs case `key` ("exp.f32") with spec `spec` on dev; all it computes goes
 * into `all`. Returns 0, or -1 when the case could not run at all. */
static int run_case(const torc_safetensors *st, const char *key,
                    const char *spec, torc_device dev, dvec *all) {
  char devname[32], name[160];
  torc_device_str(dev, devname, sizeof devname);
  params p;
  if (parse_params(spec, &p) != 0) {
    FAILF("%s: cannot parse the spec \"%s\"\n", key, spec);
    return -1;
  }
  const op_row *op = find_op(p.op);
  if (op == NULL) {
    FAILF("%s: op \"%s\" has no row in test_fixtures.c's op_table; add one\n",
          key, p.op);
    return -1;
  }
  int scope = torc_scope_begin();
  torc_tensor *in[4];
  int n = 0;
  for (; n < 4; n++) {
    snprintf(name, sizeof name, "%s.in%d", key, n);
    if (torc_safetensors_info(st, name, NULL, NULL, NULL) != TORC_OK)
      break;
    in[n] = torc_safetensors_get(st, name, dev);
    assert_torc(in[n]);
    if (torc_dtype_is_float(torc_dtype_of(in[n])))
      assert_ok(torc_set_requires_grad(in[n], 1));
  }
  torc_clear_error();
  torc_tensor *out = run_op(op, in, n, &p);
  if (out == NULL) {
    FAILF("%s on %s: %s\n", key, devname, torc_last_error());
    torc_scope_end(scope);
    return -1;
  }
  snprintf(name, sizeof name, "%s.out", key);
  compare(st, name, out, devname, all);
  snprintf(name, sizeof name, "%s.w", key);
  if (torc_safetensors_info(st, name, NULL, NULL, NULL) == TORC_OK) {
    torc_tensor *w = torc_safetensors_get(st, name, dev);
    torc_tensor *loss = torc_sum(torc_mul(out, w), NULL, 0, 0);
    if (loss == NULL || torc_backward(loss, NULL, 0) != TORC_OK) {
      FAILF("%s on %s: backward: %s\n", key, devname, torc_last_error());
      torc_scope_end(scope);
      return -1;
    }
    for (int i = 0; i < n; i++) {
      snprintf(name, sizeof name, "%s.grad%d", key, i);
      if (torc_safetensors_info(st, name, NULL, NULL, NULL) != TORC_OK)
        continue;
      const torc_tensor *g = torc_grad_of(in[i]);
      if (g == NULL)
        FAILF("%s on %s: input %d got no gradient\n", key, devname, i);
      else
        compare(st, name, g, devname, all);
    }
  }
  torc_clear_error();
  torc_scope_end(scope);
  return 0;
}

/* ---- the test ---- */

static void test_pytorch_parity(void **state) {
  (void)state;
  const char *src = getenv("TORC_TOP_SRCDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/tests/fixtures/ops.safetensors",
           src ? src : ".");
  torc_safetensors *st = torc_safetensors_open(path);
  assert_torc(st);
  int64_t live = torc_tensor_live_count();
  torc_device sim = TORC_CPU;
  assert_ok(torc_device_parse("sim", &sim));
  int n_cases = 0;
  for (int i = 0; i < torc_safetensors_metadata_count(st); i++) {
    const char *mk = torc_safetensors_metadata_key(st, i);
    if (strncmp(mk, "case:", 5) != 0)
      continue;
    const char *key = mk + 5, *spec = torc_safetensors_metadata(st, mk);
    dvec on_cpu = {0}, on_sim = {0};
    int rc = run_case(st, key, spec, TORC_CPU, &on_cpu);
    if (rc == 0 && run_case(st, key, spec, sim, &on_sim) == 0) {
      /* sim delegates to ref: the same bits. */
      if (on_cpu.n != on_sim.n ||
          (on_cpu.n &&
           memcmp(on_cpu.v, on_sim.v, on_cpu.n * sizeof(double)) != 0))
        FAILF("%s: sim differs from cpu\n", key);
    }
    free(on_cpu.v);
    free(on_sim.v);
    n_cases++;
  }
  torc_safetensors_close(st);
  assert_int_equal(torc_tensor_live_count(), live);
  printf("# %d PyTorch cases from %s, each on cpu and sim\n", n_cases, path);
  printf("# largest deviation from PyTorch, |torc - torch| / max(|torch|, 1):\n"
         "#   f32: %.3g at %s (%lld elements compared; tolerance %g)\n"
         "#   f64: %.3g at %s (%lld elements compared; tolerance %g)\n"
         "#   integer and bool: %lld elements, all equal: %s\n",
         st_f32.max_dev, st_f32.where, (long long)st_f32.compared, tol_f32,
         st_f64.max_dev, st_f64.where, (long long)st_f64.compared, tol_f64,
         (long long)exact_compared, n_failures ? "see above" : "yes");
  assert_true(n_cases > 100);
  if (n_failures) {
    print_error("%d comparison(s) failed (listed above)\n", n_failures);
    fail();
  }
}

int main(void) {
  if (test_setup_ref_sim(NULL) != 0)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pytorch_parity),
  };
  return cmocka_run_group_tests_name("fixtures", tests, NULL,
                                     test_teardown_all);
}
