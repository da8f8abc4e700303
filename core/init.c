/* core/init.c — parameter initialisation (torch.nn.init): fans and gains,
 * uniform / normal / constant fills, kaiming, xavier and orthogonal init,
 * and torc_module_init, which re-initialises a module tree by scheme.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_internal.h"

/* ---- checks and the no-grad bracket ---- */

/* t must be a floating tensor; `fn` names the caller. */
static torc_status check_float(const torc_tensor *t, const char *fn) {
  if (t == NULL)
    return torc__null_input(fn);
  if (!torc_dtype_is_float(t->dtype))
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: the tensor is %s; initialisation needs a "
                          "floating tensor (f32, f64, f16 or bf16)",
                          fn, torc_dtype_name(t->dtype));
  return TORC_OK;
}

/* Fills t from the random kernel `op` ("uniform_": [a, b); "normal_": mean
 * a, std b) without recording autograd. The numbers are drawn into a
 * contiguous tensor on t's device and copied in, so a strided t works. */
static torc_status fill_random(torc_tensor *t, int op, double a, double b,
                               torc_generator *gen) {
  int64_t n = torc__numel(t->shape, t->ndim);
  if (n == 0)
    return TORC_OK;
  torc_tensor *r =
      torc__empty(t->shape, t->ndim, t->dtype, t->storage->device);
  if (r == NULL)
    return torc_last_status();
  torc_random_params p = {0, 0, a, b, 0, 0};
  torc__generator_take(gen, (uint64_t)n, &p.seed, &p.offset);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc_status st =
      torc__kernel_call(op, t->dtype, NULL, 0, &r, 1, &p, sizeof p);
  if (st == TORC_OK)
    st = torc_copy_(t, r);
  torc_set_grad_mode(gm);
  torc_release(r);
  return st;
}

/* ---- gains and fans ---- */

double torc_init_gain(const char *nonlinearity, double param) {
  static const char *const ones[] = {
      "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
      "conv_transpose2d", "conv_transpose3d", "sigmoid"};
  if (nonlinearity == NULL) {
    torc__null_input("torc_init_gain");
    return -1;
  }
  for (size_t i = 0; i < sizeof ones / sizeof ones[0]; i++)
    if (strcmp(nonlinearity, ones[i]) == 0)
      return 1;
  if (strcmp(nonlinearity, "tanh") == 0)
    return 5.0 / 3;
  if (strcmp(nonlinearity, "relu") == 0)
    return sqrt(2.0);
  if (strcmp(nonlinearity, "leaky_relu") == 0)
    return sqrt(2.0 / (1 + param * param));
  if (strcmp(nonlinearity, "selu") == 0)
    return 3.0 / 4;
  torc_set_error(TORC_ERR_INVALID,
                 "torc_init_gain: unknown nonlinearity '%s'; use linear, "
                 "conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, "
                 "conv_transpose3d, sigmoid, tanh, relu, leaky_relu or selu",
                 nonlinearity);
  return -1;
}

torc_status torc_init_fans(const torc_tensor *t, int64_t *fan_in,
                           int64_t *fan_out) {
  if (t == NULL)
    return torc__null_input("torc_init_fans");
  if (t->ndim < 2) {
    char b[64];
    return torc_set_error(TORC_ERR_SHAPE,
                          "torc_init_fans: fan in and fan out cannot be "
                          "computed for a tensor of shape %s (fewer than 2 "
                          "dims); use torc_init_uniform_ or torc_init_normal_ "
                          "with explicit bounds for biases and vectors",
                          torc__shape_str(t->shape, t->ndim, b, sizeof b));
  }
  int64_t field = 1;
  for (int i = 2; i < t->ndim; i++)
    field *= t->shape[i];
  if (fan_in)
    *fan_in = t->shape[1] * field;
  if (fan_out)
    *fan_out = t->shape[0] * field;
  return TORC_OK;
}

/* The fan of `mode` ("fan_in", NULL = "fan_in", or "fan_out"). */
static torc_status mode_fan(const torc_tensor *t, const char *mode,
                            const char *fn, int64_t *fan) {
  int64_t in = 0, out = 0;
  if (mode != NULL && strcmp(mode, "fan_in") != 0 &&
      strcmp(mode, "fan_out") != 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: mode '%s' is not supported; use fan_in or "
                          "fan_out",
                          fn, mode);
  torc_status st = torc_init_fans(t, &in, &out);
  if (st)
    return st;
  *fan = (mode == NULL || strcmp(mode, "fan_in") == 0) ? in : out;
  return TORC_OK;
}

/* ---- plain fills ---- */

torc_status torc_init_uniform_(torc_tensor *t, double low, double high,
                               torc_generator *gen) {
  torc_status st = check_float(t, "torc_init_uniform_");
  if (st)
    return st;
  if (!(low <= high))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_init_uniform_: the range [%g, %g) is empty; "
                          "low must not exceed high",
                          low, high);
  return fill_random(t, TORC__OP_uniform_, low, high, gen);
}

torc_status torc_init_normal_(torc_tensor *t, double mean, double std,
                              torc_generator *gen) {
  torc_status st = check_float(t, "torc_init_normal_");
  if (st)
    return st;
  if (!(std >= 0))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_init_normal_: std is %g; it must be >= 0",
                          std);
  return fill_random(t, TORC__OP_normal_, mean, std, gen);
}

torc_status torc_init_constant_(torc_tensor *t, double value) {
  torc_status st = check_float(t, "torc_init_constant_");
  if (st)
    return st;
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  st = torc_fill_(t, value);
  torc_set_grad_mode(gm);
  return st;
}

torc_status torc_init_zeros_(torc_tensor *t) {
  return torc_init_constant_(t, 0);
}

torc_status torc_init_ones_(torc_tensor *t) {
  return torc_init_constant_(t, 1);
}

/* ---- kaiming and xavier ---- */

/* std = gain(nonlinearity, a) / sqrt(fan), as torch.nn.init's kaiming_*. */
static torc_status kaiming_std(const torc_tensor *t, double a,
                               const char *mode, const char *nonlinearity,
                               const char *fn, double *std) {
  torc_status st = check_float(t, fn);
  if (st)
    return st;
  int64_t fan = 0;
  if ((st = mode_fan(t, mode, fn, &fan)))
    return st;
  double gain = torc_init_gain(nonlinearity ? nonlinearity : "leaky_relu", a);
  if (gain < 0)
    return torc_last_status();
  *std = fan > 0 ? gain / sqrt((double)fan) : 0;
  return TORC_OK;
}

torc_status torc_init_kaiming_uniform_(torc_tensor *t, double a,
                                       const char *mode,
                                       const char *nonlinearity,
                                       torc_generator *gen) {
  double std = 0;
  torc_status st = kaiming_std(t, a, mode, nonlinearity,
                               "torc_init_kaiming_uniform_", &std);
  if (st)
    return st;
  double bound = sqrt(3.0) * std;
  return fill_random(t, TORC__OP_uniform_, -bound, bound, gen);
}

torc_status torc_init_kaiming_normal_(torc_tensor *t, double a,
                                      const char *mode,
                                      const char *nonlinearity,
                                      torc_generator *gen) {
  double std = 0;
  torc_status st = kaiming_std(t, a, mode, nonlinearity,
                               "torc_init_kaiming_normal_", &std);
  if (st)
    return st;
  return fill_random(t, TORC__OP_normal_, 0, std, gen);
}

/* std = gain sqrt(2 / (fan_in + fan_out)). */
static torc_status xavier_std(const torc_tensor *t, double gain,
                              const char *fn, double *std) {
  torc_status st = check_float(t, fn);
  if (st)
    return st;
  int64_t in = 0, out = 0;
  if ((st = torc_init_fans(t, &in, &out)))
    return st;
  *std = in + out > 0 ? gain * sqrt(2.0 / (double)(in + out)) : 0;
  return TORC_OK;
}

torc_status torc_init_xavier_uniform_(torc_tensor *t, double gain,
                                      torc_generator *gen) {
  double std = 0;
  torc_status st = xavier_std(t, gain, "torc_init_xavier_uniform_", &std);
  if (st)
    return st;
  double bound = sqrt(3.0) * std;
  return fill_random(t, TORC__OP_uniform_, -bound, bound, gen);
}

torc_status torc_init_xavier_normal_(torc_tensor *t, double gain,
                                     torc_generator *gen) {
  double std = 0;
  torc_status st = xavier_std(t, gain, "torc_init_xavier_normal_", &std);
  if (st)
    return st;
  return fill_random(t, TORC__OP_normal_, 0, std, gen);
}

/* ---- orthogonal ---- */

/* Thin QR of a (m x n, m >= n, row-major) by Householder reflections:
 * q (m x n) receives Q with each column j multiplied by sign(R[j][j]),
 * which makes the factorisation unique, as torch.nn.init.orthogonal_
 * does after torch.linalg.qr. a is overwritten. */
static void householder_q(double *a, int64_t m, int64_t n, double *q,
                          double *v) {
  double *vs = v; /* n reflectors of length m, reflector k in vs + k m */
  double *diag = v + m * n;
  for (int64_t k = 0; k < n; k++) {
    double *vk = vs + k * m, norm = 0;
    for (int64_t i = k; i < m; i++)
      norm += a[i * n + k] * a[i * n + k];
    norm = sqrt(norm);
    double alpha = a[k * n + k] > 0 ? -norm : norm;
    for (int64_t i = 0; i < m; i++)
      vk[i] = i < k ? 0 : a[i * n + k];
    vk[k] -= alpha;
    double vn = 0;
    for (int64_t i = k; i < m; i++)
      vn += vk[i] * vk[i];
    if (vn > 0) { /* A[k:, k:] -= 2 v (v^T A[k:, k:]) / (v^T v) */
      for (int64_t j = k; j < n; j++) {
        double s = 0;
        for (int64_t i = k; i < m; i++)
          s += vk[i] * a[i * n + j];
        s *= 2 / vn;
        for (int64_t i = k; i < m; i++)
          a[i * n + j] -= s * vk[i];
      }
      for (int64_t i = k; i < m; i++)
        vk[i] /= sqrt(vn);
    }
    diag[k] = a[k * n + k];
  }
  /* Q = H_0 ... H_{n-1} I[:, :n], applied right to left. */
  for (int64_t i = 0; i < m * n; i++)
    q[i] = 0;
  for (int64_t j = 0; j < n; j++)
    q[j * n + j] = 1;
  for (int64_t k = n - 1; k >= 0; k--) {
    const double *vk = vs + k * m;
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t i = k; i < m; i++)
        s += vk[i] * q[i * n + j];
      for (int64_t i = k; i < m; i++)
        q[i * n + j] -= 2 * s * vk[i];
    }
  }
  for (int64_t j = 0; j < n; j++) {
    double ph = (diag[j] > 0) - (diag[j] < 0);
    for (int64_t i = 0; i < m; i++)
      q[i * n + j] *= ph;
  }
}

torc_status torc_init_orthogonal_(torc_tensor *t, double gain,
                                  torc_generator *gen) {
  torc_status st = check_float(t, "torc_init_orthogonal_");
  if (st)
    return st;
  if (t->ndim < 2) {
    char b[64];
    return torc_set_error(TORC_ERR_SHAPE,
                          "torc_init_orthogonal_: the tensor has shape %s; "
                          "only tensors with 2 or more dims can be made "
                          "orthogonal",
                          torc__shape_str(t->shape, t->ndim, b, sizeof b));
  }
  int64_t numel = torc__numel(t->shape, t->ndim);
  if (numel == 0)
    return TORC_OK;
  int64_t rows = t->shape[0], cols = numel / rows;
  /* The normal matrix is drawn on the cpu in f64, so every device gets
   * the same values for one seed. */
  int scope = torc_scope_begin();
  torc_tensor *g = torc_randn(TORC_SHAPE(rows, cols), TORC_F64, TORC_CPU, gen);
  int64_t m = rows > cols ? rows : cols, n = rows > cols ? cols : rows;
  double *a = torc__malloc(sizeof(double) * (size_t)(m * n));
  double *q = torc__malloc(sizeof(double) * (size_t)(m * n));
  double *v = torc__malloc(sizeof(double) * (size_t)(m * n + n));
  if (g == NULL || a == NULL || q == NULL || v == NULL) {
    st = g == NULL ? torc_last_status()
                   : torc_set_error(TORC_ERR_OOM,
                                    "torc_init_orthogonal_: out of memory for "
                                    "a %lld x %lld matrix",
                                    (long long)rows, (long long)cols);
    goto done;
  }
  const double *gd = torc_data(g);
  /* a = the normal matrix, transposed when it is wide (rows < cols). */
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      if (rows >= cols)
        a[i * n + j] = gd[i * cols + j];
      else
        a[j * n + i] = gd[i * cols + j];
    }
  householder_q(a, m, n, q, v);
  /* back to [rows, cols] in a, times gain */
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++)
      a[i * cols + j] = gain * (rows >= cols ? q[i * n + j] : q[j * n + i]);
  torc_tensor *h = torc_from_host(a, t->shape, t->ndim, TORC_F64, TORC_CPU);
  torc_tensor *d = torc_to(h, t->storage->device);
  if (d == NULL) {
    st = torc_last_status();
    goto done;
  }
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  st = torc_copy_(t, d);
  torc_set_grad_mode(gm);
done:
  torc__free(a);
  torc__free(q);
  torc__free(v);
  torc_scope_end(scope);
  return st;
}

/* ---- module trees ---- */

/* The schemes, as the static strings stored on modules. */
static const char *const schemes[] = {
    "default", "kaiming_uniform", "kaiming_normal", "xavier_uniform",
    "xavier_normal", "orthogonal"};

static torc_status init_tree(torc_module *m, const char *scheme,
                             torc_generator *gen) {
  torc__module_set_init_scheme(m, scheme);
  torc_status st = torc__module_reset(m, scheme, gen);
  for (int i = 0; st == TORC_OK && i < torc_module_child_count(m); i++)
    st = init_tree(torc_module_child_at(m, i), scheme, gen);
  return st;
}

torc_status torc_module_init(struct torc_module *m, const char *scheme,
                             torc_generator *gen) {
  if (m == NULL)
    return torc__null_input("torc_module_init");
  const char *s = NULL;
  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
    if (scheme == NULL ? i == 0 : strcmp(scheme, schemes[i]) == 0)
      s = schemes[i];
  if (s == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_module_init: unknown init scheme '%s'; use "
                          "default, kaiming_uniform, kaiming_normal, "
                          "xavier_uniform, xavier_normal or orthogonal",
                          scheme);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc_status st = init_tree(m, s, gen);
  torc_set_grad_mode(gm);
  return st;
}
