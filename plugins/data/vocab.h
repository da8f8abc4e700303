/* plugins/data/vocab.h — the char-level vocabulary the text and csv
 * sources share: strict UTF-8 decoding, building a vocabulary from code
 * points, and reading and writing it as a file (docs/text.md: one token
 * per line, ids in line order; a char as UTF-8, an escape \n \t \r \\ \s
 * \uHHHH \UHHHHHH, or <unk>; the csv source's text mode adds <pad>).
 * Internal to the data plugin; every symbol is hidden.
 */
#ifndef TORC_DATA_PLUGIN_VOCAB_H
#define TORC_DATA_PLUGIN_VOCAB_H

#include <stddef.h>
#include <stdint.h>

/* The special tokens' slots in dvocab.cps (above every code point, so
 * they sort last in the lookup table and no char can be mistaken for
 * them). */
#define DVOCAB_UNK UINT32_MAX       /* <unk>: chars outside the vocabulary */
#define DVOCAB_PAD (UINT32_MAX - 1) /* <pad>: the padding token */
#define DVOCAB_NO_ID (-1)
#define DVOCAB_UNK_NAME "<unk>"
#define DVOCAB_PAD_NAME "<pad>"
/* The longest token name token_name writes, with its NUL. */
#define DVOCAB_NAME_SIZE 16

/* One lookup entry: a code point (or special slot) and its id. */
typedef struct dvocab_entry {
  uint32_t cp;
  int32_t id;
} dvocab_entry;

/* A vocabulary: ids 0 .. size - 1. Zero-initialise; dvocab_free frees. */
typedef struct dvocab {
  uint32_t *cps;       /* id -> code point (DVOCAB_UNK, DVOCAB_PAD) */
  dvocab_entry *table; /* the same, sorted by code point */
  int64_t size;
  int32_t unk;         /* the <unk> id, or DVOCAB_NO_ID */
  int32_t pad;         /* the <pad> id, or DVOCAB_NO_ID */
} dvocab;

/* Decodes one code point at s[0 .. n) (n >= 1) strictly: no overlong
 * forms, no surrogates, nothing past U+10FFFF, nothing cut short. Its
 * length in bytes, or 0 when invalid. */
int dvocab_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* The UTF-8 length of code point cp (1 to 4). */
int dvocab_utf8_len(uint32_t cp);

/* A token's name as the vocabulary file writes it, into out
 * (DVOCAB_NAME_SIZE bytes): the char itself, an escape for a backslash, a
 * space and control chars, or <unk> / <pad>. */
void dvocab_token_name(uint32_t cp, char *out);

/* The id of code point cp, or DVOCAB_NO_ID. O(log size). */
int32_t dvocab_lookup(const dvocab *v, uint32_t cp);

/* Builds v from code points cps[0 .. n): <pad> first when `pad` (id 0),
 * the distinct code points in code point order, then <unk> when `unk`
 * (the last id). Linear in n (a bitmap over all code points). Errors:
 * TORC_ERR_OOM naming `source`. */
int dvocab_build(dvocab *v, const char *source, const uint32_t *cps,
                 int64_t n, int pad, int unk);

/* Reads vocabulary file `path` (key `vocab` of `source`, at most
 * max_bytes, the limit of key max_bytes) into v. A line <pad> is the
 * padding token when allow_pad, else an error as any line of several
 * chars. Errors (TORC_ERR_IO) name the file and the line: an empty line,
 * two chars, bad UTF-8, an unknown escape, a token given twice, no token;
 * and those of dsrc_read_file. */
int dvocab_read(dvocab *v, const char *source, const char *path,
                uint64_t max_bytes, int allow_pad);

/* Writes v to `path` (key save_vocab of `source`), one token per line,
 * through PATH.tmp and a rename (a failed write leaves no half-written
 * file), making missing parent folders first. TORC_ERR_IO naming the file
 * and the reason. */
int dvocab_save(const dvocab *v, const char *source, const char *path);

/* Frees v's arrays and zeroes it; v may be zeroed already. */
void dvocab_free(dvocab *v);

#endif /* TORC_DATA_PLUGIN_VOCAB_H */
