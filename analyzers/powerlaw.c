/* analyzers/powerlaw.c: WeightWatcher's power-law fit of a tail (analyzers/powerlaw.h). */
#include "analyzers/powerlaw.h"

#include <math.h>
#include <stdlib.h>

#define SMALL_N 20              /* below it, WeightWatcher's small-N fit (WW_powerlaw.SMALL_N_CUTOFF) */
#define SMALL_MIN_TAIL 8        /* the small-N fit's shortest tail (k_min) */
#define SMALL_MIN_LOG_SUM 1e-12 /* the small-N fit's degenerate-tail cut on sum ln(x / xmin) */

/* The sorted values above the floor, as logs, and the fit's rule. */
typedef struct {
    int n;             /* values in the fit */
    const double *lx;  /* ln x, ascending [n] */
    int small;         /* the small-N fit */
} tail_set;

static int cmp_ascending(const void *p, const void *q)
{
    const double a = *(const double *)p, b = *(const double *)q;
    return (a > b) - (a < b);
}

/* |F(x_j) - (j - i) / n| for the law of exponent alpha from x_i: one point of the KS scan. x_j = x_i
 * gives F = 0 even for alpha = +inf (WWFit's 1 ** -inf = 1). */
static double deviation(const tail_set *t, int i, int j, double alpha)
{
    const double log_ratio = t->lx[j] - t->lx[i];
    const double cdf = log_ratio == 0 ? 0 : 1 - exp((1 - alpha) * log_ratio);
    return fabs(cdf - (double)(j - i) / (t->n - i));
}

/* The KS distance of the tail from x_i to the law of exponent alpha; returns early, with a value
 * above `stop`, once one point's deviation exceeds it. *peak (a tail index) is looked at first and
 * left where the deviation was largest or gave up. */
static double ks_distance(const tail_set *t, int i, double alpha, double stop, int *peak)
{
    int at = *peak;
    double worst = deviation(t, i, at, alpha);
    for (int j = i; j < t->n && worst <= stop; j++) {
        const double dev = deviation(t, i, j, alpha);
        if (dev > worst) {
            worst = dev;
            at = j;
        }
    }
    *peak = at;
    return worst;
}

/* The exponent of the tail from x_i whose sum of ln(x / x_i) is log_sum; NaN where the small-N fit
 * leaves the candidate out (its D stays 1 there, so it never wins against one it keeps: every kept
 * candidate has D < 1). `relaxed`: without the shortest-tail rule, the small-N fit's fallback. */
static double tail_alpha(const tail_set *t, int i, double log_sum, int relaxed)
{
    const double n = t->n - i;
    if (!t->small)
        return 1 + n / log_sum; /* +inf for a tail of equal values, as in WWFit */
    if ((n < SMALL_MIN_TAIL && !relaxed) || log_sum <= SMALL_MIN_LOG_SUM)
        return NAN;
    return 1 + (n - 1) / log_sum;
}

/* Scans the candidates from the top down (so the tail sums run along), keeping the one of least D;
 * a later (smaller) xmin wins ties, as numpy's first argmin does. Returns its index, -1 when the
 * small-N rules left every candidate out. */
static int best_candidate(const tail_set *t, double *alpha, double *ks_d)
{
    double log_tail_sum = t->lx[t->n - 1], best = INFINITY;
    int best_i = -1, peak = t->n - 1;
    for (int i = t->n - 2; i >= 0; i--) {
        log_tail_sum += t->lx[i];
        const double a = tail_alpha(t, i, log_tail_sum - (t->n - i) * t->lx[i], 0);
        if (isnan(a))
            continue;
        const double d = a > 1 ? ks_distance(t, i, a, best, &peak) : 1;
        if (d <= best) {
            best = d;
            best_i = i;
            *alpha = a;
            *ks_d = d;
        }
    }
    return best_i;
}

/* The small-N fit's fallback when no tail qualified: the whole set, if its sum is above the cut.
 * Returns 0 (the candidate's index), or -1. */
static int whole_set(const tail_set *t, double *alpha, double *ks_d)
{
    double log_sum = 0;
    for (int j = 1; j < t->n; j++)
        log_sum += t->lx[j] - t->lx[0];
    *alpha = tail_alpha(t, 0, log_sum, 1);
    if (isnan(*alpha))
        return -1;
    int peak = 0;
    *ks_d = ks_distance(t, 0, *alpha, INFINITY, &peak);
    return 0;
}

sp_status sp_powerlaw_fit(int n, const double *values, sp_powerlaw *fit)
{
    *fit = (sp_powerlaw){.alpha = NAN, .xmin = NAN, .ks_d = NAN, .n_tail = 0};
    double *x = sp_malloc((size_t)(n > 0 ? n : 1) * 2 * sizeof *x, "power-law fit values");
    if (!x)
        return SP_ERR_NOMEM;
    int kept = 0;
    for (int j = 0; j < n; j++)
        if (values[j] > SP_POWERLAW_FLOOR)
            x[kept++] = values[j];
    qsort(x, (size_t)kept, sizeof *x, cmp_ascending);
    double *lx = x + kept;
    for (int j = 0; j < kept; j++)
        lx[j] = log(x[j]);
    const tail_set t = {.n = kept, .lx = lx, .small = kept < SMALL_N};
    int at = kept > 1 ? best_candidate(&t, &fit->alpha, &fit->ks_d) : -1;
    if (kept > 1 && at < 0)
        at = whole_set(&t, &fit->alpha, &fit->ks_d);
    if (at >= 0) {
        int first = at; /* values equal to xmin below the candidate count too (num_pl_spikes is by value) */
        while (first > 0 && x[first - 1] == x[at])
            first--;
        fit->xmin = x[at];
        fit->n_tail = kept - first;
    }
    free(x);
    return SP_OK;
}
