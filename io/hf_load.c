/* io/hf_load.c: loading a Hugging Face tokenizer (io/hf_tokenizer.h): the files, the JSON, each
 * component in the order `tokenizers` builds them, the id range, and the decoded piece table. */
#include <stdlib.h>
#include <string.h>

#include "io/file_read.h"
#include "io/hf_engine.h"
#include "io/hf_tokenizer.h"

/* Largest tokenizer.json read (real ones reach tens of MB). */
#define MAX_JSON_BYTES ((size_t)1 << 30)

void sp_hf_free(sp_hf_tokenizer *hf)
{
    if (!hf)
        return;
    sp_hf_steps_free(hf);
    sp_bpe_free(&hf->bpe);
    for (int i = 0; i < hf->n_added; i++) {
        free(hf->added[i].content);
        free(hf->added[i].pattern);
    }
    free(hf->added);
    free(hf->raw_set.items);
    free(hf->normalized_set.items);
    sp_hf_regex_free(hf->space);
    sp_hf_regex_free(hf->word_char);
    free(hf->prefix.ids);
    free(hf->suffix.ids);
    free(hf->json);
    free(hf->config);
    free(hf);
}

void sp_tokenizer_hf_sources(const sp_tokenizer *t, const char **json, size_t *json_len, const char **config,
                             size_t *config_len)
{
    *json = t->hf->json;
    *json_len = t->hf->json_len;
    *config = t->hf->config;
    *config_len = t->hf->config_len;
}

static char *copy_text(const char *s, size_t len)
{
    char *c = sp_malloc(len + 1, "tokenizer text");
    if (c) {
        memcpy(c, s, len);
        c[len] = '\0';
    }
    return c;
}

static sp_status parse_json(const char *name, const char *text, size_t len, cJSON **doc)
{
    size_t bad;
    if (!sp_hf_utf8_valid(text, len, &bad))
        return sp_error(SP_ERR_INPUT, "%s: byte %zu: invalid UTF-8 (expected a JSON text)", name, bad);
    const char *end = NULL;
    *doc = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!*doc)
        return sp_error(SP_ERR_INPUT, "%s: not valid JSON (the parser stopped at byte %zu)", name,
                        end ? (size_t)(end - text) : (size_t)0);
    if (!cJSON_IsObject(*doc)) {
        cJSON_Delete(*doc);
        *doc = NULL;
        return sp_error(SP_ERR_INPUT, "%s: expected a JSON object at the top", name);
    }
    return SP_OK;
}

/* Every id below vocab_size (when given), else vocab_size becomes 1 + the largest id. */
static sp_status check_ids(const sp_hf_tokenizer *hf, const char *file, int *vocab_size)
{
    int32_t largest = hf->bpe.n_ids - 1;
    for (int i = 0; i < hf->n_added; i++)
        largest = hf->added[i].id > largest ? hf->added[i].id : largest;
    const sp_id_list *lists[] = {&hf->prefix, &hf->suffix};
    for (size_t l = 0; l < SP_ARRAY_LEN(lists); l++)
        for (size_t i = 0; i < lists[l]->n; i++)
            largest = lists[l]->ids[i] > largest ? lists[l]->ids[i] : largest;
    if (largest >= SP_HF_MAX_VOCAB)
        return sp_error(SP_ERR_INPUT, "%s: token id %d is above the largest supported (%d)", file, largest,
                        SP_HF_MAX_VOCAB - 1);
    if (*vocab_size <= 0) {
        *vocab_size = largest + 1;
        return SP_OK;
    }
    if (largest < *vocab_size)
        return SP_OK;
    const sp_bpe *b = &hf->bpe;
    for (size_t i = 0; i < b->vocab.cap; i++)
        if (b->vocab.slots[i].key_len != UINT32_MAX && b->vocab.slots[i].value >= *vocab_size)
            return sp_error(SP_ERR_INPUT, "%s: model.vocab['%s']: id %d is not below the model's vocab_size %d", file,
                            sp_str_map_key(&b->vocab, b->vocab.slots[i].key_off), b->vocab.slots[i].value,
                            *vocab_size);
    for (int i = 0; i < hf->n_added; i++)
        if (hf->added[i].id >= *vocab_size)
            return sp_error(SP_ERR_INPUT, "%s: added_tokens['%s']: id %d is not below the model's vocab_size %d", file,
                            hf->added[i].content, hf->added[i].id, *vocab_size);
    return sp_error(SP_ERR_INPUT, "%s: post_processor: special token id %d is not below the model's vocab_size %d",
                    file, largest, *vocab_size);
}

static sp_status load_parts(sp_hf_tokenizer *hf, const cJSON *doc, const char *name, const cJSON *config,
                            const char *config_name, int vocab_size, sp_tokenizer *t)
{
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(doc, "version");
    if (version && !(cJSON_IsString(version) && strcmp(version->valuestring, "1.0") == 0))
        return sp_error(SP_ERR_INPUT, "%s: version: expected \"1.0\" (tokenizers' only format)", name);
    sp_hf_byte_chars(hf->byte_chars);
    SP_TRY(sp_hf_load_model(hf, cJSON_GetObjectItemCaseSensitive(doc, "model"), name));
    SP_TRY(sp_hf_load_normalizer(hf, cJSON_GetObjectItemCaseSensitive(doc, "normalizer"), name));
    SP_TRY(sp_hf_load_pretokenizer(hf, cJSON_GetObjectItemCaseSensitive(doc, "pre_tokenizer"), name));
    SP_TRY(sp_hf_load_added(hf, cJSON_GetObjectItemCaseSensitive(doc, "added_tokens"), name));
    int bos, eos;
    SP_TRY(sp_hf_load_specials(hf, cJSON_GetObjectItemCaseSensitive(doc, "post_processor"), name, config,
                               config_name, &bos, &eos));
    SP_TRY(check_ids(hf, name, &vocab_size));
    *t = (sp_tokenizer){.kind = SP_TOK_HF, .vocab_size = vocab_size, .bos_id = bos, .eos_id = eos, .hf = hf};
    return sp_hf_load_decoder(hf, cJSON_GetObjectItemCaseSensitive(doc, "decoder"), name, t);
}

sp_status sp_tokenizer_load_hf_text(const char *name, const char *json, size_t json_len, const char *config_name,
                                    const char *config, size_t config_len, int vocab_size, sp_tokenizer *t)
{
    cJSON *doc = NULL, *config_doc = NULL;
    sp_status st = parse_json(name, json, json_len, &doc);
    if (st == SP_OK && config)
        st = parse_json(config_name, config, config_len, &config_doc);
    sp_hf_tokenizer *hf = st == SP_OK ? sp_calloc(1, sizeof *hf, "tokenizer") : NULL;
    if (st == SP_OK && !hf)
        st = SP_ERR_NOMEM;
    if (st == SP_OK) {
        hf->json = copy_text(json, json_len);
        hf->json_len = json_len;
        hf->config = config ? copy_text(config, config_len) : NULL;
        hf->config_len = config ? config_len : 0;
        if (!hf->json || (config && !hf->config))
            st = SP_ERR_NOMEM;
    }
    sp_tokenizer out = {0};
    if (st == SP_OK)
        st = load_parts(hf, doc, name, config_doc, config_name, vocab_size, &out);
    cJSON_Delete(doc);
    cJSON_Delete(config_doc);
    if (st != SP_OK) {
        free(out.bytes);
        free(out.offsets);
        sp_hf_free(hf);
        return st;
    }
    *t = out;
    return SP_OK;
}

sp_status sp_tokenizer_load_hf(const char *tokenizer_json_path, const char *tokenizer_config_path, int vocab_size,
                               sp_tokenizer *t)
{
    unsigned char *json = NULL, *config = NULL;
    size_t json_len = 0, config_len = 0;
    sp_status st = sp_file_read_all(tokenizer_json_path, MAX_JSON_BYTES, &json, &json_len);
    if (st == SP_OK && tokenizer_config_path)
        st = sp_file_read_all(tokenizer_config_path, MAX_JSON_BYTES, &config, &config_len);
    if (st == SP_OK)
        st = sp_tokenizer_load_hf_text(tokenizer_json_path, (const char *)json, json_len, tokenizer_config_path,
                                       (const char *)config, config_len, vocab_size, t);
    free(json);
    free(config);
    return st;
}
