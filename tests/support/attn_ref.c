#include "tests/support/attn_ref.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/support/assert_err.h"
#include "tests/support/model_fixture.h"

#define NAME "attention"

/* What the analyzer reports, from the reference. */
typedef struct {
    int n_layers, n_heads;
    int64_t queries;                                            /* per head: n_seqs * (seq_len - skip) */
    double *entropy, *normalized, *sink, *distance, *max_logit; /* [layer, head] */
    double *head_cos;                                           /* [layer, head, head] */
    double *redundancy, *block_normalized;                      /* [layer] */
} attn_ref;

static double *zeros(size_t n)
{
    double *p = calloc(n, sizeof *p);
    if (!p)
        abort();
    return p;
}

/* Sums over the counted queries of one block, per head (and head pair). */
typedef struct {
    double *entropy, *normalized, *sink, *distance, *max_logit, *cos; /* [H] each, cos [H, H] */
    int64_t multi_key;                                                /* queries that see two keys or more */
} block_sums;

/* Probabilities p[h][0..n) of query i over its visible keys lo..i (n = i - lo + 1) for every head,
 * from the host copies of q [rows, H hd] and k [rows, KV hd] of sequence b, and the largest score
 * per head as the softmax sees it (scaled, soft-capped) in max_score[h]. */
static void probabilities(const sp_attn_shape *sh, const sp_real *q, const sp_real *k, int b, int i, int lo,
                          double *p, double *max_score)
{
    const int T = sh->seq_len, H = sh->n_heads, hd = sh->head_dim, n = i - lo + 1;
    const int group = H / sh->n_kv_heads, kv_width = sh->n_kv_heads * hd;
    for (int h = 0; h < H; h++) {
        double *ph = p + (size_t)h * T, max = -INFINITY, sum = 0;
        const sp_real *qi = q + ((size_t)b * T + i) * H * hd + (size_t)h * hd;
        for (int j = 0; j < n; j++) {
            const sp_real *kj = k + ((size_t)b * T + lo + j) * kv_width + (size_t)(h / group) * hd;
            double s = 0;
            for (int d = 0; d < hd; d++)
                s += (double)qi[d] * (double)kj[d];
            s *= sh->scale;
            ph[j] = sh->softcap > 0 ? sh->softcap * tanh(s / sh->softcap) : s;
            max = fmax(max, ph[j]);
        }
        for (int j = 0; j < n; j++)
            sum += exp(ph[j] - max);
        for (int j = 0; j < n; j++)
            ph[j] = exp(ph[j] - max) / sum;
        max_score[h] = max;
    }
}

/* Adds query i (probabilities p, keys lo..i, scores' maximum per head in max_score) into s. */
static void add_query(const sp_attn_shape *sh, int i, int lo, const double *p, const double *max_score,
                      block_sums *s)
{
    const int T = sh->seq_len, H = sh->n_heads, n = i - lo + 1;
    for (int h = 0; h < H; h++) {
        const double *ph = p + (size_t)h * T;
        double entropy = 0, distance = 0;
        for (int j = 0; j < n; j++) {
            entropy -= ph[j] > 0 ? ph[j] * log(ph[j]) : 0;
            distance += ph[j] * (i - (lo + j));
        }
        s->entropy[h] += entropy;
        s->normalized[h] += n > 1 ? entropy / log(n) : 0;
        s->sink[h] += lo == 0 ? ph[0] : 0;
        s->distance[h] += distance;
        s->max_logit[h] = fmax(s->max_logit[h], max_score[h]);
        for (int g = 0; n > 1 && g < H; g++) {
            const double *pg = p + (size_t)g * T;
            double dot = 0, nh = 0, ng = 0;
            for (int j = 0; j < n; j++) {
                dot += ph[j] * pg[j];
                nh += ph[j] * ph[j];
                ng += pg[j] * pg[j];
            }
            s->cos[h * H + g] += dot / sqrt(nh * ng);
        }
    }
    s->multi_key += n > 1;
}

static void reference_block(an_run *r, attn_ref *ref, int l)
{
    sp_model *m = r->a.model;
    const sp_real *dq, *dk;
    sp_attn_shape sh;
    assert_int_equal(sp_model_attention_qk(m, l, &dq, &dk, &sh), SP_OK);
    const int T = sh.seq_len, H = sh.n_heads, rows = sh.batch * T;
    sp_real *q = fixture_download(m, dq, (size_t)rows * H * sh.head_dim);
    sp_real *k = fixture_download(m, dk, (size_t)rows * sh.n_kv_heads * sh.head_dim);
    double *p = zeros((size_t)H * T), *mx = zeros((size_t)H);
    const size_t at = (size_t)l * H;
    block_sums s = {ref->entropy + at, ref->normalized + at, ref->sink + at, ref->distance + at,
                    ref->max_logit + at, ref->head_cos + at * H, 0};
    for (int h = 0; h < H; h++)
        s.max_logit[h] = -INFINITY;
    for (int b = 0; b < sh.batch; b++)
        for (int i = r->a.skip_positions; i < T; i++) {
            const int lo = sh.window > 0 && i - sh.window + 1 > 0 ? i - sh.window + 1 : 0; /* the last `window` keys */
            probabilities(&sh, q, k, b, i, lo, p, mx);
            add_query(&sh, i, lo, p, mx, &s);
        }
    const double n = (double)ref->queries, n_multi = (double)s.multi_key;
    double pairs = 0, normalized = 0;
    for (int h = 0; h < H; h++) {
        s.entropy[h] /= n;
        s.normalized[h] /= n_multi;
        s.sink[h] /= n;
        s.distance[h] /= n;
        normalized += s.normalized[h] / H;
        for (int g = 0; g < H; g++) {
            s.cos[h * H + g] /= n_multi;
            pairs += g > h ? s.cos[h * H + g] : 0;
        }
    }
    ref->redundancy[l] = H > 1 ? pairs / (H * (H - 1) / 2.0) : NAN;
    ref->block_normalized[l] = normalized;
    free(q);
    free(k);
    free(p);
    free(mx);
}

/* The reference for the evaluation set of r, counting the queries at positions >= skip_positions. */
static void compute(an_run *r, attn_ref *ref)
{
    sp_model *m = r->a.model;
    const sp_config *cfg = sp_model_config(m);
    const int L = cfg->n_layers, H = cfg->n_heads;
    const size_t n = (size_t)L * H;
    *ref = (attn_ref){.n_layers = L, .n_heads = H,
                      .queries = (int64_t)r->a.n_seqs * (r->a.seq_len - r->a.skip_positions),
                      .entropy = zeros(n), .normalized = zeros(n), .sink = zeros(n), .distance = zeros(n),
                      .max_logit = zeros(n), .head_cos = zeros(n * H), .redundancy = zeros((size_t)L),
                      .block_normalized = zeros((size_t)L)};
    assert_int_equal(sp_model_forward(m, r->tokens, NULL, r->a.n_seqs, r->a.seq_len, NULL), SP_OK);
    for (int l = 0; l < L; l++)
        reference_block(r, ref, l);
}

static void ref_free(attn_ref *ref)
{
    free(ref->entropy);
    free(ref->normalized);
    free(ref->sink);
    free(ref->distance);
    free(ref->max_logit);
    free(ref->head_cos);
    free(ref->redundancy);
    free(ref->block_normalized);
    *ref = (attn_ref){0};
}

static void expect_close(double got, double want, double tol, const char *name, const char *what, int at)
{
    if (isnan(want)) {
        assert_true(isnan(got));
        return;
    }
    assert_below(fabs(got - want) / fmax(fabs(want), 1), tol, "%s: %s[%d] = %.17g, reference %.17g", name, what, at,
                 got, want);
}

static void expect_array(an_run *r, const char *array, const double *want, int rank, int d0, int d1, double tol,
                         const char *name)
{
    sp_report_array a = an_run_array(r, NAME, array);
    assert_int_equal(a.rank, rank);
    assert_int_equal(a.shape[0], d0);
    int64_t n = d0;
    for (int k = 1; k < rank; k++) {
        assert_int_equal(a.shape[k], d1);
        n *= d1;
    }
    for (int64_t i = 0; i < n; i++)
        expect_close(a.data[i], want[i], tol, name, array, (int)i);
    sp_report_array_free(&a);
}

/* The first index of the smallest (sign 1) or largest (sign -1) of v[n]. */
static int arg_extreme(const double *v, int n, int sign)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        best = sign * v[i] < sign * v[best] ? i : best;
    return best;
}

static double mean(const double *v, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    return sum / n;
}

static void expect_key(an_run *r, const char *key, double want, double tol, const char *name)
{
    expect_close(an_run_scalar(r, NAME, key), want, tol, name, key, 0);
}

static void expect_reference(an_run *r, const attn_ref *ref, double tol, const char *name)
{
    const int L = ref->n_layers, H = ref->n_heads, n = L * H;
    expect_array(r, "entropy", ref->entropy, 2, L, H, tol, name);
    expect_array(r, "entropy_normalized", ref->normalized, 2, L, H, tol, name);
    expect_array(r, "sink_mass", ref->sink, 2, L, H, tol, name);
    expect_array(r, "distance", ref->distance, 2, L, H, tol, name);
    expect_array(r, "max_logit", ref->max_logit, 2, L, H, tol, name);
    expect_array(r, "head_cosine", ref->head_cos, 3, L, H, tol, name);
    expect_array(r, "redundancy", ref->redundancy, 1, L, 0, tol, name);
    assert_int_equal((int64_t)an_run_scalar(r, NAME, "queries"), ref->queries);
    const int e_min = arg_extreme(ref->entropy, n, 1), n_min = arg_extreme(ref->normalized, n, 1);
    const int sink_max = arg_extreme(ref->sink, n, -1), logit_max = arg_extreme(ref->max_logit, n, -1);
    const int layer_min = arg_extreme(ref->block_normalized, L, 1);
    expect_key(r, "entropy_min", ref->entropy[e_min], tol, name);
    assert_int_equal((int)an_run_scalar(r, NAME, "entropy_min_block"), e_min / H);
    assert_int_equal((int)an_run_scalar(r, NAME, "entropy_min_head"), e_min % H);
    expect_key(r, "entropy_mean", mean(ref->entropy, n), tol, name);
    expect_key(r, "entropy_normalized_min", ref->normalized[n_min], tol, name);
    expect_key(r, "entropy_normalized_mean", mean(ref->normalized, n), tol, name);
    expect_key(r, "entropy_normalized_block_min", ref->block_normalized[layer_min], tol, name);
    assert_int_equal((int)an_run_scalar(r, NAME, "entropy_normalized_block_min_block"), layer_min);
    expect_key(r, "sink_mass_max", ref->sink[sink_max], tol, name);
    assert_int_equal((int)an_run_scalar(r, NAME, "sink_mass_max_block"), sink_max / H);
    expect_key(r, "sink_mass_mean", mean(ref->sink, n), tol, name);
    expect_key(r, "distance_mean", mean(ref->distance, n), tol, name);
    expect_key(r, "max_logit", ref->max_logit[logit_max], tol, name);
    assert_int_equal((int)an_run_scalar(r, NAME, "max_logit_block"), logit_max / H);
    if (H < 2) { /* no pair of heads: redundancy is NaN, its keys null */
        assert_int_equal((int)an_run_scalar(r, NAME, "redundancy_max_block"), -1);
        return;
    }
    const int red_max = arg_extreme(ref->redundancy, L, -1);
    expect_key(r, "redundancy_max", ref->redundancy[red_max], tol, name);
    assert_int_equal((int)an_run_scalar(r, NAME, "redundancy_max_block"), red_max);
    expect_key(r, "redundancy_mean", mean(ref->redundancy, L), tol, name);
}

void attn_ref_run(an_run *r, sp_model *m, int seq_len, int skip, uint64_t seed, const char *file)
{
    an_run_setup(r, m, ATTN_REF_SEQS, seq_len, ATTN_REF_BATCH, seed);
    r->opts.skip_positions = skip;
    r->a.skip_positions = skip;
    assert_int_equal(an_run_execute(r, NAME, file), SP_OK);
}

void attn_ref_check(sp_model *m, int seq_len, int skip, uint64_t seed, double tol, const char *name)
{
    for (int k = 0; k <= skip; k += skip > 0 ? skip : 1) {
        char what[128];
        snprintf(what, sizeof what, "%s, skip %d", name, k);
        an_run r;
        attn_ref_run(&r, m, seq_len, k, seed, "attention.h5");
        attn_ref ref;
        compute(&r, &ref);
        expect_reference(&r, &ref, tol, what);
        ref_free(&ref);
        an_run_free(&r);
    }
}
