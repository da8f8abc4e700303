/* plugins/data/vocab.c — the char-level vocabulary of the text source and
 * of the csv source's text mode: strict UTF-8, building the vocabulary,
 * and its file (read and written here only, so that both sources read
 * each other's files the same way; the format is in docs/text.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_internal.h"
#include "vocab.h"

/* ---- UTF-8 ---- */

int dvocab_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
  uint8_t c = s[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  int len;
  uint32_t v, min;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, v = c & 0x1F, min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, v = c & 0x0F, min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if ((size_t)len > n)
    return 0;
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    v = v << 6 | (s[i] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
    return 0;
  *cp = v;
  return len;
}

int dvocab_utf8_len(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

/* Writes code point cp as UTF-8 to out (at least 4 bytes); its length. */
static int utf8_encode(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12);
    out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18);
  out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

void dvocab_token_name(uint32_t cp, char *out) {
  if (cp == DVOCAB_UNK) {
    strcpy(out, DVOCAB_UNK_NAME);
  } else if (cp == DVOCAB_PAD) {
    strcpy(out, DVOCAB_PAD_NAME);
  } else if (cp == '\n') {
    strcpy(out, "\\n");
  } else if (cp == '\t') {
    strcpy(out, "\\t");
  } else if (cp == '\r') {
    strcpy(out, "\\r");
  } else if (cp == '\\') {
    strcpy(out, "\\\\");
  } else if (cp == ' ') {
    strcpy(out, "\\s");
  } else if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0) || cp == 0x2028 ||
             cp == 0x2029 || cp == 0xFEFF) {
    snprintf(out, DVOCAB_NAME_SIZE, "\\u%04X", (unsigned)cp);
  } else {
    out[utf8_encode(cp, out)] = '\0';
  }
}

/* ---- lookup ---- */

static int cmp_entry(const void *a, const void *b) {
  uint32_t x = ((const dvocab_entry *)a)->cp;
  uint32_t y = ((const dvocab_entry *)b)->cp;
  return x < y ? -1 : x > y;
}

int32_t dvocab_lookup(const dvocab *v, uint32_t cp) {
  const dvocab_entry *t = v->table;
  int64_t lo = 0, hi = v->size;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (t[mid].cp < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < v->size && t[lo].cp == cp ? t[lo].id : DVOCAB_NO_ID;
}

void dvocab_free(dvocab *v) {
  free(v->cps);
  free(v->table);
  memset(v, 0, sizeof *v);
}

/* Allocates v's arrays for n ids. */
static int dvocab_alloc(dvocab *v, const char *source, int64_t n) {
  size_t k = (size_t)(n ? n : 1);
  v->cps = malloc(sizeof *v->cps * k);
  v->table = malloc(sizeof *v->table * k);
  if (v->cps == NULL || v->table == NULL) {
    dvocab_free(v);
    return dsrc_oom(source, sizeof *v->table * k);
  }
  return TORC_OK;
}

/* Appends code point cp as the next id. */
static void dvocab_push(dvocab *v, uint32_t cp) {
  v->cps[v->size] = cp;
  v->table[v->size].cp = cp;
  v->table[v->size].id = (int32_t)v->size;
  v->size++;
}

/* ---- building ---- */

int dvocab_build(dvocab *v, const char *source, const uint32_t *cps,
                 int64_t n, int pad, int unk) {
  memset(v, 0, sizeof *v);
  const size_t words = (0x110000 + 63) / 64;
  uint64_t *seen = calloc(words, sizeof *seen);
  if (seen == NULL)
    return dsrc_oom(source, words * sizeof *seen);
  for (int64_t i = 0; i < n; i++)
    seen[cps[i] >> 6] |= (uint64_t)1 << (cps[i] & 63);
  int64_t count = 0;
  for (size_t w = 0; w < words; w++)
    count += __builtin_popcountll(seen[w]);
  int st = dvocab_alloc(v, source, count + (pad ? 1 : 0) + (unk ? 1 : 0));
  if (st != TORC_OK) {
    free(seen);
    return st;
  }
  v->pad = v->unk = DVOCAB_NO_ID;
  if (pad) {
    v->pad = (int32_t)v->size;
    dvocab_push(v, DVOCAB_PAD);
  }
  for (size_t w = 0; w < words; w++)
    for (uint64_t bits = seen[w]; bits; bits &= bits - 1)
      dvocab_push(v, (uint32_t)(w * 64 + (size_t)__builtin_ctzll(bits)));
  free(seen);
  if (unk) {
    v->unk = (int32_t)v->size;
    dvocab_push(v, DVOCAB_UNK);
  }
  qsort(v->table, (size_t)v->size, sizeof *v->table, cmp_entry);
  return TORC_OK;
}

/* ---- the file ---- */

static int hexval(int c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Parses one vocabulary line (s[0 .. n)) into *cp (DVOCAB_UNK, or
 * DVOCAB_PAD when allow_pad); NULL or a phrase saying what is wrong. */
static const char *parse_token(const uint8_t *s, size_t n, int allow_pad,
                               uint32_t *cp) {
  if (n == 0)
    return "it is empty (a space is written \\s)";
  if (n == strlen(DVOCAB_UNK_NAME) && memcmp(s, DVOCAB_UNK_NAME, n) == 0) {
    *cp = DVOCAB_UNK;
    return NULL;
  }
  if (allow_pad && n == strlen(DVOCAB_PAD_NAME) &&
      memcmp(s, DVOCAB_PAD_NAME, n) == 0) {
    *cp = DVOCAB_PAD;
    return NULL;
  }
  if (s[0] == '\\') {
    if (n == 2) {
      static const char from[] = "ntr\\s", to[] = "\n\t\r\\ ";
      const char *p = memchr(from, s[1], 5);
      if (p == NULL)
        return "it is an unknown escape (\\n \\t \\r \\\\ \\s \\uHHHH "
               "\\UHHHHHH are known)";
      *cp = (uint8_t)to[p - from];
      return NULL;
    }
    size_t digits = s[1] == 'u' ? 4 : s[1] == 'U' ? 6 : 0;
    if (digits == 0 || n != 2 + digits)
      return "it is an unknown escape (\\n \\t \\r \\\\ \\s \\uHHHH "
             "\\UHHHHHH are known)";
    uint32_t v = 0;
    for (size_t i = 2; i < n; i++) {
      int h = hexval(s[i]);
      if (h < 0)
        return "its \\u or \\U escape has a character that is not a hex "
               "digit";
      v = v << 4 | (uint32_t)h;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
      return "its escape is not a Unicode scalar value (a surrogate, or past "
             "U+10FFFF)";
    *cp = v;
    return NULL;
  }
  int len = dvocab_utf8_decode(s, n, cp);
  if (len == 0)
    return "it is not valid UTF-8";
  if ((size_t)len != n)
    return "it holds more than one character (one token per line)";
  return NULL;
}

int dvocab_read(dvocab *v, const char *source, const char *path,
                uint64_t max_bytes, int allow_pad) {
  memset(v, 0, sizeof *v);
  char *buf;
  size_t size;
  int st = dsrc_read_file(source, "vocab", path, max_bytes, "max_bytes", &buf,
                          &size);
  if (st != TORC_OK)
    return st;
  /* At most one token per line: the arrays are sized from the file before
   * any token is parsed, so they cost at most 12 bytes per file byte. */
  int64_t lines = 0;
  for (size_t i = 0; i < size; i++)
    lines += buf[i] == '\n';
  lines += size > 0 && buf[size - 1] != '\n';
  if ((st = dvocab_alloc(v, source, lines)) != TORC_OK) {
    free(buf);
    return st;
  }
  size_t p = 0;
  while (p < size) {
    size_t e = p;
    while (e < size && buf[e] != '\n')
      e++;
    size_t len = e - p;
    if (len > 0 && buf[p + len - 1] == '\r')
      len--;
    uint32_t cp = 0;
    const char *why =
        parse_token((const uint8_t *)buf + p, len, allow_pad, &cp);
    if (why != NULL) {
      st = dsrc_error(TORC_ERR_IO,
                      "%s: vocab file '%s' line %" PRId64 " is not a token: "
                      "%s; write one character (or escape) per line, as "
                      "save_vocab does",
                      source, path, v->size + 1, why);
      break;
    }
    dvocab_push(v, cp);
    p = e + 1;
  }
  free(buf);
  if (st == TORC_OK && v->size == 0)
    st = dsrc_error(TORC_ERR_IO,
                    "%s: vocab file '%s' holds no token; give the file "
                    "save_vocab wrote",
                    source, path);
  if (st == TORC_OK) {
    qsort(v->table, (size_t)v->size, sizeof *v->table, cmp_entry);
    for (int64_t i = 1; i < v->size; i++) {
      const dvocab_entry *a = &v->table[i - 1], *b = &v->table[i];
      if (a->cp == b->cp) {
        char name[DVOCAB_NAME_SIZE];
        dvocab_token_name(b->cp, name);
        int lo = a->id < b->id ? a->id : b->id;
        int hi = a->id < b->id ? b->id : a->id;
        st = dsrc_error(TORC_ERR_IO,
                        "%s: vocab file '%s' lists token '%s' twice, on "
                        "lines %d and %d; give each token once",
                        source, path, name, lo + 1, hi + 1);
        break;
      }
    }
  }
  if (st != TORC_OK) {
    dvocab_free(v);
    return st;
  }
  v->unk = dvocab_lookup(v, DVOCAB_UNK);
  v->pad = dvocab_lookup(v, DVOCAB_PAD);
  return TORC_OK;
}

/* Creates the folders above file `path` that are missing (as mkdir -p),
 * so that save_vocab may name a file in a run folder not made yet. */
static void make_parents(char *path) {
  for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
    *p = '\0';
    mkdir(path, 0777); /* EEXIST is fine; a real failure shows at fopen */
    *p = '/';
  }
}

int dvocab_save(const dvocab *v, const char *source, const char *path) {
  size_t pl = strlen(path) + 5;
  char *tmp = malloc(pl);
  if (tmp == NULL)
    return dsrc_oom(source, pl);
  snprintf(tmp, pl, "%s.tmp", path);
  make_parents(tmp);
  FILE *f = fopen(tmp, "w");
  int ok = f != NULL;
  for (int64_t i = 0; ok && i < v->size; i++) {
    char name[DVOCAB_NAME_SIZE];
    dvocab_token_name(v->cps[i], name);
    ok = fprintf(f, "%s\n", name) > 0;
  }
  if (f != NULL && fclose(f) != 0)
    ok = 0;
  int e = errno;
  if (ok && rename(tmp, path) != 0)
    ok = 0, e = errno;
  if (!ok) {
    if (f != NULL)
      unlink(tmp);
    free(tmp);
    return dsrc_error(TORC_ERR_IO,
                      "%s: save_vocab file '%s' cannot be written: %s; "
                      "give a path in a writable folder",
                      source, path, strerror(e));
  }
  free(tmp);
  return TORC_OK;
}
