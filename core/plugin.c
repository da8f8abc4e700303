/* core/plugin.c — the plugin loader: finding NAME.so on the search path,
 * refusing files others can write, dlopen(RTLD_NOW | RTLD_LOCAL), the
 * entry symbol and ABI checks, key validation, init with the host table and
 * rollback when init fails; the host table itself; listing and unloading.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_internal.h"
#include "elf_check.h"
#include "internal.h"
#include "module_internal.h"
#include "optim_internal.h"
#include "torc/plugin_api.h"

/* The function table plugins get as host->api (plugin_api.c). */
extern const torc_api torc__api;

#ifndef TORC_PLUGIN_DIR
#define TORC_PLUGIN_DIR "/usr/local/lib/torc/plugins"
#endif

struct torc__plugin {
  char *name, *version, *description, *path;
  void *handle;
  const torc_plugin_info *info;
  uint32_t provides, flags;
  uint32_t abi_major, abi_minor;
  int priority;
  int n_unknown_ops; /* kernels skipped for ops this core lacks */
  /* The first kernel refused for an unknown op: the load fails with this
   * message even if init ignores register_kernel's status. */
  char bad_op_msg[512];
  int n_keys;
  char **keys, **values;
  int initialised;
};

static torc__plugin **plugins;
static int n_plugins, cap_plugins;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

const char *torc__plugin_name(const torc__plugin *p) { return p->name; }
int torc__plugin_priority(const torc__plugin *p) { return p->priority; }
uint32_t torc__plugin_abi_minor(const torc__plugin *p) { return p->abi_minor; }
int torc__plugin_note_unknown_op(torc__plugin *p) { return p->n_unknown_ops++; }
void torc__plugin_refuse_op(torc__plugin *p, const char *msg) {
  if (p->bad_op_msg[0] == '\0')
    snprintf(p->bad_op_msg, sizeof p->bad_op_msg, "%s", msg);
}

/* ---- the host table ---- */

static int host_set_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  torc__set_error_v(status, fmt, ap);
  va_end(ap);
  return status;
}

static void host_log(int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  torc__log_v(level, fmt, ap);
  va_end(ap);
}

static const char *host_config_get(torc_plugin *self, const char *key) {
  torc__plugin *p = (torc__plugin *)self;
  if (p == NULL || key == NULL)
    return NULL;
  for (int i = 0; i < p->n_keys; i++)
    if (strcmp(p->keys[i], key) == 0)
      return p->values[i];
  if (p->info && p->info->keys)
    for (const torc_plugin_key *k = p->info->keys; k->name; k++)
      if (strcmp(k->name, key) == 0)
        return k->default_value;
  return NULL;
}

static int host_register_device(torc_plugin *self,
                                const torc_device_ops *ops) {
  return torc__devtype_register((torc__plugin *)self, ops) < 0
             ? torc_last_status()
             : TORC_OK;
}

static int host_register_kernel(torc_plugin *self, const torc_kernel_reg *reg) {
  return torc__kernel_register((torc__plugin *)self, reg);
}

static int host_num_threads(void) { return torc_get_num_threads(); }

/* Closes a plugin refused before its init ran (an unknown key, a missing
 * requirement), unless it asks never to be unloaded: loading alone set up
 * the libraries it pulls in (libstdc++'s exception pool, the CUDA runtime's
 * tables), which dlclose would orphan. */
static void close_refused(void *h, const torc_plugin_info *info) {
  if (TORC_HAS_SLOT(info, torc_plugin_info, flags) &&
      (info->flags & TORC_PLUGIN_NO_UNLOAD))
    return;
  dlclose(h);
}

static const char *type_name(const torc_module_type *type) {
  return TORC_HAS_SLOT(type, torc_module_type, name) && type->name
             ? type->name
             : "(unnamed)";
}

/* Module types belong to the plugin: unregistered with it at unload (before
 * dlclose, as their tables live in the plugin). A plugin that forgot
 * TORC_PROVIDES_MODULE still gets its type (provides only informs listings
 * such as `torc plugins`), with a warning telling its author the fix. */
static int host_register_module_type(torc_plugin *self,
                                     const torc_module_type *type) {
  torc__plugin *p = (torc__plugin *)self;
  if (p == NULL || type == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "register_module_type: %s is NULL; pass the "
                          "plugin handle given to init and a module type",
                          p == NULL ? "the plugin handle" : "the type");
  if (!(p->provides & TORC_PROVIDES_MODULE))
    torc_logf(TORC_LOG_WARN,
              "plugin '%s' registers module type '%s' but its info.provides "
              "lacks TORC_PROVIDES_MODULE; add it so listings show the "
              "plugin provides modules",
              p->name, type_name(type));
  torc_status st = torc__module_type_register_owned(p, type);
  if (st != TORC_OK) {
    /* The core's message names the type and, for a taken name, its owner;
     * add the plugin that tried, so both owners are named. */
    char msg[1024];
    const char *e = torc_last_error();
    const char *prefix = "torc_module_type_register: ";
    if (strncmp(e, prefix, strlen(prefix)) == 0)
      e += strlen(prefix);
    snprintf(msg, sizeof msg, "%s", e);
    torc_set_error(st, "plugin '%s' cannot register module type '%s': %s",
                   p->name, type_name(type), msg);
  }
  return st;
}

static const char *source_name(const torc_data_source_type *type) {
  return TORC_HAS_SLOT(type, torc_data_source_type, name) && type->name
             ? type->name
             : "(unnamed)";
}

/* Data source types belong to the plugin as module types do: unregistered
 * at unload or when init fails, with a warning when provides lacks
 * TORC_PROVIDES_DATA. */
static int host_register_data_source(torc_plugin *self,
                                     const torc_data_source_type *type) {
  torc__plugin *p = (torc__plugin *)self;
  if (p == NULL || type == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "register_data_source: %s is NULL; pass the "
                          "plugin handle given to init and a data source "
                          "type",
                          p == NULL ? "the plugin handle" : "the type");
  if (!(p->provides & TORC_PROVIDES_DATA))
    torc_logf(TORC_LOG_WARN,
              "plugin '%s' registers data source '%s' but its info.provides "
              "lacks TORC_PROVIDES_DATA; add it so listings show the plugin "
              "provides data sources",
              p->name, source_name(type));
  torc_status st = torc__data_source_register_owned(p, type);
  if (st != TORC_OK) {
    char msg[1024];
    const char *e = torc_last_error();
    const char *prefix = "torc_data_source_register: ";
    if (strncmp(e, prefix, strlen(prefix)) == 0)
      e += strlen(prefix);
    snprintf(msg, sizeof msg, "%s", e);
    torc_set_error(st, "plugin '%s' cannot register data source '%s': %s",
                   p->name, source_name(type), msg);
  }
  return st;
}

/* Loss, optimizer and scheduler types belong to the plugin as module types
 * do: unregistered at unload or when init fails, with a warning when
 * provides lacks the matching TORC_PROVIDES_ bit. `kind` words the
 * messages ("loss type"), `fn` is the core's prefix to drop from them. */
static int host_register_optim(torc_plugin *self, const void *type,
                               const char *name, const char *kind,
                               const char *slot, uint32_t bit,
                               const char *bit_name, const char *fn,
                               torc_status (*reg)(torc__plugin *,
                                                  const void *)) {
  torc__plugin *p = (torc__plugin *)self;
  if (p == NULL || type == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "%s: %s is NULL; pass the plugin handle given to "
                          "init and a %s",
                          slot, p == NULL ? "the plugin handle" : "the type",
                          kind);
  if (!(p->provides & bit))
    torc_logf(TORC_LOG_WARN,
              "plugin '%s' registers %s '%s' but its info.provides lacks "
              "%s; add it so listings show what the plugin provides",
              p->name, kind, name ? name : "(unnamed)", bit_name);
  torc_status st = reg(p, type);
  if (st != TORC_OK) {
    char msg[1024];
    const char *e = torc_last_error();
    size_t fl = strlen(fn);
    if (strncmp(e, fn, fl) == 0 && strncmp(e + fl, ": ", 2) == 0)
      e += fl + 2;
    snprintf(msg, sizeof msg, "%s", e);
    torc_set_error(st, "plugin '%s' cannot register %s '%s': %s", p->name,
                   kind, name ? name : "(unnamed)", msg);
  }
  return st;
}

static torc_status reg_loss(torc__plugin *p, const void *t) {
  return torc__loss_type_register_owned(p, t);
}
static torc_status reg_optimizer(torc__plugin *p, const void *t) {
  return torc__optimizer_type_register_owned(p, t);
}
static torc_status reg_scheduler(torc__plugin *p, const void *t) {
  return torc__scheduler_type_register_owned(p, t);
}

static int host_register_loss(torc_plugin *self, const torc_loss_type *type) {
  const char *name = type && TORC_HAS_SLOT(type, torc_loss_type, name)
                         ? type->name
                         : NULL;
  return host_register_optim(self, type, name, "loss type", "register_loss",
                             TORC_PROVIDES_LOSS, "TORC_PROVIDES_LOSS",
                             "torc_loss_type_register", reg_loss);
}

static int host_register_optimizer(torc_plugin *self,
                                   const torc_optimizer_type *type) {
  const char *name = type && TORC_HAS_SLOT(type, torc_optimizer_type, name)
                         ? type->name
                         : NULL;
  return host_register_optim(self, type, name, "optimizer type",
                             "register_optimizer", TORC_PROVIDES_OPTIM,
                             "TORC_PROVIDES_OPTIM",
                             "torc_optimizer_type_register", reg_optimizer);
}

static int host_register_scheduler(torc_plugin *self,
                                   const torc_scheduler_type *type) {
  const char *name = type && TORC_HAS_SLOT(type, torc_scheduler_type, name)
                         ? type->name
                         : NULL;
  return host_register_optim(self, type, name, "scheduler type",
                             "register_scheduler", TORC_PROVIDES_OPTIM,
                             "TORC_PROVIDES_OPTIM",
                             "torc_scheduler_type_register", reg_scheduler);
}

static int host_register_comm(torc_plugin *self, const torc_comm_type *type) {
  torc__plugin *p = (torc__plugin *)self;
  if (p == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "register_comm: the plugin handle is NULL; pass "
                          "the one given to init");
  const char *name = type && type->name ? type->name : "(unnamed)";
  if (!(p->provides & TORC_PROVIDES_COMM))
    torc_logf(TORC_LOG_WARN,
              "plugin '%s' registers communicator '%s' but its "
              "info.provides lacks TORC_PROVIDES_COMM; add it so listings "
              "show what the plugin provides",
              p->name, name);
  torc_status st = torc__comm_register(p, type);
  if (st != TORC_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", torc_last_error());
    torc_set_error(st, "plugin '%s' cannot register communicator '%s': %s",
                   p->name, name, msg);
  }
  return st;
}

/* Everything a plugin registered, undone (failed init, unload). */
static void unregister_all(torc__plugin *p) {
  torc__comm_unregister_owner(p);
  torc__optim_types_unregister_owner(p);
  torc__data_sources_unregister_owner(p);
  torc__module_types_unregister_owner(p);
  torc__kernel_unregister_owner(p);
  torc__devtype_unregister_owner(p);
}

const torc_host torc__host = {
    .struct_size = sizeof(torc_host),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .core_version = PACKAGE_VERSION,
    .set_error = host_set_error,
    .log = host_log,
    .config_get = host_config_get,
    .register_device = host_register_device,
    .register_kernel = host_register_kernel,
    .num_threads = host_num_threads,
    .set_error_v = torc__set_error_v,
    .api = &torc__api,
    .register_module_type = host_register_module_type,
    .register_data_source = host_register_data_source,
    .register_loss = host_register_loss,
    .register_optimizer = host_register_optimizer,
    .register_scheduler = host_register_scheduler,
    .kernel_scratch = torc__kernel_scratch,
    .deterministic_algorithms = torc_deterministic_algorithms_enabled,
    .register_comm = host_register_comm,
};

/* ---- helpers ---- */

static void plugin_free(torc__plugin *p) {
  if (p == NULL)
    return;
  for (int i = 0; i < p->n_keys; i++) {
    torc__free(p->keys[i]);
    torc__free(p->values[i]);
  }
  torc__free(p->keys);
  torc__free(p->values);
  torc__free(p->name);
  torc__free(p->version);
  torc__free(p->description);
  torc__free(p->path);
  torc__free(p);
}

static torc__plugin *find_loaded(const char *name) {
  for (int i = 0; i < n_plugins; i++)
    if (strcmp(plugins[i]->name, name) == 0)
      return plugins[i];
  return NULL;
}

/* "FILE:LINE: " for messages, or "" with no file. */
static const char *where(const torc_plugin_opts *o, int line, char *buf,
                         size_t size) {
  if (o == NULL || o->file == NULL)
    return "";
  if (line > 0)
    snprintf(buf, size, "%s:%d: ", o->file, line);
  else
    snprintf(buf, size, "%s: ", o->file);
  return buf;
}

static int valid_plugin_name(const char *s) {
  if (s == NULL || *s == '\0' || strlen(s) > 64)
    return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
      return 0;
  return 1;
}

/* Appends dir/NAME.so candidates from a colon-separated list; returns 1
 * with `out` set when one exists. `searched` collects the folders tried. */
static int search_list(const char *list, const char *name, char *out,
                       size_t size, char *searched, size_t ssize) {
  if (list == NULL || *list == '\0')
    return 0;
  const char *p = list;
  while (*p) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    if (len > 0 && len < PATH_MAX) {
      char dir[PATH_MAX];
      memcpy(dir, p, len);
      dir[len] = '\0';
      size_t sl = strlen(searched);
      if (sl < ssize)
        snprintf(searched + sl, ssize - sl, "%s%s", sl ? ", " : "", dir);
      snprintf(out, size, "%s/%s.so", dir, name);
      if (access(out, F_OK) == 0)
        return 1;
    }
    if (!colon)
      break;
    p = colon + 1;
  }
  return 0;
}

/* Refuses a file (or a folder on its real path) that other users can
 * write or that belongs to another user, as ssh's StrictModes does. Sticky
 * world-writable folders (/tmp) pass: others cannot replace entries there. */
static torc_status check_secure(const char *name, const char *path,
                                const char *real, int allow,
                                const char *pre) {
  uid_t me = geteuid();
  char cur[PATH_MAX];
  snprintf(cur, sizeof cur, "%s", real);
  int is_file = 1;
  for (;;) {
    struct stat st;
    if (stat(cur, &st) != 0)
      return torc_set_error(TORC_ERR_IO, "%splugin '%s' (%s): cannot stat %s: %s",
                            pre, name, path, cur, strerror(errno));
    const char *problem = NULL;
    char why[PATH_MAX + 128];
    if (st.st_uid != 0 && st.st_uid != me)
      problem = "is owned by another user";
    else if ((st.st_mode & (S_IWGRP | S_IWOTH)) &&
             !(!is_file && (st.st_mode & S_ISVTX)))
      problem = (st.st_mode & S_IWOTH) ? "is writable by other users"
                                       : "is writable by its group";
    if (problem) {
      snprintf(why, sizeof why, "%s %s %s (mode %04o)",
               is_file ? "the file" : "the folder", cur, problem,
               (unsigned)(st.st_mode & 07777));
      if (!allow)
        return torc_set_error(
            TORC_ERR_PERMISSION,
            "%splugin '%s' (%s) refused: %s, so someone else could replace "
            "the code torc would run. Fix it with chmod go-w (or chown), or "
            "set [plugins] allow_insecure = yes to load it anyway",
            pre, name, path, why);
      torc_logf(TORC_LOG_WARN,
               "%splugin '%s' (%s): %s; loading it anyway because "
               "allow_insecure is set",
               pre, name, path, why);
      return TORC_OK;
    }
    if (strcmp(cur, "/") == 0)
      break;
    char *slash = strrchr(cur, '/');
    if (slash == cur)
      cur[1] = '\0';
    else if (slash)
      *slash = '\0';
    else
      break;
    is_file = 0;
  }
  return TORC_OK;
}

static void ensure_omp_passive(void) {
  /* oneDNN's libgomp threads spin while idle and slow OpenBLAS's pool 2x on
   * small machines (measured); passive waiting must be set before the
   * runtime loads. The user's own setting wins. */
  if (getenv("OMP_WAIT_POLICY") == NULL)
    setenv("OMP_WAIT_POLICY", "passive", 0);
  /* The cpu plugin calls OpenBLAS single-threaded and splits work across
   * its own pool; OpenBLAS's server threads, started when the library
   * loads, would spin in sched_yield for ~0.1 s after each start and take
   * a core from the pool (measured: a 2-thread MLP step 20-25% slower).
   * Also read only at load time; the user's own setting wins. */
  if (getenv("OPENBLAS_NUM_THREADS") == NULL)
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
}

/* ---- loading ---- */

static torc_status load_locked(const char *module, const torc_plugin_opts *o);

/* Loads the plugins `info` requires (torc_plugin_info.requires) that are
 * not loaded yet, from o's search path, at priority 0. */
static torc_status load_requires(const torc_plugin_info *info,
                                 const char *name, const char *path,
                                 const torc_plugin_opts *o, const char *pre) {
  static int depth; /* under load_lock */
  if (!TORC_HAS_SLOT(info, torc_plugin_info, requires) ||
      info->requires == NULL)
    return TORC_OK;
  if (depth >= 8)
    return torc_set_error(TORC_ERR_PLUGIN,
                          "%splugin '%s' (%s): its requirements nest more "
                          "than 8 deep; do two plugins require each other?",
                          pre, name, path);
  torc_status st = TORC_OK;
  for (const char *const *r = info->requires; *r && st == TORC_OK; r++) {
    if (find_loaded(*r))
      continue;
    torc_plugin_opts dep = {0};
    if (o) { /* file and line stay out: the message below has them */
      dep.search_path = o->search_path;
      dep.allow_insecure = o->allow_insecure;
    }
    depth++;
    st = load_locked(*r, &dep);
    depth--;
    if (st != TORC_OK) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", torc_last_error());
      return torc_set_error(st, "%splugin '%s' (%s) requires plugin '%s', "
                                "which did not load: %s",
                            pre, name, path, *r, msg);
    }
    torc_logf(TORC_LOG_INFO, "loaded plugin %s: plugin %s requires it", *r,
              name);
  }
  return st;
}

static torc_status load_locked(const char *module, const torc_plugin_opts *o) {
  char wbuf[PATH_MAX + 32];
  const char *pre = where(o, o ? o->line : 0, wbuf, sizeof wbuf);
  if (module == NULL || *module == '\0')
    return torc_set_error(TORC_ERR_INVALID, "%splugin module name is empty",
                          pre);
  const char *want_name = o && o->name ? o->name : NULL;
  char path[PATH_MAX];
  /* For messages: the requested name, or the file's name without ".so". */
  char stem[128];
  const char *slash = strrchr(module, '/');
  snprintf(stem, sizeof stem, "%s", slash ? slash + 1 : module);
  size_t sl = strlen(stem);
  if (sl > 3 && strcmp(stem + sl - 3, ".so") == 0)
    stem[sl - 3] = '\0';
  const char *label = want_name ? want_name : stem;
  if (strchr(module, '/') == NULL) {
    if (!valid_plugin_name(module))
      return torc_set_error(TORC_ERR_INVALID,
                            "%splugin module '%s' is not a valid name (letters, "
                            "digits, '_' and '-') nor a path",
                            pre, module);
    if (find_loaded(want_name ? want_name : module))
      return TORC_OK;
    char searched[2048] = "";
    if (!search_list(o ? o->search_path : NULL, module, path, sizeof path,
                     searched, sizeof searched) &&
        !search_list(getenv("TORC_PLUGIN_PATH"), module, path, sizeof path,
                     searched, sizeof searched) &&
        !search_list(TORC_PLUGIN_DIR, module, path, sizeof path, searched,
                     sizeof searched))
      return torc_set_error(TORC_ERR_IO,
                            "%splugin '%s' not found: no %s.so in %s. Check "
                            "the name, install the plugin, or add its folder "
                            "to [plugins] path or TORC_PLUGIN_PATH",
                            pre, label, module, searched);
  } else {
    snprintf(path, sizeof path, "%s", module);
    if (access(path, F_OK) != 0)
      return torc_set_error(TORC_ERR_IO,
                            "%splugin '%s': file %s does not exist (%s)", pre,
                            label, path, strerror(errno));
  }
  char real[PATH_MAX];
  if (realpath(path, real) == NULL)
    return torc_set_error(TORC_ERR_IO, "%splugin '%s': cannot resolve %s: %s",
                          pre, label, path, strerror(errno));
  torc_status st =
      check_secure(label, path, real, o ? o->allow_insecure : 0, pre);
  if (st)
    return st;

  /* dlopen maps the file's segments and touches their pages: one cut short
   * would end the process with SIGBUS, a FIFO would block it. Check the
   * file itself first (O_NONBLOCK: opening a FIFO must not wait). */
  int fd = open(real, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return torc_set_error(TORC_ERR_IO, "%splugin '%s' (%s): cannot open %s: %s",
                          pre, label, path, real, strerror(errno));
  char why[256];
  int bad = torc__elf_check_fd(fd, why, sizeof why);
  close(fd);
  if (bad)
    return torc_set_error(TORC_ERR_PLUGIN,
                          "%splugin '%s' (%s) is not a loadable shared "
                          "object: %s; point `module` at a torc plugin (.so) "
                          "built for this machine",
                          pre, label, path, why);

  ensure_omp_passive();
  dlerror();
  void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char *err = dlerror();
    err = err ? err : "unknown error";
    const char *base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    const char *dep_end = strstr(err, ": cannot open shared object file");
    if (dep_end) {
      /* dlerror: "<dependency>: cannot open shared object file: ..." */
      const char *dep = err;
      if (strncmp(dep, real, strlen(real)) == 0)
        dep = base;
      return torc_set_error(
          TORC_ERR_PLUGIN,
          "%splugin '%s' (%s) cannot be loaded: a library it needs is missing "
          "(%s). Install the package that provides %.*s, or add its folder to "
          "LD_LIBRARY_PATH",
          pre, label, path, err, (int)(dep_end - dep), dep);
    }
    if (strstr(err, "invalid ELF header") || strstr(err, "file too short") ||
        strstr(err, "not an ELF") || strstr(err, "wrong ELF class"))
      return torc_set_error(TORC_ERR_PLUGIN,
                            "%splugin '%s' (%s) is not a loadable shared object "
                            "(%s); point `module` at a torc plugin (.so) built "
                            "for this machine",
                            pre, label, path, err);
    return torc_set_error(TORC_ERR_PLUGIN,
                          "%splugin '%s' (%s) cannot be loaded: %s", pre, label,
                          path, err);
  }
  dlerror();
  void *sym = dlsym(h, TORC_PLUGIN_ENTRY_SYMBOL);
  if (sym == NULL) {
    dlclose(h);
    return torc_set_error(
        TORC_ERR_PLUGIN,
        "%splugin '%s' (%s) is a shared object but not a torc plugin: it has "
        "no '%s' symbol (export it with TORC_PLUGIN_EXPORT; see "
        "torc/plugin.h)",
        pre, label, path, TORC_PLUGIN_ENTRY_SYMBOL);
  }
  torc_plugin_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry); /* object -> function pointer */
  const torc_plugin_info *info = entry();
  if (info == NULL ||
      info->struct_size < offsetof(torc_plugin_info, abi_minor) +
                              sizeof info->abi_minor) {
    dlclose(h);
    return torc_set_error(TORC_ERR_ABI,
                          "%splugin '%s' (%s): its entry returned %s; rebuild "
                          "it against this torc's headers",
                          pre, label, path,
                          info ? "a descriptor too small to be valid" : "NULL");
  }
  if (info->abi_major != TORC_ABI_MAJOR) {
    uint32_t maj = info->abi_major, min = info->abi_minor;
    dlclose(h);
    return torc_set_error(TORC_ERR_ABI,
                          "%splugin '%s' (%s) was built for torc ABI %u.%u, "
                          "but this torc (%s) has ABI %d.%d; rebuild the "
                          "plugin against this torc's headers (pkg-config "
                          "--cflags torc)",
                          pre, label, path, maj, min, PACKAGE_VERSION,
                          TORC_ABI_MAJOR, TORC_ABI_MINOR);
  }
  if (info->struct_size < offsetof(torc_plugin_info, init) + sizeof info->init ||
      info->init == NULL || !valid_plugin_name(info->name)) {
    dlclose(h);
    return torc_set_error(TORC_ERR_ABI,
                          "%splugin '%s' (%s): its descriptor is incomplete "
                          "(missing init or a valid name); rebuild it against "
                          "this torc's headers",
                          pre, label, path);
  }
  const char *name = want_name ? want_name : info->name;
  if (find_loaded(name)) {
    dlclose(h);
    return TORC_OK;
  }
  if ((st = load_requires(info, name, path, o, pre)) != TORC_OK) {
    close_refused(h, info);
    return st;
  }
  /* Keys: each must be one the plugin declares. */
  for (int i = 0; o && i < o->n_keys; i++) {
    int known = 0;
    if (info->keys)
      for (const torc_plugin_key *k = info->keys; k->name && !known; k++)
        known = strcmp(k->name, o->keys[i]) == 0;
    if (!known) {
      char list[512] = "";
      size_t len = 0;
      if (info->keys)
        for (const torc_plugin_key *k = info->keys; k->name && len < sizeof list;
             k++)
          len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                                  len ? ", " : "", k->name);
      char kbuf[PATH_MAX + 32];
      const char *kpre =
          where(o, o->key_lines ? o->key_lines[i] : o->line, kbuf, sizeof kbuf);
      /* Format before dlclose: name and info live in the plugin. */
      torc_status err = torc_set_error(
          TORC_ERR_CONFIG,
          "%skey '%s' in [plugin.%s]: plugin '%s' has no such key; its keys "
          "are: %s (besides module, required and priority)",
          kpre, o->keys[i], name, info->name, len ? list : "(none)");
      close_refused(h, info);
      return err;
    }
  }
  torc__plugin *p = torc__calloc(1, sizeof *p);
  if (p == NULL) {
    /* Format before dlclose: name may live in the plugin. */
    torc_status err =
        torc_set_error(TORC_ERR_OOM, "out of memory loading plugin %s", name);
    close_refused(h, info);
    return err;
  }
  p->name = torc__strdup(name);
  p->version = torc__strdup(info->version ? info->version : "?");
  p->description = torc__strdup(info->description ? info->description : "");
  p->path = torc__strdup(real);
  p->handle = h;
  p->info = info;
  p->provides = info->provides;
  p->flags = TORC_HAS_SLOT(info, torc_plugin_info, flags) ? info->flags : 0;
  p->abi_major = info->abi_major;
  p->abi_minor = info->abi_minor;
  p->priority = o ? o->priority : 0;
  if (o && o->n_keys > 0) {
    p->keys = torc__calloc((size_t)o->n_keys, sizeof *p->keys);
    p->values = torc__calloc((size_t)o->n_keys, sizeof *p->values);
    for (int i = 0; p->keys && p->values && i < o->n_keys; i++) {
      p->keys[i] = torc__strdup(o->keys[i]);
      p->values[i] = torc__strdup(o->values[i] ? o->values[i] : "");
      p->n_keys = i + 1; /* plugin_free frees these */
      if (!p->keys[i] || !p->values[i])
        break;
    }
  }
  int keys_ok = !(o && o->n_keys > 0) ||
                (p->n_keys == o->n_keys && p->keys[p->n_keys - 1] &&
                 p->values[p->n_keys - 1]);
  if (!p->name || !p->version || !p->description || !p->path || !keys_ok) {
    torc_status err =
        torc_set_error(TORC_ERR_OOM, "out of memory loading plugin %s", name);
    plugin_free(p);
    dlclose(h);
    return err;
  }
  if (n_plugins == cap_plugins) {
    int cap = cap_plugins ? cap_plugins * 2 : 8;
    torc__plugin **np = torc__realloc(plugins, (size_t)cap * sizeof *np);
    if (np == NULL) {
      torc_status err =
          torc_set_error(TORC_ERR_OOM, "out of memory loading plugin %s", name);
      plugin_free(p);
      dlclose(h);
      return err;
    }
    plugins = np;
    cap_plugins = cap;
  }
  torc_clear_error();
  int rc = info->init(&torc__host, (torc_plugin *)p);
  if (rc == TORC_OK && p->bad_op_msg[0])
    rc = torc_set_error(TORC_ERR_PLUGIN, "%s", p->bad_op_msg);
  if (rc != TORC_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", torc_last_error());
    unregister_all(p);
    if (!(p->flags & TORC_PLUGIN_NO_UNLOAD))
      dlclose(h);
    const char *pname = p->name;
    torc_status out = torc_set_error(
        rc == TORC_ERR_OOM ? TORC_ERR_OOM : TORC_ERR_PLUGIN,
        "%splugin '%s' (%s) failed to initialise: %s", pre,
        pname, path, msg[0] ? msg : torc_status_str((torc_status)rc));
    plugin_free(p);
    return out;
  }
  p->initialised = 1;
  plugins[n_plugins++] = p;
  torc_logf(TORC_LOG_INFO, "loaded plugin %s %s from %s", p->name, p->version,
           p->path);
  return TORC_OK;
}

torc_status torc_plugin_load(const char *module, const torc_plugin_opts *opts) {
  torc_status st0 = torc__ensure_init();
  if (st0 != TORC_OK)
    return st0;
  pthread_mutex_lock(&load_lock);
  torc_status st = load_locked(module, opts);
  pthread_mutex_unlock(&load_lock);
  return st;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Loads every NAME.so in one folder, in name order. */
static void load_dir(const char *dir, int *n_loaded, int *n_failed) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  char *names[256];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < 256) {
    size_t len = strlen(e->d_name);
    if (len > 3 && strcmp(e->d_name + len - 3, ".so") == 0)
      if ((names[n] = torc__strdup(e->d_name)) != NULL)
        n++;
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  for (int i = 0; i < n; i++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    names[i][strlen(names[i]) - 3] = '\0';
    int before = n_plugins;
    if (find_loaded(names[i]) == NULL) {
      if (torc_plugin_load(path, NULL) != TORC_OK) {
        torc_logf(TORC_LOG_WARN, "skipping %s: %s", path, torc_last_error());
        (*n_failed)++;
      } else if (n_plugins > before) {
        (*n_loaded)++;
      }
    }
    torc__free(names[i]);
  }
}

int torc_plugin_load_all(void) {
  torc__ensure_init();
  int loaded = 0, failed = 0;
  const char *lists[2] = {getenv("TORC_PLUGIN_PATH"), TORC_PLUGIN_DIR};
  for (int l = 0; l < 2; l++) {
    const char *p = lists[l];
    while (p && *p) {
      const char *colon = strchr(p, ':');
      size_t len = colon ? (size_t)(colon - p) : strlen(p);
      if (len > 0 && len < PATH_MAX) {
        char dir[PATH_MAX];
        memcpy(dir, p, len);
        dir[len] = '\0';
        load_dir(dir, &loaded, &failed);
      }
      p = colon ? colon + 1 : NULL;
    }
  }
  if (n_plugins == 0) {
    torc_set_error(TORC_ERR_IO,
                   "no plugin found in TORC_PLUGIN_PATH (%s) nor in %s%s",
                   getenv("TORC_PLUGIN_PATH") ? getenv("TORC_PLUGIN_PATH")
                                              : "unset",
                   TORC_PLUGIN_DIR,
                   failed ? " (some failed to load: see the warnings)" : "");
    return -1;
  }
  return loaded;
}

int torc__plugin_loaded(const char *name) {
  pthread_mutex_lock(&load_lock);
  int yes = name && find_loaded(name) != NULL;
  pthread_mutex_unlock(&load_lock);
  return yes;
}

int torc__plugin_findable(const char *name, const char *search_path) {
  char path[PATH_MAX], searched[2048] = "";
  if (!valid_plugin_name(name))
    return 0;
  return search_list(search_path, name, path, sizeof path, searched,
                     sizeof searched) ||
         search_list(getenv("TORC_PLUGIN_PATH"), name, path, sizeof path,
                     searched, sizeof searched) ||
         search_list(TORC_PLUGIN_DIR, name, path, sizeof path, searched,
                     sizeof searched);
}

int torc__plugin_provides_any(uint32_t bits) {
  pthread_mutex_lock(&load_lock);
  int yes = 0;
  for (int i = 0; i < n_plugins && !yes; i++)
    yes = (plugins[i]->provides & bits) != 0;
  pthread_mutex_unlock(&load_lock);
  return yes;
}

int torc_plugin_count(void) { return n_plugins; }

torc_status torc_plugin_get(int i, torc_plugin_summary *out) {
  if (i < 0 || i >= n_plugins)
    return torc_set_error(TORC_ERR_RANGE,
                          "torc_plugin_get: index %d out of range (%d plugins "
                          "loaded)",
                          i, n_plugins);
  const torc__plugin *p = plugins[i];
  out->name = p->name;
  out->version = p->version;
  out->description = p->description;
  out->path = p->path;
  out->provides = p->provides;
  out->priority = p->priority;
  out->abi_major = p->abi_major;
  out->abi_minor = p->abi_minor;
  return TORC_OK;
}

void torc__plugins_unload_all(void) {
  pthread_mutex_lock(&load_lock);
  for (int i = n_plugins - 1; i >= 0; i--) {
    torc__plugin *p = plugins[i];
    unregister_all(p);
    if (p->info && TORC_HAS_SLOT(p->info, torc_plugin_info, fini) &&
        p->info->fini)
      p->info->fini((torc_plugin *)p);
    if (!(p->flags & TORC_PLUGIN_NO_UNLOAD))
      dlclose(p->handle);
    plugin_free(p);
  }
  torc__free(plugins);
  plugins = NULL;
  n_plugins = cap_plugins = 0;
  pthread_mutex_unlock(&load_lock);
}
