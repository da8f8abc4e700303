/* tests/onnx_testutil.h — a minimal protobuf encoder for the ONNX tests:
 * messages (ModelProto, GraphProto, TensorProto...) written field by field
 * into a fixed buffer, so a test can make exactly the (hostile) file it
 * needs without the generated code. Writing past the buffer fails the
 * test. */
#ifndef TORC_ONNX_TESTUTIL_H
#define TORC_ONNX_TESTUTIL_H

#include <stdint.h>
#include <string.h>

#include "testutil.h"

typedef struct buf {
  uint8_t b[2048];
  size_t n;
} buf;

/* Asserts k more bytes fit in o. */
static inline void buf_room(const buf *o, size_t k) {
  assert_true(k <= sizeof o->b - o->n);
}

static inline void varint(buf *o, uint64_t v) {
  do {
    uint8_t c = v & 0x7f;
    v >>= 7;
    buf_room(o, 1);
    o->b[o->n++] = (uint8_t)(c | (v ? 0x80 : 0));
  } while (v);
}

/* A varint field. */
static inline void f_int(buf *o, int field, int64_t v) {
  varint(o, (uint64_t)field << 3);
  varint(o, (uint64_t)v);
}

/* A length-delimited field of len bytes. */
static inline void f_bytes(buf *o, int field, const void *p, size_t len) {
  varint(o, (uint64_t)field << 3 | 2);
  varint(o, len);
  buf_room(o, len);
  memcpy(o->b + o->n, p, len);
  o->n += len;
}

static inline void f_str(buf *o, int field, const char *s) {
  f_bytes(o, field, s, strlen(s));
}

/* An embedded message. */
static inline void f_msg(buf *o, int field, const buf *m) {
  f_bytes(o, field, m->b, m->n);
}

#endif
