/* io/gguf_tok_vocab.c: tokenizer.ggml.* read and checked (io/gguf_tok.h): which of transformers'
 * builders the file gets, the tokens as that builder spells them, their types, the special ids and
 * whether BOS/EOS are added. */
#include <stdlib.h>
#include <string.h>

#include "io/gguf_tok.h"
#include "io/hf_unicode.h"

/* tokenizers' 2^24 id limit (io/hf_engine.h's SP_HF_MAX_VOCAB). */
#define MAX_TOKENS (1 << 24)

/* transformers' GGUF_PRE_TOKENIZER_SPLITS for Llama 3's and Qwen2's patterns; any other pre keeps
 * GPT2Tokenizer's ByteLevel with GPT-2's pattern, accepted here only for the families below. */
static const char llama3_split[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
                                   "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char qwen2_split[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
                                  "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const struct {
    const char *pre, *split;
} pres[] = {
    {"default", NULL}, {"gpt-2", NULL}, {"smollm", NULL}, {"olmo", NULL},
    {"llama3", llama3_split}, {"llama-v3", llama3_split}, {"llama-bpe", llama3_split}, {"dbrx", llama3_split},
    {"smaug-bpe", llama3_split}, {"falcon3", llama3_split}, {"falcon-h1", llama3_split},
    {"pixtral", llama3_split}, {"midm-2.0", llama3_split}, {"lfm2", llama3_split}, {"jina-v5-nano", llama3_split},
    {"qwen2", qwen2_split}, {"deepseek-r1-qwen", qwen2_split}, {"kormo", qwen2_split}, {"f2llmv2", qwen2_split},
    {"megrez", qwen2_split},
};

/* An optional string key; *s stays NULL when absent. */
static sp_status optional_string(const sp_gguf *g, const char *key, const char **s)
{
    *s = NULL;
    return sp_gguf_kv_find(g, key) < 0 ? SP_OK : sp_gguf_get_string(g, key, s, NULL);
}

static sp_status pick_builder(const sp_gguf *g, const char *path, sp_gguf_vocab *v)
{
    const char *model, *pre, *arch;
    SP_TRY(sp_gguf_get_string(g, "tokenizer.ggml.model", &model, NULL));
    SP_TRY(optional_string(g, "tokenizer.ggml.pre", &pre));
    SP_TRY(optional_string(g, "general.architecture", &arch));
    if (strcmp(model, "llama") == 0) {
        if (pre && strcmp(pre, "default") != 0)
            return sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.pre '%s' is not supported with tokenizer.ggml.model "
                                          "'llama' (supported: 'default')", path, pre);
        if (arch && strcmp(arch, "phi3") == 0)
            return sp_error(SP_ERR_INPUT, "%s: general.architecture 'phi3' with tokenizer.ggml.model 'llama' is not "
                                          "supported (transformers gives Phi-3 its own normalizer)", path);
        int gemma = arch && (strcmp(arch, "gemma") == 0 || strcmp(arch, "gemma2") == 0 || strcmp(arch, "gemma3") == 0);
        v->kind = gemma ? SP_GGUF_TOK_GEMMA : SP_GGUF_TOK_LLAMA;
        return SP_OK;
    }
    if (strcmp(model, "gpt2") != 0)
        return sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.model '%s' is not supported (supported: gpt2, llama)", path,
                        model);
    v->kind = SP_GGUF_TOK_BYTE_LEVEL;
    for (size_t i = 0; i < SP_ARRAY_LEN(pres); i++)
        if (strcmp(pre ? pre : "default", pres[i].pre) == 0) {
            v->split_regex = pres[i].split;
            return SP_OK;
        }
    return sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.pre '%s' is not supported (supported: default, gpt-2, smollm, "
                                  "olmo; Llama 3's llama-bpe, llama3, dbrx...; Qwen2's qwen2...; docs/import.md)",
                    path, pre);
}

/* Python's str.isspace. */
static int py_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* The token as the builder's vocabulary spells it (malloc'd): byte-level: in GPT-2's alphabet,
 * else each UTF-8 byte as its character; Gemma: a run of whitespace holding a space becomes that
 * many ▁. */
static char *spell(sp_gguf_tok_kind kind, const char *s, size_t len)
{
    size_t i = 0, chars = 0;
    int outside = 0, space = 0, blank = 1;
    while (i < len) {
        uint32_t c = sp_hf_utf8_next(s, &i);
        chars++;
        outside |= sp_hf_char_byte(c) < 0;
        space |= c == ' ';
        blank &= py_space(c);
    }
    char *out = NULL;
    if (kind == SP_GGUF_TOK_BYTE_LEVEL && outside) {
        uint32_t byte_chars[256];
        sp_hf_byte_chars(byte_chars);
        if ((out = sp_malloc(2 * len + 1, "a token")) != NULL) {
            size_t o = 0;
            for (size_t k = 0; k < len; k++)
                o += sp_hf_utf8_put(byte_chars[(unsigned char)s[k]], out + o);
            out[o] = '\0';
        }
    } else if (kind == SP_GGUF_TOK_GEMMA && space && blank) {
        if ((out = sp_malloc(3 * chars + 1, "a token")) != NULL) {
            for (size_t k = 0; k < chars; k++)
                memcpy(out + 3 * k, "\xE2\x96\x81", 3);
            out[3 * chars] = '\0';
        }
    } else if ((out = sp_malloc(len + 1, "a token")) != NULL) {
        memcpy(out, s, len);
        out[len] = '\0';
    }
    return out;
}

static sp_status read_tokens(const sp_gguf *g, const char *path, int vocab_size, sp_gguf_vocab *v)
{
    sp_gguf_array a;
    SP_TRY(sp_gguf_get_array(g, "tokenizer.ggml.tokens", &a));
    if (a.count == 0 || a.count > MAX_TOKENS)
        return sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.tokens has %zu entries (expected 1..%d)", path, a.count,
                        MAX_TOKENS);
    if (vocab_size > 0 && a.count > (size_t)vocab_size)
        return sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.tokens has %zu entries, more than the model's vocab_size %d",
                        path, a.count, vocab_size);
    v->tokens = sp_calloc(a.count, sizeof *v->tokens, "the token list");
    v->respelled = sp_calloc(a.count, 1, "the token list");
    if (!v->tokens || !v->respelled)
        return SP_ERR_NOMEM;
    v->n = (int32_t)a.count;
    for (int32_t i = 0; i < v->n; i++) {
        const char *s;
        size_t len, bad;
        SP_TRY(sp_gguf_array_string(&a, (size_t)i, &s, &len));
        if (!sp_hf_utf8_valid(s, len, &bad) || strlen(s) != len)
            return sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.tokens[%d]: byte %zu: %s", path, i,
                            strlen(s) != len ? strlen(s) : bad, strlen(s) != len ? "a NUL byte" : "invalid UTF-8");
        if (!(v->tokens[i] = spell(v->kind, s, len)))
            return SP_ERR_NOMEM;
        v->respelled[i] = strcmp(v->tokens[i], s) != 0;
        int dup;
        int32_t first;
        SP_TRY(sp_str_map_put(&v->index, v->tokens[i], strlen(v->tokens[i]), i, &dup, &first, NULL));
        if (dup)
            return sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.tokens[%d] '%.200s' repeats tokens[%d]%s", path, i, s,
                            first, v->respelled[i] ? " (as the tokenizer spells it)" : "");
    }
    return SP_OK;
}

static sp_status read_types(const sp_gguf *g, const char *path, sp_gguf_vocab *v)
{
    sp_gguf_array a;
    if (sp_gguf_kv_find(g, "tokenizer.ggml.token_type") < 0)
        return SP_OK;
    SP_TRY(sp_gguf_get_array(g, "tokenizer.ggml.token_type", &a));
    if (a.count != (size_t)v->n)
        return sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.token_type has %zu entries for %d tokens", path, a.count,
                        v->n);
    if (!(v->types = sp_malloc((size_t)v->n, "the token types")))
        return SP_ERR_NOMEM;
    for (int32_t i = 0; i < v->n; i++) {
        int64_t t;
        SP_TRY(sp_gguf_array_int(&a, (size_t)i, &t));
        if (t < SP_GGUF_TOKEN_NORMAL || t > SP_GGUF_TOKEN_MAX)
            return sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.token_type[%d] is %lld (expected 1..%d)", path, i,
                            (long long)t, SP_GGUF_TOKEN_MAX);
        v->types[i] = (unsigned char)t;
    }
    return SP_OK;
}

/* tokenizer.ggml.scores, where present, scores every token (sentencepiece files derive their merges
 * from it, gguf_tok_merges.c). */
static sp_status check_scores(const sp_gguf *g, const char *path, int32_t n)
{
    sp_gguf_array a;
    if (sp_gguf_kv_find(g, "tokenizer.ggml.scores") < 0)
        return SP_OK;
    SP_TRY(sp_gguf_get_array(g, "tokenizer.ggml.scores", &a));
    if (a.count != (size_t)n)
        return sp_error(SP_ERR_INPUT, "%s: tokenizer.ggml.scores has %zu entries for %d tokens", path, a.count, n);
    return SP_OK;
}

/* A special token id: -1 when absent, else below the token count. */
static sp_status special_id(const sp_gguf *g, const char *path, const char *key, int32_t n, int32_t *id)
{
    uint64_t u;
    *id = -1;
    if (sp_gguf_kv_find(g, key) < 0)
        return SP_OK;
    SP_TRY(sp_gguf_get_uint(g, key, &u));
    if (u >= (uint64_t)n)
        return sp_error(SP_ERR_INPUT, "%s: %s %llu is not below the %d tokens", path, key, (unsigned long long)u, n);
    *id = (int32_t)u;
    return SP_OK;
}

static sp_status add_flag(const sp_gguf *g, const char *path, const char *key, int def, int32_t id,
                          const char *id_key, int *flag)
{
    *flag = def;
    if (sp_gguf_kv_find(g, key) >= 0)
        SP_TRY(sp_gguf_get_bool(g, key, flag));
    if (*flag && id < 0)
        return sp_error(SP_ERR_INPUT, "%s: %s is %s but there is no %s", path, key,
                        sp_gguf_kv_find(g, key) >= 0 ? "true" : "true by default", id_key);
    return SP_OK;
}

sp_status sp_gguf_vocab_read(const sp_gguf *g, const char *path, int vocab_size, sp_gguf_vocab *v)
{
    *v = (sp_gguf_vocab){.path = path, .file = g, .bos = -1, .eos = -1, .unk = -1, .pad = -1};
    SP_TRY(pick_builder(g, path, v));
    SP_TRY(read_tokens(g, path, vocab_size, v));
    SP_TRY(read_types(g, path, v));
    SP_TRY(check_scores(g, path, v->n));
    v->has_merges = sp_gguf_kv_find(g, "tokenizer.ggml.merges") >= 0;
    SP_TRY(special_id(g, path, "tokenizer.ggml.bos_token_id", v->n, &v->bos));
    SP_TRY(special_id(g, path, "tokenizer.ggml.eos_token_id", v->n, &v->eos));
    SP_TRY(special_id(g, path, "tokenizer.ggml.unknown_token_id", v->n, &v->unk));
    SP_TRY(special_id(g, path, "tokenizer.ggml.padding_token_id", v->n, &v->pad));
    /* transformers: a sentencepiece file without the flag adds BOS, as llama.cpp does */
    SP_TRY(add_flag(g, path, "tokenizer.ggml.add_bos_token", v->kind != SP_GGUF_TOK_BYTE_LEVEL, v->bos,
                    "tokenizer.ggml.bos_token_id", &v->add_bos));
    return add_flag(g, path, "tokenizer.ggml.add_eos_token", 0, v->eos, "tokenizer.ggml.eos_token_id", &v->add_eos);
}

int sp_gguf_vocab_find(const sp_gguf_vocab *v, const char *s, size_t len, int32_t *id)
{
    return sp_str_map_get(&v->index, s, len, id);
}

void sp_gguf_vocab_free(sp_gguf_vocab *v)
{
    for (int32_t i = 0; v->tokens && i < v->n; i++)
        free(v->tokens[i]);
    free(v->tokens);
    free(v->respelled);
    free(v->types);
    sp_str_map_free(&v->index);
    *v = (sp_gguf_vocab){0};
}
