/* kernels/cuda/cuda_backend.cu: the CUDA backend table, device detection, error reporting and the
 * memory ops (plain cudaMalloc, never managed memory) with their byte accounting. */
#include <new>
#include <unordered_map>

#include "kernels/cuda/cuda_ops.h"

bool sp_cuda_check(cudaError_t err, const char *call, const char *file, int line)
{
    if (err == cudaSuccess)
        return true;
    sp_error(err == cudaErrorMemoryAllocation ? SP_ERR_NOMEM : SP_ERR_INTERNAL, "%s:%d: CUDA call %s failed: %s (%s)",
             file, line, call, cudaGetErrorString(err), cudaGetErrorName(err));
    return false;
}

bool sp_cublas_check(cublasStatus_t status, const char *call, const char *file, int line)
{
    if (status == CUBLAS_STATUS_SUCCESS)
        return true;
    sp_error(status == CUBLAS_STATUS_ALLOC_FAILED ? SP_ERR_NOMEM : SP_ERR_INTERNAL,
             "%s:%d: cuBLAS call %s failed: %s (%s)", file, line, call, cublasGetStatusString(status),
             cublasGetStatusName(status));
    return false;
}

const char *sp_cusolver_status_name(cusolverStatus_t status)
{
    switch (status) {
    case CUSOLVER_STATUS_SUCCESS: return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
    case CUSOLVER_STATUS_INVALID_WORKSPACE: return "CUSOLVER_STATUS_INVALID_WORKSPACE";
    default: return "another cuSOLVER status";
    }
}

bool sp_cusolver_check(cusolverStatus_t status, const char *call, const char *file, int line)
{
    if (status == CUSOLVER_STATUS_SUCCESS)
        return true;
    sp_error(status == CUSOLVER_STATUS_ALLOC_FAILED ? SP_ERR_NOMEM : SP_ERR_INTERNAL,
             "%s:%d: cuSOLVER call %s failed: %s (status %d)", file, line, call, sp_cusolver_status_name(status),
             (int)status);
    return false;
}

/* mem_stats: the size of every live block (CUDA cannot tell it back), and the running totals. The
 * backend is used from one host thread (the solver pool's workers never allocate). */
static std::unordered_map<void *, size_t> block_bytes;
static size_t bytes_in_use, bytes_peak;

void sp_cuda_mem_stats(size_t *in_use, size_t *peak)
{
    *in_use = bytes_in_use;
    *peak = bytes_peak;
}

void sp_cuda_mem_reset_peak(void) { bytes_peak = bytes_in_use; }

void *sp_cuda_alloc(size_t bytes, const char *what)
{
    void *p = NULL;
    /* a 0-byte request still gets a distinct non-NULL pointer, as on the CPU */
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        cudaGetLastError(); /* clear it, so the next launch check does not report it again */
        /* review fix: a sticky error of earlier work (an illegal address in a kernel) also fails
         * cudaMalloc; report it as what it is, not as "out of memory" */
        if (err != cudaErrorMemoryAllocation) {
            sp_error(SP_ERR_INTERNAL, "CUDA cannot allocate %zu bytes for %s: %s (%s)", bytes, what,
                     cudaGetErrorString(err), cudaGetErrorName(err));
            return NULL;
        }
        size_t free_bytes = 0, total_bytes = 0;
        if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
            cudaGetLastError();
        sp_error(SP_ERR_NOMEM, "CUDA out of memory allocating %zu bytes for %s (free %zu of %zu)", bytes, what,
                 free_bytes, total_bytes);
        return NULL;
    }
    if (!SP_CUDA_CHECK(cudaMemset(p, 0, bytes))) {
        cudaFree(p);
        return NULL;
    }
    try {
        block_bytes[p] = bytes;
    } catch (const std::bad_alloc &) {
        cudaFree(p);
        sp_error(SP_ERR_NOMEM, "out of host memory recording a %zu-byte CUDA block for %s", bytes, what);
        return NULL;
    }
    bytes_in_use += bytes;
    if (bytes_in_use > bytes_peak)
        bytes_peak = bytes_in_use;
    return p;
}

void sp_cuda_free(void *p)
{
    if (!p)
        return;
    auto block = block_bytes.find(p);
    if (block != block_bytes.end()) { /* always found for pointers from sp_cuda_alloc */
        bytes_in_use -= block->second;
        block_bytes.erase(block);
    }
    SP_CUDA_CHECK(cudaFree(p));
}

void sp_cuda_upload(void *dst, const void *host_src, size_t bytes)
{
    if (bytes)
        SP_CUDA_CHECK(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
}

void sp_cuda_download(void *host_dst, const void *src, size_t bytes)
{
    if (bytes)
        SP_CUDA_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}

void sp_cuda_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src)
        SP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0));
}

void sp_cuda_zero(void *dst, size_t bytes)
{
    if (bytes)
        SP_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, 0));
}

void sp_cuda_sync(void) { SP_CUDA_CHECK(cudaDeviceSynchronize()); }

void sp_cuda_copy_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t row_bytes,
                       size_t rows)
{
    if (rows == 0 || row_bytes == 0)
        return;
    if (rows == 1) /* the pitches do not matter (and cudaMemcpy2D would reject one below row_bytes) */
        sp_cuda_copy(dst, src, row_bytes);
    else
        SP_CUDA_CHECK(
            cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDeviceToDevice, 0));
}

/* One buffer that only grows; the process keeps it until exit (one per process, like the handle). */
static void *scratch_buffer;
static size_t scratch_bytes;

void *sp_cuda_scratch(size_t bytes, const char *what)
{
    if (bytes <= scratch_bytes)
        return scratch_buffer;
    /* cudaFree waits for queued work, so kernels still reading the old buffer finish first */
    sp_cuda_free(scratch_buffer);
    scratch_bytes = 0;
    scratch_buffer = sp_cuda_alloc(bytes, what);
    if (scratch_buffer)
        scratch_bytes = bytes;
    return scratch_buffer;
}

static const sp_backend cuda_backend = {
    .name = "cuda",
    .alloc = sp_cuda_alloc,
    .free = sp_cuda_free,
    .upload = sp_cuda_upload,
    .download = sp_cuda_download,
    .copy = sp_cuda_copy,
    .zero = sp_cuda_zero,
    .sync = sp_cuda_sync,
    .copy_rows = sp_cuda_copy_rows,
    .mem_stats = sp_cuda_mem_stats,
    .mem_reset_peak = sp_cuda_mem_reset_peak,
    .gemm = sp_cuda_gemm,
    .axpby = sp_cuda_axpby,
    .scale = sp_cuda_scale,
    .sumsq = sp_cuda_sumsq,
    .dot = sp_cuda_dot,
    .count_nonfinite = sp_cuda_count_nonfinite,
    .norm_fwd = sp_cuda_norm_fwd,
    .norm_bwd = sp_cuda_norm_bwd,
    .norm_jvp = sp_cuda_norm_jvp,
    .act_fwd = sp_cuda_act_fwd,
    .act_bwd = sp_cuda_act_bwd,
    .act_jvp = sp_cuda_act_jvp,
    .glu_fwd = sp_cuda_glu_fwd,
    .glu_bwd = sp_cuda_glu_bwd,
    .glu_jvp = sp_cuda_glu_jvp,
    .softcap_fwd = sp_cuda_softcap_fwd,
    .softcap_jvp = sp_cuda_softcap_jvp,
    .rope = sp_cuda_rope,
    .attn_saved_elems = sp_cuda_attn_saved_elems,
    .attn_fwd = sp_cuda_attn_fwd,
    .attn_bwd = sp_cuda_attn_bwd,
    .attn_jvp = sp_cuda_attn_jvp,
    .attn_jvp_at = sp_cuda_attn_jvp_at,
    .attn_stats = sp_cuda_attn_stats,
    .embed_fwd = sp_cuda_embed_fwd,
    .embed_bwd = sp_cuda_embed_bwd,
    .xent_fwd = sp_cuda_xent_fwd,
    .xent_bwd = sp_cuda_xent_bwd,
    .norm_bwd_jvp = sp_cuda_norm_bwd_jvp,
    .act_bwd_jvp = sp_cuda_act_bwd_jvp,
    .glu_bwd_jvp = sp_cuda_glu_bwd_jvp,
    .softcap_bwd_jvp = sp_cuda_softcap_bwd_jvp,
    .xent_bwd_jvp = sp_cuda_xent_bwd_jvp,
    .attn_bwd_jvp = sp_cuda_attn_bwd_jvp,
    .to_f64 = sp_cuda_to_f64,
    .gemm_f64 = sp_cuda_gemm_f64,
    .sym_eigvals = sp_cuda_sym_eigvals,
    .singvals = sp_cuda_singvals,
    .sum_over_ranks = sp_cuda_sum_over_ranks,
    .adamw = sp_cuda_adamw,
};

/* Decided once: a machine without a driver or a GPU gets NULL, silently (the caller falls back to the
 * CPU or reports "no CUDA GPU is visible"), and the error state stays clean. */
extern "C" const sp_backend *sp_backend_cuda(void)
{
    static int state; /* 0 undecided, 1 usable, -1 not */
    if (state == 0) {
        int n_devices = 0;
        if (cudaGetDeviceCount(&n_devices) != cudaSuccess || n_devices == 0) {
            cudaGetLastError();
            state = -1;
        } else {
            state = sp_cuda_select_device(n_devices) && sp_cuda_blas_init() ? 1 : -1;
        }
    }
    return state == 1 ? &cuda_backend : NULL;
}
