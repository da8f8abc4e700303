/* plugins/onednn/direct.h — what direct.c shares with the per-ISA builds
 * of direct_kern.h (direct_avx512.c, direct_avx2.c, direct_base.c).
 * Internal to the onednn plugin.
 */
#ifndef TORC_ONEDNN_DIRECT_H
#define TORC_ONEDNN_DIRECT_H

#include "onednn_internal.h"

/* Most floats in a thread's buffers. */
enum { DIRECT_MAX_FLOATS = 1 << 18 };

/* One call's geometry and operands, as the image loops read them. */
typedef struct direct_ctx {
  const dnn_act_geo *cg;
  int64_t C, H, W, O, OH, OW, S[2], PL[2];
  int64_t Hp, Wp, taps, OB; /* the padded image, taps, 16-channel blocks */
  int64_t PH, PW;           /* y's sizes */
  int relu, pool, x_blocked, y_blocked;
  const float *x;
  const float *wt; /* the weights as [taps][O] */
  const float *b;  /* [O]: the bias, or zeros */
  float *y;
  const int64_t *toff; /* [taps]: each tap's offset in the padded image */
} direct_ctx;

/* Image n of the call: xp (C x Hp x Wp floats) and crow (rows x OW x O)
 * are the calling thread's, 64-byte aligned. One per build; a build whose
 * ISA the compiler lacks is NULL. */
typedef void (*direct_image_fn)(const direct_ctx *c, int64_t n, float *xp,
                                float *crow);
extern const direct_image_fn torc_dnn__direct_avx512, torc_dnn__direct_avx2,
    torc_dnn__direct_base;
/* The pool and activation of image n's blocked convolution output (the
 * third argument; the fourth unused), as direct_image_fn. */
extern const direct_image_fn torc_dnn__direct_pool_avx512,
    torc_dnn__direct_pool_avx2, torc_dnn__direct_pool_base;

#endif
