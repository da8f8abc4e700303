/* plugins/onednn/direct_base.c — direct_kern.h compiled for the target's
 * baseline (SSE2 on x86-64): what direct.c runs on a CPU without AVX2 and
 * FMA, and under valgrind.
 */
#define DIRECT_ISA base
#include "direct_kern.h"
