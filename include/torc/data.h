/* torc/data.h — datasets, transforms and the DataLoader.
 *
 * A data source (idx, csv, npy, image_folder, synthetic, or a plugin's)
 * opens a dataset from key/value pairs; a dataset yields sample i as an
 * (input, target) pair of cpu tensors. The loader batches samples with
 * worker *threads* (no fork, no copy of the process), shuffles with a seed,
 * applies per-sample transforms, collates (stack, or pad-to-largest with a
 * mask), stages batches in pinned memory when the target device benefits
 * and moves them there.
 *
 * Determinism: the order of epoch e is a permutation drawn from Philox
 * keyed by (seed, e), and sample i's augmentation randomness is drawn from
 * Philox keyed by (seed, e, i). Nothing depends on which thread did the
 * work, so workers = 0 and workers = 8 give the same batches bit for bit.
 */
#ifndef TORC_DATA_H
#define TORC_DATA_H

#include <stdint.h>

#include "torc/device.h"
#include "torc/error.h"
#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* ------------------------------------------------------------------------
 * Data source types (registered by plugins through the host table, or by a
 * program with torc_data_source_register)
 * ---------------------------------------------------------------------- */

/* A key a data source accepts (its [data.*] INI keys). */
typedef struct torc_data_key {
  const char *name;
  const char *help;          /* one line, with the accepted values */
  const char *default_value; /* or NULL when required */
  int is_path;               /* 1: a file or folder, resolved against the
                                INI file's folder by the config layer */
} torc_data_key;

/* A data source type. Tables are append-only (struct_size first). Every
 * function returns TORC_OK or an error status after setting the error
 * (torc_set_error, or host->set_error in a plugin), the message naming the
 * path, and for text formats the line and column. */
typedef struct torc_data_source_type {
  size_t struct_size;
  const char *name;             /* "idx": letters, digits, '_' */
  const char *description;      /* one line */
  const torc_data_key *keys;    /* terminated by {NULL} */
  /* Opens a dataset. Every key is one of `keys` (the core checked; keys
   * with defaults that were not given are passed with them). */
  int (*open)(const char *const *keys, const char *const *values, int n,
              void *user, void **handle);
  /* Number of samples. */
  int64_t (*length)(void *handle);
  /* Sample `index` (0 <= index < length) as new cpu tensors: input (its
   * natural dtype: u8 images, f32 features) and target (an i64 0-dim
   * class index, or f32 [k] regression targets). Called from several
   * threads at once: it must not modify the handle without a lock. */
  int (*get)(void *handle, int64_t index, torc_tensor **input,
             torc_tensor **target);
  /* Releases the dataset. */
  void (*close)(void *handle);
  /* (optional) One line describing the dataset: "60000 samples, input
   * [1, 28, 28] u8, 10 classes". */
  int (*describe)(void *handle, char *buf, size_t size);
  /* (optional) Number of classes (0 for regression), and class i's name
   * (csv's label mapping, image_folder's folder names) into buf. */
  int64_t (*num_classes)(void *handle);
  int (*class_name)(void *handle, int64_t i, char *buf, size_t size);
  void *user;
} torc_data_source_type;

/* Registers a source type (borrowed: it must outlive the registration).
 * A name already registered is TORC_ERR_INVALID naming its owner. */
TORC_API torc_status
torc_data_source_register(const torc_data_source_type *type);

/* Looks up a source type; NULL (no error recorded) when unknown. */
TORC_API const torc_data_source_type *torc_data_source_find(const char *name);

/* Number of registered source types and type i (in name order). */
TORC_API int torc_data_source_count(void);
TORC_API const torc_data_source_type *torc_data_source_at(int i);

/* ------------------------------------------------------------------------
 * Datasets
 * ---------------------------------------------------------------------- */

/* An open dataset. Opaque; get may be called from several threads. */
typedef struct torc_dataset torc_dataset;

/* Opens a dataset of source `source` from n key/value pairs. Errors:
 * unknown source (the message lists them: load the data plugin), unknown
 * or repeated key (with the source's keys and the nearest one), missing
 * required key, and the source's own errors (missing file, bad format). */
TORC_API torc_dataset *torc_dataset_open(const char *source,
                                         const char *const *keys,
                                         const char *const *values, int n);

/* Closes a dataset. NULL is ignored. */
TORC_API void torc_dataset_close(torc_dataset *ds);

/* Number of samples (-1 for NULL). */
TORC_API int64_t torc_dataset_length(const torc_dataset *ds);

/* Sample `index` as new references (cpu tensors; never scope-owned, as
 * loader threads have no scope). Errors: TORC_ERR_RANGE for an index out
 * of range, and the source's. */
TORC_API torc_status torc_dataset_get(const torc_dataset *ds, int64_t index,
                                      torc_tensor **input,
                                      torc_tensor **target);

/* The source's one-line description (or its name); owned by ds. */
TORC_API const char *torc_dataset_describe(const torc_dataset *ds);

/* Number of classes (0 for regression or unknown) and class i's name into
 * buf ("3" when the source has no names). */
TORC_API int64_t torc_dataset_num_classes(const torc_dataset *ds);
TORC_API torc_status torc_dataset_class_name(const torc_dataset *ds,
                                             int64_t i, char *buf,
                                             size_t size);

/* ------------------------------------------------------------------------
 * Transforms
 * ---------------------------------------------------------------------- */

/* A pipeline of per-sample transforms applied to inputs, in order. */
typedef struct torc_transform torc_transform;

/* Parses a pipeline as written in INI files:
 *   "scale(0.00392156862745098), normalize(0.2860, 0.3530),
 *    random_crop(28, 4), random_hflip(0.5), cast(f32)"
 * Stages: scale(c) (x * c, as f32 unless the input is f64), normalize(mean,
 * std) or normalize(m1, .., mk, s1, .., sk) per channel (channel = dim 0 of
 * a sample; f32 unless f64), random_crop(size), random_crop(size, padding)
 * or random_crop(h, w, padding) (zero-padded; padding 0 when left out),
 * random_hflip(p) and random_vflip(p) (p = 0.5 when left out, written
 * random_hflip or random_hflip(), as torchvision's flips),
 * center_crop(size) or center_crop(h, w) (torchvision's offsets),
 * resize(h, w) (bilinear as F.interpolate with align_corners=False; f32
 * unless f64), cast(dtype). Spatial stages act on the last two dims.
 * An empty or NULL spec is the identity. Errors (TORC_ERR_INVALID) name
 * the stage, the argument and what is accepted. */
TORC_API torc_transform *torc_transform_parse(const char *spec);

/* Frees a pipeline. NULL is ignored. */
TORC_API void torc_transform_free(torc_transform *t);

/* The stages a transform spec may name (for listings): their count, and
 * stage i's name ("random_hflip") and usage ("random_hflip(p) with ..."),
 * or NULL past the end. */
TORC_API int torc_transform_stage_count(void);
TORC_API const char *torc_transform_stage_name(int i);
TORC_API const char *torc_transform_stage_usage(int i);

/* 1 if the pipeline draws random numbers. */
TORC_API int torc_transform_is_random(const torc_transform *t);

/* Applies the pipeline to sample `index` of epoch `epoch` (a cpu tensor;
 * returns a new reference, scope-owned when a scope is open, as an op's).
 * Random stages draw from Philox keyed by (seed, epoch, index) only. A
 * NULL pipeline returns x (a new reference). Errors: TORC_ERR_SHAPE for a
 * sample a stage cannot take (a crop larger than it), TORC_ERR_DEVICE for
 * a sample not on the cpu. Thread-safe: t is only read. */
TORC_API torc_tensor *torc_transform_apply(const torc_transform *t,
                                           const torc_tensor *x,
                                           uint64_t seed, int64_t epoch,
                                           int64_t index);

/* ------------------------------------------------------------------------
 * The loader
 * ---------------------------------------------------------------------- */

/* A batch. input [B, ...]; target [B] (classes) or [B, k]; mask (only when
 * inputs of different shapes were padded to the largest) a bool tensor of
 * input's shape, true on real elements. All on the loader's device. */
typedef struct torc_batch {
  torc_tensor *input;
  torc_tensor *target;
  torc_tensor *mask;
  int64_t index; /* batch number within the epoch */
  int64_t size;  /* samples in it (B) */
} torc_batch;

/* Releases the batch's tensors and zeroes it. NULL is ignored. */
TORC_API void torc_batch_clear(torc_batch *b);

/* A custom collate: builds out->input/target/mask (new references, on the
 * cpu) from n samples. Called from worker threads (or the caller's with
 * workers = 0), always with scopes suspended: what it creates is not
 * scope-owned, so it releases its temporaries itself. */
typedef torc_status (*torc_collate_fn)(torc_tensor *const *inputs,
                                       torc_tensor *const *targets, int n,
                                       torc_batch *out, void *user);

/* The default collate: stacks inputs of equal shape; pads inputs of
 * different shapes (same ndim) with zeros to the largest size in each dim
 * and sets the mask. Targets are stacked (they must agree in shape). */
TORC_API torc_status torc_collate_default(torc_tensor *const *inputs,
                                          torc_tensor *const *targets, int n,
                                          torc_batch *out, void *user);

/* Loader options. Zero-initialise, then set what you need: the zero value
 * is batch size 1, no shuffle, keep the last partial batch, seed 0, no
 * workers, cpu, pin_memory auto, no transform, the default collate. */
typedef struct torc_loader_opts {
  int64_t batch_size;  /* 0 = 1 */
  int shuffle;         /* a new seeded permutation each epoch */
  int drop_last;       /* drop a final partial batch */
  uint64_t seed;
  int workers;         /* threads; 0 = load in the calling thread */
  int prefetch;        /* batches ready ahead; 0 = 2 per worker (or 1) */
  int rank, world_size; /* shard sampler when world_size > 1: this rank
                           takes every world_size-th sample of the
                           (shuffled) order, all ranks the same count */
  torc_device device;  /* where batches are delivered (zero = cpu) */
  int pin_memory;      /* 0 auto (when the device is not the host), 1 yes,
                          -1 no */
  const torc_transform *transform; /* borrowed; may be NULL */
  torc_collate_fn collate;         /* NULL = torc_collate_default */
  void *collate_user;
  int64_t limit; /* > 0: only the dataset's first `limit` samples (a quick
                    run on a subset, torch.utils.data.Subset of range) */
} torc_loader_opts;

/* A loader over a dataset (borrowed: it must outlive the loader). Errors:
 * bad options (TORC_ERR_INVALID naming the option and value), a dataset
 * with no samples, thread creation. */
typedef struct torc_loader torc_loader;
TORC_API torc_loader *torc_loader_new(torc_dataset *ds,
                                      const torc_loader_opts *opts);

/* Stops the workers (mid-epoch too: they finish the sample in hand, no
 * hang), releases queued batches, frees the loader. NULL is ignored. */
TORC_API void torc_loader_free(torc_loader *ld);

/* Batches per epoch for this rank. */
TORC_API int64_t torc_loader_length(const torc_loader *ld);

/* Starts epoch `epoch` at batch `first_batch` (0 normally; a checkpoint's
 * position to resume). Batches already queued are discarded. */
TORC_API torc_status torc_loader_start(torc_loader *ld, int64_t epoch,
                                       int64_t first_batch);

/* The next batch of the current epoch into *out: returns 1 with a batch,
 * 0 at the end of the epoch (out zeroed; again until torc_loader_start),
 * -1 on error (a worker's error, with its message: the sample index and
 * the source's message; the next call goes on with the following batch).
 * The first call on a loader never started starts epoch 0. The caller owns
 * the batch (torc_batch_clear; never scope-owned). A loader is used from
 * one thread at a time. */
TORC_API int torc_loader_next(torc_loader *ld, torc_batch *out);

/* What the loader measured since it was created. */
typedef struct torc_loader_stats {
  int64_t batches, samples;
  double wait_seconds; /* time torc_loader_next spent waiting for workers
                          (with workers = 0: loading the batches) */
  int pinned;          /* 1 if batches were staged in pinned memory */
} torc_loader_stats;

TORC_API torc_status torc_loader_get_stats(const torc_loader *ld,
                                           torc_loader_stats *out);

/* ------------------------------------------------------------------------
 * From INI files
 * ---------------------------------------------------------------------- */

struct torc_config;

/* Builds the loader of section [data.NAME] ("train", "test", "valid") of
 * cfg: the source and its keys (paths resolved against the INI's folder),
 * transform, batch_size, shuffle, drop_last, workers, prefetch,
 * pin_memory; the seed is [torc] seed. With valid_fraction > 0 in
 * [data.train], "train" is the training part of that section and "valid"
 * (when there is no [data.valid]) its held-out part: a split fixed by the
 * seed, read in order with [data.test]'s transform when there is one. The loader owns its dataset and
 * transform (freed by torc_loader_free); torc_loader_dataset returns the
 * dataset. Errors: TORC_ERR_CONFIG "FILE:LINE: key 'k' in [data.NAME]:
 * ..." (a source's errors are given the line of the key they name). */
TORC_API torc_loader *torc_loader_from_config(const struct torc_config *cfg,
                                              const char *name,
                                              torc_device device);

/* The dataset a loader reads. */
TORC_API torc_dataset *torc_loader_dataset(const torc_loader *ld);

TORC_END_DECLS

#endif /* TORC_DATA_H */
