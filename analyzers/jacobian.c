/* analyzers/jacobian.c: "jacobian", the block Jacobians of the model around one evaluation
 * sequence (the first jac_seq tokens of the first evaluation sequence, batch 1), from exact JVPs and VJPs
 * (analyzers/block_jacobian.h):
 *   - the top-k singular values of every block's J_l by block Lanczos bidiagonalization
 *     (analyzers/linop.h; a forward pass over k copies of the sequence carries the k vectors in one
 *     JVP/VJP), sigma_max(J_l) the first of them;
 *   - end to end, sigma_max(d h_L / d h_l) for every l, by Lanczos (one vector) through the chain of
 *     blocks l..L-1;
 *   - token-local J_t = d x_{l+1}[t] / d x_l[t], built explicitly at jac_tokens positions drawn
 *     without replacement (seeded), fp64 SVD: sigma_max(J_t) and ||J_t||_F / sqrt(n), n = S d the
 *     map's dimension;
 *   - the SpanNorm theory terms: sigma_A, sigma_Z (the scale the block's norms divide the sums by),
 *     ||W_2 W_1||_2, ||W_O W_V||_2 as the estimate of ||W_O J_attn||, and the paper's bound
 *     (1 / sigma_Z)(1 + ||W_2 W_1|| (1 + ||W_O J_attn||) / sigma_A). docs/metrics.md states the
 *     choices. For siamese every map is the joint one, (X, Y) -> (X', Y'). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/analyzer.h"
#include "analyzers/block_jacobian.h"
#include "analyzers/linalg.h"
#include "analyzers/model_eval.h"
#include "analyzers/progress.h"
#include "analyzers/ranks.h"
#include "analyzers/rowops.h"
#include "core/rng.h"

#define NAME "jacobian"

typedef struct {
    int L, S, d, T, k, n_tok;
    double *sigma_max, *sigma_iters;  /* [L] */
    double *topk, *topk_iters;        /* [L, k], [L] */
    double *e2e, *e2e_iters;          /* [L] */
    double *tok_pos;                  /* [n_tok] */
    double *tok_sigma, *tok_frob;     /* [L, n_tok] */
    double *sigma_a, *sigma_z;        /* [L], NaN where the block has no such sum */
    double *w2w1, *w2w3, *wo_wv, *bound; /* [L]; w2w3 NaN for GELU, bound NaN without both sums */
    int not_converged;                /* iterations that hit power_iters */
    sp_progress progress;             /* units: 2 per block (end to end, top-k), 1 per position */
    int64_t done;
} jac_result;

static void step(jac_result *j)
{
    sp_progress_update(&j->progress, ++j->done, 2 * (int64_t)j->L + j->n_tok);
}

/* A distinct seed for each iteration run, derived from the analysis seed. */
static uint64_t run_seed(const sp_analysis *a, int kind, int l)
{
    return (uint64_t)a->opts->seed * 0x9E3779B97F4A7C15ull + (uint64_t)kind * 1000003u + (uint64_t)l;
}

/* The top k singular values of op = d h_last / d h_first from a random start, or refined from the
 * start vectors in v (when not NULL; they end as the final right singular vectors). */
static sp_status top_values(const sp_analysis *a, jac_result *j, sp_linop *op, int first, int last, int k,
                            uint64_t seed, sp_real *v, double *sigma, double *iters)
{
    sp_linop_stats stats;
    const int max_iters = a->opts->power_iters;
    const double tol = a->opts->power_tol;
    sp_status st = v ? sp_linop_refine_singvals(op, k, max_iters, tol, seed, v, sigma, &stats)
                     : sp_linop_top_singvals(op, k, max_iters, tol, seed, sigma, &stats);
    if (st != SP_OK) {
        sp_error_context("d h_%d / d h_%d over the first %d tokens", last, first, j->T);
        return st;
    }
    *iters = stats.iters;
    j->not_converged += !stats.converged;
    return SP_OK;
}

/* The scale a norm divides sum by, over the sequence: sqrt(mean over tokens of the per-token
 * variance over features) for LayerNorm, sqrt(mean of squares) for RMSNorm. NaN without the sum.
 * The per-token statistics come from analyzers/rowops.h (the backend's norm ops): only one value
 * per token crosses to the host. var [rows] is host scratch. */
static sp_status sum_scale(const sp_model *m, sp_rowops *ro, int l, const char *slot, int rows, double *var,
                           double *scale)
{
    *scale = NAN;
    const sp_real *x = sp_model_slot(m, l, slot);
    if (!x)
        return SP_OK;
    const sp_config *cfg = sp_model_config(m);
    const int d = cfg->d_model;
    if (cfg->norm == SP_NORM_LAYERNORM) {
        SP_TRY(sp_rowops_moments(ro, rows, d, x, NULL, var));
    } else {
        SP_TRY(sp_rowops_sqnorms(ro, rows, d, x, var));
        for (int r = 0; r < rows; r++)
            var[r] /= d;
    }
    double acc = 0;
    for (int r = 0; r < rows; r++)
        acc += var[r];
    *scale = sqrt(acc / rows);
    return SP_OK;
}

/* sigma_max(d h_L / d h_l) from l = L-1 down to 0. The chain from l starts from J_l^T v, v the top
 * right singular vector of the chain from l + 1 (exact when J_l is a multiple of an orthogonal map,
 * close for near-identity blocks), which saves most iterations; the last block starts at random. */
static sp_status measure_end_to_end(const sp_analysis *a, jac_result *j, sp_block_op *op)
{
    sp_linop last = sp_block_op_linop(op, j->L - 1, j->L);
    sp_real *v = sp_linop_alloc_block(&last, "end-to-end singular vector");
    sp_real *start = v ? sp_linop_alloc_block(&last, "end-to-end start vector") : NULL;
    sp_status st = start ? sp_linop_draw(&last, 1, run_seed(a, 2, 0), v) : SP_ERR_NOMEM;
    for (int l = j->L - 1; l >= 0 && st == SP_OK; l--) {
        if (l < j->L - 1) {
            sp_linop block = sp_block_op_linop(op, l, l + 1);
            st = block.apply_t(block.ctx, 1, v, start);
            sp_real *swap = v;
            v = start;
            start = swap;
        }
        sp_linop chain = sp_block_op_linop(op, l, j->L);
        if (st == SP_OK)
            st = top_values(a, j, &chain, l, j->L, 1, run_seed(a, 2, l + 1), v, &j->e2e[l], &j->e2e_iters[l]);
        step(j);
    }
    sp_real *all[] = {v, start};
    for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
        if (all[i])
            a->be->free(all[i]);
    return st;
}

/* Batch 1 over the sequence: end to end, and the sums' scales. */
static sp_status measure_sequence(const sp_analysis *a, jac_result *j)
{
    sp_model *m = a->model;
    SP_TRY(sp_block_forward_copies(m, a->tokens, j->T, 1));
    sp_rowops ro;
    SP_TRY(sp_rowops_init(&ro, a->be, j->T, j->d));
    double *var = sp_malloc((size_t)j->T * sizeof *var, "per-token variances");
    sp_status st_scale = var ? SP_OK : SP_ERR_NOMEM;
    for (int l = 0; l < j->L && st_scale == SP_OK; l++) {
        st_scale = sum_scale(m, &ro, l, "sum_a", j->T, var, &j->sigma_a[l]);
        if (st_scale == SP_OK)
            st_scale = sum_scale(m, &ro, l, "sum_z", j->T, var, &j->sigma_z[l]);
    }
    free(var);
    sp_rowops_free(&ro);
    SP_TRY(st_scale);
    sp_block_op op;
    SP_TRY(sp_block_op_init(&op, m, 1, j->T));
    sp_status st = SP_OK;
    /* the chain is sequential: one rank's, the last, which the round robin gives the fewest blocks */
    if (sp_analysis_owns(a, sp_analysis_n_ranks(a) - 1))
        st = measure_end_to_end(a, j, &op);
    else
        for (int l = 0; l < j->L; l++)
            step(j);
    sp_block_op_free(&op);
    return st;
}

/* k copies of the sequence: the top-k singular values of each block. The k vectors ride on k
 * copies of the sequence, so k is cut to the copies whose activations fit the memory budget
 * (a warning says so, and the report's topk array and topk_requested show it). */
static sp_status measure_topk(const sp_analysis *a, jac_result *j)
{
    const int fit = sp_eval_fit_copies(a, j->k, j->T);
    if (fit < j->k) {
        fprintf(stderr, "analyze: warning: jacobian: --topk %d needs %d copies of the %d-token sequence; %d fit in "
                        "half of --max-memory-gib %g: computing the top %d\n",
                j->k, j->k, j->T, fit, a->opts->max_memory_gib, fit);
        j->k = fit; /* fit >= 1: the pass already ran batches of seq_len >= T tokens */
    }
    SP_TRY(sp_block_forward_copies(a->model, a->tokens, j->T, j->k));
    sp_block_op op;
    SP_TRY(sp_block_op_init(&op, a->model, j->k, j->T));
    sp_status st = SP_OK;
    for (int l = 0; l < j->L && st == SP_OK; l++) {
        sp_linop block = sp_block_op_linop(&op, l, l + 1);
        if (sp_analysis_owns(a, l)) { /* over MPI ranks, blocks round robin (analyzers/ranks.h) */
            st = top_values(a, j, &block, l, l + 1, j->k, run_seed(a, 3, l), NULL, j->topk + (size_t)l * j->k,
                            &j->topk_iters[l]);
            /* the first of the k: a block iteration finds it more reliably than one vector would */
            j->sigma_max[l] = j->topk[(size_t)l * j->k];
            j->sigma_iters[l] = j->topk_iters[l];
        }
        step(j);
    }
    sp_block_op_free(&op);
    return st;
}

static int cmp_double(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return (p > q) - (p < q);
}

/* n_tok distinct positions of 0..T-1 (a seeded partial shuffle), ascending. */
static sp_status draw_positions(const sp_analysis *a, jac_result *j)
{
    int *all = sp_malloc((size_t)j->T * sizeof *all, "token positions");
    if (!all)
        return SP_ERR_NOMEM;
    for (int i = 0; i < j->T; i++)
        all[i] = i;
    sp_rng rng;
    sp_rng_seed(&rng, run_seed(a, 4, 0));
    for (int i = 0; i < j->n_tok; i++) {
        int pick = i + (int)sp_rng_below(&rng, (uint64_t)(j->T - i));
        int tmp = all[i];
        all[i] = all[pick];
        all[pick] = tmp;
        j->tok_pos[i] = all[i];
    }
    free(all);
    qsort(j->tok_pos, (size_t)j->n_tok, sizeof *j->tok_pos, cmp_double);
    return SP_OK;
}

/* J_t at every drawn position, all blocks at once, then its spectral and normalized Frobenius norms:
 * one batched SVD over the blocks per position, only the singular values come back. */
static sp_status measure_tokens(const sp_analysis *a, jac_result *j)
{
    SP_TRY(draw_positions(a, j));
    const sp_backend *be = a->be;
    const int n = j->S * j->d;
    const size_t nn = (size_t)n * (size_t)n, n_values = (size_t)j->L * (size_t)n;
    int max_rows = a->batch * a->seq_len;
    double *jt = be->alloc((size_t)j->L * nn * sizeof *jt, "token-local Jacobians");
    double *s = jt ? sp_malloc(n_values * sizeof *s, "token-local singular values") : NULL;
    sp_status st = s ? SP_OK : SP_ERR_NOMEM;
    /* the last position first: its buffers are the largest (attention over copies of the longest
     * prefix), so they are allocated once, not grown at every position */
    for (int i = j->n_tok - 1; i >= 0 && st == SP_OK; i--) {
        const int t = (int)j->tok_pos[i];
        if (!sp_analysis_owns(a, i)) { /* another MPI rank's position */
            step(j);
            continue;
        }
        st = sp_block_token_jacobians(a->model, a->tokens, t + 1, max_rows, jt);
        if (st == SP_OK)
            st = sp_linalg_backend_singvals(be, n, n, j->L, jt, s);
        if (st != SP_OK)
            break;
        for (int l = 0; l < j->L; l++) {
            const double *sl = s + (size_t)l * n;
            double ss = 0;
            for (int e = 0; e < n; e++)
                ss += sl[e] * sl[e];
            j->tok_sigma[(size_t)l * j->n_tok + i] = sl[0];
            j->tok_frob[(size_t)l * j->n_tok + i] = sqrt(ss / n);
        }
        step(j);
    }
    if (jt)
        be->free(jt);
    free(s);
    return st;
}

static int block_param(const sp_model *m, int l, const char *leaf)
{
    char name[SP_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "blocks/%d/%s", l, leaf);
    return sp_model_find_param(m, name);
}

/* Parameter blocks/<l>/<leaf>, which must hold numel elements, widened into dst (backend fp64). */
static sp_status widen_param(sp_model *m, int l, const char *leaf, size_t numel, double *dst)
{
    const int i = block_param(m, l, leaf);
    if (i < 0 || sp_param_numel(sp_model_param_spec(m, i)) != numel)
        return sp_error(SP_ERR_INTERNAL, "jacobian: parameter blocks/%d/%s is missing or not of %zu elements", l, leaf,
                        numel);
    sp_model_backend(m)->to_f64(numel, sp_model_param(m, i), dst, 0);
    return SP_OK;
}

/* W_V expanded to one [head_dim, d] block per query head (grouped-query heads share a kv head), so
 * W_O W_V' is the value path of attention with every token attending to itself. Query heads
 * g, g + group, g + 2 group, ... read kv heads 0, 1, 2, ...: one strided copy per g. */
static void expand_wv(const sp_backend *be, const sp_config *cfg, const double *wv, double *out)
{
    const int group = cfg->n_heads / cfg->n_kv_heads;
    const size_t head = (size_t)sp_config_head_dim(cfg) * (size_t)cfg->d_model * sizeof *wv;
    for (int g = 0; g < group; g++)
        be->copy_rows((unsigned char *)out + (size_t)g * head, (size_t)group * head, wv, head, head,
                      (size_t)cfg->n_kv_heads);
}

/* Backend fp64 scratch of weight_terms. */
typedef struct {
    double *left, *right; /* the factors of one product, widened */
    double *wv;           /* W_V as stored, widened */
    double *prod;         /* [L, d, d]: the product of every block */
    double *s;            /* host [L, d] */
} weight_bufs;

typedef enum { PRODUCT_W2W1, PRODUCT_W2W3, PRODUCT_WOWV } product_kind;

/* The spectral norm of one weight product of every block, into norm[L]: fp64 products on the
 * backend, one SVD batched over the blocks. */
static sp_status product_norms(sp_model *m, const weight_bufs *b, product_kind kind, double *norm)
{
    const sp_backend *be = sp_model_backend(m);
    const sp_config *cfg = sp_model_config(m);
    /* the inner size: W_O's input (q_dim, the expanded W_V's output) or the FFN width */
    const int d = cfg->d_model, L = cfg->n_layers, inner = kind == PRODUCT_WOWV ? sp_config_q_dim(cfg) : cfg->d_ff;
    const size_t dd = (size_t)d * (size_t)d, d_inner = (size_t)d * (size_t)inner;
    for (int l = 0; l < L; l++) {
        if (kind == PRODUCT_WOWV) {
            SP_TRY(widen_param(m, l, "attn/wo", d_inner, b->left));
            SP_TRY(widen_param(m, l, "attn/wv", (size_t)sp_config_kv_dim(cfg) * d, b->wv));
            expand_wv(be, cfg, b->wv, b->right);
        } else {
            SP_TRY(widen_param(m, l, "ffn/w2", d_inner, b->left));
            SP_TRY(widen_param(m, l, kind == PRODUCT_W2W1 ? "ffn/w1" : "ffn/w3", d_inner, b->right));
        }
        be->gemm_f64(0, 0, d, d, inner, 1.0, b->left, inner, b->right, d, 0.0, b->prod + (size_t)l * dd, d);
    }
    SP_TRY(sp_linalg_backend_singvals(be, d, d, L, b->prod, b->s));
    for (int l = 0; l < L; l++)
        norm[l] = b->s[(size_t)l * d];
    return sp_model_sync(m);
}

/* ||W_2 W_1||, ||W_2 W_3|| (SwiGLU; NaN for GELU), ||W_O W_V'|| of every block, and the bound. */
static sp_status weight_terms(const sp_analysis *a, jac_result *j)
{
    sp_model *m = a->model;
    const sp_backend *be = a->be;
    const sp_config *cfg = sp_model_config(m);
    const size_t d = (size_t)cfg->d_model, dff = (size_t)cfg->d_ff, qd = (size_t)sp_config_q_dim(cfg);
    const size_t L = (size_t)j->L, factor = d * (dff > qd ? dff : qd);
    weight_bufs b = {be->alloc(factor * sizeof(double), "weight product factor"),
                     be->alloc(factor * sizeof(double), "weight product factor"),
                     be->alloc((size_t)sp_config_kv_dim(cfg) * d * sizeof(double), "W_V"),
                     be->alloc(L * d * d * sizeof(double), "weight products"),
                     sp_malloc(L * d * sizeof(double), "weight product singular values")};
    sp_status st = b.left && b.right && b.wv && b.prod && b.s ? SP_OK : SP_ERR_NOMEM;
    /* over MPI ranks, one product kind a rank (its entries elsewhere stay 0) */
    for (int l = 0; l < j->L && sp_analysis_owns(a, PRODUCT_W2W3); l++)
        j->w2w3[l] = NAN;
    if (st == SP_OK && sp_analysis_owns(a, PRODUCT_W2W1))
        st = product_norms(m, &b, PRODUCT_W2W1, j->w2w1);
    if (st == SP_OK && sp_analysis_owns(a, PRODUCT_W2W3) && block_param(m, 0, "ffn/w3") >= 0)
        st = product_norms(m, &b, PRODUCT_W2W3, j->w2w3);
    if (st == SP_OK && sp_analysis_owns(a, PRODUCT_WOWV))
        st = product_norms(m, &b, PRODUCT_WOWV, j->wo_wv);
    double *dev[] = {b.left, b.right, b.wv, b.prod};
    for (size_t i = 0; i < SP_ARRAY_LEN(dev); i++)
        if (dev[i])
            be->free(dev[i]);
    free(b.s);
    return st;
}

static double mean_of(int n, const double *x, int skip_nan)
{
    double s = 0;
    int count = 0;
    for (int i = 0; i < n; i++)
        if (!(skip_nan && isnan(x[i]))) {
            s += x[i];
            count++;
        }
    return count ? s / count : NAN;
}

static double max_of(int n, const double *x)
{
    double best = -INFINITY;
    for (int i = 0; i < n; i++)
        best = x[i] > best ? x[i] : best;
    return n ? best : NAN;
}

static double min_of(int n, const double *x)
{
    double best = INFINITY;
    for (int i = 0; i < n; i++)
        best = x[i] < best ? x[i] : best;
    return n ? best : NAN;
}

typedef struct {
    const char *name;
    int rank;
    int64_t shape[2];
    const double *data;
    const char *units, *shape_desc, *description;
} array_spec;

static sp_status write_result(const sp_analysis *a, const jac_result *j)
{
    sp_report *r = a->report;
    const int L = j->L, nt = j->n_tok;
    double *per_layer = sp_malloc((size_t)4 * L * sizeof *per_layer, "token-local summaries");
    if (!per_layer)
        return SP_ERR_NOMEM;
    double *ts_mean = per_layer, *ts_max = per_layer + L, *tf_mean = per_layer + 2 * L, *tf_max = per_layer + 3 * L;
    for (int l = 0; l < L; l++) {
        ts_mean[l] = mean_of(nt, j->tok_sigma + (size_t)l * nt, 0);
        ts_max[l] = max_of(nt, j->tok_sigma + (size_t)l * nt);
        tf_mean[l] = mean_of(nt, j->tok_frob + (size_t)l * nt, 0);
        tf_max[l] = max_of(nt, j->tok_frob + (size_t)l * nt);
    }
    const array_spec arrays[] = {
        {"sigma_max", 1, {L}, j->sigma_max, "1", "[block]", "sigma_max(J_l) of block l over the whole sequence (the first of topk)"},
        {"sigma_max_iters", 1, {L}, j->sigma_iters, "iterations", "[block]", "iterations taken for topk, which gives sigma_max"},
        {"topk", 2, {L, j->k}, j->topk, "1", "[block, k]", "top-k singular values of J_l, descending (block Lanczos)"},
        {"topk_iters", 1, {L}, j->topk_iters, "iterations", "[block]", "block Lanczos iterations (products J V) taken for topk"},
        {"e2e_sigma_max", 1, {L}, j->e2e, "1", "[block]", "sigma_max(d h_L / d h_l), l = 0..L-1 (Lanczos)"},
        {"e2e_iters", 1, {L}, j->e2e_iters, "iterations", "[block]", "Lanczos iterations taken for e2e_sigma_max"},
        {"token_positions", 1, {nt}, j->tok_pos, "position", "[token]", "positions t of the token-local Jacobians"},
        {"token_sigma_max", 2, {L, nt}, j->tok_sigma, "1", "[block, token]", "sigma_max(J_t), J_t = dx_{l+1}[t]/dx_l[t]"},
        {"token_frob", 2, {L, nt}, j->tok_frob, "1", "[block, token]", "||J_t||_F / sqrt(n), n = streams x d_model"},
        {"token_sigma_max_mean", 1, {L}, ts_mean, "1", "[block]", "mean over tokens of sigma_max(J_t)"},
        {"token_sigma_max_max", 1, {L}, ts_max, "1", "[block]", "max over tokens of sigma_max(J_t)"},
        {"token_frob_mean", 1, {L}, tf_mean, "1", "[block]", "mean over tokens of ||J_t||_F / sqrt(n)"},
        {"token_frob_max", 1, {L}, tf_max, "1", "[block]", "max over tokens of ||J_t||_F / sqrt(n)"},
        {"sigma_a", 1, {L}, j->sigma_a, "1", "[block]",
         "scale of sum_a: sqrt(mean over tokens of its variance over features) (RMSNorm: of its mean square); NaN: no sum_a"},
        {"sigma_z", 1, {L}, j->sigma_z, "1", "[block]", "scale of sum_z, as sigma_a; NaN: no sum_z"},
        {"ffn_w2w1_norm", 1, {L}, j->w2w1, "1", "[block]", "||W_2 W_1||_2 (SwiGLU: W_1 is the gate)"},
        {"ffn_w2w3_norm", 1, {L}, j->w2w3, "1", "[block]", "||W_2 W_3||_2 (SwiGLU up path; NaN for GELU)"},
        {"attn_wo_wv_norm", 1, {L}, j->wo_wv, "1", "[block]",
         "||W_O W_V||_2 with W_V expanded per query head: the estimate of ||W_O J_attn||"},
        {"bound", 1, {L}, j->bound, "1", "[block]",
         "(1/sigma_z)(1 + ||W_2 W_1|| (1 + ||W_O W_V||) / sigma_a), the SpanNorm bound; NaN without both sums"},
    };
    sp_status st = SP_OK;
    for (size_t i = 0; i < SP_ARRAY_LEN(arrays) && st == SP_OK; i++)
        st = sp_report_write_array(r, NAME, arrays[i].name, arrays[i].rank, arrays[i].shape, arrays[i].data,
                                   &(sp_report_array_attrs){arrays[i].units, arrays[i].shape_desc, arrays[i].description});
    double ratio_sum = 0;
    int n_bound = 0;
    for (int l = 0; l < L; l++)
        if (isfinite(j->bound[l])) {
            ratio_sum += j->bound[l] / j->sigma_max[l];
            n_bound++;
        }
    const struct {
        const char *key;
        double value;
    } scalars[] = {
        {"sigma_max_mean", mean_of(L, j->sigma_max, 0)},
        {"sigma_max_max", max_of(L, j->sigma_max)},
        {"sigma_max_min", min_of(L, j->sigma_max)},
        {"e2e_sigma_max_first", j->e2e[0]},
        {"e2e_sigma_max_min", min_of(L, j->e2e)},
        {"token_sigma_max_mean", mean_of(L, ts_mean, 0)},
        {"token_sigma_max_max", max_of(L, ts_max)},
        {"token_frob_mean", mean_of(L, tf_mean, 0)},
        {"token_frob_max", max_of(L, tf_max)},
        {"sigma_a_mean", mean_of(L, j->sigma_a, 1)},
        {"sigma_z_mean", mean_of(L, j->sigma_z, 1)},
        {"bound_over_sigma_max_mean", n_bound ? ratio_sum / n_bound : NAN},
        {"not_converged", j->not_converged},
        {"topk", j->k},
        {"topk_requested", a->opts->topk},
        {"seq_len", j->T},
        {"n_token_positions", nt},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(scalars) && st == SP_OK; i++)
        st = sp_report_set_scalar(r, NAME, scalars[i].key, scalars[i].value);
    free(per_layer);
    return st;
}

/* Over MPI ranks: every rank's blocks, positions and products (the others' entries are 0 there: the
 * sums are exact), then the bound from the whole. The arrays' order in the one buffer: see
 * jacobian_finish. */
static sp_status join_ranks(const sp_analysis *a, jac_result *j)
{
    const size_t L = (size_t)j->L;
    double not_converged = j->not_converged;
    SP_TRY(sp_analysis_sum(a, &not_converged, 1));
    j->not_converged = (int)not_converged;
    SP_TRY(sp_analysis_sum(a, j->sigma_max, 5 * L)); /* sigma_max .. e2e_iters */
    SP_TRY(sp_analysis_sum(a, j->w2w1, 3 * L));      /* w2w1, w2w3, wo_wv */
    SP_TRY(sp_analysis_sum(a, j->topk, L * (size_t)j->k));
    SP_TRY(sp_analysis_sum(a, j->tok_sigma, 2 * L * (size_t)j->n_tok)); /* tok_sigma, tok_frob */
    /* NaN (no sum) propagates: the bound exists where the block has both sums */
    for (size_t l = 0; l < L; l++)
        j->bound[l] = (1 + j->w2w1[l] * (1 + j->wo_wv[l]) / j->sigma_a[l]) / j->sigma_z[l];
    return SP_OK;
}

static sp_status jacobian_finish(const sp_analysis *a, void *state)
{
    (void)state;
    const int jac_seq = a->opts->jac_seq;
    jac_result j = {.L = a->n_layers, .S = a->n_streams, .d = a->d_model,
                    .T = jac_seq > 0 && jac_seq < a->seq_len ? jac_seq : a->seq_len};
    const int64_t n = (int64_t)j.S * j.T * j.d;
    j.k = a->opts->topk < n ? a->opts->topk : (int)n;
    j.n_tok = a->opts->jac_tokens < j.T ? a->opts->jac_tokens : j.T;
    const size_t L = (size_t)j.L, per_layer = 11;
    const size_t total = L * per_layer + L * (size_t)j.k + (size_t)j.n_tok * (1 + 2 * L);
    double *buf = sp_calloc(total, sizeof *buf, "Jacobian results");
    if (!buf)
        return SP_ERR_NOMEM;
    double **layer_arrays[] = {&j.sigma_max, &j.sigma_iters, &j.topk_iters, &j.e2e, &j.e2e_iters, &j.sigma_a,
                               &j.sigma_z, &j.w2w1, &j.w2w3, &j.wo_wv, &j.bound};
    double *at = buf;
    for (size_t i = 0; i < per_layer; i++, at += L)
        *layer_arrays[i] = at;
    j.topk = at;
    j.tok_pos = j.topk + L * (size_t)j.k;
    j.tok_sigma = j.tok_pos + j.n_tok;
    j.tok_frob = j.tok_sigma + L * (size_t)j.n_tok;

    sp_progress_start(&j.progress, NAME, a->quiet);
    sp_status st = measure_sequence(a, &j);
    if (st == SP_OK)
        st = weight_terms(a, &j);
    if (st == SP_OK)
        st = measure_topk(a, &j);
    if (st == SP_OK)
        st = measure_tokens(a, &j);
    if (st == SP_OK)
        st = join_ranks(a, &j);
    sp_progress_end(&j.progress);
    if (st == SP_OK)
        st = write_result(a, &j);
    free(buf);
    return st;
}

const sp_analyzer sp_analyzer_jacobian = {
    .name = NAME,
    .description = "block Jacobians: sigma_max, top-k, end to end, token-local, SpanNorm theory terms",
    .needs = SP_NEEDS_MODEL,
    .finish = jacobian_finish,
};
