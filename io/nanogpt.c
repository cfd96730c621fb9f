#include "io/nanogpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/input_file.h"
#include "io/hf_config.h"
#include "io/hf_dir.h"
#include "io/pt_file.h"
#include "io/tensor_set.h"

int sp_pt_is_file(const char *path)
{
    FILE *f = NULL;
    if (sp_file_open_regular(path, &f, NULL) != SP_OK) {
        sp_error_clear(); /* a question, not a failure */
        return 0;
    }
    unsigned char magic[4] = {0};
    int is = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "PK\003\004", 4) == 0;
    if (f)
        fclose(f);
    return is;
}

/* model_args as JSON, with nanoGPT's fixed LayerNorm epsilon (model.py: F.layer_norm(..., 1e-5)). */
static sp_status args_json(const sp_pk_value *args, const char *path, cJSON **out)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return SP_ERR_NOMEM;
    for (size_t i = 0; i < args->n; i++) {
        const sp_pk_value *k = args->items[2 * i], *v = args->items[2 * i + 1];
        if (k->kind != SP_PK_STR) {
            cJSON_Delete(root);
            return sp_error(SP_ERR_INPUT, "%s: model_args has a key that is not a string", path);
        }
        cJSON *item = v->kind == SP_PK_BOOL    ? cJSON_CreateBool((int)v->i)
                      : v->kind == SP_PK_INT   ? cJSON_CreateNumber((double)v->i)
                      : v->kind == SP_PK_FLOAT ? cJSON_CreateNumber(v->f)
                      : v->kind == SP_PK_STR   ? cJSON_CreateString(v->str)
                                               : cJSON_CreateNull();
        cJSON_AddItemToObject(root, k->str, item);
    }
    cJSON_AddNumberToObject(root, "layer_norm_epsilon", 1e-5);
    *out = root;
    return SP_OK;
}

typedef struct {
    sp_hf_config hc;
    sp_tensor_set *ts;
    int64_t iter_num;
} nanogpt_ckpt;

static sp_status ckpt_open(const char *path, nanogpt_ckpt *c)
{
    return sp_nanogpt_open(path, &c->hc, &c->ts, &c->iter_num);
}

sp_status sp_nanogpt_open(const char *path, sp_hf_config *hc, sp_tensor_set **ts, int64_t *iter_num)
{
    *ts = NULL;
    *iter_num = -1;
    char where[4200];
    snprintf(where, sizeof where, "%s: model_args", path);
    sp_pt_file *f;
    SP_TRY(sp_pt_open(path, &f));
    const sp_pk_value *root = sp_pt_root(f), *model = NULL, *args = NULL, *iter = NULL;
    if (root && root->kind == SP_PK_DICT) {
        model = sp_pk_get(root, "model");
        args = sp_pk_get(root, "model_args");
        iter = sp_pk_get(root, "iter_num");
    }
    if (!model || !args || args->kind != SP_PK_DICT) {
        sp_pt_close(f);
        return sp_error(SP_ERR_INPUT, "%s: not a nanoGPT checkpoint (a dict with 'model' and 'model_args'); a bare "
                                      "state dict needs its config.json: put both in a directory, the weights as "
                                      "pytorch_model.bin",
                        path);
    }
    if (iter && iter->kind == SP_PK_INT)
        *iter_num = iter->i;
    cJSON *json = NULL;
    sp_status st = args_json(args, path, &json);
    if (st == SP_OK)
        st = sp_hf_config_map(json, &sp_hf_nanogpt, where, hc);
    cJSON_Delete(json);
    if (st != SP_OK) {
        sp_pt_close(f);
        return st;
    }
    return sp_tensor_set_open_pt(f, model, "_orig_mod.", ts); /* takes f over */
}

static void fill_meta(const char *path, const nanogpt_ckpt *c, sp_ckpt_meta *meta)
{
    meta->cfg = c->hc.cfg;
    snprintf(meta->source, sizeof meta->source, "import pt %s (nanoGPT ckpt.pt, iter_num %lld, %d tensors, %zu bytes)",
             path, (long long)c->iter_num, sp_tensor_set_count(c->ts), sp_tensor_set_bytes(c->ts));
}

sp_status sp_nanogpt_read_meta(const char *path, sp_ckpt_meta *meta)
{
    sp_ckpt_meta_init(meta);
    nanogpt_ckpt c;
    sp_status st = ckpt_open(path, &c);
    if (st == SP_OK)
        st = sp_hf_check_tensors(&c.hc, c.ts, path);
    if (st == SP_OK)
        fill_meta(path, &c, meta);
    sp_tensor_set_close(c.ts);
    return st;
}

sp_status sp_nanogpt_load(const char *path, const sp_backend *be, sp_model **model, sp_ckpt_meta *meta)
{
    *model = NULL;
    sp_ckpt_meta_init(meta);
    nanogpt_ckpt c;
    sp_status st = ckpt_open(path, &c);
    if (st == SP_OK)
        st = sp_hf_model_from_tensors(&c.hc, c.ts, path, be, model);
    if (st == SP_OK)
        fill_meta(path, &c, meta);
    sp_tensor_set_close(c.ts);
    return st;
}
