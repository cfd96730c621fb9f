/* tests/test_cuda_ops.c: every op of the CUDA backend against the CPU backend (the reference), on the
 * same random inputs, by the normalized error ||gpu - cpu|| / ||cpu|| (2-norms, in double).
 * Without a visible GPU (or in a build without CUDA) every test is skipped: CI has no GPU.
 *
 * Tolerances:
 * - OP_TOL 1e-5: ops whose arithmetic both backends do in double, rounding only the result to float
 *   (norms, activations, RoPE, softmax cross-entropy, AdamW): errors land near 1e-7.
 * - gemm_tol() 1e-5 in fp32 for cuBLAS gemm and attention (float products summed in another order:
 *   ~1e-7 for these sizes); 5e-3 when SPANPROBE_TF32=1 lets cuBLAS round operands to TF32 (10-bit
 *   mantissa: ~5e-4 per product).
 * - REDUCE_TOL 1e-12: sums of exact double products, added in another order.
 * Outputs that ops overwrite start as NaN on the GPU side, so an element left unwritten fails;
 * gradients that ops ADD into start at the same random values on both sides. The row-summed
 * gradients (norm dgain/dbias, embedding dtok/dpos) and the reductions are also run twice and must
 * match bit for bit (no atomics on the GPU).
 *
 * The second-order ops (norm_bwd_jvp, act_bwd_jvp, glu_bwd_jvp, softcap_bwd_jvp, xent_bwd_jvp,
 * attn_bwd_jvp: exact Hessian-vector products) are held to the same tolerances as the ops they are
 * the tangents of.
 *
 * The fp64 ops for the analyzers (to_f64, gemm_f64, sym_eigvals, singvals) are held to the CPU
 * backend (LAPACK) in double, with their own tolerances (F64_GEMM_TOL, SPECTRAL_TOL below). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"
#include "tests/support/assert_err.h"
#include "tests/support/gpu.h"
#include "tests/support/op_compare.h"
#include "tests/support/spectral_matrices.h"
#include "tests/support/vec_util.h"

#define OP_TOL 1e-5
#define REDUCE_TOL 1e-12

static const sp_backend *cpu_be, *gpu_be;

static double gemm_tol(void) { return gpu_tf32() ? 5e-3 : 1e-5; }

/* Every test starts with this: the backends, or a skip without a GPU. */
static void require_gpu(void)
{
    cpu_be = sp_backend_cpu();
    gpu_be = gpu_require();
}

/* After GPU work: no CUDA call may have failed. */
static void assert_no_error(const char *what)
{
    gpu_be->sync();
    if (sp_error_code() != SP_OK)
        fail_msg("%s: %s", what, sp_error_message());
}

/* ---- one array in both backends' memory ---- */
typedef struct {
    size_t n;
    sp_real *cpu, *gpu;
} dual;

static void *gpu_copy(const void *host, size_t bytes)
{
    void *p = gpu_be->alloc(bytes, "test array");
    assert_non_null(p);
    gpu_be->upload(p, host, bytes);
    return p;
}

static dual dual_from_host(const sp_real *host, size_t n)
{
    dual d = {n, cpu_be->alloc(n * sizeof(sp_real), "test array"), gpu_copy(host, n * sizeof(sp_real))};
    assert_non_null(d.cpu);
    cpu_be->upload(d.cpu, host, n * sizeof(sp_real));
    return d;
}

static dual dual_random(sp_rng *rng, size_t n, double scale)
{
    sp_real *host = vec_zeros(n);
    vec_fill_normal(rng, n, host, scale);
    dual d = dual_from_host(host, n);
    free(host);
    return d;
}

/* An output the op must overwrite: NaN on the GPU (an unwritten element then fails), 0 on the CPU. */
static dual dual_output(size_t n)
{
    sp_real *host = vec_zeros(n);
    dual d = {n, cpu_be->alloc(n * sizeof(sp_real), "test output"), NULL};
    for (size_t i = 0; i < n; i++)
        host[i] = NAN;
    d.gpu = gpu_copy(host, n * sizeof(sp_real));
    free(host);
    assert_non_null(d.cpu);
    return d;
}

static void dual_free(dual *d)
{
    cpu_be->free(d->cpu);
    gpu_be->free(d->gpu);
}

static sp_real *download_gpu(const dual *d)
{
    sp_real *host = vec_zeros(d->n);
    gpu_be->download(host, d->gpu, d->n * sizeof(sp_real));
    return host;
}

/* ||a - b|| / ||b|| in double (||a - b|| when b = 0); NaN/Inf in a gives NaN or Inf. */
static double rel_l2_err(size_t n, const sp_real *a, const sp_real *b)
{
    double diff = 0, ref = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        diff += d * d;
        ref += (double)b[i] * b[i];
    }
    return ref > 0 ? sqrt(diff / ref) : sqrt(diff);
}

static void assert_close(const dual *d, double tol, const char *what)
{
    assert_no_error(what);
    sp_real *got = download_gpu(d);
    double err = rel_l2_err(d->n, got, d->cpu);
    free(got);
    assert_below(err, tol, "%s: GPU vs CPU, normalized", what);
}

/* The GPU arrays of a and b hold the same bits. */
static void assert_same_bits(const dual *a, const dual *b, const char *what)
{
    assert_no_error(what);
    sp_real *ha = download_gpu(a), *hb = download_gpu(b);
    int same = memcmp(ha, hb, a->n * sizeof(sp_real)) == 0;
    free(ha);
    free(hb);
    if (!same)
        fail_msg("%s: two runs on the same inputs gave different bits", what);
}

/* int32 ids uniform in [lo, hi), the same on both backends; cpu_ids is host memory the caller frees. */
static void random_ids(sp_rng *rng, int n, int lo, int hi, int32_t **cpu_ids, int32_t **gpu_ids)
{
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    assert_non_null(ids);
    for (int i = 0; i < n; i++)
        ids[i] = lo + (int32_t)sp_rng_below(rng, (uint64_t)(hi - lo));
    *cpu_ids = ids;
    *gpu_ids = gpu_copy(ids, (size_t)n * sizeof *ids);
}

/* ---- memory ---- */
static void test_memory(void **state)
{
    (void)state;
    require_gpu();
    sp_rng rng;
    sp_rng_seed(&rng, 1);
    enum { N = 1001 };
    sp_real *zeros = gpu_be->alloc(N * sizeof(sp_real), "zeroed");
    assert_non_null(zeros);
    sp_real *host = vec_zeros(N);
    vec_fill_normal(&rng, N, host, 1.0);
    gpu_be->download(host, zeros, N * sizeof(sp_real));
    assert_true(vec_max_abs(N, host) == 0); /* alloc gives zeroed memory */

    dual a = dual_random(&rng, N, 1.0);
    sp_real *copy = gpu_be->alloc(N * sizeof(sp_real), "copy");
    assert_non_null(copy);
    gpu_be->copy(copy, a.gpu, N * sizeof(sp_real));
    gpu_be->download(host, copy, N * sizeof(sp_real));
    assert_memory_equal(host, a.cpu, N * sizeof(sp_real)); /* upload, copy, download round trip */
    gpu_be->zero(copy, N * sizeof(sp_real));
    gpu_be->download(host, copy, N * sizeof(sp_real));
    assert_true(vec_max_abs(N, host) == 0);
    assert_no_error("memory ops");

    /* far more than any GPU has: NULL and one out-of-memory line, and the next op still works */
    void *huge = gpu_be->alloc((size_t)1 << 52, "a huge test buffer");
    assert_null(huge);
    assert_int_equal(sp_error_code(), SP_ERR_NOMEM);
    assert_non_null(strstr(sp_error_message(), "CUDA out of memory allocating"));
    assert_non_null(strstr(sp_error_message(), "a huge test buffer"));
    sp_error_clear();
    gpu_be->scale(N, 2.0f, copy);
    assert_no_error("an op after a failed allocation");

    gpu_be->free(zeros);
    gpu_be->free(copy);
    dual_free(&a);
    free(host);
}

/* ---- dense linear algebra ---- */
static void check_gemm(sp_rng *rng, int trans_a, int trans_b, int m, int n, int k, sp_real beta)
{
    /* padded leading dimensions, to catch an ld mix-up */
    int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k, b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    int lda = a_cols + 3, ldb = b_cols + 2, ldc = n + 5;
    dual a = dual_random(rng, (size_t)a_rows * lda, 1.0), b = dual_random(rng, (size_t)b_rows * ldb, 1.0);
    sp_real *c_host = vec_zeros((size_t)m * ldc);
    vec_fill_normal(rng, (size_t)m * ldc, c_host, 1.0);
    if (beta == 0) /* C must be overwritten, NaN included; the padding columns stay as they are */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                c_host[(size_t)i * ldc + j] = NAN;
    dual c = dual_from_host(c_host, (size_t)m * ldc);
    free(c_host);
    cpu_be->gemm(trans_a, trans_b, m, n, k, 0.75f, a.cpu, lda, b.cpu, ldb, beta, c.cpu, ldc);
    gpu_be->gemm(trans_a, trans_b, m, n, k, 0.75f, a.gpu, lda, b.gpu, ldb, beta, c.gpu, ldc);
    char what[96];
    snprintf(what, sizeof what, "gemm trans_a %d trans_b %d m %d n %d k %d beta %g", trans_a, trans_b, m, n, k,
             (double)beta);
    assert_close(&c, gemm_tol(), what);
    dual_free(&a);
    dual_free(&b);
    dual_free(&c);
}

static void test_gemm(void **state)
{
    (void)state;
    require_gpu();
    sp_rng rng;
    sp_rng_seed(&rng, 2);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(&rng, ta, tb, 37, 29, 53, 0.0f);
            check_gemm(&rng, ta, tb, 37, 29, 53, 0.5f);
        }
    check_gemm(&rng, 0, 0, 5, 7, 0, 0.5f); /* an empty product: C = beta C */
    check_gemm(&rng, 1, 0, 300, 200, 700, 1.0f);
}

static void test_vector_updates(void **state)
{
    (void)state;
    require_gpu();
    sp_rng rng;
    sp_rng_seed(&rng, 3);
    const size_t n = 100003;
    dual x = dual_random(&rng, n, 1.0), y = dual_random(&rng, n, 1.0), fresh = dual_output(n);
    cpu_be->axpby(n, 0.3f, x.cpu, -1.5f, y.cpu);
    gpu_be->axpby(n, 0.3f, x.gpu, -1.5f, y.gpu);
    assert_close(&y, OP_TOL, "axpby");
    cpu_be->axpby(n, 0.3f, x.cpu, 0.0f, fresh.cpu); /* b = 0 overwrites, even NaN */
    gpu_be->axpby(n, 0.3f, x.gpu, 0.0f, fresh.gpu);
    assert_close(&fresh, OP_TOL, "axpby with b = 0 over NaN");
    cpu_be->scale(n, -2.5f, x.cpu);
    gpu_be->scale(n, -2.5f, x.gpu);
    assert_close(&x, OP_TOL, "scale");
    dual_free(&x);
    dual_free(&y);
    dual_free(&fresh);
}

static void check_reduce(double got, double ref, const char *what)
{
    assert_no_error(what);
    assert_below(fabs(got - ref) / fabs(ref), REDUCE_TOL, "%s: GPU %.17g vs CPU %.17g", what, got, ref);
}

static void test_reductions(void **state)
{
    (void)state;
    require_gpu();
    sp_rng rng;
    sp_rng_seed(&rng, 4);
    const size_t n = 3000017; /* more than one block per reduction slot */
    dual x = dual_random(&rng, n, 1.0), y = dual_random(&rng, n, 1.0);
    check_reduce(gpu_be->sumsq(n, x.gpu), cpu_be->sumsq(n, x.cpu), "sumsq");
    check_reduce(gpu_be->dot(n, x.gpu, y.gpu), cpu_be->dot(n, x.cpu, y.cpu), "dot");
    check_reduce(gpu_be->sumsq(1, x.gpu), cpu_be->sumsq(1, x.cpu), "sumsq of one element");
    double first = gpu_be->dot(n, x.gpu, y.gpu), second = gpu_be->dot(n, x.gpu, y.gpu);
    assert_memory_equal(&first, &second, sizeof first); /* deterministic */
    assert_true(gpu_be->sumsq(0, x.gpu) == 0);

    assert_int_equal(gpu_be->count_nonfinite(n, x.gpu), 0);
    const size_t bad[] = {0, 17, 123457, n - 1};
    const sp_real bad_values[] = {NAN, INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < SP_ARRAY_LEN(bad); i++) {
        x.cpu[bad[i]] = bad_values[i];
        gpu_be->upload(x.gpu + bad[i], &bad_values[i], sizeof(sp_real));
    }
    assert_int_equal(gpu_be->count_nonfinite(n, x.gpu), cpu_be->count_nonfinite(n, x.cpu));
    assert_int_equal(gpu_be->count_nonfinite(n, x.gpu), SP_ARRAY_LEN(bad));
    assert_no_error("count_nonfinite");
    dual_free(&x);
    dual_free(&y);
}

/* ---- normalization ---- */
static void check_norm(sp_norm_kind kind)
{
    sp_rng rng;
    sp_rng_seed(&rng, 5 + kind);
    const int rows = 300, dim = 77; /* rows span several dgain partial chunks */
    const int ln = kind == SP_NORM_LAYERNORM;
    dual x = dual_random(&rng, (size_t)rows * dim, 2.0), gain = dual_random(&rng, dim, 1.0);
    dual bias = dual_random(&rng, dim, 1.0), y = dual_output((size_t)rows * dim);
    dual mean = dual_output(rows), rstd = dual_output(rows);
    for (size_t i = 0; i < x.n; i++) /* an offset, so LayerNorm's centering matters */
        x.cpu[i] += 3.0f;
    gpu_be->upload(x.gpu, x.cpu, x.n * sizeof(sp_real));

    cpu_be->norm_fwd(kind, rows, dim, 1e-5f, x.cpu, gain.cpu, ln ? bias.cpu : NULL, y.cpu, ln ? mean.cpu : NULL,
                     rstd.cpu);
    gpu_be->norm_fwd(kind, rows, dim, 1e-5f, x.gpu, gain.gpu, ln ? bias.gpu : NULL, y.gpu, ln ? mean.gpu : NULL,
                     rstd.gpu);
    assert_close(&y, OP_TOL, "norm_fwd y");
    assert_close(&rstd, OP_TOL, "norm_fwd rstd");
    if (ln)
        assert_close(&mean, OP_TOL, "norm_fwd mean");
    /* bwd and jvp from the CPU's saved statistics on both sides, so only the op under test differs */
    gpu_be->upload(rstd.gpu, rstd.cpu, rows * sizeof(sp_real));
    gpu_be->upload(mean.gpu, mean.cpu, rows * sizeof(sp_real));

    dual dy = dual_random(&rng, x.n, 1.0), dx = dual_random(&rng, x.n, 1.0);
    dual dgain = dual_random(&rng, dim, 1.0), dbias = dual_random(&rng, dim, 1.0);
    dual dx_again = dual_from_host(dx.cpu, dx.n), dgain_again = dual_from_host(dgain.cpu, dim);
    dual dbias_again = dual_from_host(dbias.cpu, dim);
    const sp_real *m_cpu = ln ? mean.cpu : NULL, *m_gpu = ln ? mean.gpu : NULL;
    cpu_be->norm_bwd(kind, rows, dim, x.cpu, gain.cpu, m_cpu, rstd.cpu, dy.cpu, dx.cpu, dgain.cpu,
                     ln ? dbias.cpu : NULL);
    gpu_be->norm_bwd(kind, rows, dim, x.gpu, gain.gpu, m_gpu, rstd.gpu, dy.gpu, dx.gpu, dgain.gpu,
                     ln ? dbias.gpu : NULL);
    assert_close(&dx, OP_TOL, "norm_bwd dx");
    assert_close(&dgain, OP_TOL, "norm_bwd dgain");
    if (ln)
        assert_close(&dbias, OP_TOL, "norm_bwd dbias");
    else
        assert_close(&dbias, 0, "norm_bwd with a NULL dbias (RMSNorm) leaves the buffer alone");
    gpu_be->norm_bwd(kind, rows, dim, x.gpu, gain.gpu, m_gpu, rstd.gpu, dy.gpu, dx_again.gpu, dgain_again.gpu,
                     ln ? dbias_again.gpu : NULL);
    assert_same_bits(&dx, &dx_again, "norm_bwd dx");
    assert_same_bits(&dgain, &dgain_again, "norm_bwd dgain");
    assert_same_bits(&dbias, &dbias_again, "norm_bwd dbias");

    /* without parameter gradients only dx changes */
    cpu_be->norm_bwd(kind, rows, dim, x.cpu, gain.cpu, m_cpu, rstd.cpu, dy.cpu, dx.cpu, NULL, NULL);
    gpu_be->norm_bwd(kind, rows, dim, x.gpu, gain.gpu, m_gpu, rstd.gpu, dy.gpu, dx.gpu, NULL, NULL);
    assert_close(&dx, OP_TOL, "norm_bwd dx without dgain/dbias");

    dual tx = dual_random(&rng, x.n, 1.0), ty = dual_output(x.n);
    cpu_be->norm_jvp(kind, rows, dim, x.cpu, gain.cpu, m_cpu, rstd.cpu, tx.cpu, ty.cpu);
    gpu_be->norm_jvp(kind, rows, dim, x.gpu, gain.gpu, m_gpu, rstd.gpu, tx.gpu, ty.gpu);
    assert_close(&ty, OP_TOL, "norm_jvp");

    /* the tangent of bwd, with a gain tangent and parameter-gradient tangents, then without */
    dual tgain = dual_random(&rng, dim, 1.0), tdy = dual_random(&rng, x.n, 1.0), tdx = dual_random(&rng, x.n, 1.0);
    dual tdgain = dual_random(&rng, dim, 1.0), tdbias = dual_random(&rng, dim, 1.0);
    cpu_be->norm_bwd_jvp(kind, rows, dim, x.cpu, gain.cpu, m_cpu, rstd.cpu, tx.cpu, tgain.cpu, dy.cpu, tdy.cpu, tdx.cpu,
                         tdgain.cpu, ln ? tdbias.cpu : NULL);
    gpu_be->norm_bwd_jvp(kind, rows, dim, x.gpu, gain.gpu, m_gpu, rstd.gpu, tx.gpu, tgain.gpu, dy.gpu, tdy.gpu, tdx.gpu,
                         tdgain.gpu, ln ? tdbias.gpu : NULL);
    assert_close(&tdx, OP_TOL, "norm_bwd_jvp tdx");
    assert_close(&tdgain, OP_TOL, "norm_bwd_jvp tdgain");
    assert_close(&tdbias, ln ? OP_TOL : 0, "norm_bwd_jvp tdbias");
    cpu_be->norm_bwd_jvp(kind, rows, dim, x.cpu, gain.cpu, m_cpu, rstd.cpu, tx.cpu, NULL, dy.cpu, tdy.cpu, tdx.cpu, NULL,
                         NULL);
    gpu_be->norm_bwd_jvp(kind, rows, dim, x.gpu, gain.gpu, m_gpu, rstd.gpu, tx.gpu, NULL, dy.gpu, tdy.gpu, tdx.gpu, NULL,
                         NULL);
    assert_close(&tdx, OP_TOL, "norm_bwd_jvp tdx without a gain tangent");

    dual *all[] = {&x, &gain, &bias, &y, &mean, &rstd, &dy, &dx, &dgain, &dbias, &dx_again, &dgain_again, &dbias_again,
                   &tx, &ty, &tgain, &tdy, &tdx, &tdgain, &tdbias};
    for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
        dual_free(all[i]);
}

static void test_layernorm(void **state)
{
    (void)state;
    require_gpu();
    check_norm(SP_NORM_LAYERNORM);
}

static void test_rmsnorm(void **state)
{
    (void)state;
    require_gpu();
    check_norm(SP_NORM_RMSNORM);
}

/* ---- activations ---- */
static void test_activations(void **state)
{
    (void)state;
    require_gpu();
    sp_rng rng;
    sp_rng_seed(&rng, 7);
    const size_t n = 100003;
    dual x = dual_random(&rng, n, 3.0), u = dual_random(&rng, n, 1.0), t = dual_random(&rng, n, 1.0);
    dual tu = dual_random(&rng, n, 1.0), dy = dual_random(&rng, n, 1.0);
    dual dx = dual_random(&rng, n, 1.0), du = dual_random(&rng, n, 1.0), out = dual_output(n);
    static const char *const names[] = {"gelu tanh", "gelu erf", "silu"};
    char what[64];
#define CHECK(d, op)                                                           \
    do {                                                                       \
        snprintf(what, sizeof what, "%s %s", names[kind], op);                 \
        assert_close(&(d), OP_TOL, what);                                      \
    } while (0)
    for (int kind = SP_ACT_GELU_TANH; kind <= SP_ACT_SILU; kind++) {
        cpu_be->act_fwd(kind, n, x.cpu, out.cpu);
        gpu_be->act_fwd(kind, n, x.gpu, out.gpu);
        CHECK(out, "act_fwd");
        cpu_be->act_bwd(kind, n, x.cpu, dy.cpu, dx.cpu);
        gpu_be->act_bwd(kind, n, x.gpu, dy.gpu, dx.gpu);
        CHECK(dx, "act_bwd");
        cpu_be->act_jvp(kind, n, x.cpu, t.cpu, out.cpu);
        gpu_be->act_jvp(kind, n, x.gpu, t.gpu, out.gpu);
        CHECK(out, "act_jvp");

        cpu_be->glu_fwd(kind, n, x.cpu, u.cpu, out.cpu);
        gpu_be->glu_fwd(kind, n, x.gpu, u.gpu, out.gpu);
        CHECK(out, "glu_fwd");
        cpu_be->glu_bwd(kind, n, x.cpu, u.cpu, dy.cpu, dx.cpu, du.cpu);
        gpu_be->glu_bwd(kind, n, x.gpu, u.gpu, dy.gpu, dx.gpu, du.gpu);
        CHECK(dx, "glu_bwd dg");
        CHECK(du, "glu_bwd du");
        cpu_be->glu_jvp(kind, n, x.cpu, u.cpu, t.cpu, tu.cpu, out.cpu);
        gpu_be->glu_jvp(kind, n, x.gpu, u.gpu, t.gpu, tu.gpu, out.gpu);
        CHECK(out, "glu_jvp");

        /* second order: the tangents of act_bwd and glu_bwd (dy and du reused as the tangents of dy) */
        cpu_be->act_bwd_jvp(kind, n, x.cpu, t.cpu, dy.cpu, du.cpu, dx.cpu);
        gpu_be->act_bwd_jvp(kind, n, x.gpu, t.gpu, dy.gpu, du.gpu, dx.gpu);
        CHECK(dx, "act_bwd_jvp");
        cpu_be->glu_bwd_jvp(kind, n, x.cpu, u.cpu, t.cpu, tu.cpu, dy.cpu, du.cpu, dx.cpu, out.cpu);
        gpu_be->glu_bwd_jvp(kind, n, x.gpu, u.gpu, t.gpu, tu.gpu, dy.gpu, du.gpu, dx.gpu, out.gpu);
        CHECK(dx, "glu_bwd_jvp tdg");
        CHECK(out, "glu_bwd_jvp tdu");
    }
#undef CHECK

    /* soft-cap 2.5 on inputs of scale 3: far into tanh's flat part; the JVP in place, as the model runs it */
    cpu_be->softcap_fwd(n, 2.5, x.cpu, out.cpu);
    gpu_be->softcap_fwd(n, 2.5, x.gpu, out.gpu);
    assert_close(&out, OP_TOL, "softcap_fwd");
    gpu_be->upload(out.gpu, out.cpu, n * sizeof(sp_real)); /* the JVP from the same capped values */
    cpu_be->softcap_jvp(n, 2.5, out.cpu, t.cpu, t.cpu);
    gpu_be->softcap_jvp(n, 2.5, out.gpu, t.gpu, t.gpu);
    assert_close(&t, OP_TOL, "softcap_jvp in place");
    cpu_be->softcap_bwd_jvp(n, 2.5, out.cpu, t.cpu, dy.cpu, u.cpu, u.cpu);
    gpu_be->softcap_bwd_jvp(n, 2.5, out.gpu, t.gpu, dy.gpu, u.gpu, u.gpu);
    assert_close(&u, OP_TOL, "softcap_bwd_jvp in place");

    dual *all[] = {&x, &u, &t, &tu, &dy, &dx, &du, &out};
    for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
        dual_free(all[i]);
}

/* ---- RoPE ---- */
static void check_rope(int head_dim, int rot_dims, double theta)
{
    sp_rng rng;
    sp_rng_seed(&rng, 8);
    const int seq_len = 301, rows = 2 * seq_len, n_heads = 3; /* angles up to 300 rad */
    double inv_freq[32];
    for (int i = 0; i < rot_dims / 2; i++)
        inv_freq[i] = pow(theta, -2.0 * i / rot_dims);
    double *freq_gpu = gpu_copy(inv_freq, (size_t)(rot_dims / 2) * sizeof *inv_freq);
    dual x = dual_random(&rng, (size_t)rows * n_heads * head_dim, 1.0);
    char what[96];
    for (int direction = 1; direction >= -1; direction -= 2) {
        cpu_be->rope(rows, seq_len, n_heads, head_dim, rot_dims, inv_freq, direction, x.cpu);
        gpu_be->rope(rows, seq_len, n_heads, head_dim, rot_dims, freq_gpu, direction, x.gpu);
        snprintf(what, sizeof what, "rope %s, %d of %d dims", direction > 0 ? "forward" : "backward", rot_dims,
                 head_dim);
        assert_close(&x, OP_TOL, what);
    }
    dual_free(&x);
    gpu_be->free(freq_gpu);
}

static void test_rope(void **state)
{
    (void)state;
    require_gpu();
    check_rope(18, 18, 10000.0);
    check_rope(18, 8, 500000.0); /* partial rotary: the last 10 dims pass through */
}

/* ---- attention ---- */
static void check_attention(const sp_attn_shape *shape, const char *name)
{
    sp_rng rng;
    sp_rng_seed(&rng, 9);
    const int rows = shape->batch * shape->seq_len;
    const size_t nq = (size_t)rows * shape->n_heads * shape->head_dim;
    const size_t nkv = (size_t)rows * shape->n_kv_heads * shape->head_dim;
    const size_t n_saved = gpu_be->attn_saved_elems(shape);
    assert_int_equal(n_saved, cpu_be->attn_saved_elems(shape));
    const double tol = gemm_tol();
    char what[128];
#define CHECK(d, op)                                             \
    do {                                                         \
        snprintf(what, sizeof what, "%s: %s", name, op);         \
        assert_close(&(d), tol, what);                           \
    } while (0)
    dual q = dual_random(&rng, nq, 1.0), k = dual_random(&rng, nkv, 1.0), v = dual_random(&rng, nkv, 1.0);
    dual saved = dual_output(n_saved), out = dual_output(nq);
    cpu_be->attn_fwd(shape, q.cpu, k.cpu, v.cpu, saved.cpu, out.cpu);
    gpu_be->attn_fwd(shape, q.gpu, k.gpu, v.gpu, saved.gpu, out.gpu);
    CHECK(saved, "attn_fwd probabilities");
    CHECK(out, "attn_fwd out");
    gpu_be->upload(saved.gpu, saved.cpu, n_saved * sizeof(sp_real)); /* bwd/jvp from the same P */

    dual dout = dual_random(&rng, nq, 1.0), dq = dual_random(&rng, nq, 1.0);
    dual dk = dual_random(&rng, nkv, 1.0), dv = dual_random(&rng, nkv, 1.0);
    cpu_be->attn_bwd(shape, q.cpu, k.cpu, v.cpu, saved.cpu, dout.cpu, dq.cpu, dk.cpu, dv.cpu);
    gpu_be->attn_bwd(shape, q.gpu, k.gpu, v.gpu, saved.gpu, dout.gpu, dq.gpu, dk.gpu, dv.gpu);
    CHECK(dq, "attn_bwd dq");
    CHECK(dk, "attn_bwd dk");
    CHECK(dv, "attn_bwd dv");

    dual tq = dual_random(&rng, nq, 1.0), tk = dual_random(&rng, nkv, 1.0), tv = dual_random(&rng, nkv, 1.0);
    dual tout = dual_output(nq);
    cpu_be->attn_jvp(shape, q.cpu, k.cpu, v.cpu, saved.cpu, tq.cpu, tk.cpu, tv.cpu, tout.cpu);
    gpu_be->attn_jvp(shape, q.gpu, k.gpu, v.gpu, saved.gpu, tq.gpu, tk.gpu, tv.gpu, tout.gpu);
    CHECK(tout, "attn_jvp");

    /* three tangents at one position of sequence 0 (the token-local Jacobians) */
    enum { N_AT = 3 };
    const int t_at = shape->seq_len - 2;
    const size_t nq_at = (size_t)N_AT * shape->n_heads * shape->head_dim;
    const size_t nkv_at = (size_t)N_AT * shape->n_kv_heads * shape->head_dim;
    dual aq = dual_random(&rng, nq_at, 1.0), ak = dual_random(&rng, nkv_at, 1.0), av = dual_random(&rng, nkv_at, 1.0);
    dual aout = dual_output(nq_at);
    cpu_be->attn_jvp_at(shape, q.cpu, k.cpu, v.cpu, saved.cpu, t_at, N_AT, aq.cpu, ak.cpu, av.cpu, aout.cpu);
    gpu_be->attn_jvp_at(shape, q.gpu, k.gpu, v.gpu, saved.gpu, t_at, N_AT, aq.gpu, ak.gpu, av.gpu, aout.gpu);
    CHECK(aout, "attn_jvp_at");

    dual tdout = dual_random(&rng, nq, 1.0); /* the second order adds into dq, dk, dv */
    cpu_be->attn_bwd_jvp(shape, q.cpu, k.cpu, v.cpu, saved.cpu, tq.cpu, tk.cpu, tv.cpu, dout.cpu, tdout.cpu, dq.cpu,
                         dk.cpu, dv.cpu);
    gpu_be->attn_bwd_jvp(shape, q.gpu, k.gpu, v.gpu, saved.gpu, tq.gpu, tk.gpu, tv.gpu, dout.gpu, tdout.gpu, dq.gpu,
                         dk.gpu, dv.gpu);
    CHECK(dq, "attn_bwd_jvp tdq");
    CHECK(dk, "attn_bwd_jvp tdk");
    CHECK(dv, "attn_bwd_jvp tdv");
#undef CHECK

    dual *all[] = {&q, &k, &v, &saved, &out, &dout, &dq, &dk, &dv, &tq, &tk, &tv, &tout, &tdout, &aq, &ak, &av, &aout};
    for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
        dual_free(all[i]);
}

static void test_attention(void **state)
{
    (void)state;
    require_gpu();
    sp_attn_shape shape = {2, 37, 6, 2, 16, 0.25, 0, 0};
    check_attention(&shape, "causal");
    shape.scale = 0.4; /* scores of several units: the cap bites */
    shape.softcap = 2.0;
    check_attention(&shape, "softcap 2");
    shape.window = 5;
    check_attention(&shape, "softcap 2, window 5");
    shape = (sp_attn_shape){1, 130, 4, 1, 8, 0.35, 0, 64}; /* CPU tiles out of the band */
    check_attention(&shape, "130 positions, window 64");
}

/* ---- embeddings ---- */
static void check_embed(int dim)
{
    sp_rng rng;
    sp_rng_seed(&rng, 10 + (uint64_t)dim);
    const int seq = 37, rows = 3 * seq, vocab = 19; /* few tokens: many repeats to add up */
    int32_t *ids_cpu, *ids_gpu;
    random_ids(&rng, rows, 0, vocab, &ids_cpu, &ids_gpu);
    dual tok = dual_random(&rng, (size_t)vocab * dim, 1.0), pos = dual_random(&rng, (size_t)seq * dim, 1.0);
    dual out = dual_output((size_t)rows * dim);
    cpu_be->embed_fwd(rows, seq, dim, 1, ids_cpu, tok.cpu, pos.cpu, out.cpu);
    gpu_be->embed_fwd(rows, seq, dim, 1, ids_gpu, tok.gpu, pos.gpu, out.gpu);
    assert_close(&out, OP_TOL, "embed_fwd with positions");
    cpu_be->embed_fwd(rows, seq, dim, 2.5f, ids_cpu, tok.cpu, NULL, out.cpu);
    gpu_be->embed_fwd(rows, seq, dim, 2.5f, ids_gpu, tok.gpu, NULL, out.gpu);
    assert_close(&out, OP_TOL, "embed_fwd without positions, scaled");

    dual dout = dual_random(&rng, out.n, 1.0);
    dual dtok = dual_random(&rng, tok.n, 1.0), dpos = dual_random(&rng, pos.n, 1.0);
    dual dtok_again = dual_from_host(dtok.cpu, tok.n), dpos_again = dual_from_host(dpos.cpu, pos.n);
    cpu_be->embed_bwd(rows, seq, dim, 0.75f, ids_cpu, dout.cpu, dtok.cpu, dpos.cpu);
    gpu_be->embed_bwd(rows, seq, dim, 0.75f, ids_gpu, dout.gpu, dtok.gpu, dpos.gpu);
    assert_close(&dtok, OP_TOL, "embed_bwd dtok");
    assert_close(&dpos, OP_TOL, "embed_bwd dpos");
    gpu_be->embed_bwd(rows, seq, dim, 0.75f, ids_gpu, dout.gpu, dtok_again.gpu, dpos_again.gpu);
    assert_same_bits(&dtok, &dtok_again, "embed_bwd dtok");
    assert_same_bits(&dpos, &dpos_again, "embed_bwd dpos");

    dual *all[] = {&tok, &pos, &out, &dout, &dtok, &dpos, &dtok_again, &dpos_again};
    for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
        dual_free(all[i]);
    free(ids_cpu);
    gpu_be->free(ids_gpu);
}

static void test_embed(void **state)
{
    (void)state;
    require_gpu();
    check_embed(45);   /* narrow rows: many owners per column */
    check_embed(2100); /* wide rows: few owners per column */
}

/* ---- cross-entropy ---- */
static void test_xent(void **state)
{
    (void)state;
    require_gpu();
    sp_rng rng;
    sp_rng_seed(&rng, 11);
    const int rows = 50, vocab = 1000;
    int32_t *targets_cpu, *targets_gpu;
    random_ids(&rng, rows, -1, vocab, &targets_cpu, &targets_gpu); /* some ignored (-1) */
    targets_cpu[3] = -1;
    gpu_be->upload(targets_gpu, targets_cpu, rows * sizeof(int32_t));
    dual logits = dual_random(&rng, (size_t)rows * vocab, 4.0), losses = dual_output(rows);
    dual dlogits = dual_random(&rng, logits.n, 1.0);
    cpu_be->xent_fwd(rows, vocab, logits.cpu, targets_cpu, losses.cpu);
    gpu_be->xent_fwd(rows, vocab, logits.gpu, targets_gpu, losses.gpu);
    assert_close(&losses, OP_TOL, "xent_fwd");
    cpu_be->xent_bwd(rows, vocab, logits.cpu, targets_cpu, 0.02f, dlogits.cpu);
    gpu_be->xent_bwd(rows, vocab, logits.gpu, targets_gpu, 0.02f, dlogits.gpu);
    assert_close(&dlogits, OP_TOL, "xent_bwd");
    dual tlogits = dual_random(&rng, logits.n, 1.0);
    cpu_be->xent_bwd_jvp(rows, vocab, logits.cpu, targets_cpu, 0.02f, tlogits.cpu, dlogits.cpu);
    gpu_be->xent_bwd_jvp(rows, vocab, logits.gpu, targets_gpu, 0.02f, tlogits.gpu, dlogits.gpu);
    assert_close(&dlogits, OP_TOL, "xent_bwd_jvp");
    dual *all[] = {&logits, &losses, &dlogits, &tlogits};
    for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
        dual_free(all[i]);
    free(targets_cpu);
    gpu_be->free(targets_gpu);
}

/* ---- AdamW ---- */
static void test_adamw(void **state)
{
    (void)state;
    require_gpu();
    sp_rng rng;
    sp_rng_seed(&rng, 12);
    const size_t n = 10007;
    dual param = dual_random(&rng, n, 1.0), m = dual_random(&rng, n, 0.1), v = dual_random(&rng, n, 0.1);
    for (size_t i = 0; i < n; i++) /* v is a running mean of squares: keep it >= 0 */
        v.cpu[i] = fabsf(v.cpu[i]);
    gpu_be->upload(v.gpu, v.cpu, n * sizeof(sp_real));
    for (long step = 1; step <= 3; step++) {
        dual grad = dual_random(&rng, n, 1.0);
        cpu_be->adamw(n, param.cpu, grad.cpu, m.cpu, v.cpu, 1e-3, 0.9, 0.95, 1e-8, 0.1, step);
        gpu_be->adamw(n, param.gpu, grad.gpu, m.gpu, v.gpu, 1e-3, 0.9, 0.95, 1e-8, 0.1, step);
        dual_free(&grad);
    }
    assert_close(&param, OP_TOL, "adamw param");
    assert_close(&m, OP_TOL, "adamw m");
    assert_close(&v, OP_TOL, "adamw v");
    dual_free(&param);
    dual_free(&m);
    dual_free(&v);
}

/* ---- the forward ops against the naive double references too (tests/support/op_compare.h), so a
 * misreading shared by both backends would still show; max-norm errors, same tolerances ---- */
static void test_naive_references(void **state)
{
    (void)state;
    require_gpu();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            assert_below(opcmp_gemm(gpu_be, ta, tb, 0.7, 20 + 2 * ta + tb), gemm_tol(), "gemm %d %d", ta, tb);
    assert_below(opcmp_norm_fwd(gpu_be, SP_NORM_LAYERNORM, 67, 130, 24), OP_TOL, "layernorm forward");
    assert_below(opcmp_norm_fwd(gpu_be, SP_NORM_RMSNORM, 67, 130, 25), OP_TOL, "rmsnorm forward");
    assert_below(opcmp_elementwise_all(gpu_be, 1001, 26), OP_TOL, "activations and soft-cap forward");
    assert_below(opcmp_rope(gpu_be, 2, 45, 3, 10, 10, 10000.0, 28), OP_TOL, "rope");
    assert_below(opcmp_rope(gpu_be, 2, 45, 3, 10, 6, 10000.0, 28), OP_TOL, "rope over 6 of 10 dims");
    sp_attn_shape shape = {2, 45, 6, 2, 8, 1 / sqrt(8.0), 0, 0};
    assert_below(opcmp_attention_fwd(gpu_be, &shape, 29), gemm_tol(), "attention forward");
    shape.softcap = 1.5;
    shape.window = 7;
    assert_below(opcmp_attention_fwd(gpu_be, &shape, 33), gemm_tol(), "attention forward, softcap, window");
    assert_below(opcmp_embed_fwd(gpu_be, 2, 45, 33, 11, 1, 1.0, 30), OP_TOL, "embedding forward");
    assert_below(opcmp_embed_fwd(gpu_be, 2, 45, 33, 11, 0, 4.0, 34), OP_TOL, "embedding forward, scaled");
    assert_below(opcmp_xent_fwd(gpu_be, 17, 611, 3.0, 31), OP_TOL, "cross-entropy forward");
    assert_no_error("naive reference comparisons");
}

/* ---- the fp64 ops for the analyzers ----
 * - to_f64 and copy_rows move or widen bits: exact.
 * - F64_GEMM_TOL 1e-13: dgemm, products summed in another order (~1e-15 here).
 * - SPECTRAL_TOL 1e-10, of the largest value: cuSOLVER syevd/gesvd and LAPACK dsyevd/dgesdd are all
 *   backward stable (each value within ~n eps ||A||, ~1e-13 at n = 300). The Gram route of singvals
 *   adds ~eps ||A||^2 to each squared value: relative to sigma_i that is eps (sigma_max / sigma_i)^2,
 *   at most ~1e-6 where the route is used (docs/cuda.md), ~1e-14 for these random matrices; the
 *   ill-conditioned matrices (cond 1e8) must come back through gesvd, so their smallest values are
 *   also checked against the exact ones at SMALL_SV_TOL 1e-4 relative (the Gram route alone would be
 *   off by 100% there). */
#define F64_GEMM_TOL 1e-13
#define SPECTRAL_TOL 1e-10
#define SMALL_SV_TOL 1e-4

static double *host_doubles(size_t n)
{
    double *x = calloc(n ? n : 1, sizeof *x);
    assert_non_null(x);
    return x;
}

static double *be_doubles(const sp_backend *be, const double *host, size_t n)
{
    double *p = be->alloc(n * sizeof *p, "test doubles");
    assert_non_null(p);
    be->upload(p, host, n * sizeof *p);
    return p;
}

static double *downloaded(const sp_backend *be, const double *p, size_t n)
{
    double *host = host_doubles(n);
    be->download(host, p, n * sizeof *host);
    return host;
}

/* ---- attention statistics (attn_stats): doubles out of float scores ---- */

/* max over entries of |got - ref| / max(|ref|, 1): entropies, probabilities and cosines absolutely,
 * distances, scores and sums of cosines relative. */
static double max_entry_err(size_t n, const double *got, const double *ref)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs(got[i] - ref[i]) / fmax(fabs(ref[i]), 1);
        worst = isnan(e) || e > worst ? e : worst; /* a NaN (unwritten) entry fails */
    }
    return worst;
}

static void check_attn_stats(const sp_attn_shape *shape, int first_pos, const char *name)
{
    static const char *const stat_names[SP_ATTN_N_STATS] = {"entropy", "sink", "distance", "max logit"};
    sp_rng rng;
    sp_rng_seed(&rng, 11);
    const int rows = shape->batch * shape->seq_len, H = shape->n_heads;
    dual q = dual_random(&rng, (size_t)rows * H * shape->head_dim, 1.0);
    dual k = dual_random(&rng, (size_t)rows * shape->n_kv_heads * shape->head_dim, 1.0);
    const size_t n_rows = (size_t)rows * H, n_stats = n_rows * SP_ATTN_N_STATS, hh = (size_t)H * H;
    double *unwritten = host_doubles(n_stats), *zeros = host_doubles(hh);
    for (size_t i = 0; i < n_stats; i++)
        unwritten[i] = NAN;
    double *stats_cpu = be_doubles(cpu_be, unwritten, n_stats), *cos_cpu = be_doubles(cpu_be, zeros, hh);
    double *stats_gpu = be_doubles(gpu_be, unwritten, n_stats), *cos_gpu = be_doubles(gpu_be, zeros, hh);
    double *stats_again = be_doubles(gpu_be, unwritten, n_stats), *cos_again = be_doubles(gpu_be, zeros, hh);
    assert_int_equal(cpu_be->attn_stats(shape, q.cpu, k.cpu, first_pos, stats_cpu, cos_cpu), SP_OK);
    assert_int_equal(gpu_be->attn_stats(shape, q.gpu, k.gpu, first_pos, stats_gpu, cos_gpu), SP_OK);
    assert_no_error(name);
    double *want = downloaded(cpu_be, stats_cpu, n_stats), *got = downloaded(gpu_be, stats_gpu, n_stats);
    double *got_one = host_doubles(n_rows), *want_one = host_doubles(n_rows);
    for (int s = 0; s < SP_ATTN_N_STATS; s++) {
        for (size_t r = 0; r < n_rows; r++) {
            got_one[r] = got[r * SP_ATTN_N_STATS + s];
            want_one[r] = want[r * SP_ATTN_N_STATS + s];
        }
        assert_below(max_entry_err(n_rows, got_one, want_one), gemm_tol(), "%s: attn_stats %s", name, stat_names[s]);
    }
    double *cos_want = downloaded(cpu_be, cos_cpu, hh), *cos_got = downloaded(gpu_be, cos_gpu, hh);
    assert_below(max_entry_err(hh, cos_got, cos_want), gemm_tol(), "%s: attn_stats head cosines", name);
    /* again with the cosines, and without them (no probabilities written back): the same bits */
    assert_int_equal(gpu_be->attn_stats(shape, q.gpu, k.gpu, first_pos, stats_again, cos_again), SP_OK);
    double *cos_twice = downloaded(gpu_be, cos_again, hh);
    if (memcmp(cos_twice, cos_got, hh * sizeof *cos_got) != 0)
        fail_msg("%s: attn_stats head cosines: two runs gave different bits", name);
    assert_int_equal(gpu_be->attn_stats(shape, q.gpu, k.gpu, first_pos, stats_again, NULL), SP_OK);
    double *stats_twice = downloaded(gpu_be, stats_again, n_stats);
    if (memcmp(stats_twice, got, n_stats * sizeof *got) != 0)
        fail_msg("%s: attn_stats without head cosines: other bits than with them", name);
    assert_no_error(name);

    double *host[] = {unwritten, zeros, want, got, got_one, want_one, cos_want, cos_got, cos_twice, stats_twice};
    for (size_t i = 0; i < SP_ARRAY_LEN(host); i++)
        free(host[i]);
    cpu_be->free(stats_cpu);
    cpu_be->free(cos_cpu);
    gpu_be->free(stats_gpu);
    gpu_be->free(cos_gpu);
    gpu_be->free(stats_again);
    gpu_be->free(cos_again);
    dual_free(&q);
    dual_free(&k);
}

static void test_attn_stats(void **state)
{
    (void)state;
    require_gpu();
    sp_attn_shape shape = {2, 37, 6, 2, 16, 0.25, 0, 0};
    check_attn_stats(&shape, 0, "causal");
    shape.scale = 0.4;
    shape.softcap = 2.0;
    shape.window = 5;
    check_attn_stats(&shape, 3, "softcap 2, window 5, from position 3");
    shape = (sp_attn_shape){1, 130, 4, 1, 8, 0.35, 0, 64};
    check_attn_stats(&shape, 1, "130 positions, window 64");
    /* 4 x 8 x 1100 scores a query row: the GPU takes 476 query rows at a time, later chunks from key i0 - 299 */
    shape = (sp_attn_shape){4, 1100, 8, 2, 8, 0.35, 0, 300};
    check_attn_stats(&shape, 2, "1100 positions in chunks, window 300");
}


static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* sym_eigvals (m = 0) or singvals of `count` host matrices on one backend: a new host array of the
 * values; the op must succeed. */
static double *spectrum_on(const sp_backend *be, int m, int n, int count, const double *a)
{
    const int k = m == 0 ? n : m < n ? m : n;
    const size_t n_a = (size_t)count * (size_t)(m == 0 ? n : m) * n, n_v = (size_t)count * k;
    double *a_be = be_doubles(be, a, n_a), *v_be = be->alloc(n_v * sizeof(double), "test values");
    assert_non_null(v_be);
    sp_status st = m == 0 ? be->sym_eigvals(n, count, a_be, v_be) : be->singvals(m, n, count, a_be, v_be);
    if (st != SP_OK)
        fail_msg("%s on %s: %s", m == 0 ? "sym_eigvals" : "singvals", be->name, sp_error_message());
    double *v = downloaded(be, v_be, n_v);
    be->free(a_be);
    be->free(v_be);
    return v;
}

/* Both backends on the same matrices: every value within SPECTRAL_TOL of each matrix's largest, the
 * GPU's values descending. Returns the GPU values (the caller frees). */
static double *check_spectrum(int m, int n, int count, const double *a, const char *what)
{
    const int k = m == 0 ? n : m < n ? m : n;
    double *gpu = spectrum_on(gpu_be, m, n, count, a), *cpu = spectrum_on(cpu_be, m, n, count, a);
    assert_no_error(what);
    for (int i = 0; i < count; i++) {
        const double *g = gpu + (size_t)i * k, *c = cpu + (size_t)i * k;
        if (!spm_is_descending((size_t)k, g))
            fail_msg("%s, matrix %d: the GPU's values are not descending", what, i);
        double scale = spm_max_abs((size_t)k, c);
        assert_below(spm_max_abs_diff((size_t)k, g, c) / (scale > 0 ? scale : 1), SPECTRAL_TOL,
                     "%s, matrix %d of %d: GPU vs CPU, of the largest", what, i, count);
    }
    free(cpu);
    return gpu;
}

static void test_f64_copy_rows_and_mem_stats(void **state)
{
    (void)state;
    require_gpu();
    enum { ROWS = 9, SRC_PITCH = 52, DST_PITCH = 37, ROW_BYTES = 29 };
    unsigned char src[ROWS * SRC_PITCH], dst[ROWS * DST_PITCH], expect[ROWS * DST_PITCH];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(i * 13 + 5);
    memset(expect, 0x5A, sizeof expect); /* the gaps between rows keep this */
    for (int r = 0; r < ROWS; r++)
        memcpy(expect + r * DST_PITCH, src + r * SRC_PITCH, ROW_BYTES);
    memset(dst, 0x5A, sizeof dst);
    unsigned char *src_gpu = gpu_copy(src, sizeof src), *dst_gpu = gpu_copy(dst, sizeof dst);
    gpu_be->copy_rows(dst_gpu, DST_PITCH, src_gpu, SRC_PITCH, ROW_BYTES, ROWS);
    gpu_be->download(dst, dst_gpu, sizeof dst);
    assert_no_error("copy_rows");
    assert_memory_equal(dst, expect, sizeof dst);
    gpu_be->copy_rows(dst_gpu, 0, src_gpu + 3 * SRC_PITCH, 0, ROW_BYTES, 1); /* one row: pitches unused */
    gpu_be->download(dst, dst_gpu, sizeof dst);
    assert_no_error("copy_rows of one row");
    assert_memory_equal(dst, src + 3 * SRC_PITCH, ROW_BYTES);

    size_t in_use0, peak0, in_use, peak;
    gpu_be->mem_reset_peak();
    gpu_be->mem_stats(&in_use0, &peak0);
    assert_int_equal(peak0, in_use0);
    void *a = gpu_be->alloc(1 << 20, "a"), *b = gpu_be->alloc(3 << 20, "b");
    assert_non_null(a);
    assert_non_null(b);
    gpu_be->mem_stats(&in_use, &peak);
    assert_int_equal(in_use, in_use0 + (4 << 20));
    assert_int_equal(peak, in_use0 + (4 << 20));
    gpu_be->free(b);
    gpu_be->mem_stats(&in_use, &peak);
    assert_int_equal(in_use, in_use0 + (1 << 20)); /* free lowers in_use only */
    assert_int_equal(peak, in_use0 + (4 << 20));
    gpu_be->mem_reset_peak();
    gpu_be->free(a);
    gpu_be->mem_stats(&in_use, &peak);
    assert_int_equal(in_use, in_use0);
    assert_int_equal(peak, in_use0 + (1 << 20));
    gpu_be->free(src_gpu);
    gpu_be->free(dst_gpu);
}

static void test_f64_widen_and_gemm(void **state)
{
    (void)state;
    require_gpu();
    sp_rng rng;
    sp_rng_seed(&rng, 50);
    const size_t n = 100003;
    dual x = dual_random(&rng, n, 3.0);
    double *y0 = host_doubles(n);
    for (size_t i = 0; i < n; i++)
        y0[i] = 1e-3 * sp_rng_normal(&rng);
    double *y_gpu = be_doubles(gpu_be, y0, n), *y_cpu = be_doubles(cpu_be, y0, n);
    for (int accumulate = 1; accumulate >= 0; accumulate--) {
        gpu_be->to_f64(n, x.gpu, y_gpu, accumulate);
        cpu_be->to_f64(n, x.cpu, y_cpu, accumulate);
        double *got = downloaded(gpu_be, y_gpu, n);
        assert_no_error("to_f64");
        if (memcmp(got, y_cpu, n * sizeof *got) != 0)
            fail_msg("to_f64 (accumulate %d): GPU and CPU differ (the widening is exact)", accumulate);
        free(got);
    }
    gpu_be->free(y_gpu);
    cpu_be->free(y_cpu);
    dual_free(&x);
    free(y0);

    const int m = 61, nn = 47, k = 83;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int with_beta = 0; with_beta < 2; with_beta++) {
                const int lda = (ta ? m : k) + 3, ldb = (tb ? k : nn) + 2, ldc = nn + 1;
                const size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? nn : k) * ldb, nc = (size_t)m * ldc;
                double *a = host_doubles(na), *b = host_doubles(nb), *c = host_doubles(nc);
                for (size_t i = 0; i < na; i++)
                    a[i] = sp_rng_normal(&rng);
                for (size_t i = 0; i < nb; i++)
                    b[i] = sp_rng_normal(&rng);
                for (size_t i = 0; i < nc; i++)
                    c[i] = with_beta || i % ldc == (size_t)nn ? sp_rng_normal(&rng) : NAN; /* NaN: overwritten */
                const double beta = with_beta ? -0.5 : 0.0;
                double *a_g = be_doubles(gpu_be, a, na), *b_g = be_doubles(gpu_be, b, nb), *c_g = be_doubles(gpu_be, c, nc);
                gpu_be->gemm_f64(ta, tb, m, nn, k, 1.25, a_g, lda, b_g, ldb, beta, c_g, ldc);
                cpu_be->gemm_f64(ta, tb, m, nn, k, 1.25, a, lda, b, ldb, beta, c, ldc);
                double *got = downloaded(gpu_be, c_g, nc);
                assert_no_error("gemm_f64");
                assert_below(spm_max_abs_diff(nc, got, c) / spm_max_abs(nc, c), F64_GEMM_TOL,
                             "gemm_f64 trans %d %d beta %g: GPU vs CPU", ta, tb, beta);
                gpu_be->free(a_g);
                gpu_be->free(b_g);
                gpu_be->free(c_g);
                free(a);
                free(b);
                free(c);
                free(got);
            }
}

/* count random symmetric n x n matrices (a + a^T) / 2, a ~ N(0, 1), packed */
static double *random_symmetric(sp_rng *rng, int n, int count)
{
    const size_t nn = (size_t)n * n;
    double *a = host_doubles((size_t)count * nn);
    for (int c = 0; c < count; c++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j <= i; j++)
                a[c * nn + (size_t)i * n + j] = a[c * nn + (size_t)j * n + i] = sp_rng_normal(rng);
    return a;
}

static void test_f64_sym_eigvals(void **state)
{
    (void)state;
    require_gpu();
    sp_rng rng;
    sp_rng_seed(&rng, 51);
    /* closed forms, odd n (the middle value stays in place when reversed), one and three matrices */
    const int n = 7;
    double *toeplitz = spm_toeplitz_2_1(n), *toeplitz_eig = spm_toeplitz_2_1_eigvals(n);
    double *w = spectrum_on(gpu_be, 0, n, 1, toeplitz);
    assert_no_error("sym_eigvals of one matrix");
    assert_below(spm_max_abs_diff((size_t)n, w, toeplitz_eig) / 4, SPECTRAL_TOL, "Toeplitz (2, -1) n %d", n);
    free(w);
    double *small = random_symmetric(&rng, n, 3);
    free(check_spectrum(0, n, 3, small, "sym_eigvals of 3 matrices 7 x 7"));

    /* 12 matrices of n = 300: every solver stream gets three, and the solver memory is counted */
    const int big_n = 300, count = 12;
    double *big = random_symmetric(&rng, big_n, count);
    const size_t big_elems = (size_t)count * big_n * big_n;
    double *a_gpu = be_doubles(gpu_be, big, big_elems), *w_gpu = gpu_be->alloc((size_t)count * big_n * sizeof(double), "w");
    assert_non_null(w_gpu);
    size_t in_use0, peak0, in_use1, peak1;
    gpu_be->sync();
    gpu_be->mem_reset_peak();
    gpu_be->mem_stats(&in_use0, &peak0);
    double t0 = now_ms();
    assert_int_equal(gpu_be->sym_eigvals(big_n, count, a_gpu, w_gpu), SP_OK);
    gpu_be->sync();
    print_message("sym_eigvals of %d matrices %d x %d on the GPU: %.1f ms\n", count, big_n, big_n, now_ms() - t0);
    gpu_be->mem_stats(&in_use1, &peak1);
    assert_true(peak1 > in_use0);   /* info flags and any workspace growth went through alloc */
    assert_true(in_use1 >= in_use0); /* workspaces are kept, the rest is freed */
    gpu_be->free(a_gpu);
    gpu_be->free(w_gpu);
    free(check_spectrum(0, big_n, count, big, "sym_eigvals of 12 matrices 300 x 300"));

    /* a NaN in matrix 1 of 3: SP_ERR_NUMERIC naming it, as LAPACK on the CPU */
    small[(size_t)n * n + 2] = small[(size_t)n * n + 2 * n] = NAN;
    double *a_nan = be_doubles(gpu_be, small, (size_t)3 * n * n), *w_nan = gpu_be->alloc((size_t)3 * n * sizeof(double), "w");
    assert_non_null(w_nan);
    assert_int_equal(gpu_be->sym_eigvals(n, 3, a_nan, w_nan), SP_ERR_NUMERIC);
    assert_non_null(strstr(sp_error_message(), "matrix 1 of 3"));
    sp_error_clear();
    gpu_be->free(a_nan);
    gpu_be->free(w_nan);
    free(toeplitz);
    free(toeplitz_eig);
    free(small);
    free(big);
}

/* count matrices m x n: matrix `ill` (if >= 0) has condition number 1e8 (singular values log-spaced
 * from 1 to 1e-8, into ill_sv), matrix `zero` (if >= 0) is 0, the others are N(0, 1). */
static double *singvals_batch(sp_rng *rng, int m, int n, int count, int ill, int zero, double *ill_sv)
{
    const int k = m < n ? m : n;
    const size_t mn = (size_t)m * n;
    double *a = host_doubles((size_t)count * mn);
    for (int i = 0; i < count; i++) {
        if (i == zero)
            continue;
        if (i == ill) {
            for (int j = 0; j < k; j++)
                ill_sv[j] = pow(10.0, -8.0 * j / (k - 1));
            double *one = spm_with_singvals(rng, m, n, ill_sv);
            memcpy(a + i * mn, one, mn * sizeof *a);
            free(one);
        } else {
            for (size_t e = 0; e < mn; e++)
                a[i * mn + e] = sp_rng_normal(rng);
        }
    }
    return a;
}

static void check_singvals_cuda(sp_rng *rng, int m, int n)
{
    const int k = m < n ? m : n, count = 3;
    char what[96];
    /* well conditioned: the Gram route */
    double *a = singvals_batch(rng, m, n, count, -1, -1, NULL);
    snprintf(what, sizeof what, "singvals of 3 random %d x %d", m, n);
    free(check_spectrum(m, n, count, a, what));
    free(a);

    /* one of cond 1e8 (gesvd fallback) and one zero matrix among them */
    double *ill_sv = host_doubles((size_t)k);
    a = singvals_batch(rng, m, n, count, 1, 2, ill_sv);
    snprintf(what, sizeof what, "singvals of %d x %d, one of cond 1e8 and one zero", m, n);
    double *s = check_spectrum(m, n, count, a, what);
    const double *s_ill = s + k;
    for (int j = 0; j < k; j++)
        assert_below(fabs(s_ill[j] - ill_sv[j]) / ill_sv[j], SMALL_SV_TOL,
                     "%s: singular value %d (exact %.3g), relative", what, j, ill_sv[j]);
    assert_true(spm_max_abs((size_t)k, s + 2 * k) == 0);
    free(s);
    free(a);
    free(ill_sv);
}

static void test_f64_singvals(void **state)
{
    (void)state;
    require_gpu();
    sp_rng rng;
    sp_rng_seed(&rng, 52);
    check_singvals_cuda(&rng, 40, 70); /* wide: gesvd on the column-major 70 x 40 in place */
    check_singvals_cuda(&rng, 70, 40); /* tall: gesvd on a transposed copy */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),     cmocka_unit_test(test_gemm),       cmocka_unit_test(test_vector_updates),
        cmocka_unit_test(test_reductions), cmocka_unit_test(test_layernorm),  cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_activations), cmocka_unit_test(test_rope),      cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attn_stats),
        cmocka_unit_test(test_embed),      cmocka_unit_test(test_xent),       cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_naive_references),
        cmocka_unit_test(test_f64_copy_rows_and_mem_stats), cmocka_unit_test(test_f64_widen_and_gemm),
        cmocka_unit_test(test_f64_sym_eigvals), cmocka_unit_test(test_f64_singvals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
