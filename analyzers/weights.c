/* analyzers/weights.c: "weights", the singular-value statistics of every block matrix, fp64:
 * condition number kappa = sigma_max / sigma_min over the min(m, n) singular values (+inf,
 * flagged, when sigma_min <= 1e-12 sigma_max), spectral norm sigma_max, and stable rank
 * ||W||_F^2 / ||W||_2^2 = sum sigma_i^2 / sigma_max^2.
 *
 * Matrices, as stored ([out, in]): W_Q per query head and W_K, W_V per kv head ([head_dim, d_model]
 * row slices; the table holds the median over heads, the heads_* arrays every head), W_O, W_1, W_2,
 * W_3 (SwiGLU; NaN columns for GELU). With --singular-values every matrix's singular values are
 * stored too. Summaries: means over blocks, and over the deepest half (blocks l >= floor(L/2)).
 * Also the power-law exponent alpha of every whole matrix's spectrum, WeightWatcher's fit
 * (analyzers/weights_alpha.h): W_Q, W_K and W_V whole as WeightWatcher sees q_proj, k_proj, v_proj,
 * so those kinds are decomposed a second time unsplit when they have several heads.
 *
 * Each matrix kind is gathered across the blocks into one fp64 backend array, the weights widened
 * in place on the backend (be->to_f64): a head's row slice of a row-major matrix is contiguous, so
 * the blocks' matrices laid end to end ARE the [blocks * heads, head_dim, d_model] stack. One
 * be->singvals call per kind decomposes the stack (batched on the GPU); only the singular values
 * come back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/analyzer.h"
#include "analyzers/linalg.h"
#include "analyzers/ranks.h"
#include "analyzers/weights_alpha.h"

#define NAME "weights"
#define KAPPA_FLOOR 1e-12

enum { M_WQ, M_WK, M_WV, M_WO, M_W1, M_W2, M_W3, N_MATRICES };
enum { S_KAPPA, S_SPECTRAL, S_STABLE, N_STATS };

static const char *const matrix_names[N_MATRICES] = {"wq", "wk", "wv", "wo", "w1", "w2", "w3"};
static const char *const matrix_leaves[N_MATRICES] = {"attn/wq", "attn/wk", "attn/wv", "attn/wo",
                                                      "ffn/w1",  "ffn/w2",  "ffn/w3"};
static const char *const stat_names[N_STATS] = {"kappa", "spectral_norm", "stable_rank"};

typedef struct {
    int L, n_heads, n_kv_heads;
    double *table;         /* [N_STATS][L, N_MATRICES] */
    double *heads[3];      /* wq, wk, wv: [L, heads, N_STATS] */
    sp_weights_alpha alpha;
} weight_result;

/* Statistics of one matrix from its singular values s[k] (descending). */
static void stats_of(int k, const double *s, double *out)
{
    double ss = 0;
    for (int i = 0; i < k; i++)
        ss += s[i] * s[i];
    out[S_KAPPA] = s[k - 1] <= KAPPA_FLOOR * s[0] ? INFINITY : s[0] / s[k - 1];
    out[S_SPECTRAL] = s[0];
    out[S_STABLE] = ss / (s[0] * s[0]); /* NaN for the zero matrix */
}

static double *table_cell(const weight_result *w, int stat, int l, int mat)
{
    return &w->table[((size_t)stat * w->L + (size_t)l) * N_MATRICES + (size_t)mat];
}

static sp_status write_singular_values(const sp_analysis *a, int l, int mat, int n_parts, int k, const double *sv)
{
    char name[64], desc[128];
    snprintf(name, sizeof name, "sv_%d_%s", l, matrix_names[mat]);
    snprintf(desc, sizeof desc, "singular values of block %d's %s%s, descending", l, matrix_names[mat],
             n_parts > 1 ? " per head" : "");
    const int64_t shape[2] = {n_parts, k};
    return n_parts > 1 ? sp_report_write_array(a->report, NAME, name, 2, shape, sv,
                                               &(sp_report_array_attrs){"1", "[head, k]", desc})
                       : sp_report_write_array(a->report, NAME, name, 1, shape + 1, sv,
                                               &(sp_report_array_attrs){"1", "[k]", desc});
}

/* One kind of matrix across the blocks that hold it: which blocks, and the shape they share. */
typedef struct {
    int *param;            /* [L]: parameter index per block, -1 where absent */
    int n_present, rows, cols, n_parts, part_rows, k;
} kind_layout;

static sp_status kind_find(const sp_analysis *a, const weight_result *w, int mat, kind_layout *kl)
{
    sp_model *m = a->model;
    for (int l = 0; l < w->L; l++) {
        char pname[SP_PARAM_NAME_MAX];
        snprintf(pname, sizeof pname, "blocks/%d/%s", l, matrix_leaves[mat]);
        const int idx = kl->param[l] = sp_model_find_param(m, pname);
        if (idx < 0)
            continue;
        const sp_param_spec *spec = sp_model_param_spec(m, idx);
        if (kl->n_present++ == 0) {
            kl->rows = (int)spec->shape[0];
            kl->cols = (int)spec->shape[1];
        } else if (spec->shape[0] != kl->rows || spec->shape[1] != kl->cols)
            return sp_error(SP_ERR_INTERNAL, "weights: %s is [%lld, %lld], expected [%d, %d] like the other blocks",
                            pname, (long long)spec->shape[0], (long long)spec->shape[1], kl->rows, kl->cols);
    }
    kl->n_parts = mat == M_WQ ? w->n_heads : mat == M_WK || mat == M_WV ? w->n_kv_heads : 1;
    kl->part_rows = kl->rows / kl->n_parts;
    kl->k = kl->part_rows < kl->cols ? kl->part_rows : kl->cols;
    return SP_OK;
}

/* Singular values of every row slice of part_rows rows (kl->part_rows: the heads; kl->rows: whole)
 * of every present block, [n_present * rows / part_rows, min(part_rows, cols)] into sv (host): the
 * stack widened on the backend, one batched be->singvals, the stack freed at once. */
static sp_status kind_singvals(const sp_analysis *a, const kind_layout *kl, int part_rows, double *sv)
{
    const sp_backend *be = a->be;
    const size_t per_block = (size_t)kl->rows * (size_t)kl->cols;
    const int count = kl->n_present * (kl->rows / part_rows);
    size_t stack_elems;
    SP_TRY(sp_size_mul((size_t)kl->n_present, per_block, &stack_elems, "weight matrix stack"));
    double *stack = be->alloc(stack_elems * sizeof *stack, "weight matrix stack fp64");
    if (!stack)
        return SP_ERR_NOMEM;
    for (int l = 0, at = 0; at < kl->n_present; l++)
        if (kl->param[l] >= 0)
            be->to_f64(per_block, sp_model_param(a->model, kl->param[l]), stack + (size_t)at++ * per_block, 0);
    sp_status st = sp_linalg_backend_singvals(be, part_rows, kl->cols, count, stack, sv);
    be->free(stack);
    return st;
}

/* The table cells, per-head arrays and (optionally) singular values of block l from its parts'
 * singular values sv [n_parts, k]; per_part [n_parts, N_STATS] and column [n_parts] are scratch. */
static sp_status block_stats(const sp_analysis *a, weight_result *w, const kind_layout *kl, int l, int mat,
                             const double *sv, double *per_part, double *column)
{
    const int n_parts = kl->n_parts;
    for (int p = 0; p < n_parts; p++)
        stats_of(kl->k, sv + (size_t)p * kl->k, per_part + (size_t)p * N_STATS);
    for (int s = 0; s < N_STATS; s++) {
        for (int p = 0; p < n_parts; p++)
            column[p] = per_part[p * N_STATS + s];
        *table_cell(w, s, l, mat) = sp_linalg_median(n_parts, column); /* one part: the value itself */
    }
    if (mat <= M_WV) /* the per-head kinds: every head's row, also when there is one (one kv head) */
        memcpy(w->heads[mat] + (size_t)l * n_parts * N_STATS, per_part, (size_t)n_parts * N_STATS * sizeof *per_part);
    return a->opts->singular_values ? write_singular_values(a, l, mat, n_parts, kl->k, sv) : SP_OK;
}

/* The power-law fit of every present block's whole matrix (analyzers/weights_alpha.h): from the
 * singular values sv of block_stats when the kind is not split into heads, else from a second,
 * unsplit decomposition. */
static sp_status kind_alpha(const sp_analysis *a, weight_result *w, const kind_layout *kl, int mat, const double *sv)
{
    const int k = kl->rows < kl->cols ? kl->rows : kl->cols;
    double *whole = NULL;
    sp_status st = SP_OK;
    if (kl->n_parts > 1) {
        whole = sp_malloc((size_t)kl->n_present * (size_t)k * sizeof *whole, "whole-matrix singular values");
        st = whole ? kind_singvals(a, kl, kl->rows, whole) : SP_ERR_NOMEM;
    }
    const double *values = whole ? whole : sv;
    for (int l = 0, at = 0; l < w->L && st == SP_OK; l++)
        if (kl->param[l] >= 0)
            st = sp_weights_alpha_fit(&w->alpha, l, mat, kl->rows, kl->cols, values + (size_t)at++ * k);
    free(whole);
    return st;
}

static sp_status analyze_kind(const sp_analysis *a, weight_result *w, int mat)
{
    kind_layout kl = {.param = sp_malloc((size_t)w->L * sizeof *kl.param, "weight parameter indices")};
    if (!kl.param)
        return SP_ERR_NOMEM;
    sp_status st = kind_find(a, w, mat, &kl);
    for (int l = 0; l < w->L && st == SP_OK; l++)
        if (kl.param[l] < 0)
            for (int s = 0; s < N_STATS; s++)
                *table_cell(w, s, l, mat) = NAN;
    double *sv = NULL, *per_part = NULL, *column = NULL;
    if (st == SP_OK && kl.n_present > 0) {
        const size_t parts = (size_t)kl.n_present * (size_t)kl.n_parts;
        sv = sp_malloc(parts * (size_t)kl.k * sizeof *sv, "singular values");
        per_part = sp_malloc((size_t)kl.n_parts * N_STATS * sizeof *per_part, "weight statistics");
        column = sp_malloc((size_t)kl.n_parts * sizeof *column, "per-head statistic");
        st = sv && per_part && column ? kind_singvals(a, &kl, kl.part_rows, sv) : SP_ERR_NOMEM;
    }
    for (int l = 0, at = 0; l < w->L && st == SP_OK && kl.n_present > 0; l++)
        if (kl.param[l] >= 0)
            st = block_stats(a, w, &kl, l, mat, sv + (size_t)at++ * kl.n_parts * kl.k, per_part, column);
    if (st == SP_OK && kl.n_present > 0)
        st = kind_alpha(a, w, &kl, mat, sv);
    free(kl.param);
    free(sv);
    free(per_part);
    free(column);
    return st;
}

/* Mean of a table column over blocks [from, L) (+inf when any is +inf). */
static double column_mean(const weight_result *w, int stat, int mat, int from)
{
    double s = 0;
    for (int l = from; l < w->L; l++)
        s += *table_cell(w, stat, l, mat);
    return s / (w->L - from);
}

static sp_status write_result(const sp_analysis *a, const weight_result *w)
{
    sp_report *r = a->report;
    const int64_t L = w->L;
    char desc[256];
    sp_status st = SP_OK;
    static const char *const stat_desc[N_STATS] = {
        "condition number sigma_max / sigma_min (+inf when sigma_min <= 1e-12 sigma_max)", "spectral norm sigma_max",
        "stable rank ||W||_F^2 / ||W||_2^2"};
    for (int s = 0; s < N_STATS && st == SP_OK; s++) {
        snprintf(desc, sizeof desc, "%s of each block matrix (wq, wk, wv: median over heads; NaN: absent); columns: "
                                    "wq, wk, wv, wo, w1, w2, w3", stat_desc[s]);
        st = sp_report_write_array(r, NAME, stat_names[s], 2, (int64_t[]){L, N_MATRICES}, table_cell(w, s, 0, 0),
                                   &(sp_report_array_attrs){"1", "[block, matrix]", desc});
    }
    double *flags = st == SP_OK ? sp_malloc((size_t)L * N_MATRICES * sizeof *flags, "kappa flags") : NULL;
    if (st == SP_OK && !flags)
        st = SP_ERR_NOMEM;
    int n_inf = 0;
    for (int i = 0; flags && i < L * N_MATRICES; i++) {
        double kappa = w->table[i]; /* stat 0 comes first */
        flags[i] = isnan(kappa) ? NAN : isinf(kappa) ? 1 : 0;
        n_inf += isinf(kappa) != 0;
    }
    if (st == SP_OK)
        st = sp_report_write_array(r, NAME, "kappa_inf", 2, (int64_t[]){L, N_MATRICES}, flags,
                                   &(sp_report_array_attrs){"1", "[block, matrix]",
                                                            "1 where kappa is +inf (sigma_min <= 1e-12 sigma_max)"});
    free(flags);
    const int heads[3] = {w->n_heads, w->n_kv_heads, w->n_kv_heads};
    for (int mat = M_WQ; mat <= M_WV && st == SP_OK; mat++) {
        char name[32];
        snprintf(name, sizeof name, "heads_%s", matrix_names[mat]);
        snprintf(desc, sizeof desc, "%s per head ([head_dim, d_model] row slices); last axis: kappa, spectral_norm, "
                                    "stable_rank", matrix_names[mat]);
        st = sp_report_write_array(r, NAME, name, 3, (int64_t[]){L, heads[mat], N_STATS}, w->heads[mat],
                                   &(sp_report_array_attrs){"1", "[block, head, stat]", desc});
    }
    const int deep = w->L / 2;
    for (int mat = 0; mat < N_MATRICES && st == SP_OK; mat++) {
        if (isnan(*table_cell(w, S_KAPPA, 0, mat)))
            continue; /* W_3 of a GELU model */
        char key[64];
        snprintf(key, sizeof key, "kappa_%s_mean", matrix_names[mat]);
        st = sp_report_set_scalar(r, NAME, key, column_mean(w, S_KAPPA, mat, 0));
        snprintf(key, sizeof key, "kappa_%s_deep_mean", matrix_names[mat]);
        if (st == SP_OK)
            st = sp_report_set_scalar(r, NAME, key, column_mean(w, S_KAPPA, mat, deep));
        snprintf(key, sizeof key, "spectral_norm_%s_mean", matrix_names[mat]);
        if (st == SP_OK)
            st = sp_report_set_scalar(r, NAME, key, column_mean(w, S_SPECTRAL, mat, 0));
        snprintf(key, sizeof key, "stable_rank_%s_mean", matrix_names[mat]);
        if (st == SP_OK)
            st = sp_report_set_scalar(r, NAME, key, column_mean(w, S_STABLE, mat, 0));
    }
    if (st == SP_OK)
        st = sp_report_set_scalar(r, NAME, "n_kappa_inf", n_inf);
    return st;
}

/* Over MPI ranks (analyzers/ranks.h) the matrix kinds go round robin, kind mat on rank mat mod N,
 * unless every matrix's singular values go into the report, which rank 0 writes: then every rank
 * computes every kind. */
static int computes_kind(const sp_analysis *a, int mat)
{
    return a->opts->singular_values || sp_analysis_owns(a, mat);
}

/* The cells of kind mat in the order share_kind sends them: its table column, its power-law column
 * (weights_alpha.h), its per-head array. Copied into buf (unpack 0) or back out (1); the
 * count of values either way. */
static size_t move_kind(weight_result *w, int mat, double *buf, int unpack)
{
    const size_t L = (size_t)w->L;
    size_t at = 0;
    double *cells[N_STATS + SP_WEIGHTS_ALPHA_FIELDS];
    for (int l = 0; l < w->L; l++) {
        for (int s = 0; s < N_STATS; s++)
            cells[s] = table_cell(w, s, l, mat);
        for (int f = 0; f < SP_WEIGHTS_ALPHA_FIELDS; f++)
            cells[N_STATS + f] = sp_weights_alpha_cell(&w->alpha, f, l, mat);
        for (size_t c = 0; c < SP_ARRAY_LEN(cells); c++, at++)
            if (unpack)
                *cells[c] = buf[at];
            else
                buf[at] = *cells[c];
    }
    const size_t n_head = mat > M_WV ? 0 : L * N_STATS * (size_t)(mat == M_WQ ? w->n_heads : w->n_kv_heads);
    if (unpack)
        memcpy(w->heads[mat], buf + at, n_head * sizeof *buf);
    else
        memcpy(buf + at, w->heads[mat], n_head * sizeof *buf);
    return at + n_head;
}

/* The cells of kind mat from the rank that computed them, on every rank, in one broadcast. */
static sp_status share_kind(const sp_analysis *a, weight_result *w, int mat)
{
    if (sp_analysis_n_ranks(a) == 1 || a->opts->singular_values)
        return SP_OK;
    const size_t most = (size_t)w->L * (N_STATS + SP_WEIGHTS_ALPHA_FIELDS + N_STATS * (size_t)(w->n_heads > w->n_kv_heads ? w->n_heads
                                                                                                      : w->n_kv_heads));
    double *buf = sp_malloc(most * sizeof *buf, "weight statistics of one kind");
    if (!buf)
        return SP_ERR_NOMEM;
    sp_status st = sp_analysis_bcast(a, buf, move_kind(w, mat, buf, 0), mat % sp_analysis_n_ranks(a));
    if (st == SP_OK)
        move_kind(w, mat, buf, 1);
    free(buf);
    return st;
}

static sp_status weights_finish(const sp_analysis *a, void *state)
{
    (void)state;
    const sp_config *cfg = sp_model_config(a->model);
    weight_result w = {.L = cfg->n_layers, .n_heads = cfg->n_heads, .n_kv_heads = cfg->n_kv_heads};
    const size_t L = (size_t)w.L, table = (size_t)N_STATS * L * N_MATRICES;
    const size_t head_cells = L * N_STATS * ((size_t)w.n_heads + 2 * (size_t)w.n_kv_heads);
    double *buf = sp_malloc((table + head_cells) * sizeof *buf, "weight statistics");
    if (!buf)
        return SP_ERR_NOMEM;
    w.table = buf;
    w.heads[M_WQ] = buf + table;
    w.heads[M_WK] = w.heads[M_WQ] + L * N_STATS * (size_t)w.n_heads;
    w.heads[M_WV] = w.heads[M_WK] + L * N_STATS * (size_t)w.n_kv_heads;
    sp_status st = sp_weights_alpha_init(&w.alpha, w.L, N_MATRICES);
    for (int mat = 0; mat < N_MATRICES && st == SP_OK; mat++)
        st = computes_kind(a, mat) ? analyze_kind(a, &w, mat) : SP_OK;
    for (int mat = 0; mat < N_MATRICES && st == SP_OK; mat++)
        st = share_kind(a, &w, mat);
    if (st == SP_OK)
        st = write_result(a, &w);
    if (st == SP_OK)
        st = sp_weights_alpha_write(&w.alpha, a->report, NAME, matrix_names);
    sp_weights_alpha_free(&w.alpha);
    free(buf);
    return st;
}

const sp_analyzer sp_analyzer_weights = {
    .name = NAME,
    .description = "condition numbers, spectral norms, stable ranks and power-law exponents (alpha) of every block "
                   "matrix",
    .needs = SP_NEEDS_MODEL,
    .finish = weights_finish,
};
