/* core/random.c — generators (seed + counter offset over Philox 4x32-10)
 * and the random creation functions. The numbers are computed by each
 * backend's kernels from torc/philox.h, so they are the same everywhere.
 */
#include <math.h>
#include <stdlib.h>

#include "torc/philox.h"
#include "internal.h"

struct torc_generator {
  uint64_t seed;
  uint64_t offset;
  pthread_mutex_t lock;
};

static torc_generator default_gen = {0, 0, PTHREAD_MUTEX_INITIALIZER};

void torc_manual_seed(uint64_t seed) {
  torc_generator_set_state(&default_gen, seed, 0);
}

torc_generator *torc_generator_new(uint64_t seed) {
  torc_generator *g = torc__calloc(1, sizeof *g);
  if (g == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory for a generator");
    return NULL;
  }
  g->seed = seed;
  pthread_mutex_init(&g->lock, NULL);
  return g;
}

void torc_generator_free(torc_generator *gen) {
  if (gen == NULL || gen == &default_gen)
    return;
  pthread_mutex_destroy(&gen->lock);
  torc__free(gen);
}

void torc_generator_get_state(const torc_generator *gen, uint64_t *seed,
                              uint64_t *offset) {
  torc_generator *g = gen ? (torc_generator *)gen : &default_gen;
  pthread_mutex_lock(&g->lock);
  if (seed)
    *seed = g->seed;
  if (offset)
    *offset = g->offset;
  pthread_mutex_unlock(&g->lock);
}

void torc_generator_set_state(torc_generator *gen, uint64_t seed,
                              uint64_t offset) {
  torc_generator *g = gen ? gen : &default_gen;
  pthread_mutex_lock(&g->lock);
  g->seed = seed;
  g->offset = offset;
  pthread_mutex_unlock(&g->lock);
}

void torc__generator_take(torc_generator *gen, uint64_t n, uint64_t *seed,
                          uint64_t *offset) {
  torc_generator *g = gen ? gen : &default_gen;
  pthread_mutex_lock(&g->lock);
  *seed = g->seed;
  *offset = g->offset;
  g->offset += n;
  pthread_mutex_unlock(&g->lock);
}

/* A fresh tensor filled by one of the random kernels. */
static torc_tensor *random_tensor(int op, const char *fn, const int64_t *shape,
                                  int ndim, torc_dtype dtype, torc_device dev,
                                  torc_generator *gen, torc_random_params *p) {
  torc_tensor *t = torc__empty(shape, ndim, dtype, dev);
  if (t == NULL)
    return NULL;
  uint64_t n = (uint64_t)torc__numel(shape, ndim);
  torc__generator_take(gen, n, &p->seed, &p->offset);
  if (n && torc__kernel_call(op, dtype, NULL, 0, &t, 1, p, sizeof *p)) {
    torc_release(t);
    return NULL;
  }
  return t;
}

static int need_float(const char *fn, torc_dtype dtype) {
  if (torc_dtype_is_float(dtype))
    return 1;
  torc_set_error(TORC_ERR_DTYPE,
                 "%s: dtype %s is not floating; use f32, f64, f16 or bf16 "
                 "(torc_randint gives integers)",
                 fn, torc_dtype_name(dtype));
  return 0;
}

torc_tensor *torc_rand(const int64_t *shape, int ndim, torc_dtype dtype,
                       torc_device dev, torc_generator *gen) {
  if (!need_float("torc_rand", dtype))
    return NULL;
  torc_random_params p = {0, 0, 0.0, 1.0, 0, 0};
  return torc__ret(random_tensor(TORC__OP_uniform_, "torc_rand", shape, ndim,
                                 dtype, dev, gen, &p));
}

torc_tensor *torc_randn(const int64_t *shape, int ndim, torc_dtype dtype,
                        torc_device dev, torc_generator *gen) {
  if (!need_float("torc_randn", dtype))
    return NULL;
  torc_random_params p = {0, 0, 0.0, 1.0, 0, 0};
  return torc__ret(random_tensor(TORC__OP_normal_, "torc_randn", shape, ndim,
                                 dtype, dev, gen, &p));
}

torc_tensor *torc_randint(int64_t low, int64_t high, const int64_t *shape,
                          int ndim, torc_dtype dtype, torc_device dev,
                          torc_generator *gen) {
  if (high <= low) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_randint: the range [%lld, %lld) is empty; high must "
                   "be greater than low",
                   (long long)low, (long long)high);
    return NULL;
  }
  if (dtype == TORC_BOOL || !torc_dtype_valid(dtype)) {
    torc_set_error(TORC_ERR_DTYPE,
                   "torc_randint: dtype %s is not supported; use an integer "
                   "or floating dtype",
                   torc_dtype_name(dtype));
    return NULL;
  }
  torc_random_params p = {0, 0, 0.0, 0.0, low, high};
  return torc__ret(random_tensor(TORC__OP_randint_, "torc_randint", shape,
                                 ndim, dtype, dev, gen, &p));
}

torc_tensor *torc_bernoulli(const torc_tensor *p, torc_generator *gen) {
  if (p == NULL) {
    torc__null_input("torc_bernoulli");
    return NULL;
  }
  if (!need_float("torc_bernoulli", p->dtype))
    return NULL;
  /* u < p with u uniform in [0, 1): 1 with probability p. */
  torc_random_params rp = {0, 0, 0.0, 1.0, 0, 0};
  torc_tensor *u = random_tensor(TORC__OP_uniform_, "torc_bernoulli", p->shape,
                                 p->ndim, p->dtype, p->storage->device, gen,
                                 &rp);
  torc_tensor *mask = u ? torc__binary(TORC__OP_lt, u, p) : NULL;
  torc_tensor *out = mask ? torc__cast(mask, p->dtype) : NULL;
  torc_release(u);
  torc_release(mask);
  return torc__ret(out);
}
