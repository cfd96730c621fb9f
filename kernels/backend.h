/* kernels/backend.h: every op the model, the training loop and the analyzers run, behind one table.
 *
 * A backend is chosen once at start (sp_backend_select) and passed down; model and analyzer code
 * only ever call through this table, so they never know whether the CPU (OpenBLAS, the reference)
 * or CUDA (cuBLAS) ran them. All pointers are backend memory: host memory for the CPU backend,
 * device memory for CUDA. Host data crosses only through upload/download.
 *
 * Conventions
 * - Row-major everywhere. Activations are [rows, dim] with rows = batch * seq_len; the position of
 *   row r in its sequence is r % seq_len.
 * - Forward ops overwrite their outputs.
 * - Backward (VJP) ops ADD into every gradient they produce (inputs and parameters): callers zero
 *   gradient buffers once, and a value used twice simply receives two contributions.
 * - Forward-mode (JVP) ops take the tangents of their inputs and overwrite the tangent of their
 *   output, reusing what the forward pass saved (mean/rstd, attention statistics).
 * - Reductions return a host double, accumulated in double.
 */
#ifndef SP_BACKEND_H
#define SP_BACKEND_H

#include "core/common.h"
#include "core/config.h"

typedef struct sp_backend sp_backend;

/* Elementwise activations: GELU, tanh approximation (GPT-2) or exact 0.5 x (1 + erf(x / sqrt 2));
 * SiLU x sigmoid(x). */
typedef enum { SP_ACT_GELU_TANH, SP_ACT_GELU_ERF, SP_ACT_SILU } sp_act_kind;

/* One attention call: the sizes, the score scale (1/sqrt(head_dim) unless a model says otherwise),
 * the score soft-cap (0: off) and the sliding window (0: causal only). */
typedef struct {
    int batch, seq_len, n_heads, n_kv_heads, head_dim;
    double scale, softcap;
    int window;
} sp_attn_shape;

/* What attn_stats reports per query row i and head h, over the visible keys j of row i:
 * ENTROPY -sum_j P_ij ln P_ij (nats); SINK P_i0, the probability on the sequence's first position
 * (0 where a sliding window hides it); DISTANCE sum_j P_ij (i - j) (positions); MAX_LOGIT max_j s_ij,
 * the score as the softmax sees it: scaled and, with a soft-cap, capped. */
enum { SP_ATTN_ENTROPY, SP_ATTN_SINK, SP_ATTN_DISTANCE, SP_ATTN_MAX_LOGIT, SP_ATTN_N_STATS };

struct sp_backend {
    const char *name; /* "cpu" or "cuda" */

    /* ---- memory ---- */
    void *(*alloc)(size_t bytes, const char *what); /* zeroed; NULL + sp_error(SP_ERR_NOMEM) on failure */
    void (*free)(void *p);
    void (*upload)(void *dst, const void *host_src, size_t bytes);
    void (*download)(void *host_dst, const void *src, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);
    void (*zero)(void *dst, size_t bytes);
    void (*sync)(void); /* wait for queued work (no-op on the CPU) */
    /* rows x row_bytes from src to dst, rows src_pitch resp. dst_pitch bytes apart (a strided gather) */
    void (*copy_rows)(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t row_bytes, size_t rows);
    /* Bytes of backend memory held through alloc now, and the most held at once since the last
     * reset_peak (every alloc of the backend counts, its own scratch and solver workspaces too). */
    void (*mem_stats)(size_t *in_use, size_t *peak);
    void (*mem_reset_peak)(void);

    /* ---- dense linear algebra ----
     * C[m,n] = alpha * op(A) op(B) + beta * C, row-major; op(A) is [m,k], op(B) is [k,n];
     * trans_a/trans_b = 1 means the stored matrix is the transpose. */
    void (*gemm)(int trans_a, int trans_b, int m, int n, int k, sp_real alpha, const sp_real *a, int lda,
                 const sp_real *b, int ldb, sp_real beta, sp_real *c, int ldc);
    /* y = a*x + b*y (b = 0 overwrites y even if it held NaN) */
    void (*axpby)(size_t n, sp_real a, const sp_real *x, sp_real b, sp_real *y);
    /* x *= a */
    void (*scale)(size_t n, sp_real a, sp_real *x);
    double (*sumsq)(size_t n, const sp_real *x);
    double (*dot)(size_t n, const sp_real *x, const sp_real *y);
    /* number of NaN/Inf entries */
    size_t (*count_nonfinite)(size_t n, const sp_real *x);

    /* ---- normalization over the last dim ----
     * LayerNorm: y = (x - mean) * rstd * gain + bias; RMSNorm: y = x * rstd * gain (bias and mean NULL).
     * rstd = 1/sqrt(var + eps) (LayerNorm, biased variance) or 1/sqrt(mean(x^2) + eps) (RMSNorm).
     * mean/rstd [rows] are saved by the forward pass for bwd and jvp. */
    void (*norm_fwd)(sp_norm_kind kind, int rows, int dim, sp_real eps, const sp_real *x, const sp_real *gain,
                     const sp_real *bias, sp_real *y, sp_real *mean, sp_real *rstd);
    void (*norm_bwd)(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                     const sp_real *mean, const sp_real *rstd, const sp_real *dy, sp_real *dx, sp_real *dgain,
                     sp_real *dbias);
    void (*norm_jvp)(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                     const sp_real *mean, const sp_real *rstd, const sp_real *tx, sp_real *ty);

    /* ---- activations, elementwise over n, evaluated in double ----
     * act: y = act(x); glu: h = act(g) * u (SwiGLU with SP_ACT_SILU, GEGLU with a GELU). */
    void (*act_fwd)(sp_act_kind kind, size_t n, const sp_real *x, sp_real *y);
    void (*act_bwd)(sp_act_kind kind, size_t n, const sp_real *x, const sp_real *dy, sp_real *dx);
    void (*act_jvp)(sp_act_kind kind, size_t n, const sp_real *x, const sp_real *tx, sp_real *ty);
    void (*glu_fwd)(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, sp_real *h);
    void (*glu_bwd)(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, const sp_real *dh, sp_real *dg,
                    sp_real *du);
    void (*glu_jvp)(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, const sp_real *tg,
                    const sp_real *tu, sp_real *th);
    /* Soft-cap y = cap tanh(x / cap) (y may be x). Its Jacobian is diagonal, 1 - (y / cap)^2 from the
     * capped values y, and so its own transpose: softcap_jvp (out = that times t, out may be t) is
     * also the VJP, which the backward pass applies in place to the gradient of the capped values. */
    void (*softcap_fwd)(size_t n, double cap, const sp_real *x, sp_real *y);
    void (*softcap_jvp)(size_t n, double cap, const sp_real *y, const sp_real *t, sp_real *out);

    /* ---- RoPE, in place on x [rows, n_heads * head_dim] ----
     * Interleaved pairs (2i, 2i+1) within each head, as llama2.c: pair i < rot_dims / 2 turns by
     * pos * inv_freq[i] with pos = r % seq_len (angle, sine and cosine in double); dims from rot_dims
     * on pass through (partial rotary). inv_freq is backend memory, rot_dims / 2 doubles (the model
     * computes the table once: theta^(-2i/rot_dims), scaled or not). direction +1 rotates (forward
     * and JVP, the map is linear); -1 rotates back (its transpose, for the backward pass). */
    void (*rope)(int rows, int seq_len, int n_heads, int head_dim, int rot_dims, const double *inv_freq,
                 int direction, sp_real *x);

    /* ---- causal multi-head attention with grouped-query heads ----
     * q, out [rows, n_heads*head_dim]; k, v [rows, n_kv_heads*head_dim]; query head h reads kv head
     * h / (n_heads / n_kv_heads). Scores z = scale q.k; with softcap c > 0, s = c tanh(z / c), else
     * s = z; query i sees key j iff j <= i and (window = 0 or i - j < window); P = softmax of the
     * visible s, out = P v. `saved` holds what the forward pass keeps for bwd and jvp, of
     * attn_saved_elems() elements (the backend decides: probabilities, or row statistics). */
    size_t (*attn_saved_elems)(const sp_attn_shape *shape);
    void (*attn_fwd)(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v, sp_real *saved,
                     sp_real *out);
    void (*attn_bwd)(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                     const sp_real *saved, const sp_real *dout, sp_real *dq, sp_real *dk, sp_real *dv);
    void (*attn_jvp)(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                     const sp_real *saved, const sp_real *tq, const sp_real *tk, const sp_real *tv, sp_real *tout);
    /* attn_jvp at one query position t of sequence 0 of the pass (q, k, v, saved as attn_fwd had
     * them), for n tangents that are zero at every position but t: tq [n, n_heads*head_dim] and
     * tk, tv [n, n_kv_heads*head_dim] hold the tangents' rows at t, tout [n, n_heads*head_dim]
     * gets the output's tangent at t (the positions before t stay zero, those after are not
     * needed: the token-local Jacobians). Work n * n_heads * (t + 1) * head_dim, not a pass. */
    void (*attn_jvp_at)(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                        const sp_real *saved, int t, int n, const sp_real *tq, const sp_real *tk, const sp_real *tv,
                        sp_real *tout);
    /* Diagnostics of the probabilities P of attn_fwd, recomputed from q and k (its scores, soft-cap,
     * window and softmax; nothing of `saved` is needed). Per query row r (position i = r % seq_len)
     * and head h, stats[(r * n_heads + h) * SP_ATTN_N_STATS + s] (double) gets the SP_ATTN_* values
     * below. head_cos (NULL: not computed) [n_heads, n_heads] gets ADDED, for every row with
     * i >= first_pos that sees at least two keys, the cosine between the rows P_h,i and P_h',i of
     * heads h and h': sum_j P_hij P_h'ij / sqrt(sum_j P_hij^2 sum_j P_h'ij^2). Memory: a scratch of
     * a few query rows of every head at a time, never [seq_len, seq_len] per head. SP_ERR_NOMEM
     * when that scratch cannot be allocated; device failures go through sp_error as for every op. */
    sp_status (*attn_stats)(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, int first_pos,
                            double *stats, double *head_cos);

    /* ---- embeddings ----
     * out[r] = scale (tok[ids[r]] + pos[r % seq_len]) (pos may be NULL); ids are int32 in backend
     * memory. bwd adds scale dout into the rows of dtok (and dpos). */
    void (*embed_fwd)(int rows, int seq_len, int dim, sp_real scale, const int32_t *ids, const sp_real *tok,
                      const sp_real *pos, sp_real *out);
    void (*embed_bwd)(int rows, int seq_len, int dim, sp_real scale, const int32_t *ids, const sp_real *dout,
                      sp_real *dtok, sp_real *dpos);

    /* ---- softmax cross-entropy over logits [rows, vocab]; targets < 0 are ignored ----
     * fwd writes the loss of each row (0 for ignored rows); bwd ADDs scale * (softmax - onehot). */
    void (*xent_fwd)(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real *losses);
    void (*xent_bwd)(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real scale,
                     sp_real *dlogits);

    /* ---- second order, for exact Hessian-vector products (model/hvp.c) ----
     * Each is the JVP of a backward op above: the tangent of the gradient it produces, from the
     * tangents of its point (tx, tg, ...) and of its incoming gradient (tdy), ADDED into the output
     * tangents like the backward op's gradients (softcap_bwd_jvp overwrites, as softcap_jvp).
     * norm_bwd_jvp: tgain NULL is a zero gain tangent; tdgain, tdbias may be NULL. */
    void (*norm_bwd_jvp)(sp_norm_kind kind, int rows, int dim, const sp_real *x, const sp_real *gain,
                         const sp_real *mean, const sp_real *rstd, const sp_real *tx, const sp_real *tgain,
                         const sp_real *dy, const sp_real *tdy, sp_real *tdx, sp_real *tdgain, sp_real *tdbias);
    void (*act_bwd_jvp)(sp_act_kind kind, size_t n, const sp_real *x, const sp_real *tx, const sp_real *dy,
                        const sp_real *tdy, sp_real *tdx);
    void (*glu_bwd_jvp)(sp_act_kind kind, size_t n, const sp_real *g, const sp_real *u, const sp_real *tg,
                        const sp_real *tu, const sp_real *dh, const sp_real *tdh, sp_real *tdg, sp_real *tdu);
    /* y: the capped values, ty their tangent, dy the gradient of y: out = S'(y) tdy + S''(y) ty dy */
    void (*softcap_bwd_jvp)(size_t n, double cap, const sp_real *y, const sp_real *ty, const sp_real *dy,
                            const sp_real *tdy, sp_real *out);
    /* tdlogits += scale * (P * (tlogits - rowsum(P * tlogits))), the softmax JVP, on counted rows */
    void (*xent_bwd_jvp)(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real scale,
                         const sp_real *tlogits, sp_real *tdlogits);
    void (*attn_bwd_jvp)(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                         const sp_real *saved, const sp_real *tq, const sp_real *tk, const sp_real *tv,
                         const sp_real *dout, const sp_real *tdout, sp_real *tdq, sp_real *tdk, sp_real *tdv);

    /* ---- fp64 dense linear algebra for the analyzers: double whatever sp_real is ----
     * Covariances are totalled, and every eigen and singular value decomposed, in fp64 on the
     * backend (LAPACK on the CPU, cuSOLVER on CUDA); only the values come back to the host. */
    /* y = x (accumulate 0) or y += x (accumulate 1), x widened to double */
    void (*to_f64)(size_t n, const sp_real *x, double *y, int accumulate);
    /* gemm in double, the conventions of gemm */
    void (*gemm_f64)(int trans_a, int trans_b, int m, int n, int k, double alpha, const double *a, int lda,
                     const double *b, int ldb, double beta, double *c, int ldc);
    /* Eigenvalues, descending, of `count` symmetric n x n matrices, matrix i at a + i n^2 (only
     * the upper triangle, row-major i <= j, is read; destroyed), into w + i n. SP_ERR_NUMERIC (one
     * line naming the matrix) when one does not converge; other errors through sp_error as everywhere. */
    sp_status (*sym_eigvals)(int n, int count, double *a, double *w);
    /* Singular values, descending, of `count` row-major m x n matrices at a + i m n (destroyed),
     * into s + i min(m, n). */
    sp_status (*singvals)(int m, int n, int count, double *a, double *s);

    /* ---- over MPI ranks (core/mpi.h) ----
     * x[0..n) summed over the ranks in place, the same bits on every rank (a collective; nothing
     * with one rank): the CPU's through MPI in host memory, CUDA's through NCCL between the GPUs
     * where the build has it (make NCCL=1, auto-detected), else through host copies and MPI. */
    sp_status (*sum_over_ranks)(sp_real *x, size_t n);

    /* ---- AdamW, bias-corrected, decoupled weight decay (p -= lr * wd * p) at step t >= 1 ---- */
    void (*adamw)(size_t n, sp_real *param, const sp_real *grad, sp_real *m, sp_real *v, double lr, double beta1,
                  double beta2, double eps, double weight_decay, long step);
};

/* The CPU reference backend (always present). */
const sp_backend *sp_backend_cpu(void);
/* The CUDA backend, or NULL when spanprobe was built without it or no GPU is visible. */
const sp_backend *sp_backend_cuda(void);
/* "cpu", "cuda" or "auto" (CUDA when a GPU is present, else CPU). */
sp_status sp_backend_select(const char *name, const sp_backend **out);

#endif
