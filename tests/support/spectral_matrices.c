#include "tests/support/spectral_matrices.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double *doubles(size_t n)
{
    double *x = calloc(n ? n : 1, sizeof *x);
    if (!x) {
        fprintf(stderr, "spectral_matrices: out of memory\n");
        abort();
    }
    return x;
}

double *spm_random_orthogonal(sp_rng *rng, int n)
{
    double *q = doubles((size_t)n * n), *v = doubles((size_t)n);
    for (int i = 0; i < n; i++)
        q[(size_t)i * n + i] = 1;
    for (int r = 0; r < n; r++) { /* q = q H_r */
        double vv = 0;
        for (int j = 0; j < n; j++) {
            v[j] = sp_rng_normal(rng);
            vv += v[j] * v[j];
        }
        for (int i = 0; i < n; i++) {
            double *row = q + (size_t)i * n, d = 0;
            for (int j = 0; j < n; j++)
                d += row[j] * v[j];
            for (int j = 0; j < n; j++)
                row[j] -= 2 * d / vv * v[j];
        }
    }
    free(v);
    return q;
}

double *spm_symmetric_with_eigvals(sp_rng *rng, int n, const double *eig)
{
    double *q = spm_random_orthogonal(rng, n), *a = doubles((size_t)n * n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) {
            double sum = 0;
            for (int l = 0; l < n; l++)
                sum += q[(size_t)i * n + l] * eig[l] * q[(size_t)j * n + l];
            a[(size_t)i * n + j] = a[(size_t)j * n + i] = sum; /* exactly symmetric */
        }
    free(q);
    return a;
}

double *spm_with_singvals(sp_rng *rng, int m, int n, const double *s)
{
    const int k = m < n ? m : n;
    double *u = spm_random_orthogonal(rng, m), *v = spm_random_orthogonal(rng, n), *a = doubles((size_t)m * n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double sum = 0;
            for (int l = 0; l < k; l++)
                sum += u[(size_t)i * m + l] * s[l] * v[(size_t)j * n + l];
            a[(size_t)i * n + j] = sum;
        }
    free(u);
    free(v);
    return a;
}

double *spm_toeplitz_2_1(int n)
{
    double *a = doubles((size_t)n * n);
    for (int i = 0; i < n; i++) {
        a[(size_t)i * n + i] = 2;
        if (i + 1 < n)
            a[(size_t)i * n + i + 1] = a[(size_t)(i + 1) * n + i] = -1;
    }
    return a;
}

double *spm_toeplitz_2_1_eigvals(int n)
{
    const double pi = acos(-1.0);
    double *w = doubles((size_t)n);
    for (int i = 0; i < n; i++)
        w[i] = 2 - 2 * cos((n - i) * pi / (n + 1));
    return w;
}

double spm_max_abs_diff(size_t n, const double *a, const double *b)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!isfinite(d))
            return INFINITY;
        if (d > worst)
            worst = d;
    }
    return worst;
}

int spm_is_descending(size_t n, const double *x)
{
    for (size_t i = 0; i + 1 < n; i++)
        if (!(x[i] >= x[i + 1]))
            return 0;
    return 1;
}

double spm_max_abs(size_t n, const double *x)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
}
