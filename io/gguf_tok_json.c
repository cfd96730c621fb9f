/* io/gguf_tok_json.c: the tokenizer.json and tokenizer_config.json that transformers' GGUF tokenizer
 * amounts to (integrations/gguf/gguf_tokenizer_mapping.py, transformers 5.23.0), as recorded from
 * it: the builder's class (GPT2Tokenizer, LlamaTokenizer, GemmaTokenizer) gives the normalizer,
 * pre-tokenizer, decoder and BPE flags, and its default special tokens; the file's BOS, EOS, unknown
 * and padding tokens and its CONTROL tokens become special added tokens, its USER_DEFINED ones plain
 * added tokens; the config carries BOS, EOS and whether they are added. docs/import.md. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "io/gguf_tok.h"

#define META "\xE2\x96\x81" /* ▁ */

/* The special tokens each builder's class adds, in its order, whether the vocabulary has them or not. */
static const char *const byte_level_defaults[] = {"<|endoftext|>", NULL};
static const char *const llama_defaults[] = {"<s>", "</s>", "<unk>", NULL};
static const char *const gemma_defaults[] = {"<bos>", "<eos>", "<unk>", "<pad>", "<mask>", NULL};

/* cJSON_Add* return NULL when out of memory; the builders note it once. */
typedef struct {
    int failed;
} builder;

static cJSON *note(builder *b, cJSON *item)
{
    b->failed |= item == NULL;
    return item;
}

static cJSON *object(builder *b, cJSON *parent, const char *key, const char *type)
{
    cJSON *o = cJSON_CreateObject();
    if (o && type)
        note(b, cJSON_AddStringToObject(o, "type", type));
    if (parent && o) {
        if (cJSON_IsArray(parent) ? !cJSON_AddItemToArray(parent, o) : !cJSON_AddItemToObject(parent, key, o)) {
            cJSON_Delete(o);
            o = NULL;
        }
    }
    return note(b, o);
}

static void add_string(builder *b, cJSON *o, const char *key, const char *value)
{
    note(b, cJSON_AddStringToObject(o, key, value));
}

static void add_bool(builder *b, cJSON *o, const char *key, int value)
{
    note(b, cJSON_AddBoolToObject(o, key, value));
}

static void add_pattern(builder *b, cJSON *o, const char *kind, const char *pattern)
{
    cJSON *p = object(b, o, "pattern", NULL);
    if (p)
        add_string(b, p, kind, pattern);
}

/* ---- added tokens ---- */

typedef struct {
    cJSON *list;
    int32_t next_id; /* the id a token outside the vocabulary gets */
    int vocab_size;
} added_list;

static int listed(const cJSON *list, const char *content)
{
    for (const cJSON *e = list->child; e; e = e->next)
        if (strcmp(cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring, content) == 0)
            return 1;
    return 0;
}

/* A token once (the first listing's flags stay); one the vocabulary lacks takes the next id, but
 * only below the model's vocab_size (above it, the model has no row for it). */
static void add_token(builder *b, const sp_gguf_vocab *v, added_list *a, const char *content, int special)
{
    int32_t id;
    if (!a->list || listed(a->list, content))
        return;
    if (!sp_gguf_vocab_find(v, content, strlen(content), &id)) {
        if (a->vocab_size > 0 && a->next_id >= a->vocab_size)
            return;
        id = a->next_id++;
    }
    cJSON *t = object(b, a->list, NULL, NULL);
    if (!t)
        return;
    note(b, cJSON_AddNumberToObject(t, "id", id));
    add_string(b, t, "content", content);
    add_bool(b, t, "single_word", 0);
    add_bool(b, t, "lstrip", 0);
    add_bool(b, t, "rstrip", 0);
    add_bool(b, t, "normalized", 0);
    add_bool(b, t, "special", special);
}

/* The file's token i, unless its spelling changed (transformers would add the file's spelling,
 * which no vocabulary entry has). */
static void add_file_token(builder *b, const sp_gguf_vocab *v, added_list *a, int32_t i, int special)
{
    if (i >= 0 && !v->respelled[i])
        add_token(b, v, a, v->tokens[i], special);
}

static void added_tokens(builder *b, const sp_gguf_vocab *v, int vocab_size, cJSON *doc)
{
    const char *const *defaults = v->kind == SP_GGUF_TOK_BYTE_LEVEL ? byte_level_defaults
                                  : v->kind == SP_GGUF_TOK_GEMMA    ? gemma_defaults
                                                                    : llama_defaults;
    added_list a = {note(b, cJSON_AddArrayToObject(doc, "added_tokens")), v->n, vocab_size};
    for (int i = 0; defaults[i]; i++)
        add_token(b, v, &a, defaults[i], 1);
    for (int32_t i = 0; v->types && i < v->n; i++)
        if (v->types[i] == SP_GGUF_TOKEN_CONTROL)
            add_file_token(b, v, &a, i, 1);
    for (int32_t i = 0; v->types && i < v->n; i++)
        if (v->types[i] == SP_GGUF_TOKEN_USER_DEFINED)
            add_file_token(b, v, &a, i, 0);
    /* BOS, EOS, unknown and padding: the tokenizer's special tokens, added as such */
    const int32_t specials[] = {v->bos, v->eos, v->unk, v->pad};
    for (size_t k = 0; k < SP_ARRAY_LEN(specials); k++)
        add_file_token(b, v, &a, specials[k], 1);
}

/* ---- the pipeline ---- */

static void pre_tokenizer(builder *b, const sp_gguf_vocab *v, cJSON *doc)
{
    if (v->kind == SP_GGUF_TOK_LLAMA) {
        cJSON *p = object(b, doc, "pre_tokenizer", "Metaspace");
        add_string(b, p, "replacement", META);
        add_string(b, p, "prepend_scheme", "first");
        add_bool(b, p, "split", 0);
    } else if (v->kind == SP_GGUF_TOK_GEMMA) {
        cJSON *p = object(b, doc, "pre_tokenizer", "Split");
        add_pattern(b, p, "String", " ");
        add_string(b, p, "behavior", "MergedWithPrevious");
        add_bool(b, p, "invert", 0);
    } else if (v->split_regex) {
        cJSON *seq = object(b, doc, "pre_tokenizer", "Sequence");
        cJSON *list = note(b, cJSON_AddArrayToObject(seq, "pretokenizers"));
        cJSON *split = object(b, list, NULL, "Split");
        add_pattern(b, split, "Regex", v->split_regex);
        add_string(b, split, "behavior", "Isolated");
        add_bool(b, split, "invert", 0);
        cJSON *bytes = object(b, list, NULL, "ByteLevel");
        add_bool(b, bytes, "add_prefix_space", 0);
        add_bool(b, bytes, "use_regex", 0);
    } else {
        cJSON *bytes = object(b, doc, "pre_tokenizer", "ByteLevel");
        add_bool(b, bytes, "add_prefix_space", 0);
        add_bool(b, bytes, "use_regex", 1);
    }
}

static void decoder(builder *b, const sp_gguf_vocab *v, cJSON *doc)
{
    if (v->kind == SP_GGUF_TOK_BYTE_LEVEL) {
        object(b, doc, "decoder", "ByteLevel");
        return;
    }
    cJSON *seq = object(b, doc, "decoder", "Sequence");
    cJSON *list = note(b, cJSON_AddArrayToObject(seq, "decoders"));
    cJSON *replace = object(b, list, NULL, "Replace");
    add_pattern(b, replace, "String", META);
    add_string(b, replace, "content", " ");
    object(b, list, NULL, "ByteFallback");
    object(b, list, NULL, "Fuse");
    if (v->kind == SP_GGUF_TOK_LLAMA) {
        cJSON *strip = object(b, list, NULL, "Strip");
        add_string(b, strip, "content", " ");
        note(b, cJSON_AddNumberToObject(strip, "start", 1));
        note(b, cJSON_AddNumberToObject(strip, "stop", 0));
    }
}

static void model(builder *b, const sp_gguf_vocab *v, const sp_gguf_merge *merges, size_t n_merges, cJSON *doc)
{
    cJSON *m = object(b, doc, "model", "BPE");
    if (!m)
        return;
    int sentencepiece = v->kind != SP_GGUF_TOK_BYTE_LEVEL;
    note(b, v->kind == SP_GGUF_TOK_GEMMA ? cJSON_AddStringToObject(m, "unk_token", "<unk>")
                                         : cJSON_AddNullToObject(m, "unk_token"));
    add_bool(b, m, "fuse_unk", sentencepiece);
    add_bool(b, m, "byte_fallback", sentencepiece);
    add_bool(b, m, "ignore_merges", 0);
    cJSON *vocab = object(b, m, "vocab", NULL);
    for (int32_t i = 0; vocab && i < v->n && !b->failed; i++)
        note(b, cJSON_AddNumberToObject(vocab, v->tokens[i], i));
    cJSON *list = note(b, cJSON_AddArrayToObject(m, "merges"));
    for (size_t k = 0; list && k < n_merges && !b->failed; k++) {
        const char *pair[2] = {v->tokens[merges[k].left], v->tokens[merges[k].right]};
        cJSON *p = note(b, cJSON_CreateStringArray(pair, 2));
        if (p && !cJSON_AddItemToArray(list, p)) {
            cJSON_Delete(p);
            b->failed = 1;
        }
    }
}

static cJSON *config(builder *b, const sp_gguf_vocab *v)
{
    cJSON *c = note(b, cJSON_CreateObject());
    if (!c)
        return NULL;
    note(b, v->bos >= 0 ? cJSON_AddStringToObject(c, "bos_token", v->tokens[v->bos])
                        : cJSON_AddNullToObject(c, "bos_token"));
    note(b, v->eos >= 0 ? cJSON_AddStringToObject(c, "eos_token", v->tokens[v->eos])
                        : cJSON_AddNullToObject(c, "eos_token"));
    add_bool(b, c, "add_bos_token", v->add_bos);
    add_bool(b, c, "add_eos_token", v->add_eos);
    return c;
}

static char *print(builder *b, cJSON *doc)
{
    char *text = doc && !b->failed ? cJSON_PrintUnformatted(doc) : NULL;
    b->failed |= text == NULL;
    return text;
}

sp_status sp_gguf_tok_json(const sp_gguf_vocab *v, const sp_gguf_merge *merges, size_t n_merges, int vocab_size,
                           char **json, char **config_text)
{
    builder b = {0};
    cJSON *doc = note(&b, cJSON_CreateObject()), *cfg = config(&b, v);
    if (doc) {
        add_string(&b, doc, "version", "1.0");
        added_tokens(&b, v, vocab_size, doc);
        if (v->kind == SP_GGUF_TOK_GEMMA) {
            cJSON *n = object(&b, doc, "normalizer", "Replace");
            add_pattern(&b, n, "String", " ");
            add_string(&b, n, "content", META);
        }
        pre_tokenizer(&b, v, doc);
        decoder(&b, v, doc);
        model(&b, v, merges, n_merges, doc);
    }
    *json = print(&b, doc);
    *config_text = print(&b, cfg);
    cJSON_Delete(doc);
    cJSON_Delete(cfg);
    if (!b.failed)
        return SP_OK;
    free(*json);
    free(*config_text);
    *json = *config_text = NULL;
    return sp_error(SP_ERR_NOMEM, "out of memory building the tokenizer of %s", v->path);
}
