/* kernels/cuda/cuda_norm.cu: LayerNorm and RMSNorm over the last dim, forward, backward and JVP.
 *
 * One warp per row; per-row sums and the per-element arithmetic run in double, like the CPU
 * reference. With xhat = (x - mean) * rstd (RMSNorm: mean = 0) and y = xhat * gain + bias, the VJP
 * of xhat applied to w = dy * gain and its JVP applied to w = tx are the same map,
 *   rstd * (w - mean(w) - xhat * mean(xhat * w))   (RMSNorm without the mean(w) term).
 * dgain/dbias sum over rows in two fixed-order passes: per (chunk of rows, column) partials, then
 * one thread per column adds its partials in chunk order, so the bits never change run to run. */
#include "kernels/cuda/cuda_ops.h"

#define PARAM_CHUNK_ROWS 128 /* rows per partial of dgain/dbias */
#define PARAM_TILE_COLS 32   /* columns per block of the partials pass (one per lane) */
#define PARAM_TILE_ROWS 8    /* row lanes per block of the partials pass */

static __device__ double row_center(sp_norm_kind kind, const float *mean, int row)
{
    return kind == SP_NORM_LAYERNORM ? (double)mean[row] : 0.0;
}

static __global__ void norm_fwd_kernel(sp_norm_kind kind, int rows, int dim, float eps, const float *x,
                                       const float *gain, const float *bias, float *y, float *mean, float *rstd)
{
    const int row = blockIdx.x * SP_CUDA_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows)
        return; /* the whole warp leaves together; no block barrier follows */
    const float *xr = x + (size_t)row * dim;
    float *yr = y + (size_t)row * dim;
    double mu = 0;
    if (kind == SP_NORM_LAYERNORM) {
        for (int j = lane; j < dim; j += 32)
            mu += xr[j];
        mu = sp_cuda_warp_reduce(mu, sp_cuda_add()) / dim;
    }
    double ss = 0;
    for (int j = lane; j < dim; j += 32)
        ss += (xr[j] - mu) * (xr[j] - mu);
    ss = sp_cuda_warp_reduce(ss, sp_cuda_add());
    const float rs = (float)(1.0 / sqrt(ss / dim + eps));
    const float mean_stored = (float)mu;
    if (lane == 0) {
        rstd[row] = rs;
        if (kind == SP_NORM_LAYERNORM)
            mean[row] = mean_stored;
    }
    /* y from the stored (rounded) mean and rstd, so bwd and jvp differentiate exactly this y */
    const double m = kind == SP_NORM_LAYERNORM ? (double)mean_stored : 0.0;
    for (int j = lane; j < dim; j += 32) {
        double v = (xr[j] - m) * rs * gain[j];
        yr[j] = (float)(bias ? v + bias[j] : v);
    }
}

/* Applies the (self-adjoint) derivative of xhat to w = w_raw * w_scale (w_scale NULL: 1) over one row,
 * writing out = out_scale * result (+ out when accumulate). Called by a whole warp. */
static __device__ void xhat_derivative_row(sp_norm_kind kind, int dim, int lane, const float *xr, double mu,
                                           double rs, const float *w_raw, const float *w_scale,
                                           const float *out_scale, bool accumulate, float *out)
{
    double sw = 0, sxw = 0;
    for (int j = lane; j < dim; j += 32) {
        double w = w_scale ? (double)w_raw[j] * w_scale[j] : (double)w_raw[j];
        sw += w;
        sxw += (xr[j] - mu) * rs * w;
    }
    const double mean_w = kind == SP_NORM_LAYERNORM ? sp_cuda_warp_reduce(sw, sp_cuda_add()) / dim : 0.0;
    const double mean_xw = sp_cuda_warp_reduce(sxw, sp_cuda_add()) / dim;
    for (int j = lane; j < dim; j += 32) {
        double w = w_scale ? (double)w_raw[j] * w_scale[j] : (double)w_raw[j];
        double xhat = (xr[j] - mu) * rs;
        double v = rs * (w - mean_w - xhat * mean_xw);
        if (accumulate)
            out[j] += (float)v;
        else
            out[j] = (float)(out_scale[j] * v);
    }
}

static __global__ void norm_dx_kernel(sp_norm_kind kind, int rows, int dim, const float *x, const float *gain,
                                      const float *mean, const float *rstd, const float *dy, float *dx)
{
    const int row = blockIdx.x * SP_CUDA_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    const size_t off = (size_t)row * dim;
    xhat_derivative_row(kind, dim, lane, x + off, row_center(kind, mean, row), rstd[row], dy + off, gain, NULL,
                        true, dx + off);
}

static __global__ void norm_jvp_kernel(sp_norm_kind kind, int rows, int dim, const float *x, const float *gain,
                                       const float *mean, const float *rstd, const float *tx, float *ty)
{
    const int row = blockIdx.x * SP_CUDA_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    const size_t off = (size_t)row * dim;
    xhat_derivative_row(kind, dim, lane, x + off, row_center(kind, mean, row), rstd[row], tx + off, NULL, gain,
                        false, ty + off);
}

/* Pass 1 of dgain/dbias: block (column tile, chunk of rows) writes
 * part_gain[chunk][col] = sum over its rows of dy * xhat and part_bias[chunk][col] = sum of dy. */
static __global__ void norm_param_partials_kernel(sp_norm_kind kind, int rows, int dim, int chunk_rows,
                                                  const float *x, const float *mean, const float *rstd,
                                                  const float *dy, double *part_gain, double *part_bias)
{
    __shared__ double tile_gain[PARAM_TILE_ROWS][PARAM_TILE_COLS];
    __shared__ double tile_bias[PARAM_TILE_ROWS][PARAM_TILE_COLS];
    const int col = blockIdx.x * PARAM_TILE_COLS + threadIdx.x, chunk = blockIdx.y;
    const int r_begin = chunk * chunk_rows, r_end = min(rows, r_begin + chunk_rows);
    double sg = 0, sb = 0;
    if (col < dim)
        for (int r = r_begin + threadIdx.y; r < r_end; r += PARAM_TILE_ROWS) {
            double d = dy[(size_t)r * dim + col];
            sg += d * (x[(size_t)r * dim + col] - row_center(kind, mean, r)) * rstd[r];
            sb += d;
        }
    tile_gain[threadIdx.y][threadIdx.x] = sg;
    tile_bias[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y != 0 || col >= dim)
        return;
    for (int i = 1; i < PARAM_TILE_ROWS; i++) {
        sg += tile_gain[i][threadIdx.x];
        sb += tile_bias[i][threadIdx.x];
    }
    part_gain[(size_t)chunk * dim + col] = sg;
    part_bias[(size_t)chunk * dim + col] = sb;
}

/* Pass 2: one thread per column adds its chunk partials in order into dgain / dbias (either NULL). */
static __global__ void norm_param_finish_kernel(int dim, int n_chunks, const double *part_gain,
                                                const double *part_bias, float *dgain, float *dbias)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= dim)
        return;
    double sg = 0, sb = 0;
    for (int c = 0; c < n_chunks; c++) {
        sg += part_gain[(size_t)c * dim + col];
        sb += part_bias[(size_t)c * dim + col];
    }
    if (dgain)
        dgain[col] += (float)sg;
    if (dbias)
        dbias[col] += (float)sb;
}

void sp_cuda_norm_fwd(sp_norm_kind kind, int rows, int dim, float eps, const float *x, const float *gain,
                      const float *bias, float *y, float *mean, float *rstd)
{
    if (rows <= 0 || dim <= 0)
        return;
    norm_fwd_kernel<<<sp_cuda_row_blocks(rows), SP_CUDA_THREADS>>>(kind, rows, dim, eps, x, gain, bias, y, mean,
                                                                   rstd);
    SP_CUDA_CHECK_LAUNCH("norm_fwd_kernel");
}

static void norm_param_grads(sp_norm_kind kind, int rows, int dim, const float *x, const float *mean,
                             const float *rstd, const float *dy, float *dgain, float *dbias)
{
    int chunk_rows = PARAM_CHUNK_ROWS;
    if ((rows + chunk_rows - 1) / chunk_rows > 65535) /* the grid's y limit */
        chunk_rows = (rows + 65534) / 65535;
    const int n_chunks = (rows + chunk_rows - 1) / chunk_rows;
    const size_t n_part = (size_t)n_chunks * dim;
    double *part_gain = (double *)sp_cuda_scratch(2 * n_part * sizeof(double), "norm dgain/dbias partials");
    if (!part_gain)
        return;
    double *part_bias = part_gain + n_part;
    dim3 grid((dim + PARAM_TILE_COLS - 1) / PARAM_TILE_COLS, n_chunks), block(PARAM_TILE_COLS, PARAM_TILE_ROWS);
    norm_param_partials_kernel<<<grid, block>>>(kind, rows, dim, chunk_rows, x, mean, rstd, dy, part_gain,
                                                part_bias);
    if (!SP_CUDA_CHECK_LAUNCH("norm_param_partials_kernel"))
        return;
    norm_param_finish_kernel<<<(dim + SP_CUDA_THREADS - 1) / SP_CUDA_THREADS, SP_CUDA_THREADS>>>(
        dim, n_chunks, part_gain, part_bias, dgain, dbias);
    SP_CUDA_CHECK_LAUNCH("norm_param_finish_kernel");
}

void sp_cuda_norm_bwd(sp_norm_kind kind, int rows, int dim, const float *x, const float *gain, const float *mean,
                      const float *rstd, const float *dy, float *dx, float *dgain, float *dbias)
{
    if (rows <= 0 || dim <= 0)
        return;
    norm_dx_kernel<<<sp_cuda_row_blocks(rows), SP_CUDA_THREADS>>>(kind, rows, dim, x, gain, mean, rstd, dy, dx);
    if (!SP_CUDA_CHECK_LAUNCH("norm_dx_kernel"))
        return;
    if (dgain || dbias)
        norm_param_grads(kind, rows, dim, x, mean, rstd, dy, dgain, dbias);
}

void sp_cuda_norm_jvp(sp_norm_kind kind, int rows, int dim, const float *x, const float *gain, const float *mean,
                      const float *rstd, const float *tx, float *ty)
{
    if (rows <= 0 || dim <= 0)
        return;
    norm_jvp_kernel<<<sp_cuda_row_blocks(rows), SP_CUDA_THREADS>>>(kind, rows, dim, x, gain, mean, rstd, tx, ty);
    SP_CUDA_CHECK_LAUNCH("norm_jvp_kernel");
}

/* The tangent of norm_bwd (kernels/cpu/cpu_norm.c has the formulas): one warp per row for tdx, which
 * also leaves the row's mean(tx) and mean(xhat tx) in moments for the tdgain pass. */
static __global__ void norm_bwd_jvp_kernel(sp_norm_kind kind, int rows, int dim, const float *x, const float *gain,
                                           const float *mean, const float *rstd, const float *tx, const float *tgain,
                                           const float *dy, const float *tdy, float *tdx, double *moments)
{
    const int row = blockIdx.x * SP_CUDA_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    const size_t off = (size_t)row * dim;
    const double mu = row_center(kind, mean, row), rs = rstd[row], layer = kind == SP_NORM_LAYERNORM;
    double st = 0, sxt = 0, sw = 0, sxw = 0;
    for (int j = lane; j < dim; j += 32) {
        const double xhat = (x[off + j] - mu) * rs, w = (double)dy[off + j] * gain[j];
        st += tx[off + j];
        sxt += xhat * tx[off + j];
        sw += w;
        sxw += xhat * w;
    }
    const double mean_t = layer * sp_cuda_warp_reduce(st, sp_cuda_add()) / dim;
    const double a = sp_cuda_warp_reduce(sxt, sp_cuda_add()) / dim;
    const double mean_w = layer * sp_cuda_warp_reduce(sw, sp_cuda_add()) / dim;
    const double m = sp_cuda_warp_reduce(sxw, sp_cuda_add()) / dim;
    double s_tw = 0, s_tm = 0;
    for (int j = lane; j < dim; j += 32) {
        const double xhat = (x[off + j] - mu) * rs, txhat = rs * (tx[off + j] - mean_t - xhat * a);
        const double tw = (double)tdy[off + j] * gain[j] + (tgain ? (double)dy[off + j] * tgain[j] : 0.0);
        s_tw += tw;
        s_tm += txhat * dy[off + j] * gain[j] + xhat * tw;
    }
    const double mean_tw = layer * sp_cuda_warp_reduce(s_tw, sp_cuda_add()) / dim;
    const double tm = sp_cuda_warp_reduce(s_tm, sp_cuda_add()) / dim, trs = -rs * rs * a;
    for (int j = lane; j < dim; j += 32) {
        const double xhat = (x[off + j] - mu) * rs, txhat = rs * (tx[off + j] - mean_t - xhat * a);
        const double w = (double)dy[off + j] * gain[j];
        const double tw = (double)tdy[off + j] * gain[j] + (tgain ? (double)dy[off + j] * tgain[j] : 0.0);
        tdx[off + j] += (float)(trs * (w - mean_w - xhat * m) + rs * (tw - mean_tw - txhat * m - xhat * tm));
    }
    if (lane == 0) {
        moments[2 * row] = mean_t;
        moments[2 * row + 1] = a;
    }
}

/* tdgain += sum over rows of tdy xhat + dy txhat, tdbias += of tdy: one thread per column, rows in order. */
static __global__ void norm_bwd_jvp_params_kernel(sp_norm_kind kind, int rows, int dim, const float *x,
                                                  const float *mean, const float *rstd, const float *tx,
                                                  const float *dy, const float *tdy, const double *moments,
                                                  float *tdgain, float *tdbias)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= dim)
        return;
    double sg = 0, sb = 0;
    for (int r = 0; r < rows; r++) {
        const size_t at = (size_t)r * dim + col;
        const double rs = rstd[r], xhat = (x[at] - row_center(kind, mean, r)) * rs;
        const double txhat = rs * (tx[at] - moments[2 * r] - xhat * moments[2 * r + 1]);
        sg += (double)tdy[at] * xhat + (double)dy[at] * txhat;
        sb += tdy[at];
    }
    if (tdgain)
        tdgain[col] += (float)sg;
    if (tdbias)
        tdbias[col] += (float)sb;
}

void sp_cuda_norm_bwd_jvp(sp_norm_kind kind, int rows, int dim, const float *x, const float *gain, const float *mean,
                          const float *rstd, const float *tx, const float *tgain, const float *dy, const float *tdy,
                          float *tdx, float *tdgain, float *tdbias)
{
    if (rows <= 0 || dim <= 0)
        return;
    double *moments = (double *)sp_cuda_scratch(2 * (size_t)rows * sizeof(double), "norm tangent moments");
    if (!moments)
        return;
    norm_bwd_jvp_kernel<<<sp_cuda_row_blocks(rows), SP_CUDA_THREADS>>>(kind, rows, dim, x, gain, mean, rstd, tx, tgain,
                                                                       dy, tdy, tdx, moments);
    if (!SP_CUDA_CHECK_LAUNCH("norm_bwd_jvp_kernel") || (!tdgain && !tdbias))
        return;
    norm_bwd_jvp_params_kernel<<<(dim + SP_CUDA_THREADS - 1) / SP_CUDA_THREADS, SP_CUDA_THREADS>>>(
        kind, rows, dim, x, mean, rstd, tx, dy, tdy, moments, tdgain, tdbias);
    SP_CUDA_CHECK_LAUNCH("norm_bwd_jvp_params_kernel");
}
