/* plugins/onednn/direct_kern.h — the image loop of direct.c's kernel,
 * written once with GCC's vector extensions (16 output channels to a
 * vector) and compiled once per ISA: direct_avx512.c (-mavx512f ...),
 * direct_avx2.c (-mavx2 -mfma) and direct_base.c include it after
 * defining DIRECT_ISA, each with its own flags, and direct.c picks one at
 * run time. Vector comparisons need the ISA at compile time (GCC lowers
 * them before any inlining), hence flags per file, not target attributes.
 */
#include <math.h>
#include <string.h>

#include "direct.h"

#ifndef DIRECT_ISA
#error "define DIRECT_ISA before including direct_kern.h"
#endif

typedef float v16 __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
/* The same for loads and stores at any float's alignment. */
typedef float v16u __attribute__((vector_size(64), aligned(4)));

/* relu with the relu op's rule: v > 0 or NaN keeps v, else +0. */
static inline __attribute__((always_inline)) v16 relu16(v16 v) {
  v16i keep = (v > (v16){}) | (v != v);
  return (v16)((v16i)v & keep);
}

/* The max pool's step: v replaces m when larger or NaN, so that the
 * first NaN of a window wins and ties keep the first. */
static inline __attribute__((always_inline)) v16 max16(v16 m, v16 v) {
  v16i take = (v > m) | (v != v);
  return (v16)(((v16i)v & take) | ((v16i)m & ~take));
}

/* Conv row oh of the padded image xp into crow [OW][O], in blocks of
 * four output columns by two blocks of 16 channels (eight accumulators in
 * registers over every tap), the edges by one column or one block. The
 * blocks are spelled out: GCC keeps an array of accumulators in memory. */
#define TAP_LOOP(...)                                                          \
  for (int64_t t = 0; t < c->taps; t++) {                                      \
    const float *xt = base + c->toff[t];                                       \
    const float *wp = c->wt + t * c->O + ob * 16;                              \
    __VA_ARGS__                                                                \
  }

static inline __attribute__((always_inline)) void
block_4x2(const direct_ctx *c, const float *base, float *out, int64_t ob) {
  const int64_t s = c->S[1];
  v16 b0 = *(const v16 *)(c->b + ob * 16), b1 = *(const v16 *)(c->b + ob * 16 + 16);
  v16 a00 = b0, a01 = b1, a10 = b0, a11 = b1, a20 = b0, a21 = b1, a30 = b0,
      a31 = b1;
  TAP_LOOP({
    v16 w0 = *(const v16 *)wp, w1 = *(const v16 *)(wp + 16);
    float x0 = xt[0], x1 = xt[s], x2 = xt[2 * s], x3 = xt[3 * s];
    a00 += x0 * w0;
    a01 += x0 * w1;
    a10 += x1 * w0;
    a11 += x1 * w1;
    a20 += x2 * w0;
    a21 += x2 * w1;
    a30 += x3 * w0;
    a31 += x3 * w1;
  })
  const int64_t O = c->O;
  *(v16 *)out = a00;
  *(v16 *)(out + 16) = a01;
  *(v16 *)(out + O) = a10;
  *(v16 *)(out + O + 16) = a11;
  *(v16 *)(out + 2 * O) = a20;
  *(v16 *)(out + 2 * O + 16) = a21;
  *(v16 *)(out + 3 * O) = a30;
  *(v16 *)(out + 3 * O + 16) = a31;
}

static inline __attribute__((always_inline)) void
block_4x1(const direct_ctx *c, const float *base, float *out, int64_t ob) {
  const int64_t s = c->S[1];
  v16 b0 = *(const v16 *)(c->b + ob * 16);
  v16 a0 = b0, a1 = b0, a2 = b0, a3 = b0;
  TAP_LOOP({
    v16 w0 = *(const v16 *)wp;
    a0 += xt[0] * w0;
    a1 += xt[s] * w0;
    a2 += xt[2 * s] * w0;
    a3 += xt[3 * s] * w0;
  })
  const int64_t O = c->O;
  *(v16 *)out = a0;
  *(v16 *)(out + O) = a1;
  *(v16 *)(out + 2 * O) = a2;
  *(v16 *)(out + 3 * O) = a3;
}

static inline __attribute__((always_inline)) void
block_1x1(const direct_ctx *c, const float *base, float *out, int64_t ob) {
  v16 a = *(const v16 *)(c->b + ob * 16);
  TAP_LOOP({ a += xt[0] * *(const v16 *)wp; })
  *(v16 *)out = a;
}

static inline __attribute__((always_inline)) void
conv_row(const direct_ctx *c, const float *xp, float *crow, int64_t oh) {
  const float *row = xp + oh * c->S[0] * c->Wp;
  int64_t ow = 0;
  for (; ow + 4 <= c->OW; ow += 4) {
    const float *base = row + ow * c->S[1];
    float *out = crow + ow * c->O;
    int64_t ob = 0;
    for (; ob + 2 <= c->OB; ob += 2)
      block_4x2(c, base, out + ob * 16, ob);
    if (ob < c->OB)
      block_4x1(c, base, out + ob * 16, ob);
  }
  for (; ow < c->OW; ow++)
    for (int64_t ob = 0; ob < c->OB; ob++)
      block_1x1(c, row + ow * c->S[1], crow + ow * c->O + ob * 16, ob);
}

/* Stores 16 channels (block ob) of y at image n, row r, column q. */
static inline __attribute__((always_inline)) void
store16(const direct_ctx *c, int64_t n, int64_t ob, int64_t r, int64_t q,
        v16 v) {
  if (c->relu)
    v = relu16(v);
  if (c->y_blocked) {
    *(v16u *)(c->y + (((n * c->OB + ob) * c->PH + r) * c->PW + q) * 16) = v;
    return;
  }
  float *yp = c->y + ((n * c->O + ob * 16) * c->PH + r) * c->PW + q;
  for (int k = 0; k < 16; k++)
    yp[k * c->PH * c->PW] = v[k];
}

/* Image n: xp (C x Hp x Wp) and crow (rows x OW x O) are the thread's.
 * Without a pool crow holds one conv row; with one, the rows of a window
 * that lie inside the convolution's output. */
static inline __attribute__((always_inline)) void
image(const direct_ctx *c, int64_t n, float *xp, float *crow) {
  const dnn_act_geo *cg = c->cg;
  const float *xn = c->x + n * c->C * c->H * c->W;
  for (int64_t ch = 0; ch < c->C; ch++)
    for (int64_t r = 0; r < c->Hp; r++) {
      float *d = xp + (ch * c->Hp + r) * c->Wp;
      int64_t ih = r - c->PL[0];
      if (ih < 0 || ih >= c->H) {
        memset(d, 0, sizeof(float) * (size_t)c->Wp);
        continue;
      }
      /* x's row: channel ch's in NCHW, or its lane of a 16-channel block */
      const float *s;
      int64_t step = 1;
      if (c->x_blocked)
        s = xn + ((ch / 16 * c->H + ih) * c->W) * 16 + ch % 16, step = 16;
      else
        s = xn + (ch * c->H + ih) * c->W;
      for (int64_t q = 0; q < c->Wp; q++) {
        int64_t iw = q - c->PL[1];
        d[q] = iw >= 0 && iw < c->W ? s[iw * step] : 0.0f;
      }
    }
  if (!c->pool) {
    for (int64_t oh = 0; oh < c->OH; oh++) {
      conv_row(c, xp, crow, oh);
      for (int64_t ow = 0; ow < c->OW; ow++)
        for (int64_t ob = 0; ob < c->OB; ob++)
          store16(c, n, ob, oh, ow, *(v16 *)(crow + ow * c->O + ob * 16));
    }
    return;
  }
  const v16 ninf = (v16){} - INFINITY;
  for (int64_t ph = 0; ph < c->PH; ph++) {
    /* the window's conv rows that exist, into crow's rows 0.. */
    int64_t oh0 = ph * cg->S[0] - cg->PL[0], nr = 0;
    for (int64_t i = 0; i < cg->K[0]; i++) {
      int64_t oh = oh0 + i * cg->D[0];
      if (oh >= 0 && oh < c->OH) {
        conv_row(c, xp, crow + nr++ * c->OW * c->O, oh);
      }
    }
    for (int64_t pw = 0; pw < c->PW; pw++) {
      int64_t ow0 = pw * cg->S[1] - cg->PL[1];
      for (int64_t ob = 0; ob < c->OB; ob++) {
        v16 m = ninf;
        for (int64_t i = 0; i < nr; i++)
          for (int64_t j = 0; j < cg->K[1]; j++) {
            int64_t ow = ow0 + j * cg->D[1];
            if (ow >= 0 && ow < c->OW)
              m = max16(m, *(v16 *)(crow + (i * c->OW + ow) * c->O + ob * 16));
          }
        store16(c, n, ob, ph, pw, m);
      }
    }
  }
}

/* The pool (and activation) of image n's convolution output cb, in
 * blocks of 16 channels ([OB][OH][OW][16]), into y as store16 writes it:
 * oneDNN's chain hands its blocked convolution output here instead of to
 * oneDNN's pooling and relu post-op, which drop NaN. */
static inline __attribute__((always_inline)) void
pool_blocked(const direct_ctx *c, int64_t n, const float *cb) {
  const dnn_act_geo *cg = c->cg;
  const v16 ninf = (v16){} - INFINITY;
  for (int64_t ob = 0; ob < c->OB; ob++) {
    const float *plane = cb + ob * c->OH * c->OW * 16;
    for (int64_t ph = 0; ph < c->PH; ph++) {
      int64_t oh0 = ph * cg->S[0] - cg->PL[0];
      for (int64_t pw = 0; pw < c->PW; pw++) {
        int64_t ow0 = pw * cg->S[1] - cg->PL[1];
        v16 m = ninf;
        for (int64_t i = 0; i < cg->K[0]; i++) {
          int64_t oh = oh0 + i * cg->D[0];
          if (oh < 0 || oh >= c->OH)
            continue;
          for (int64_t j = 0; j < cg->K[1]; j++) {
            int64_t ow = ow0 + j * cg->D[1];
            if (ow >= 0 && ow < c->OW)
              m = max16(m, *(const v16 *)(plane + (oh * c->OW + ow) * 16));
          }
        }
        store16(c, n, ob, ph, pw, m);
      }
    }
  }
}

#define DIRECT_CAT2(a, b) a##b
#define DIRECT_CAT(a, b) DIRECT_CAT2(a, b)

static void image_fn(const direct_ctx *c, int64_t n, float *xp, float *crow) {
  image(c, n, xp, crow);
}

static void pool_fn(const direct_ctx *c, int64_t n, float *cb, float *unused) {
  (void)unused;
  pool_blocked(c, n, cb);
}

const direct_image_fn DIRECT_CAT(torc_dnn__direct_, DIRECT_ISA) = image_fn;
const direct_image_fn DIRECT_CAT(torc_dnn__direct_pool_, DIRECT_ISA) = pool_fn;
