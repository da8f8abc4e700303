/* tools/conformance.h — the backend conformance suite (DESIGN §13): every
 * op of a table x dtype x input variant, run on a device type and on the
 * cpu (ref), outputs and gradients compared; gradcheck in f64 on the
 * device. Used by `torc test-backend`. Plain C over the public API.
 */
#ifndef TORC_TOOLS_CONFORMANCE_H
#define TORC_TOOLS_CONFORMANCE_H

#include <stdio.h>

typedef struct torc_conformance_result {
  int passed, failed, skipped;
} torc_conformance_result;

/* Runs the suite on device `device_type` (index 0) against the cpu. One
 * line per case goes to `out` when verbose (failures always), then the
 * summary "conformance on TYPE: N passed, N failed, N skipped" and, when
 * cases were skipped for want of a kernel, a line "ops with no kernel on
 * TYPE (N; their cases are skipped): OP (DTYPES), ...". Returns 0
 * when the suite ran (see *res for failures), -1 if the device type
 * cannot be used (message on stderr). */
int torc_conformance_run(const char *device_type, int verbose, FILE *out,
                         torc_conformance_result *res);

/* Certifies a plugin that provides cpu kernels over ref's: every case runs
 * on the cpu twice, once with the dispatcher pinned to ref's kernels (the
 * reference) and once pinned to `provider`'s (where it has them; ref's
 * elsewhere), forward, backward and gradcheck. Summary line "conformance
 * of PROVIDER on cpu (against ref): ...". Returns as torc_conformance_run. */
int torc_conformance_run_provider(const char *provider, int verbose,
                                  FILE *out, torc_conformance_result *res);

#endif /* TORC_TOOLS_CONFORMANCE_H */
