/* kernels/cuda/cuda_backend.cu: the CUDA backend table, device detection, error reporting and the
 * memory ops (plain cudaMalloc, never managed memory). */
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

void *sp_cuda_alloc(size_t bytes, const char *what)
{
    void *p = NULL;
    /* a 0-byte request still gets a distinct non-NULL pointer, as on the CPU */
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        cudaGetLastError(); /* clear it, so the next launch check does not report it again */
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
    return p;
}

void sp_cuda_free(void *p)
{
    if (p)
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
    .gemm = sp_cuda_gemm,
    .axpby = sp_cuda_axpby,
    .scale = sp_cuda_scale,
    .sumsq = sp_cuda_sumsq,
    .dot = sp_cuda_dot,
    .count_nonfinite = sp_cuda_count_nonfinite,
    .norm_fwd = sp_cuda_norm_fwd,
    .norm_bwd = sp_cuda_norm_bwd,
    .norm_jvp = sp_cuda_norm_jvp,
    .gelu_fwd = sp_cuda_gelu_fwd,
    .gelu_bwd = sp_cuda_gelu_bwd,
    .gelu_jvp = sp_cuda_gelu_jvp,
    .swiglu_fwd = sp_cuda_swiglu_fwd,
    .swiglu_bwd = sp_cuda_swiglu_bwd,
    .swiglu_jvp = sp_cuda_swiglu_jvp,
    .rope = sp_cuda_rope,
    .attn_saved_elems = sp_cuda_attn_saved_elems,
    .attn_fwd = sp_cuda_attn_fwd,
    .attn_bwd = sp_cuda_attn_bwd,
    .attn_jvp = sp_cuda_attn_jvp,
    .embed_fwd = sp_cuda_embed_fwd,
    .embed_bwd = sp_cuda_embed_bwd,
    .xent_fwd = sp_cuda_xent_fwd,
    .xent_bwd = sp_cuda_xent_bwd,
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
            state = sp_cuda_blas_init() ? 1 : -1;
        }
    }
    return state == 1 ? &cuda_backend : NULL;
}
