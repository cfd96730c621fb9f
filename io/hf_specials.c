/* io/hf_specials.c: BOS, EOS and the special tokens added around a sequence.
 *
 * tokenizer_config.json decides where it says: bos_token / eos_token (a string or an AddedToken
 * object's "content") name BOS and EOS; add_bos_token / add_eos_token say whether they are added
 * (transformers rebuilds the post-processor from these). What it leaves out comes from
 * tokenizer.json's post-processor: the special tokens before $A in its TemplateProcessing "single"
 * template are the prefix (the first one BOS), those after it the suffix (the first one EOS). */
#include <string.h>

#include "io/hf_engine.h"

static int token_id(const sp_hf_tokenizer *hf, const char *content, int32_t *id)
{
    for (int i = 0; i < hf->n_added; i++)
        if (strcmp(hf->added[i].content, content) == 0) {
            *id = hf->added[i].id;
            return 1;
        }
    return sp_bpe_lookup(&hf->bpe, content, strlen(content), id);
}

/* The ids of one SpecialToken of a template, from the processor's special_tokens map. */
static sp_status template_token(const cJSON *post, const cJSON *piece, const char *file, const char *path,
                                sp_id_list *out)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(piece, "id");
    const cJSON *tok = cJSON_IsString(name) ? cJSON_GetObjectItemCaseSensitive(
                                                  cJSON_GetObjectItemCaseSensitive(post, "special_tokens"),
                                                  name->valuestring)
                                            : NULL;
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(tok, "ids");
    if (!cJSON_IsArray(ids))
        return sp_error(SP_ERR_INPUT, "%s: %s.single: the special token %s%s%s has no ids in special_tokens", file,
                        path, cJSON_IsString(name) ? "'" : "", cJSON_IsString(name) ? name->valuestring : "(unnamed)",
                        cJSON_IsString(name) ? "'" : "");
    for (const cJSON *e = ids->child; e; e = e->next) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= INT32_MAX)
            return sp_error(SP_ERR_INPUT, "%s: %s.special_tokens['%s'].ids: expected token ids", file, path,
                            name->valuestring);
        SP_TRY(sp_id_list_push(out, (int32_t)e->valuedouble));
    }
    return SP_OK;
}

static sp_status load_template(const cJSON *post, const char *file, const char *path, sp_id_list *prefix,
                               sp_id_list *suffix)
{
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(post, "single");
    if (!cJSON_IsArray(single))
        return sp_error(SP_ERR_INPUT, "%s: %s.single: expected an array of template pieces", file, path);
    int seen_a = 0;
    for (const cJSON *piece = single->child; piece; piece = piece->next) {
        const cJSON *special = cJSON_GetObjectItemCaseSensitive(piece, "SpecialToken");
        if (special)
            SP_TRY(template_token(post, special, file, path, seen_a ? suffix : prefix));
        else if (cJSON_GetObjectItemCaseSensitive(piece, "Sequence"))
            seen_a = 1;
        else
            return sp_error(SP_ERR_INPUT, "%s: %s.single: expected {\"SpecialToken\": ...} or {\"Sequence\": ...}",
                            file, path);
    }
    return SP_OK;
}

typedef struct {
    const char *file;
    sp_id_list *prefix, *suffix;
    int n_templates;
} post_loader;

static sp_status load_post(void *ctx, const cJSON *post, const char *path)
{
    post_loader *l = ctx;
    const char *t = sp_hf_type(post);
    if (t && strcmp(t, "ByteLevel") == 0) /* it only trims offsets */
        return SP_OK;
    if (t && strcmp(t, "Sequence") == 0)
        return sp_hf_each_member(post, "processors", l->file, path, load_post, l);
    if (!t || strcmp(t, "TemplateProcessing") != 0)
        return sp_hf_unsupported(post, l->file, path, "TemplateProcessing, ByteLevel, Sequence");
    if (++l->n_templates > 1)
        return sp_error(SP_ERR_INPUT, "%s: %s: a second TemplateProcessing is not supported", l->file, path);
    return load_template(post, l->file, path, l->prefix, l->suffix);
}

/* A config's bos_token / eos_token: *id stays -1 unless it names one; *given when the key is there. */
static sp_status config_token(const sp_hf_tokenizer *hf, const cJSON *config, const char *key, const char *file,
                              int32_t *id, int *given)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);
    *given = v != NULL;
    if (!v || cJSON_IsNull(v))
        return SP_OK;
    const cJSON *content = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "content") : v;
    if (!cJSON_IsString(content))
        return sp_error(SP_ERR_INPUT, "%s: %s: expected a string, {\"content\": ...} or null", file, key);
    if (!token_id(hf, content->valuestring, id))
        return sp_error(SP_ERR_INPUT, "%s: %s '%s' is not in the tokenizer's vocabulary", file, key,
                        content->valuestring);
    return SP_OK;
}

/* add_bos_token / add_eos_token: the list becomes [id] or [] when the config has the flag. */
static sp_status config_flag(const cJSON *config, const char *key, const char *token_key, const char *file,
                             int32_t id, sp_id_list *list)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);
    if (!v || cJSON_IsNull(v))
        return SP_OK;
    if (!cJSON_IsBool(v))
        return sp_error(SP_ERR_INPUT, "%s: %s: expected true or false", file, key);
    list->n = 0;
    if (cJSON_IsFalse(v))
        return SP_OK;
    if (id < 0)
        return sp_error(SP_ERR_INPUT, "%s: %s is true but there is no %s", file, key, token_key);
    return sp_id_list_push(list, id);
}

sp_status sp_hf_load_specials(sp_hf_tokenizer *hf, const cJSON *post, const char *file, const cJSON *config,
                              const char *config_file, int *bos_id, int *eos_id)
{
    int bos_given = 0, eos_given = 0;
    post_loader loader = {file, &hf->prefix, &hf->suffix, 0};
    if (post && !cJSON_IsNull(post))
        SP_TRY(load_post(&loader, post, "post_processor"));
    if (config && !cJSON_IsObject(config))
        return sp_error(SP_ERR_INPUT, "%s: expected a JSON object", config_file);
    int32_t bos = -1, eos = -1;
    SP_TRY(config_token(hf, config, "bos_token", config_file, &bos, &bos_given));
    SP_TRY(config_token(hf, config, "eos_token", config_file, &eos, &eos_given));
    if (!bos_given && hf->prefix.n)
        bos = hf->prefix.ids[0];
    if (!eos_given && hf->suffix.n)
        eos = hf->suffix.ids[0];
    SP_TRY(config_flag(config, "add_bos_token", "bos_token", config_file, bos, &hf->prefix));
    SP_TRY(config_flag(config, "add_eos_token", "eos_token", config_file, eos, &hf->suffix));
    *bos_id = bos;
    *eos_id = eos;
    return SP_OK;
}
