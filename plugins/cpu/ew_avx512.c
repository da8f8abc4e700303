/* plugins/cpu/ew_avx512.c — the loops of ew_kern.h compiled for
 * AVX-512 F/DQ/BW/VL; used when cpuid.c selects "avx512".
 */
#include "cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__) &&  \
    defined(__AVX512VL__)
#define CPU_ISA_NAME avx512
#define CPU_ISA_STRING "avx512"
#include "ew_kern.h"
#else
/* Built without the ISA flags (not an x86 host): never selected. */
const cpu_isa torc_cpu__isa_avx512 = {0};
#endif
