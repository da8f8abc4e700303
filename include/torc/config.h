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

/* ---- reading a section, for code that builds from a configuration ----
 * What the trainer (torc/train.h) and a library's own builders use: the
 * typed reads validate the value as the schema does and name the file and
 * line in their errors. */

/* Index of the first occurrence of `section` in cfg (for the calls below
 * and torc_config_section_get), or -1 when absent or an argument is
 * NULL. */
TORC_API int torc_config_find(const torc_config *cfg, const char *section);

/* The value of `key` in section occurrence i as torc_config_section_get
 * gives it, but with path values resolved against the file's folder, and
 * the schema's default when the key is absent; NULL when neither. */
TORC_API const char *torc_config_value(const torc_config *cfg, int i,
                                       const char *key);

/* Typed reads of `key` in section occurrence i, the schema's default
 * applied: an integer (int64), a finite number, or a yes/no (yes, no,
 * true, false, on, off, 1, 0: *out 1 or 0). TORC_ERR_CONFIG "FILE:LINE:
 * key 'KEY' in [SECTION]: ..." when the key is absent and has no default
 * or when its value is not of that type; *out is then left alone. */
TORC_API torc_status torc_config_get_int(const torc_config *cfg, int i,
                                         const char *key, int64_t *out);
TORC_API torc_status torc_config_get_double(const torc_config *cfg, int i,
                                            const char *key, double *out);
TORC_API torc_status torc_config_get_bool(const torc_config *cfg, int i,
                                          const char *key, int *out);

/* Records `status` with the message "FILE:LINE: key 'KEY' in [SECTION]:
 * <fmt...>" for `key` of section occurrence i (LINE: the key's, else the
 * section's; "FILE (--set)" for a value set with torc_config_set; key NULL
 * gives "FILE:LINE: [SECTION]: ..."), for a builder that finds a validated
 * value it cannot use. Returns status. */
TORC_API torc_status torc_config_error(const torc_config *cfg, int i,
                                       const char *key, torc_status status,
                                       const char *fmt, ...)
    TORC_PRINTF(5, 6);

/* PyTorch's name for `key` of `scope` (a module, loss, optimizer or
 * scheduler type name such as "conv2d", or a section name), accepted in
 * its place ("kernel_size" for conv2d's "kernel"); NULL when the key has
 * none (most keys already carry PyTorch's name). For listings of keys. */
TORC_API const char *torc_config_key_alias(const char *scope,
                                           const char *key);

/* ---- adding sections to the schema ---- */

/* The type of a key's value, checked when a file is read. */
typedef enum torc_config_type {
  TORC_CONFIG_SECTION, /* the row describes the section itself (key NULL) */
  TORC_CONFIG_INT,     /* int64; `accepted` an optional range "LO..HI" */
  TORC_CONFIG_UINT,    /* uint64 (seeds); optional range */
  TORC_CONFIG_FLOAT,   /* a finite double; optional range */
  TORC_CONFIG_BOOL,    /* yes|no|true|false|on|off|1|0 */
  TORC_CONFIG_ENUM,    /* one of `accepted`, "a|b|c" */
  TORC_CONFIG_STRING,  /* any non-empty text; `accepted` describes it */
  TORC_CONFIG_PATH,    /* a file or folder, resolved against the file's */
  TORC_CONFIG_PATHS,   /* colon-separated folders, each resolved */
  TORC_CONFIG_BYTES,   /* 4096, 512K, 1M, 2G, 1T (powers of 1024) */
  TORC_CONFIG_MODULE,  /* a plugin name, or a path (with '/') resolved */
  TORC_CONFIG_ANY      /* key "*": any other key, checked by its user */
} torc_config_type;

/* Row flags. */
enum {
  TORC_CONFIG_REQUIRED = 1u << 0, /* key: present in each occurrence */
  TORC_CONFIG_REPEAT = 1u << 1    /* section: may occur more than once */
};

/* One row of a schema table: a section (key NULL, type
 * TORC_CONFIG_SECTION) or one of its keys. `section` is a name or a
 * pattern where '*' stands for one name ("data.*"); `accepted` is an
 * inclusive range "LO..HI" for the numbers (either side may be left out),
 * the '|'-separated values of an enum, or a description of a string; `def`
 * the default as text (NULL: none); `help` one line for `torc help
 * config`. */
typedef struct torc_config_row {
  const char *section; /* NULL ends a table */
  const char *key;
  torc_config_type type;
  const char *def;
  const char *accepted;
  unsigned flags; /* TORC_CONFIG_REQUIRED, TORC_CONFIG_REPEAT */
  const char *help;
} torc_config_row;

/* Adds a table of rows, ended by a row whose section is NULL, to the
 * sections and keys every file is validated against (and `torc help
 * config` lists). Register before loading the files that use them. The
 * table must stay valid for the life of the process (a static array);
 * adding the same table twice is a no-op. Checks every row (its type, the
 * pattern, an enum's values, a default that passes its own check, no
 * (section, key) defined twice) and adds nothing on error
 * (TORC_ERR_INVALID naming the row). Thread-safe. */
TORC_API torc_status torc_config_schema_add(const torc_config_row *rows);

TORC_END_DECLS

#endif /* TORC_CONFIG_H */
