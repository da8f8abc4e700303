/* tests/layers_testutil.h — shared by the built-in layers' tests
 * (test_layers, test_layers_init, test_layers_errors): shape checks, the
 * sim device, setting a parameter, and the statistics that check an init
 * scheme's values. Included after testutil.h, once per program. */
#ifndef TORC_LAYERS_TESTUTIL_H
#define TORC_LAYERS_TESTUTIL_H

#include <math.h>

#include "testutil.h"

static inline void expect_shape(const torc_tensor *t, const int64_t *shape,
                                int nd) {
  assert_torc(t);
  assert_int_equal(torc_ndim(t), nd);
  for (int i = 0; i < nd; i++)
    assert_int_equal(torc_size(t, i), shape[i]);
}

static inline torc_device sim0(void) {
  torc_device d = TORC_CPU;
  assert_ok(torc_device_parse("sim:0", &d));
  return d;
}

/* Copies src into m's parameter or buffer `name` (as PyTorch's
 * `with torch.no_grad(): p.copy_(src)`). */
static inline void set_t(torc_module *m, const char *name,
                         const torc_tensor *src) {
  torc_tensor *t = torc_module_parameter(m, name);
  if (t == NULL)
    t = torc_module_buffer(m, name);
  assert_non_null(t);
  torc_grad_mode g = torc_set_grad_mode(TORC_NO_GRAD);
  torc_status st = torc_copy_(t, src);
  torc_set_grad_mode(g);
  assert_int_equal(st, TORC_OK);
}


/* min, max, mean and std of t's values. */
typedef struct stats {
  double min, max, mean, std;
  int64_t n;
} stats;

static inline stats stats_of(const torc_tensor *t) {
  stats s = {INFINITY, -INFINITY, 0, 0, torc_numel(t)};
  double *v = test_values(t);
  assert_non_null(v);
  for (int64_t i = 0; i < s.n; i++) {
    s.min = v[i] < s.min ? v[i] : s.min;
    s.max = v[i] > s.max ? v[i] : s.max;
    s.mean += v[i] / (double)s.n;
  }
  for (int64_t i = 0; i < s.n; i++)
    s.std += (v[i] - s.mean) * (v[i] - s.mean) / (double)s.n;
  s.std = sqrt(s.std);
  free(v);
  return s;
}

/* Asserts every value of t lies in [-bound, bound], the largest magnitude
 * comes within `near` of the bound, and not all values are equal. */
static inline void expect_uniform(const torc_tensor *t, double bound,
                                  double near) {
  assert_non_null(t);
  stats s = stats_of(t);
  assert_true(s.min >= -bound && s.max <= bound);
  assert_true(s.max > bound * near || -s.min > bound * near);
  assert_true(s.max > s.min);
}

/* Asserts a a^T (rows < cols) or a^T a equals gain^2 I for a [r, c]. */
static inline void expect_orthogonal(const torc_tensor *t, int64_t r, int64_t c,
                                     double gain) {
  double *a = test_values(t);
  assert_non_null(a);
  int64_t k = r < c ? r : c;
  for (int64_t i = 0; i < k; i++)
    for (int64_t j = 0; j < k; j++) {
      double dot = 0;
      for (int64_t l = 0; l < (r < c ? c : r); l++)
        dot += r < c ? a[i * c + l] * a[j * c + l]
                     : a[l * c + i] * a[l * c + j];
      if (fabs(dot - (i == j ? gain * gain : 0)) > 1e-5) {
        print_error("(%lld, %lld): %g\n", (long long)i, (long long)j, dot);
        free(a);
        fail();
      }
    }
  free(a);
}

#endif /* TORC_LAYERS_TESTUTIL_H */
