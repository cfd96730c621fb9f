/* `inspect` on a GGUF file: the file is validated as every command reads it (io/gguf_model.h), then
 * described in the document cmd_inspect.c prints: format "gguf" with its version and architecture,
 * the provenance, the tensor types with their counts, every metadata key (arrays by type and
 * length), the spanprobe config it maps to, and every tensor with its shape (outermost first), ggml
 * type, stored size, statistics of its dequantized values and the spanprobe parameters it fills. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/inspect.h"
#include "cli/inspect_stats.h"
#include "io/gguf_config.h"
#include "io/gguf_model.h"
#include "model/params.h"

#define SLAB_VALUES (1 << 20)

static sp_status tensor_stats(const sp_gguf_tensor *t, sp_real *buf, double *wide, cJSON *out)
{
    const size_t row = (size_t)t->dims[0], rows_per_slab = row >= SLAB_VALUES ? 1 : SLAB_VALUES / row;
    if (!sp_ggml_type_is_readable(t->type) || row > SLAB_VALUES)
        return SP_OK;
    sp_inspect_stats s = {0};
    for (size_t first = 0; first < t->n_rows; first += rows_per_slab) {
        const size_t n = t->n_rows - first < rows_per_slab ? t->n_rows - first : rows_per_slab;
        SP_TRY(sp_gguf_read_rows(t, first, n, buf));
        for (size_t i = 0; i < n * row; i++)
            wide[i] = (double)buf[i];
        sp_inspect_stats_add(&s, wide, n * row);
    }
    sp_inspect_stats_to_json(&s, out);
    return SP_OK;
}

/* "blocks/0/attn/wq blocks/0/attn/wk ..." for the parameters filled from tensor `name`. */
static void params_of(const sp_gguf_arch *arch, const sp_param_spec *specs, int n_specs, const char *name, char *buf,
                      size_t cap)
{
    char source[128];
    buf[0] = '\0';
    for (int i = 0; i < n_specs; i++) {
        sp_gguf_param_tensor(arch, specs[i].name, source, sizeof source);
        size_t used = strlen(buf);
        if (strcmp(source, name) == 0 && used < cap)
            snprintf(buf + used, cap - used, "%s%s", used ? " " : "", specs[i].name);
    }
}

static sp_status add_tensors(const sp_gguf *g, const sp_gguf_arch *arch, const sp_config *cfg, cJSON *tensors)
{
    sp_param_spec *specs = NULL;
    int n_specs = 0;
    SP_TRY(sp_param_layout(cfg, &specs, &n_specs));
    sp_real *buf = sp_malloc(SLAB_VALUES * sizeof *buf, "inspect slab");
    double *wide = sp_malloc(SLAB_VALUES * sizeof *wide, "inspect slab");
    sp_status status = buf && wide ? SP_OK : SP_ERR_NOMEM;
    char params[2048];
    for (int i = 0; i < sp_gguf_tensor_count(g) && status == SP_OK; i++) {
        const sp_gguf_tensor *t = sp_gguf_tensor_at(g, i);
        cJSON *item = cJSON_CreateObject();
        cJSON_AddItemToArray(tensors, item);
        cJSON_AddStringToObject(item, "name", t->name);
        cJSON *shape = cJSON_AddArrayToObject(item, "shape");
        for (int k = t->n_dims - 1; k >= 0; k--)
            cJSON_AddItemToArray(shape, sp_inspect_json_int(t->dims[k], 0));
        cJSON_AddStringToObject(item, "dtype", sp_ggml_type_name(t->type));
        cJSON_AddItemToObject(item, "bytes", sp_inspect_json_int((int64_t)t->nbytes, 0));
        cJSON *attrs = cJSON_AddObjectToObject(item, "attributes");
        params_of(arch, specs, n_specs, t->name, params, sizeof params);
        cJSON_AddStringToObject(attrs, "param", params);
        status = tensor_stats(t, buf, wide, item);
    }
    free(buf);
    free(wide);
    free(specs);
    return status;
}

/* A metadata value as text: scalars as they are, strings up to 200 bytes, arrays by type and count. */
static void value_text(const sp_gguf *g, int i, char *buf, size_t cap)
{
    const char *key = sp_gguf_kv_key(g, i);
    const sp_gguf_value_type type = sp_gguf_kv_type(g, i);
    const char *s;
    uint64_t u;
    int64_t v;
    double d;
    int b;
    sp_gguf_array a;
    if (type == SP_GGUF_STRING && sp_gguf_get_string(g, key, &s, NULL) == SP_OK)
        snprintf(buf, cap, "%.200s", s);
    else if (type == SP_GGUF_ARRAY && sp_gguf_get_array(g, key, &a) == SP_OK)
        snprintf(buf, cap, "[%zu x %s]", a.count, sp_gguf_value_type_name(a.type));
    else if ((type == SP_GGUF_FLOAT32 || type == SP_GGUF_FLOAT64) && sp_gguf_get_float(g, key, &d) == SP_OK)
        snprintf(buf, cap, "%.9g", d);
    else if (type == SP_GGUF_BOOL && sp_gguf_get_bool(g, key, &b) == SP_OK)
        snprintf(buf, cap, "%s", b ? "true" : "false");
    else if (sp_gguf_get_uint(g, key, &u) == SP_OK)
        snprintf(buf, cap, "%llu", (unsigned long long)u);
    else if (sp_gguf_get_int(g, key, &v) == SP_OK)
        snprintf(buf, cap, "%lld", (long long)v);
    else
        snprintf(buf, cap, "?");
    sp_error_clear();
}

static void add_metadata(const sp_gguf *g, cJSON *attrs)
{
    cJSON *group = cJSON_AddObjectToObject(attrs, "/gguf metadata");
    char value[256];
    for (int i = 0; i < sp_gguf_kv_count(g); i++) {
        value_text(g, i, value, sizeof value);
        cJSON_AddStringToObject(group, sp_gguf_kv_key(g, i), value);
    }
}

sp_status sp_inspect_collect_gguf(const char *path, cJSON **out)
{
    sp_ckpt_meta meta;
    SP_TRY(sp_gguf_model_read_meta(path, &meta)); /* validates as the commands do */
    sp_gguf *g = NULL;
    const sp_gguf_arch *arch = NULL;
    sp_config cfg;
    sp_status status = sp_gguf_open(path, &g);
    if (status == SP_OK)
        status = sp_gguf_config_read(g, path, &cfg, &arch);
    cJSON *doc = cJSON_CreateObject();
    char version[96], types[512];
    snprintf(version, sizeof version, "v%u %s", g ? sp_gguf_version(g) : 0, arch ? arch->arch : "?");
    cJSON_AddStringToObject(doc, "file", path);
    cJSON_AddStringToObject(doc, "format", "gguf");
    cJSON_AddStringToObject(doc, "format_version", version);
    cJSON *attrs = cJSON_AddObjectToObject(doc, "attributes");
    cJSON *root = cJSON_AddObjectToObject(attrs, "/");
    cJSON_AddStringToObject(root, "source", meta.source);
    cJSON_AddStringToObject(root, "tokenizer", meta.has_tokenizer ? "tokenizer.ggml.*" : "none");
    if (status == SP_OK) {
        sp_gguf_type_counts(g, types, sizeof types);
        cJSON_AddStringToObject(root, "tensor_types", types);
        add_metadata(g, attrs);
    }
    sp_inspect_add_config(&meta.cfg, attrs);
    cJSON *tensors = cJSON_AddArrayToObject(doc, "tensors");
    if (status == SP_OK)
        status = add_tensors(g, arch, &cfg, tensors);
    sp_gguf_close(g);
    sp_ckpt_meta_free(&meta);
    if (status != SP_OK) {
        cJSON_Delete(doc);
        return status;
    }
    *out = doc;
    return SP_OK;
}
