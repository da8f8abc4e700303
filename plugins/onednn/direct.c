/* plugins/onednn/direct.c — conv2d_act for convolutions with few input
 * taps (C x kH x kW <= DIRECT_TAPS, one group, O a multiple of 16): a
 * network's first layer on gray or RGB images. There oneDNN's kernels are
 * bound by memory, not arithmetic: they write the whole convolution
 * output (32 x 28 x 28 floats an image for the benchmark CNN's first
 * layer) before the pool reads it back, four times what the layer hands
 * on. Here each image is copied once, padded, into a per-thread buffer;
 * the convolution runs a pool window's rows at a time into a small row
 * buffer (both in L1); the pool, the activation and the bias are applied
 * before anything is stored, and the result goes straight to y, in NCHW
 * or in nChw16c (y_blocked).
 *
 * The loops (direct_kern.h) are written once with GCC's vector
 * extensions, 16 output channels to a vector, and compiled three times
 * (AVX-512, AVX2 + FMA, the baseline); the CPU picks at run time, so
 * valgrind's CPU (no AVX-512) runs them too. relu and the max pool keep
 * NaN as torc's ops do (relu(NaN) = NaN, a NaN wins a window), so unlike
 * oneDNN's chain this kernel needs no scan of x; fused.c also sends it
 * the chain's chunks that hold a NaN or an infinity. (A NaN in w would
 * differ from ref at the borders, where this kernel multiplies the zero
 * padding by w and ref skips it: fused.c declines those.)
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "direct.h"

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* The padded image's rows and columns (the span the convolution reads,
 * padding included), and the floats of a thread's two buffers. */
typedef struct direct_sizes {
  int64_t Hp, Wp, rows;
  size_t xfl, cfl, per, wfl, bfl, tfl;
} direct_sizes;

static int sizes(const dnn_act_geo *cg, direct_sizes *z) {
  const dnn_conv_geo *g = &cg->g;
  if (g->G != 1 || g->O % 16 || g->O < 16 || g->C < 1 || g->kH < 1 ||
      g->kW < 1 || g->OH < 1 || g->OW < 1 ||
      (cg->act != TORC_ACT_NONE && cg->act != TORC_ACT_RELU) ||
      (cg->x_blocked && g->C % 16) ||
      (cg->has_pool && (cg->K[0] < 1 || cg->K[1] < 1 || cg->PH < 1 ||
                        cg->PW < 1)))
    return 0;
  z->Hp = (g->OH - 1) * g->S[0] + (g->kH - 1) * g->D[0] + 1;
  z->Wp = (g->OW - 1) * g->S[1] + (g->kW - 1) * g->D[1] + 1;
  z->rows = cg->has_pool ? cg->K[0] : 1;
  /* every factor is at most DIRECT_MAX_FLOATS: no product overflows */
  if (z->Hp > DIRECT_MAX_FLOATS || z->Wp > DIRECT_MAX_FLOATS ||
      z->rows > DIRECT_MAX_FLOATS || g->C > DIRECT_MAX_FLOATS ||
      g->OW > DIRECT_MAX_FLOATS || g->O > DIRECT_MAX_FLOATS ||
      g->kH * g->kW > DIRECT_MAX_FLOATS ||
      g->C * z->Hp > DIRECT_MAX_FLOATS ||
      g->C * z->Hp * z->Wp > DIRECT_MAX_FLOATS ||
      z->rows * g->OW > DIRECT_MAX_FLOATS ||
      z->rows * g->OW * g->O > DIRECT_MAX_FLOATS ||
      g->C * g->kH * g->kW > DIRECT_MAX_FLOATS ||
      g->C * g->kH * g->kW * g->O > DIRECT_MAX_FLOATS)
    return 0;
  int64_t taps = g->C * g->kH * g->kW;
  z->xfl = align16((size_t)(g->C * z->Hp * z->Wp));
  z->cfl = align16((size_t)(z->rows * g->OW * g->O));
  z->per = z->xfl + z->cfl;
  z->wfl = align16((size_t)(taps * g->O));
  z->bfl = align16((size_t)g->O);
  z->tfl = align16((size_t)taps * 2); /* int64_t offsets */
  return 1;
}

/* The build for this CPU: AVX-512 where it has AVX-512 F/DQ/BW/VL (and
 * the OS saves their state), else AVX2 + FMA, else the baseline; the
 * environment's TORC_CPU_ISA=scalar|avx2 (the cpu plugin's knob) forces
 * a lower one. */
static direct_image_fn pick(int pool) {
  const char *want = getenv("TORC_CPU_ISA");
  int level = 2;
  if (want && strcmp(want, "scalar") == 0)
    level = 0;
  else if (want && strcmp(want, "avx2") == 0)
    level = 1;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (level >= 2 && torc_dnn__direct_avx512 &&
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return pool ? torc_dnn__direct_pool_avx512 : torc_dnn__direct_avx512;
  if (level >= 1 && torc_dnn__direct_avx2 && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    return pool ? torc_dnn__direct_pool_avx2 : torc_dnn__direct_avx2;
#endif
  (void)level;
  return pool ? torc_dnn__direct_pool_base : torc_dnn__direct_base;
}

static int threads(void) {
  int nt = omp_get_max_threads();
  return nt < 1 ? 1 : nt;
}

size_t torc_dnn__direct_bytes(const dnn_act_geo *cg) {
  direct_sizes z;
  if (!sizes(cg, &z))
    return 0;
  return sizeof(float) *
         (z.wfl + z.bfl + z.tfl + z.per * (size_t)threads());
}

void torc_dnn__direct_run(const dnn_act_geo *cg, const float *x,
                          const float *w, const float *b, float *y, int64_t n0,
                          int64_t count, void *scratch) {
  const dnn_conv_geo *g = &cg->g;
  direct_sizes z;
  if (!sizes(cg, &z))
    return; /* the caller asked torc_dnn__direct_bytes first */
  int64_t taps = g->C * g->kH * g->kW;
  float *wt = scratch, *bb = wt + z.wfl;
  int64_t *toff = (int64_t *)(bb + z.bfl);
  float *per_thread = bb + z.bfl + z.tfl;
  for (int64_t o = 0; o < g->O; o++) {
    for (int64_t t = 0; t < taps; t++)
      wt[t * g->O + o] = w[o * taps + t];
    bb[o] = b ? b[o] : 0.0f;
  }
  for (int64_t ch = 0, t = 0; ch < g->C; ch++)
    for (int64_t i = 0; i < g->kH; i++)
      for (int64_t j = 0; j < g->kW; j++)
        toff[t++] = (ch * z.Hp + i * g->D[0]) * z.Wp + j * g->D[1];
  direct_ctx c = {.cg = cg,
                  .C = g->C,
                  .H = g->H,
                  .W = g->W,
                  .O = g->O,
                  .OH = g->OH,
                  .OW = g->OW,
                  .S = {g->S[0], g->S[1]},
                  .PL = {g->PL[0], g->PL[1]},
                  .Hp = z.Hp,
                  .Wp = z.Wp,
                  .taps = taps,
                  .OB = g->O / 16,
                  .PH = cg->PH,
                  .PW = cg->PW,
                  .relu = cg->act == TORC_ACT_RELU,
                  .pool = cg->has_pool,
                  .x_blocked = cg->x_blocked,
                  .y_blocked = cg->y_blocked,
                  .x = x,
                  .wt = wt,
                  .b = bb,
                  .y = y,
                  .toff = toff};
  direct_image_fn fn = pick(0);
  int nt = threads();
#pragma omp parallel for schedule(static) num_threads(nt) if (count > 1)
  for (int64_t n = n0; n < n0 + count; n++) {
    float *xp = per_thread + z.per * (size_t)omp_get_thread_num();
    fn(&c, n, xp, xp + z.xfl);
  }
}

void torc_dnn__pool_blocked(const dnn_act_geo *cg, const float *cd, float *y,
                            int64_t n0, int64_t count) {
  const dnn_conv_geo *g = &cg->g;
  direct_ctx c = {.cg = cg,
                  .O = g->O,
                  .OH = g->OH,
                  .OW = g->OW,
                  .OB = g->O / 16,
                  .PH = cg->PH,
                  .PW = cg->PW,
                  .relu = cg->act == TORC_ACT_RELU,
                  .pool = 1,
                  .y_blocked = cg->y_blocked,
                  .y = y};
  direct_image_fn fn = pick(1);
  int64_t per = g->O * g->OH * g->OW;
  int nt = threads();
#pragma omp parallel for schedule(static) num_threads(nt) if (count > 1)
  for (int64_t k = 0; k < count; k++)
    fn(&c, n0 + k, (float *)(cd + k * per), NULL);
}
