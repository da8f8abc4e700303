/* tools/conformance_internal.h — what the conformance suite's table
 * (conformance_ops.c) and its runner (conformance.c) share: the input
 * variants, the operand kinds and the row type.
 */
#ifndef TORC_TOOLS_CONFORMANCE_INTERNAL_H
#define TORC_TOOLS_CONFORMANCE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "torc/torc.h"

enum { V_CONTIG, V_NONCONTIG, V_BROADCAST, V_EMPTY, V_SIZE1, V_COUNT };

/* How an operand's values are made: the dtype under test in [-2, 2]
 * (integers -8..8), the dtype under test and positive, an i64 index below
 * the row's range, a bool mask, or (O_CONST) positive values of the dtype
 * under test that never require grad (class weights). */
enum { O_DATA, O_POS, O_INDEX, O_BOOL, O_CONST };

enum { MAXIN = 4, MAXD = 4 };

typedef struct shapes {
  int nd[MAXIN];
  int64_t s[MAXIN][MAXD];
  int exp_nd[MAXIN]; /* > 0: expand operand to exp[] (stride 0) */
  int64_t exp[MAXIN][MAXD];
} shapes;

typedef int (*shape_fn)(int variant, int n_in, shapes *o);

typedef torc_tensor *(*call_fn)(torc_tensor *const *in);

typedef struct op_row {
  const char *name;
  call_fn call;
  shape_fn shape;
  int n_in;
  unsigned char kind[MAXIN];
  int64_t index_range; /* O_INDEX values are below this */
  int diff;            /* differentiable: gradients compared, gradcheck */
} op_row;

/* The suite's rows (conformance_ops.c). */
extern const op_row conf_rows[];
extern const size_t conf_n_rows;

#endif /* TORC_TOOLS_CONFORMANCE_INTERNAL_H */
