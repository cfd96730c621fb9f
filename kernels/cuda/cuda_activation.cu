/* kernels/cuda/cuda_activation.cu: GELU (tanh approximation, GPT-2) and SwiGLU, elementwise.
 * Evaluated in double like the CPU reference (these ops are bound by memory traffic, so the double
 * arithmetic costs little). Backward ops add into their gradients; JVPs overwrite the tangent. */
#include "kernels/cuda/cuda_ops.h"

#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_A 0.044715

static __device__ double gelu(double x) { return 0.5 * x * (1.0 + tanh(GELU_C * (x + GELU_A * x * x * x))); }

static __device__ double gelu_slope(double x)
{
    double t = tanh(GELU_C * (x + GELU_A * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_A * x * x);
}

/* silu(g) = g * sigmoid(g) and its derivative s (1 + g (1 - s)); the logistic without overflow. */
static __device__ void silu_and_slope(double g, double *silu, double *slope)
{
    double e = exp(-fabs(g));
    double s = g >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    *silu = g * s;
    *slope = s * (1.0 + g * (1.0 - s));
}

static __global__ void gelu_fwd_kernel(size_t n, const float *x, float *y)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        y[i] = (float)gelu(x[i]);
    }
}

static __global__ void gelu_bwd_kernel(size_t n, const float *x, const float *dy, float *dx)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        dx[i] += (float)(gelu_slope(x[i]) * dy[i]);
    }
}

static __global__ void gelu_jvp_kernel(size_t n, const float *x, const float *tx, float *ty)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        ty[i] = (float)(gelu_slope(x[i]) * tx[i]);
    }
}

static __global__ void swiglu_fwd_kernel(size_t n, const float *g, const float *u, float *h)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        double silu, slope;
        silu_and_slope(g[i], &silu, &slope);
        h[i] = (float)(silu * u[i]);
    }
}

static __global__ void swiglu_bwd_kernel(size_t n, const float *g, const float *u, const float *dh, float *dg,
                                         float *du)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        double silu, slope;
        silu_and_slope(g[i], &silu, &slope);
        dg[i] += (float)((double)dh[i] * u[i] * slope);
        du[i] += (float)((double)dh[i] * silu);
    }
}

static __global__ void swiglu_jvp_kernel(size_t n, const float *g, const float *u, const float *tg, const float *tu,
                                         float *th)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        double silu, slope;
        silu_and_slope(g[i], &silu, &slope);
        th[i] = (float)(slope * tg[i] * u[i] + silu * tu[i]);
    }
}

void sp_cuda_gelu_fwd(size_t n, const float *x, float *y) { SP_CUDA_LAUNCH_ELEMENTWISE(gelu_fwd_kernel, n, x, y); }

void sp_cuda_gelu_bwd(size_t n, const float *x, const float *dy, float *dx)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(gelu_bwd_kernel, n, x, dy, dx);
}

void sp_cuda_gelu_jvp(size_t n, const float *x, const float *tx, float *ty)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(gelu_jvp_kernel, n, x, tx, ty);
}

void sp_cuda_swiglu_fwd(size_t n, const float *g, const float *u, float *h)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(swiglu_fwd_kernel, n, g, u, h);
}

void sp_cuda_swiglu_bwd(size_t n, const float *g, const float *u, const float *dh, float *dg, float *du)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(swiglu_bwd_kernel, n, g, u, dh, dg, du);
}

void sp_cuda_swiglu_jvp(size_t n, const float *g, const float *u, const float *tg, const float *tu, float *th)
{
    SP_CUDA_LAUNCH_ELEMENTWISE(swiglu_jvp_kernel, n, g, u, tg, tu, th);
}
