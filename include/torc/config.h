/* torc/config.h — INI configuration files (parsed with inih), validated
 * against the keys each section accepts: an unknown section or key, or a
 * bad value, is an error "FILE:LINE: key 'x' in [s]: ..." with the accepted
 * values and, for a misspelling, the nearest valid key.
 *
 * Sections known to the core: [torc], [plugins], [plugin.NAME], [device].
 * A section name may repeat ([layer]); each occurrence is kept, in order.
 */
#ifndef TORC_CONFIG_H
#define TORC_CONFIG_H

#include "torc/device.h"
#include "torc/error.h"

TORC_BEGIN_DECLS

/* A parsed configuration file. */
typedef struct torc_config torc_config;

/* Parses and validates the INI file at `path`. NULL on failure, with a
 * "FILE:LINE: ..." message in torc_last_error() (TORC_ERR_IO for a file
 * that cannot be read, TORC_ERR_CONFIG for its contents). Free with
 * torc_config_free. */
TORC_API torc_config *torc_config_load(const char *path);

/* As torc_config_load, from a string; `name` stands for the file name in
 * messages and relative paths resolve against the current directory. */
TORC_API torc_config *torc_config_parse(const char *text, const char *name);

/* Frees a configuration. NULL is ignored. */
TORC_API void torc_config_free(torc_config *cfg);

/* Applies an override "section.key=value" (as `--set` on the command line):
 * replaces the key in the first occurrence of the section (adding the
 * section or key if absent), then validates it. Errors: TORC_ERR_CONFIG. */
TORC_API torc_status torc_config_set(torc_config *cfg, const char *assignment);

/* The value of `key` in the first occurrence of `section`, or NULL. The
 * string lives as long as cfg. */
TORC_API const char *torc_config_get(const torc_config *cfg,
                                     const char *section, const char *key);

/* The line of `key` in the first occurrence of `section` (0 if absent or
 * set with torc_config_set). */
TORC_API int torc_config_line(const torc_config *cfg, const char *section,
                              const char *key);

/* The path the configuration was read from (or the name given). */
TORC_API const char *torc_config_path(const torc_config *cfg);

/* Number of sections, counting each occurrence of a repeated name. */
TORC_API int torc_config_section_count(const torc_config *cfg);

/* Name of section occurrence i (0-based), or NULL when out of range. */
TORC_API const char *torc_config_section_name(const torc_config *cfg, int i);

/* Value of `key` in section occurrence i, or NULL. */
TORC_API const char *torc_config_section_get(const torc_config *cfg, int i,
                                             const char *key);

/* Number of keys in section occurrence i (0 when out of range), and the
 * name of key j of it, in file order (NULL when out of range). */
TORC_API int torc_config_section_key_count(const torc_config *cfg, int i);
TORC_API const char *torc_config_section_key(const torc_config *cfg, int i,
                                             int j);

/* Applies [torc] (threads, seed, fallback; a key left out keeps the
 * library's setting) and [plugins]/[plugin.NAME] (loads each
 * plugin; a `required = no` plugin that fails gives a warning and the run
 * goes on). Errors name the file and line of the offending key. */
TORC_API torc_status torc_config_apply(const torc_config *cfg);

/* The device named by [device] type (after torc_config_apply), or the cpu
 * when the section is absent. Errors: unknown device, with file:line. */
TORC_API torc_status torc_config_device(const torc_config *cfg,
                                        torc_device *out);

/* Every section and key the configuration accepts (the core's, the
 * model's, the data loader's, the trainer's and any a library adds), with
 * its type or accepted values, default and one line of help: what `torc
 * help config` prints. A malloc'ed string (free it), or NULL on OOM. */
TORC_API char *torc_config_help(void);

TORC_END_DECLS

#endif /* TORC_CONFIG_H */
