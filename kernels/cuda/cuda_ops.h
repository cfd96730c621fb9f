/* kernels/cuda/cuda_ops.h: the CUDA backend's ops (sp_real = float; the analyzers' linear algebra
 * in double), one file per concern, gathered into the table by cuda_backend.cu, plus what those
 * files share: the error-check macros, the cuBLAS handle, a reusable device scratch buffer, the
 * cuSOLVER pool, grid sizing and warp/block reductions. Semantics (layouts, overwrite vs
 * accumulate) are those of kernels/backend.h.
 *
 * Everything runs on the legacy default stream, so ops, cuBLAS calls and the synchronous
 * upload/download are ordered without explicit events. The one exception, the cuSOLVER pool, uses
 * blocking streams, which the legacy default stream orders the same way (see below). Errors never
 * abort: a failing CUDA, cuBLAS or cuSOLVER call records one sp_error line (file:line, the call,
 * CUDA's message) and the op returns early; the caller sees it through sp_error_code(). No kernel
 * uses atomics, so every result is the same bits run to run.
 */
#ifndef SP_CUDA_OPS_H
#define SP_CUDA_OPS_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

extern "C" {
#include "kernels/backend.h"
}

#ifdef SP_DOUBLE
#error "the CUDA backend is built for sp_real = float only"
#endif

/* ---- error checks: true when the call succeeded, else one sp_error line naming it ---- */
bool sp_cuda_check(cudaError_t err, const char *call, const char *file, int line);
bool sp_cublas_check(cublasStatus_t status, const char *call, const char *file, int line);
bool sp_cusolver_check(cusolverStatus_t status, const char *call, const char *file, int line);
#define SP_CUDA_CHECK(call) sp_cuda_check((call), #call, __FILE__, __LINE__)
#define SP_CUBLAS_CHECK(call) sp_cublas_check((call), #call, __FILE__, __LINE__)
#define SP_CUSOLVER_CHECK(call) sp_cusolver_check((call), #call, __FILE__, __LINE__)
/* cuSOLVER has no status-to-string function: "CUSOLVER_STATUS_INVALID_VALUE" etc. */
const char *sp_cusolver_status_name(cusolverStatus_t status);
/* After every kernel launch: reports a bad launch configuration (or an earlier sticky error). */
#define SP_CUDA_CHECK_LAUNCH(kernel_name) sp_cuda_check(cudaGetLastError(), kernel_name, __FILE__, __LINE__)

/* ---- shared state (cuda_backend.cu, cuda_blas.cu) ---- */
/* A device buffer of at least `bytes`, reused by every op that needs temporary space (attention
 * gradients, reduction partials). Valid until the next call; NULL + sp_error on failure. */
void *sp_cuda_scratch(size_t bytes, const char *what);
/* Creates the cuBLAS handle (fp32 math, or TF32 when SPANPROBE_TF32=1). Returns false on failure. */
bool sp_cuda_blas_init(void);

/* Row-major strided-batched gemm: for i < batch, C_i = alpha op(A_i) op(B_i) + beta C_i with
 * X_i = x + i * stride_x; the same conventions as the table's gemm (which is batch 1). */
void sp_cuda_gemm_strided(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                          long long stride_a, const float *b, int ldb, long long stride_b, float beta, float *c,
                          int ldc, long long stride_c, int batch);
/* The same in double (TF32 never applies to double); false when cuBLAS failed (sp_error recorded). */
bool sp_cuda_gemm_f64_strided(int trans_a, int trans_b, int m, int n, int k, double alpha, const double *a, int lda,
                              long long stride_a, const double *b, int ldb, long long stride_b, double beta, double *c,
                              int ldc, long long stride_c, int batch);
/* dst [cols x rows] = src^T for a row-major src [rows x cols] (cuBLAS geam), on the default stream;
 * false when cuBLAS failed (sp_error recorded). */
bool sp_cuda_transpose_f64(int rows, int cols, const double *src, double *dst);

/* ---- the cuSOLVER pool (cuda_solver_pool.cu) ----
 * Independent decompositions of one batch run concurrently: SP_CUDA_SOLVER_STREAMS slots, each a
 * blocking stream (cudaStreamCreate, so it is ordered with the legacy default stream both ways),
 * its own cusolverDn handle and parameters, and a grow-only device workspace from sp_cuda_alloc (so
 * mem_stats counts it; kept until exit). One host thread per slot issues its share of the batch,
 * since cuSOLVER routines may wait on the host inside a call. */
#define SP_CUDA_SOLVER_STREAMS 4
struct sp_cuda_solver_slot {
    cudaStream_t stream;
    cusolverDnHandle_t handle;
    cusolverDnParams_t params;
    void *work;        /* device workspace, work_bytes long */
    size_t work_bytes;
    void *host_work;   /* host workspace, host_work_bytes long */
    size_t host_work_bytes;
};
/* The slots, created at the first call (NULL + one sp_error line when cuSOLVER cannot start; the
 * next call tries again). */
sp_cuda_solver_slot *sp_cuda_solver_slots(void);
/* Grows the slot's workspaces to at least the given sizes (false + sp_error on failure). */
bool sp_cuda_solver_reserve(sp_cuda_solver_slot *slot, size_t device_bytes, size_t host_bytes);
/* Decomposes item `item` on `slot` (queues it on slot->stream); no sp_error inside (it runs on a
 * worker thread): the status says what failed. */
typedef cusolverStatus_t (*sp_cuda_solve_fn)(sp_cuda_solver_slot *slot, int item, void *ctx);
/* solve(slot, item, ctx) for every item < n_items, item i on slot i % SP_CUDA_SOLVER_STREAMS, every
 * slot's items in order on its own thread. Returns when all are queued (not finished: work queued
 * later on the default stream waits for them); false + one sp_error line naming `what` and the
 * first failing item otherwise. */
bool sp_cuda_solver_run(int n_items, sp_cuda_solve_fn solve, void *ctx, const char *what);

/* ---- launch geometry ---- */
#define SP_CUDA_THREADS 256          /* threads per block for elementwise and per-row kernels */
#define SP_CUDA_ROWS_PER_BLOCK (SP_CUDA_THREADS / 32) /* warp-per-row kernels */

/* Blocks for a grid-stride loop over n elements: at least 1, at most a fixed cap (the loop covers
 * the rest), independent of the device so results never depend on the GPU model. */
static inline unsigned sp_cuda_blocks(size_t n)
{
    size_t blocks = (n + SP_CUDA_THREADS - 1) / SP_CUDA_THREADS;
    return blocks == 0 ? 1u : blocks > 65535 ? 65535u : (unsigned)blocks;
}

/* for (size_t i = ...) over [0, n) with the whole grid, each element visited by one thread */
#define SP_CUDA_GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* Launches a grid-stride kernel(n, args...) over n elements (returns at once for n = 0) and checks the
 * launch; for the void op functions that are one elementwise kernel. */
#define SP_CUDA_LAUNCH_ELEMENTWISE(kernel, n, ...)                        \
    do {                                                                  \
        if ((n) == 0)                                                     \
            return;                                                       \
        kernel<<<sp_cuda_blocks(n), SP_CUDA_THREADS>>>((n), __VA_ARGS__); \
        SP_CUDA_CHECK_LAUNCH(#kernel);                                    \
    } while (0)

static inline unsigned sp_cuda_row_blocks(int rows)
{
    return (unsigned)((rows + SP_CUDA_ROWS_PER_BLOCK - 1) / SP_CUDA_ROWS_PER_BLOCK);
}

/* ---- reductions inside a warp / a block ----
 * The xor butterfly gives every lane the same bits (each step adds the same two values, and IEEE
 * addition is commutative). The block version then combines the warp results in warp order. */
struct sp_cuda_add {
    template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct sp_cuda_max {
    template <typename T> __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};

template <typename T, typename Op> __device__ inline T sp_cuda_warp_reduce(T v, Op op)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

/* Every thread of the block must call it; every thread gets the result. */
template <typename T, typename Op> __device__ inline T sp_cuda_block_reduce(T v, Op op)
{
    __shared__ T warp_vals[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
    v = sp_cuda_warp_reduce(v, op);
    __syncthreads(); /* an earlier call may still be reading warp_vals */
    if (lane == 0)
        warp_vals[warp] = v;
    __syncthreads();
    T total = warp_vals[0];
    for (int w = 1; w < n_warps; w++)
        total = op(total, warp_vals[w]);
    return total;
}

/* ---- the ops (one file each) ---- */
/* cuda_backend.cu: memory */
void *sp_cuda_alloc(size_t bytes, const char *what);
void sp_cuda_free(void *p);
void sp_cuda_upload(void *dst, const void *host_src, size_t bytes);
void sp_cuda_download(void *host_dst, const void *src, size_t bytes);
void sp_cuda_copy(void *dst, const void *src, size_t bytes);
void sp_cuda_zero(void *dst, size_t bytes);
void sp_cuda_sync(void);
void sp_cuda_copy_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t row_bytes,
                       size_t rows);
void sp_cuda_mem_stats(size_t *in_use, size_t *peak);
void sp_cuda_mem_reset_peak(void);

/* cuda_blas.cu */
void sp_cuda_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc);
void sp_cuda_axpby(size_t n, float a, const float *x, float b, float *y);
void sp_cuda_scale(size_t n, float a, float *x);
void sp_cuda_gemm_f64(int trans_a, int trans_b, int m, int n, int k, double alpha, const double *a, int lda,
                      const double *b, int ldb, double beta, double *c, int ldc);

/* cuda_linalg.cu: fp64 widening and the cuSOLVER decompositions */
void sp_cuda_to_f64(size_t n, const float *x, double *y, int accumulate);
sp_status sp_cuda_sym_eigvals(int n, int count, double *a, double *w);
sp_status sp_cuda_singvals(int m, int n, int count, double *a, double *s);

/* cuda_reduce.cu */
double sp_cuda_sumsq(size_t n, const float *x);
double sp_cuda_dot(size_t n, const float *x, const float *y);
size_t sp_cuda_count_nonfinite(size_t n, const float *x);

/* cuda_norm.cu */
void sp_cuda_norm_fwd(sp_norm_kind kind, int rows, int dim, float eps, const float *x, const float *gain,
                      const float *bias, float *y, float *mean, float *rstd);
void sp_cuda_norm_bwd(sp_norm_kind kind, int rows, int dim, const float *x, const float *gain, const float *mean,
                      const float *rstd, const float *dy, float *dx, float *dgain, float *dbias);
void sp_cuda_norm_jvp(sp_norm_kind kind, int rows, int dim, const float *x, const float *gain, const float *mean,
                      const float *rstd, const float *tx, float *ty);

/* cuda_activation.cu */
void sp_cuda_act_fwd(sp_act_kind kind, size_t n, const float *x, float *y);
void sp_cuda_act_bwd(sp_act_kind kind, size_t n, const float *x, const float *dy, float *dx);
void sp_cuda_act_jvp(sp_act_kind kind, size_t n, const float *x, const float *tx, float *ty);
void sp_cuda_act_bwd_jvp(sp_act_kind kind, size_t n, const float *x, const float *tx, const float *dy, const float *tdy,
                         float *tdx);
void sp_cuda_glu_bwd_jvp(sp_act_kind kind, size_t n, const float *g, const float *u, const float *tg, const float *tu,
                         const float *dh, const float *tdh, float *tdg, float *tdu);
void sp_cuda_softcap_bwd_jvp(size_t n, double cap, const float *y, const float *ty, const float *dy, const float *tdy,
                             float *out);
void sp_cuda_norm_bwd_jvp(sp_norm_kind kind, int rows, int dim, const float *x, const float *gain, const float *mean,
                          const float *rstd, const float *tx, const float *tgain, const float *dy, const float *tdy,
                          float *tdx, float *tdgain, float *tdbias);
void sp_cuda_xent_bwd_jvp(int rows, int vocab, const float *logits, const int32_t *targets, float scale,
                          const float *tlogits, float *tdlogits);
/* cuda_attention_hvp.cu */
void sp_cuda_attn_bwd_jvp(const sp_attn_shape *shape, const float *q, const float *k, const float *v,
                          const float *saved, const float *tq, const float *tk, const float *tv, const float *dout,
                          const float *tdout, float *tdq, float *tdk, float *tdv);
void sp_cuda_glu_fwd(sp_act_kind kind, size_t n, const float *g, const float *u, float *h);
void sp_cuda_glu_bwd(sp_act_kind kind, size_t n, const float *g, const float *u, const float *dh, float *dg, float *du);
void sp_cuda_glu_jvp(sp_act_kind kind, size_t n, const float *g, const float *u, const float *tg, const float *tu,
                     float *th);
void sp_cuda_softcap_fwd(size_t n, double cap, const float *x, float *y);
void sp_cuda_softcap_jvp(size_t n, double cap, const float *y, const float *t, float *out);

/* cuda_rope.cu */
void sp_cuda_rope(int rows, int seq_len, int n_heads, int head_dim, int rot_dims, const double *inv_freq,
                  int direction, float *x);

/* cuda_attention.cu */
size_t sp_cuda_attn_saved_elems(const sp_attn_shape *shape);
void sp_cuda_attn_fwd(const sp_attn_shape *shape, const float *q, const float *k, const float *v, float *saved,
                      float *out);
void sp_cuda_attn_bwd(const sp_attn_shape *shape, const float *q, const float *k, const float *v, const float *saved,
                      const float *dout, float *dq, float *dk, float *dv);
void sp_cuda_attn_jvp(const sp_attn_shape *shape, const float *q, const float *k, const float *v, const float *saved,
                      const float *tq, const float *tk, const float *tv, float *tout);
/* cuda_attention_at.cu */
void sp_cuda_attn_jvp_at(const sp_attn_shape *shape, const float *q, const float *k, const float *v,
                         const float *saved, int t, int n, const float *tq, const float *tk, const float *tv,
                         float *tout);
/* The first key query i sees with a sliding window (0: causal only): keys first..i are visible. */
static __host__ __device__ inline int sp_cuda_attn_first_key(int i, int window)
{
    return window > 0 && i >= window ? i - window + 1 : 0;
}

/* cuda_attn_stats.cu */
sp_status sp_cuda_attn_stats(const sp_attn_shape *shape, const float *q, const float *k, int first_pos, double *stats,
                             double *head_cos);

/* cuda_embed.cu */
void sp_cuda_embed_fwd(int rows, int seq_len, int dim, float scale, const int32_t *ids, const float *tok,
                       const float *pos, float *out);
void sp_cuda_embed_bwd(int rows, int seq_len, int dim, float scale, const int32_t *ids, const float *dout,
                       float *dtok, float *dpos);

/* cuda_xent.cu */
void sp_cuda_xent_fwd(int rows, int vocab, const float *logits, const int32_t *targets, float *losses);
void sp_cuda_xent_bwd(int rows, int vocab, const float *logits, const int32_t *targets, float scale,
                      float *dlogits);

/* cuda_ranks.cu: over MPI ranks (core/mpi.h) */
/* Makes the device of this rank's index among its node's ranks (mod n_devices) current, so ranks
 * sharing a node take different GPUs; with one process, device 0 as before. False + sp_error. */
bool sp_cuda_select_device(int n_devices);
sp_status sp_cuda_sum_over_ranks(float *x, size_t n);

/* cuda_adamw.cu */
void sp_cuda_adamw(size_t n, float *param, const float *grad, float *m, float *v, double lr, double beta1,
                   double beta2, double eps, double weight_decay, long step);

#endif
