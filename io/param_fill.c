#include "io/param_fill.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Hugging Face rotates pairs (i, i + r/2) of a head's first r dims, spanprobe pairs (2i, 2i + 1):
 * spanprobe's row i within a head is the stored row perm(i). */
static int64_t rope_row(int64_t i, int64_t rot)
{
    if (i >= rot)
        return i;
    return i % 2 == 0 ? i / 2 : i / 2 + rot / 2;
}

static int64_t source_row(const sp_param_source *ps, int64_t r)
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

sp_status sp_param_source_init(sp_param_source *ps, const sp_hf_tensor *entry, const sp_tensor_view *src,
                               const sp_config *cfg, const sp_param_spec *spec, const sp_param_layout_rules *rules)
{
    ps->entry = entry;
    ps->src = *src;
    ps->rows = spec->shape[0];
    ps->cols = spec->rank == 2 ? spec->shape[1] : 1;
    ps->head_dim = sp_config_head_dim(cfg);
    ps->rot = entry->rope_rows && rules->rope_half_split ? sp_config_rope_dims(cfg) : 0;
    ps->gain_offset = (sp_real)rules->gain_offset;
    if (entry->transposed && (entry->rows == SP_HF_ROWS_NEOX_QKV || ps->rot))
        return sp_error(SP_ERR_INTERNAL, "%s: the import table transposes parameter %s and interleaves its rows",
                        rules->arch, spec->name);
    const int64_t total = entry->rows == SP_HF_ROWS_PLAIN ? ps->rows : 3 * ps->rows;
    int64_t want[2] = {total, ps->cols};
    if (entry->transposed) {
        want[0] = ps->cols;
        want[1] = total;
    }
    const int rank = spec->rank;
    int same = src->rank == rank;
    for (int i = 0; same && i < rank; i++)
        same = src->shape[i] == want[i];
    if (!same) {
        char found[128], expected[128];
        shape_text(src->shape, src->rank, found, sizeof found);
        shape_text(want, rank, expected, sizeof expected);
        return sp_error(SP_ERR_INPUT, "%s: tensor '%s' is %s but %s implies %s (spanprobe parameter %s)", src->file,
                        src->name, found, rules->implied_by, expected, spec->name);
    }
    return SP_OK;
}

/* Values are converted in chunks of whole rows that stay in cache for the checks that follow. */
#define CHUNK_ELEMS 16384

/* `count` elements of the tensor from element `first` into dst, with the norm-gain offset added; *bad
 * counts the NaN/Inf values among them. Chunks hold whole rows of `row` elements. */
static sp_status read_checked(const sp_param_source *ps, size_t first, size_t count, size_t row, sp_real *dst,
                              size_t *bad)
{
    const size_t chunk = row >= CHUNK_ELEMS ? row : CHUNK_ELEMS / row * row;
    size_t non_finite = 0;
    for (size_t done = 0; done < count;) {
        const size_t n = count - done < chunk ? count - done : chunk;
        sp_real *out = dst + done;
        SP_TRY(ps->src.read(ps->src.tensor, first + done, n, out));
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
static sp_status fill_rows(const sp_param_source *ps, sp_real *dst, size_t *bad)
{
    for (int64_t r = 0; r < ps->rows;) {
        const int64_t first = source_row(ps, r);
        int64_t n = 1;
        while (r + n < ps->rows && source_row(ps, r + n) == first + n)
            n++;
        SP_TRY(read_checked(ps, (size_t)(first * ps->cols), (size_t)(n * ps->cols), (size_t)ps->cols,
                            dst + r * ps->cols, bad));
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

static sp_status fill_transposed(const sp_param_source *ps, sp_real *dst, size_t *bad)
{
    const int64_t stored_row = ps->src.shape[1], first = source_row(ps, 0); /* rows consecutive (init) */
    sp_real *tile = sp_malloc(TILE_COLS * TILE_STRIDE * sizeof *tile, "transpose tile");
    if (!tile)
        return SP_ERR_NOMEM;
    sp_status st = SP_OK;
    for (int64_t r0 = 0; r0 < ps->rows && st == SP_OK; r0 += TILE_ROWS) {
        const int64_t nr = ps->rows - r0 < TILE_ROWS ? ps->rows - r0 : TILE_ROWS;
        for (int64_t c0 = 0; c0 < ps->cols && st == SP_OK; c0 += TILE_COLS) {
            const int64_t nc = ps->cols - c0 < TILE_COLS ? ps->cols - c0 : TILE_COLS;
            for (int64_t j = 0; j < nc && st == SP_OK; j++)
                st = read_checked(ps, (size_t)((c0 + j) * stored_row + first + r0), (size_t)nr, (size_t)nr,
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
static sp_status fill(const sp_param_source *ps, const char *param, sp_real *dst)
{
    size_t bad = 0;
    SP_TRY(ps->entry->transposed ? fill_transposed(ps, dst, &bad) : fill_rows(ps, dst, &bad));
    if (bad)
        return sp_error(SP_ERR_NUMERIC, "%s: tensor '%s' (spanprobe parameter %s) holds %zu NaN/Inf values",
                        ps->src.file, ps->src.name, param, bad);
    return SP_OK;
}

static void release(const sp_param_source *ps)
{
    if (ps->src.release) /* read: out of resident memory (q, k, v of a fused tensor map it again) */
        ps->src.release(ps->src.tensor);
}

/* On the CPU backend parameters are host memory, written in place, several at a time: converting
 * them costs about what reading the file does, and half of it is the page faults of the fresh
 * model memory, which both cores take in parallel (docs/benchmarks.md, "Hugging Face models").
 * Largest first, so the cores finish together. Errors are thread-local (core/common.h): a worker's
 * message is carried back, and of several failures that of the first parameter is reported. */
static sp_status fill_in_place(sp_model *m, const sp_param_spec *specs, const sp_param_source *sources, int n)
{
    int *order = sp_malloc((size_t)(n > 0 ? n : 1) * sizeof *order, "parameter order");
    if (!order)
        return SP_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        int j = i; /* insertion sort by size, descending: n is a few hundred */
        for (; j > 0 && sp_param_numel(&specs[order[j - 1]]) < sp_param_numel(&specs[i]); j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    int failed = n;
    sp_status failed_code = SP_OK;
    char failed_message[1024] = "";
#pragma omp parallel for schedule(dynamic, 1)
    for (int k = 0; k < n; k++) {
        const int i = order[k];
        sp_status st = fill(&sources[i], specs[i].name, sp_model_param(m, i));
        release(&sources[i]);
        if (st != SP_OK) {
#pragma omp critical(param_fill_error)
            if (i < failed) {
                failed = i;
                failed_code = st;
                snprintf(failed_message, sizeof failed_message, "%s", sp_error_message());
            }
            sp_error_clear();
        }
    }
    free(order);
    if (failed == n)
        return SP_OK;
    sp_error_clear();
    return sp_error(failed_code, "%s", failed_message);
}

/* Elsewhere one parameter at a time goes through a host buffer. */
static sp_status fill_through_host(sp_model *m, const sp_param_spec *specs, const sp_param_source *sources, int n)
{
    sp_real *scratch = NULL;
    size_t scratch_len = 0;
    sp_status st = SP_OK;
    for (int i = 0; i < n && st == SP_OK; i++) {
        const size_t numel = sp_param_numel(&specs[i]);
        if (numel > scratch_len) {
            free(scratch);
            scratch_len = numel;
            if (!(scratch = sp_malloc(numel * sizeof *scratch, "parameter upload buffer")))
                return SP_ERR_NOMEM;
        }
        st = fill(&sources[i], specs[i].name, scratch);
        release(&sources[i]);
        if (st == SP_OK)
            sp_model_set_param(m, i, scratch);
    }
    free(scratch);
    return st;
}

sp_status sp_param_fill_model(sp_model *m, const sp_param_spec *specs, const sp_param_source *sources, int n)
{
    if (sp_model_backend(m) == sp_backend_cpu())
        return fill_in_place(m, specs, sources, n);
    return fill_through_host(m, specs, sources, n);
}

sp_status sp_param_model_create(const sp_config *cfg, const sp_backend *be, const sp_param_spec *specs,
                                const sp_param_source *sources, int n, sp_model **model)
{
    sp_model *m = NULL;
    sp_status st = sp_model_create(cfg, be, &m);
    if (st == SP_OK)
        st = sp_param_fill_model(m, specs, sources, n);
    if (st == SP_OK)
        st = sp_model_sync(m);
    if (st != SP_OK) {
        sp_model_free(m);
        m = NULL;
    }
    *model = m;
    return st;
}
