#include "analyzers/linop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/linalg.h"
#include "core/rng.h"

/* Below this fraction of sigma_1 an estimate is numerically zero: it takes no part in the stop rule. */
#define SP_LINOP_ZERO 1e-12

static double dot(int64_t n, const double *x, const double *y)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += x[i] * y[i];
    return s;
}

static void fill_normal(sp_rng *rng, int64_t n, double *x)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = sp_rng_normal(rng);
}

/* Orthonormalizes the k columns of v (column j at v + j n) in place by modified Gram-Schmidt, two
 * passes. A column that loses almost all of its norm to the previous ones (J^T J rank-deficient on
 * the subspace) is replaced by a fresh random vector, orthonormalized the same way. */
static sp_status orthonormalize(int64_t n, int k, double *v, sp_rng *rng)
{
    for (int j = 0; j < k; j++) {
        double *vj = v + j * n;
        for (int attempt = 0;; attempt++) {
            double before = sqrt(dot(n, vj, vj));
            for (int pass = 0; pass < 2; pass++)
                for (int i = 0; i < j; i++) {
                    double c = dot(n, v + i * n, vj);
                    for (int64_t e = 0; e < n; e++)
                        vj[e] -= c * v[i * n + e];
                }
            double after = sqrt(dot(n, vj, vj));
            if (after > 1e-10 * before && after > 0) {
                for (int64_t e = 0; e < n; e++)
                    vj[e] /= after;
                break;
            }
            if (attempt == 8) /* a random draw is independent of j < n columns with probability 1 */
                return sp_error(SP_ERR_NUMERIC, "subspace iteration: cannot extend %d orthonormal vectors of length %lld",
                                j, (long long)n);
            fill_normal(rng, n, vj);
        }
    }
    return SP_OK;
}

/* The singular-value estimates from U = J V: square roots of the eigenvalues of U^T U. */
static sp_status ritz_values(int64_t n, int k, const double *u, double *gram, double *sigma)
{
    for (int i = 0; i < k; i++)
        for (int j = i; j < k; j++) {
            gram[i * k + j] = gram[j * k + i] = dot(n, u + i * n, u + j * n);
            if (!isfinite(gram[i * k + j]))
                return sp_error(SP_ERR_NUMERIC, "subspace iteration: the map gave non-finite values (product %d)", j + 1);
        }
    SP_TRY(sp_linalg_sym_eigvals(k, gram, sigma));
    for (int i = 0; i < k; i++)
        sigma[i] = sigma[i] > 0 ? sqrt(sigma[i]) : 0;
    return SP_OK;
}

static int settled(int k, const double *sigma, const double *prev, double tol)
{
    for (int i = 0; i < k; i++)
        if (sigma[i] > SP_LINOP_ZERO * sigma[0] && fabs(sigma[i] - prev[i]) >= tol * sigma[i])
            return 0;
    return 1;
}

static sp_status check_args(const sp_linop *op, int k, int max_iters, size_t *len)
{
    if (k < 1 || k > op->max_k || k > op->n || max_iters < 1)
        return sp_error(SP_ERR_INTERNAL, "subspace iteration: k = %d with max_k %d, n %lld, max_iters %d", k, op->max_k,
                        (long long)op->n, max_iters);
    return sp_size_mul((size_t)op->n, (size_t)k, len, "subspace iteration vectors");
}

sp_status sp_linop_refine_singvals(const sp_linop *op, int k, int max_iters, double tol, uint64_t seed, double *v,
                                   double *sigma, sp_linop_stats *stats)
{
    const int64_t n = op->n;
    size_t len;
    SP_TRY(check_args(op, k, max_iters, &len));
    double *u = sp_malloc(len * sizeof *u, "subspace iteration U");
    double *small = u ? sp_malloc((size_t)k * (size_t)(k + 1) * sizeof *small, "subspace iteration Gram") : NULL;
    if (!small) {
        free(u);
        return SP_ERR_NOMEM;
    }
    double *gram = small, *prev = small + (size_t)k * (size_t)k;
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    sp_status st = orthonormalize(n, k, v, &rng);
    *stats = (sp_linop_stats){0};
    for (int it = 1; it <= max_iters && st == SP_OK; it++) {
        st = op->apply(op->ctx, k, v, u);
        if (st == SP_OK)
            st = ritz_values(n, k, u, gram, sigma);
        if (st != SP_OK)
            break;
        stats->iters = it;
        if (it > 1 && settled(k, sigma, prev, tol)) {
            stats->converged = 1;
            break;
        }
        if (sigma[0] == 0) { /* J V = 0 (from a random start: J is zero, with probability 1) */
            stats->converged = 1;
            break;
        }
        if (it == max_iters)
            break;
        memcpy(prev, sigma, (size_t)k * sizeof *sigma);
        st = op->apply_t(op->ctx, k, u, v);
        if (st == SP_OK)
            st = orthonormalize(n, k, v, &rng);
    }
    free(u);
    free(small);
    return st;
}

sp_status sp_linop_top_singvals(const sp_linop *op, int k, int max_iters, double tol, uint64_t seed, double *sigma,
                                sp_linop_stats *stats)
{
    size_t len;
    SP_TRY(check_args(op, k, max_iters, &len));
    double *v = sp_malloc(len * sizeof *v, "subspace iteration V");
    if (!v)
        return SP_ERR_NOMEM;
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    fill_normal(&rng, (int64_t)len, v);
    sp_status st = sp_linop_refine_singvals(op, k, max_iters, tol, seed + 1, v, sigma, stats);
    free(v);
    return st;
}
