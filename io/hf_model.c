/* io/hf_model.c: tokenizer.json's "model" (BPE only) into the BPE tables of io/bpe.h, checked as
 * `tokenizers`' BpeBuilder checks it (every merge's parts and result in the vocabulary). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/hf_engine.h"

/* A JSON value that must be null, absent or false/empty to be supported. */
static sp_status reject_set(const cJSON *model, const char *key, const char *file, const char *why)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, key);
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v) || (cJSON_IsString(v) && v->valuestring[0] == '\0') ||
        (cJSON_IsNumber(v) && v->valuedouble == 0))
        return SP_OK;
    char *shown = cJSON_PrintUnformatted(v);
    sp_status st = sp_error(SP_ERR_INPUT, "%s: model.%s %s is not supported (%s)", file, key, shown ? shown : "",
                            why);
    free(shown);
    return st;
}

static sp_status load_vocab(sp_bpe *b, const cJSON *vocab, const char *file)
{
    if (!cJSON_IsObject(vocab))
        return sp_error(SP_ERR_INPUT, "%s: model.vocab: expected an object of piece: id", file);
    for (const cJSON *e = vocab->child; e; e = e->next) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(v >= 0 && v < SP_HF_MAX_VOCAB && v == floor(v)))
            return sp_error(SP_ERR_INPUT, "%s: model.vocab['%s']: expected an integer id in 0..%d", file, e->string,
                            SP_HF_MAX_VOCAB - 1);
        int32_t dup;
        SP_TRY(sp_bpe_add_piece(b, e->string, strlen(e->string), (int32_t)v, &dup));
        if (dup >= 0)
            return sp_error(SP_ERR_INPUT, "%s: model.vocab: the piece '%s' is listed twice", file, e->string);
    }
    int32_t dup_id;
    size_t first, second;
    SP_TRY(sp_bpe_index(b, &dup_id, &first, &second));
    if (dup_id >= 0)
        return sp_error(SP_ERR_INPUT, "%s: model.vocab: id %d is used by '%.200s' and '%.200s' (expected one piece per "
                        "id)", file, dup_id, sp_str_map_key(&b->vocab, first), sp_str_map_key(&b->vocab, second));
    return SP_OK;
}

/* The two parts of merge i: a "left right" string (the older form) or a [left, right] pair. */
static sp_status merge_parts(const cJSON *m, size_t i, const char *file, const char **left, size_t *left_len,
                             const char **right, size_t *right_len)
{
    if (cJSON_IsString(m)) {
        const char *s = m->valuestring, *space = strchr(s, ' ');
        if (space && !strchr(space + 1, ' ')) {
            *left = s;
            *left_len = (size_t)(space - s);
            *right = space + 1;
            *right_len = strlen(space + 1);
            return SP_OK;
        }
    } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
        *left = m->child->valuestring;
        *left_len = strlen(*left);
        *right = m->child->next->valuestring;
        *right_len = strlen(*right);
        return SP_OK;
    }
    return sp_error(SP_ERR_INPUT, "%s: model.merges[%zu]: expected \"left right\" or [\"left\", \"right\"]", file, i);
}

static sp_status piece_id(const sp_bpe *b, const char *piece, size_t len, size_t i, const char *file, int32_t *id)
{
    if (!sp_bpe_lookup(b, piece, len, id))
        return sp_error(SP_ERR_INPUT, "%s: model.merges[%zu]: '%.*s' is not in model.vocab", file, i,
                        (int)(len > 200 ? 200 : len), piece);
    return SP_OK;
}

static sp_status load_merges(sp_bpe *b, const cJSON *merges, const char *file)
{
    if (!cJSON_IsArray(merges))
        return sp_error(SP_ERR_INPUT, "%s: model.merges: expected an array", file);
    size_t i = 0, cap = 0;
    uint32_t rank = 0;
    char *joined = NULL;
    sp_status st = SP_OK;
    for (const cJSON *m = merges->child; m && st == SP_OK; m = m->next, i++) {
        if (cJSON_IsString(m) && strncmp(m->valuestring, "#version", 8) == 0)
            continue; /* a merges.txt header line: no rank */
        const char *left = NULL, *right = NULL;
        size_t left_len = 0, right_len = 0;
        int32_t a, c, merged;
        if ((st = merge_parts(m, i, file, &left, &left_len, &right, &right_len)) != SP_OK ||
            (st = piece_id(b, left, left_len, i, file, &a)) != SP_OK ||
            (st = piece_id(b, right, right_len, i, file, &c)) != SP_OK)
            break;
        if ((st = sp_grow((void **)&joined, &cap, left_len + right_len, 1, "a merged piece")) != SP_OK)
            break;
        memcpy(joined, left, left_len);
        memcpy(joined + left_len, right, right_len);
        if ((st = piece_id(b, joined, left_len + right_len, i, file, &merged)) == SP_OK)
            st = sp_bpe_add_merge(b, a, c, rank++, merged);
    }
    free(joined);
    return st;
}

sp_status sp_hf_load_model(sp_hf_tokenizer *hf, const cJSON *model, const char *file)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (!cJSON_IsObject(model))
        return sp_error(SP_ERR_INPUT, "%s: model: expected an object", file);
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE") != 0)
        return sp_error(SP_ERR_INPUT, "%s: model.type '%s' is not supported (supported: BPE)", file,
                        cJSON_IsString(type) ? type->valuestring : "(missing)");
    sp_bpe *b = &hf->bpe;
    b->unk_id = -1;
    SP_TRY(reject_set(model, "dropout", file, "BPE dropout samples merges at random"));
    SP_TRY(reject_set(model, "continuing_subword_prefix", file, "expected null or \"\""));
    SP_TRY(reject_set(model, "end_of_word_suffix", file, "expected null or \"\""));
    SP_TRY(sp_hf_get_bool(model, "fuse_unk", 0, file, "model", &b->fuse_unk));
    SP_TRY(sp_hf_get_bool(model, "byte_fallback", 0, file, "model", &b->byte_fallback));
    SP_TRY(sp_hf_get_bool(model, "ignore_merges", 0, file, "model", &b->ignore_merges));
    SP_TRY(load_vocab(b, cJSON_GetObjectItemCaseSensitive(model, "vocab"), file));
    SP_TRY(load_merges(b, cJSON_GetObjectItemCaseSensitive(model, "merges"), file));
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (cJSON_IsString(unk) && !sp_bpe_lookup(b, unk->valuestring, strlen(unk->valuestring), &b->unk_id)) {
        b->unk_id = -1;
        if (!(b->unk_missing = strdup(unk->valuestring)))
            return sp_error(SP_ERR_NOMEM, "out of memory reading %s", file);
    } else if (unk && !cJSON_IsString(unk) && !cJSON_IsNull(unk)) {
        return sp_error(SP_ERR_INPUT, "%s: model.unk_token: expected a string or null", file);
    }
    return SP_OK;
}
