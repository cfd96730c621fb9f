#include "io/hf_dir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/sha256.h"
#include "io/hf_config.h"
#include "io/hf_tokenizer.h"
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

/* Hugging Face rotates pairs (i, i + r/2) of a head's first r dims, spanprobe pairs (2i, 2i + 1):
 * spanprobe's row i within a head is Hugging Face's row perm(i). */
static int64_t rope_row(int64_t i, int64_t rot)
{
    if (i >= rot)
        return i;
    return i % 2 == 0 ? i / 2 : i / 2 + rot / 2;
}

typedef struct {
    const sp_hf_tensor *entry;
    const sp_st_tensor *src;
    int64_t rows, cols;   /* of the spanprobe parameter ([dim, 1] for vectors) */
    int64_t head_dim, rot; /* rot 0: rows are not reordered */
    sp_real gain_offset;   /* added to a norm gain's values */
} param_source;

static int64_t source_row(const param_source *ps, int64_t r)
{
    const sp_hf_tensor *e = ps->entry;
    if (ps->rot)
        r = r / ps->head_dim * ps->head_dim + rope_row(r % ps->head_dim, ps->rot);
    switch (e->rows) {
    case SP_HF_ROWS_PLAIN: break;
    case SP_HF_ROWS_PART: return e->part * ps->rows + r;
    case SP_HF_ROWS_NEOX_QKV: return r / ps->head_dim * 3 * ps->head_dim + e->part * ps->head_dim + r % ps->head_dim;
    }
    return r;
}

static void shape_text(const int64_t *shape, int rank, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
}

/* Finds the tensor of spec and checks that its shape is what the config implies. */
static sp_status locate(const sp_hf_config *hc, const sp_st_archive *st, const sp_param_spec *spec, const char *dir,
                        param_source *ps)
{
    const sp_config *cfg = &hc->cfg;
    int layer;
    ps->entry = sp_hf_tensor_for(hc->family, spec->name, &layer);
    if (!ps->entry)
        return sp_error(SP_ERR_INTERNAL, "%s: the import table has no tensor for parameter %s", hc->architecture,
                        spec->name);
    char name[256];
    snprintf(name, sizeof name, ps->entry->tensor, layer);
    ps->src = find_tensor(st, hc->family, name);
    if (!ps->src)
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s' is missing (config.json implies it: spanprobe parameter %s)",
                        dir, name, spec->name);
    ps->rows = spec->shape[0];
    ps->cols = spec->rank == 2 ? spec->shape[1] : 1;
    ps->head_dim = sp_config_head_dim(cfg);
    ps->rot = ps->entry->rope_rows && hc->family->rope_half_split ? sp_config_rope_dims(cfg) : 0;
    ps->gain_offset = (sp_real)hc->family->gain_offset;
    if (ps->entry->transposed && (ps->entry->rows == SP_HF_ROWS_NEOX_QKV || ps->rot))
        return sp_error(SP_ERR_INTERNAL, "%s: the import table transposes parameter %s and interleaves its rows",
                        hc->architecture, spec->name);
    const int64_t total = ps->entry->rows == SP_HF_ROWS_PLAIN ? ps->rows : 3 * ps->rows;
    int64_t want[2] = {total, ps->cols};
    if (ps->entry->transposed) {
        want[0] = ps->cols;
        want[1] = total;
    }
    const int rank = spec->rank;
    int same = ps->src->rank == rank;
    for (int i = 0; same && i < rank; i++)
        same = ps->src->shape[i] == want[i];
    if (!same) {
        char found[128], expected[128];
        shape_text(ps->src->shape, ps->src->rank, found, sizeof found);
        shape_text(want, rank, expected, sizeof expected);
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s' is %s but config.json implies %s (spanprobe parameter %s)",
                        ps->src->file, ps->src->name, found, expected, spec->name);
    }
    return SP_OK;
}

/* Values are converted in chunks that stay in cache for the checks that follow. */
#define CHUNK_ELEMS 16384

/* `count` elements of the tensor from element `first` into dst, with the norm-gain offset added; *bad
 * counts the NaN/Inf values among them. */
static sp_status read_checked(const param_source *ps, size_t first, size_t count, sp_real *dst, size_t *bad)
{
    size_t non_finite = 0;
    for (size_t done = 0; done < count;) {
        const size_t n = count - done < CHUNK_ELEMS ? count - done : CHUNK_ELEMS;
        sp_real *out = dst + done;
        SP_TRY(sp_st_read(ps->src, first + done, n, out));
        if (ps->entry->norm_gain)
            for (size_t i = 0; i < n; i++)
                out[i] += ps->gain_offset;
        for (size_t i = 0; i < n; i++)
            non_finite += !isfinite(out[i]);
        done += n;
    }
    *bad += non_finite;
    return SP_OK;
}

/* Rows stored as rows: each run of consecutive source rows is one read (the whole tensor when no row
 * is reordered). */
static sp_status fill_rows(const param_source *ps, sp_real *dst, size_t *bad)
{
    for (int64_t r = 0; r < ps->rows;) {
        const int64_t first = source_row(ps, r);
        int64_t n = 1;
        while (r + n < ps->rows && source_row(ps, r + n) == first + n)
            n++;
        SP_TRY(read_checked(ps, (size_t)(first * ps->cols), (size_t)(n * ps->cols), dst + r * ps->cols, bad));
        r += n;
    }
    return SP_OK;
}

/* A stored [cols, rows] tensor (Conv1D) holds the parameter's columns as its rows. It is copied in
 * tiles: TILE_ROWS values of TILE_COLS stored rows are read into a buffer that stays in cache, then
 * written out a parameter row at a time, every write a contiguous run of TILE_COLS values. The
 * buffer's rows are padded: with lengths of 2^k floats they would all fall into the same cache sets. */
#define TILE_COLS 64
#define TILE_ROWS 256
#define TILE_STRIDE (TILE_ROWS + 16)

static sp_status fill_transposed(const param_source *ps, sp_real *dst, size_t *bad)
{
    const int64_t stored_row = ps->src->shape[1], first = source_row(ps, 0); /* rows consecutive (locate) */
    sp_real *tile = sp_malloc(TILE_COLS * TILE_STRIDE * sizeof *tile, "transpose tile");
    if (!tile)
        return SP_ERR_NOMEM;
    sp_status st = SP_OK;
    for (int64_t r0 = 0; r0 < ps->rows && st == SP_OK; r0 += TILE_ROWS) {
        const int64_t nr = ps->rows - r0 < TILE_ROWS ? ps->rows - r0 : TILE_ROWS;
        for (int64_t c0 = 0; c0 < ps->cols && st == SP_OK; c0 += TILE_COLS) {
            const int64_t nc = ps->cols - c0 < TILE_COLS ? ps->cols - c0 : TILE_COLS;
            for (int64_t j = 0; j < nc && st == SP_OK; j++)
                st = read_checked(ps, (size_t)((c0 + j) * stored_row + first + r0), (size_t)nr,
                                  tile + j * TILE_STRIDE, bad);
            for (int64_t r = 0; st == SP_OK && r < nr; r++) {
                sp_real *to = dst + (r0 + r) * ps->cols + c0;
                for (int64_t j = 0; j < nc; j++)
                    to[j] = tile[j * TILE_STRIDE + r];
            }
        }
    }
    free(tile);
    return st;
}

/* The parameter's values, in spanprobe's layout, into dst [rows * cols]; NaN/Inf are an error. */
static sp_status fill(const param_source *ps, const char *param, sp_real *dst)
{
    size_t bad = 0;
    SP_TRY(ps->entry->transposed ? fill_transposed(ps, dst, &bad) : fill_rows(ps, dst, &bad));
    if (bad)
        return sp_error(SP_ERR_NUMERIC, "%s: tensor '%s' (spanprobe parameter %s) holds %zu NaN/Inf values",
                        ps->src->file, ps->src->name, param, bad);
    return SP_OK;
}

/* ---- the whole directory ---- */

typedef struct {
    sp_hf_config hc;
    sp_st_archive *st;
    sp_param_spec *specs;
    int n_params;
    param_source *sources;
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
            if (sp_st_at(p->st, j) == p->sources[i].src)
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

/* Fills every parameter. On the CPU backend parameters are host memory and are written in place;
 * elsewhere one parameter at a time goes through a host buffer. */
static sp_status load_params(const hf_plan *p, sp_model *m)
{
    const int in_place = sp_model_backend(m) == sp_backend_cpu();
    sp_real *scratch = NULL;
    size_t scratch_len = 0;
    sp_status st = SP_OK;
    for (int i = 0; i < p->n_params && st == SP_OK; i++) {
        const size_t n = sp_param_numel(&p->specs[i]);
        sp_real *dst = in_place ? sp_model_param(m, i) : NULL;
        if (!in_place && n > scratch_len) {
            free(scratch);
            scratch_len = n;
            if (!(scratch = sp_malloc(n * sizeof *scratch, "parameter upload buffer")))
                return SP_ERR_NOMEM;
        }
        if (!dst)
            dst = scratch;
        st = fill(&p->sources[i], p->specs[i].name, dst);
        sp_st_release(p->sources[i].src); /* read: out of resident memory (q, k, v of a fused tensor map it again) */
        if (st == SP_OK && !in_place)
            sp_model_set_param(m, i, dst);
    }
    free(scratch);
    return st;
}

sp_status sp_hf_load(const char *dir, const sp_backend *be, sp_model **model, sp_ckpt_meta *meta)
{
    *model = NULL;
    sp_ckpt_meta_init(meta);
    hf_plan p;
    sp_model *m = NULL;
    sp_status st = plan_open(dir, &p);
    if (st == SP_OK)
        st = fill_meta(dir, &p, meta);
    if (st == SP_OK)
        st = sp_model_create(&p.hc.cfg, be, &m);
    if (st == SP_OK)
        st = load_params(&p, m);
    if (st == SP_OK)
        st = sp_model_sync(m);
    plan_free(&p);
    if (st != SP_OK) {
        sp_model_free(m);
        sp_ckpt_meta_free(meta);
        return st;
    }
    *model = m;
    return SP_OK;
}
