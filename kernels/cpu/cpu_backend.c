/* kernels/cpu/cpu_backend.c: the CPU backend table and its memory ops (plain host memory). */
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) */
#include <stdint.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#include "core/mpi.h"
#include "kernels/cpu/cpu_ops.h"

/* Every block carries its size in a header, so free can keep the byte count (mem_stats). The
 * header is 64 bytes, so the caller's pointer keeps malloc's alignment and then some. */
#define HEADER_BYTES 64
static size_t bytes_in_use, bytes_peak;

/* Blocks this large (weights, gradients, activations) are backed by transparent huge pages where
 * the kernel allows it (madvise mode): their first touch then takes one fault per 2 MiB instead of
 * one per 4 KiB, which was half the time of loading a BF16 model (docs/benchmarks.md, "Opening a
 * model"). Only the 2 MiB-aligned part of the block is advised; nothing changes where THP is off. */
#define HUGE_BLOCK_BYTES ((size_t)64 << 20)
#define HUGE_PAGE_BYTES ((uintptr_t)2 << 20)

static void advise_huge_pages(unsigned char *block, size_t bytes)
{
    uintptr_t lo = ((uintptr_t)block + HUGE_PAGE_BYTES - 1) & ~(HUGE_PAGE_BYTES - 1);
    uintptr_t hi = ((uintptr_t)block + bytes) & ~(HUGE_PAGE_BYTES - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* advice: a refusal changes nothing */
}

void *sp_cpu_alloc(size_t bytes, const char *what)
{
    /* calloc zeroes; a 0-byte request still returns a distinct pointer that free accepts */
    unsigned char *p = bytes <= SIZE_MAX - HEADER_BYTES ? calloc(1, HEADER_BYTES + bytes) : NULL;
    if (!p) {
        sp_error(SP_ERR_NOMEM, "cpu backend: out of memory allocating %zu bytes for %s", bytes, what);
        return NULL;
    }
    if (bytes >= HUGE_BLOCK_BYTES)
        advise_huge_pages(p, HEADER_BYTES + bytes);
    memcpy(p, &bytes, sizeof bytes);
    bytes_in_use += bytes;
    if (bytes_in_use > bytes_peak)
        bytes_peak = bytes_in_use;
    return p + HEADER_BYTES;
}

void sp_cpu_free(void *p)
{
    if (!p)
        return;
    unsigned char *block = (unsigned char *)p - HEADER_BYTES;
    size_t bytes;
    memcpy(&bytes, block, sizeof bytes);
    bytes_in_use -= bytes;
    free(block);
}

static void cpu_mem_stats(size_t *in_use, size_t *peak)
{
    *in_use = bytes_in_use;
    *peak = bytes_peak;
}

static void cpu_mem_reset_peak(void) { bytes_peak = bytes_in_use; }

static void cpu_copy_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t row_bytes,
                          size_t rows)
{
    for (size_t r = 0; r < rows; r++)
        memcpy((unsigned char *)dst + r * dst_pitch, (const unsigned char *)src + r * src_pitch, row_bytes);
}

void sp_cpu_upload(void *dst, const void *host_src, size_t bytes)
{
    if (bytes)
        memcpy(dst, host_src, bytes);
}

void sp_cpu_download(void *host_dst, const void *src, size_t bytes)
{
    if (bytes)
        memcpy(host_dst, src, bytes);
}

void sp_cpu_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memmove(dst, src, bytes);
}

void sp_cpu_zero(void *dst, size_t bytes)
{
    if (bytes)
        memset(dst, 0, bytes);
}

void sp_cpu_sync(void) {}

static const sp_backend cpu_backend = {
    .name = "cpu",
    .alloc = sp_cpu_alloc,
    .free = sp_cpu_free,
    .upload = sp_cpu_upload,
    .download = sp_cpu_download,
    .copy = sp_cpu_copy,
    .zero = sp_cpu_zero,
    .sync = sp_cpu_sync,
    .copy_rows = cpu_copy_rows,
    .mem_stats = cpu_mem_stats,
    .mem_reset_peak = cpu_mem_reset_peak,
    .gemm = sp_cpu_gemm,
    .axpby = sp_cpu_axpby,
    .scale = sp_cpu_scale,
    .sumsq = sp_cpu_sumsq,
    .dot = sp_cpu_dot,
    .count_nonfinite = sp_cpu_count_nonfinite,
    .norm_fwd = sp_cpu_norm_fwd,
    .norm_bwd = sp_cpu_norm_bwd,
    .norm_jvp = sp_cpu_norm_jvp,
    .act_fwd = sp_cpu_act_fwd,
    .act_bwd = sp_cpu_act_bwd,
    .act_jvp = sp_cpu_act_jvp,
    .glu_fwd = sp_cpu_glu_fwd,
    .glu_bwd = sp_cpu_glu_bwd,
    .glu_jvp = sp_cpu_glu_jvp,
    .softcap_fwd = sp_cpu_softcap_fwd,
    .softcap_jvp = sp_cpu_softcap_jvp,
    .rope = sp_cpu_rope,
    .attn_saved_elems = sp_cpu_attn_saved_elems,
    .attn_fwd = sp_cpu_attn_fwd,
    .attn_bwd = sp_cpu_attn_bwd,
    .attn_jvp = sp_cpu_attn_jvp,
    .attn_jvp_at = sp_cpu_attn_jvp_at,
    .attn_stats = sp_cpu_attn_stats,
    .embed_fwd = sp_cpu_embed_fwd,
    .embed_bwd = sp_cpu_embed_bwd,
    .xent_fwd = sp_cpu_xent_fwd,
    .xent_bwd = sp_cpu_xent_bwd,
    .norm_bwd_jvp = sp_cpu_norm_bwd_jvp,
    .act_bwd_jvp = sp_cpu_act_bwd_jvp,
    .glu_bwd_jvp = sp_cpu_glu_bwd_jvp,
    .softcap_bwd_jvp = sp_cpu_softcap_bwd_jvp,
    .xent_bwd_jvp = sp_cpu_xent_bwd_jvp,
    .attn_bwd_jvp = sp_cpu_attn_bwd_jvp,
    .to_f64 = sp_cpu_to_f64,
    .gemm_f64 = sp_cpu_gemm_f64,
    .sym_eigvals = sp_cpu_sym_eigvals,
    .singvals = sp_cpu_singvals,
    .sum_over_ranks = sp_mpi_sum,
    .adamw = sp_cpu_adamw,
};

const sp_backend *sp_backend_cpu(void) { return &cpu_backend; }
