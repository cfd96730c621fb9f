/* analyzers/powerlaw.h: a continuous power law p(x) ~ x^-alpha on [xmin, inf) fitted to the upper
 * tail of a set of positive values (an empirical spectral density), exactly as WeightWatcher 0.7.7
 * fits a layer's ESD by default (analyze(fit='PL') with its own fitter, pl_package='ww':
 * weightwatcher/WW_powerlaw.py, class WWFit):
 *
 *   - values <= 1e-5 are dropped (its EVALS_THRESH), the rest sorted: x_0 <= ... <= x_{N-1};
 *   - every x_i but the largest is a candidate xmin, its tail x_i..x_{N-1} (n = N - i values);
 *   - alpha_i = 1 + n / sum_j ln(x_j / x_i), the maximum-likelihood exponent (Clauset, Shalizi and
 *     Newman 2009, eq. 3.1);
 *   - D_i = max_{k=0..n-1} |F_i(x_{i+k}) - k / n| with F_i(x) = 1 - (x / x_i)^(1 - alpha_i): the
 *     Kolmogorov-Smirnov distance as WWFit (and the powerlaw package) compute it, against the
 *     empirical CDF just below each point; D_i = 1 when alpha_i <= 1;
 *   - the fit is the candidate of least D_i, the first (smallest xmin) on ties.
 * With N < 20 WeightWatcher switches to its small-N fit (WWFit.fit_powerlaw_smallN), done here too:
 * alpha_i = 1 + (n - 1) / sum ln(x_j / x_i) (bias-corrected), and only tails of n >= 8 whose sum is
 * > 1e-12 are candidates (with none, the whole set is, if its sum is). fit_powerlaw_smallN ranks its
 * candidates by D_i - 0.868 / sqrt(n), but WWFit's constructor then picks again by least D_i, which
 * is what weightwatcher reports and what is done here.
 * No fit (NaN) with fewer than two values above the floor, or a small set of equal values (there
 * weightwatcher reports alpha -1, "failed", resp. 0).
 *
 * Cost, after the O(N log N) sort: each alpha_i is O(1) from a running tail sum of ln x; each D_i is
 * O(n), but its scan starts where the previous candidate's deviation peaked and stops as soon as the
 * candidate can no longer beat the best so far, so the chosen fit is exact and most candidates cost
 * a few steps. */
#ifndef SP_POWERLAW_H
#define SP_POWERLAW_H

#include "core/common.h"

#define SP_POWERLAW_FLOOR 1e-5 /* values at or below it are left out of the fit (WeightWatcher's EVALS_THRESH) */

typedef struct {
    double alpha; /* the exponent; NaN when no value exceeds the floor */
    double xmin;  /* where the tail starts: one of the values */
    double ks_d;  /* the KS distance D of the tail to the fitted law */
    int n_tail;   /* values >= xmin (WeightWatcher's num_pl_spikes) */
} sp_powerlaw;

/* Fits values[n] (any order, left unchanged; host memory) into *fit. SP_ERR_NOMEM only. */
sp_status sp_powerlaw_fit(int n, const double *values, sp_powerlaw *fit);

#endif
