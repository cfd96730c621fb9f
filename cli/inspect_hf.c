/* `inspect` on a Hugging Face model directory or a nanoGPT ckpt.pt: the input is validated as every
 * command reads it (io/hf_dir.h, io/nanogpt.h), then described in the document cmd_inspect.c prints:
 * format "huggingface" (or "nanogpt") with the architecture as its version, the spanprobe config it
 * maps to, and every stored tensor with its file, dtype, statistics and the spanprobe parameters it
 * fills. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/inspect.h"
#include "cli/inspect_stats.h"
#include "io/hf_config.h"
#include "io/hf_dir.h"
#include "io/nanogpt.h"
#include "io/tensor_set.h"

#define SLAB_VALUES (1 << 20)

/* Statistics of a tensor's values; none for a dtype that does not read as numbers. */
static void tensor_stats(const sp_tensor_view *t, sp_real *buf, double *wide, cJSON *out)
{
    size_t numel = 1;
    for (int k = 0; k < t->rank; k++)
        numel *= (size_t)t->shape[k];
    sp_inspect_stats s = {0};
    for (size_t first = 0; first < numel; first += SLAB_VALUES) {
        size_t n = numel - first < SLAB_VALUES ? numel - first : SLAB_VALUES;
        if (t->read(t->tensor, first, n, buf) != SP_OK) {
            sp_error_clear();
            return;
        }
        for (size_t i = 0; i < n; i++)
            wide[i] = (double)buf[i];
        sp_inspect_stats_add(&s, wide, n);
    }
    sp_inspect_stats_to_json(&s, out);
}

/* "blocks/0/attn/wq blocks/0/attn/wk ..." for the parameters filled from tensor `name`. */
static void params_of(const sp_hf_config *hc, const sp_param_spec *specs, int n_specs, const char *name, char *buf,
                      size_t cap)
{
    char source[256];
    const size_t prefix = strlen(hc->family->prefix);
    buf[0] = '\0';
    for (int i = 0; i < n_specs; i++) {
        if (sp_hf_param_tensor(hc, specs[i].name, source, sizeof source) != SP_OK)
            continue;
        int same = strcmp(source, name) == 0 ||
                   (strncmp(source, hc->family->prefix, prefix) == 0 && strcmp(source + prefix, name) == 0);
        size_t used = strlen(buf);
        if (same && used < cap)
            snprintf(buf + used, cap - used, "%s%s", used ? " " : "", specs[i].name);
    }
    sp_error_clear(); /* a table gap was reported by the validation already */
}

static sp_status add_tensors(const char *dir, const sp_hf_config *hc, const sp_tensor_set *ts, cJSON *tensors)
{
    sp_param_spec *specs = NULL;
    int n_specs = 0;
    SP_TRY(sp_param_layout(&hc->cfg, &specs, &n_specs));
    sp_real *buf = sp_malloc(SLAB_VALUES * sizeof *buf, "inspect slab");
    double *wide = sp_malloc(SLAB_VALUES * sizeof *wide, "inspect slab");
    sp_status status = buf && wide ? SP_OK : SP_ERR_NOMEM;
    char params[2048];
    for (int i = 0; i < sp_tensor_set_count(ts) && status == SP_OK; i++) {
        const sp_tensor_view *t = sp_tensor_set_at(ts, i);
        cJSON *item = cJSON_CreateObject();
        cJSON_AddItemToArray(tensors, item);
        cJSON_AddStringToObject(item, "name", t->name);
        cJSON *shape = cJSON_AddArrayToObject(item, "shape");
        for (int k = 0; k < t->rank; k++)
            cJSON_AddItemToArray(shape, sp_inspect_json_int(t->shape[k], 0));
        cJSON_AddStringToObject(item, "dtype", t->dtype ? t->dtype : "?");
        cJSON_AddItemToObject(item, "bytes", sp_inspect_json_int((int64_t)t->nbytes, 0));
        cJSON *attrs = cJSON_AddObjectToObject(item, "attributes");
        const size_t dir_len = strlen(dir);
        cJSON_AddStringToObject(attrs, "file", strncmp(t->file, dir, dir_len) == 0 && t->file[dir_len] == '/'
                                                   ? t->file + dir_len + 1
                                                   : t->file);
        params_of(hc, specs, n_specs, t->name, params, sizeof params);
        cJSON_AddStringToObject(attrs, "param", params[0] ? params : "(buffer: not a parameter)");
        tensor_stats(t, buf, wide, item);
    }
    free(buf);
    free(wide);
    free(specs);
    return status;
}

void sp_inspect_add_config(const sp_config *cfg, cJSON *attrs)
{
    cJSON *group = cJSON_AddObjectToObject(attrs, "/config (spanprobe)");
    char value[128];
    for (int i = 0; i < sp_n_config_fields; i++) {
        sp_config_format(cfg, &sp_config_fields[i], value, sizeof value);
        cJSON_AddStringToObject(group, sp_config_fields[i].name, value);
    }
}

/* The document of a model input whose config hc and tensors ts are open; meta validated it. */
static cJSON *describe(const char *path, const char *format, const sp_hf_config *hc, const sp_ckpt_meta *meta,
                       const char *tokenizer)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "file", path);
    cJSON_AddStringToObject(doc, "format", format);
    cJSON_AddStringToObject(doc, "format_version", hc->architecture);
    cJSON *attrs = cJSON_AddObjectToObject(doc, "attributes");
    cJSON *root = cJSON_AddObjectToObject(attrs, "/");
    cJSON_AddStringToObject(root, "source", meta->source);
    cJSON_AddStringToObject(root, "tokenizer", tokenizer);
    sp_inspect_add_config(&meta->cfg, attrs);
    return doc;
}

static sp_status collect(const char *path, const char *format, const sp_hf_config *hc, sp_tensor_set *ts,
                         const sp_ckpt_meta *meta, const char *tokenizer, cJSON **out)
{
    cJSON *doc = describe(path, format, hc, meta, tokenizer);
    sp_status status = add_tensors(path, hc, ts, cJSON_AddArrayToObject(doc, "tensors"));
    sp_tensor_set_close(ts);
    if (status != SP_OK) {
        cJSON_Delete(doc);
        return status;
    }
    *out = doc;
    return SP_OK;
}

sp_status sp_inspect_collect_hf(const char *dir, cJSON **out)
{
    sp_ckpt_meta meta;
    SP_TRY(sp_hf_read_meta(dir, &meta)); /* validates as the commands do */
    sp_hf_config hc;
    sp_tensor_set *ts = NULL;
    sp_status status = sp_hf_dir_open(dir, &hc, &ts);
    if (status == SP_OK)
        status = collect(dir, "huggingface", &hc, ts, &meta, meta.has_tokenizer ? "tokenizer.json" : "none", out);
    else
        sp_tensor_set_close(ts);
    sp_ckpt_meta_free(&meta);
    return status;
}

sp_status sp_inspect_collect_pt(const char *path, cJSON **out)
{
    sp_ckpt_meta meta;
    SP_TRY(sp_nanogpt_read_meta(path, &meta)); /* validates as the commands do */
    sp_hf_config hc;
    sp_tensor_set *ts = NULL;
    int64_t iter_num;
    sp_status status = sp_nanogpt_open(path, &hc, &ts, &iter_num);
    if (status == SP_OK)
        status = collect(path, "nanogpt", &hc, ts, &meta, "none", out);
    else
        sp_tensor_set_close(ts);
    sp_ckpt_meta_free(&meta);
    return status;
}
