/* tests/st_testutil.h — a safetensors writer for crafted files, shared by
 * the tests that feed the reader bad ones (test_safetensors,
 * test_state_checkpoint). Included after testutil.h. */
#ifndef TORC_ST_TESTUTIL_H
#define TORC_ST_TESTUTIL_H

#include "testutil.h"

/* A safetensors file from a header text and `data_len` data bytes (the
 * bytes 0, 1, 2, ...), written byte for byte as given. */
static inline void write_st(const char *path, const char *header,
                            size_t data_len) {
  size_t hl = strlen(header);
  unsigned char *b = malloc(8 + hl + data_len + 1);
  assert_non_null(b);
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  memcpy(b + 8, header, hl);
  for (size_t i = 0; i < data_len; i++)
    b[8 + hl + i] = (unsigned char)i;
  test_write_file(path, b, 8 + hl + data_len);
  free(b);
}

#endif /* TORC_ST_TESTUTIL_H */
