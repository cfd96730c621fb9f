/* kernels/cuda/cuda_activation.cu: the elementwise activations (GELU, tanh approximation or exact
 * erf; SiLU), alone and gated (h = act(g) * u: SwiGLU, GEGLU), and the soft-cap c tanh(x / c).
 * Evaluated in double like the CPU reference (these ops are bound by memory traffic, so the double
 * arithmetic costs little). Backward ops add into their gradients; JVPs overwrite the tangent. */
#include "kernels/cuda/cuda_ops.h"

#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_A 0.044715
#define INV_SQRT2 0.7071067811865476
#define INV_SQRT_2PI 0.3989422804014327

/* act(x) and its slope, for the kind (uniform over a launch, so the branch does not diverge). */
static __device__ void act_value_slope(sp_act_kind kind, double x, double *value, double *slope)
{
    switch (kind) {
    case SP_ACT_GELU_TANH: {
        const double t = tanh(GELU_C * (x + GELU_A * x * x * x));
        *value = 0.5 * x * (1.0 + t);
        *slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_A * x * x);
        return;
    }
    case SP_ACT_GELU_ERF: {
        const double cdf = 0.5 * (1.0 + erf(x * INV_SQRT2));
        *value = x * cdf;
        *slope = cdf + x * INV_SQRT_2PI * exp(-0.5 * x * x);
        return;
    }
    case SP_ACT_SILU: { /* the logistic without overflow */
        const double e = exp(-fabs(x)), s = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
        *value = x * s;
        *slope = s * (1.0 + x * (1.0 - s));
        return;
    }
    }
}

/* The second derivative of act at x: GELU tanh, with t = tanh(u), u = c (x + a x^3):
 * (1 - t^2) (u' - x t u'^2 + x u'' / 2); GELU erf phi(x) (2 - x^2); SiLU s (1 - s) (2 + x (1 - 2 s)). */
static __device__ double act_curvature(sp_act_kind kind, double x)
{
    switch (kind) {
    case SP_ACT_GELU_TANH: {
        const double t = tanh(GELU_C * (x + GELU_A * x * x * x)), du = GELU_C * (1.0 + 3.0 * GELU_A * x * x);
        return (1.0 - t * t) * (du - x * t * du * du + 0.5 * x * 6.0 * GELU_C * GELU_A * x);
    }
    case SP_ACT_GELU_ERF: return INV_SQRT_2PI * exp(-0.5 * x * x) * (2.0 - x * x);
    case SP_ACT_SILU: {
        const double e = exp(-fabs(x)), s = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
        return s * (1.0 - s) * (2.0 + x * (1.0 - 2.0 * s));
    }
    }
    return 0.0;
}

static __global__ void act_fwd_kernel(size_t n, sp_act_kind kind, const float *x, float *y)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        double v, s;
        act_value_slope(kind, x[i], &v, &s);
        y[i] = (float)v;
    }
}

static __global__ void act_bwd_kernel(size_t n, sp_act_kind kind, const float *x, const float *dy, float *dx)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        double v, s;
        act_value_slope(kind, x[i], &v, &s);
        dx[i] += (float)(s * dy[i]);
    }
}

static __global__ void act_jvp_kernel(size_t n, sp_act_kind kind, const float *x, const float *tx, float *ty)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        double v, s;
        act_value_slope(kind, x[i], &v, &s);
        ty[i] = (float)(s * tx[i]);
    }
}

static __global__ void glu_fwd_kernel(size_t n, sp_act_kind kind, const float *g, const float *u, float *h)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        double v, s;
        act_value_slope(kind, g[i], &v, &s);
        h[i] = (float)(v * u[i]);
    }
}

static __global__ void glu_bwd_kernel(size_t n, sp_act_kind kind, const float *g, const float *u, const float *dh,
                                      float *dg, float *du)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        double v, s;
        act_value_slope(kind, g[i], &v, &s);
        dg[i] += (float)((double)dh[i] * u[i] * s);
        du[i] += (float)((double)dh[i] * v);
    }
}

static __global__ void glu_jvp_kernel(size_t n, sp_act_kind kind, const float *g, const float *u, const float *tg,
                                      const float *tu, float *th)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        double v, s;
        act_value_slope(kind, g[i], &v, &s);
        th[i] = (float)(s * tg[i] * u[i] + v * tu[i]);
    }
}

static __global__ void act_bwd_jvp_kernel(size_t n, sp_act_kind kind, const float *x, const float *tx,
                                          const float *dy, const float *tdy, float *tdx)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        double v, s;
        act_value_slope(kind, x[i], &v, &s);
        tdx[i] += (float)(s * tdy[i] + act_curvature(kind, x[i]) * tx[i] * dy[i]);
    }
}

static __global__ void glu_bwd_jvp_kernel(size_t n, sp_act_kind kind, const float *g, const float *u, const float *tg,
                                          const float *tu, const float *dh, const float *tdh, float *tdg, float *tdu)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        double v, s;
        act_value_slope(kind, g[i], &v, &s);
        const double w = (double)tdh[i] * u[i] + (double)dh[i] * tu[i];
        tdg[i] += (float)(w * s + (double)dh[i] * u[i] * act_curvature(kind, g[i]) * tg[i]);
        tdu[i] += (float)((double)tdh[i] * v + (double)dh[i] * s * tg[i]);
    }
}

static __global__ void softcap_fwd_kernel(size_t n, double cap, const float *x, float *y)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        y[i] = (float)(cap * tanh(x[i] / cap));
    }
}

static __global__ void softcap_jvp_kernel(size_t n, double cap, const float *y, const float *t, float *out)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        const double r = y[i] / cap;
        out[i] = (float)((1.0 - r * r) * t[i]);
    }
}

static __global__ void softcap_bwd_jvp_kernel(size_t n, double cap, const float *y, const float *ty, const float *dy,
                                              const float *tdy, float *out)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        const double r = y[i] / cap;
        out[i] = (float)((1.0 - r * r) * tdy[i] - 2.0 * r / cap * ty[i] * dy[i]);
    }
}

void sp_cuda_act_fwd(sp_act_kind kind, size_t n, const float *x, float *y)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(act_fwd_kernel, n, kind, x, y);
}

void sp_cuda_act_bwd(sp_act_kind kind, size_t n, const float *x, const float *dy, float *dx)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(act_bwd_kernel, n, kind, x, dy, dx);
}

void sp_cuda_act_jvp(sp_act_kind kind, size_t n, const float *x, const float *tx, float *ty)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(act_jvp_kernel, n, kind, x, tx, ty);
}

void sp_cuda_glu_fwd(sp_act_kind kind, size_t n, const float *g, const float *u, float *h)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(glu_fwd_kernel, n, kind, g, u, h);
}

void sp_cuda_glu_bwd(sp_act_kind kind, size_t n, const float *g, const float *u, const float *dh, float *dg, float *du)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(glu_bwd_kernel, n, kind, g, u, dh, dg, du);
}

void sp_cuda_glu_jvp(sp_act_kind kind, size_t n, const float *g, const float *u, const float *tg, const float *tu,
                     float *th)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(glu_jvp_kernel, n, kind, g, u, tg, tu, th);
}

void sp_cuda_softcap_fwd(size_t n, double cap, const float *x, float *y)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(softcap_fwd_kernel, n, cap, x, y);
}

void sp_cuda_softcap_jvp(size_t n, double cap, const float *y, const float *t, float *out)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(softcap_jvp_kernel, n, cap, y, t, out);
}

void sp_cuda_act_bwd_jvp(sp_act_kind kind, size_t n, const float *x, const float *tx, const float *dy, const float *tdy,
                         float *tdx)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(act_bwd_jvp_kernel, n, kind, x, tx, dy, tdy, tdx);
}

void sp_cuda_glu_bwd_jvp(sp_act_kind kind, size_t n, const float *g, const float *u, const float *tg, const float *tu,
                         const float *dh, const float *tdh, float *tdg, float *tdu)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(glu_bwd_jvp_kernel, n, kind, g, u, tg, tu, dh, tdh, tdg, tdu);
}

void sp_cuda_softcap_bwd_jvp(size_t n, double cap, const float *y, const float *ty, const float *dy, const float *tdy,
                             float *out)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(softcap_bwd_jvp_kernel, n, cap, y, ty, dy, tdy, out);
}
