/* tests/fuzz/fuzz_common.h — what the libFuzzer harnesses share: one-time
 * set-up (plugin path, no data cache, quiet logs), a private temporary
 * folder the inputs are written into (the readers take paths), and small
 * byte helpers for harnesses that split one input into several files.
 */
#ifndef TORC_FUZZ_COMMON_H
#define TORC_FUZZ_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* nftw, mkdtemp, memfd_create */
#endif

#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "torc/torc.h"

/* At most this many samples (or tensors) are read from one input: a header
 * may declare millions of empty samples, and reading them all would only
 * make the run slow, not find more. */
#define FUZZ_MAX_ITEMS 4096

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir[1024];

static inline int fuzz_rm_entry(const char *path, const struct stat *sb, int flag,
                         struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static inline void fuzz_cleanup(void) {
  if (fuzz_dir[0])
    nftw(fuzz_dir, fuzz_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* "$fuzz_dir/name" into buf. */
static inline const char *fuzz_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", fuzz_dir, name);
  return buf;
}

/* Writes n bytes to path (replacing it); aborts when it cannot, as a
 * harness that silently tests nothing would be worse. */
static inline void fuzz_write(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (f == NULL || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
    fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
    abort();
  }
}

/* Loads plugin `name` from the build tree (TORC_PLUGIN_PATH, defaulting to
 * the folder configure recorded); aborts when it cannot. */
static inline void fuzz_load_plugin(const char *name) {
  if (torc_plugin_load(name, NULL) != TORC_OK) {
    fprintf(stderr, "fuzz: cannot load the %s plugin: %s\n", name,
            torc_last_error());
    abort();
  }
}

/* The set-up every harness does once: the build tree's plugins, no idx
 * cache (it would write a file per input), error-level logs only, and a
 * fresh temporary folder removed at exit. */
static inline void fuzz_setup(void) {
#ifdef TORC_FUZZ_PLUGIN_DIR
  setenv("TORC_PLUGIN_PATH", TORC_FUZZ_PLUGIN_DIR, 0);
#endif
  setenv("TORC_DATA_CACHE", "off", 1);
  torc_set_log_level(TORC_LOG_ERROR);
  torc_set_log_callback(NULL, NULL);
  const char *tmp = getenv("TMPDIR");
  snprintf(fuzz_dir, sizeof fuzz_dir, "%s/torc-fuzz-XXXXXX",
           tmp && tmp[0] ? tmp : "/tmp");
  if (mkdtemp(fuzz_dir) == NULL) {
    fprintf(stderr, "fuzz: mkdtemp %s: %s\n", fuzz_dir, strerror(errno));
    abort();
  }
  atexit(fuzz_cleanup);
}

/* Little-endian u32 at p. */
static inline uint32_t fuzz_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

/* Splits data after a 4-byte little-endian length L into a part of
 * min(L, rest) bytes and the remainder: how the harnesses whose source
 * reads two files (idx, npy) get both from one input. Returns 0 when the
 * input is shorter than the length field. */
static inline int fuzz_split(const uint8_t *data, size_t size,
                             const uint8_t **a, size_t *na, const uint8_t **b,
                             size_t *nb) {
  if (size < 4)
    return 0;
  size_t len = fuzz_le32(data);
  data += 4;
  size -= 4;
  if (len > size)
    len = size;
  *a = data;
  *na = len;
  *b = data + len;
  *nb = size - len;
  return 1;
}

/* Opens `source` with the n key/value pairs and reads every sample (up to
 * FUZZ_MAX_ITEMS), its description and its class names, as a training run
 * would; errors are expected and only cleared. */
static inline void fuzz_read_dataset(const char *source, const char *const *keys,
                              const char *const *values, int n) {
  torc_dataset *ds = torc_dataset_open(source, keys, values, n);
  if (ds == NULL) {
    torc_clear_error();
    return;
  }
  (void)torc_dataset_describe(ds);
  int64_t len = torc_dataset_length(ds);
  for (int64_t i = 0; i < len && i < FUZZ_MAX_ITEMS; i++) {
    torc_tensor *x = NULL, *y = NULL;
    if (torc_dataset_get(ds, i, &x, &y) == TORC_OK) {
      /* Touch every byte of the sample, so a short buffer shows. */
      const torc_tensor *t[2] = {x, y};
      for (int k = 0; k < 2; k++) {
        if (t[k] == NULL)
          continue;
        const volatile uint8_t *p = torc_data(t[k]);
        size_t nb = (size_t)torc_numel(t[k]) *
                    torc_dtype_size(torc_dtype_of(t[k]));
        uint8_t acc = 0;
        for (size_t j = 0; p && j < nb; j++)
          acc ^= p[j];
        (void)acc;
      }
    }
    torc_release(x);
    torc_release(y);
    torc_clear_error();
  }
  int64_t nc = torc_dataset_num_classes(ds);
  for (int64_t i = 0; i < nc && i < FUZZ_MAX_ITEMS; i++) {
    char buf[256];
    (void)torc_dataset_class_name(ds, i, buf, sizeof buf);
  }
  torc_dataset_close(ds);
  torc_clear_error();
}

/* Whether source `source` declares key `key` (so a harness can set a
 * limit a newer plugin offers, and still build against an older one). */
static inline int fuzz_source_has_key(const char *source, const char *key) {
  const torc_data_source_type *t = torc_data_source_find(source);
  for (const torc_data_key *k = t ? t->keys : NULL; k && k->name; k++)
    if (strcmp(k->name, key) == 0)
      return 1;
  return 0;
}

#endif /* TORC_FUZZ_COMMON_H */
