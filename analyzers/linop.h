/* analyzers/linop.h: a square linear map known only through its products (J x and J^T y), and its
 * top singular values by block Lanczos bidiagonalization. The vectors live in backend memory
 * (sp_real) and every vector operation runs on the backend; only reductions (accumulated in fp64),
 * k x k coefficient blocks and the small projected matrix come to the host.
 *
 * Block size k (k = 1: Golub-Kahan-Lanczos). V_1 (n x k) orthonormal, from the start vectors; then
 * for j = 1, 2, ...: U_j = J V_j, orthogonalized against U_1..U_{j-1} (classical Gram-Schmidt,
 * twice) and orthonormalized (Cholesky QR twice; modified Gram-Schmidt where a vector is nearly
 * dependent, replaced by a fresh random one where it is: an invariant subspace, or a singular value
 * of multiplicity above k); V_{j+1} = J^T U_j, the same against V_1..V_j. The estimates are the top
 * k singular values of T = U^T J V (j k x j k, its entries the inner products of the bases with the
 * products, fp64, LAPACK on the host): Rayleigh-Ritz over the Krylov space, so they approach the
 * true values from below and each step's space contains the power iteration's. Stop when every
 * estimate above 1e-12 sigma_1 changes by less than tol relative from one step to the next, or
 * after max_iters products J V. When the bases hold SP_LINOP_MAX_BLOCKS blocks (24) the iteration
 * restarts from its current top k Ritz vectors. A product J V carries all k vectors: the block
 * Jacobians run k copies of the sequence. Against the subspace (power) iteration it replaced, it
 * takes about a quarter of the products for the same tolerance (docs/benchmarks.md).
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
