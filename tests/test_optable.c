/* tests/test_optable.c — the op table (torc/ops.def) and what is derived
 * from it: the reference list of every op and its kernel contract, made
 * from the table (TORC_OPTABLE_WRITE=FILE writes it; `make op-table`), every
 * plain unary and binary row's public function running its own op and
 * recording its row's backward node, and the ops added through the table
 * alone, checked against PyTorch's values.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

static int setup(void **state) {
  (void)state;
  test_load_plugin("ref");
  torc_clear_error();
  return 0;
}

/* ---- the docs section ---- */

/* One row of the table as text, for the docs list. */
typedef struct doc_row {
  const char *name, *kind, *rule, *io, *params, *ref, *backward, *doc;
} doc_row;

#define REF(set, kernel) #set
#define NOREF "—"
#define BW(node, fn, saves) #node
#define OWNBW "its own record"
#define NOBW "—"
#define TORC_OP(name, kind, rule, fn, io, params, ref, backward, test, doc)    \
  {#name, #kind, #rule, io, #params, ref, backward, doc},
static const doc_row doc_rows[] = {
#include "torc/ops.def"
};
#undef TORC_OP
#undef REF
#undef NOREF
#undef BW
#undef OWNBW
#undef NOBW

/* s with '|' escaped for a Markdown table cell, appended to buf. */
static void cell(char *buf, size_t cap, const char *s) {
  size_t n = strlen(buf);
  for (; *s && n + 3 < cap; s++) {
    if (*s == '|')
      buf[n++] = '\\';
    buf[n++] = *s;
  }
  buf[n] = '\0';
}

/* The reference list the table gives, as Markdown (a new string). */
static char *reference(void) {
  size_t cap = 64 * 1024;
  char *out = malloc(cap);
  assert_non_null(out);
  snprintf(out, cap,
           "# The op table\n\nGenerated from include/torc/ops.def (make "
           "op-table); docs/plugins.md explains the columns.\n\n"
           "| op | kind | dtype rule | in -> out | params | ref dtypes | "
           "backward | computes |\n|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < sizeof doc_rows / sizeof doc_rows[0]; i++) {
    const doc_row *r = &doc_rows[i];
    char line[1024];
    snprintf(line, sizeof line, "| `%s` | %s | %s | %s | %s | %s | %s | ",
             r->name, r->kind, r->rule, r->io,
             strcmp(r->params, "void") ? r->params : "—", r->ref, r->backward);
    cell(line, sizeof line, r->doc);
    strncat(line, " |\n", sizeof line - strlen(line) - 1);
    assert_true(strlen(out) + strlen(line) < cap);
    strcat(out, line);
  }
  return out;
}

/* The list has one line per op the core knows, in the dispatcher's order;
 * TORC_OPTABLE_WRITE=FILE writes it to FILE (make op-table). */
static void test_reference_lists_every_op(void **state) {
  (void)state;
  char *ref = reference();
  const char *write = getenv("TORC_OPTABLE_WRITE");
  if (write) {
    FILE *f = fopen(write, "w");
    assert_non_null(f);
    fputs(ref, f);
    assert_int_equal(fclose(f), 0);
  }
  const char *at = ref;
  size_t n = 0;
  for (const char *const *op = torc_op_names(); *op; op++, n++) {
    char cellname[128];
    snprintf(cellname, sizeof cellname, "\n| `%s` |", *op);
    const char *hit = strstr(at, cellname);
    if (hit == NULL) {
      print_error("op '%s' is missing from the list, or out of order\n",
                  *op);
      fail();
    }
    at = hit + 1;
  }
  assert_int_equal(n, sizeof doc_rows / sizeof doc_rows[0]);
  free(ref);
}

/* ---- the derived public functions ---- */

typedef struct plain_row {
  const char *name;
  torc_tensor *(*unary)(const torc_tensor *);
  torc_tensor *(*binary)(const torc_tensor *, const torc_tensor *);
  const char *node; /* the BW() node, or NULL */
} plain_row;

#define BW(node, fn, saves) #node
#define OWNBW NULL
#define NOBW NULL
#define ROW_UNARY(name, node) {#name, torc_##name, NULL, node},
#define ROW_BINARY(name, node) {#name, NULL, torc_##name, node},
#define ROW_UNARY_API(name, node) ROW_UNARY(name, node)
#define ROW_BINARY_API(name, node) ROW_BINARY(name, node)
#define ROW_OWN(name, node)
#define ROW_NONE(name, node)
#define TORC_OP(name, kind, rule, fn, io, params, ref, backward, ...)          \
  ROW_##fn(name, backward)
static const plain_row plain_rows[] = {
#include "torc/ops.def"
};
#undef TORC_OP
#undef BW
#undef OWNBW
#undef NOBW

/* Every plain row's function runs (f64, positive inputs, on ref's
 * kernels) and, when the row has a backward, records its node. */
static void test_plain_functions_follow_their_rows(void **state) {
  (void)state;
  assert_true(sizeof plain_rows / sizeof plain_rows[0] >= 32);
  int s = torc_scope_begin();
  torc_tensor *a = torc_from_host((const double[]){0.5, 1.5, 2.5},
                                  TORC_SHAPE(3), TORC_F64, TORC_CPU);
  torc_tensor *b = torc_from_host((const double[]){1.25, 0.75, 2.0},
                                  TORC_SHAPE(3), TORC_F64, TORC_CPU);
  assert_ok(torc_set_requires_grad(a, 1));
  assert_ok(torc_set_requires_grad(b, 1));
  for (size_t i = 0; i < sizeof plain_rows / sizeof plain_rows[0]; i++) {
    const plain_row *r = &plain_rows[i];
    torc_tensor *y = r->unary ? r->unary(a) : r->binary(a, b);
    if (y == NULL) {
      print_error("torc_%s: %s\n", r->name, torc_last_error());
      fail();
    }
    const char *got = torc_grad_fn_name(y);
    if (r->node ? got == NULL || strcmp(got, r->node) != 0 : got != NULL) {
      print_error("torc_%s: grad_fn %s, the table says %s\n", r->name,
                  got ? got : "none", r->node ? r->node : "none");
      fail();
    }
  }
  torc_scope_end(s);
}

/* ---- ops added through the table alone ---- */

/* x, y = hardswish(x), g and x.grad after y.backward(g), from PyTorch
 * 1.13 (torch.nn.functional.hardswish, f64): both boundaries, both flat
 * sides and the curve. */
static const double hs_x[12] = {-5.0, -3.0, -2.5, -1.0, -0.25, 0.0,
                                0.5,  1.75, 2.9,  3.0,  3.5,   6.0};
static const double hs_y[12] = {-0.0,
                                -0.0,
                                -0.20833333333333334,
                                -0.3333333333333333,
                                -0.11458333333333333,
                                0.0,
                                0.2916666666666667,
                                1.3854166666666667,
                                2.8516666666666666,
                                3.0,
                                3.5,
                                6.0};
static const double hs_g[12] = {1.0,  2.0,  -1.5, 0.5, 3.0, 1.0,
                                -2.0, 0.25, 1.0,  1.0, 4.0, -1.0};
static const double hs_gx[12] = {0.0,
                                 -1.0,
                                 0.5,
                                 0.08333333333333334,
                                 1.25,
                                 0.5,
                                 -1.3333333333333333,
                                 0.27083333333333337,
                                 1.4666666666666668,
                                 1.5,
                                 4.0,
                                 -1.0};
/* PyTorch's f32 results for the same x. */
static const float hs_y32[12] = {-0.0f,          -0.0f,
                                 -0.2083333284f, -0.3333333433f,
                                 -0.1145833358f, 0.0f,
                                 0.2916666567f,  1.3854166269f,
                                 2.8516666889f,  3.0f,
                                 3.5f,           6.0f};

static torc_tensor *hardswish_fn(torc_tensor *const *in, int n, void *user) {
  (void)n, (void)user;
  return torc_hardswish(in[0]);
}

static void test_hardswish_matches_pytorch(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *x = torc_from_host(hs_x, TORC_SHAPE(12), TORC_F64, TORC_CPU);
  assert_ok(torc_set_requires_grad(x, 1));
  torc_tensor *y = torc_hardswish(x);
  assert_non_null(y);
  assert_string_equal(torc_grad_fn_name(y), "HardswishBackward");
  double got[12];
  assert_ok(torc_to_host(y, got, sizeof got));
  for (int i = 0; i < 12; i++)
    if (fabs(got[i] - hs_y[i]) > 1e-15) {
      print_error("hardswish(%g): %.17g, PyTorch %.17g\n", hs_x[i], got[i],
                  hs_y[i]);
      fail();
    }
  torc_tensor *g = torc_from_host(hs_g, TORC_SHAPE(12), TORC_F64, TORC_CPU);
  assert_ok(torc_backward(y, g, 0));
  assert_ok(torc_to_host(torc_grad_of(x), got, sizeof got));
  for (int i = 0; i < 12; i++)
    if (fabs(got[i] - hs_gx[i]) > 1e-15) {
      print_error("hardswish'(%g) * %g: %.17g, PyTorch %.17g\n", hs_x[i],
                  hs_g[i], got[i], hs_gx[i]);
      fail();
    }
  /* f32 computes like PyTorch's to the last bit or one ulp. */
  torc_tensor *y32 = torc_hardswish(torc_to_dtype(x, TORC_F32));
  float got32[12];
  assert_ok(torc_to_host(y32, got32, sizeof got32));
  for (int i = 0; i < 12; i++)
    if (fabsf(got32[i] - hs_y32[i]) > 2.5e-7f * (1 + fabsf(hs_y32[i]))) {
      print_error("f32 hardswish(%g): %.9g, PyTorch %.9g\n", hs_x[i],
                  (double)got32[i], (double)hs_y32[i]);
      fail();
    }
  /* Integers are refused, as PyTorch's "not implemented for 'Long'". */
  torc_tensor *xi = torc_to_dtype(x, TORC_I64);
  assert_null(torc_hardswish(xi));
  assert_int_equal(torc_last_status(), TORC_ERR_DTYPE);
  torc_clear_error();
  /* NaN propagates. */
  torc_tensor *nan = torc_full(TORC_SHAPE(1), NAN, TORC_F32, TORC_CPU);
  float v;
  assert_ok(torc_to_host(torc_hardswish(nan), &v, sizeof v));
  assert_true(isnan(v));
  torc_scope_end(s);
}

/* Away from the kinks at -3 and 3 the gradient is the finite
 * difference's, on every side of them. */
static void test_hardswish_gradcheck(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double v[8] = {-4.5, -3.5, -2.75, -1.2, 0.3, 1.9, 3.25, 5.0};
  torc_tensor *x = torc_from_host(v, TORC_SHAPE(8), TORC_F64, TORC_CPU);
  assert_ok(torc_set_requires_grad(x, 1));
  if (torc_gradcheck(hardswish_fn, NULL, &x, 1, 1e-6, 1e-7, 1e-5)) {
    print_error("%s\n", torc_last_error());
    fail();
  }
  torc_scope_end(s);
}

/* ---- erf, hardsigmoid, softsign, selu, mish ----
 * x, y and dy/dx, worked out by hand from the formulas of PyTorch's
 * documentation: hardsigmoid relu6(x + 3) / 6 (flat and of slope 0 at
 * -3 and 3, as PyTorch's hardsigmoid_backward), softsign x / (1 + |x|),
 * selu scale (x or alpha (e^x - 1)) with slope scale alpha at 0, mish
 * x tanh(softplus(x)) with slope tanh(log 2) = 0.6 at 0; erf and its
 * slope 2 / sqrt(pi) e^-x^2. */
typedef struct act_case {
  const char *op, *node;
  torc_tensor *(*f)(const torc_tensor *);
  int n;
  double x[7], y[7], dy[7];
  int int_to_float; /* integers promote (erf), else they are refused */
} act_case;

static const act_case act_cases[] = {
    {"erf", "ErfBackward", torc_erf, 6,
     {-3, -1, -0.25, 0, 0.5, 2},
     {-0.9999779095030014, -0.8427007929497149, -0.2763263901682369, 0,
      0.5204998778130465, 0.9953222650189527},
     {0.00013925305194674786, 0.4151074974205947, 1.0600141293761143,
      1.1283791670955126, 0.8787825789354448, 0.020666985354092053},
     1},
    {"hardsigmoid", "HardsigmoidBackward", torc_hardsigmoid, 7,
     {-4, -3, -1.5, 0, 1.5, 3, 4},
     {0, 0, 0.25, 0.5, 0.75, 1, 1},
     {0, 0, 1.0 / 6, 1.0 / 6, 1.0 / 6, 0, 0},
     0},
    {"softsign", "SoftsignBackward", torc_softsign, 5,
     {-3, -1, 0, 0.5, 2},
     {-0.75, -0.5, 0, 1.0 / 3, 2.0 / 3},
     {1.0 / 16, 0.25, 1, 4.0 / 9, 1.0 / 9},
     0},
    {"selu", "SeluBackward", torc_selu, 5,
     {-2, -0.5, 0, 1, 2},
     {-1.520166468595695, -0.6917581878028713, 0, 1.0507009873554805,
      2.101401974710961},
     {0.2379328722516818, 1.0663411530445053, 1.7580993408473766,
      1.0507009873554805, 1.0507009873554805},
     0},
    {"mish", "MishBackward", torc_mish, 6,
     {-3, -1, 0, 1, 3, 30},
     {-0.1456474612756246, -0.30340146137410895, 0, 0.8650983882673103,
      2.9865350049679575, 30},
     {-0.09339311453232084, 0.059216755877395, 0.6, 1.0490362200997922,
      1.0211069109294435, 1},
     0},
};

static void check_close(const char *what, const char *op, double x,
                        double got, double want, double tol) {
  if (fabs(got - want) > tol * (1 + fabs(want))) {
    print_error("%s %s(%g): %.17g, expected %.17g\n", what, op, x, got, want);
    fail();
  }
}

static void test_activations_match_formulas(void **state) {
  (void)state;
  for (size_t c = 0; c < sizeof act_cases / sizeof act_cases[0]; c++) {
    const act_case *k = &act_cases[c];
    int s = torc_scope_begin();
    torc_tensor *x =
        torc_from_host(k->x, TORC_SHAPE(k->n), TORC_F64, TORC_CPU);
    assert_ok(torc_set_requires_grad(x, 1));
    torc_tensor *y = k->f(x);
    assert_non_null(y);
    assert_string_equal(torc_grad_fn_name(y), k->node);
    double got[7];
    assert_ok(torc_to_host(y, got, (size_t)k->n * sizeof got[0]));
    for (int i = 0; i < k->n; i++)
      check_close("f64", k->op, k->x[i], got[i], k->y[i], 1e-15);
    assert_ok(torc_backward(
        y, torc_full(TORC_SHAPE(k->n), 1, TORC_F64, TORC_CPU), 0));
    assert_ok(torc_to_host(torc_grad_of(x), got, (size_t)k->n * sizeof got[0]));
    for (int i = 0; i < k->n; i++)
      check_close("d/dx", k->op, k->x[i], got[i], k->dy[i], 1e-15);
    /* f32 within a few ulps of the same values. */
    float got32[7];
    assert_ok(torc_to_host(k->f(torc_to_dtype(x, TORC_F32)), got32,
                           (size_t)k->n * sizeof got32[0]));
    for (int i = 0; i < k->n; i++)
      check_close("f32", k->op, k->x[i], got32[i], k->y[i], 5e-7);
    /* Integers promote to the default float or are refused, as in
     * PyTorch; NaN propagates. */
    torc_tensor *yi = k->f(torc_to_dtype(x, TORC_I64));
    if (k->int_to_float) {
      assert_non_null(yi);
      assert_int_equal(torc_dtype_of(yi), TORC_F32);
    } else {
      assert_null(yi);
      assert_int_equal(torc_last_status(), TORC_ERR_DTYPE);
      torc_clear_error();
    }
    float v;
    assert_ok(torc_to_host(
        k->f(torc_full(TORC_SHAPE(1), NAN, TORC_F32, TORC_CPU)), &v,
        sizeof v));
    assert_true(isnan(v));
    torc_scope_end(s);
  }
}

typedef struct unary_fn {
  torc_tensor *(*f)(const torc_tensor *);
} unary_fn;

static torc_tensor *act_fn(torc_tensor *const *in, int n, void *user) {
  (void)n;
  return ((const unary_fn *)user)->f(in[0]);
}

/* The gradient is the finite difference's on both sides of each kink. */
static void test_activations_gradcheck(void **state) {
  (void)state;
  const double v[8] = {-4.5, -2.75, -1.2, -0.3, 0.4, 1.9, 2.8, 5.0};
  for (size_t c = 0; c < sizeof act_cases / sizeof act_cases[0]; c++) {
    int s = torc_scope_begin();
    torc_tensor *x = torc_from_host(v, TORC_SHAPE(8), TORC_F64, TORC_CPU);
    assert_ok(torc_set_requires_grad(x, 1));
    unary_fn u = {act_cases[c].f};
    if (torc_gradcheck(act_fn, &u, &x, 1, 1e-6, 1e-7, 1e-5)) {
      print_error("%s: %s\n", act_cases[c].op, torc_last_error());
      fail();
    }
    torc_scope_end(s);
  }
}

/* celu, hardtanh and relu6, compositions of other ops: values and
 * gradients worked out by hand from PyTorch's documented formulas
 * (hardtanh's gradient is 0 at both bounds, celu's 1 at 0). */
static void expect_fn(torc_tensor *(*f)(const torc_tensor *, const void *),
                      const void *u, const char *what, int n, const double *x,
                      const double *y, const double *dy) {
  int s = torc_scope_begin();
  torc_tensor *xt = torc_from_host(x, TORC_SHAPE(n), TORC_F64, TORC_CPU);
  assert_ok(torc_set_requires_grad(xt, 1));
  torc_tensor *yt = f(xt, u);
  assert_non_null(yt);
  double got[8];
  assert_ok(torc_to_host(yt, got, (size_t)n * sizeof got[0]));
  for (int i = 0; i < n; i++)
    check_close("f64", what, x[i], got[i], y[i], 1e-15);
  assert_ok(torc_backward(yt, torc_full(TORC_SHAPE(n), 1, TORC_F64, TORC_CPU),
                          0));
  assert_ok(torc_to_host(torc_grad_of(xt), got, (size_t)n * sizeof got[0]));
  for (int i = 0; i < n; i++)
    check_close("d/dx", what, x[i], got[i], dy[i], 1e-15);
  torc_scope_end(s);
}

static torc_tensor *celu2(const torc_tensor *x, const void *u) {
  (void)u;
  return torc_celu(x, 2);
}
static torc_tensor *hardtanh_m1_2(const torc_tensor *x, const void *u) {
  (void)u;
  return torc_hardtanh(x, -1, 2);
}
static torc_tensor *relu6_u(const torc_tensor *x, const void *u) {
  (void)u;
  return torc_relu6(x);
}
static torc_tensor *composite_fn(torc_tensor *const *in, int n, void *user) {
  (void)n;
  return user ? torc_celu(in[0], 2) : torc_hardtanh(in[0], -1, 2);
}

static void test_composite_activations(void **state) {
  (void)state;
  expect_fn(celu2, NULL, "celu(alpha=2)", 4, (const double[]){-4, -1, 0, 1.5},
            (const double[]){-1.7293294335267746, -0.7869386805747332, 0,
                             1.5},
            (const double[]){0.1353352832366127, 0.6065306597126334, 1, 1});
  expect_fn(hardtanh_m1_2, NULL, "hardtanh(-1, 2)", 5,
            (const double[]){-3, -1, 0.5, 2, 3},
            (const double[]){-1, -1, 0.5, 2, 2}, (const double[]){0, 0, 1, 0, 0});
  expect_fn(relu6_u, NULL, "relu6", 5, (const double[]){-1, 0, 3, 6, 7},
            (const double[]){0, 0, 3, 6, 6}, (const double[]){0, 0, 1, 0, 0});
  int s = torc_scope_begin();
  const double v[6] = {-3.5, -1.5, -0.4, 0.7, 1.6, 2.5};
  for (int k = 0; k < 2; k++) {
    torc_tensor *x = torc_from_host(v, TORC_SHAPE(6), TORC_F64, TORC_CPU);
    assert_ok(torc_set_requires_grad(x, 1));
    if (torc_gradcheck(composite_fn, k ? (void *)v : NULL, &x, 1, 1e-6, 1e-7,
                       1e-5)) {
      print_error("%s: %s\n", k ? "celu" : "hardtanh", torc_last_error());
      fail();
    }
  }
  torc_tensor *nan = torc_full(TORC_SHAPE(1), NAN, TORC_F32, TORC_CPU);
  float f;
  assert_ok(torc_to_host(torc_hardtanh(nan, -1, 1), &f, sizeof f));
  assert_true(isnan(f));
  assert_ok(torc_to_host(torc_celu(nan, 1), &f, sizeof f));
  assert_true(isnan(f));
  /* bad parameters, integers to celu */
  assert_null(torc_celu(nan, 0));
  assert_int_equal(torc_last_status(), TORC_ERR_INVALID);
  assert_null(torc_hardtanh(nan, 1, 1));
  assert_int_equal(torc_last_status(), TORC_ERR_INVALID);
  assert_non_null(strstr(torc_last_error(), "min_val 1 and max_val 1"));
  assert_null(torc_celu(torc_zeros(TORC_SHAPE(1), TORC_I64, TORC_CPU), 1));
  assert_int_equal(torc_last_status(), TORC_ERR_DTYPE);
  torc_clear_error();
  torc_scope_end(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_lists_every_op),
      cmocka_unit_test(test_plain_functions_follow_their_rows),
      cmocka_unit_test(test_hardswish_matches_pytorch),
      cmocka_unit_test(test_hardswish_gradcheck),
      cmocka_unit_test(test_activations_match_formulas),
      cmocka_unit_test(test_activations_gradcheck),
      cmocka_unit_test(test_composite_activations),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
