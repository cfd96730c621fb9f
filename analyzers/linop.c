#include "analyzers/linop.h"

#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/linalg.h"
#include "core/rng.h"

/* Below this fraction of sigma_1 an estimate is numerically zero: it takes no part in the stop rule. */
#define SP_LINOP_ZERO 1e-12

int64_t sp_linop_len(const sp_linop *op) { return (int64_t)op->n_segments * op->seg_len; }

/* Segment s of vector j of block x. */
static sp_real *segment(const sp_linop *op, const sp_real *x, int j, int s)
{
    return (sp_real *)x + ((size_t)s * (size_t)op->max_k + (size_t)j) * (size_t)op->seg_len;
}

static double vec_dot(const sp_linop *op, const sp_real *x, int i, const sp_real *y, int j)
{
    double sum = 0;
    for (int s = 0; s < op->n_segments; s++)
        sum += op->be->dot((size_t)op->seg_len, segment(op, x, i, s), segment(op, y, j, s));
    return sum;
}

/* vector j of y -= c * vector i of x */
static void vec_sub(const sp_linop *op, double c, const sp_real *x, int i, sp_real *y, int j)
{
    for (int s = 0; s < op->n_segments; s++)
        op->be->axpby((size_t)op->seg_len, (sp_real)-c, segment(op, x, i, s), 1, segment(op, y, j, s));
}

static void vec_scale(const sp_linop *op, double a, sp_real *x, int j)
{
    for (int s = 0; s < op->n_segments; s++)
        op->be->scale((size_t)op->seg_len, (sp_real)a, segment(op, x, j, s));
}

/* host[n] into vector j of block x */
static void vec_upload(const sp_linop *op, const sp_real *host, sp_real *x, int j)
{
    for (int s = 0; s < op->n_segments; s++)
        op->be->upload(segment(op, x, j, s), host + (size_t)s * (size_t)op->seg_len,
                       (size_t)op->seg_len * sizeof *host);
}

static void fill_normal(sp_rng *rng, int64_t n, sp_real *x)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = (sp_real)sp_rng_normal(rng);
}

sp_real *sp_linop_alloc_block(const sp_linop *op, const char *what)
{
    size_t bytes;
    if (sp_size_mul3((size_t)op->n_segments * (size_t)op->max_k, (size_t)op->seg_len, sizeof(sp_real), &bytes, what) !=
        SP_OK)
        return NULL;
    return op->be->alloc(bytes, what);
}

sp_status sp_linop_draw(const sp_linop *op, int k, uint64_t seed, sp_real *x)
{
    const int64_t n = sp_linop_len(op);
    sp_real *host = sp_malloc((size_t)n * sizeof *host, "Lanczos start vector");
    if (!host)
        return SP_ERR_NOMEM;
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    for (int j = 0; j < k; j++) {
        fill_normal(&rng, n, host);
        vec_upload(op, host, x, j);
    }
    free(host);
    return SP_OK;
}

/* What one iteration run holds besides its blocks. */
typedef struct {
    const sp_linop *op;
    int k;
    double *wide;     /* backend [k, seg_len]: one segment of the k vectors, widened to fp64 */
    double *gram_dev; /* backend [k, k] */
    double *gram;     /* host [k, k] */
    sp_real *rinv_dev; /* backend [k, k]: R^{-1} of a Cholesky QR pass, or a block of inner products */
    sp_real *mixed;   /* backend [k, seg_len]: one segment of the k vectors times R^{-1} */
    sp_real *rinv;    /* host [k, k] */
    double *prev;     /* host [k]: the previous estimates */
    sp_real *redraw;  /* host [n], allocated on the first replacement */
    int replaced;     /* a vector was replaced since the flag was last cleared */
    sp_rng rng;
} work;

static void work_free(work *w)
{
    if (w->wide)
        w->op->be->free(w->wide);
    if (w->gram_dev)
        w->op->be->free(w->gram_dev);
    if (w->rinv_dev)
        w->op->be->free(w->rinv_dev);
    if (w->mixed)
        w->op->be->free(w->mixed);
    free(w->gram);
    free(w->rinv);
    free(w->redraw);
}

static sp_status work_init(work *w, const sp_linop *op, int k, uint64_t seed)
{
    *w = (work){.op = op, .k = k};
    sp_rng_seed(&w->rng, seed);
    const size_t kk = (size_t)k * (size_t)k;
    w->wide = op->be->alloc((size_t)k * (size_t)op->seg_len * sizeof *w->wide, "Lanczos fp64 vectors");
    w->gram_dev = w->wide ? op->be->alloc(kk * sizeof *w->gram_dev, "Lanczos Gram") : NULL;
    w->rinv_dev = w->gram_dev ? op->be->alloc(kk * sizeof *w->rinv_dev, "Lanczos R^-1") : NULL;
    w->mixed = w->rinv_dev ? op->be->alloc((size_t)k * (size_t)op->seg_len * sizeof *w->mixed,
                                           "Lanczos vectors")
                           : NULL;
    w->gram = w->mixed ? sp_malloc((kk + (size_t)k) * sizeof *w->gram, "Lanczos Gram") : NULL;
    w->rinv = w->gram ? sp_malloc(kk * sizeof *w->rinv, "Lanczos R^-1") : NULL;
    if (!w->rinv) {
        work_free(w);
        return SP_ERR_NOMEM;
    }
    w->prev = w->gram + kk;
    return SP_OK;
}

/* w->gram = X^T X over vectors 0..k-1 of block x, in fp64 on the backend: one download. */
static void gram_of(work *w, const sp_real *x)
{
    const sp_linop *op = w->op;
    const int k = w->k, len = (int)op->seg_len;
    for (int s = 0; s < op->n_segments; s++) {
        op->be->to_f64((size_t)k * (size_t)len, segment(op, x, 0, s), w->wide, 0);
        op->be->gemm_f64(0, 1, k, k, len, 1.0, w->wide, len, w->wide, len, s ? 1.0 : 0.0, w->gram_dev, k);
    }
    op->be->download(w->gram, w->gram_dev, (size_t)k * (size_t)k * sizeof *w->gram);
}

/* A vector keeps at least this fraction of its norm after the previous ones are projected out, or
 * it counts as dependent on them. */
#define SP_LINOP_INDEPENDENT 1e-10
/* A Cholesky pass trusts its Gram matrix only down to this fraction: below it the fp64 Gram of the
 * vectors has lost the residual to rounding (it squares the ratio), and modified Gram-Schmidt,
 * which works on the vectors themselves, takes over. */
#define SP_LINOP_CHOLESKY_MIN 1e-6

/* One Cholesky QR pass: V^T V = R^T R (host, k x k), then V <- V R^{-1} on the backend, one gemm per
 * segment. Returns 0, leaving V untouched, when a pivot shows a vector nearly in the span of the
 * earlier ones. In exact arithmetic the result is modified Gram-Schmidt's (the Q of V = QR with
 * R's diagonal positive), in one reduction instead of k^2. */
static int cholesky_pass(work *w, sp_real *v)
{
    const sp_linop *op = w->op;
    const int k = w->k, len = (int)op->seg_len;
    gram_of(w, v);
    double *g = w->gram; /* overwritten by R in its upper triangle, row-major */
    for (int j = 0; j < k; j++) {
        const double norm_sq = g[(size_t)j * k + j];
        double d = norm_sq;
        for (int i = 0; i < j; i++)
            d -= g[(size_t)i * k + j] * g[(size_t)i * k + j];
        if (!(norm_sq > 0) || !(d > SP_LINOP_CHOLESKY_MIN * SP_LINOP_CHOLESKY_MIN * norm_sq))
            return 0;
        const double r_jj = sqrt(d);
        g[(size_t)j * k + j] = r_jj;
        for (int c = j + 1; c < k; c++) {
            double x = g[(size_t)j * k + c];
            for (int i = 0; i < j; i++)
                x -= g[(size_t)i * k + j] * g[(size_t)i * k + c];
            g[(size_t)j * k + c] = x / r_jj;
        }
    }
    /* R^{-1}, upper triangular, by back substitution column by column, in double, stored as sp_real */
    for (int c = 0; c < k; c++)
        for (int r = k - 1; r >= 0; r--) {
            double x = r == c ? 1.0 : 0.0;
            for (int i = r + 1; i <= c; i++)
                x -= g[(size_t)r * k + i] * w->rinv[(size_t)i * k + c];
            w->rinv[(size_t)r * k + c] = r > c ? 0 : x / g[(size_t)r * k + r];
        }
    op->be->upload(w->rinv_dev, w->rinv, (size_t)k * (size_t)k * sizeof *w->rinv);
    /* a segment holds the k vectors as rows: new rows = (R^{-1})^T rows */
    for (int s = 0; s < op->n_segments; s++) {
        sp_real *seg = segment(op, v, 0, s);
        op->be->gemm(1, 0, k, len, k, 1, w->rinv_dev, k, seg, len, 0, w->mixed, len);
        op->be->copy(seg, w->mixed, (size_t)k * (size_t)len * sizeof *seg);
    }
    return 1;
}

static sp_status orthonormalize_mgs(work *w, sp_real *v)
{
    const sp_linop *op = w->op;
    const int64_t n = sp_linop_len(op);
    gram_of(w, v); /* every starting norm in one reduction: vector j is untouched until its turn */
    for (int j = 0; j < w->k; j++) {
        double before = sqrt(w->gram[(size_t)j * w->k + j]);
        for (int attempt = 0;; attempt++) {
            for (int pass = 0; pass < 2; pass++)
                for (int i = 0; i < j; i++)
                    vec_sub(op, vec_dot(op, v, i, v, j), v, i, v, j);
            double after = j == 0 ? before : sqrt(vec_dot(op, v, j, v, j));
            if (after > SP_LINOP_INDEPENDENT * before && after > 0) {
                vec_scale(op, 1 / after, v, j);
                break;
            }
            if (attempt == 8) /* a random draw is independent of j < n vectors with probability 1 */
                return sp_error(SP_ERR_NUMERIC, "Lanczos iteration: cannot extend %d orthonormal vectors of length %lld",
                                j, (long long)n);
            if (!w->redraw && !(w->redraw = sp_malloc((size_t)n * sizeof *w->redraw, "Lanczos redraw")))
                return SP_ERR_NOMEM;
            fill_normal(&w->rng, n, w->redraw);
            vec_upload(op, w->redraw, v, j);
            w->replaced = 1;
            before = sqrt(vec_dot(op, v, j, v, j));
        }
    }
    return SP_OK;
}

/* Orthonormalizes vectors 0..k-1 of block v in place: Cholesky QR twice (the second pass removes
 * what rounding left of the first's error), or, when a vector is nearly dependent on the earlier
 * ones, modified Gram-Schmidt, two passes, vector by vector. There a vector that loses almost all
 * of its norm to the previous ones (J^T J rank-deficient on the subspace) is replaced by a fresh
 * random vector, orthonormalized the same way. */
static sp_status orthonormalize(work *w, sp_real *v)
{
    if (cholesky_pass(w, v) && cholesky_pass(w, v))
        return SP_OK;
    return orthonormalize_mgs(w, v);
}

static int settled(int k, const double *sigma, const double *prev, double tol)
{
    for (int i = 0; i < k; i++)
        if (sigma[i] > SP_LINOP_ZERO * sigma[0] && fabs(sigma[i] - prev[i]) >= tol * sigma[i])
            return 0;
    return 1;
}

static sp_status check_args(const sp_linop *op, int k, int max_iters)
{
    if (k < 1 || k > op->max_k || k > sp_linop_len(op) || max_iters < 1 || op->n_segments < 1 ||
        op->seg_len < 1 || op->seg_len > INT_MAX)
        return sp_error(SP_ERR_INTERNAL,
                        "Lanczos iteration: k = %d with max_k %d, %d segments of %lld elements, max_iters %d", k,
                        op->max_k, op->n_segments, (long long)op->seg_len, max_iters);
    return SP_OK;
}

/* At most this many blocks of k vectors in each of the two Krylov bases; then the iteration
 * restarts from its current top-k Ritz vectors (memory: 2 SP_LINOP_MAX_BLOCKS + 1 vector blocks). */
#define SP_LINOP_MAX_BLOCKS 24

/* w->rinv_dev = X^T Y (k x k, row-major: [i * k + j] = x_i . y_j) over vectors 0..k-1 of blocks x
 * and y, on the backend in sp_real: no conversion and no host round trip (fp32 inner products of
 * the unit basis vectors are ~1e-7 relative, far inside the stop rule's 1e-4). */
static void cross_dev(work *w, const sp_real *x, const sp_real *y)
{
    const sp_linop *op = w->op;
    const int k = w->k, len = (int)op->seg_len;
    for (int s = 0; s < op->n_segments; s++)
        op->be->gemm(0, 1, k, k, len, 1, segment(op, x, 0, s), len, segment(op, y, 0, s), len, s ? 1 : 0, w->rinv_dev,
                     k);
}

/* The same on the host, in c [k, k]. */
static void cross_of(work *w, const sp_real *x, const sp_real *y, double *c)
{
    cross_dev(w, x, y);
    w->op->be->download(w->rinv, w->rinv_dev, (size_t)w->k * (size_t)w->k * sizeof *w->rinv);
    for (int i = 0; i < w->k * w->k; i++)
        c[i] = w->rinv[i];
}

/* y -= Q (Q^T y) over vectors 0..k-1: y's components along the orthonormal block q, removed, all
 * on the backend. */
static void project_out(work *w, const sp_real *q, sp_real *y)
{
    const sp_linop *op = w->op;
    const int k = w->k, len = (int)op->seg_len;
    cross_dev(w, q, y);
    /* a segment holds the vectors as rows: y_j -= sum_i c_ij q_i, rows Y -= C^T Q */
    for (int s = 0; s < op->n_segments; s++)
        op->be->gemm(1, 0, k, len, k, -1, w->rinv_dev, k, segment(op, q, 0, s), len, 1, segment(op, y, 0, s), len);
}

/* Block y orthonormal and orthogonal to blocks basis[0..n-1] (themselves orthonormal and
 * mutually orthogonal): classical Gram-Schmidt against the basis twice, then the block
 * orthonormalized; a vector replaced there (nearly in the span of the rest) is projected off the
 * basis once more, and the block orthonormalized again. */
static sp_status extend_basis(work *w, sp_real *const *basis, int n, sp_real *y)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            project_out(w, basis[i], y);
    SP_TRY(orthonormalize(w, y));
    if (!w->replaced || n == 0)
        return SP_OK;
    w->replaced = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            project_out(w, basis[i], y);
    return orthonormalize(w, y);
}

/* The Krylov bases of one cycle of the iteration: V_1..V_{m+1} and U_1..U_m, blocks of k vectors,
 * and T = U^T J V ([m k, m k], row-major with row stride t_ld). */
typedef struct {
    sp_real *v[SP_LINOP_MAX_BLOCKS + 1], *u[SP_LINOP_MAX_BLOCKS];
    sp_real *product; /* J V_j, then J^T U_j, as the map gave them */
    double *t;        /* host [t_ld, t_ld] */
    double *coef;     /* host [k, k] */
    double *values;   /* host [t_ld]: the singular values of T */
    double *scratch;  /* host [t_ld, t_ld] (the SVD destroys its input), then right singular vectors */
    double *right;    /* host [t_ld, t_ld]: V^T of the SVD of T (a restart's) */
    int t_ld, cap;    /* cap: blocks per basis this run may hold */
} krylov;

static void krylov_free(const sp_linop *op, krylov *kr)
{
    for (int i = 0; i <= SP_LINOP_MAX_BLOCKS; i++) {
        if (kr->v[i])
            op->be->free(kr->v[i]);
        if (i < SP_LINOP_MAX_BLOCKS && kr->u[i])
            op->be->free(kr->u[i]);
    }
    if (kr->product)
        op->be->free(kr->product);
    free(kr->t);
}

static sp_status krylov_init(const sp_linop *op, int k, krylov *kr)
{
    *kr = (krylov){0};
    const int64_t fit = sp_linop_len(op) / k; /* blocks of k orthonormal vectors in R^n */
    kr->cap = fit < SP_LINOP_MAX_BLOCKS ? (int)fit : SP_LINOP_MAX_BLOCKS;
    kr->t_ld = kr->cap * k;
    const size_t tt = (size_t)kr->t_ld * (size_t)kr->t_ld;
    kr->t = sp_malloc((3 * tt + (size_t)k * k + (size_t)kr->t_ld) * sizeof *kr->t, "Lanczos projected matrix");
    kr->product = kr->t ? sp_linop_alloc_block(op, "Lanczos products") : NULL;
    if (!kr->product) {
        krylov_free(op, kr);
        return SP_ERR_NOMEM;
    }
    kr->scratch = kr->t + tt;
    kr->right = kr->scratch + tt;
    kr->coef = kr->right + tt;
    kr->values = kr->coef + (size_t)k * k;
    return SP_OK;
}

/* Block i (allocated on first use). */
static sp_status basis_block(const sp_linop *op, sp_real **slot)
{
    if (!*slot && !(*slot = sp_linop_alloc_block(op, "Lanczos basis")))
        return SP_ERR_NOMEM;
    return SP_OK;
}

/* T's block (row block r, column block c) = coef (or its transpose). */
static void put_block(krylov *kr, int k, int r, int c, const double *coef, int transpose)
{
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++)
            kr->t[(size_t)(r * k + i) * kr->t_ld + (size_t)(c * k + j)] = transpose ? coef[j * k + i] : coef[i * k + j];
}

/* The singular values of T's leading [n, n], descending, into kr->values; with vectors, the right
 * singular vectors' transposes into kr->right (row i: the i-th). */
static sp_status t_singvals(krylov *kr, int n, int vectors)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const double x = kr->t[(size_t)i * kr->t_ld + j];
            if (!isfinite(x))
                return sp_error(SP_ERR_NUMERIC, "Lanczos iteration: the map gave non-finite values (product %d)",
                                j + 1);
            kr->scratch[(size_t)i * n + j] = x;
        }
    const lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, vectors ? 'O' : 'N', n, n, kr->scratch, n, kr->values,
                                           NULL, n, kr->right, n);
    if (info != 0)
        return sp_error(SP_ERR_NUMERIC, "Lanczos iteration: the SVD of the %d x %d projected matrix failed (%d)", n, n,
                        (int)info);
    return SP_OK;
}

/* V_1 <- the top k Ritz vectors of the cycle that has m blocks: V [v_1 .. v_mk] times the first k
 * right singular vectors of T (in kr->right). */
static sp_status restart_block(work *w, krylov *kr, int m)
{
    const sp_linop *op = w->op;
    const int k = w->k, len = (int)op->seg_len, mk = m * k;
    double *mix = w->gram; /* [k, k] per basis block: rows of the combination */
    sp_real *out = kr->product;
    op->be->zero(out, (size_t)op->n_segments * (size_t)op->max_k * (size_t)len * sizeof *out);
    for (int b = 0; b < m; b++) {
        /* new vector r = sum over block b's vectors i of right[r][b k + i] v_{b,i} */
        for (int r = 0; r < k; r++)
            for (int i = 0; i < k; i++)
                mix[r * k + i] = kr->right[(size_t)r * mk + (size_t)b * k + i];
        for (int i = 0; i < k * k; i++)
            w->rinv[i] = (sp_real)mix[i];
        op->be->upload(w->rinv_dev, w->rinv, (size_t)k * (size_t)k * sizeof *w->rinv);
        for (int s = 0; s < op->n_segments; s++)
            op->be->gemm(0, 0, k, len, k, 1, w->rinv_dev, k, segment(op, kr->v[b], 0, s), len, 1, segment(op, out, 0, s),
                         len);
    }
    for (int s = 0; s < op->n_segments; s++)
        op->be->copy(segment(op, kr->v[0], 0, s), segment(op, out, 0, s), (size_t)k * (size_t)len * sizeof *out);
    return orthonormalize(w, kr->v[0]); /* exact in exact arithmetic; rounding's drift removed */
}

sp_status sp_linop_refine_singvals(const sp_linop *op, int k, int max_iters, double tol, uint64_t seed, sp_real *v,
                                   double *sigma, sp_linop_stats *stats)
{
    SP_TRY(check_args(op, k, max_iters));
    work w;
    SP_TRY(work_init(&w, op, k, seed));
    krylov kr;
    sp_status st = krylov_init(op, k, &kr);
    if (st == SP_OK && (st = basis_block(op, &kr.v[0])) == SP_OK) {
        for (int s = 0; s < op->n_segments; s++)
            op->be->copy(segment(op, kr.v[0], 0, s), segment(op, v, 0, s), (size_t)k * (size_t)op->seg_len * sizeof *v);
        st = orthonormalize(&w, kr.v[0]);
    }
    *stats = (sp_linop_stats){0};
    int m = 0; /* blocks of the current cycle */
    for (int it = 1; it <= max_iters && st == SP_OK; it++) {
        if (m == kr.cap) { /* the bases are full: again from the top k Ritz vectors */
            if ((st = t_singvals(&kr, m * k, 1)) != SP_OK || (st = restart_block(&w, &kr, m)) != SP_OK)
                break;
            m = 0;
        }
        /* U_{m+1}: J V_{m+1} off U_1..U_m, orthonormalized; T's column block m + 1 = U^T J V_{m+1} */
        if ((st = basis_block(op, &kr.u[m])) != SP_OK || (st = op->apply(op->ctx, k, kr.v[m], kr.product)) != SP_OK)
            break;
        stats->iters = it;
        for (int s = 0; s < op->n_segments; s++)
            op->be->copy(segment(op, kr.u[m], 0, s), segment(op, kr.product, 0, s),
                         (size_t)k * (size_t)op->seg_len * sizeof *v);
        if ((st = extend_basis(&w, kr.u, m, kr.u[m])) != SP_OK)
            break;
        for (int b = 0; b <= m; b++) {
            cross_of(&w, kr.u[b], kr.product, kr.coef);
            put_block(&kr, k, b, m, kr.coef, 0);
        }
        /* V_{m+2}: J^T U_{m+1} off V_1..V_{m+1}; T's row block m + 1 left of the diagonal = (V^T J^T U_{m+1})^T */
        if ((st = op->apply_t(op->ctx, k, kr.u[m], kr.product)) != SP_OK)
            break;
        for (int b = 0; b < m; b++) {
            cross_of(&w, kr.v[b], kr.product, kr.coef);
            put_block(&kr, k, m, b, kr.coef, 1);
        }
        m++;
        if ((st = t_singvals(&kr, m * k, 0)) != SP_OK)
            break;
        memcpy(sigma, kr.values, (size_t)k * sizeof *sigma);
        if (stats->iters > 1 && m > 1 && settled(k, sigma, w.prev, tol)) {
            stats->converged = 1;
            break;
        }
        if (sigma[0] == 0) { /* J V = 0 (from a random start: J is zero, with probability 1) */
            stats->converged = 1;
            break;
        }
        memcpy(w.prev, sigma, (size_t)k * sizeof *sigma);
        if (m < kr.cap && it < max_iters) {
            if ((st = basis_block(op, &kr.v[m])) != SP_OK)
                break;
            for (int s = 0; s < op->n_segments; s++)
                op->be->copy(segment(op, kr.v[m], 0, s), segment(op, kr.product, 0, s),
                             (size_t)k * (size_t)op->seg_len * sizeof *v);
            st = extend_basis(&w, kr.v, m, kr.v[m]);
        }
    }
    /* the top k right singular vectors back into v */
    if (st == SP_OK && m > 0 && (st = t_singvals(&kr, m * k, 1)) == SP_OK && (st = restart_block(&w, &kr, m)) == SP_OK)
        for (int s = 0; s < op->n_segments; s++)
            op->be->copy(segment(op, v, 0, s), segment(op, kr.v[0], 0, s), (size_t)k * (size_t)op->seg_len * sizeof *v);
    krylov_free(op, &kr);
    work_free(&w);
    return st;
}

sp_status sp_linop_top_singvals(const sp_linop *op, int k, int max_iters, double tol, uint64_t seed, double *sigma,
                                sp_linop_stats *stats)
{
    SP_TRY(check_args(op, k, max_iters));
    sp_real *v = sp_linop_alloc_block(op, "Lanczos start block");
    if (!v)
        return SP_ERR_NOMEM;
    sp_status st = sp_linop_draw(op, k, seed, v);
    if (st == SP_OK)
        st = sp_linop_refine_singvals(op, k, max_iters, tol, seed + 1, v, sigma, stats);
    op->be->free(v);
    return st;
}
