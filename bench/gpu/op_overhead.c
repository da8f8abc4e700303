/* bench/gpu/op_overhead.c — the cost of one dispatched op on a device, for
 * bench/gpu/check.sh: torc_add of two 16-float tensors made on the cpu and
 * moved to DEVICE, timed three ways, each the best of 5 rounds:
 *   torc op_ns DEVICE NS        queued: a loop of adds, one synchronize at
 *                               the end (the host's cost per op)
 *   torc op_sync_ns DEVICE NS   each add followed by torc_synchronize (the
 *                               round trip to the device and back)
 *   torc autograd_ns DEVICE NS  forward + backward of one torc_mul with
 *                               autograd, gradients zeroed each time
 * A measurement that fails prints its line with "-" and the error on
 * stderr, and the others still run.
 *
 *   op_overhead DEVICE   (cpu, cuda:0, sim:0; ref and DEVICE's plugin are
 *                         loaded: cuda for cuda:N, sim for sim:N, cpu's
 *                         plugin for cpu)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "torc/torc.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fail(const char *measure, const char *dev) {
  printf("torc %s %s -\n", measure, dev);
  fprintf(stderr, "op_overhead: %s on %s: %s\n", measure, dev,
          torc_last_error());
  torc_clear_error();
}

/* A 16-float tensor of N(0, 1) samples on DEV (made on the cpu: the device
 * need not have a random kernel). */
static torc_tensor *input(torc_device dev, double fill) {
  int64_t shape[1] = {16};
  torc_tensor *h = fill != 0 ? torc_ones(shape, 1, TORC_F32, TORC_CPU)
                             : torc_randn(shape, 1, TORC_F32, TORC_CPU, NULL);
  if (h == NULL || torc_device_is_host(dev))
    return h;
  torc_tensor *d = torc_to(h, dev);
  torc_release(h);
  return d;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: op_overhead DEVICE\n");
    return 2;
  }
  const char *name = argv[1];
  torc_device dev;
  const char *plugin = strncmp(name, "cuda", 4) == 0  ? "cuda"
                       : strncmp(name, "sim", 3) == 0 ? "sim"
                                                      : "cpu";
  if (torc_set_num_threads(1) != TORC_OK ||
      torc_plugin_load("ref", NULL) != TORC_OK ||
      torc_plugin_load(plugin, NULL) != TORC_OK ||
      torc_device_parse(name, &dev) != TORC_OK) {
    fprintf(stderr, "op_overhead: %s: %s\n", name, torc_last_error());
    return 2;
  }
  torc_tensor *a = input(dev, 0), *b = input(dev, 0), *g = input(dev, 1);
  if (a == NULL || b == NULL || g == NULL) {
    fprintf(stderr, "op_overhead: inputs on %s: %s\n", name,
            torc_last_error());
    return 1;
  }
  const int reps = 100000;
  double best = 1e30;
  int ok = 1;
  for (int r = 0; r < 5 && ok; r++) {
    double t0 = now();
    for (int i = 0; i < reps && ok; i++) {
      torc_tensor *c = torc_add(a, b);
      ok = c != NULL;
      torc_release(c);
    }
    ok = ok && torc_synchronize(dev) == TORC_OK;
    double ns = (now() - t0) / reps * 1e9;
    if (ns < best)
      best = ns;
  }
  if (ok)
    printf("torc op_ns %s %.1f\n", name, best);
  else
    fail("op_ns", name);

  best = 1e30;
  ok = 1;
  for (int r = 0; r < 5 && ok; r++) {
    double t0 = now();
    for (int i = 0; i < reps / 10 && ok; i++) {
      torc_tensor *c = torc_add(a, b);
      ok = c != NULL && torc_synchronize(dev) == TORC_OK;
      torc_release(c);
    }
    double ns = (now() - t0) / (reps / 10) * 1e9;
    if (ns < best)
      best = ns;
  }
  if (ok)
    printf("torc op_sync_ns %s %.1f\n", name, best);
  else
    fail("op_sync_ns", name);

  best = 1e30;
  ok = torc_set_requires_grad(a, 1) == TORC_OK;
  for (int r = 0; r < 5 && ok; r++) {
    double t0 = now();
    for (int i = 0; i < reps / 10 && ok; i++) {
      torc_tensor *y = torc_mul(a, b);
      ok = y != NULL && torc_backward(y, g, 0) == TORC_OK;
      torc_release(y);
      ok = ok && torc_zero_grad(a, 1) == TORC_OK;
    }
    ok = ok && torc_synchronize(dev) == TORC_OK;
    double ns = (now() - t0) / (reps / 10) * 1e9;
    if (ns < best)
      best = ns;
  }
  if (ok)
    printf("torc autograd_ns %s %.1f\n", name, best);
  else
    fail("autograd_ns", name);
  torc_release(a);
  torc_release(b);
  torc_release(g);
  torc_shutdown();
  return 0;
}
