/* io/hf_engine.h: the parts of a loaded Hugging Face tokenizer (io/hf_tokenizer.h), shared by its
 * loader (hf_load.c, hf_json.c, hf_model.c, hf_steps.c, hf_added.c, hf_specials.c), its encoder
 * (hf_encode.c, hf_added.c, hf_pretokenize.c) and its decoder table (hf_decode.c). Each mirrors one
 * `tokenizers` component. */
#ifndef SP_HF_ENGINE_H
#define SP_HF_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "io/bpe.h"
#include "io/hf_regex.h"
#include "io/hf_unicode.h"
#include "io/tokenizer.h"

/* How a pattern's matches cut a string (tokenizers' SplitDelimiterBehavior). */
typedef enum {
    SP_HF_REMOVED,
    SP_HF_ISOLATED,
    SP_HF_MERGED_WITH_PREVIOUS,
    SP_HF_MERGED_WITH_NEXT,
    SP_HF_CONTIGUOUS
} sp_hf_behavior;

typedef enum { SP_HF_NORM_PREPEND, SP_HF_NORM_REPLACE, SP_HF_NORM_UNICODE } sp_hf_norm_kind;

typedef struct {
    sp_hf_norm_kind kind;
    sp_hf_nf form;        /* UNICODE */
    sp_hf_regex *pattern; /* REPLACE */
    char *text;           /* PREPEND: the prefix; REPLACE: the replacement */
    size_t text_len;
} sp_hf_normalizer;

/* Digits is a SPLIT on \p{N} (tokenizers' char::is_numeric), Isolated or Contiguous. */
typedef enum { SP_HF_PRE_BYTE_LEVEL, SP_HF_PRE_SPLIT, SP_HF_PRE_METASPACE } sp_hf_pre_kind;
typedef enum { SP_HF_PREPEND_NEVER, SP_HF_PREPEND_FIRST, SP_HF_PREPEND_ALWAYS } sp_hf_prepend;

typedef struct {
    sp_hf_pre_kind kind;
    sp_hf_regex *pattern;    /* SPLIT; BYTE_LEVEL: GPT-2's pattern when use_regex; METASPACE: the
                                replacement when split; else NULL */
    sp_hf_behavior behavior; /* SPLIT */
    int invert;              /* SPLIT */
    int add_prefix_space;    /* BYTE_LEVEL */
    char replacement[4];     /* METASPACE: one character */
    size_t replacement_len;
    sp_hf_prepend prepend;   /* METASPACE */
    int split;               /* METASPACE */
} sp_hf_pretokenizer;

typedef struct {
    char *content;
    size_t len;
    char *pattern;           /* what the text must contain: content, or its normalized form */
    size_t pattern_len;
    int32_t id;
    unsigned char special, normalized, lstrip, rstrip, single_word;
} sp_hf_added;

/* The added tokens matched in one pass, sorted by pattern for leftmost-longest search. */
typedef struct {
    const char *pattern;
    size_t len;
    int token; /* index into sp_hf_tokenizer.added */
} sp_hf_pattern;

typedef struct {
    sp_hf_pattern *items;
    size_t n;
    unsigned char first_byte[256];
} sp_hf_added_set;

struct sp_hf_tokenizer {
    char *json, *config;         /* the source texts (NUL-terminated), written back into checkpoints */
    size_t json_len, config_len; /* config NULL: none */
    sp_hf_normalizer *norms;
    int n_norms;
    size_t cap_norms;
    sp_hf_pretokenizer *pres;
    int n_pres;
    size_t cap_pres;
    sp_bpe bpe;
    sp_hf_added *added;
    int n_added;
    size_t cap_added;
    sp_hf_added_set raw_set, normalized_set; /* matched before / after normalization */
    sp_hf_regex *space, *word_char;          /* Rust regex's \s and \w, for lstrip/rstrip/single_word */
    sp_id_list prefix, suffix;               /* the special tokens added around a sequence */
    uint32_t byte_chars[256];
    /* decoding: at a sequence's start up to strip_max leading copies of strip_char are dropped
     * (strip_max < 0: every copy in the first piece, the Metaspace decoder's rule) */
    char strip_char[4];
    size_t strip_char_len;
    int strip_max;
};

/* A list of splits of the text (tokenizers' PreTokenizedString): text still to tokenize, or a
 * token id fixed by an added token. */
typedef struct {
    size_t off, len;  /* text: bytes in the splits' arena */
    int32_t id;       /* -1: text */
    int at_start;     /* the text begins at the input's first byte (Metaspace prepend_scheme "first") */
} sp_hf_split;

typedef struct {
    char *bytes;
    size_t len, cap;
    sp_hf_split *items;
    size_t n, cap_items;
} sp_hf_splits;

/* Appends a text split (dropped when empty, as tokenizers drops empty splits) or a token. */
sp_status sp_hf_splits_add_text(sp_hf_splits *s, const char *text, size_t len, int at_start);
sp_status sp_hf_splits_add_token(sp_hf_splits *s, int32_t id);
void sp_hf_splits_free(sp_hf_splits *s);

/* tokenizer.json fields (hf_json.c); errors name the file and the JSON path ("pre_tokenizer"). */
const char *sp_hf_type(const cJSON *j); /* its "type", NULL when none */
sp_status sp_hf_unsupported(const cJSON *j, const char *file, const char *path, const char *supported);
sp_status sp_hf_get_string(const cJSON *j, const char *key, const char *file, const char *path, const char **s);
/* A boolean; def when absent or null. */
sp_status sp_hf_get_bool(const cJSON *j, const char *key, int def, const char *file, const char *path, int *b);
/* A string of exactly one character, into ch (its UTF-8 length in *len). */
sp_status sp_hf_get_char(const cJSON *j, const char *key, const char *file, const char *path, char ch[4],
                         size_t *len);
/* "pattern": {"String": literal} or {"Regex": pattern}, compiled. */
sp_status sp_hf_get_pattern(const cJSON *j, const char *file, const char *path, sp_hf_regex **re);
/* Calls fn on each member of the array j[key] (a Sequence's list), with its path "path.key[i]". */
typedef sp_status (*sp_hf_member_fn)(void *ctx, const cJSON *member, const char *path);
sp_status sp_hf_each_member(const cJSON *j, const char *key, const char *file, const char *path, sp_hf_member_fn fn,
                            void *ctx);

/* Loader parts; `file` names the JSON file in messages. */
sp_status sp_hf_load_model(sp_hf_tokenizer *hf, const cJSON *model, const char *file);
sp_status sp_hf_load_normalizer(sp_hf_tokenizer *hf, const cJSON *j, const char *file);
sp_status sp_hf_load_pretokenizer(sp_hf_tokenizer *hf, const cJSON *j, const char *file);
sp_status sp_hf_load_added(sp_hf_tokenizer *hf, const cJSON *list, const char *file);
/* Resolves BOS/EOS and the sequence's prefix/suffix from the post-processor and the config. */
sp_status sp_hf_load_specials(sp_hf_tokenizer *hf, const cJSON *post, const char *file, const cJSON *config,
                              const char *config_file, int *bos_id, int *eos_id);
/* Fills t's piece table (bytes, offsets, max_piece_len) from the decoder. */
sp_status sp_hf_load_decoder(sp_hf_tokenizer *hf, const cJSON *j, const char *file, sp_tokenizer *t);
void sp_hf_steps_free(sp_hf_tokenizer *hf);

/* The normalizer chain on s[0..len) into *out (malloc'd); no normalizer copies. */
sp_status sp_hf_normalize_text(const sp_hf_tokenizer *hf, const char *s, size_t len, char **out, size_t *out_len);
/* Cuts the text splits of `in` at the added tokens of one set into `out`; in normalized mode each
 * text split is normalized first. */
sp_status sp_hf_split_added(const sp_hf_tokenizer *hf, const sp_hf_splits *in, int normalized, sp_hf_splits *out);
/* One pre-tokenizer over every text split of in, into out. */
sp_status sp_hf_pretokenize(const sp_hf_tokenizer *hf, const sp_hf_pretokenizer *p, const sp_hf_splits *in,
                            sp_hf_splits *out);

/* Room for "file: json.path" in messages and regex names. */
#define SP_HF_WHERE_MAX 600
/* Token ids must be below this (2^24: far above real vocabularies, low enough that a corrupt file
 * cannot ask for an absurd id table). */
#define SP_HF_MAX_VOCAB (1 << 24)

#endif
