/* plugins/cpu/ew_avx2.c — the loops of ew_kern.h compiled for
 * AVX2 + FMA (-mavx2 -mfma); used when cpuid.c selects "avx2".
 */
#include "cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__)
#define CPU_ISA_NAME avx2
#define CPU_ISA_STRING "avx2"
#include "ew_kern.h"
#else
/* Built without the ISA flags (not an x86 host): never selected. */
const cpu_isa torc_cpu__isa_avx2 = {0};
#endif
