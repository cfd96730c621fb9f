/* analyzers/curvature.c: "curvature", per block l the dominant eigenvalue of H_ll, the Hessian of
 * the mean next-token loss restricted to block l's parameters (every tensor of blocks/<l>/), and a
 * Hutchinson estimate of its trace, from exact Hessian-vector products (sp_model_hvp: forward mode
 * over the backward pass; PyHessian, Yao et al. 2020, takes the same two quantities through
 * PyTorch's double backward).
 *
 * The loss is the mean over the counted targets of the first curv_seqs evaluation sequences, one
 * forward pass (fewer sequences when they do not fit the memory budget: a warning says so).
 *   - Power iteration: v_0 seeded N(0, I), unit; w = H v_k, lambda_k = v_k^T w, v_{k+1} = w / |w|;
 *     stop when lambda changes by at most power_tol relative, or after curv_iters products. It
 *     converges to the eigenvalue of largest magnitude, with its sign (negative when the block's
 *     loss is locally concave along its dominant direction).
 *   - Hutchinson: tr(H) ~ (1/S) sum_s z_s^T H z_s with S = hutchinson_samples seeded Rademacher z;
 *     the standard error is the samples' standard deviation over sqrt(S) (NaN for S = 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyzers/model_eval.h"
#include "analyzers/progress.h"
#include "analyzers/ranks.h"
#include "core/rng.h"

#define NAME "curvature"

typedef struct {
    int L, S, n_seqs;
    double loss;
    double *lambda, *iters, *trace, *stderr_, *n_params, *per_param; /* [L] */
    double *samples;                                                 /* [L, S] */
    int not_converged;
    sp_real *v, *hv; /* backend, the largest block's parameter count */
    sp_real *host;   /* host scratch of the same size */
    sp_progress progress;
} curv_run;

/* A distinct seed for each block's start vector (kind 0) and probes (kind 1). */
static uint64_t run_seed(const sp_analysis *a, int kind, int l)
{
    return (uint64_t)a->opts->seed * 0x9E3779B97F4A7C15ull + (uint64_t)kind * 1000003u + (uint64_t)l + 77u;
}

/* v = N(0, I) (rademacher 0) or uniform signs (1) from seed, uploaded. */
static void draw(const sp_analysis *a, curv_run *c, size_t n, uint64_t seed, int rademacher)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++)
        c->host[i] = (sp_real)(rademacher ? (sp_rng_below(&rng, 2) ? 1.0 : -1.0) : sp_rng_normal(&rng));
    a->be->upload(c->v, c->host, n * sizeof(sp_real));
}

static sp_status power_iteration(const sp_analysis *a, curv_run *c, int l, size_t n)
{
    const sp_backend *be = a->be;
    draw(a, c, n, run_seed(a, 0, l), 0);
    be->scale(n, (sp_real)(1.0 / sqrt(be->sumsq(n, c->v))), c->v);
    double lambda = NAN;
    int k = 0, converged = 0;
    while (k < a->opts->curv_iters && !converged) {
        SP_TRY(sp_model_hvp(a->model, l, c->v, c->hv));
        k++;
        const double prev = lambda, norm = sqrt(be->sumsq(n, c->hv));
        lambda = be->dot(n, c->v, c->hv);
        converged = norm == 0 || fabs(lambda - prev) <= a->opts->power_tol * fabs(lambda);
        if (norm > 0)
            be->axpby(n, (sp_real)(1.0 / norm), c->hv, 0, c->v);
    }
    c->lambda[l] = lambda;
    c->iters[l] = k;
    c->not_converged += !converged;
    return SP_OK;
}

static sp_status hutchinson(const sp_analysis *a, curv_run *c, int l, size_t n)
{
    double *s = c->samples + (size_t)l * c->S, sum = 0, sq = 0;
    for (int i = 0; i < c->S; i++) {
        draw(a, c, n, run_seed(a, 1, l) + (uint64_t)i * 7919u, 1);
        SP_TRY(sp_model_hvp(a->model, l, c->v, c->hv));
        s[i] = a->be->dot(n, c->v, c->hv);
        sum += s[i];
    }
    const double mean = sum / c->S;
    for (int i = 0; i < c->S; i++)
        sq += (s[i] - mean) * (s[i] - mean);
    c->trace[l] = mean;
    c->stderr_[l] = c->S > 1 ? sqrt(sq / (c->S - 1) / c->S) : NAN;
    c->per_param[l] = mean / (double)n;
    return SP_OK;
}

/* The forward pass whose loss is differentiated: the first n_seqs sequences that fit. */
static sp_status forward(const sp_analysis *a, curv_run *c)
{
    const int want = a->opts->curv_seqs < a->n_seqs ? a->opts->curv_seqs : a->n_seqs;
    const int fit = sp_eval_fit_copies(a, want, a->seq_len);
    if (fit < want)
        fprintf(stderr, "analyze: warning: curvature: --curv-seqs %d: %d sequences of %d tokens fit in half of "
                        "--max-memory-gib %g: the loss of the first %d\n",
                want, fit, a->seq_len, a->opts->max_memory_gib, fit);
    c->n_seqs = fit > 0 ? fit : 1; /* the streaming pass already ran batches of seq_len tokens */
    return sp_model_forward(a->model, a->tokens, a->targets, c->n_seqs, a->seq_len, &c->loss);
}

/* Over MPI ranks: every block's results from the rank that computed them (the others hold zeros:
 * the sum is exact). The per-block arrays lie in one buffer, n_params (every rank's) fifth. */
static sp_status join_ranks(const sp_analysis *a, curv_run *c)
{
    const size_t L = (size_t)c->L;
    double not_converged = c->not_converged;
    SP_TRY(sp_analysis_sum(a, &not_converged, 1));
    c->not_converged = (int)not_converged;
    SP_TRY(sp_analysis_sum(a, c->lambda, 4 * L));
    return sp_analysis_sum(a, c->per_param, L + L * (size_t)c->S);
}

static sp_status measure(const sp_analysis *a, curv_run *c)
{
    SP_TRY(forward(a, c));
    size_t most = 0;
    for (int l = 0; l < c->L; l++) {
        size_t offset, n;
        sp_model_block_param_range(a->model, l, &offset, &n);
        c->n_params[l] = (double)n;
        most = n > most ? n : most;
    }
    c->v = a->be->alloc(most * sizeof(sp_real), "curvature vector");
    c->hv = c->v ? a->be->alloc(most * sizeof(sp_real), "curvature product") : NULL;
    c->host = c->hv ? sp_malloc(most * sizeof(sp_real), "curvature probes") : NULL;
    if (!c->host)
        return SP_ERR_NOMEM;
    for (int l = 0; l < c->L; l++) {
        const size_t n = (size_t)c->n_params[l];
        if (!sp_analysis_owns(a, l)) /* another MPI rank's block: its entries stay 0 here */
            continue;
        SP_TRY(power_iteration(a, c, l, n));
        SP_TRY(hutchinson(a, c, l, n));
        sp_progress_update(&c->progress, l + 1, c->L);
    }
    SP_TRY(sp_model_sync(a->model));
    return join_ranks(a, c);
}

static sp_status write_result(const sp_analysis *a, const curv_run *c)
{
    sp_report *r = a->report;
    const int64_t L = c->L;
    const struct {
        const char *name;
        int rank;
        int64_t shape[2];
        const double *data;
        const char *units, *shape_desc, *description;
    } arrays[] = {
        {"lambda_max", 1, {L}, c->lambda, "loss / param^2", "[block]",
         "eigenvalue of largest magnitude of H_ll, the loss Hessian restricted to block l's parameters (power iteration)"},
        {"lambda_iters", 1, {L}, c->iters, "iterations", "[block]", "Hessian-vector products taken for lambda_max"},
        {"trace", 1, {L}, c->trace, "loss / param^2", "[block]", "Hutchinson estimate of tr(H_ll)"},
        {"trace_stderr", 1, {L}, c->stderr_, "loss / param^2", "[block]",
         "standard error of trace: the probes' standard deviation / sqrt(probes)"},
        {"trace_per_param", 1, {L}, c->per_param, "loss / param^2", "[block]",
         "trace / the block's parameter count: the mean eigenvalue of H_ll"},
        {"trace_samples", 2, {L, c->S}, c->samples, "loss / param^2", "[block, probe]", "z^T H_ll z of every Rademacher probe z"},
        {"n_params", 1, {L}, c->n_params, "1", "[block]", "parameters of each block (the dimension of H_ll)"},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(arrays); i++)
        SP_TRY(sp_report_write_array(r, NAME, arrays[i].name, arrays[i].rank, arrays[i].shape, arrays[i].data,
                                     &(sp_report_array_attrs){arrays[i].units, arrays[i].shape_desc,
                                                              arrays[i].description}));
    int top = 0;
    double trace_sum = 0;
    for (int l = 0; l < c->L; l++) {
        top = fabs(c->lambda[l]) > fabs(c->lambda[top]) ? l : top;
        trace_sum += c->trace[l];
    }
    const struct {
        const char *key;
        double value;
    } scalars[] = {
        {"lambda_max_max", c->lambda[top]},
        {"lambda_max_block", top},
        {"lambda_max_first", c->lambda[0]},
        {"lambda_max_last", c->lambda[c->L - 1]},
        {"trace_sum", trace_sum},
        {"not_converged", c->not_converged},
        {"hutchinson_samples", c->S},
        {"n_seqs", c->n_seqs},
        {"loss", c->loss},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(scalars); i++)
        SP_TRY(sp_report_set_scalar(r, NAME, scalars[i].key, scalars[i].value));
    return SP_OK;
}

static sp_status curvature_finish(const sp_analysis *a, void *state)
{
    (void)state;
    curv_run c = {.L = a->n_layers, .S = a->opts->hutchinson_samples};
    const size_t L = (size_t)c.L;
    double *buf = sp_calloc(6 * L + L * (size_t)c.S, sizeof *buf, "curvature results");
    if (!buf)
        return SP_ERR_NOMEM;
    double **per_layer[] = {&c.lambda, &c.iters, &c.trace, &c.stderr_, &c.n_params, &c.per_param}; /* join_ranks */
    for (size_t i = 0; i < SP_ARRAY_LEN(per_layer); i++)
        *per_layer[i] = buf + i * L;
    c.samples = buf + 6 * L;
    sp_progress_start(&c.progress, NAME, a->quiet);
    sp_status st = measure(a, &c);
    sp_progress_end(&c.progress);
    if (st == SP_OK)
        st = write_result(a, &c);
    sp_real *dev[] = {c.v, c.hv};
    for (size_t i = 0; i < SP_ARRAY_LEN(dev); i++)
        if (dev[i])
            a->be->free(dev[i]);
    free(c.host);
    free(buf);
    return st;
}

const sp_analyzer sp_analyzer_curvature = {
    .name = NAME,
    .description = "per block: top eigenvalue and Hutchinson trace of the loss Hessian, exact HVPs",
    .needs = SP_NEEDS_MODEL,
    .opt_in = 1,
    .finish = curvature_finish,
};
