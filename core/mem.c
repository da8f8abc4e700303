/* core/mem.c — the heap wrappers every allocation of libtorc goes through
 * (torc__malloc and friends), with a count of calls and of live blocks and
 * SQLite-style fault injection: the Nth allocation from a chosen moment
 * fails, once or from then on (include/torc/testing.h, TORC_FAIL_ALLOC).
 *
 * The wrappers return the C library's memory unchanged (no header), so a
 * block from torc__malloc may be released with free() and vice versa; only
 * the live count would drift. Device blocks (alloc.c) and pooled objects
 * count as allocation attempts too, so one sweep over N reaches them.
 * Jansson allocates through them too. Counters are atomic: loader workers
 * allocate concurrently.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "torc/testing.h"

static _Atomic int64_t n_calls;   /* allocation attempts, failed ones too */
static _Atomic int64_t n_live;    /* blocks handed out and not yet freed */
static _Atomic int64_t n_failed;  /* attempts failed on purpose */
static _Atomic int64_t fail_at;   /* the attempt number that fails; 0: none */
static _Atomic int fail_persist;  /* ... and every later one */
static _Atomic int armed;         /* fail_at != 0: the fast path reads this */

static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* Jansson's allocations (the safetensors header) go through the wrappers,
 * so they are counted and can fail on purpose, and so the core learns of
 * a failure jansson hides: it reports a parse that ran out of memory as a
 * syntax error, and json_dumps may return a text missing an object key it
 * could not write; worse, after some failures its lexer reads and writes
 * past a buffer, so within the core's use (torc__json_begin/end) the first
 * failure makes every later allocation fail, which ends the parse before
 * that. Installed when libtorc loads, and only over jansson's defaults: an
 * application's own functions are left alone (these failures then go
 * unseen). */
static _Thread_local int json_session, json_failed;
static void *json_malloc_hook(size_t n) {
  if (json_session && json_failed)
    return NULL;
  void *p = torc__malloc(n);
  if (p == NULL && json_session)
    json_failed = 1;
  return p;
}
static void json_free_hook(void *p) { torc__free(p); }
__attribute__((constructor)) static void json_hooks_install(void) {
  json_malloc_t m = NULL;
  json_free_t f = NULL;
  json_get_alloc_funcs(&m, &f);
  if (m == malloc && f == free)
    json_set_alloc_funcs(json_malloc_hook, json_free_hook);
}

void torc__json_begin(void) {
  json_session = 1;
  json_failed = 0;
}

int torc__json_end(void) {
  int had = json_failed;
  json_session = json_failed = 0;
  return had;
}

static void arm(int64_t n, int persistent) {
  if (n <= 0) {
    atomic_store(&armed, 0);
    atomic_store(&fail_at, 0);
    return;
  }
  atomic_store(&fail_persist, persistent != 0);
  atomic_store(&fail_at, atomic_load(&n_calls) + n);
  atomic_store(&armed, 1);
}

/* TORC_FAIL_ALLOC=N[,persistent]: the Nth allocation of the process fails
 * (with ",1" or ",persistent" every one from the Nth on); read once. */
static void env_read(void) {
  const char *e = getenv("TORC_FAIL_ALLOC");
  if (e == NULL || *e == '\0')
    return;
  char *end;
  errno = 0;
  long long n = strtoll(e, &end, 10);
  if (errno || end == e || n <= 0) {
    fprintf(stderr, "torc: TORC_FAIL_ALLOC='%s' is not a positive count; "
                    "ignoring it (use N or N,persistent)\n", e);
    return;
  }
  int persistent = *end == ',' && end[1] != '\0' && strcmp(end + 1, "0") != 0;
  arm(n, persistent);
}

int torc__alloc_fault(void) {
  pthread_once(&env_once, env_read);
  int64_t k = atomic_fetch_add_explicit(&n_calls, 1, memory_order_relaxed) + 1;
  if (!atomic_load_explicit(&armed, memory_order_relaxed))
    return 0;
  int64_t at = atomic_load(&fail_at);
  if (at <= 0 || k < at)
    return 0;
  if (k > at && !atomic_load(&fail_persist))
    return 0;
  if (!atomic_load(&fail_persist)) /* a one-shot failure disarms itself */
    atomic_store(&armed, 0);
  atomic_fetch_add(&n_failed, 1);
  return 1;
}

void torc__alloc_track(int delta) {
  atomic_fetch_add_explicit(&n_live, delta, memory_order_relaxed);
}

void *torc__malloc(size_t n) {
  if (torc__alloc_fault())
    return NULL;
  void *p = malloc(n ? n : 1);
  if (p)
    torc__alloc_track(1);
  return p;
}

void *torc__calloc(size_t count, size_t size) {
  if (torc__alloc_fault())
    return NULL;
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (p)
    torc__alloc_track(1);
  return p;
}

void *torc__realloc(void *p, size_t n) {
  if (torc__alloc_fault())
    return NULL; /* p stays valid, as with a real failure */
  void *q = realloc(p, n ? n : 1);
  if (q && p == NULL)
    torc__alloc_track(1);
  return q;
}

char *torc__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = torc__malloc(n);
  if (p)
    memcpy(p, s, n);
  return p;
}

void torc__free(void *p) {
  if (p == NULL)
    return;
  torc__alloc_track(-1);
  free(p);
}

void torc__json_free(void *p) {
  json_free_t f = NULL;
  json_get_alloc_funcs(NULL, &f);
  if (p)
    (f ? f : free)(p);
}

/* ---- the test-only API (torc/testing.h) ---- */

void torc_test_fail_alloc(int64_t n, int persistent) {
  pthread_once(&env_once, env_read); /* so the variable cannot re-arm later */
  arm(n, persistent);
}

int64_t torc_test_alloc_count(void) { return atomic_load(&n_calls); }

int64_t torc_test_alloc_live(void) { return atomic_load(&n_live); }

int64_t torc_test_alloc_failed(void) { return atomic_load(&n_failed); }
