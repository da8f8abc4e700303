/* torc/testing.h — test-only controls of libtorc: allocation counting and
 * fault injection (SQLite's sqlite3_test_control and memsys fault
 * injector are the model). For the test suite; not installed, and no part
 * of the API or ABI promise.
 *
 * Every heap allocation of the core (jansson's for the safetensors header
 * included), every object taken from the core's per-thread pools and every
 * request for device memory (a cache hit too) is one "allocation attempt",
 * counted in the order they happen across all threads. An armed injector
 * makes a chosen attempt fail as a real out-of-memory would: the call that
 * needed it returns TORC_ERR_OOM (or NULL) with a message about memory,
 * or, where the failure hit something with a fallback (the caching
 * allocator empties its cache and asks the device again), succeeds with a
 * correct result.
 *
 * The environment variable TORC_FAIL_ALLOC=N makes the Nth attempt of the
 * process fail, TORC_FAIL_ALLOC=N,persistent every attempt from the Nth
 * on; it is read once, at the first allocation.
 *
 * Not counted: plugins' own allocations, inih's while parsing an INI file,
 * the C library's (open_memstream). Memory the API hands its caller to
 * free() (torc_sprint's string and the like) stays counted as live when
 * the caller frees it so.
 */
#ifndef TORC_TESTING_H
#define TORC_TESTING_H

#include <stdint.h>

#include "torc/error.h"

TORC_BEGIN_DECLS

/* Arms the injector: the nth allocation attempt from now fails (n = 1: the
 * next one). persistent = 0: that one only, then the injector disarms
 * itself; persistent != 0: it and every later one, until disarmed. n <= 0
 * disarms. Thread-safe; counts attempts on every thread. */
TORC_API void torc_test_fail_alloc(int64_t n, int persistent);

/* Allocation attempts since the process started (failed ones included). */
TORC_API int64_t torc_test_alloc_count(void);

/* Blocks from the core's wrappers and pools now held (allocated and not
 * yet freed): the same value before and after a call that fails cleanly. */
TORC_API int64_t torc_test_alloc_live(void);

/* Attempts the injector has failed since the process started. */
TORC_API int64_t torc_test_alloc_failed(void);

/* Sets the bytes of intermediates a planned forward's batch tile aims at
 * (torc_plan_tile_rows), for plans built after the call; bytes <= 0
 * restores the default (4 MiB). Lets a test tile a small model. */
TORC_API void torc_test_plan_tile_bytes(int64_t bytes);

TORC_END_DECLS

#endif /* TORC_TESTING_H */
