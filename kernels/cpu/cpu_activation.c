/* kernels/cpu/cpu_activation.c: the elementwise activations (GELU, tanh approximation or exact erf;
 * SiLU), alone and gated (h = act(g) * u: SwiGLU, GEGLU), and the soft-cap c tanh(x / c), evaluated
 * in double: the tanh of GELU as a sigmoid, through cpu_math.h's vectorized exp, the erf through
 * libm. Backward ops add into their gradients; JVPs overwrite the output tangent. */
#include <math.h>

#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/cpu_ops.h"

#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_A 0.044715
#define INV_SQRT2 0.7071067811865476
#define INV_SQRT_2PI 0.3989422804014327

/* Each activation's value, slope and curvature (second derivative) at x, from one evaluation of its
 * transcendental part; the kernels that do not read the curvature leave it to dead-code removal. */

/* x s(2u) with u = c (x + a x^3), as 0.5 (1 + tanh(u)) = sigmoid(2u): one exp for both; the slope
 * s + x s', s' = 2 s (1 - s) u', since 1 - tanh^2 = 4 s (1 - s); the curvature 2 s' + x s'' with
 * s'' = 2 s' (1 - 2 s) u' + 2 s (1 - s) u''. */
static inline void gelu_tanh(double x, double *value, double *slope, double *curv)
{
    const double s = sp_cpu_sigmoid(2.0 * GELU_C * (x + GELU_A * x * x * x));
    const double du = GELU_C * (1.0 + 3.0 * GELU_A * x * x), ds = 2.0 * s * (1.0 - s) * du;
    *value = x * s;
    *slope = s + x * ds;
    *curv = 2.0 * ds + x * (2.0 * ds * (1.0 - 2.0 * s) * du + 2.0 * s * (1.0 - s) * 6.0 * GELU_C * GELU_A * x);
}

/* x Phi(x), Phi(x) = 0.5 (1 + erf(x / sqrt 2)); slope Phi(x) + x phi(x); curvature phi(x) (2 - x^2). */
static inline void gelu_erf(double x, double *value, double *slope, double *curv)
{
    const double cdf = 0.5 * (1.0 + erf(x * INV_SQRT2)), pdf = INV_SQRT_2PI * sp_cpu_exp(-0.5 * x * x);
    *value = x * cdf;
    *slope = cdf + x * pdf;
    *curv = pdf * (2.0 - x * x);
}

/* g sigmoid(g), slope s (1 + g (1 - s)), curvature s (1 - s) (2 + g (1 - 2 s)). For g << 0 the
 * sigmoid is 0 exactly, so silu(g) is too. */
static inline void silu(double g, double *value, double *slope, double *curv)
{
    const double s = sp_cpu_sigmoid(g);
    *value = g * s;
    *slope = s * (1.0 + g * (1.0 - s));
    *curv = s * (1.0 - s) * (2.0 + g * (1.0 - 2.0 * s));
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

/* The eight range kernels of one activation, each a simd loop over its own inline value, slope and
 * curvature (one set per activation, so no branch on the kind inside a loop keeps it from vectorizing). */
#define ACT_KERNELS(act)                                                                                          \
    SP_CPU_CLONES static void act_fwd_##act(size_t lo, size_t hi, const sp_real *x, sp_real *y)                   \
    {                                                                                                             \
        _Pragma("omp simd") for (size_t i = lo; i < hi; i++)                                                      \
        {                                                                                                         \
            double v, s, c;                                                                                       \
            act(x[i], &v, &s, &c);                                                                                \
            y[i] = (sp_real)v;                                                                                    \
        }                                                                                                         \
    }                                                                                                             \
    SP_CPU_CLONES static void act_bwd_##act(size_t lo, size_t hi, const sp_real *x, const sp_real *dy, sp_real *dx) \
    {                                                                                                             \
        _Pragma("omp simd") for (size_t i = lo; i < hi; i++)                                                      \
        {                                                                                                         \
            double v, s, c;                                                                                       \
            act(x[i], &v, &s, &c);                                                                                \
            dx[i] += (sp_real)(s * dy[i]);                                                                        \
        }                                                                                                         \
    }                                                                                                             \
    SP_CPU_CLONES static void act_jvp_##act(size_t lo, size_t hi, const sp_real *x, const sp_real *tx, sp_real *ty) \
    {                                                                                                             \
        _Pragma("omp simd") for (size_t i = lo; i < hi; i++)                                                      \
        {                                                                                                         \
            double v, s, c;                                                                                       \
            act(x[i], &v, &s, &c);                                                                                \
            ty[i] = (sp_real)(s * tx[i]);                                                                         \
        }                                                                                                         \
    }                                                                                                             \
    SP_CPU_CLONES static void glu_fwd_##act(size_t lo, size_t hi, const sp_real *g, const sp_real *u, sp_real *h) \
    {                                                                                                             \
        _Pragma("omp simd") for (size_t i = lo; i < hi; i++)                                                      \
        {                                                                                                         \
            double v, s, c;                                                                                       \
            act(g[i], &v, &s, &c);                                                                                \
            h[i] = (sp_real)(v * u[i]);                                                                           \
        }                                                                                                         \
    }                                                                                                             \
    SP_CPU_CLONES static void glu_bwd_##act(size_t lo, size_t hi, const sp_real *g, const sp_real *u,             \
                                            const sp_real *dh, sp_real *dg, sp_real *du)                          \
    {                                                                                                             \
        _Pragma("omp simd") for (size_t i = lo; i < hi; i++)                                                      \
        {                                                                                                         \
            double v, s, c;                                                                                       \
            act(g[i], &v, &s, &c);                                                                                \
            dg[i] += (sp_real)((double)dh[i] * u[i] * s);                                                         \
            du[i] += (sp_real)((double)dh[i] * v);                                                                \
        }                                                                                                         \
    }                                                                                                             \
    SP_CPU_CLONES static void glu_jvp_##act(size_t lo, size_t hi, const sp_real *g, const sp_real *u,             \
                                            const sp_real *tg, const sp_real *tu, sp_real *th)                    \
    {                                                                                                             \
        _Pragma("omp simd") for (size_t i = lo; i < hi; i++)                                                      \
        {                                                                                                         \
            double v, s, c;                                                                                       \
            act(g[i], &v, &s, &c);                                                                                \
            th[i] = (sp_real)(s * tg[i] * u[i] + v * tu[i]);                                                      \
        }                                                                                                         \
    }                                                                                                             \
    SP_CPU_CLONES static void act_bwd_jvp_##act(size_t lo, size_t hi, const sp_real *x, const sp_real *tx,        \
                                                const sp_real *dy, const sp_real *tdy, sp_real *tdx)              \
    {                                                                                                             \
        _Pragma("omp simd") for (size_t i = lo; i < hi; i++)                                                      \
        {                                                                                                         \
            double v, s, c;                                                                                       \
            act(x[i], &v, &s, &c);                                                                                \
            tdx[i] += (sp_real)(s * tdy[i] + c * tx[i] * dy[i]);                                                  \
        }                                                                                                         \
    }                                                                                                             \
    SP_CPU_CLONES static void glu_bwd_jvp_##act(size_t lo, size_t hi, const sp_real *g, const sp_real *u,         \
                                                const sp_real *tg, const sp_real *tu, const sp_real *dh,          \
                                                const sp_real *tdh, sp_real *tdg, sp_real *tdu)                   \
    {                                                                                                             \
        _Pragma("omp simd") for (size_t i = lo; i < hi; i++)                                                      \
        {                                                                                                         \
            double v, s, c;                                                                                       \
            act(g[i], &v, &s, &c);                                                                                \
            const double w = (double)tdh[i] * u[i] + (double)dh[i] * tu[i];                                      \
            tdg[i] += (sp_real)(w * s + (double)dh[i] * u[i] * c * tg[i]);                                       \
            tdu[i] += (sp_real)((double)tdh[i] * v + (double)dh[i] * s * tg[i]);                                  \
        }                                                                                                         \
    }

ACT_KERNELS(gelu_tanh)
ACT_KERNELS(gelu_erf)
ACT_KERNELS(silu)

/* FOR_CHUNKS over the range kernel `op`_<activation of kind>. */
#define DISPATCH(kind, op, n, ...)                                        \
    do {                                                                  \
        switch (kind) {                                                   \
        case SP_ACT_GELU_TANH: FOR_CHUNKS(n, op##_gelu_tanh, __VA_ARGS__); break; \
        case SP_ACT_GELU_ERF: FOR_CHUNKS(n, op##_gelu_erf, __VA_ARGS__); break;   \
        case SP_ACT_SILU: FOR_CHUNKS(n, op##_silu, __VA_ARGS__); break;           \
        }                                                                 \
    } while (0)

void sp_cpu_act_fwd(sp_act_kind kind, size_t n, const sp_real *x, sp_real *y) { DISPATCH(kind, act_fwd, n, x, y); }

void sp_cpu_act_bwd(sp_act_kind kind, size_t n, const sp_real *x, const sp_real *dy, sp_real *dx)
{
    DISPATCH(kind, act_bwd, n, x, dy, dx);
}

void sp_cpu_act_jvp(sp_act_kind kind, size_t n, const sp_real *x, const sp_real *tx, sp_real *ty)
{
    DISPATCH(kind, act_jvp, n, x, tx, ty);
}

void sp_cpu_act_bwd_jvp(sp_act_kind kind, size_t n, const sp_real *x, const sp_real *tx, const sp_real *dy,
                        const sp_real *tdy, sp_real *tdx)
{
    DISPATCH(kind, act_bwd_jvp, n, x, tx, dy, tdy, tdx);
}

void sp_cpu_glu_fwd(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, sp_real *h)
{
    DISPATCH(kind, glu_fwd, n, g, u, h);
}

void sp_cpu_glu_bwd(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, const sp_real *dh, sp_real *dg,
                    sp_real *du)
{
    DISPATCH(kind, glu_bwd, n, g, u, dh, dg, du);
}

void sp_cpu_glu_jvp(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, const sp_real *tg,
                    const sp_real *tu, sp_real *th)
{
    DISPATCH(kind, glu_jvp, n, g, u, tg, tu, th);
}

void sp_cpu_glu_bwd_jvp(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, const sp_real *tg,
                        const sp_real *tu, const sp_real *dh, const sp_real *tdh, sp_real *tdg, sp_real *tdu)
{
    DISPATCH(kind, glu_bwd_jvp, n, g, u, tg, tu, dh, tdh, tdg, tdu);
}

/* cap tanh(x / cap), and the slope 1 - (y / cap)^2 from the capped value y. libm's tanh: soft-caps
 * run on logits and attention scores, where the exp-based loops above are not the cost. */
void sp_cpu_softcap_fwd(size_t n, double cap, const sp_real *x, sp_real *y)
{
#pragma omp parallel for schedule(dynamic, SP_CPU_CHUNK) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        y[i] = (sp_real)(cap * tanh(x[i] / cap));
}

void sp_cpu_softcap_jvp(size_t n, double cap, const sp_real *y, const sp_real *t, sp_real *out)
{
#pragma omp parallel for schedule(dynamic, SP_CPU_CHUNK) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        const double r = y[i] / cap;
        out[i] = (sp_real)((1.0 - r * r) * t[i]);
    }
}

/* The tangent of the soft-cap's VJP dx = S'(y) dy: S' = 1 - (y / cap)^2 moves by -2 y ty / cap^2. */
void sp_cpu_softcap_bwd_jvp(size_t n, double cap, const sp_real *y, const sp_real *ty, const sp_real *dy,
                            const sp_real *tdy, sp_real *out)
{
#pragma omp parallel for schedule(dynamic, SP_CPU_CHUNK) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        const double r = y[i] / cap;
        out[i] = (sp_real)((1.0 - r * r) * tdy[i] - 2.0 * r / cap * ty[i] * dy[i]);
    }
}
