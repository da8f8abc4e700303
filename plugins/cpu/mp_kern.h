/* plugins/cpu/mp_kern.h — the per-ISA loop of the cpu plugin's bf16 max
 * pool (maxpool.c): one output row of the 2x2, stride-2 pool whose windows
 * lie in the image, in f32 compares. Plain C that the compiler
 * vectorises, included by ew_kern.h (one copy per ISA build).
 */
#ifndef CPU_ISA_NAME
#error "mp_kern.h is included by ew_kern.h"
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#endif

/* y[o] = the maximum of the window at rows r0, r1 and columns 2o, 2o + 1
 * (o < n), as ref: the first maximum in the order (0, 1, W, W + 1), a NaN
 * winning from where it is met; ix[o] = corner + 2o + that tap's offset.
 * The maximum is one of the taps, so y keeps its bits exactly. */
static void FN(mp2_row_bf16)(const uint16_t *r0, const uint16_t *r1,
                             int64_t W, int64_t n, int64_t corner,
                             uint16_t *y, int64_t *ix) {
  int64_t o = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  /* sixteen outputs at a time (a row's last ones masked: CNN rows are
   * short, 14 or 7): the even and odd columns of each row widened to f32
   * lanes, the taps taken with the compare masks */
  const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                       22, 24, 26, 28, 30);
  const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
  for (; o < n; o += 16) {
    int64_t cnt = n - o < 16 ? n - o : 16;
    uint32_t in = cnt == 16 ? 0xffffffffu : (1u << (2 * cnt)) - 1;
    __mmask16 out = (__mmask16)(cnt == 16 ? 0xffffu : (1u << cnt) - 1);
    __m512i t[4];
    for (int r = 0; r < 2; r++) {
      const uint16_t *row = (r ? r1 : r0) + 2 * o;
      __m512i lo = _mm512_cvtepu16_epi32(
          _mm256_maskz_loadu_epi16((__mmask16)(in & 0xffffu), row));
      __m512i hi = _mm512_cvtepu16_epi32(
          _mm256_maskz_loadu_epi16((__mmask16)(in >> 16), row + 16));
      t[2 * r] = _mm512_slli_epi32(_mm512_permutex2var_epi32(lo, ev, hi), 16);
      t[2 * r + 1] =
          _mm512_slli_epi32(_mm512_permutex2var_epi32(lo, od, hi), 16);
    }
    __m512i bits = t[0], k = _mm512_setzero_si512();
    const int32_t off[4] = {0, 1, (int32_t)W, (int32_t)W + 1};
    for (int q = 1; q < 4; q++) {
      __m512 best = _mm512_castsi512_ps(bits), v = _mm512_castsi512_ps(t[q]);
      __mmask16 m = _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q) &
                    (_mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                     _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
      bits = _mm512_mask_mov_epi32(bits, m, t[q]);
      k = _mm512_mask_mov_epi32(k, m, _mm512_set1_epi32(off[q]));
    }
    _mm256_mask_storeu_epi16(
        y + o, out, _mm512_cvtepi32_epi16(_mm512_srli_epi32(bits, 16)));
    __m512i at = _mm512_add_epi32(k, ev); /* ev: 2 * lane */
    __m512i base = _mm512_set1_epi64(corner + 2 * o);
    _mm512_mask_storeu_epi64(
        ix + o, (__mmask8)out,
        _mm512_add_epi64(base,
                         _mm512_cvtepi32_epi64(_mm512_castsi512_si256(at))));
    if (cnt > 8)
      _mm512_mask_storeu_epi64(
          ix + o + 8, (__mmask8)(out >> 8),
          _mm512_add_epi64(base, _mm512_cvtepi32_epi64(
                                     _mm512_extracti64x4_epi64(at, 1))));
  }
#endif
  /* masks, not branches: the compares of random data do not predict */
  for (; o < n; o++) {
    uint32_t tap[4] = {(uint32_t)r0[2 * o] << 16, (uint32_t)r0[2 * o + 1] << 16,
                       (uint32_t)r1[2 * o] << 16,
                       (uint32_t)r1[2 * o + 1] << 16};
    int32_t off[4] = {0, 1, (int32_t)W, (int32_t)W + 1};
    uint32_t bits = tap[0];
    int32_t k = 0;
    for (int q = 1; q < 4; q++) {
      float best, v;
      memcpy(&best, &bits, 4);
      memcpy(&v, &tap[q], 4);
      uint32_t m = -(uint32_t)((best == best) & ((v > best) | (v != v)));
      bits = (tap[q] & m) | (bits & ~m);
      k = (int32_t)(((uint32_t)off[q] & m) | ((uint32_t)k & ~m));
    }
    y[o] = (uint16_t)(bits >> 16);
    ix[o] = corner + 2 * o + k;
  }
}
