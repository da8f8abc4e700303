/* tests/fuzz/fuzz_safetensors.c — libFuzzer harness of the safetensors
 * reader (core/safetensors.c) and of the state-dict and checkpoint code on
 * top of it (core/state.c): the input is written to a file, opened, every
 * tensor and metadata key is read, and it is loaded as a state dict, into
 * a small model, and as a checkpoint.
 */
#include "fuzz_common.h"

static torc_module *model;
static char st_path[1100];

/* Sequential(Linear(4, 3), Linear(3, 2)): the keys 0.weight, 0.bias,
 * 1.weight, 1.bias that the seeds' state dicts and checkpoints hold. */
static torc_module *make_model(void) {
  torc_module *m = torc_sequential_new();
  if (m == NULL || torc_sequential_append(m, torc_linear_new(4, 3, 1)) ||
      torc_sequential_append(m, torc_linear_new(3, 2, 1))) {
    fprintf(stderr, "fuzz: cannot build the model: %s\n", torc_last_error());
    abort();
  }
  return m;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_setup();
  fuzz_load_plugin("ref");
  model = make_model();
  fuzz_path(st_path, sizeof st_path, "input.safetensors");
  return 0;
}

static void read_all(const char *path) {
  torc_safetensors *st = torc_safetensors_open(path);
  if (st == NULL) {
    torc_clear_error();
    return;
  }
  int n = torc_safetensors_count(st);
  for (int i = 0; i < n && i < FUZZ_MAX_ITEMS; i++) {
    const char *name = torc_safetensors_name(st, i);
    torc_dtype dt;
    int nd;
    int64_t shape[TORC_MAX_DIMS];
    (void)torc_safetensors_info(st, name, &dt, &nd, shape);
    torc_release(torc_safetensors_get(st, name, TORC_CPU));
    torc_clear_error();
  }
  (void)torc_safetensors_info(st, "no such tensor", NULL, NULL, NULL);
  torc_clear_error();
  int nm = torc_safetensors_metadata_count(st);
  for (int i = 0; i < nm && i < FUZZ_MAX_ITEMS; i++) {
    const char *k = torc_safetensors_metadata_key(st, i);
    (void)torc_safetensors_metadata(st, k ? k : "");
  }
  /* A key most files lack: the lookup of an absent key. */
  (void)torc_safetensors_metadata(st, "torc.format");
  torc_safetensors_close(st);
  torc_clear_error();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_write(st_path, data, size);
  read_all(st_path);

  torc_state_dict *sd = torc_state_dict_load(st_path, TORC_CPU);
  torc_state_dict_free(sd);
  torc_clear_error();

  /* Strictly, then leniently with dtype casts and DataParallel's prefix. */
  torc_load_report rep = {0};
  (void)torc_module_load(model, st_path, NULL, &rep);
  torc_load_report_clear(&rep);
  torc_load_opts lenient = {.non_strict = 1,
                            .strip_module_prefix = 1,
                            .allow_dtype_cast = 1};
  (void)torc_module_load(model, st_path, &lenient, &rep);
  torc_load_report_clear(&rep);
  torc_clear_error();

  torc_state_dict *ck = torc_checkpoint_load(st_path, TORC_CPU);
  if (ck != NULL) {
    (void)torc_checkpoint_load_module(ck, model, &lenient, NULL);
    (void)torc_checkpoint_restore_rng(ck, "default", NULL);
    int64_t v;
    (void)torc_state_dict_get_i64(ck, "epoch", &v);
    (void)torc_state_dict_get_i64(ck, "step", &v);
    torc_state_dict_free(ck);
  }
  torc_clear_error();
  return 0;
}
