/* tools/onnx_test_cmd.c — `torc onnx-test DIR...`: runs ONNX's backend test
 * cases (a folder with model.onnx and test_data_set_N/{input,output}_K.pb)
 * with torc's ONNX interpreter and compares each output with ONNX's
 * tolerances, one line per case and a total.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "torc/torc.h"

#include "cli.h"
#include "commands.h"

const char torc_tool__usage_onnx_test[] =
    "usage: torc onnx-test [--strict] DIR...\n"
    "\n"
    "Runs ONNX backend test cases with torc's ONNX interpreter on the cpu\n"
    "(the ref plugin, and cpu when it loads). Each DIR is a case (a folder\n"
    "holding model.onnx and test_data_set_*/input_K.pb, output_K.pb) or a\n"
    "folder of cases. Every output is compared with the expected one as\n"
    "ONNX's backend tests do: same dtype and shape, and |got - expected| <=\n"
    "1e-7 + 1e-3 |expected| elementwise (NaN equals NaN; integers and bools\n"
    "exactly). Prints one line per case:\n"
    "  pass NAME\n"
    "  fail NAME: output 'y' max abs error 0.3 at [2,1] (rtol 1e-3, atol 1e-7)\n"
    "  unsupported NAME: Foo (node n1), Bar (node n2)\n"
    "then \"onnx-test: P passed, F failed, U unsupported of N cases\".\n"
    "\n"
    "Exit status: 0 when no case failed (unsupported cases are not\n"
    "failures unless --strict), 1 when one did, 2 for bad usage or a DIR\n"
    "that holds no case.\n";

#define RTOL 1e-3
#define ATOL 1e-7

typedef struct tally {
  int pass, fail, unsup;
} tally;

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static char *join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  if (!p) {
    fprintf(stderr, "torc onnx-test: out of memory\n");
    exit(EXIT_RUNTIME);
  }
  snprintf(p, n, "%s/%s", a, b);
  return p;
}

static const char *base_name(const char *p) {
  size_t n = strlen(p);
  while (n > 1 && p[n - 1] == '/')
    n--;
  const char *s = p + n;
  while (s > p && s[-1] != '/')
    s--;
  return s;
}

/* Compares got with want; 1 when they match, else 0 with why in msg. */
static int compare(const char *name, const torc_tensor *got,
                   const torc_tensor *want, char *msg, size_t size) {
  char a[96], b[96];
  if (torc_dtype_of(got) != torc_dtype_of(want)) {
    snprintf(msg, size, "output '%s' is %s, expected %s", name,
             torc_dtype_name(torc_dtype_of(got)),
             torc_dtype_name(torc_dtype_of(want)));
    return 0;
  }
  int nd = torc_ndim(got);
  if (nd != torc_ndim(want) ||
      memcmp(torc_shape(got), torc_shape(want), (size_t)nd * sizeof(int64_t))) {
    snprintf(msg, size, "output '%s' has shape %s, expected %s", name,
             torc_describe(got, a, sizeof a), torc_describe(want, b, sizeof b));
    return 0;
  }
  int64_t n = torc_numel(got);
  if (n == 0)
    return 1;
  int is_f = torc_dtype_is_float(torc_dtype_of(got));
  torc_tensor *g = torc_to_dtype(got, is_f ? TORC_F64 : TORC_I64);
  torc_tensor *w = torc_to_dtype(want, is_f ? TORC_F64 : TORC_I64);
  void *gv = malloc((size_t)n * 8), *wv = malloc((size_t)n * 8);
  if (!g || !w || !gv || !wv ||
      torc_to_host(g, gv, (size_t)n * 8) != TORC_OK ||
      torc_to_host(w, wv, (size_t)n * 8) != TORC_OK) {
    snprintf(msg, size, "output '%s' cannot be read: %s", name,
             torc_last_error());
    free(gv);
    free(wv);
    return 0;
  }
  int64_t worst = -1, n_bad = 0;
  double worst_err = -1;
  for (int64_t i = 0; i < n; i++) {
    double x, y;
    if (is_f) {
      x = ((double *)gv)[i];
      y = ((double *)wv)[i];
      if ((isnan(x) && isnan(y)) || x == y)
        continue;
    } else {
      if (((int64_t *)gv)[i] == ((int64_t *)wv)[i])
        continue;
      x = (double)((int64_t *)gv)[i];
      y = (double)((int64_t *)wv)[i];
    }
    double err = fabs(x - y);
    if (isnan(err))
      err = INFINITY;
    if (is_f && err <= ATOL + RTOL * fabs(y))
      continue;
    n_bad++;
    if (err > worst_err) {
      worst_err = err;
      worst = i;
    }
  }
  free(gv);
  free(wv);
  if (!n_bad)
    return 1;
  /* the position of the worst element, as [i,j,...] */
  char at[160];
  size_t len = 0;
  int64_t rem = worst;
  int64_t idx[TORC_MAX_DIMS];
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = rem % torc_shape(got)[d];
    rem /= torc_shape(got)[d];
  }
  at[len++] = '[';
  for (int d = 0; d < nd && len < sizeof at - 24; d++)
    len += (size_t)snprintf(at + len, sizeof at - len, "%s%lld", d ? "," : "",
                            (long long)idx[d]);
  snprintf(at + len, sizeof at - len, "]");
  snprintf(msg, size,
           "output '%s' max abs error %g at %s (%lld of %lld elements off; "
           "rtol 1e-3, atol 1e-7)",
           name, worst_err, at, (long long)n_bad, (long long)n);
  return 0;
}

enum { C_PASS, C_FAIL, C_UNSUP };

/* Runs one data set folder of a case: C_PASS, or the outcome with msg. */
static int run_set(const torc_onnx_model *m, const char *set, char *msg,
                   size_t size) {
  int n_in = torc_onnx_n_inputs(m), n_out = torc_onnx_n_outputs(m);
  torc_tensor **in = calloc((size_t)n_in + 1, sizeof *in);
  torc_tensor **out = calloc((size_t)n_out + 1, sizeof *out);
  int rc = C_PASS;
  if (!in || !out) {
    snprintf(msg, size, "out of memory");
    rc = C_FAIL;
    goto done;
  }
  for (int i = 0; i < n_in && rc == C_PASS; i++) {
    char f[32];
    snprintf(f, sizeof f, "input_%d.pb", i);
    char *p = join(set, f);
    if (!is_file(p)) {
      snprintf(msg, size, "%s is missing (the model has %d inputs)", p, n_in);
      rc = C_FAIL;
    } else if (!(in[i] = torc_onnx_read_tensor(p, NULL, 0))) {
      snprintf(msg, size, "%s", torc_last_error());
      rc = torc_last_status() == TORC_ERR_UNSUPPORTED ? C_UNSUP : C_FAIL;
    }
    free(p);
  }
  if (rc != C_PASS)
    goto done;
  torc_status st = torc_onnx_run(m, (const torc_tensor *const *)in, n_in,
                                 NULL, out, n_out);
  if (st != TORC_OK) {
    snprintf(msg, size, "%s", torc_last_error());
    rc = st == TORC_ERR_UNSUPPORTED ? C_UNSUP : C_FAIL;
    goto done;
  }
  for (int i = 0; i < n_out && rc == C_PASS; i++) {
    char f[32];
    snprintf(f, sizeof f, "output_%d.pb", i);
    char *p = join(set, f);
    torc_tensor *want = torc_onnx_read_tensor(p, NULL, 0);
    free(p);
    if (!want) {
      snprintf(msg, size, "%s", torc_last_error());
      rc = torc_last_status() == TORC_ERR_UNSUPPORTED ? C_UNSUP : C_FAIL;
    } else if (!compare(torc_onnx_output_name(m, i), out[i], want, msg, size)) {
      rc = C_FAIL;
    }
  }
done:
  /* the inputs and expected outputs belong to run_case's scope */
  if (out)
    for (int i = 0; i < n_out; i++)
      torc_release(out[i]);
  free(in);
  free(out);
  return rc;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir that start with prefix (and are folders), sorted. */
static int list_dirs(const char *dir, const char *prefix, int need_model,
                     char ***out) {
  DIR *d = opendir(dir);
  *out = NULL;
  if (!d)
    return -1;
  int n = 0, cap = 0;
  char **v = NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)))
      continue;
    char *p = join(dir, e->d_name);
    char *mp = join(p, "model.onnx");
    int ok = is_dir(p) && (!need_model || is_file(mp));
    free(mp);
    if (!ok) {
      free(p);
      continue;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **nv = realloc(v, (size_t)cap * sizeof *nv);
      if (!nv) {
        fprintf(stderr, "torc onnx-test: out of memory\n");
        exit(EXIT_RUNTIME);
      }
      v = nv;
    }
    v[n++] = p;
  }
  closedir(d);
  if (n)
    qsort(v, (size_t)n, sizeof *v, cmp_str);
  *out = v;
  return n;
}

static void free_list(char **v, int n) {
  for (int i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

static void run_case(const char *dir, tally *t) {
  const char *name = base_name(dir);
  char *mp = join(dir, "model.onnx");
  char msg[1200];
  int rc = C_PASS;
  int scope = torc_scope_begin();
  torc_onnx_model *m = torc_onnx_load(mp);
  free(mp);
  if (!m) {
    snprintf(msg, sizeof msg, "%s", torc_last_error());
    rc = torc_last_status() == TORC_ERR_UNSUPPORTED ? C_UNSUP : C_FAIL;
  } else if (torc_onnx_unsupported(m, msg, sizeof msg)) {
    rc = C_UNSUP;
  } else if (torc_onnx_check(m) != TORC_OK) {
    snprintf(msg, sizeof msg, "%s", torc_last_error());
    rc = C_FAIL;
  } else {
    char **sets;
    int n = list_dirs(dir, "test_data_set_", 0, &sets);
    if (n <= 0) {
      snprintf(msg, sizeof msg, "%s holds no test_data_set_* folder", dir);
      rc = C_FAIL;
    }
    for (int i = 0; i < n && rc == C_PASS; i++)
      rc = run_set(m, sets[i], msg, sizeof msg);
    free_list(sets, n > 0 ? n : 0);
  }
  torc_onnx_free(m);
  torc_scope_end(scope);
  torc_clear_error();
  if (rc == C_PASS) {
    printf("pass %s\n", name);
    t->pass++;
  } else if (rc == C_UNSUP) {
    printf("unsupported %s: %s\n", name, msg);
    t->unsup++;
  } else {
    printf("fail %s: %s\n", name, msg);
    t->fail++;
  }
  fflush(stdout);
}

int torc_tool__cmd_onnx_test(int argc, char **argv) {
  int strict = 0, n_dirs = 0;
  for (int i = 1; i < argc; i++) {
    if (is_help_flag(argv[i])) {
      fputs(torc_tool__usage_onnx_test, stdout);
      return EXIT_OK;
    }
    if (strcmp(argv[i], "--strict") == 0)
      strict = 1;
    else if (argv[i][0] == '-') {
      fprintf(stderr, "torc onnx-test: unknown option '%s' (options: "
              "--strict)\n%s", argv[i], torc_tool__usage_onnx_test);
      return EXIT_USAGE;
    } else
      n_dirs++;
  }
  if (!n_dirs) {
    fprintf(stderr, "torc onnx-test: no DIR given\n%s",
            torc_tool__usage_onnx_test);
    return EXIT_USAGE;
  }
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-')
      continue;
    if (!is_dir(argv[i])) {
      fprintf(stderr, "torc onnx-test: '%s' is not a folder; give a case "
              "folder (with model.onnx) or a folder of them\n", argv[i]);
      return EXIT_USAGE;
    }
  }
  if (torc_plugin_load("ref", NULL) != TORC_OK) {
    fprintf(stderr, "torc onnx-test: %s\n", torc_last_error());
    return torc_tool__exit_status(torc_last_status());
  }
  if (torc_plugin_load("cpu", NULL) != TORC_OK)
    torc_clear_error(); /* ref alone runs every op */
  tally t = {0, 0, 0};
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-')
      continue;
    char *mp = join(argv[i], "model.onnx");
    int single = is_file(mp);
    free(mp);
    if (single) {
      run_case(argv[i], &t);
      continue;
    }
    char **cases;
    int n = list_dirs(argv[i], "", 1, &cases);
    if (n <= 0) {
      fprintf(stderr, "torc onnx-test: '%s' holds no case (no model.onnx in "
              "it or in its folders)\n", argv[i]);
      free_list(cases, 0);
      return EXIT_USAGE;
    }
    for (int j = 0; j < n; j++)
      run_case(cases[j], &t);
    free_list(cases, n);
  }
  int total = t.pass + t.fail + t.unsup;
  printf("onnx-test: %d passed, %d failed, %d unsupported of %d cases\n",
         t.pass, t.fail, t.unsup, total);
  return (t.fail || (strict && t.unsup)) ? EXIT_RUNTIME : EXIT_OK;
}
