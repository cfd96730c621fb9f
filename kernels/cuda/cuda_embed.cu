/* kernels/cuda/cuda_embed.cu: token (+ learned position) embedding lookup, times a scale, and its
 * scatter-add.
 *
 * The backward pass must give the same bits every run, so no atomics: every output element has one
 * owner thread that adds its contributions in row order.
 * - dpos[p][c]: one thread per (p, c) adds dout[b * seq_len + p][c] for b = 0, 1, ...
 * - dtok[v][c]: the rows are split by token id among `n_parts` owners per column (owner of id v is
 *   v % n_parts); each owner scans every id, in row order, and adds the rows whose id it owns. The
 *   ids are staged through shared memory one tile at a time; n_parts grows as the columns shrink,
 *   so about EMBED_TARGET_THREADS threads always share the work. */
#include "kernels/cuda/cuda_ops.h"

#define EMBED_COLS_PER_BLOCK 32  /* one warp across 32 consecutive columns: coalesced rows */
#define EMBED_PARTS_PER_BLOCK 8  /* owner slots per block (blockDim.y) */
#define EMBED_ID_TILE 1024       /* ids staged in shared memory at a time */
#define EMBED_TARGET_THREADS 65536
#define EMBED_MAX_PARTS 1024

static __global__ void embed_fwd_kernel(size_t n, int seq_len, int dim, float scale, const int32_t *ids,
                                        const float *tok, const float *pos, float *out)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        const size_t row = i / dim, col = i % dim;
        float v = tok[(size_t)ids[row] * dim + col];
        out[i] = (pos ? v + pos[(row % seq_len) * dim + col] : v) * scale;
    }
}

void sp_cuda_embed_fwd(int rows, int seq_len, int dim, float scale, const int32_t *ids, const float *tok,
                       const float *pos, float *out)
{
    if (rows <= 0 || dim <= 0)
        return;
    SP_CUDA_LAUNCH_ELEMENTWISE(embed_fwd_kernel, (size_t)rows * dim, seq_len, dim, scale, ids, tok, pos, out);
}

static __global__ void embed_dpos_kernel(size_t n, int rows, int seq_len, int dim, float scale, const float *dout,
                                         float *dpos)
{
    SP_CUDA_GRID_STRIDE(i, n) /* i = p * dim + c over the positions that occur */
    {
        float acc = dpos[i];
        for (size_t r = i / dim; r < (size_t)rows; r += seq_len)
            acc += scale * dout[r * dim + i % dim];
        dpos[i] = acc;
    }
}

static __global__ void embed_dtok_kernel(int rows, int dim, int n_parts, float scale, const int32_t *ids,
                                         const float *dout, float *dtok)
{
    __shared__ int32_t tile[EMBED_ID_TILE];
    const int col = blockIdx.x * EMBED_COLS_PER_BLOCK + threadIdx.x;
    const unsigned part = blockIdx.y * EMBED_PARTS_PER_BLOCK + threadIdx.y;
    const int tid = threadIdx.y * EMBED_COLS_PER_BLOCK + threadIdx.x;
    const bool active = col < dim && part < (unsigned)n_parts;
    for (int base = 0; base < rows; base += EMBED_ID_TILE) {
        const int n_tile = min(EMBED_ID_TILE, rows - base);
        __syncthreads(); /* the previous tile has been read by every thread */
        for (int j = tid; j < n_tile; j += EMBED_COLS_PER_BLOCK * EMBED_PARTS_PER_BLOCK)
            tile[j] = ids[base + j];
        __syncthreads();
        if (!active)
            continue;
        for (int j = 0; j < n_tile; j++) {
            const unsigned id = (unsigned)tile[j];
            if (id % (unsigned)n_parts == part)
                dtok[(size_t)id * dim + col] += scale * dout[(size_t)(base + j) * dim + col];
        }
    }
}

void sp_cuda_embed_bwd(int rows, int seq_len, int dim, float scale, const int32_t *ids, const float *dout,
                       float *dtok, float *dpos)
{
    if (rows <= 0 || dim <= 0)
        return;
    if (dpos) {
        const int n_pos = rows < seq_len ? rows : seq_len;
        embed_dpos_kernel<<<sp_cuda_blocks((size_t)n_pos * dim), SP_CUDA_THREADS>>>((size_t)n_pos * dim, rows,
                                                                                    seq_len, dim, scale, dout, dpos);
        if (!SP_CUDA_CHECK_LAUNCH("embed_dpos_kernel"))
            return;
    }
    if (dtok) {
        int n_parts = EMBED_TARGET_THREADS / dim;
        n_parts = n_parts < EMBED_PARTS_PER_BLOCK ? EMBED_PARTS_PER_BLOCK
                  : n_parts > EMBED_MAX_PARTS     ? EMBED_MAX_PARTS
                                                  : n_parts;
        dim3 grid((dim + EMBED_COLS_PER_BLOCK - 1) / EMBED_COLS_PER_BLOCK,
                  (n_parts + EMBED_PARTS_PER_BLOCK - 1) / EMBED_PARTS_PER_BLOCK);
        embed_dtok_kernel<<<grid, dim3(EMBED_COLS_PER_BLOCK, EMBED_PARTS_PER_BLOCK)>>>(rows, dim, n_parts, scale, ids,
                                                                                       dout, dtok);
        SP_CUDA_CHECK_LAUNCH("embed_dtok_kernel");
    }
}
