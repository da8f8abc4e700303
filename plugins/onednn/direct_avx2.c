/* plugins/onednn/direct_avx2.c — direct_kern.h compiled for AVX2 and FMA;
 * direct.c runs it when the CPU has them.
 */
#include "direct.h"

#if defined(__AVX2__) && defined(__FMA__)
#define DIRECT_ISA avx2
#include "direct_kern.h"
#else
/* Built without the ISA flags (not an x86 host): never selected. */
const direct_image_fn torc_dnn__direct_avx2 = NULL;
const direct_image_fn torc_dnn__direct_pool_avx2 = NULL;
#endif
