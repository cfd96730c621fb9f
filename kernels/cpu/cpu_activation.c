/* kernels/cpu/cpu_activation.c: GELU (tanh approximation) and SwiGLU, elementwise, evaluated in
 * double. Backward ops add into their gradients; JVPs overwrite the output tangent. */
#include <math.h>

#include "kernels/cpu/cpu_ops.h"

#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_A 0.044715

static double gelu(double x) { return 0.5 * x * (1.0 + tanh(GELU_C * (x + GELU_A * x * x * x))); }

static double gelu_slope(double x)
{
    double t = tanh(GELU_C * (x + GELU_A * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_A * x * x);
}

/* silu(g) = g * sigmoid(g) and its derivative s (1 + g (1 - s)). For g << 0, exp(-g) = inf
 * gives s = 0 exactly, so no branch is needed. */
static void silu_and_slope(double g, double *silu, double *slope)
{
    double s = 1.0 / (1.0 + exp(-g));
    *silu = g * s;
    *slope = s * (1.0 + g * (1.0 - s));
}

void sp_cpu_gelu_fwd(size_t n, const sp_real *x, sp_real *y)
{
#pragma omp parallel for schedule(static) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        y[i] = (sp_real)gelu(x[i]);
}

void sp_cpu_gelu_bwd(size_t n, const sp_real *x, const sp_real *dy, sp_real *dx)
{
#pragma omp parallel for schedule(static) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dx[i] += (sp_real)(gelu_slope(x[i]) * dy[i]);
}

void sp_cpu_gelu_jvp(size_t n, const sp_real *x, const sp_real *tx, sp_real *ty)
{
#pragma omp parallel for schedule(static) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        ty[i] = (sp_real)(gelu_slope(x[i]) * tx[i]);
}

void sp_cpu_swiglu_fwd(size_t n, const sp_real *g, const sp_real *u, sp_real *h)
{
#pragma omp parallel for schedule(static) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        double silu, slope;
        silu_and_slope(g[i], &silu, &slope);
        h[i] = (sp_real)(silu * u[i]);
    }
}

void sp_cpu_swiglu_bwd(size_t n, const sp_real *g, const sp_real *u, const sp_real *dh, sp_real *dg, sp_real *du)
{
#pragma omp parallel for schedule(static) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        double silu, slope;
        silu_and_slope(g[i], &silu, &slope);
        dg[i] += (sp_real)((double)dh[i] * u[i] * slope);
        du[i] += (sp_real)((double)dh[i] * silu);
    }
}

void sp_cpu_swiglu_jvp(size_t n, const sp_real *g, const sp_real *u, const sp_real *tg, const sp_real *tu,
                       sp_real *th)
{
#pragma omp parallel for schedule(static) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        double silu, slope;
        silu_and_slope(g[i], &silu, &slope);
        th[i] = (sp_real)(slope * tg[i] * u[i] + silu * tu[i]);
    }
}
