/* plugins/cpu/maxpool.c — "max_pool2d" and "max_pool2d_backward" for bf16
 * (mixed precision's activations): the forward for the 2x2, stride-2 pool
 * whose windows lie in the image (nn.MaxPool2d(2) of nearly every CNN),
 * rows across the pool, each row through the ISA's loop (mp_kern.h); the
 * backward for any geometry (it reads the indices), each plane summed in
 * f32 (windows may overlap) and rounded once. Other forward geometries
 * decline to the next provider. Ranked above a oneDNN plugin's bf16 pool,
 * whose vectors are SSE's.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

enum { MP_PRIORITY = TORC_CPU_PRIORITY + 15 };

/* The largest plane the backward sums on the stack. */
enum { MP_PLANE = 4096 };

/* 1 if t is a contiguous 4-D tensor of dtype dt. */
static int mp_plain4(const torc_ktensor *t, int32_t dt) {
  return t->ndim == 4 && t->dtype == dt && cpu_rowmajor(t);
}

typedef struct mp_job {
  const uint16_t *x;
  uint16_t *y;
  int64_t *ix;
  int64_t H, W, OH, OW;
  /* backward */
  const uint16_t *gy;
  const int64_t *gi;
  uint16_t *gx;
  atomic_int bad, oom;
} mp_job;

static void mp_fwd_task(void *ctx, int64_t lo, int64_t hi) {
  mp_job *j = ctx;
  const cpu_isa *isa = torc_cpu__isa;
  for (int64_t r = lo; r < hi; r++) { /* r = nc * OH + oh */
    int64_t nc = r / j->OH, oh = r % j->OH;
    const uint16_t *r0 = j->x + (nc * j->H + 2 * oh) * j->W;
    isa->mp2_row_bf16(r0, r0 + j->W, j->W, j->OW, 2 * oh * j->W,
                      j->y + r * j->OW, j->ix + r * j->OW);
  }
}

/* in x [N, C, H, W]; out y [N, C, OH, OW], indices (i64, ih * W + iw). */
static int k_max_pool2d(const torc_kernel_args *a) {
  const torc_pool_kparams *p = a->params;
  if (a->n_in != 1 || a->n_out != 2 || p == NULL ||
      a->params_size < sizeof *p)
    return TORC_KERNEL_DECLINED;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0], *ix = &a->out[1];
  if (!mp_plain4(x, TORC_BF16) || !mp_plain4(y, TORC_BF16) ||
      !mp_plain4(ix, TORC_I64) || p->kernel[0] != 2 || p->kernel[1] != 2 ||
      p->stride[0] != 2 || p->stride[1] != 2 || p->padding[0] != 0 ||
      p->padding[1] != 0 || p->dilation[0] != 1 || p->dilation[1] != 1)
    return TORC_KERNEL_DECLINED;
  mp_job j = {.H = x->shape[2], .W = x->shape[3], .OH = y->shape[2],
              .OW = y->shape[3]};
  if (y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1] ||
      2 * j.OH > j.H || 2 * j.OW > j.W ||
      memcmp(ix->shape, y->shape, sizeof(int64_t) * 4) != 0)
    return TORC_KERNEL_DECLINED; /* ceil_mode's last window: the others' */
  j.x = cpu_ptr(x, 0), j.y = cpu_ptr(y, 0);
  j.ix = (int64_t *)ix->data + ix->offset;
  int64_t rows = x->shape[0] * x->shape[1] * j.OH;
  int64_t grain = TORC_CPU_PAR_MIN / 4 / (j.OW > 0 ? 4 * j.OW : 1);
  if (rows > 0 && j.OW > 0)
    torc_cpu__parallel_for(a->n_threads, rows, grain > 1 ? grain : 1,
                           mp_fwd_task, &j);
  return TORC_OK;
}

static void mp_bwd_task(void *ctx, int64_t lo, int64_t hi) {
  mp_job *j = ctx;
  int64_t HW = j->H * j->W, OHW = j->OH * j->OW;
  float small[MP_PLANE];
  float *plane = HW <= MP_PLANE ? small : malloc(sizeof(float) * (size_t)HW);
  if (plane == NULL) {
    atomic_store(&j->oom, 1);
    return;
  }
  for (int64_t nc = lo; nc < hi; nc++) {
    const int64_t *gi = j->gi + nc * OHW;
    const uint16_t *gy = j->gy + nc * OHW;
    memset(plane, 0, sizeof(float) * (size_t)HW);
    for (int64_t o = 0; o < OHW; o++) {
      int64_t k = gi[o];
      uint32_t u = (uint32_t)gy[o] << 16;
      float g;
      memcpy(&g, &u, sizeof g);
      if (k < 0 || k >= HW)
        atomic_store(&j->bad, 1);
      else
        plane[k] += g;
    }
    uint16_t *gx = j->gx + nc * HW;
    for (int64_t i = 0; i < HW; i++) {
      uint32_t u;
      memcpy(&u, &plane[i], sizeof u);
      gx[i] = cpu_bf16_round(u);
    }
  }
  if (plane != small)
    free(plane);
}

/* in gy [N, C, OH, OW], indices; out gx [N, C, H, W] (each gy added at its
 * index). */
static int k_max_pool2d_backward(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return TORC_KERNEL_DECLINED;
  const torc_ktensor *gy = &a->in[0], *gi = &a->in[1], *gx = &a->out[0];
  if (!mp_plain4(gy, TORC_BF16) || !mp_plain4(gi, TORC_I64) ||
      !mp_plain4(gx, TORC_BF16) ||
      memcmp(gi->shape, gy->shape, sizeof(int64_t) * 4) != 0 ||
      gx->shape[0] != gy->shape[0] || gx->shape[1] != gy->shape[1])
    return TORC_KERNEL_DECLINED;
  mp_job j = {.H = gx->shape[2], .W = gx->shape[3], .OH = gy->shape[2],
              .OW = gy->shape[3]};
  j.gy = cpu_ptr(gy, 0), j.gx = cpu_ptr(gx, 0);
  j.gi = (const int64_t *)gi->data + gi->offset;
  atomic_init(&j.bad, 0);
  atomic_init(&j.oom, 0);
  int64_t planes = gx->shape[0] * gx->shape[1], HW = j.H * j.W;
  int64_t grain = TORC_CPU_PAR_MIN / 4 / (HW ? HW : 1);
  if (planes > 0 && HW > 0)
    torc_cpu__parallel_for(a->n_threads, planes, grain > 1 ? grain : 1,
                           mp_bwd_task, &j);
  if (atomic_load(&j.oom))
    return torc_cpu__set_error(TORC_ERR_OOM,
                               "cpu kernel 'max_pool2d_backward': out of "
                               "memory for a plane of %lld",
                               (long long)HW);
  if (atomic_load(&j.bad))
    return torc_cpu__set_error(TORC_ERR_RANGE,
                               "cpu kernel 'max_pool2d_backward': an index "
                               "lies outside the %lld positions of a plane",
                               (long long)HW);
  return TORC_OK;
}

int torc_cpu__register_maxpool(const torc_host *host, torc_plugin *self) {
  static const struct {
    const char *op;
    torc_kernel_fn fn;
  } table[] = {{"max_pool2d", k_max_pool2d},
               {"max_pool2d_backward", k_max_pool2d_backward}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    torc_kernel_reg reg = {
        .struct_size = sizeof reg,
        .device_type = "cpu",
        .op = table[i].op,
        .dtype = TORC_BF16,
        .priority = MP_PRIORITY,
        .fn = table[i].fn,
        .data = NULL,
        .flags = TORC_KERNEL_CONTIGUOUS,
    };
    int st = host->register_kernel(self, &reg);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}
