#include "tests/support/vec_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vec_fill_normal(sp_rng *rng, size_t n, sp_real *x, double scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (sp_real)(scale * sp_rng_normal(rng));
}

double vec_dot(size_t n, const sp_real *x, const sp_real *y)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * y[i];
    return s;
}

double vec_max_abs(size_t n, const sp_real *x)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)x[i]) > m)
            m = fabs((double)x[i]);
    return m;
}

double vec_rel_err(size_t n, const sp_real *a, const sp_real *b)
{
    double diff = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!isfinite(d)) /* NaN or Inf anywhere is never close */
            return INFINITY;
        if (d > diff)
            diff = d;
    }
    double ref = vec_max_abs(n, b);
    return ref > 0 ? diff / ref : diff;
}

sp_real *vec_zeros(size_t n)
{
    sp_real *x = calloc(n ? n : 1, sizeof *x);
    if (!x) {
        fprintf(stderr, "vec_zeros: out of memory for %zu elements\n", n);
        abort();
    }
    return x;
}

sp_real *vec_random(sp_rng *rng, size_t n, double scale)
{
    sp_real *x = vec_zeros(n);
    vec_fill_normal(rng, n, x, scale);
    return x;
}

sp_real *vec_dup(size_t n, const sp_real *x)
{
    sp_real *y = vec_zeros(n);
    if (n)
        memcpy(y, x, n * sizeof *y);
    return y;
}
