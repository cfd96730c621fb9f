#include "io/hf_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/sha256.h"
#include "io/hf_config.h"
#include "io/hf_tokenizer.h"
#include "io/param_fill.h"
#include "io/safetensors.h"

#define HF_PATH_MAX 4096

static void join(char *out, const char *dir, const char *file)
{
    snprintf(out, HF_PATH_MAX, "%s/%s", dir, file);
}

static int is_regular(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

int sp_hf_is_model_dir(const char *path)
{
    struct stat sb;
    char config[HF_PATH_MAX];
    join(config, path, "config.json");
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && is_regular(config);
}

/* ---- which tensor, which rows ---- */

sp_status sp_hf_param_tensor(const sp_hf_config *hc, const char *param, char *name, size_t cap)
{
    int layer;
    const sp_hf_tensor *t = sp_hf_tensor_for(hc->family, param, &layer);
    if (!t)
        return sp_error(SP_ERR_INTERNAL, "%s: the import table has no tensor for parameter %s", hc->architecture, param);
    snprintf(name, cap, t->tensor, layer);
    return SP_OK;
}

/* The tensor by name, also under the name without the family's prefix (older checkpoints). */
static const sp_st_tensor *find_tensor(const sp_st_archive *st, const sp_hf_family *f, const char *name)
{
    const sp_st_tensor *t = sp_st_find(st, name);
    size_t n = strlen(f->prefix);
    if (!t && strncmp(name, f->prefix, n) == 0)
        t = sp_st_find(st, name + n);
    return t;
}

static sp_status st_read(const void *tensor, size_t first, size_t count, sp_real *dst)
{
    return sp_st_read(tensor, first, count, dst);
}

static void st_release(const void *tensor)
{
    sp_st_release(tensor);
}

/* Finds the tensor of spec and checks that its shape is what the config implies. */
static sp_status locate(const sp_hf_config *hc, const sp_st_archive *st, const sp_param_spec *spec, const char *dir,
                        sp_param_source *ps)
{
    int layer;
    const sp_hf_tensor *entry = sp_hf_tensor_for(hc->family, spec->name, &layer);
    if (!entry)
        return sp_error(SP_ERR_INTERNAL, "%s: the import table has no tensor for parameter %s", hc->architecture,
                        spec->name);
    char name[256];
    snprintf(name, sizeof name, entry->tensor, layer);
    const sp_st_tensor *t = find_tensor(st, hc->family, name);
    if (!t)
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s' is missing (config.json implies it: spanprobe parameter %s)",
                        dir, name, spec->name);
    sp_tensor_view view = {.file = t->file, .name = t->name, .rank = t->rank, .tensor = t, .read = st_read,
                           .release = st_release};
    for (int i = 0; i < t->rank; i++)
        view.shape[i] = t->shape[i];
    const sp_param_layout_rules rules = {hc->family->rope_half_split, hc->family->gain_offset, "config.json",
                                         hc->architecture};
    return sp_param_source_init(ps, entry, &view, &hc->cfg, spec, &rules);
}

/* ---- the whole directory ---- */

typedef struct {
    sp_hf_config hc;
    sp_st_archive *st;
    sp_param_spec *specs;
    int n_params;
    sp_param_source *sources;
} hf_plan;

static void plan_free(hf_plan *p)
{
    sp_st_close(p->st);
    free(p->specs);
    free(p->sources);
}

static int is_buffer(const sp_hf_family *f, const char *name)
{
    const size_t len = strlen(name);
    for (const char *const *b = f->ignored; *b; b++) {
        size_t n = strlen(*b);
        if (len >= n && strcmp(name + len - n, *b) == 0)
            return 1;
    }
    return 0;
}

/* Every tensor of the files is a parameter, a known buffer, or the stored copy of a tied head. */
static sp_status check_all_used(const hf_plan *p, const char *dir)
{
    const int n = sp_st_count(p->st);
    unsigned char *used = sp_calloc((size_t)n + 1, 1, "tensor use flags");
    if (!used)
        return SP_ERR_NOMEM;
    for (int i = 0; i < p->n_params; i++)
        for (int j = 0; j < n; j++)
            if (sp_st_at(p->st, j) == p->sources[i].src.tensor)
                used[j] = 1;
    sp_status st = SP_OK;
    for (int j = 0; j < n && st == SP_OK; j++) {
        const char *name = sp_st_at(p->st, j)->name;
        int tied_head = p->hc.cfg.tie_embeddings && strstr(name, "lm_head.weight") != NULL;
        if (!used[j] && !tied_head && !is_buffer(p->hc.family, name))
            st = sp_error(SP_ERR_INPUT, "%s: tensor '%s' is not a parameter of %s with this config.json (a feature "
                                        "spanprobe does not implement, or a config that contradicts the weights)",
                          dir, name, p->hc.architecture);
    }
    free(used);
    return st;
}

static sp_status plan_open(const char *dir, hf_plan *p)
{
    memset(p, 0, sizeof *p);
    char path[HF_PATH_MAX];
    join(path, dir, "config.json");
    SP_TRY(sp_hf_config_read(path, &p->hc));
    SP_TRY(sp_st_open(dir, &p->st));
    SP_TRY(sp_param_layout(&p->hc.cfg, &p->specs, &p->n_params));
    p->sources = sp_calloc((size_t)p->n_params, sizeof *p->sources, "import plan");
    if (!p->sources)
        return SP_ERR_NOMEM;
    for (int i = 0; i < p->n_params; i++)
        SP_TRY(locate(&p->hc, p->st, &p->specs[i], dir, &p->sources[i]));
    return check_all_used(p, dir);
}

/* "import hf DIR (config.json sha256 ..., N tensors, B bytes)" */
static sp_status describe_source(const char *dir, const hf_plan *p, char *buf, size_t cap)
{
    char path[HF_PATH_MAX], hex[65];
    int64_t n_bytes = 0;
    join(path, dir, "config.json");
    SP_TRY(sp_sha256_file(path, hex, &n_bytes));
    snprintf(buf, cap, "import hf %s (%s, config.json sha256 %s, %d tensors, %zu bytes of weights)", dir,
             p->hc.architecture, hex, p->st ? sp_st_count(p->st) : 0, p->st ? sp_st_total_bytes(p->st) : 0);
    return SP_OK;
}

static sp_status read_tokenizer(const char *dir, const sp_config *cfg, sp_ckpt_meta *meta)
{
    char json[HF_PATH_MAX], config[HF_PATH_MAX];
    join(json, dir, "tokenizer.json");
    join(config, dir, "tokenizer_config.json");
    if (!is_regular(json))
        return SP_OK;
    SP_TRY(sp_tokenizer_load_hf(json, is_regular(config) ? config : NULL, cfg->vocab_size, &meta->tokenizer));
    meta->has_tokenizer = 1;
    return SP_OK;
}

static sp_status fill_meta(const char *dir, const hf_plan *p, sp_ckpt_meta *meta)
{
    meta->cfg = p->hc.cfg;
    SP_TRY(describe_source(dir, p, meta->source, sizeof meta->source));
    return read_tokenizer(dir, &meta->cfg, meta);
}

sp_status sp_hf_read_meta(const char *dir, sp_ckpt_meta *meta)
{
    sp_ckpt_meta_init(meta);
    hf_plan p;
    sp_status st = plan_open(dir, &p);
    if (st == SP_OK)
        st = fill_meta(dir, &p, meta);
    plan_free(&p);
    if (st != SP_OK)
        sp_ckpt_meta_free(meta);
    return st;
}

sp_status sp_hf_load(const char *dir, const sp_backend *be, sp_model **model, sp_ckpt_meta *meta)
{
    *model = NULL;
    sp_ckpt_meta_init(meta);
    hf_plan p;
    sp_status st = plan_open(dir, &p);
    if (st == SP_OK)
        st = fill_meta(dir, &p, meta);
    if (st == SP_OK)
        st = sp_param_model_create(&p.hc.cfg, be, p.specs, p.sources, p.n_params, model);
    plan_free(&p);
    if (st != SP_OK)
        sp_ckpt_meta_free(meta);
    return st;
}
