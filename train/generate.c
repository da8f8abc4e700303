/* train/generate.c — text from a language model an INI file describes
 * (`torc generate`): the model with its weights, the vocabulary of its
 * text source (the token names the source reports, decoded back to UTF-8),
 * the prompt encoded with it, and torc_generate's tokens printed as they
 * come.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train_internal.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The UTF-8 of code point cp into out (room for 5); its length. */
static int utf8_put(unsigned long cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* The vocabulary: token id -> its text (NUL-terminated UTF-8, or one raw
 * byte at level = byte); unk the <unk> token's id or -1. */
typedef struct vocab {
  int64_t n, unk;
  char (*text)[8];
} vocab;

/* A token's name as the text source gives it (the vocabulary file's line:
 * a char, \n \t \r \\ \s, \uHHHH, \UHHHHHH, \xHH, <unk>) decoded. */
static int decode_name(const char *name, char *out, int *is_unk) {
  *is_unk = 0;
  if (strcmp(name, "<unk>") == 0) {
    *is_unk = 1;
    return utf8_put(0xFFFD, out); /* printed as the replacement char */
  }
  if (name[0] != '\\' || name[1] == '\0') {
    size_t l = strlen(name);
    if (l == 0 || l > 4)
      return -1;
    memcpy(out, name, l);
    return (int)l;
  }
  switch (name[1]) {
  case 'n': out[0] = '\n'; return 1;
  case 't': out[0] = '\t'; return 1;
  case 'r': out[0] = '\r'; return 1;
  case 's': out[0] = ' '; return 1;
  case '\\': out[0] = '\\'; return 1;
  case 'x': out[0] = (char)strtoul(name + 2, NULL, 16); return 1;
  case 'u':
  case 'U': return utf8_put(strtoul(name + 2, NULL, 16), out);
  }
  return -1;
}

static torc_status vocab_read(const torc_dataset *ds, vocab *v) {
  v->unk = -1;
  v->n = torc_dataset_num_classes(ds);
  if (v->n < 1)
    return torc_set_error(TORC_ERR_CONFIG,
                          "generate: the text source reports no vocabulary");
  v->text = calloc((size_t)v->n, sizeof *v->text);
  if (v->text == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory for %lld tokens",
                          (long long)v->n);
  for (int64_t i = 0; i < v->n; i++) {
    char name[64];
    int unk = 0;
    torc_status st = torc_dataset_class_name(ds, i, name, sizeof name);
    if (st != TORC_OK)
      return st;
    int l = decode_name(name, v->text[i], &unk);
    if (l < 0)
      return torc_set_error(TORC_ERR_CONFIG,
                            "generate: token %lld of the vocabulary is named "
                            "'%s', which is not a char or an escape of the "
                            "text source",
                            (long long)i, name);
    v->text[i][l] = '\0';
    if (unk)
      v->unk = i;
  }
  return TORC_OK;
}

/* The ids of prompt: its chars (level = char) or bytes looked up in v. */
static torc_status encode(const vocab *v, int bytes, const char *prompt,
                          int64_t **ids, int64_t *n) {
  size_t len = strlen(prompt);
  *ids = calloc(len ? len : 1, sizeof **ids);
  *n = 0;
  if (*ids == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory for the prompt");
  for (size_t p = 0; p < len;) {
    size_t l = 1;
    unsigned char c = (unsigned char)prompt[p];
    if (!bytes)
      l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (p + l > len)
      l = len - p;
    int64_t id = -1;
    for (int64_t i = 0; i < v->n && id < 0; i++)
      if (bytes ? (unsigned char)v->text[i][0] == c && i == c
                : strlen(v->text[i]) == l && i != v->unk &&
                      memcmp(v->text[i], prompt + p, l) == 0)
        id = i;
    if (id < 0 && v->unk >= 0)
      id = v->unk;
    if (id < 0)
      return torc_set_error(TORC_ERR_INVALID,
                            "generate: the prompt's char '%.*s' at byte %zu "
                            "is not in the model's vocabulary of %lld "
                            "tokens; leave it out of the prompt",
                            (int)l, prompt + p, p, (long long)v->n);
    (*ids)[(*n)++] = id;
    p += l;
  }
  return TORC_OK;
}

typedef struct printer {
  const vocab *v;
  FILE *out;
} printer;

static int print_token(void *user, int64_t tok) {
  printer *p = user;
  if (tok >= 0 && tok < p->v->n)
    fputs(p->v->text[tok], p->out);
  fflush(p->out);
  return 0;
}

/* The section holding the text source: [data.test] when there is one
 * (it reads the saved vocabulary), else [data.train]. */
static int text_section(const torc_config *cfg, const char **split) {
  int i = torc_config_find(cfg, "data.test");
  *split = "test";
  if (i < 0) {
    i = torc_config_find(cfg, "data.train");
    *split = "train";
  }
  return i;
}

torc_status torc_generate_text(const torc_config *cfg,
                               const torc_text_generate_options *o,
                               FILE *out, FILE *info) {
  if (cfg == NULL || o == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_generate_text: cfg and options are needed");
  if (out == NULL)
    out = stdout;
  if (info == NULL)
    info = stderr;
  const char *split;
  int di = text_section(cfg, &split);
  const char *src = di >= 0 ? torc_config_section_get(cfg, di, "source") : NULL;
  if (src == NULL || strcmp(src, "text") != 0)
    return torc_set_error(
        TORC_ERR_CONFIG,
        "%s: generate needs a language model trained on a text source, but "
        "[data.%s] has source = %s; give it source = text",
        torc_config_path(cfg), split, src ? src : "(none)");
  if (torc_model_input_dtype(cfg) != TORC_I64)
    return torc_set_error(
        TORC_ERR_CONFIG,
        "%s: generate feeds the model token ids, but its input is f32; start "
        "the model with an embedding (or set [model] input_dtype = i64)",
        torc_config_path(cfg));
  const char *lvl = torc_config_section_get(cfg, di, "level");
  int bytes = lvl && strcmp(lvl, "byte") == 0;
  int li = torc_config_find(cfg, "loss");
  const char *cd = li >= 0 ? torc_config_section_get(cfg, li, "class_dim")
                           : NULL;
  int mi = torc_config_find(cfg, "model");
  const char *inp = mi >= 0 ? torc_config_section_get(cfg, mi, "input") : NULL;

  torc_train__run r;
  char path[1100];
  const char *what = NULL, *ckpt = o->checkpoint;
  vocab v = {0};
  int64_t *ids = NULL, n_ids = 0, *gen = NULL, made = 0;
  torc_loader *ld = NULL;
  torc_status st = torc_train__build(&r, cfg, 0);
  if (st == TORC_OK && ckpt == NULL &&
      (st = torc_train__weights_path(&r, path, sizeof path, &what)) ==
          TORC_OK) {
    ckpt = path;
    fprintf(info, "checkpoint: %s (%s)\n", ckpt, what);
  }
  if (st == TORC_OK)
    st = torc_train__load_weights(&r, ckpt);
  if (st == TORC_OK && r.test == NULL &&
      (ld = torc_loader_from_config(cfg, "train", TORC_CPU)) == NULL)
    st = torc_last_status();
  if (st == TORC_OK)
    st = vocab_read(torc_loader_dataset(r.test ? r.test : ld), &v);
  if (st == TORC_OK)
    st = encode(&v, bytes, o->prompt && o->prompt[0] ? o->prompt : "\n", &ids,
                &n_ids);
  torc_generate_options go = torc_generate_options_default();
  go.max_new_tokens = o->tokens;
  go.temperature = o->temperature;
  go.top_k = o->top_k;
  go.seed = o->seed;
  printer pr = {&v, out};
  go.on_token = print_token;
  go.user = &pr;
  if (st == TORC_OK && o->tokens >= 1 &&
      (gen = calloc((size_t)o->tokens, sizeof *gen)) == NULL)
    st = torc_set_error(TORC_ERR_OOM, "out of memory for %lld tokens",
                        (long long)o->tokens);
  torc_decoder *d = NULL;
  if (st == TORC_OK &&
      (d = torc_decoder_new(r.model, inp ? strtoll(inp, NULL, 10) : 0,
                            cd && strcmp(cd, "-1") == 0 ? -1 : 1)) == NULL)
    st = torc_last_status();
  if (st == TORC_OK) {
    /* the model's vocabulary must be the source's */
    int scope = torc_scope_begin();
    torc_tensor *y =
        torc_decoder_step(d, torc_zeros(TORC_SHAPE(1, 1), TORC_I64, TORC_CPU));
    if (y == NULL)
      st = torc_last_status();
    else if (torc_size(y, 2) != v.n)
      st = torc_set_error(
          TORC_ERR_CONFIG,
          "%s: the model gives logits for %lld tokens but the vocabulary of "
          "[data.%s] has %lld; set the embedding's num_embeddings and the "
          "last layer's out_features to %lld and train again",
          torc_config_path(cfg), (long long)torc_size(y, 2), split,
          (long long)v.n, (long long)v.n);
    torc_scope_end(scope);
    torc_decoder_reset(d);
  }
  double t0 = now_s();
  if (st == TORC_OK) {
    if (o->prompt)
      fputs(o->prompt, out);
    st = torc_generate(d, ids, n_ids, &go, gen, &made);
    fputc('\n', out);
    fflush(out);
  }
  double secs = now_s() - t0;
  if (st == TORC_OK) {
    const char *why = NULL;
    int cached = torc_decoder_cached(d, &why);
    fprintf(info,
            "generate: %lld tokens after a prompt of %lld in %.2f s (%.1f "
            "tokens/s), %s%s\n",
            (long long)made, (long long)n_ids, secs,
            secs > 0 ? (double)made / secs : 0.0,
            cached ? "each step one position (key/value and state cache)"
                   : "each step the whole window: ",
            cached ? "" : (why ? why : "?"));
  }
  torc_decoder_free(d);
  free(gen);
  free(ids);
  free(v.text);
  torc_loader_free(ld);
  torc_train__free(&r);
  return st;
}
