/* core/runtime.c — process-wide state: lazy initialisation (the cpu
 * device, TORC_LOG), the thread count, the log sink, shutdown.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "internal.h"

torc_status torc__device_init_cpu(void);
void torc__devtypes_clear(void);

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static _Atomic int n_threads = 1;
static _Atomic int log_level = TORC_LOG_WARN;
static torc_log_cb log_cb;
static void *log_user;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void init_once_fn(void) {
  const char *lv = getenv("TORC_LOG");
  if (lv) {
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
      if (strcasecmp(lv, names[i]) == 0)
        log_level = i;
  }
}

torc_status torc__ensure_init(void) {
  pthread_once(&init_once, init_once_fn);
  return torc__device_init_cpu();
}

const char *torc_version_string(void) { return PACKAGE_VERSION; }

void torc_abi_version(int *major, int *minor) {
  if (major)
    *major = TORC_ABI_MAJOR;
  if (minor)
    *minor = TORC_ABI_MINOR;
}

torc_status torc_set_num_threads(int n) {
  if (n < 1 || n > 1024)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_set_num_threads: %d threads requested; use 1 "
                          "to 1024",
                          n);
  n_threads = n;
  return TORC_OK;
}

int torc_get_num_threads(void) { return n_threads; }

static atomic_int deterministic_algorithms;

void torc_use_deterministic_algorithms(int on) {
  atomic_store(&deterministic_algorithms, on != 0);
}

int torc_deterministic_algorithms_enabled(void) {
  return atomic_load(&deterministic_algorithms);
}

void torc_set_log_level(int level) {
  pthread_once(&init_once, init_once_fn);
  log_level = level < TORC_LOG_ERROR   ? TORC_LOG_ERROR
              : level > TORC_LOG_DEBUG ? TORC_LOG_DEBUG
                                       : level;
}

void torc_set_log_callback(torc_log_cb cb, void *user) {
  pthread_mutex_lock(&log_lock);
  log_cb = cb;
  log_user = user;
  pthread_mutex_unlock(&log_lock);
}

void torc__log_v(int level, const char *fmt, va_list ap) {
  /* Only the log level: no device set-up here, since the device registry
   * logs while holding its lock. */
  pthread_once(&init_once, init_once_fn);
  if (level > log_level)
    return;
  char line[1536];
  vsnprintf(line, sizeof line, fmt, ap);
  pthread_mutex_lock(&log_lock);
  if (log_cb) {
    log_cb(level, line, log_user);
  } else {
    static const char *const tags[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "torc: %s: %s\n",
            tags[level < 0 ? 0 : level > 3 ? 3 : level], line);
  }
  pthread_mutex_unlock(&log_lock);
}

void torc_logf(int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  torc__log_v(level, fmt, ap);
  va_end(ap);
}

void torc_shutdown(void) {
  torc__scope_thread_cleanup();
  int64_t live = torc_tensor_live_count();
  if (live > 0)
    torc_logf(TORC_LOG_WARN,
             "torc_shutdown: %lld tensors are still alive; release them "
             "before shutting down",
             (long long)live);
  torc__plugins_unload_all();
  torc__registry_clear();
  torc__devtypes_clear();
  torc__pool_drain();
  torc__profile_clear();
  torc_manual_seed(0);
}
