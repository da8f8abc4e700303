/* plugins/onednn/direct_avx512.c — direct_kern.h compiled for AVX-512 F/DQ/BW/VL and FMA;
 * direct.c runs it when the CPU has them.
 */
#include "direct.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__) && \
    defined(__AVX512VL__) && defined(__FMA__)
#define DIRECT_ISA avx512
#include "direct_kern.h"
#else
/* Built without the ISA flags (not an x86 host): never selected. */
const direct_image_fn torc_dnn__direct_avx512 = NULL;
const direct_image_fn torc_dnn__direct_pool_avx512 = NULL;
#endif
