/* tests/dist_check.c — the parts of training in several processes that
 * test_dist.sh checks from C, run under `mpirun -np 2`:
 *
 *   dist_check ddp        DDP on a model of many parameters: buckets start
 *                         during backward (counted), the gradients are the
 *                         ranks' average (against a local backward and an
 *                         explicit all-reduce), no_sync accumulates, the
 *                         parameters were broadcast from rank 0
 *   dist_check collectives  all-reduce (sum, avg, max, lists), broadcast,
 *                         all-gather, reduce-scatter, barrier, and the
 *                         errors (a device the communicator does not move,
 *                         mixed dtypes, bad shapes, a bad root)
 *   dist_check compare A B RTOL   two safetensors files hold the same
 *                         tensors within RTOL (relative to each tensor's
 *                         largest magnitude); no MPI
 *
 * Prints "ok: ..." lines; status 0 when every check holds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

static int failures;
static int rank_;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "rank %d: FAIL %s:%d: %s: ", rank_, __FILE__,           \
              __LINE__, #cond);                                                \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, " (last error: %s)\n", torc_last_error());              \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static double max_abs_diff(const torc_tensor *a, const torc_tensor *b,
                           double *scale) {
  int64_t n = torc_numel(a);
  int scope = torc_scope_begin(); /* the f64 copies */
  double *x = malloc(sizeof(double) * (size_t)n),
         *y = malloc(sizeof(double) * (size_t)n);
  torc_tensor *ad = torc_to_dtype(a, TORC_F64), *bd = torc_to_dtype(b, TORC_F64);
  double d = INFINITY;
  if (x && y && ad && bd &&
      torc_to_host(ad, x, sizeof(double) * (size_t)n) == TORC_OK &&
      torc_to_host(bd, y, sizeof(double) * (size_t)n) == TORC_OK) {
    d = 0;
    *scale = 0;
    for (int64_t i = 0; i < n; i++) {
      d = fmax(d, fabs(x[i] - y[i]));
      *scale = fmax(*scale, fabs(x[i]));
    }
  }
  free(x), free(y);
  torc_scope_end(scope);
  return d;
}

/* ---- compare ---- */

static int compare(const char *pa, const char *pb, double rtol) {
  torc_safetensors *a = torc_safetensors_open(pa),
                   *b = torc_safetensors_open(pb);
  if (a == NULL || b == NULL) {
    fprintf(stderr, "cannot open %s or %s: %s\n", pa, pb, torc_last_error());
    return 1;
  }
  CHECK(torc_safetensors_count(a) == torc_safetensors_count(b),
        "%d tensors against %d", torc_safetensors_count(a),
        torc_safetensors_count(b));
  double worst = 0;
  for (int i = 0; i < torc_safetensors_count(a); i++) {
    const char *name = torc_safetensors_name(a, i);
    int scope = torc_scope_begin();
    torc_tensor *x = torc_safetensors_get(a, name, TORC_CPU);
    torc_tensor *y = torc_safetensors_get(b, name, TORC_CPU);
    CHECK(x && y, "tensor %s missing", name);
    if (x && y) {
      double scale = 0, d = max_abs_diff(x, y, &scale);
      double rel = d / (scale > 0 ? scale : 1);
      worst = fmax(worst, rel);
      CHECK(rel <= rtol, "%s differs by %.3g relative (allowed %.3g)", name,
            rel, rtol);
    }
    torc_scope_end(scope);
  }
  printf("ok: %d tensors, largest relative difference %.3g (allowed %.3g)\n",
         torc_safetensors_count(a), worst, rtol);
  torc_safetensors_close(a);
  torc_safetensors_close(b);
  return failures != 0;
}

/* ---- ddp ---- */

static torc_module *make_model(int layers, int64_t width) {
  torc_module *seq = torc_sequential_new();
  for (int i = 0; seq && i < layers; i++) {
    if (torc_sequential_append(seq, torc_linear_new(width, width, 1)) ||
        (i + 1 < layers && torc_sequential_append(seq, torc_module_build("relu", NULL)))) {
      torc_module_free(seq);
      return NULL;
    }
  }
  return seq;
}

/* The loss of a batch only this rank has (seeded by the rank). */
static torc_tensor *rank_loss(torc_module *m, int64_t width, int step) {
  torc_manual_seed(1000 + 17 * (uint64_t)rank_ + (uint64_t)step);
  int64_t shape[2] = {8, width};
  torc_tensor *x = torc_randn(shape, 2, TORC_F32, TORC_CPU, NULL);
  torc_tensor *y = torc_module_forward(m, x);
  torc_tensor *sq = torc_mul(y, y);
  return torc_mean(sq, NULL, 0, 0);
}

static int ddp(void) {
  const int layers = 12;
  const int64_t width = 128; /* 12 * (128*128 + 128) floats: 0.8 MB */
  /* Each rank builds the model from its own seed: the broadcast makes them
   * rank 0's. */
  torc_manual_seed(42 + (uint64_t)rank_);
  torc_module *m = make_model(layers, width);
  torc_module *ref = NULL;
  CHECK(m != NULL, "model");
  if (m == NULL)
    return 1;
  torc_ddp *d = torc_ddp_new(m, &(torc_ddp_opts){.bucket_mb = 0.1});
  CHECK(d != NULL, "torc_ddp_new");
  if (d == NULL)
    return 1;
  /* The parameters are rank 0's on every rank. */
  torc_named_tensor *p = NULL;
  int np = torc_module_named_parameters(m, &p);
  for (int i = 0; i < np; i++) {
    torc_tensor *c = torc_clone(p[i].tensor), *mx = torc_clone(p[i].tensor);
    CHECK(torc_dist_all_reduce(&mx, 1, TORC_DIST_MAX) == TORC_OK &&
              torc_dist_all_reduce(&c, 1, TORC_DIST_AVG) == TORC_OK,
          "all-reduce of %s", p[i].name);
    double s = 0;
    CHECK(max_abs_diff(c, mx, &s) == 0, "%s differs between ranks after the "
          "broadcast", p[i].name);
    torc_release(c), torc_release(mx);
  }

  /* A local backward (no_sync) and an explicit average: the expected
   * gradients. */
  torc_tensor **want = calloc((size_t)np, sizeof *want);
  int scope = torc_scope_begin();
  torc_ddp_no_sync(d, 1);
  torc_tensor *loss = rank_loss(m, width, 0);
  CHECK(torc_backward(loss, NULL, 0) == TORC_OK, "local backward");
  torc_scope_end(scope);
  for (int i = 0; i < np; i++) {
    want[i] = torc_clone(torc_grad_of(p[i].tensor));
    torc_zero_grad(p[i].tensor, 1);
  }
  CHECK(torc_dist_all_reduce(want, np, TORC_DIST_AVG) == TORC_OK,
        "all-reduce of the list of expected gradients");
  torc_ddp_stats st;
  torc_ddp_get_stats(d, &st);
  CHECK(st.steps == 0, "no_sync backward counted as a synced one (%lld)",
        (long long)st.steps);

  /* The same batch through DDP. */
  torc_ddp_no_sync(d, 0);
  scope = torc_scope_begin();
  loss = rank_loss(m, width, 0);
  CHECK(torc_backward(loss, NULL, 0) == TORC_OK, "DDP backward");
  torc_scope_end(scope);
  torc_ddp_get_stats(d, &st);
  double worst = 0;
  for (int i = 0; i < np; i++) {
    double s = 0, diff = max_abs_diff(torc_grad_of(p[i].tensor), want[i], &s);
    worst = fmax(worst, diff / (s > 0 ? s : 1));
  }
  CHECK(worst < 1e-6, "DDP's gradients differ from the average by %.3g",
        worst);
  CHECK(st.buckets >= 8, "only %d buckets for a 0.8 MB model at 0.1 MB",
        st.buckets);
  /* Every bucket but the last (holding the first layer, whose gradient
   * is the last computed) starts from a hook while backward still runs. */
  CHECK(st.started_in_backward >= st.buckets - 1,
        "%d of %d buckets started during backward", st.started_in_backward,
        st.buckets);
  CHECK(st.steps == 1, "steps %lld", (long long)st.steps);
  if (rank_ == 0)
    printf("ok: ddp: %d parameters, %d buckets, %d started during backward, "
           "gradients the average within %.3g\n",
           np, st.buckets, st.started_in_backward, worst);

  /* no_sync twice, then a synced backward: the sum of three local
   * gradients, averaged across ranks. */
  for (int i = 0; i < np; i++)
    torc_zero_grad(p[i].tensor, 1);
  torc_ddp_no_sync(d, 1);
  for (int k = 0; k < 3; k++) {
    if (k == 2)
      torc_ddp_no_sync(d, 0);
    scope = torc_scope_begin();
    loss = rank_loss(m, width, 10 + k);
    CHECK(torc_backward(loss, NULL, 0) == TORC_OK, "accumulating backward");
    torc_scope_end(scope);
  }
  /* The expected: the same three locally, summed, averaged. */
  ref = make_model(layers, width);
  torc_named_tensor *q = NULL;
  int nq = torc_module_named_parameters(ref, &q);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  for (int i = 0; i < nq && i < np; i++)
    CHECK(torc_copy_(q[i].tensor, p[i].tensor) == TORC_OK, "copy");
  torc_set_grad_mode(gm);
  for (int k = 0; k < 3; k++) {
    scope = torc_scope_begin();
    loss = rank_loss(ref, width, 10 + k);
    CHECK(torc_backward(loss, NULL, 0) == TORC_OK, "reference backward");
    torc_scope_end(scope);
  }
  for (int i = 0; i < np; i++) {
    torc_release(want[i]);
    want[i] = torc_clone(torc_grad_of(q[i].tensor));
  }
  CHECK(torc_dist_all_reduce(want, np, TORC_DIST_AVG) == TORC_OK,
        "all-reduce");
  worst = 0;
  for (int i = 0; i < np; i++) {
    double s = 0, diff = max_abs_diff(torc_grad_of(p[i].tensor), want[i], &s);
    worst = fmax(worst, diff / (s > 0 ? s : 1));
  }
  CHECK(worst < 1e-5, "no_sync accumulation differs by %.3g", worst);
  if (rank_ == 0)
    printf("ok: ddp: no_sync for 2 backwards, then a synced one: the "
           "average of the sums within %.3g\n",
           worst);
  for (int i = 0; i < np; i++)
    torc_release(want[i]);
  free(want);
  torc_named_tensors_free(p, np);
  torc_named_tensors_free(q, nq);
  torc_ddp_free(d);
  torc_module_free(m);
  torc_module_free(ref);
  return failures != 0;
}

/* ---- collectives ---- */

static int collectives(void) {
  int world = torc_dist_world_size();
  int scope = torc_scope_begin();
  float v[3] = {(float)rank_ + 1, 10.0f * (float)rank_, -1};
  torc_tensor *a = torc_from_host(v, (int64_t[]){3}, 1, TORC_F32, TORC_CPU);
  torc_tensor *b = torc_full((int64_t[]){2, 2}, 2, (double)rank_, TORC_F32,
                             TORC_CPU);
  torc_tensor *list[2] = {a, b};
  CHECK(torc_dist_all_reduce(list, 2, TORC_DIST_SUM) == TORC_OK, "sum");
  float got[3];
  torc_to_host(a, got, sizeof got);
  double bsum = 0;
  torc_item(torc_sum(b, NULL, 0, 0), &bsum);
  /* ranks 0..w-1: sum of (r + 1), 10 * sum of r, -w; b: 4 * sum of r */
  double sr = world * (world - 1) / 2.0;
  CHECK(got[0] == (float)(sr + world) && got[1] == (float)(10 * sr) &&
            got[2] == (float)-world && bsum == 4 * sr,
        "sum gave %g %g %g and %g", got[0], got[1], got[2], bsum);
  torc_tensor *c = torc_full((int64_t[]){4}, 1, (double)rank_, TORC_F64,
                             TORC_CPU);
  CHECK(torc_dist_all_reduce(&c, 1, TORC_DIST_MAX) == TORC_OK, "max");
  double cm = 0;
  torc_item(torc_amax(c, NULL, 0, 0), &cm);
  CHECK(cm == world - 1, "max gave %g", cm);
  torc_tensor *e = torc_full((int64_t[]){5}, 1, (double)rank_ * 2, TORC_F32,
                             TORC_CPU);
  CHECK(torc_dist_all_reduce(&e, 1, TORC_DIST_AVG) == TORC_OK, "avg");
  double em = 0;
  torc_item(torc_mean(e, NULL, 0, 0), &em);
  CHECK(fabs(em - (world - 1)) < 1e-6, "avg gave %g", em);
  /* broadcast from the last rank, of a non-contiguous view */
  torc_tensor *f = torc_full((int64_t[]){3, 4}, 2, (double)rank_, TORC_F32,
                             TORC_CPU);
  torc_tensor *ft = torc_transpose(f, 0, 1);
  CHECK(torc_dist_broadcast(&ft, 1, world - 1) == TORC_OK, "broadcast");
  double fm = 0;
  torc_item(torc_amin(f, NULL, 0, 0), &fm);
  CHECK(fm == world - 1, "broadcast gave %g", fm);
  /* all-gather and reduce-scatter */
  torc_tensor *in = torc_full((int64_t[]){2, 3}, 2, (double)rank_, TORC_F32,
                              TORC_CPU);
  torc_tensor *out = torc_zeros((int64_t[]){2 * world, 3}, 2, TORC_F32,
                                TORC_CPU);
  CHECK(torc_dist_all_gather(out, in) == TORC_OK, "all-gather");
  float og[64];
  torc_to_host(out, og, sizeof(float) * 6 * (size_t)world);
  for (int r = 0; r < world; r++)
    CHECK(og[6 * r] == (float)r && og[6 * r + 5] == (float)r,
          "all-gather block %d holds %g", r, og[6 * r]);
  torc_tensor *rs = torc_zeros((int64_t[]){2, 3}, 2, TORC_F32, TORC_CPU);
  CHECK(torc_dist_reduce_scatter(rs, out, TORC_DIST_SUM) == TORC_OK,
        "reduce-scatter");
  double rsm = 0;
  torc_item(torc_amax(rs, NULL, 0, 0), &rsm);
  CHECK(rsm == (double)rank_ * world, "reduce-scatter gave %g", rsm);
  CHECK(torc_dist_barrier() == TORC_OK, "barrier");
  /* errors */
  torc_tensor *mix[2] = {a, c};
  CHECK(torc_dist_all_reduce(mix, 2, TORC_DIST_SUM) == TORC_ERR_DTYPE,
        "mixed dtypes");
  CHECK(strstr(torc_last_error(), "f64") != NULL, "the message names f64");
  CHECK(torc_dist_broadcast(&a, 1, world) == TORC_ERR_INVALID, "bad root");
  CHECK(torc_dist_all_gather(in, in) == TORC_ERR_SHAPE, "bad gather shape");
  torc_tensor *iv = torc_full((int64_t[]){2}, 1, 1, TORC_I64, TORC_CPU);
  CHECK(torc_dist_all_reduce(&iv, 1, TORC_DIST_SUM) == TORC_ERR_DTYPE,
        "an integer reduction");
  torc_device sim;
  if (torc_device_parse("sim:0", &sim) == TORC_OK) {
    torc_tensor *s = torc_ones((int64_t[]){2}, 1, TORC_F32, sim);
    CHECK(s != NULL, "a sim tensor");
    CHECK(torc_dist_all_reduce(&s, 1, TORC_DIST_SUM) == TORC_ERR_DEVICE,
          "a sim tensor on the mpi communicator");
    CHECK(strstr(torc_last_error(), "moves cpu tensors") != NULL,
          "the message says what the communicator moves");
  }
  torc_scope_end(scope);
  if (rank_ == 0 && failures == 0)
    printf("ok: collectives on %d ranks: sum, avg, max, lists, broadcast of "
           "a view, all-gather, reduce-scatter, barrier, and 5 errors\n",
           world);
  return failures != 0;
}

int main(int argc, char **argv) {
  int cmp = argc >= 5 && strcmp(argv[1], "compare") == 0;
  if (!cmp &&
      (argc < 2 || (strcmp(argv[1], "ddp") && strcmp(argv[1], "collectives")))) {
    fprintf(stderr, "usage: dist_check ddp | collectives | compare A B RTOL\n");
    return 2;
  }
  if (torc_plugin_load("ref", NULL) != TORC_OK ||
      torc_plugin_load("sim", NULL) != TORC_OK) {
    fprintf(stderr, "%s\n", torc_last_error());
    return 1;
  }
  if (cmp) {
    int rc = compare(argv[2], argv[3], atof(argv[4]));
    torc_shutdown();
    return rc;
  }
  if (torc_dist_init(&(torc_dist_opts){.backend = "mpi", .timeout_s = 60})) {
    fprintf(stderr, "torc_dist_init: %s\n", torc_last_error());
    return 1;
  }
  rank_ = torc_dist_rank();
  int rc = strcmp(argv[1], "ddp") == 0 ? ddp() : collectives();
  torc_dist_finalize(rc != 0);
  torc_shutdown();
  return rc;
}
