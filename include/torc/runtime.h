/* torc/runtime.h — process-wide state: plugins (loading, listing), the
 * kernel registry as users see it, threads, logging, shutdown.
 */
#ifndef TORC_RUNTIME_H
#define TORC_RUNTIME_H

#include <stdint.h>

#include "torc/dtype.h"
#include "torc/error.h"

TORC_BEGIN_DECLS

/* The library's version string, e.g. "0.1.0". */
TORC_API const char *torc_version_string(void);

/* The plugin ABI version of the running library (which may differ from the
 * TORC_ABI_* constants a program was compiled with). Either may be NULL. */
TORC_API void torc_abi_version(int *major, int *minor);

/* Options for torc_plugin_load; zero-initialise, then set what you need. */
typedef struct torc_plugin_opts {
  /* Name under which the plugin's [plugin.NAME] keys are looked up and it
   * is listed; NULL = the name the plugin declares. */
  const char *name;
  /* Colon-separated folders searched before TORC_PLUGIN_PATH and the
   * install folder when `module` is a bare name. */
  const char *search_path;
  /* Added to every kernel priority of the plugin (default 0). */
  int priority;
  /* Load even if the file or a folder above it is writable by other users
   * (a warning is logged). */
  int allow_insecure;
  /* Plugin keys: n_keys pairs keys[i] = values[i]; each must be a key the
   * plugin declares, else the load fails naming the key, its line and the
   * plugin's keys. */
  const char *const *keys;
  const char *const *values;
  int n_keys;
  /* For messages: the configuration file the request came from (or NULL),
   * the line of its [plugin.NAME] section, and the line of each key
   * (key_lines may be NULL). Errors then read "FILE:LINE: ...". */
  const char *file;
  int line;
  const int *key_lines;
} torc_plugin_opts;

/* Loads a plugin. `module` is a bare name ("ref": NAME.so is searched in
 * opts->search_path, then $TORC_PLUGIN_PATH, then the install folder) or a
 * path containing '/'. opts may be NULL. Loading a plugin whose name is
 * already loaded is a no-op. Errors (one line naming the plugin, the path
 * and the cause): TORC_ERR_IO (not found: the folders searched are
 * listed), TORC_ERR_PLUGIN (not a shared object, missing dependency, no
 * entry symbol, init failed), TORC_ERR_ABI, TORC_ERR_PERMISSION. */
TORC_API torc_status torc_plugin_load(const char *module,
                                      const torc_plugin_opts *opts);

/* Loads every plugin file (*.so) found on the search path (TORC_PLUGIN_PATH,
 * then the install folder), the first of each name winning. Files that
 * fail to load are reported as warnings. Returns the number loaded, or -1
 * when none could be. */
TORC_API int torc_plugin_load_all(void);

/* A loaded plugin, as listed by `torc plugins`. Strings live until
 * torc_shutdown. */
typedef struct torc_plugin_summary {
  const char *name;
  const char *version;
  const char *description;
  const char *path;
  uint32_t provides; /* TORC_PROVIDES_* */
  int priority;
  uint32_t abi_major, abi_minor;
} torc_plugin_summary;

/* Number of loaded plugins. */
TORC_API int torc_plugin_count(void);

/* Summary of loaded plugin i (0-based, in load order). */
TORC_API torc_status torc_plugin_get(int i, torc_plugin_summary *out);

/* One kernel registration, as listed by `torc plugins`. */
typedef struct torc_kernel_summary {
  const char *op;
  const char *device_type;
  torc_dtype dtype;     /* or TORC_DTYPE_ANY */
  const char *provider; /* plugin name */
  int priority;         /* effective */
  int active;           /* 1 if this one serves its key */
} torc_kernel_summary;

/* Number of kernel registrations. */
TORC_API int torc_kernel_count(void);

/* Registration i, sorted by op, device type, dtype, then priority. */
TORC_API torc_status torc_kernel_get(int i, torc_kernel_summary *out);

/* Names of every op the core knows, NULL-terminated, in ops.def order. */
TORC_API const char *const *torc_op_names(void);

/* Sets the number of CPU threads every plugin may use (>= 1). */
TORC_API torc_status torc_set_num_threads(int n);

/* The thread count (default: 1 until set). */
TORC_API int torc_get_num_threads(void);

/* Asks every backend for deterministic algorithms only (the same result
 * run to run: no atomics-ordered sums, no timing-chosen convolution
 * algorithms that differ in rounding), as PyTorch's
 * torch.use_deterministic_algorithms. [torc] deterministic = yes sets it.
 * Off by default; it may cost speed on GPUs. */
TORC_API void torc_use_deterministic_algorithms(int on);

/* 1 when torc_use_deterministic_algorithms(1) is in force, else 0. */
TORC_API int torc_deterministic_algorithms_enabled(void);

/* Turns the profiler on (resetting its counts) or off. While on, every
 * kernel is timed per op and device type (its FLOPs and bytes counted too:
 * torc/profile.h), every module's forward, and each backward formula is
 * charged to the module that recorded it. */
TORC_API void torc_profile_enable(int on);

/* 1 while the profiler is on. */
TORC_API int torc_profile_enabled(void);

/* A table of where the time went since torc_profile_enable(1): kernels by
 * op (the `top` costliest; 0 = all) with the device, the plugin that
 * served it (its last call), calls, time and share of the wall
 * time, the time outside kernels (the framework's own and data loading),
 * and forward/backward time per module. With `steps` > 0 times are per
 * step. A malloc'ed string (free it), or NULL on OOM. */
TORC_API char *torc_profile_report(int top, int64_t steps);

/* Log verbosity: TORC_LOG_ERROR (0) .. TORC_LOG_DEBUG (3); default WARN.
 * The TORC_LOG environment variable (error|warn|info|debug) sets it too. */
TORC_API void torc_set_log_level(int level);

/* Where log lines go: a callback, or NULL for stderr. */
typedef void (*torc_log_cb)(int level, const char *line, void *user);

/* Installs a log callback (NULL restores stderr). */
TORC_API void torc_set_log_callback(torc_log_cb cb, void *user);

/* Logs a line at `level` through the current sink. */
TORC_API void torc_logf(int level, const char *fmt, ...) TORC_PRINTF(2, 3);

/* Releases every plugin, device and registry entry. Tensors must have been
 * released first (a warning counts the live ones). Plugins flagged
 * TORC_PLUGIN_NO_UNLOAD stay mapped. The library can be used again after. */
TORC_API void torc_shutdown(void);

TORC_END_DECLS

#endif /* TORC_RUNTIME_H */
