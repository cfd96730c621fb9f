/* kernels/cpu/cpu_activation.c: GELU (tanh approximation) and SwiGLU, elementwise, evaluated in
 * double (the tanh of GELU as a sigmoid, through cpu_math.h's vectorized exp). Backward ops add
 * into their gradients; JVPs overwrite the output tangent. */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/cpu_ops.h"

#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_A 0.044715

/* 0.5 (1 + tanh(u)) = sigmoid(2u), u = c (x + a x^3): one exp for GELU and its slope. */
static inline double gelu_gate(double x)
{
    return sp_cpu_sigmoid(2.0 * GELU_C * (x + GELU_A * x * x * x));
}

static inline double gelu(double x) { return x * gelu_gate(x); }

/* d/dx x s(2u) = s + 2 x s (1 - s) u', with 1 - tanh^2 = 4 s (1 - s) */
static inline double gelu_slope(double x)
{
    double s = gelu_gate(x);
    return s + 2.0 * x * s * (1.0 - s) * GELU_C * (1.0 + 3.0 * GELU_A * x * x);
}

/* silu(g) = g * sigmoid(g) and its derivative s (1 + g (1 - s)). For g << 0 the sigmoid is 0
 * exactly, so silu(g) is too. */
static inline void silu_and_slope(double g, double *silu, double *slope)
{
    double s = sp_cpu_sigmoid(g);
    *silu = g * s;
    *slope = s * (1.0 + g * (1.0 - s));
}

/* Runs kernel(lo, hi, ...) over [0, n) in chunks of SP_CPU_CHUNK shared dynamically among threads.
 * The kernels are SP_CPU_CLONES functions (cpu_math.h), built for the vector width of the CPU. */
#define FOR_CHUNKS(n, kernel, ...)                                                                   \
    do {                                                                                             \
        const size_t n_ = (n), chunks_ = (n_ + SP_CPU_CHUNK - 1) / SP_CPU_CHUNK;                     \
        _Pragma("omp parallel for schedule(dynamic) if (n_ >= SP_CPU_PAR_MIN)")                      \
        for (size_t c_ = 0; c_ < chunks_; c_++)                                                      \
            kernel(c_ * SP_CPU_CHUNK, c_ + 1 < chunks_ ? (c_ + 1) * SP_CPU_CHUNK : n_, __VA_ARGS__); \
    } while (0)

SP_CPU_CLONES static void gelu_fwd_range(size_t lo, size_t hi, const sp_real *x, sp_real *y)
{
#pragma omp simd
    for (size_t i = lo; i < hi; i++)
        y[i] = (sp_real)gelu(x[i]);
}

SP_CPU_CLONES static void gelu_bwd_range(size_t lo, size_t hi, const sp_real *x, const sp_real *dy, sp_real *dx)
{
#pragma omp simd
    for (size_t i = lo; i < hi; i++)
        dx[i] += (sp_real)(gelu_slope(x[i]) * dy[i]);
}

SP_CPU_CLONES static void gelu_jvp_range(size_t lo, size_t hi, const sp_real *x, const sp_real *tx, sp_real *ty)
{
#pragma omp simd
    for (size_t i = lo; i < hi; i++)
        ty[i] = (sp_real)(gelu_slope(x[i]) * tx[i]);
}

SP_CPU_CLONES static void swiglu_fwd_range(size_t lo, size_t hi, const sp_real *g, const sp_real *u, sp_real *h)
{
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        double silu, slope;
        silu_and_slope(g[i], &silu, &slope);
        h[i] = (sp_real)(silu * u[i]);
    }
}

SP_CPU_CLONES static void swiglu_bwd_range(size_t lo, size_t hi, const sp_real *g, const sp_real *u,
                                           const sp_real *dh, sp_real *dg, sp_real *du)
{
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        double silu, slope;
        silu_and_slope(g[i], &silu, &slope);
        dg[i] += (sp_real)((double)dh[i] * u[i] * slope);
        du[i] += (sp_real)((double)dh[i] * silu);
    }
}

SP_CPU_CLONES static void swiglu_jvp_range(size_t lo, size_t hi, const sp_real *g, const sp_real *u,
                                           const sp_real *tg, const sp_real *tu, sp_real *th)
{
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        double silu, slope;
        silu_and_slope(g[i], &silu, &slope);
        th[i] = (sp_real)(slope * tg[i] * u[i] + silu * tu[i]);
    }
}

void sp_cpu_gelu_fwd(size_t n, const sp_real *x, sp_real *y) { FOR_CHUNKS(n, gelu_fwd_range, x, y); }

void sp_cpu_gelu_bwd(size_t n, const sp_real *x, const sp_real *dy, sp_real *dx)
{
    FOR_CHUNKS(n, gelu_bwd_range, x, dy, dx);
}

void sp_cpu_gelu_jvp(size_t n, const sp_real *x, const sp_real *tx, sp_real *ty)
{
    FOR_CHUNKS(n, gelu_jvp_range, x, tx, ty);
}

void sp_cpu_swiglu_fwd(size_t n, const sp_real *g, const sp_real *u, sp_real *h)
{
    FOR_CHUNKS(n, swiglu_fwd_range, g, u, h);
}

void sp_cpu_swiglu_bwd(size_t n, const sp_real *g, const sp_real *u, const sp_real *dh, sp_real *dg, sp_real *du)
{
    FOR_CHUNKS(n, swiglu_bwd_range, g, u, dh, dg, du);
}

void sp_cpu_swiglu_jvp(size_t n, const sp_real *g, const sp_real *u, const sp_real *tg, const sp_real *tu,
                       sp_real *th)
{
    FOR_CHUNKS(n, swiglu_jvp_range, g, u, tg, tu, th);
}
