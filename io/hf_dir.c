#include "io/hf_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/sha256.h"
#include "io/hf_config.h"
#include "io/hf_tokenizer.h"
#include "io/param_fill.h"
#include "io/tensor_set.h"

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
static const sp_tensor_view *find_tensor(const sp_tensor_set *ts, const sp_hf_family *f, const char *name)
{
    const sp_tensor_view *t = sp_tensor_set_find(ts, name);
    size_t n = strlen(f->prefix);
    if (!t && strncmp(name, f->prefix, n) == 0)
        t = sp_tensor_set_find(ts, name + n);
    return t;
}

static sp_status read_zeros(const void *tensor, size_t first, size_t count, sp_real *dst)
{
    (void)tensor;
    (void)first;
    memset(dst, 0, count * sizeof *dst);
    return SP_OK;
}

/* Finds the tensor of spec and checks that its shape is what the config implies; a tensor the table
 * allows to be absent (nanoGPT's LayerNorms without bias) reads as zeros. */
static sp_status locate(const sp_hf_config *hc, const sp_tensor_set *ts, const sp_param_spec *spec, const char *where,
                        sp_param_source *ps)
{
    int layer;
    const sp_hf_tensor *entry = sp_hf_tensor_for(hc->family, spec->name, &layer);
    if (!entry)
        return sp_error(SP_ERR_INTERNAL, "%s: the import table has no tensor for parameter %s", hc->architecture,
                        spec->name);
    char name[256];
    snprintf(name, sizeof name, entry->tensor, layer);
    const sp_tensor_view *t = find_tensor(ts, hc->family, name);
    sp_tensor_view zeros = {.file = where, .name = name, .rank = spec->rank, .read = read_zeros};
    for (int i = 0; i < spec->rank; i++)
        zeros.shape[i] = spec->shape[i];
    if (!t && entry->zero_if_absent)
        t = &zeros;
    if (!t)
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s' is missing (the config implies it: spanprobe parameter %s)",
                        where, name, spec->name);
    const sp_param_layout_rules rules = {hc->family->rope_half_split, hc->family->gain_offset,
                                         sp_hf_config_name(hc->family), hc->architecture};
    return sp_param_source_init(ps, entry, t, &hc->cfg, spec, &rules);
}

/* ---- the parameters from the tensors ---- */

typedef struct {
    sp_param_spec *specs;
    int n_params;
    sp_param_source *sources;
} hf_plan;

static void plan_free(hf_plan *p)
{
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

/* Every stored tensor is a parameter, a known buffer, or the stored copy of a tied head. */
static sp_status check_all_used(const sp_hf_config *hc, const sp_tensor_set *ts, const hf_plan *p, const char *where)
{
    const int n = sp_tensor_set_count(ts);
    unsigned char *used = sp_calloc((size_t)n + 1, 1, "tensor use flags");
    if (!used)
        return SP_ERR_NOMEM;
    for (int i = 0; i < p->n_params; i++)
        for (int j = 0; j < n; j++)
            if (sp_tensor_set_at(ts, j)->tensor == p->sources[i].src.tensor)
                used[j] = 1;
    sp_status st = SP_OK;
    for (int j = 0; j < n && st == SP_OK; j++) {
        const char *name = sp_tensor_set_at(ts, j)->name;
        int tied_head = hc->cfg.tie_embeddings && strstr(name, "lm_head.weight") != NULL;
        if (!used[j] && !tied_head && !is_buffer(hc->family, name))
            st = sp_error(SP_ERR_INPUT, "%s: tensor '%s' is not a parameter of %s with this %s (a feature spanprobe "
                                        "does not implement, or a config that contradicts the weights)",
                          where, name, hc->architecture, sp_hf_config_name(hc->family));
    }
    free(used);
    return st;
}

static sp_status plan_make(const sp_hf_config *hc, const sp_tensor_set *ts, const char *where, hf_plan *p)
{
    memset(p, 0, sizeof *p);
    SP_TRY(sp_param_layout(&hc->cfg, &p->specs, &p->n_params));
    p->sources = sp_calloc((size_t)p->n_params, sizeof *p->sources, "import plan");
    if (!p->sources)
        return SP_ERR_NOMEM;
    for (int i = 0; i < p->n_params; i++)
        SP_TRY(locate(hc, ts, &p->specs[i], where, &p->sources[i]));
    return check_all_used(hc, ts, p, where);
}

sp_status sp_hf_check_tensors(const sp_hf_config *hc, const sp_tensor_set *ts, const char *where)
{
    hf_plan p;
    sp_status st = plan_make(hc, ts, where, &p);
    plan_free(&p);
    return st;
}

sp_status sp_hf_model_from_tensors(const sp_hf_config *hc, const sp_tensor_set *ts, const char *where,
                                   const sp_backend *be, sp_model **model)
{
    *model = NULL;
    hf_plan p;
    sp_status st = plan_make(hc, ts, where, &p);
    if (st == SP_OK)
        st = sp_param_model_create(&hc->cfg, be, p.specs, p.sources, p.n_params, model);
    plan_free(&p);
    return st;
}

/* ---- the whole directory ---- */

typedef struct {
    sp_hf_config hc;
    sp_tensor_set *ts;
} hf_dir;

sp_status sp_hf_dir_open(const char *dir, sp_hf_config *hc, sp_tensor_set **ts)
{
    *ts = NULL;
    char path[HF_PATH_MAX];
    join(path, dir, "config.json");
    SP_TRY(sp_hf_config_read(path, hc));
    return sp_tensor_set_open_dir(dir, ts);
}

static sp_status dir_open(const char *dir, hf_dir *d)
{
    return sp_hf_dir_open(dir, &d->hc, &d->ts);
}

/* "import hf DIR (config.json sha256 ..., N tensors, B bytes)" */
static sp_status describe_source(const char *dir, const hf_dir *d, char *buf, size_t cap)
{
    char path[HF_PATH_MAX], hex[65];
    int64_t n_bytes = 0;
    join(path, dir, "config.json");
    SP_TRY(sp_sha256_file(path, hex, &n_bytes));
    snprintf(buf, cap, "import hf %s (%s, config.json sha256 %s, %d tensors, %zu bytes of weights)", dir,
             d->hc.architecture, hex, sp_tensor_set_count(d->ts), sp_tensor_set_bytes(d->ts));
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

static sp_status fill_meta(const char *dir, const hf_dir *d, sp_ckpt_meta *meta)
{
    meta->cfg = d->hc.cfg;
    SP_TRY(describe_source(dir, d, meta->source, sizeof meta->source));
    return read_tokenizer(dir, &meta->cfg, meta);
}

sp_status sp_hf_read_meta(const char *dir, sp_ckpt_meta *meta)
{
    sp_ckpt_meta_init(meta);
    hf_dir d;
    sp_status st = dir_open(dir, &d);
    if (st == SP_OK)
        st = sp_hf_check_tensors(&d.hc, d.ts, dir);
    if (st == SP_OK)
        st = fill_meta(dir, &d, meta);
    sp_tensor_set_close(d.ts);
    if (st != SP_OK)
        sp_ckpt_meta_free(meta);
    return st;
}

sp_status sp_hf_load(const char *dir, const sp_backend *be, sp_model **model, sp_ckpt_meta *meta)
{
    *model = NULL;
    sp_ckpt_meta_init(meta);
    hf_dir d;
    sp_status st = dir_open(dir, &d);
    if (st == SP_OK)
        st = sp_hf_check_tensors(&d.hc, d.ts, dir);
    if (st == SP_OK)
        st = fill_meta(dir, &d, meta);
    if (st == SP_OK)
        st = sp_hf_model_from_tensors(&d.hc, d.ts, dir, be, model);
    sp_tensor_set_close(d.ts);
    if (st != SP_OK)
        sp_ckpt_meta_free(meta);
    return st;
}
