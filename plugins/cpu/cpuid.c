/* plugins/cpu/cpuid.c — picks the elementwise ISA at plugin init: AVX-512F
 * when CPUID has it and XCR0 shows the OS saves opmask and ZMM state, AVX2
 * (+FMA) when CPUID has them and XCR0 saves YMM, else the scalar build.
 * TORC_CPU_ISA=scalar|avx2|avx512 asks for a lower one (a higher one than
 * the machine has is ignored, with a log line from the caller's side).
 * Valgrind hides AVX-512 in the CPUID it emulates, so dispatch follows it.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#define CPU_X86 1
#include <cpuid.h>
#endif

const cpu_isa *torc_cpu__isa = &torc_cpu__isa_scalar;

int torc_cpu__machine_isa(void) {
#ifdef CPU_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return 0;
  int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
  if (!osxsave || !avx)
    return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  (void)hi;
  int ymm_os = (lo & 0x6) == 0x6;             /* XMM and YMM state */
  int zmm_os = ymm_os && (lo & 0xe0) == 0xe0; /* opmask, ZMM_Hi256, Hi16 */
  if (__get_cpuid_max(0, NULL) < 7)
    return 0;
  __cpuid_count(7, 0, a, b, c, d);
  int avx2 = (b >> 5) & 1, avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1,
      avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
  if (!ymm_os || !avx2 || !fma)
    return 0;
  if (zmm_os && avx512f && avx512dq && avx512bw && avx512vl)
    return 2;
  return 1;
#else
  return 0;
#endif
}

void torc_cpu__isa_select(void) {
  int level = torc_cpu__machine_isa();
  const char *want = getenv("TORC_CPU_ISA");
  if (want && strcmp(want, "scalar") == 0)
    level = 0;
  else if (want && strcmp(want, "avx2") == 0 && level > 1)
    level = 1;
  torc_cpu__isa = &torc_cpu__isa_scalar;
  if (level >= 2 && torc_cpu__isa_avx512.name != NULL)
    torc_cpu__isa = &torc_cpu__isa_avx512;
  else if (level >= 1 && torc_cpu__isa_avx2.name != NULL)
    torc_cpu__isa = &torc_cpu__isa_avx2;
}
