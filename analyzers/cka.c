/* analyzers/cka.c: "cka", linear centered kernel alignment between every pair of layer outputs
 * (Kornblith et al. 2019), from streamed sums.
 *
 * With X, Y the N x d outputs of two layers and centered columns, the linear-kernel HSIC is
 * ||X_c^T Y_c||_F^2 / (N - 1)^2 and CKA(X, Y) = HSIC(X, Y) / sqrt(HSIC(X, X) HSIC(Y, Y)). The
 * centered cross-products X_c^T Y_c come from the column sums and the cross-products X^T Y that
 * analyzers/moments.h accumulates through be->gemm, so memory does not grow with N.
 *
 * Debiased option: the unbiased HSIC estimator (Song et al. 2012) on the Gram matrices K = X X^T and
 * L = Y Y^T with zeroed diagonals (K~, L~):
 *   HSIC_u = [tr(K~ L~) + (1'K~1)(1'L~1) / ((N-1)(N-2)) - 2/(N-2) 1'K~L~1] / (N(N-3)).
 * Every term reduces to streamed sums, with n_x[a] = ||x_a||^2 and S_x = sum_a x_a:
 *   tr(K~ L~) = ||X^T Y||_F^2 - sum_a n_x[a] n_y[a]
 *   1'K~1 = ||S_x||^2 - sum_a n_x[a]
 *   1'K~L~1 = S_x^T (X^T Y) S_y - S_x . (X^T n_y) - S_y . (Y^T n_x) + sum_a n_x[a] n_y[a]
 * so the option adds X^T n_y for every ordered pair (one gemm per layer against the matrix of
 * every layer's row norms) and sum_a n_x[a] n_y[a]. The estimator is invariant under a common shift
 * of the rows, so it is computed on the same shifted rows as the rest (analyzers/moments.h).
 *
 * The cross-product totals stay in fp64 in backend memory until finish(), which downloads them one
 * pair at a time and does the rest on the host; each pair's accumulator is freed once read. A pair
 * costs d^2 doubles (4.7 MB at d = 768) and there are n_h (n_h + 1) / 2 of them per stream (430 MB
 * for 13 layer outputs, 16 GB for 25 at d = 2048), so one pass holds only as many as fit in a quarter
 * of --max-memory-gib (or --cka-pairs-per-pass); finish() replays the evaluation set for the rest,
 * a pass per group of pairs, in the same order of batches and gemms: the result is bit-identical
 * to one pass holding them all, and memory is bounded whatever the depth and width. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyzers/dev_bufs.h"
#include "analyzers/moments.h"
#include "analyzers/output.h"
#include "analyzers/ranks.h"

#define NAME "cka"

typedef struct {
    int k, i, j; /* stream, layers i <= j */
} cka_pair;

typedef struct {
    int n_h, n_streams, d, max_rows, debiased;
    cka_pair *order;        /* [n_pairs]: every stream's pairs in finish order, (i, i) before i < j */
    int n_pairs, per_pass;  /* pairs accumulated in one pass over the evaluation set */
    int first, end;         /* this pass's pairs: order[first .. end) */
    sp_rowops ro;
    sp_real **shifted;      /* [n_h] backend [max_rows, d]: shifted rows of the current stream */
    sp_real *product;       /* backend [d, d]: one batch's cross-product, lent to every pair */
    sp_mom_cols *cols;      /* [n_streams * n_h] */
    sp_mom_cross *cross;    /* [n_streams * n_h * n_h], this pass's pairs initialized */
    /* debiased only */
    double *norms;          /* host [max_rows * n_h]: n_l[a], row-major [a, l] */
    sp_real *norms_host;    /* host staging of norms as sp_real */
    sp_real *norms_dev;     /* backend [max_rows, n_h] */
    sp_real *xn_dev;        /* backend [d, n_h]: X_i^T N of one layer */
    sp_real *xn_host;       /* host [d * n_h] */
    double *xn;             /* [n_streams * n_h][d * n_h]: sum of X_i^T N */
    double *nn;             /* [n_streams * n_h * n_h]: sum_a n_i[a] n_j[a] */
} cka_state;

static sp_mom_cross *pair(cka_state *s, int k, int i, int j)
{
    return &s->cross[((size_t)k * s->n_h + i) * s->n_h + j];
}

static void cka_free(void *state)
{
    cka_state *s = state;
    if (!s)
        return;
    const sp_backend *be = s->ro.be;
    for (int i = 0; s->cols && i < s->n_streams * s->n_h; i++)
        sp_mom_cols_free(&s->cols[i]);
    for (size_t i = 0; s->cross && i < (size_t)s->n_streams * s->n_h * s->n_h; i++)
        sp_mom_cross_free(&s->cross[i]);
    sp_dev_bufs_free(be, s->shifted, s->n_h);
    sp_dev_bufs_release(be, (sp_real *[]){s->norms_dev, s->xn_dev, s->product}, 3);
    sp_rowops_free(&s->ro);
    free(s->cols);
    free(s->cross);
    free(s->order);
    free(s->norms);
    free(s->norms_host);
    free(s->xn_host);
    free(s->xn);
    free(s->nn);
    free(s);
}

static sp_status alloc_debiased(const sp_analysis *a, cka_state *s)
{
    const size_t n_h = (size_t)s->n_h, rows = (size_t)s->max_rows, d = (size_t)s->d;
    s->norms = sp_malloc(rows * n_h * sizeof *s->norms, "cka row norms");
    s->norms_host = sp_malloc(rows * n_h * sizeof *s->norms_host, "cka row norms");
    s->norms_dev = a->be->alloc(rows * n_h * sizeof(sp_real), "cka row norms");
    s->xn_dev = a->be->alloc(d * n_h * sizeof(sp_real), "cka norm products");
    s->xn_host = sp_malloc(d * n_h * sizeof *s->xn_host, "cka norm products");
    s->xn = sp_calloc((size_t)s->n_streams * n_h * d * n_h, sizeof *s->xn, "cka norm products");
    s->nn = sp_calloc((size_t)s->n_streams * n_h * n_h, sizeof *s->nn, "cka norm products");
    return s->norms && s->norms_host && s->norms_dev && s->xn_dev && s->xn_host && s->xn && s->nn ? SP_OK
                                                                                                     : SP_ERR_NOMEM;
}

/* Pairs whose fp64 totals (d^2 8 bytes each) one pass holds: --cka-pairs-per-pass, or as many as
 * fit in a quarter of --max-memory-gib (a pass's activations take at most half of it). */
static int pairs_per_pass(const sp_analysis *a, int d, int n_pairs)
{
    double n = (double)a->opts->cka_pairs_per_pass;
    if (n <= 0)
        n = floor(a->opts->max_memory_gib * 1073741824.0 / 4 / ((double)d * d * 8));
    return n < 1 ? 1 : n > n_pairs ? n_pairs : (int)n;
}

/* Makes the accumulators of the pass that starts at order[first]. */
static sp_status start_pass(const sp_analysis *a, cka_state *s, int first)
{
    s->first = first;
    s->end = first + s->per_pass < s->n_pairs ? first + s->per_pass : s->n_pairs;
    for (int p = first; p < s->end; p++) {
        const cka_pair *o = &s->order[p];
        SP_TRY(sp_mom_cross_init(pair(s, o->k, o->i, o->j), a->be, s->d, s->d, s->product));
    }
    return SP_OK;
}

static sp_status plan_pairs(const sp_analysis *a, cka_state *s)
{
    const int n_h = s->n_h;
    s->n_pairs = s->n_streams * n_h * (n_h + 1) / 2;
    s->order = sp_malloc((size_t)s->n_pairs * sizeof *s->order, "cka pairs");
    if (!s->order)
        return SP_ERR_NOMEM;
    int n = 0;
    for (int k = 0; k < s->n_streams; k++) {
        for (int i = 0; i < n_h; i++)
            s->order[n++] = (cka_pair){k, i, i};
        for (int i = 0; i < n_h; i++)
            for (int j = i + 1; j < n_h; j++)
                s->order[n++] = (cka_pair){k, i, j};
    }
    s->per_pass = pairs_per_pass(a, s->d, s->n_pairs);
    return start_pass(a, s, 0);
}

static sp_status cka_begin(const sp_analysis *a, void **state)
{
    cka_state *s = sp_calloc(1, sizeof *s, "cka state");
    if (!s)
        return SP_ERR_NOMEM;
    *state = s;
    s->n_h = a->n_layers + 1;
    s->n_streams = a->n_streams;
    s->d = a->d_model;
    s->max_rows = a->batch * a->seq_len;
    s->debiased = a->opts->cka_debiased;
    SP_TRY(sp_rowops_init(&s->ro, a->be, s->max_rows, s->d));
    s->shifted = sp_dev_bufs_alloc(a->be, s->n_h, (size_t)s->max_rows * s->d * sizeof(sp_real), "cka shifted rows");
    s->product = a->be->alloc((size_t)s->d * s->d * sizeof(sp_real), "cka cross-product scratch");
    s->cols = sp_calloc((size_t)s->n_streams * s->n_h, sizeof *s->cols, "cka sums");
    s->cross = sp_calloc((size_t)s->n_streams * s->n_h * s->n_h, sizeof *s->cross, "cka cross-products");
    if (!s->shifted || !s->product || !s->cols || !s->cross)
        return SP_ERR_NOMEM;
    for (int i = 0; i < s->n_streams * s->n_h; i++)
        SP_TRY(sp_mom_cols_init(&s->cols[i], &s->ro, s->d));
    sp_analysis_share_shift(a, s->cols, s->n_streams * s->n_h);
    SP_TRY(plan_pairs(a, s));
    return s->debiased ? alloc_debiased(a, s) : SP_OK;
}

/* The debiased estimator's extra sums for stream k: row norms of every layer, X_i^T N, n_i . n_j. */
static sp_status add_norm_sums(const sp_analysis *a, cka_state *s, int k, int rows)
{
    const int n_h = s->n_h, d = s->d;
    double *sq = sp_malloc((size_t)rows * sizeof *sq, "cka row norms");
    if (!sq)
        return SP_ERR_NOMEM;
    sp_status st = SP_OK;
    for (int l = 0; l < n_h && st == SP_OK; l++) {
        st = sp_rowops_sqnorms(&s->ro, rows, d, s->shifted[l], sq);
        for (int r = 0; r < rows; r++)
            s->norms[(size_t)r * n_h + l] = sq[r];
    }
    free(sq);
    SP_TRY(st);
    for (size_t i = 0; i < (size_t)rows * n_h; i++)
        s->norms_host[i] = (sp_real)s->norms[i];
    a->be->upload(s->norms_dev, s->norms_host, (size_t)rows * n_h * sizeof *s->norms_host);
    for (int i = 0; i < n_h; i++) {
        /* xn_dev [d, n_h] = X_i^T N, N = [rows, n_h] */
        a->be->gemm(1, 0, d, n_h, rows, (sp_real)1, s->shifted[i], d, s->norms_dev, n_h, (sp_real)0, s->xn_dev, n_h);
        a->be->download(s->xn_host, s->xn_dev, (size_t)d * n_h * sizeof *s->xn_host);
        double *acc = s->xn + ((size_t)k * n_h + i) * d * n_h;
        for (size_t e = 0; e < (size_t)d * n_h; e++)
            acc[e] += s->xn_host[e];
        for (int j = i; j < n_h; j++) {
            double dot = 0;
            for (int r = 0; r < rows; r++)
                dot += s->norms[(size_t)r * n_h + i] * s->norms[(size_t)r * n_h + j];
            s->nn[((size_t)k * n_h + i) * n_h + j] += dot;
        }
    }
    return SP_OK;
}

/* Adds this pass's pairs of stream k, whose shifted rows are in s->shifted. */
static sp_status add_pairs(cka_state *s, int k, int rows)
{
    for (int p = s->first; p < s->end; p++) {
        const cka_pair *o = &s->order[p];
        if (o->k == k)
            SP_TRY(sp_mom_cross_add(pair(s, k, o->i, o->j), s->shifted[o->i], s->shifted[o->j], rows));
    }
    return SP_OK;
}

static sp_status cka_consume(const sp_analysis *a, void *state, const sp_act_batch *b)
{
    cka_state *s = state;
    const int rows = sp_batch_rows(b);
    for (int k = 0; k < s->n_streams; k++) {
        for (int i = 0; i < s->n_h; i++)
            SP_TRY(sp_mom_cols_add(&s->cols[k * s->n_h + i], sp_batch_hidden(b, i, k), rows, s->shifted[i]));
        SP_TRY(add_pairs(s, k, rows));
        if (s->debiased)
            SP_TRY(add_norm_sums(a, s, k, rows));
    }
    return SP_OK;
}

/* A later pass: the same shifted rows, now for the next group of pairs only. */
static sp_status replay_batch(const sp_analysis *a, void *state, const sp_act_batch *b)
{
    (void)a;
    cka_state *s = state;
    const int rows = sp_batch_rows(b);
    for (int k = s->order[s->first].k; k <= s->order[s->end - 1].k; k++) {
        for (int i = 0; i < s->n_h; i++)
            sp_mom_cols_shift(&s->cols[k * s->n_h + i], sp_batch_hidden(b, i, k), rows, s->shifted[i]);
        SP_TRY(add_pairs(s, k, rows));
    }
    return SP_OK;
}

static double frob_sq(size_t n, const double *x)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += x[i] * x[i];
    return sum;
}

static double dot(int n, const double *x, const double *y)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}

/* S_x^T T S_y for T [d, d]. */
static double bilinear(int d, const double *sx, const double *t, const double *sy)
{
    double sum = 0;
    for (int i = 0; i < d; i++)
        sum += sx[i] * dot(d, t + (size_t)i * d, sy);
    return sum;
}

/* Column j of the [d, n_h] matrix sum X_i^T N, into out [d]. */
static void xn_column(const cka_state *s, int k, int i, int j, double *out)
{
    const double *acc = s->xn + ((size_t)k * s->n_h + i) * s->d * s->n_h;
    for (int e = 0; e < s->d; e++)
        out[e] = acc[(size_t)e * s->n_h + j];
}

/* The unbiased HSIC of layers i <= j of stream k (see the header comment) from their cross-product
 * total [d, d] (host) and sum_a n_i[a], sum_a n_j[a] (the traces of the self cross-products). */
static double hsic_unbiased(const cka_state *s, int k, int i, int j, const double *total, double sum_ni,
                            double sum_nj, double *tmp_i, double *tmp_j)
{
    const int d = s->d, n_h = s->n_h;
    const sp_mom_cols *ci = &s->cols[k * n_h + i], *cj = &s->cols[k * n_h + j];
    const double n = (double)ci->n;
    const double n_ij = s->nn[((size_t)k * n_h + i) * n_h + j]; /* sum_a n_i[a] n_j[a] */
    double trace_kl = frob_sq((size_t)d * d, total) - n_ij;
    double one_k = dot(d, ci->sum, ci->sum) - sum_ni, one_l = dot(d, cj->sum, cj->sum) - sum_nj;
    xn_column(s, k, i, j, tmp_i); /* X_i^T n_j */
    xn_column(s, k, j, i, tmp_j); /* X_j^T n_i */
    double kl = bilinear(d, ci->sum, total, cj->sum) - dot(d, ci->sum, tmp_i) - dot(d, cj->sum, tmp_j) + n_ij;
    return (trace_kl + one_k * one_l / ((n - 1) * (n - 2)) - 2 / (n - 2) * kl) / (n * (n - 3));
}

/* CKA matrix from a symmetric HSIC matrix. */
static void normalize(int n, const double *hsic, double *cka)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            cka[i * n + j] = hsic[i * n + j] / sqrt(hsic[i * n + i] * hsic[j * n + j]);
}

static sp_status write_matrices(const sp_analysis *a, int k, int n_h, const double *hsic, double *cka,
                                const char *suffix, const char *estimator)
{
    char name[64], desc[512];
    const int64_t shape[2] = {n_h, n_h};
    normalize(n_h, hsic, cka);
    snprintf(name, sizeof name, "hsic%s", suffix);
    snprintf(desc, sizeof desc, "%s linear-kernel HSIC between layer outputs i and j (0..L)", estimator);
    SP_TRY(sp_out_array(a, NAME, name, k, 2, shape, hsic, "activation^4", "[layer, layer]", desc));
    snprintf(name, sizeof name, "cka%s", suffix);
    snprintf(desc, sizeof desc, "linear CKA = HSIC_ij / sqrt(HSIC_ii HSIC_jj), %s HSIC, layers 0..L", estimator);
    SP_TRY(sp_out_array(a, NAME, name, k, 2, shape, cka, "1", "[layer, layer]", desc));
    double adjacent = 0;
    for (int l = 0; l + 1 < n_h; l++)
        adjacent += cka[l * n_h + l + 1];
    snprintf(name, sizeof name, "adjacent_mean%s", suffix);
    SP_TRY(sp_out_scalar(a, NAME, name, k, adjacent / (n_h - 1)));
    snprintf(name, sizeof name, "first_last%s", suffix);
    return sp_out_scalar(a, NAME, name, k, cka[n_h - 1]);
}

/* Host scratch of finish(). */
typedef struct {
    double *hsic, *hsic_u;       /* [n_streams][n_h, n_h] */
    double *trace;               /* [n_streams][n_h]: sum_a n_l[a] */
    double *cka;                 /* [n_h, n_h] */
    double *total, *cov;         /* [d, d] */
    double *tmp;                 /* [2 d] */
} cka_scratch;

/* Both HSIC estimates of one pair from its totals, read back from the backend; the pair's
 * accumulator is freed afterwards. Needs the traces of i and j (diagonal pairs first). */
static void pair_hsic(cka_state *s, const cka_pair *o, const cka_scratch *w)
{
    const int n_h = s->n_h, d = s->d, k = o->k, i = o->i, j = o->j;
    double *hsic = w->hsic + (size_t)k * n_h * n_h, *hsic_u = w->hsic_u + (size_t)k * n_h * n_h;
    double *trace = w->trace + (size_t)k * n_h;
    sp_mom_cross *x = pair(s, k, i, j);
    sp_mom_cross_download(x, w->total);
    sp_mom_cross_free(x);
    if (i == j) {
        trace[i] = 0;
        for (int e = 0; e < d; e++)
            trace[i] += w->total[(size_t)e * d + e];
    }
    hsic[i * n_h + j] = hsic[j * n_h + i] = sp_mom_hsic(w->total, &s->cols[k * n_h + i], &s->cols[k * n_h + j], w->cov);
    if (s->debiased && s->cols[k * n_h].n >= 4)
        hsic_u[i * n_h + j] = hsic_u[j * n_h + i] =
            hsic_unbiased(s, k, i, j, w->total, trace[i], trace[j], w->tmp, w->tmp + d);
}

/* Every pair's HSIC: this pass's, then a replay of the evaluation set for each later group. */
static sp_status all_pairs(const sp_analysis *a, cka_state *s, const cka_scratch *w)
{
    for (int i = 0; i < s->n_streams * s->n_h; i++)
        SP_TRY(sp_mom_cols_flush(&s->cols[i]));
    /* over MPI ranks: the column sums and the debiased estimator's sums added up once, each pass's
     * pair totals after it */
    SP_TRY(sp_analysis_join_cols(a, s->cols, s->n_streams * s->n_h));
    if (s->debiased) {
        SP_TRY(sp_analysis_sum(a, s->xn, (size_t)s->n_streams * s->n_h * s->d * s->n_h));
        SP_TRY(sp_analysis_sum(a, s->nn, (size_t)s->n_streams * s->n_h * s->n_h));
    }
    const int passes = (s->n_pairs + s->per_pass - 1) / s->per_pass;
    const double pair_mib = (double)s->d * s->d * 8 / 1048576.0;
    if (passes > 1 && !a->quiet)
        fprintf(stderr,
                "cka: %d layer pairs of %.3g MiB (fp64 d x d totals), %.3g GiB in all: %d passes over the evaluation "
                "set, %d pairs (%.3g GiB) each (--cka-pairs-per-pass, or a quarter of --max-memory-gib)\n",
                s->n_pairs, pair_mib, s->n_pairs * pair_mib / 1024, passes, s->per_pass, s->per_pass * pair_mib / 1024);
    for (;;) {
        for (int p = s->first; p < s->end; p++)
            SP_TRY(sp_analysis_join_cross(a, pair(s, s->order[p].k, s->order[p].i, s->order[p].j)));
        for (int p = s->first; p < s->end; p++)
            pair_hsic(s, &s->order[p], w);
        if (s->end == s->n_pairs)
            return SP_OK;
        SP_TRY(start_pass(a, s, s->end));
        SP_TRY(sp_analysis_replay(a, replay_batch, s));
    }
}

static sp_status write_stream(const sp_analysis *a, cka_state *s, int k, const cka_scratch *w)
{
    const int n_h = s->n_h;
    const double n = (double)s->cols[k * n_h].n;
    const size_t at = (size_t)k * n_h * n_h;
    SP_TRY(write_matrices(a, k, n_h, w->hsic + at, w->cka, "", "biased (centered Gram matrices)"));
    SP_TRY(sp_out_scalar(a, NAME, "tokens", k, n));
    SP_TRY(sp_out_scalar(a, NAME, "passes", k, (double)((s->n_pairs + s->per_pass - 1) / s->per_pass)));
    if (!s->debiased)
        return SP_OK;
    if (n < 4)
        return sp_error(SP_ERR_INPUT, "cka: the debiased estimator needs at least 4 tokens, found %.0f", n);
    return write_matrices(a, k, n_h, w->hsic_u + at, w->cka, "_debiased", "unbiased (Song et al. 2012)");
}

static sp_status cka_finish(const sp_analysis *a, void *state)
{
    cka_state *s = state;
    const size_t n_h = (size_t)s->n_h, d = (size_t)s->d, ns = (size_t)s->n_streams;
    double *buf = sp_calloc(2 * ns * n_h * n_h + ns * n_h + n_h * n_h + 2 * d * d + 2 * d, sizeof *buf, "cka results");
    sp_status st = buf ? SP_OK : SP_ERR_NOMEM;
    if (buf) {
        cka_scratch w = {.hsic = buf, .hsic_u = buf + ns * n_h * n_h};
        w.trace = w.hsic_u + ns * n_h * n_h;
        w.cka = w.trace + ns * n_h;
        w.total = w.cka + n_h * n_h;
        w.cov = w.total + d * d;
        w.tmp = w.cov + d * d;
        st = all_pairs(a, s, &w);
        for (int k = 0; k < s->n_streams && st == SP_OK; k++)
            st = write_stream(a, s, k, &w);
    }
    free(buf);
    cka_free(s);
    return st;
}

const sp_analyzer sp_analyzer_cka = {
    .name = NAME,
    .description = "linear CKA between every pair of layer outputs (centered; debiased HSIC as an option)",
    .needs = SP_NEEDS_ACTIVATIONS,
    .begin = cka_begin,
    .consume = cka_consume,
    .finish = cka_finish,
    .discard = cka_free,
};
