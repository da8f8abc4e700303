/* core/config_read.c — reading a configuration: our line reader feeding
 * inih, checking each section and key against the schema, loading a file
 * or a string, and the `--set section.key=value` overrides.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "config_internal.h"

/* Configuration files larger than this are refused (not a config file). */
#define CFG_MAX_FILE (16u << 20)

/* ---- parsing ---- */

typedef struct parse_ctx {
  torc_config *cfg;
  const char *p, *end; /* the text not read yet */
  int line;            /* of the line handed to inih last */
  int cur;             /* current section occurrence, -1 before any */
  int skip;            /* ignore keys until the next good header */
  int max_line;        /* inih's buffer size, from the reader's `num` */
  int oom;
  int *first; /* per section occurrence: the first one of that name */
  int err_line; /* 0: no error yet */
  torc_status err_status;
  char err[MSG_MAX];
} parse_ctx;

/* Records an error at `line` if it comes before the one kept so far (ties:
 * the first recorded). The message gets the "FILE:LINE: " prefix. */
TORC_PRINTF(3, 4)
static void perr(parse_ctx *c, int line, const char *fmt, ...) {
  if (c->err_line != 0 && c->err_line <= line)
    return;
  char tmp[MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  size_t len = 0;
  append(c->err, sizeof c->err, &len, "%s:%d: %s", c->cfg->path, line, tmp);
  c->err_line = line;
  c->err_status = TORC_ERR_CONFIG;
}

/* Does the stripped line [s, e) have '=' or ':' before any inline comment
 * (inih's rule: ';' after whitespace)? */
static int has_assignment(const char *s, const char *e) {
  for (const char *p = s; p < e; p++) {
    if (*p == '=' || *p == ':')
      return 1;
    if (*p == ';' && p > s && is_blank((unsigned char)p[-1]))
      return 0;
  }
  return 0;
}

/* Handles a "[name]" line [s, e): opens a new section occurrence. */
static void section_header(parse_ctx *c, const char *s, const char *e) {
  const char *close = memchr(s, ']', (size_t)(e - s));
  c->skip = 1;
  if (close == NULL) {
    perr(c, c->line,
         "section header '%.*s' has no closing ']'; write "
         "[name]",
         (int)(e - s > 80 ? 80 : e - s), s);
    return;
  }
  const char *a = s + 1, *b = close;
  while (a < b && is_blank((unsigned char)*a))
    a++;
  while (b > a && is_blank((unsigned char)b[-1]))
    b--;
  if (a == b) {
    perr(c, c->line, "empty section name '[]'; write [name], e.g. [torc]");
    return;
  }
  const char *rest = close + 1;
  while (rest < e && is_blank((unsigned char)*rest))
    rest++;
  if (rest < e && *rest != ';' && *rest != '#')
    perr(c, c->line,
         "unexpected text '%.*s' after [%.*s]; a comment starts "
         "with ';'",
         (int)(e - rest > 60 ? 60 : e - rest), rest, (int)(b - a), a);
  int i = add_section(c->cfg, a, (size_t)(b - a), c->line);
  if (i < 0) {
    c->oom = 1;
    return;
  }
  c->cur = i;
  c->skip = 0;
}

/* inih's line source: hands out one line per call so that c->line is the
 * line inih works on; strips leading blanks (an indented line would be a
 * continuation of the previous value for inih: we do not accept
 * multi-line values) and CRs; detects section headers, over-long lines and
 * NUL bytes. */
static char *reader(char *str, int num, void *stream) {
  parse_ctx *c = stream;
  if (c->p >= c->end || num < 3)
    return NULL;
  c->max_line = num;
  const char *s = c->p;
  const char *nl = memchr(s, '\n', (size_t)(c->end - s));
  const char *e = nl ? nl : c->end;
  c->p = nl ? nl + 1 : c->end;
  c->line++;
  if (e > s && e[-1] == '\r')
    e--;
  if (c->line == 1 && e - s >= 3 && (unsigned char)s[0] == 0xEF &&
      (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
    s += 3;
  size_t raw = (size_t)(e - s);
  int indented = s < e && is_blank((unsigned char)*s);
  while (s < e && is_blank((unsigned char)*s))
    s++;
  str[0] = '\n';
  str[1] = '\0';
  if (memchr(s, '\0', (size_t)(e - s)) != NULL) {
    perr(c, c->line, "the line contains a NUL byte; is this a text file?");
    return str;
  }
  if (s == e || *s == ';' || *s == '#')
    return str; /* blank or comment: comments may be of any length */
  size_t limit = (size_t)num - 2; /* room for '\n' and NUL */
  if (raw > limit) {
    perr(c, c->line,
         "line longer than %zu characters (it has %zu); "
         "shorten it (comment lines may be longer)",
         limit, raw);
    return str;
  }
  if (*s == '[') {
    section_header(c, s, e);
  } else if (!has_assignment(s, e)) {
    perr(c, c->line,
         "cannot parse this line: '%.*s'; expected [section] or "
         "key = value%s",
         (int)(e - s > 80 ? 80 : e - s), s,
         indented ? " (a value cannot continue on an indented line)" : "");
    return str;
  }
  memcpy(str, s, (size_t)(e - s));
  str[e - s] = '\n';
  str[e - s + 1] = '\0';
  return str;
}

static int handler(void *user, const char *section, const char *name,
                   const char *value) {
  parse_ctx *c = user;
  (void)section; /* ours is c->cur: inih truncates names to 49 bytes */
  if (c->oom || c->skip)
    return 1;
  if (c->cur < 0) {
    perr(c, c->line,
         "key '%s' comes before any [section]; put it under "
         "the section it belongs to, e.g. [torc]",
         name);
    return 1;
  }
  cfg_section *s = &c->cfg->s[c->cur];
  if (name[0] == '\0') {
    perr(c, c->line,
         "[%s]: '=' with no key name before it; write key = "
         "value",
         s->name);
    return 1;
  }
  /* PyTorch's name for a key of the section is stored as that key. */
  const char *key = section_alias(s->name, name);
  cfg_entry *old = find_entry(s, key ? key : name);
  if (old && key) {
    perr(c, c->line,
         "key '%s' in [%s]: PyTorch's name for '%s', which line %d gives "
         "too; keep one",
         name, s->name, key, old->line);
    return 1;
  }
  if (old) {
    perr(c, c->line,
         "key '%s' in [%s]: given twice in this section (first "
         "at line %d); keep one",
         name, s->name, old->line);
    return 1;
  }
  if (key)
    name = key;
  char *v = dup_str(value);
  if (v == NULL || add_entry(s, name, v, c->line) == NULL)
    c->oom = 1;
  return 1;
}

/* Validates one section occurrence: known section, repeat rule, each key
 * and value (resolving paths), required keys. */
static void validate_section(parse_ctx *c, int i) {
  torc_config *cfg = c->cfg;
  cfg_section *s = &cfg->s[i];
  unsigned flags;
  char list[MSG_MAX], why[MSG_MAX];
  if (!section_known(s->name, &flags)) {
    nearest nr = NEAREST_INIT;
    known_sections(list, sizeof list, s->name, &nr);
    /* a NAME pattern whose prefix matches: the NAME part is wrong */
    row_iter it;
    for (ROWS_EACH(it, r)) {
      const char *star = strchr(r->section, '*');
      size_t pl = star ? (size_t)(star - r->section) : 0;
      if (star && strncmp(s->name, r->section, pl) == 0) {
        char shown[128];
        pattern_show(r->section, shown, sizeof shown);
        perr(c, s->line,
             "section [%s]: the NAME in %s may contain only "
             "letters, digits, '_' and '-'",
             s->name, shown);
        return;
      }
    }
    if (strcmp(s->name, "export") == 0) { /* export is a command */
      perr(c, s->line,
           "[export]: not a section; export a trained model with `torc "
           "export FILE.ini --checkpoint CKPT -o model.onnx` "
           "(docs/export.md) and remove the section");
      return;
    }
    char hint[160] = "";
    if (nr.word[0])
      snprintf(hint, sizeof hint, "did you mean %s? ", nr.word);
    perr(c, s->line, "unknown section [%s]; %sknown sections: %s", s->name,
         hint, list);
    return;
  }
  if (!(flags & TORC__CFG_REPEAT) && c->first[i] != i)
    perr(c, s->line,
         "section [%s] given twice (first at line %d); it "
         "may appear once: merge the two",
         s->name, cfg->s[c->first[i]].line);
  for (int k = 0; k < s->n; k++) {
    cfg_entry *e = &s->e[k];
    const torc__config_row *r = find_row(s->name, e->key);
    if (r == NULL) {
      nearest nr = NEAREST_INIT;
      known_keys(s->name, e->key, list, sizeof list, &nr);
      char hint[160] = "";
      if (nr.word[0])
        snprintf(hint, sizeof hint, "did you mean '%s'? ", nr.word);
      perr(c, e->line, "key '%s' in [%s]: unknown key; %s[%s] accepts: %s",
           e->key, s->name, hint, s->name, list);
      continue;
    }
    torc_status st =
        check_value(r, e->value, cfg->dir, &e->resolved, why, sizeof why);
    if (st == TORC_ERR_OOM)
      c->oom = 1;
    else if (st != TORC_OK)
      perr(c, e->line, "key '%s' in [%s]: %s", e->key, s->name, why);
  }
  row_iter it;
  for (ROWS_EACH(it, r)) {
    if (r->key == NULL || !(r->flags & TORC__CFG_REQUIRED) ||
        !pattern_match(r->section, s->name) || find_entry(s, r->key))
      continue;
    describe(r, list, sizeof list);
    perr(c, s->line, "section [%s] has no '%s' key; add '%s = ...' with %s",
         s->name, r->key, r->key, list);
  }
}

/* Folder of `path` (NULL when it has none: the current directory). */
static char *folder_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL)
    return NULL;
  if (slash == path)
    return dup_str("/");
  return dup_range(path, (size_t)(slash - path));
}

/* Parses and validates text [text, text+len) named `name`; relative paths
 * resolve against the folder of `name` when from_file. */
static torc_config *parse_text(const char *text, size_t len, const char *name,
                               int from_file) {
  torc__ensure_init();
  torc_config *cfg = torc__calloc(1, sizeof *cfg);
  parse_ctx c;
  memset(&c, 0, sizeof c);
  if (cfg == NULL)
    goto oom;
  cfg->path = dup_str(name);
  if (cfg->path == NULL)
    goto oom;
  if (from_file && strchr(name, '/')) {
    cfg->dir = folder_of(name);
    if (cfg->dir == NULL)
      goto oom;
  }
  c.cfg = cfg;
  c.p = text;
  c.end = text + len;
  c.cur = -1;
  int r = ini_parse_stream(reader, &c, handler, &c);
  if (c.oom || r == -2)
    goto oom;
  if (r > 0) /* inih's own complaint; ours at that line, if any, wins */
    perr(&c, r,
         "cannot parse this line: expected [section] or key = "
         "value");
  c.first = first_occurrences(cfg);
  if (c.first == NULL)
    goto oom;
  for (int i = 0; i < cfg->n && !c.oom; i++)
    validate_section(&c, i);
  torc__free(c.first);
  if (c.oom)
    goto oom;
  if (c.err_line) {
    torc_set_error(c.err_status, "%s", c.err);
    torc_config_free(cfg);
    return NULL;
  }
  return cfg;
oom:
  torc_config_free(cfg);
  torc_set_error(TORC_ERR_OOM, "out of memory reading configuration '%s'",
                 name);
  return NULL;
}

torc_config *torc_config_parse(const char *text, const char *name) {
  if (text == NULL) {
    torc_set_error(TORC_ERR_INVALID, "torc_config_parse: text is NULL");
    return NULL;
  }
  return parse_text(text, strlen(text), name ? name : "<string>", 0);
}

torc_config *torc_config_load(const char *path) {
  if (path == NULL) {
    torc_set_error(TORC_ERR_INVALID, "torc_config_load: path is NULL");
    return NULL;
  }
  /* O_NONBLOCK: opening a FIFO must not wait for a writer. Only a regular
   * file is read (a device or FIFO could feed it forever). */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    torc_set_error(TORC_ERR_IO, "cannot open configuration file '%s': %s", path,
                   strerror(errno));
    return NULL;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    torc_set_error(TORC_ERR_IO, "cannot read configuration file '%s': %s",
                   path, strerror(e));
    return NULL;
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    torc_set_error(TORC_ERR_IO,
                   "configuration file '%s' is %s, not a regular file; give "
                   "the path of an INI file",
                   path,
                   S_ISDIR(sb.st_mode)    ? "a directory"
                   : S_ISFIFO(sb.st_mode) ? "a FIFO"
                   : S_ISCHR(sb.st_mode)  ? "a character device"
                   : S_ISBLK(sb.st_mode)  ? "a block device"
                   : S_ISSOCK(sb.st_mode) ? "a socket"
                                          : "a special file");
    return NULL;
  }
  FILE *f = fdopen(fd, "rb");
  if (f == NULL) {
    close(fd);
    torc_set_error(TORC_ERR_IO, "cannot open configuration file '%s': %s", path,
                   strerror(errno));
    return NULL;
  }
  size_t cap = 4096, len = 0;
  char *buf = torc__malloc(cap);
  int err = 0;
  while (buf) {
    if (len == cap) {
      if (cap >= CFG_MAX_FILE)
        break;
      char *nb = torc__realloc(buf, cap * 2);
      if (nb == NULL) {
        torc__free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f))
        err = errno ? errno : EIO;
      break;
    }
  }
  fclose(f);
  if (buf == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory reading '%s'", path);
    return NULL;
  }
  if (err) {
    torc__free(buf);
    torc_set_error(TORC_ERR_IO, "cannot read configuration file '%s': %s", path,
                   strerror(err));
    return NULL;
  }
  if (len == cap) {
    torc__free(buf);
    torc_set_error(TORC_ERR_CONFIG,
                   "configuration file '%s' is larger than "
                   "%u MiB; is it really an INI file?",
                   path, CFG_MAX_FILE >> 20);
    return NULL;
  }
  torc_config *cfg = parse_text(buf, len, path, 1);
  torc__free(buf);
  return cfg;
}

/* ---- --set overrides ---- */

torc_status torc_config_set(torc_config *cfg, const char *assignment) {
  if (cfg == NULL || assignment == NULL)
    return torc_set_error(TORC_ERR_INVALID, "torc_config_set: %s is NULL",
                          cfg == NULL ? "cfg" : "assignment");
  const char *eq = strchr(assignment, '=');
  const char *a = assignment, *b = eq ? eq : assignment;
  while (*a && is_blank((unsigned char)*a))
    a++;
  while (b > a && is_blank((unsigned char)b[-1]))
    b--;
  const char *dot = NULL;
  for (const char *p = a; p < b; p++)
    if (*p == '.')
      dot = p;
  if (eq == NULL || dot == NULL || dot == a || dot + 1 == b)
    return torc_set_error(TORC_ERR_CONFIG,
                          "--set '%s': expected section.key=value, e.g. "
                          "torc.threads=4 or plugin.sim.memory=1M",
                          assignment);
  char section[256], key[256];
  if ((size_t)(dot - a) >= sizeof section ||
      (size_t)(b - dot - 1) >= sizeof key)
    return torc_set_error(TORC_ERR_CONFIG,
                          "--set '%s': section or key name "
                          "too long",
                          assignment);
  snprintf(section, sizeof section, "%.*s", (int)(dot - a), a);
  snprintf(key, sizeof key, "%.*s", (int)(b - dot - 1), dot + 1);
  const char *alias_of = section_alias(section, key);
  if (alias_of) /* PyTorch's name for a key of the section */
    snprintf(key, sizeof key, "%s", alias_of);
  const char *v = eq + 1, *ve = v + strlen(v);
  while (*v && is_blank((unsigned char)*v))
    v++;
  while (ve > v && is_blank((unsigned char)ve[-1]))
    ve--;
  char *value = dup_range(v, (size_t)(ve - v));
  if (value == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory in torc_config_set");

  char prefix[600], why[MSG_MAX], list[MSG_MAX];
  nearest nr = NEAREST_INIT;
  snprintf(prefix, sizeof prefix, "--set %s.%s=%s", section, key, value);
  unsigned flags;
  if (!section_known(section, &flags)) {
    known_sections(list, sizeof list, section, &nr);
    char hint[160] = "";
    if (nr.word[0])
      snprintf(hint, sizeof hint, "did you mean %s? ", nr.word);
    torc__free(value);
    return torc_set_error(TORC_ERR_CONFIG,
                          "%s: unknown section [%s]; %sknown "
                          "sections: %s",
                          prefix, section, hint, list);
  }
  const torc__config_row *r = find_row(section, key);
  if (r == NULL) {
    known_keys(section, key, list, sizeof list, &nr);
    char hint[160] = "";
    if (nr.word[0])
      snprintf(hint, sizeof hint, "did you mean '%s'? ", nr.word);
    torc__free(value);
    return torc_set_error(TORC_ERR_CONFIG,
                          "%s: key '%s' in [%s]: unknown "
                          "key; %s[%s] accepts: %s",
                          prefix, key, section, hint, section, list);
  }
  /* Values given on the command line are relative to the current folder. */
  char *resolved = NULL;
  torc_status st = check_value(r, value, NULL, &resolved, why, sizeof why);
  if (st != TORC_OK) {
    torc__free(value);
    torc__free(resolved);
    if (st == TORC_ERR_OOM)
      return torc_set_error(st, "out of memory in torc_config_set");
    return torc_set_error(st, "%s: key '%s' in [%s]: %s", prefix, key, section,
                          why);
  }
  int i = torc__config_find(cfg, section);
  if (i < 0 && (i = add_section(cfg, section, strlen(section), 0)) < 0) {
    torc__free(value);
    torc__free(resolved);
    return torc_set_error(TORC_ERR_OOM, "out of memory in torc_config_set");
  }
  cfg_entry *e = find_entry(&cfg->s[i], key);
  if (e == NULL) {
    e = add_entry(&cfg->s[i], key, value, 0);
    if (e == NULL) {
      torc__free(resolved);
      return torc_set_error(TORC_ERR_OOM, "out of memory in torc_config_set");
    }
  } else {
    torc__free(e->value);
    torc__free(e->resolved);
    e->value = value;
    e->line = 0;
  }
  e->resolved = resolved;
  return TORC_OK;
}
