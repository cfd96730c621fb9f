/* analyzers/weights_alpha.c: the weights analyzer's power-law exponents (analyzers/weights_alpha.h). */
#include "analyzers/weights_alpha.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyzers/powerlaw.h"

/* WeightWatcher's defaults for which matrices it fits (analyze(min_evals=8, max_evals=15000,
 * max_N=50000)); the upper ones also bound the fit's cost. */
#define MIN_EVALS 8
#define MAX_EVALS 15000
#define MAX_N 50000
/* WeightWatcher's reading of alpha (constants.py OVER_TRAINED_THRESH, UNDER_TRAINED_THRESH): below 2
 * "over-trained", above 6 "under-trained". */
#define ALPHA_LOW 2.0
#define ALPHA_HIGH 6.0

enum { F_ALPHA, F_XMIN, F_KS_D, F_N_TAIL, N_FIELDS };
_Static_assert(N_FIELDS == SP_WEIGHTS_ALPHA_FIELDS, "the fields of weights_alpha.h");

double *sp_weights_alpha_cell(const sp_weights_alpha *t, int field, int block, int kind)
{
    return &t->cells[((size_t)field * t->n_blocks + (size_t)block) * t->n_kinds + (size_t)kind];
}

sp_status sp_weights_alpha_init(sp_weights_alpha *t, int n_blocks, int n_kinds)
{
    const size_t n = (size_t)N_FIELDS * (size_t)n_blocks * (size_t)n_kinds;
    *t = (sp_weights_alpha){.n_blocks = n_blocks, .n_kinds = n_kinds,
                            .cells = sp_malloc(n * sizeof *t->cells, "power-law fits")};
    if (!t->cells)
        return SP_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        t->cells[i] = NAN;
    return SP_OK;
}

sp_status sp_weights_alpha_fit(sp_weights_alpha *t, int block, int kind, int rows, int cols, const double *sv)
{
    const int k = rows < cols ? rows : cols, big = rows < cols ? cols : rows;
    if (k < MIN_EVALS || k > MAX_EVALS || big > MAX_N)
        return SP_OK;
    double *lambda = sp_malloc((size_t)k * sizeof *lambda, "eigenvalues of W^T W");
    if (!lambda)
        return SP_ERR_NOMEM;
    for (int i = 0; i < k; i++)
        lambda[i] = sv[i] * sv[i];
    sp_powerlaw fit;
    sp_status st = sp_powerlaw_fit(k, lambda, &fit);
    free(lambda);
    if (st == SP_OK && !isnan(fit.alpha)) {
        *sp_weights_alpha_cell(t, F_ALPHA, block, kind) = fit.alpha;
        *sp_weights_alpha_cell(t, F_XMIN, block, kind) = fit.xmin;
        *sp_weights_alpha_cell(t, F_KS_D, block, kind) = fit.ks_d;
        *sp_weights_alpha_cell(t, F_N_TAIL, block, kind) = fit.n_tail;
    }
    return st;
}

static sp_status write_summary(const sp_weights_alpha *t, sp_report *r, const char *group,
                               const char *const *kind_names)
{
    double all = 0;
    int n_all = 0, n_outside = 0;
    sp_status st = SP_OK;
    for (int kind = 0; kind < t->n_kinds && st == SP_OK; kind++) {
        double sum = 0;
        int n = 0;
        for (int b = 0; b < t->n_blocks; b++) {
            const double alpha = *sp_weights_alpha_cell(t, F_ALPHA, b, kind);
            if (isnan(alpha))
                continue;
            sum += alpha;
            n++;
            n_outside += alpha < ALPHA_LOW || alpha > ALPHA_HIGH;
        }
        all += sum;
        n_all += n;
        char key[64];
        snprintf(key, sizeof key, "alpha_%s_mean", kind_names[kind]);
        if (n > 0)
            st = sp_report_set_scalar(r, group, key, sum / n);
    }
    if (st == SP_OK)
        st = sp_report_set_scalar(r, group, "alpha_mean", n_all ? all / n_all : NAN);
    if (st == SP_OK)
        st = sp_report_set_scalar(r, group, "alpha_outside_2_6_fraction", n_all ? (double)n_outside / n_all : NAN);
    return st == SP_OK ? sp_report_set_scalar(r, group, "n_alpha_fits", n_all) : st;
}

sp_status sp_weights_alpha_write(const sp_weights_alpha *t, sp_report *r, const char *group,
                                 const char *const *kind_names)
{
    static const struct {
        const char *name, *units, *what;
    } fields[N_FIELDS] = {
        {"alpha", "1", "power-law exponent alpha of the ESD of W^T W (WeightWatcher's fit)"},
        {"alpha_xmin", "squared weight units", "the fitted tail's smallest eigenvalue xmin"},
        {"alpha_ks_d", "1", "Kolmogorov-Smirnov distance D of the tail to the fitted power law"},
        {"alpha_n_tail", "eigenvalues", "eigenvalues >= xmin (WeightWatcher's num_pl_spikes)"},
    };
    char columns[128] = "", desc[320];
    for (int kind = 0, at = 0; kind < t->n_kinds; kind++)
        at += snprintf(columns + at, sizeof columns - (size_t)at, "%s%s", kind ? ", " : "", kind_names[kind]);
    sp_status st = SP_OK;
    for (int f = 0; f < N_FIELDS && st == SP_OK; f++) {
        snprintf(desc, sizeof desc, "%s of each whole block matrix (NaN: absent or not fitted); columns: %s",
                 fields[f].what, columns);
        st = sp_report_write_array(r, group, fields[f].name, 2, (int64_t[]){t->n_blocks, t->n_kinds},
                                   sp_weights_alpha_cell(t, f, 0, 0),
                                   &(sp_report_array_attrs){fields[f].units, "[block, matrix]", desc});
    }
    return st == SP_OK ? write_summary(t, r, group, kind_names) : st;
}

void sp_weights_alpha_free(sp_weights_alpha *t)
{
    free(t->cells);
    t->cells = NULL;
}
