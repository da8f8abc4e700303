/* plugins/cpu/bn_kern.h — the per-ISA loops of the cpu plugin's batch
 * norm (bnorm.c): over one contiguous run of a channel's elements, in f32
 * arithmetic for an f32 or bf16 x. Sums go through RL float lanes in
 * blocks of BN_BLK elements, each block's lanes added into double, so a
 * run of any length keeps f32's error of one block. Plain C that the
 * compiler vectorises, included by ew_kern.h (one copy per ISA build).
 */
#ifndef CPU_ISA_NAME
#error "bn_kern.h is included by ew_kern.h"
#endif

#ifndef BN_KERN_ONCE
#define BN_KERN_ONCE
enum { BN_BLK = 4096 };
/* bf16 bits -> f32 (exact). */
static inline float bn_ldh(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
/* f32 -> bf16 bits (cpu_bf16_round). */
static inline uint16_t bn_sth(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return cpu_bf16_round(u);
}
#endif

/* One loop over a block of n <= BN_BLK elements into RL float lanes,
 * then into *acc (double); LD(i) loads element i as float, TERM(v) is the
 * summand of v. */
#define BN_SUM_BLOCK(LD, TERM, acc)                                            \
  do {                                                                         \
    float l[RL] = {0};                                                         \
    int64_t i = 0;                                                             \
    for (; i + RL <= m; i += RL)                                               \
      for (int q = 0; q < RL; q++) {                                           \
        float v = LD(i + q);                                                   \
        l[q] += TERM(v);                                                       \
      }                                                                        \
    double t = 0;                                                              \
    for (; i < m; i++) {                                                       \
      float v = LD(i);                                                         \
      t += (double)(TERM(v));                                                  \
    }                                                                          \
    for (int q = 0; q < RL; q++)                                               \
      t += (double)l[q];                                                       \
    *(acc) += t;                                                               \
  } while (0)

#define BN_LDF(i) xf[i]
#define BN_LDB(i) bn_ldh(xb[i])
#define BN_ID(v) (v)
#define BN_DEV2(v) (((v) - mf) * ((v) - mf))

/* *s1 += sum of x[0..n) when pass 1; *s1 += sum of (x - mean)^2 when
 * pass 2. */
static void FN(bn_stat)(int32_t dt, const void *xv, int64_t n, int pass,
                        double mean, double *s1) {
  float mf = (float)mean;
  for (int64_t o = 0; o < n; o += BN_BLK) {
    int64_t m = n - o < BN_BLK ? n - o : BN_BLK;
    if (dt == TORC_F32) {
      const float *xf = (const float *)xv + o;
      if (pass == 1)
        BN_SUM_BLOCK(BN_LDF, BN_ID, s1);
      else
        BN_SUM_BLOCK(BN_LDF, BN_DEV2, s1);
    } else {
      const uint16_t *xb = (const uint16_t *)xv + o;
      if (pass == 1)
        BN_SUM_BLOCK(BN_LDB, BN_ID, s1);
      else
        BN_SUM_BLOCK(BN_LDB, BN_DEV2, s1);
    }
  }
}

/* y[i] = (x[i] - mean) sc + sh, i < n (y in x's dtype). */
static void FN(bn_apply)(int32_t dt, const void *xv, void *yv, int64_t n,
                         float mean, float sc, float sh) {
  if (dt == TORC_F32) {
    const float *x = xv;
    float *y = yv;
    for (int64_t i = 0; i < n; i++)
      y[i] = (x[i] - mean) * sc + sh;
  } else {
    const uint16_t *x = xv;
    uint16_t *y = yv;
    for (int64_t i = 0; i < n; i++)
      y[i] = bn_sth((bn_ldh(x[i]) - mean) * sc + sh);
  }
}

/* *sg += sum of g[i]; *sgx += sum of g[i] (x[i] - mean), i < n. */
static void FN(bn_bw_sums)(int32_t dt, const void *gv, const void *xv,
                           int64_t n, double mean, double *sg, double *sgx) {
  float mf = (float)mean;
  for (int64_t o = 0; o < n; o += BN_BLK) {
    int64_t m = n - o < BN_BLK ? n - o : BN_BLK;
    float l1[RL] = {0}, l2[RL] = {0};
    double t1 = 0, t2 = 0;
    int64_t i = 0;
    if (dt == TORC_F32) {
      const float *g = (const float *)gv + o, *x = (const float *)xv + o;
      for (; i + RL <= m; i += RL)
        for (int q = 0; q < RL; q++) {
          l1[q] += g[i + q];
          l2[q] += g[i + q] * (x[i + q] - mf);
        }
      for (; i < m; i++) {
        t1 += (double)g[i];
        t2 += (double)(g[i] * (x[i] - mf));
      }
    } else {
      const uint16_t *g = (const uint16_t *)gv + o;
      const uint16_t *x = (const uint16_t *)xv + o;
      for (; i + RL <= m; i += RL)
        for (int q = 0; q < RL; q++) {
          float gq = bn_ldh(g[i + q]);
          l1[q] += gq;
          l2[q] += gq * (bn_ldh(x[i + q]) - mf);
        }
      for (; i < m; i++) {
        float gq = bn_ldh(g[i]);
        t1 += (double)gq;
        t2 += (double)(gq * (bn_ldh(x[i]) - mf));
      }
    }
    for (int q = 0; q < RL; q++)
      t1 += (double)l1[q], t2 += (double)l2[q];
    *sg += t1;
    *sgx += t2;
  }
}

/* gx[i] = g[i] k1 + (x[i] - mean) k2 + k3, i < n (gx in x's dtype). */
static void FN(bn_bw_apply)(int32_t dt, const void *gv, const void *xv,
                            void *gxv, int64_t n, float mean, float k1,
                            float k2, float k3) {
  if (dt == TORC_F32) {
    const float *g = gv, *x = xv;
    float *gx = gxv;
    for (int64_t i = 0; i < n; i++)
      gx[i] = g[i] * k1 + ((x[i] - mean) * k2 + k3);
  } else {
    const uint16_t *g = gv, *x = xv;
    uint16_t *gx = gxv;
    for (int64_t i = 0; i < n; i++)
      gx[i] = bn_sth(bn_ldh(g[i]) * k1 + ((bn_ldh(x[i]) - mean) * k2 + k3));
  }
}

#undef BN_SUM_BLOCK
#undef BN_LDF
#undef BN_LDB
#undef BN_ID
#undef BN_DEV2
