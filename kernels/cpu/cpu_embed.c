/* kernels/cpu/cpu_embed.c: token (+ learned position) embedding lookup, times a scale, and its
 * scatter-add.
 * The backward pass splits the columns among threads, and each thread adds the rows in order, so a
 * token seen twice gets its contributions in a fixed order. */
#include "kernels/cpu/cpu_ops.h"

/* Columns per work item of the backward scatter-add. */
#define EMBED_COL_BLOCK 64

void sp_cpu_embed_fwd(int rows, int seq_len, int dim, sp_real scale, const int32_t *ids, const sp_real *tok,
                      const sp_real *pos, sp_real *out)
{
#pragma omp parallel for schedule(dynamic, sp_cpu_row_chunk(dim)) if ((size_t)rows * dim >= SP_CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const sp_real *t = tok + (size_t)ids[r] * dim;
        const sp_real *p = pos ? pos + (size_t)(r % seq_len) * dim : NULL;
        sp_real *o = out + (size_t)r * dim;
        for (int j = 0; j < dim; j++)
            o[j] = (p ? t[j] + p[j] : t[j]) * scale;
    }
}

void sp_cpu_embed_bwd(int rows, int seq_len, int dim, sp_real scale, const int32_t *ids, const sp_real *dout,
                      sp_real *dtok, sp_real *dpos)
{
    int n_blocks = (dim + EMBED_COL_BLOCK - 1) / EMBED_COL_BLOCK;
#pragma omp parallel for schedule(dynamic) if ((size_t)rows * dim >= SP_CPU_PAR_MIN)
    for (int blk = 0; blk < n_blocks; blk++) {
        int lo = blk * EMBED_COL_BLOCK, hi = lo + EMBED_COL_BLOCK < dim ? lo + EMBED_COL_BLOCK : dim;
        for (int r = 0; r < rows; r++) {
            const sp_real *d = dout + (size_t)r * dim;
            sp_real *t = dtok + (size_t)ids[r] * dim;
            sp_real *p = dpos ? dpos + (size_t)(r % seq_len) * dim : NULL;
            for (int j = lo; j < hi; j++)
                t[j] += scale * d[j];
            if (p)
                for (int j = lo; j < hi; j++)
                    p[j] += scale * d[j];
        }
    }
}
