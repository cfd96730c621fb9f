/* analyzers/linop.h: a square linear map known only through its products (J x and J^T y), and its
 * top singular values by subspace iteration on J^T J. The vectors live in backend memory (sp_real)
 * and every vector operation runs on the backend; only reductions (host doubles, accumulated in
 * double), the k x k Gram matrix and the k estimates come to the host.
 *
 * With k = 1 this is the power iteration of docs/metrics.md: v random unit; repeat u = J v,
 * sigma = ||u||, w = J^T u, v = w / ||w||; stop when sigma changes by less than tol relative, or
 * after max_iters products. With k > 1: V (n x k) orthonormal (Cholesky QR twice: one k x k Gram
 * reduction per pass instead of k^2 dot products, each a host round trip on a GPU; modified
 * Gram-Schmidt, two passes, where a vector is nearly dependent on the others);
 * U = J V; the estimates are the square roots of the eigenvalues of U^T U (Rayleigh-Ritz on J^T J
 * over span V; U^T U in fp64); V = orth(J^T U); stop when every estimate above 1e-12 sigma_1
 * changes by less than tol relative.
 *
 * Vector blocks. The operator's vectors come in blocks of max_k, one backend allocation of
 * n_segments * max_k * seg_len elements laid out [segment][vector][seg_len]: element e of vector j
 * is at x[(e / seg_len * max_k + j) * seg_len + e % seg_len], n = n_segments * seg_len. So segment s
 * of the whole block, [max_k][seg_len], is one contiguous array: a model stream over max_k copies of
 * a sequence, which the block Jacobians (analyzers/block_jacobian.h) read and write in place. A
 * call with k < max_k uses vectors 0..k-1: the iteration itself reads and writes only those, and an
 * operator may compute on the others (blocks start zeroed, so a linear map keeps them at zero; their
 * results are ignored either way). */
#ifndef SP_LINOP_H
#define SP_LINOP_H

#include "core/common.h"
#include "kernels/backend.h"

typedef struct {
    const sp_backend *be; /* where the vectors live */
    int n_segments;
    int64_t seg_len;
    int max_k; /* vectors per block: most vectors one call carries */
    void *ctx;
    /* k vectors at once, blocks in the layout above: y_j = J x_j, resp. x_j = J^T y_j */
    sp_status (*apply)(void *ctx, int k, const sp_real *x, sp_real *y);
    sp_status (*apply_t)(void *ctx, int k, const sp_real *y, sp_real *x);
} sp_linop;

typedef struct {
    int iters;     /* products J V taken */
    int converged; /* the relative change fell below tol before max_iters */
} sp_linop_stats;

/* n, the length of one vector. */
int64_t sp_linop_len(const sp_linop *op);
/* A zeroed block of max_k vectors in backend memory (NULL + sp_error on failure); be->free it. */
sp_real *sp_linop_alloc_block(const sp_linop *op, const char *what);
/* Vectors 0..k-1 of block x get independent N(0, 1) entries, drawn on the host from seed (vector
 * by vector, element by element) and uploaded. */
sp_status sp_linop_draw(const sp_linop *op, int k, uint64_t seed, sp_real *x);

/* sigma[k], descending. 1 <= k <= min(max_k, n); seed draws the start vectors. */
sp_status sp_linop_top_singvals(const sp_linop *op, int k, int max_iters, double tol, uint64_t seed, double *sigma,
                                sp_linop_stats *stats);
/* The same from the k start vectors of block v (any basis; a warm start), which on return hold the
 * final orthonormal V, the estimate of the top right singular vectors. seed draws only replacements
 * for start vectors that are linearly dependent. */
sp_status sp_linop_refine_singvals(const sp_linop *op, int k, int max_iters, double tol, uint64_t seed, sp_real *v,
                                   double *sigma, sp_linop_stats *stats);

#endif
