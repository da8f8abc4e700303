/* torc/error.h — status codes, the thread-local last error, export macros.
 *
 * Every fallible call returns a torc_status (TORC_OK is 0) or a pointer that
 * is NULL on failure; torc_last_error() then holds one sentence saying what
 * failed, with the values involved and, where one exists, the fix.
 */
#ifndef TORC_ERROR_H
#define TORC_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
#define TORC_BEGIN_DECLS extern "C" {
#define TORC_END_DECLS }
#else
#define TORC_BEGIN_DECLS
#define TORC_END_DECLS
#endif

/* TORC_API marks the symbols libtorc exports; everything else is hidden. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define TORC_API __attribute__((visibility("default")))
#else
#define TORC_API
#endif

#if defined(__GNUC__)
#define TORC_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TORC_PRINTF(fmt, args)
#endif

TORC_BEGIN_DECLS

/* The status codes, one X-macro list (as libuv's UV_ERRNO_MAP): name, value,
 * short description. Values are part of the plugin ABI: append only. */
#define TORC_STATUS_LIST(X)                                                    \
  X(OK, 0, "success")                                                          \
  X(ERR_INVALID, 1, "invalid argument")                                        \
  X(ERR_NULL, 2, "input is NULL (an earlier call failed)")                     \
  X(ERR_SHAPE, 3, "shape mismatch")                                            \
  X(ERR_DTYPE, 4, "dtype not supported")                                       \
  X(ERR_DEVICE, 5, "device error")                                             \
  X(ERR_OOM, 6, "out of memory")                                               \
  X(ERR_NO_KERNEL, 7, "no kernel for this op, dtype and device")               \
  X(ERR_RANGE, 8, "index out of range")                                        \
  X(ERR_IO, 9, "input/output error")                                           \
  X(ERR_CONFIG, 10, "configuration error")                                     \
  X(ERR_PLUGIN, 11, "plugin error")                                            \
  X(ERR_ABI, 12, "plugin ABI mismatch")                                        \
  X(ERR_PERMISSION, 13, "insecure file permissions")                           \
  X(ERR_UNSUPPORTED, 14, "not supported")                                      \
  X(ERR_AUTOGRAD, 15, "autograd error")                                        \
  X(ERR_INTERNAL, 16, "internal error")                                       \
  X(ERR_INTERRUPTED, 17, "interrupted")                                       \
  X(ERR_DIST, 18, "distributed run failed (a rank stopped or timed out)")

/* A status: TORC_OK (0) or one of the TORC_ERR_* codes above. */
typedef enum torc_status {
#define TORC__STATUS_ENUM(name, value, text) TORC_##name = value,
  TORC_STATUS_LIST(TORC__STATUS_ENUM)
#undef TORC__STATUS_ENUM
} torc_status;

/* Log levels (torc_logf, torc_set_log_level, and torc_host.log for
 * plugins). Values are part of the plugin ABI. */
typedef enum torc_log_level {
  TORC_LOG_ERROR = 0,
  TORC_LOG_WARN = 1,
  TORC_LOG_INFO = 2,
  TORC_LOG_DEBUG = 3
} torc_log_level;

/* The short description of a status code ("shape mismatch"); never NULL.
 * Unknown codes give "unknown status". Thread-safe. */
TORC_API const char *torc_status_str(torc_status status);

/* The name of a status code ("TORC_ERR_SHAPE"); never NULL. */
TORC_API const char *torc_status_name(torc_status status);

/* The message of the last failed call on this thread, or "" if none failed
 * since the last torc_clear_error(). The string stays valid until the next
 * torc call on this thread. */
TORC_API const char *torc_last_error(void);

/* The distance torc's "did you mean" suggestions use: the fewest
 * insertions, deletions, substitutions and swaps of two neighbouring
 * characters turning a into b, ignoring ASCII case (optimal string
 * alignment). SIZE_MAX when either is NULL or 64 bytes or longer. For a
 * plugin's or a program's own suggestions. */
TORC_API size_t torc_edit_distance(const char *a, const char *b);

/* The status of the last failed call on this thread (TORC_OK if none). */
TORC_API torc_status torc_last_status(void);

/* Forgets the last error of this thread. */
TORC_API void torc_clear_error(void);

/* Records an error for this thread, printf-style, and returns `status`, so
 * that `return torc_set_error(TORC_ERR_SHAPE, "...", ...);` reads naturally.
 * For users' own extensions; the message is truncated at 1 KiB. */
TORC_API torc_status torc_set_error(torc_status status, const char *fmt, ...)
    TORC_PRINTF(2, 3);

TORC_END_DECLS

#endif /* TORC_ERROR_H */
