/* plugins/cpu/ew_scalar.c — the loops of ew_kern.h compiled for
 * baseline x86-64 (SSE2), or the target's defaults; used when cpuid.c selects
 * "scalar".
 */
#define CPU_ISA_NAME scalar
#define CPU_ISA_STRING "scalar"
#include "ew_kern.h"
