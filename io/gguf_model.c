#include "io/gguf_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/input_file.h"
#include "core/sha256.h"
#include "io/gguf_config.h"
#include "io/gguf_tokenizer.h"
#include "io/param_fill.h"

int sp_gguf_is_model_file(const char *path)
{
    FILE *f = NULL;
    if (sp_file_open_regular(path, &f, NULL) != SP_OK) {
        sp_error_clear(); /* a question, not a failure */
        return 0;
    }
    char magic[4] = {0};
    int is = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    if (f)
        fclose(f);
    return is;
}

void sp_gguf_param_tensor(const sp_gguf_arch *arch, const char *param, char *name, size_t cap)
{
    int layer;
    const sp_hf_tensor *t = sp_hf_tensor_in(arch->tensors, param, &layer);
    snprintf(name, cap, t ? t->tensor : "", layer);
}

/* Elements [first, first + count) of a GGUF tensor: whole rows are dequantized in place, a partial
 * row (a reordered part of a vector) through a row buffer. */
static sp_status gguf_read(const void *tensor, size_t first, size_t count, sp_real *dst)
{
    const sp_gguf_tensor *t = tensor;
    const size_t row = (size_t)t->dims[0];
    sp_real *tmp = NULL;
    sp_status st = SP_OK;
    while (count > 0 && st == SP_OK) {
        const size_t r = first / row, off = first % row;
        size_t n;
        if (off == 0 && count >= row) {
            n = count / row * row;
            st = sp_gguf_read_rows(t, r, n / row, dst);
        } else {
            n = row - off < count ? row - off : count;
            if (!tmp && !(tmp = sp_malloc(row * sizeof *tmp, "GGUF row buffer")))
                return SP_ERR_NOMEM;
            st = sp_gguf_read_rows(t, r, 1, tmp);
            memcpy(dst, tmp + off, n * sizeof *tmp);
        }
        first += n;
        count -= n;
        dst += n;
    }
    free(tmp);
    return st;
}

typedef struct {
    sp_gguf *g;
    const sp_gguf_arch *arch;
    sp_config cfg;
    sp_param_spec *specs;
    int n_params;
    sp_param_source *sources;
} gguf_plan;

static void plan_free(gguf_plan *p)
{
    sp_gguf_close(p->g);
    free(p->specs);
    free(p->sources);
}

/* Finds the tensor of spec and checks its type and shape. */
static sp_status locate(const gguf_plan *p, const sp_param_spec *spec, const char *path, sp_param_source *ps)
{
    int layer;
    const sp_hf_tensor *entry = sp_hf_tensor_in(p->arch->tensors, spec->name, &layer);
    if (!entry)
        return sp_error(SP_ERR_INTERNAL, "%s: the GGUF table has no tensor for parameter %s", p->arch->arch,
                        spec->name);
    char name[128];
    snprintf(name, sizeof name, entry->tensor, layer);
    const sp_gguf_tensor *t = sp_gguf_find(p->g, name);
    if (!t)
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s' is missing (the metadata implies it: spanprobe parameter %s)",
                        path, name, spec->name);
    if (!sp_ggml_type_is_readable(t->type))
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s' has type %s, which spanprobe cannot read (supported: F32, F16, "
                                      "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)",
                        path, name, sp_ggml_type_name(t->type));
    sp_tensor_view view = {.file = path, .name = t->name, .rank = t->n_dims, .tensor = t, .read = gguf_read};
    for (int i = 0; i < t->n_dims; i++) /* ggml lists the fastest-varying dimension first */
        view.shape[i] = t->dims[t->n_dims - 1 - i];
    const sp_param_layout_rules rules = {p->arch->rope_neox, 0.0, "the GGUF metadata", p->arch->arch};
    return sp_param_source_init(ps, entry, &view, &p->cfg, spec, &rules);
}

/* Every tensor of the file is some parameter's source. */
static sp_status check_all_used(const gguf_plan *p, const char *path)
{
    const int n = sp_gguf_tensor_count(p->g);
    for (int j = 0; j < n; j++) {
        const sp_gguf_tensor *t = sp_gguf_tensor_at(p->g, j);
        int used = 0;
        for (int i = 0; i < p->n_params && !used; i++)
            used = p->sources[i].src.tensor == t;
        if (!used)
            return sp_error(SP_ERR_INPUT, "%s: tensor '%s' is not a parameter of %s with this metadata (a feature "
                                          "spanprobe does not implement, or metadata that contradicts the tensors)",
                            path, t->name, p->arch->arch);
    }
    return SP_OK;
}

static sp_status plan_open(const char *path, gguf_plan *p)
{
    memset(p, 0, sizeof *p);
    SP_TRY(sp_gguf_open(path, &p->g));
    SP_TRY(sp_gguf_config_read(p->g, path, &p->cfg, &p->arch));
    /* every block has tensors: a block count beyond the tensor count is a lying header, refused before
     * the parameter layout is sized by it */
    if (p->cfg.n_layers > sp_gguf_tensor_count(p->g))
        return sp_error(SP_ERR_INPUT, "%s: %s.block_count = %d but the file holds %d tensors", path, p->arch->arch,
                        p->cfg.n_layers, sp_gguf_tensor_count(p->g));
    SP_TRY(sp_param_layout(&p->cfg, &p->specs, &p->n_params));
    p->sources = sp_calloc((size_t)p->n_params, sizeof *p->sources, "import plan");
    if (!p->sources)
        return SP_ERR_NOMEM;
    for (int i = 0; i < p->n_params; i++)
        SP_TRY(locate(p, &p->specs[i], path, &p->sources[i]));
    return check_all_used(p, path);
}

void sp_gguf_type_counts(const sp_gguf *g, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int type = 0; type < SP_GGML_N_TYPES && used < cap; type++) {
        int count = 0;
        for (int j = 0; j < sp_gguf_tensor_count(g); j++)
            count += (int)sp_gguf_tensor_at(g, j)->type == type;
        if (count)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s x%d", used ? ", " : "",
                                     sp_ggml_type_name((sp_ggml_type)type), count);
    }
}

/* "import gguf FILE (llama, B bytes, sha256 HEX, N tensors: F32 x5, Q4_K x7)" */
static sp_status describe_source(const char *path, const gguf_plan *p, char *buf, size_t cap)
{
    char hex[65], types[512];
    int64_t n_bytes = 0;
    SP_TRY(sp_sha256_file(path, hex, &n_bytes));
    sp_gguf_type_counts(p->g, types, sizeof types);
    int n = snprintf(buf, cap, "import gguf %s (%s, %lld bytes, sha256 %s, %d tensors: ", path, p->arch->arch,
                     (long long)n_bytes, hex, sp_gguf_tensor_count(p->g));
    if (n > 0 && (size_t)n + 2 <= cap) /* the type list is cut where the provenance field ends */
        snprintf(buf + n, cap - (size_t)n, "%.*s)", (int)(cap - (size_t)n - 2), types);
    return SP_OK;
}

static sp_status fill_meta(const char *path, const gguf_plan *p, sp_ckpt_meta *meta)
{
    meta->cfg = p->cfg;
    SP_TRY(describe_source(path, p, meta->source, sizeof meta->source));
    if (!sp_gguf_has_tokenizer(p->g))
        return SP_OK;
    SP_TRY(sp_tokenizer_load_gguf(p->g, path, p->cfg.vocab_size, &meta->tokenizer));
    meta->has_tokenizer = 1;
    return SP_OK;
}

sp_status sp_gguf_model_read_meta(const char *path, sp_ckpt_meta *meta)
{
    sp_ckpt_meta_init(meta);
    gguf_plan p;
    sp_status st = plan_open(path, &p);
    if (st == SP_OK)
        st = fill_meta(path, &p, meta);
    plan_free(&p);
    if (st != SP_OK)
        sp_ckpt_meta_free(meta);
    return st;
}

sp_status sp_gguf_model_load(const char *path, const sp_backend *be, sp_model **model, sp_ckpt_meta *meta)
{
    *model = NULL;
    sp_ckpt_meta_init(meta);
    gguf_plan p;
    sp_status st = plan_open(path, &p);
    if (st == SP_OK)
        st = fill_meta(path, &p, meta);
    if (st == SP_OK)
        st = sp_param_model_create(&p.cfg, be, p.specs, p.sources, p.n_params, model);
    plan_free(&p);
    if (st != SP_OK)
        sp_ckpt_meta_free(meta);
    return st;
}
