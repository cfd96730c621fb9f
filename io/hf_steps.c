/* io/hf_steps.c: tokenizer.json's "normalizer" and "pre_tokenizer" into flat step lists (a
 * Sequence applies its members in order to every split, so nested Sequences flatten). */
#include <stdlib.h>
#include <string.h>

#include "io/hf_engine.h"

/* `tokenizers`' pre_tokenizers::byte_level regex (GPT-2's). */
static const char gpt2_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static sp_status copy_text(const char *s, char **out, size_t *len)
{
    *len = strlen(s);
    *out = strdup(s);
    return *out ? SP_OK : sp_error(SP_ERR_NOMEM, "out of memory copying a tokenizer string");
}

/* ---- normalizers ---- */

typedef struct {
    sp_hf_tokenizer *hf;
    const char *file;
} loader;

static sp_status add_normalizer(sp_hf_tokenizer *hf, sp_hf_normalizer n)
{
    SP_TRY(sp_grow((void **)&hf->norms, &hf->cap_norms, (size_t)hf->n_norms + 1, sizeof *hf->norms, "the normalizer"));
    hf->norms[hf->n_norms++] = n;
    return SP_OK;
}

static sp_status load_normalizer(void *ctx, const cJSON *j, const char *path)
{
    static const char supported[] = "Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD";
    static const char *const forms[] = {"NFC", "NFD", "NFKC", "NFKD"};
    sp_hf_tokenizer *hf = ((loader *)ctx)->hf;
    const char *file = ((loader *)ctx)->file, *type = sp_hf_type(j);
    if (!type)
        return sp_hf_unsupported(j, file, path, supported);
    if (strcmp(type, "Sequence") == 0)
        return sp_hf_each_member(j, "normalizers", file, path, load_normalizer, ctx);
    for (size_t f = 0; f < SP_ARRAY_LEN(forms); f++)
        if (strcmp(type, forms[f]) == 0)
            return add_normalizer(hf, (sp_hf_normalizer){.kind = SP_HF_NORM_UNICODE, .form = (sp_hf_nf)f});
    sp_hf_normalizer n = {0};
    const char *text = NULL;
    if (strcmp(type, "Prepend") == 0) {
        n.kind = SP_HF_NORM_PREPEND;
        SP_TRY(sp_hf_get_string(j, "prepend", file, path, &text));
    } else if (strcmp(type, "Replace") == 0) {
        n.kind = SP_HF_NORM_REPLACE;
        SP_TRY(sp_hf_get_string(j, "content", file, path, &text));
        SP_TRY(sp_hf_get_pattern(j, file, path, &n.pattern));
    } else {
        return sp_hf_unsupported(j, file, path, supported);
    }
    sp_status st = copy_text(text, &n.text, &n.text_len);
    if (st == SP_OK)
        st = add_normalizer(hf, n);
    if (st != SP_OK) {
        sp_hf_regex_free(n.pattern);
        free(n.text);
    }
    return st;
}

sp_status sp_hf_load_normalizer(sp_hf_tokenizer *hf, const cJSON *j, const char *file)
{
    loader ctx = {hf, file};
    return !j || cJSON_IsNull(j) ? SP_OK : load_normalizer(&ctx, j, "normalizer");
}

/* ---- pre-tokenizers ---- */

static sp_status add_pretokenizer(sp_hf_tokenizer *hf, sp_hf_pretokenizer p)
{
    sp_status st = sp_grow((void **)&hf->pres, &hf->cap_pres, (size_t)hf->n_pres + 1, sizeof *hf->pres,
                           "the pre_tokenizer");
    if (st != SP_OK) {
        sp_hf_regex_free(p.pattern);
        return st;
    }
    hf->pres[hf->n_pres++] = p;
    return SP_OK;
}

static sp_status load_behavior(const cJSON *j, const char *file, const char *path, sp_hf_behavior *b)
{
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    const char *name = NULL;
    SP_TRY(sp_hf_get_string(j, "behavior", file, path, &name));
    for (size_t i = 0; i < SP_ARRAY_LEN(names); i++)
        if (strcmp(name, names[i]) == 0) {
            *b = (sp_hf_behavior)i;
            return SP_OK;
        }
    return sp_error(SP_ERR_INPUT, "%s: %s.behavior '%s' is not one of Removed, Isolated, MergedWithPrevious, "
                                  "MergedWithNext, Contiguous", file, path, name);
}

static sp_status load_byte_level(sp_hf_tokenizer *hf, const cJSON *j, const char *file, const char *path)
{
    sp_hf_pretokenizer p = {.kind = SP_HF_PRE_BYTE_LEVEL};
    int use_regex;
    SP_TRY(sp_hf_get_bool(j, "add_prefix_space", 1, file, path, &p.add_prefix_space));
    SP_TRY(sp_hf_get_bool(j, "use_regex", 1, file, path, &use_regex));
    if (use_regex)
        SP_TRY(sp_hf_regex_compile(gpt2_pattern, strlen(gpt2_pattern), 0, "GPT-2's pattern", &p.pattern));
    return add_pretokenizer(hf, p);
}

static sp_status load_metaspace(sp_hf_tokenizer *hf, const cJSON *j, const char *file, const char *path)
{
    static const char *const schemes[] = {"never", "first", "always"};
    sp_hf_pretokenizer p = {.kind = SP_HF_PRE_METASPACE, .prepend = SP_HF_PREPEND_ALWAYS};
    int add_prefix_space;
    SP_TRY(sp_hf_get_char(j, "replacement", file, path, p.replacement, &p.replacement_len));
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(j, "prepend_scheme");
    if (scheme) {
        int found = 0;
        for (size_t i = 0; i < SP_ARRAY_LEN(schemes) && cJSON_IsString(scheme); i++)
            if (strcmp(scheme->valuestring, schemes[i]) == 0) {
                p.prepend = (sp_hf_prepend)i;
                found = 1;
            }
        if (!found)
            return sp_error(SP_ERR_INPUT, "%s: %s.prepend_scheme: expected \"first\", \"never\" or \"always\"", file,
                            path);
    }
    SP_TRY(sp_hf_get_bool(j, "add_prefix_space", 1, file, path, &add_prefix_space));
    if (!add_prefix_space && p.prepend != SP_HF_PREPEND_NEVER) /* tokenizers refuses it too */
        return sp_error(SP_ERR_INPUT, "%s: %s: add_prefix_space false contradicts prepend_scheme '%s'%s", file, path,
                        schemes[p.prepend], scheme ? "" : " (the default)");
    SP_TRY(sp_hf_get_bool(j, "split", 1, file, path, &p.split));
    if (p.split)
        SP_TRY(sp_hf_regex_compile(p.replacement, p.replacement_len, 1, "the Metaspace replacement", &p.pattern));
    return add_pretokenizer(hf, p);
}

static sp_status load_pretokenizer(void *ctx, const cJSON *j, const char *path)
{
    static const char supported[] = "Sequence, ByteLevel, Split, Metaspace, Digits";
    sp_hf_tokenizer *hf = ((loader *)ctx)->hf;
    const char *file = ((loader *)ctx)->file, *type = sp_hf_type(j);
    if (!type)
        return sp_hf_unsupported(j, file, path, supported);
    if (strcmp(type, "Sequence") == 0)
        return sp_hf_each_member(j, "pretokenizers", file, path, load_pretokenizer, ctx);
    if (strcmp(type, "ByteLevel") == 0)
        return load_byte_level(hf, j, file, path);
    if (strcmp(type, "Metaspace") == 0)
        return load_metaspace(hf, j, file, path);
    sp_hf_pretokenizer p = {.kind = SP_HF_PRE_SPLIT};
    if (strcmp(type, "Split") == 0) {
        SP_TRY(load_behavior(j, file, path, &p.behavior));
        SP_TRY(sp_hf_get_bool(j, "invert", 0, file, path, &p.invert));
        SP_TRY(sp_hf_get_pattern(j, file, path, &p.pattern));
    } else if (strcmp(type, "Digits") == 0) {
        int individual;
        SP_TRY(sp_hf_get_bool(j, "individual_digits", 0, file, path, &individual));
        p.behavior = individual ? SP_HF_ISOLATED : SP_HF_CONTIGUOUS;
        SP_TRY(sp_hf_regex_compile("\\p{N}", 5, 0, "the Digits pattern", &p.pattern));
    } else {
        return sp_hf_unsupported(j, file, path, supported);
    }
    return add_pretokenizer(hf, p);
}

sp_status sp_hf_load_pretokenizer(sp_hf_tokenizer *hf, const cJSON *j, const char *file)
{
    loader ctx = {hf, file};
    return !j || cJSON_IsNull(j) ? SP_OK : load_pretokenizer(&ctx, j, "pre_tokenizer");
}

void sp_hf_steps_free(sp_hf_tokenizer *hf)
{
    for (int i = 0; i < hf->n_norms; i++) {
        sp_hf_regex_free(hf->norms[i].pattern);
        free(hf->norms[i].text);
    }
    for (int i = 0; i < hf->n_pres; i++)
        sp_hf_regex_free(hf->pres[i].pattern);
    free(hf->norms);
    free(hf->pres);
    hf->norms = NULL;
    hf->pres = NULL;
    hf->n_norms = hf->n_pres = 0;
    hf->cap_norms = hf->cap_pres = 0;
}
