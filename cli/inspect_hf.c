/* `inspect` on a Hugging Face model directory: the directory is validated as every command reads
 * it (io/hf_dir.h), then described in the document cmd_inspect.c prints: format "huggingface" with
 * the architecture as its version, the spanprobe config it maps to, and every stored tensor with
 * its shard, dtype, statistics and the spanprobe parameters it fills. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/inspect.h"
#include "cli/inspect_stats.h"
#include "io/hf_config.h"
#include "io/hf_dir.h"
#include "io/safetensors.h"

#define SLAB_VALUES (1 << 20)

static sp_status tensor_stats(const sp_st_tensor *t, sp_real *buf, double *wide, cJSON *out)
{
    if (!sp_st_dtype_is_readable(t->dtype))
        return SP_OK;
    sp_inspect_stats s = {0};
    for (size_t first = 0; first < t->numel; first += SLAB_VALUES) {
        size_t n = t->numel - first < SLAB_VALUES ? t->numel - first : SLAB_VALUES;
        SP_TRY(sp_st_read(t, first, n, buf));
        for (size_t i = 0; i < n; i++)
            wide[i] = (double)buf[i];
        sp_inspect_stats_add(&s, wide, n);
    }
    sp_inspect_stats_to_json(&s, out);
    return SP_OK;
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

static sp_status add_tensors(const char *dir, const sp_hf_config *hc, const sp_st_archive *st, cJSON *tensors)
{
    sp_param_spec *specs = NULL;
    int n_specs = 0;
    SP_TRY(sp_param_layout(&hc->cfg, &specs, &n_specs));
    sp_real *buf = sp_malloc(SLAB_VALUES * sizeof *buf, "inspect slab");
    double *wide = sp_malloc(SLAB_VALUES * sizeof *wide, "inspect slab");
    sp_status status = buf && wide ? SP_OK : SP_ERR_NOMEM;
    char params[2048];
    for (int i = 0; i < sp_st_count(st) && status == SP_OK; i++) {
        const sp_st_tensor *t = sp_st_at(st, i);
        cJSON *item = cJSON_CreateObject();
        cJSON_AddItemToArray(tensors, item);
        cJSON_AddStringToObject(item, "name", t->name);
        cJSON *shape = cJSON_AddArrayToObject(item, "shape");
        for (int k = 0; k < t->rank; k++)
            cJSON_AddItemToArray(shape, sp_inspect_json_int(t->shape[k], 0));
        cJSON_AddStringToObject(item, "dtype", sp_st_dtype_name(t->dtype));
        cJSON_AddItemToObject(item, "bytes", sp_inspect_json_int((int64_t)t->nbytes, 0));
        cJSON *attrs = cJSON_AddObjectToObject(item, "attributes");
        const size_t dir_len = strlen(dir);
        cJSON_AddStringToObject(attrs, "file", strncmp(t->file, dir, dir_len) == 0 && t->file[dir_len] == '/'
                                                   ? t->file + dir_len + 1
                                                   : t->file);
        params_of(hc, specs, n_specs, t->name, params, sizeof params);
        cJSON_AddStringToObject(attrs, "param", params[0] ? params : "(buffer: not a parameter)");
        status = tensor_stats(t, buf, wide, item);
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

sp_status sp_inspect_collect_hf(const char *dir, cJSON **out)
{
    sp_ckpt_meta meta;
    SP_TRY(sp_hf_read_meta(dir, &meta)); /* validates as the commands do */
    char config[4096];
    snprintf(config, sizeof config, "%s/config.json", dir);
    sp_hf_config hc;
    sp_st_archive *st = NULL;
    sp_status status = sp_hf_config_read(config, &hc);
    if (status == SP_OK)
        status = sp_st_open(dir, &st);
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "file", dir);
    cJSON_AddStringToObject(doc, "format", "huggingface");
    cJSON_AddStringToObject(doc, "format_version", status == SP_OK ? hc.architecture : "?");
    cJSON *attrs = cJSON_AddObjectToObject(doc, "attributes");
    cJSON *root = cJSON_AddObjectToObject(attrs, "/");
    cJSON_AddStringToObject(root, "source", meta.source);
    cJSON_AddStringToObject(root, "tokenizer", meta.has_tokenizer ? "tokenizer.json" : "none");
    sp_inspect_add_config(&meta.cfg, attrs);
    cJSON *tensors = cJSON_AddArrayToObject(doc, "tensors");
    if (status == SP_OK)
        status = add_tensors(dir, &hc, st, tensors);
    sp_st_close(st);
    sp_ckpt_meta_free(&meta);
    if (status != SP_OK) {
        cJSON_Delete(doc);
        return status;
    }
    *out = doc;
    return SP_OK;
}
