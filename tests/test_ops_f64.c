/* tests/test_ops_f64.c: every op of the CPU backend (float64 build) against naive references
 * (tests/support/ref_ops.c), and every backward and JVP against central finite differences.
 *
 * Tolerances (normwise: max |a - b| / max |b|):
 * - REF_TOL 1e-12: a backend op against its reference, the same math summed in another order.
 * - FD_TOL 1e-6 with step FD_STEP 1e-6: a central difference in double has truncation error
 *   ~h^2 |f'''| ~ 1e-12 and rounding error ~1e-16 |f| / h ~ 1e-10, so 1e-6 leaves a wide margin
 *   while any wrong term of a derivative shows up at 1e-2 or more.
 * - EXACT_TOL 1e-12: identities that hold up to rounding (adjoint, accumulate, inverse). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_math.h"
#include "tests/support/assert_err.h"
#include "tests/support/fd_check.h"
#include "tests/support/op_compare.h"
#include "tests/support/ref_ops.h"
#include "tests/support/vec_util.h"

#define REF_TOL 1e-12
#define FD_STEP 1e-6
#define FD_TOL 1e-6
#define EXACT_TOL 1e-12

/* Sizes that are multiples of nothing in particular. */
#define ROWS 7
#define DIM 13
#define BATCH 2
#define SEQ 5
#define HEADS 6
#define KV_HEADS 2
#define HEAD_DIM 4

#ifdef __SANITIZE_ADDRESS__
/* Let the out-of-memory test see calloc return NULL instead of AddressSanitizer aborting. */
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif

static const sp_backend *cpu(void) { return sp_backend_cpu(); }

/* Runs the derivative checks on a map at random inputs, output weights and directions: all of
 * them, or (per_element = 0, for maps too large to difference element by element) those along
 * random directions only. */
static void check_derivatives_opt(const fd_map *f, uint64_t seed, const char *name, int per_element)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    sp_real *in[FD_MAX_IN], *dir[FD_MAX_IN];
    for (int i = 0; i < f->n_in; i++) {
        in[i] = vec_random(&rng, f->in_len[i], 1);
        dir[i] = vec_random(&rng, f->in_len[i], 1);
    }
    sp_real *dy = vec_random(&rng, f->out_len, 1);

    if (per_element)
        assert_below(fd_vjp_elementwise_err(f, in, dy, FD_STEP), FD_TOL, "%s: vjp vs per-element differences",
                     name);
    assert_below(fd_vjp_directional_err(f, in, dy, dir, FD_STEP), FD_TOL, "%s: vjp vs directional difference",
                 name);
    assert_below(fd_vjp_accumulate_err(f, in, dy), EXACT_TOL, "%s: vjp called twice must add twice", name);
    if (f->jvp) {
        assert_below(fd_jvp_err(f, in, dir, FD_STEP), FD_TOL, "%s: jvp vs differences", name);
        assert_below(fd_adjoint_err(f, in, dy, dir), EXACT_TOL, "%s: <u, J v> vs <J^T u, v>", name);
    }
    for (int i = 0; i < f->n_in; i++) {
        free(in[i]);
        free(dir[i]);
    }
    free(dy);
}

static void check_derivatives(const fd_map *f, uint64_t seed, const char *name)
{
    check_derivatives_opt(f, seed, name, 1);
}

/* ---------------------------------------------------------------- memory */

static void test_memory_ops(void **state)
{
    (void)state;
    const sp_backend *be = cpu();
    assert_string_equal(be->name, "cpu");
    size_t n = 37;
    sp_real *a = be->alloc(n * sizeof *a, "test buffer a"), *b = be->alloc(n * sizeof *b, "test buffer b");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(vec_max_abs(n, a) == 0); /* zeroed */
    sp_real host[37], back[37];
    for (size_t i = 0; i < n; i++)
        host[i] = (sp_real)(i + 0.5);
    be->upload(a, host, sizeof host);
    be->copy(b, a, sizeof host);
    be->download(back, b, sizeof back);
    be->sync();
    assert_memory_equal(back, host, sizeof host);
    be->zero(b + 3, 4 * sizeof *b);
    assert_true(b[2] == host[2] && b[3] == 0 && b[6] == 0 && b[7] == host[7]);
    be->free(a);
    be->free(b);

    void *empty = be->alloc(0, "empty buffer");
    assert_non_null(empty);
    be->free(empty);

    sp_error_clear();
    assert_null(be->alloc(SIZE_MAX / 2, "an impossible buffer"));
    assert_int_equal(sp_error_code(), SP_ERR_NOMEM);
    assert_non_null(strstr(sp_error_message(), "bytes for an impossible buffer"));
    sp_error_clear();
}

/* ---------------------------------------------------------------- inline exp */

/* The CPU kernels' exp (GELU, SwiGLU, softmax) against libm's, and its documented range: within
 * 2 ulps (measured: 1) where e^x is a normal double, 0 below the range, inf above, NaN kept. */
static void test_cpu_exp(void **state)
{
    (void)state;
    double worst = 0;
    for (double x = -708.3; x < 709.4; x += 0.0137)
        worst = fmax(worst, fabs(sp_cpu_exp(x) - exp(x)) / exp(x));
    assert_below(worst, 4.5e-16, "exp relative error over [-708.3, 709.4]");
    assert_true(sp_cpu_exp(0) == 1);
    assert_true(sp_cpu_exp(-709.5) == 0 && sp_cpu_exp(-1e300) == 0 && sp_cpu_exp(-INFINITY) == 0);
    assert_true(isinf(sp_cpu_exp(709.5)) && isinf(sp_cpu_exp(1e300)) && isinf(sp_cpu_exp(INFINITY)));
    assert_true(isnan(sp_cpu_exp(NAN)));
    assert_true(sp_cpu_sigmoid(-800) == 0 && sp_cpu_sigmoid(800) == 1 && isnan(sp_cpu_sigmoid(NAN)));
    assert_below(fabs(sp_cpu_sigmoid(0.3) - 1 / (1 + exp(-0.3))), 1e-16, "sigmoid(0.3)");
}

/* ---------------------------------------------------------------- dense */

static void test_gemm_transposes(void **state)
{
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            assert_below(opcmp_gemm(cpu(), ta, tb, 0.7, 11 + 2 * ta + tb), REF_TOL, "gemm trans_a=%d trans_b=%d",
                         ta, tb);
}

/* Products large enough to be cut into blocks and threaded: by rows (3 blocks, the last partial)
 * and by columns. */
static void test_gemm_threaded_blocks(void **state)
{
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            assert_below(opcmp_gemm_sized(cpu(), ta, tb, 300, 70, 130, 0.7, 15 + 2 * ta + tb), REF_TOL,
                         "gemm split by rows, trans_a=%d trans_b=%d", ta, tb);
            assert_below(opcmp_gemm_sized(cpu(), ta, tb, 70, 300, 130, 0.0, 25 + 2 * ta + tb), REF_TOL,
                         "gemm split by columns, trans_a=%d trans_b=%d", ta, tb);
        }
}

static void test_gemm_beta_zero_overwrites_nan(void **state)
{
    (void)state;
    enum { M = 4, N = 6, K = 3 };
    sp_rng rng;
    sp_rng_seed(&rng, 12);
    sp_real *a = vec_random(&rng, M * K, 1), *b = vec_random(&rng, K * N, 1), c[M * N], c_ref[M * N];
    for (int i = 0; i < M * N; i++)
        c[i] = (sp_real)NAN;
    cpu()->gemm(0, 0, M, N, K, 2.0, a, K, b, N, 0.0, c, N);
    ref_gemm(0, 0, M, N, K, 2.0, a, K, b, N, 0.0, c_ref, N);
    assert_int_equal(cpu()->count_nonfinite(M * N, c), 0);
    assert_below(vec_rel_err(M * N, c, c_ref), REF_TOL, "gemm beta=0 over NaN");
    /* k = 0: an empty product leaves beta * C */
    for (int i = 0; i < M * N; i++)
        c_ref[i] = (sp_real)(0.5 * c[i]);
    cpu()->gemm(0, 0, M, N, 0, 2.0, a, 1, b, N, 0.5, c, N);
    assert_below(vec_rel_err(M * N, c, c_ref), REF_TOL, "gemm k=0");
    free(a);
    free(b);
}

static void test_axpby_and_scale(void **state)
{
    (void)state;
    enum { N = 29 };
    sp_rng rng;
    sp_rng_seed(&rng, 13);
    sp_real *x = vec_random(&rng, N, 1), *y = vec_random(&rng, N, 1), expect[N];
    for (int i = 0; i < N; i++)
        expect[i] = (sp_real)(0.3 * x[i] - 1.7 * y[i]);
    cpu()->axpby(N, 0.3, x, -1.7, y);
    assert_below(vec_rel_err(N, y, expect), REF_TOL, "axpby");
    for (int i = 0; i < N; i++) {
        y[i] = (sp_real)INFINITY;
        expect[i] = (sp_real)(-2.5 * x[i]);
    }
    cpu()->axpby(N, -2.5, x, 0.0, y); /* b = 0 overwrites even Inf */
    assert_below(vec_rel_err(N, y, expect), REF_TOL, "axpby with b=0 over Inf");
    for (int i = 0; i < N; i++)
        expect[i] = (sp_real)(x[i] * 0.25);
    cpu()->scale(N, 0.25, x);
    assert_below(vec_rel_err(N, x, expect), REF_TOL, "scale");
    free(x);
    free(y);
}

static void test_reductions(void **state)
{
    (void)state;
    size_t sizes[] = {0, 1, 63, 65, 1001, 50003}; /* below, around and above the block count */
    sp_rng rng;
    sp_rng_seed(&rng, 14);
    for (size_t s = 0; s < SP_ARRAY_LEN(sizes); s++) {
        size_t n = sizes[s];
        sp_real *x = vec_random(&rng, n, 1), *y = vec_random(&rng, n, 1);
        double sq = 0, xy = 0, xy_abs = 0;
        for (size_t i = 0; i < n; i++) {
            sq += x[i] * x[i];
            xy += x[i] * y[i];
            xy_abs += fabs(x[i] * y[i]);
        }
        assert_below(fabs(cpu()->sumsq(n, x) - sq), REF_TOL * sq, "sumsq n=%zu", n);
        assert_below(fabs(cpu()->dot(n, x, y) - xy), REF_TOL * xy_abs, "dot n=%zu", n);
        assert_int_equal(cpu()->count_nonfinite(n, x), 0);
        if (n > 2) {
            x[0] = (sp_real)NAN;
            x[n / 2] = (sp_real)INFINITY;
            x[n - 1] = (sp_real)-INFINITY;
            assert_int_equal(cpu()->count_nonfinite(n, x), 3);
        }
        free(x);
        free(y);
    }
}

/* ---------------------------------------------------------------- norms */

typedef struct {
    sp_norm_kind kind;
    int rows, dim;
    double eps;
    sp_real *y, *mean, *rstd; /* forward scratch for the saved statistics */
} norm_ctx;

static sp_real *norm_bias(const norm_ctx *c, sp_real *const *in)
{
    return c->kind == SP_NORM_LAYERNORM ? in[2] : NULL;
}

static void norm_apply(void *ctx, sp_real *const *in, sp_real *out)
{
    norm_ctx *c = ctx;
    cpu()->norm_fwd(c->kind, c->rows, c->dim, (sp_real)c->eps, in[0], in[1], norm_bias(c, in), out, c->mean,
                    c->rstd);
}

static void norm_vjp(void *ctx, sp_real *const *in, const sp_real *dy, sp_real *const *grad)
{
    norm_ctx *c = ctx;
    norm_apply(c, in, c->y);
    cpu()->norm_bwd(c->kind, c->rows, c->dim, in[0], in[1], c->mean, c->rstd, dy, grad[0], grad[1],
                    c->kind == SP_NORM_LAYERNORM ? grad[2] : NULL);
}

static void norm_jvp(void *ctx, sp_real *const *in, sp_real *const *tangent, sp_real *ty)
{
    norm_ctx *c = ctx;
    norm_apply(c, in, c->y);
    cpu()->norm_jvp(c->kind, c->rows, c->dim, in[0], in[1], c->mean, c->rstd, tangent[0], ty);
}

static norm_ctx norm_ctx_make(sp_norm_kind kind)
{
    norm_ctx c = {kind, ROWS, DIM, 1e-5, vec_zeros(ROWS * DIM), vec_zeros(ROWS), vec_zeros(ROWS)};
    return c;
}

static void norm_ctx_free(norm_ctx *c)
{
    free(c->y);
    free(c->mean);
    free(c->rstd);
}

static void test_layernorm_forward(void **state)
{
    (void)state;
    assert_below(opcmp_norm_fwd(cpu(), SP_NORM_LAYERNORM, ROWS, DIM, 21), REF_TOL, "layernorm forward");
}

static void test_rmsnorm_forward(void **state)
{
    (void)state;
    assert_below(opcmp_norm_fwd(cpu(), SP_NORM_RMSNORM, ROWS, DIM, 22), REF_TOL, "rmsnorm forward");
}

static void check_norm_derivatives(sp_norm_kind kind, const char *name)
{
    norm_ctx c = norm_ctx_make(kind);
    fd_map f = {.n_in = kind == SP_NORM_LAYERNORM ? 3 : 2,
                .n_jvp_in = 1,
                .in_len = {ROWS * DIM, DIM, DIM},
                .out_len = ROWS * DIM,
                .ctx = &c,
                .apply = norm_apply,
                .vjp = norm_vjp,
                .jvp = norm_jvp};
    check_derivatives(&f, 31 + kind, name);
    norm_ctx_free(&c);
}

static void test_layernorm_derivatives(void **state)
{
    (void)state;
    check_norm_derivatives(SP_NORM_LAYERNORM, "layernorm");
}

static void test_rmsnorm_derivatives(void **state)
{
    (void)state;
    check_norm_derivatives(SP_NORM_RMSNORM, "rmsnorm");
}

/* dgain and dbias may be NULL: dx must be the same as with them. */
static void test_norm_bwd_without_param_grads(void **state)
{
    (void)state;
    norm_ctx c = norm_ctx_make(SP_NORM_LAYERNORM);
    sp_rng rng;
    sp_rng_seed(&rng, 33);
    sp_real *x = vec_random(&rng, ROWS * DIM, 1), *gain = vec_random(&rng, DIM, 1), *bias = vec_random(&rng, DIM, 1);
    sp_real *dy = vec_random(&rng, ROWS * DIM, 1), *in[] = {x, gain, bias};
    sp_real dx_full[ROWS * DIM] = {0}, dx_only[ROWS * DIM] = {0}, dgain[DIM] = {0}, dbias[DIM] = {0};
    norm_apply(&c, in, c.y);
    cpu()->norm_bwd(c.kind, ROWS, DIM, x, gain, c.mean, c.rstd, dy, dx_full, dgain, dbias);
    cpu()->norm_bwd(c.kind, ROWS, DIM, x, gain, c.mean, c.rstd, dy, dx_only, NULL, NULL);
    assert_memory_equal(dx_full, dx_only, sizeof dx_full);
    assert_true(vec_max_abs(DIM, dgain) > 0 && vec_max_abs(DIM, dbias) > 0);
    free(x);
    free(gain);
    free(bias);
    free(dy);
    norm_ctx_free(&c);
}

/* ---------------------------------------------------------------- activations */

typedef struct {
    sp_act_kind kind;
    size_t n;
    double cap; /* soft-cap */
    sp_real *y; /* soft-cap forward scratch: its slope comes from the capped values */
} elem_ctx;

static void act_apply(void *ctx, sp_real *const *in, sp_real *out)
{
    elem_ctx *c = ctx;
    cpu()->act_fwd(c->kind, c->n, in[0], out);
}

static void act_vjp(void *ctx, sp_real *const *in, const sp_real *dy, sp_real *const *grad)
{
    elem_ctx *c = ctx;
    cpu()->act_bwd(c->kind, c->n, in[0], dy, grad[0]);
}

static void act_jvp(void *ctx, sp_real *const *in, sp_real *const *tangent, sp_real *ty)
{
    elem_ctx *c = ctx;
    cpu()->act_jvp(c->kind, c->n, in[0], tangent[0], ty);
}

static const char *const act_names[] = {"gelu tanh", "gelu erf", "silu"};

static void test_act(void **state)
{
    (void)state;
    for (int kind = SP_ACT_GELU_TANH; kind <= SP_ACT_SILU; kind++) {
        elem_ctx c = {kind, ROWS * DIM, 0, NULL};
        /* into the flat tails too */
        assert_below(opcmp_act_fwd(cpu(), kind, c.n, 3.0, 41 + kind), REF_TOL, "%s forward", act_names[kind]);
        fd_map f = {.n_in = 1, .n_jvp_in = 1, .in_len = {c.n}, .out_len = c.n, .ctx = &c, .apply = act_apply,
                    .vjp = act_vjp, .jvp = act_jvp};
        check_derivatives(&f, 42 + kind, act_names[kind]);
    }
    /* GELU erf at points worked by hand: 0.5 x (1 + erf(x / sqrt 2)) */
    sp_real x[3] = {0, 1, -2}, y[3];
    cpu()->act_fwd(SP_ACT_GELU_ERF, 3, x, y);
    assert_true(y[0] == 0);
    assert_below(fabs(y[1] - 0.8413447460685429), 1e-15, "gelu erf(1)");
    assert_below(fabs(y[2] - -0.04550026389635842), 1e-15, "gelu erf(-2)");
}

static void glu_apply(void *ctx, sp_real *const *in, sp_real *out)
{
    elem_ctx *c = ctx;
    cpu()->glu_fwd(c->kind, c->n, in[0], in[1], out);
}

static void glu_vjp(void *ctx, sp_real *const *in, const sp_real *dy, sp_real *const *grad)
{
    elem_ctx *c = ctx;
    cpu()->glu_bwd(c->kind, c->n, in[0], in[1], dy, grad[0], grad[1]);
}

static void glu_jvp(void *ctx, sp_real *const *in, sp_real *const *tangent, sp_real *ty)
{
    elem_ctx *c = ctx;
    cpu()->glu_jvp(c->kind, c->n, in[0], in[1], tangent[0], tangent[1], ty);
}

static void test_glu(void **state)
{
    (void)state;
    for (int kind = SP_ACT_GELU_TANH; kind <= SP_ACT_SILU; kind++) {
        elem_ctx c = {kind, ROWS * DIM, 0, NULL};
        assert_below(opcmp_glu_fwd(cpu(), kind, c.n, 4.0, 43 + kind), REF_TOL, "%s gated forward", act_names[kind]);
        fd_map f = {.n_in = 2, .n_jvp_in = 2, .in_len = {c.n, c.n}, .out_len = c.n, .ctx = &c, .apply = glu_apply,
                    .vjp = glu_vjp, .jvp = glu_jvp};
        check_derivatives(&f, 44 + kind, act_names[kind]);
    }
    /* exp(-g) overflows to inf at g = -800: silu(-800) must still be 0, silu(800) = 800 */
    sp_real g[2] = {-800, 800}, u[2] = {1.5, -0.5}, h[2];
    cpu()->glu_fwd(SP_ACT_SILU, 2, g, u, h);
    assert_true(h[0] == 0 && h[1] == (sp_real)(800 * -0.5));
}

static void softcap_apply(void *ctx, sp_real *const *in, sp_real *out)
{
    elem_ctx *c = ctx;
    cpu()->softcap_fwd(c->n, c->cap, in[0], out);
}

static void softcap_jvp(void *ctx, sp_real *const *in, sp_real *const *tangent, sp_real *ty)
{
    elem_ctx *c = ctx;
    softcap_apply(c, in, c->y);
    cpu()->softcap_jvp(c->n, c->cap, c->y, tangent[0], ty);
}

/* The Jacobian is diagonal, so the JVP applied to dy is the VJP (added, as a VJP must). */
static void softcap_vjp(void *ctx, sp_real *const *in, const sp_real *dy, sp_real *const *grad)
{
    elem_ctx *c = ctx;
    sp_real *g = vec_zeros(c->n), *t[] = {(sp_real *)dy};
    softcap_jvp(c, in, t, g);
    for (size_t i = 0; i < c->n; i++)
        grad[0][i] += g[i];
    free(g);
}

static void test_softcap(void **state)
{
    (void)state;
    elem_ctx c = {SP_ACT_SILU, ROWS * DIM, 2.5, vec_zeros(ROWS * DIM)};
    assert_below(opcmp_softcap_fwd(cpu(), c.n, c.cap, 4.0, 45), REF_TOL, "softcap forward");
    fd_map f = {.n_in = 1, .n_jvp_in = 1, .in_len = {c.n}, .out_len = c.n, .ctx = &c, .apply = softcap_apply,
                .vjp = softcap_vjp, .jvp = softcap_jvp};
    check_derivatives(&f, 46, "softcap");
    /* in place, and bounded by the cap */
    sp_real x[3] = {100, -100, 0.5};
    cpu()->softcap_fwd(3, 2.5, x, x);
    assert_true(x[0] <= 2.5 && x[1] >= -2.5 && fabs(x[2] - 2.5 * tanh(0.2)) < 1e-15);
    free(c.y);
}

/* ---------------------------------------------------------------- rope */

typedef struct {
    int rows, seq_len, n_heads, head_dim, rot_dims;
    double inv_freq[8];
} rope_ctx;

static size_t rope_len(const rope_ctx *c) { return (size_t)c->rows * c->n_heads * c->head_dim; }

static void rope_apply(void *ctx, sp_real *const *in, sp_real *out)
{
    rope_ctx *c = ctx;
    memcpy(out, in[0], rope_len(c) * sizeof *out);
    cpu()->rope(c->rows, c->seq_len, c->n_heads, c->head_dim, c->rot_dims, c->inv_freq, 1, out);
}

/* The transpose is the rotation back; the op is in place, so add its result into grad. */
static void rope_vjp(void *ctx, sp_real *const *in, const sp_real *dy, sp_real *const *grad)
{
    (void)in;
    rope_ctx *c = ctx;
    sp_real *back = vec_dup(rope_len(c), dy);
    cpu()->rope(c->rows, c->seq_len, c->n_heads, c->head_dim, c->rot_dims, c->inv_freq, -1, back);
    for (size_t i = 0; i < rope_len(c); i++)
        grad[0][i] += back[i];
    free(back);
}

static void rope_jvp(void *ctx, sp_real *const *in, sp_real *const *tangent, sp_real *ty)
{
    (void)in;
    sp_real *t[] = {tangent[0]};
    rope_apply(ctx, t, ty);
}

/* Every head dim, or only the first rot_dims (partial rotary: the rest pass through unchanged). */
static void check_rope(int rot_dims)
{
    rope_ctx c = {BATCH * SEQ, SEQ, 3, 10, rot_dims, {0}};
    for (int i = 0; i < rot_dims / 2; i++) /* a table from no formula: the op must read it as given */
        c.inv_freq[i] = 1.3 / (1 + 3 * i * i);
    size_t n = rope_len(&c);
    sp_rng rng;
    sp_rng_seed(&rng, 52);
    assert_below(opcmp_rope(cpu(), BATCH, SEQ, c.n_heads, c.head_dim, rot_dims, 50.0, 51), REF_TOL,
                 "rope forward, %d of %d dims", rot_dims, c.head_dim);
    sp_real *x = vec_random(&rng, n, 1), *y = vec_dup(n, x), *ref = vec_dup(n, x);
    cpu()->rope(c.rows, c.seq_len, c.n_heads, c.head_dim, rot_dims, c.inv_freq, 1, y);
    ref_rope(c.rows, c.seq_len, c.n_heads, c.head_dim, rot_dims, c.inv_freq, ref);
    assert_below(vec_rel_err(n, y, ref), REF_TOL, "rope with a given table");
    /* position 0 of every sequence is not rotated, nor are the dims past rot_dims */
    assert_memory_equal(y, x, (size_t)c.n_heads * c.head_dim * sizeof *x);
    for (size_t r = 0; r < (size_t)c.rows * c.n_heads; r++)
        assert_memory_equal(y + r * c.head_dim + rot_dims, x + r * c.head_dim + rot_dims,
                            (size_t)(c.head_dim - rot_dims) * sizeof *x);
    assert_below(fabs(vec_dot(n, y, y) - vec_dot(n, x, x)), EXACT_TOL * vec_dot(n, x, x), "rope keeps the norm");
    cpu()->rope(c.rows, c.seq_len, c.n_heads, c.head_dim, rot_dims, c.inv_freq, -1, y);
    assert_below(vec_rel_err(n, y, x), EXACT_TOL, "rope direction -1 inverts +1");
    fd_map f = {.n_in = 1, .n_jvp_in = 1, .in_len = {n}, .out_len = n, .ctx = &c, .apply = rope_apply,
                .vjp = rope_vjp, .jvp = rope_jvp};
    check_derivatives(&f, 53, "rope");
    free(x);
    free(y);
    free(ref);
}

static void test_rope(void **state)
{
    (void)state;
    check_rope(10);
    check_rope(4);
}

/* ---------------------------------------------------------------- attention */

typedef struct {
    sp_attn_shape shape;
    sp_real *saved, *out;
} attn_ctx;

/* Causal attention at the default scale 1/sqrt(head_dim), then soft-cap and window as given. */
static sp_attn_shape attn_shape(int batch, int seq_len, int n_heads, int n_kv_heads, int head_dim, double softcap,
                                int window)
{
    return (sp_attn_shape){batch, seq_len, n_heads, n_kv_heads, head_dim, 1.0 / sqrt((double)head_dim), softcap,
                           window};
}

static attn_ctx attn_ctx_make(sp_attn_shape shape)
{
    attn_ctx c = {shape, vec_zeros(cpu()->attn_saved_elems(&shape)),
                  vec_zeros((size_t)shape.batch * shape.seq_len * shape.n_heads * shape.head_dim)};
    return c;
}

static void attn_ctx_free(attn_ctx *c)
{
    free(c->saved);
    free(c->out);
}

static size_t attn_q_len(const attn_ctx *c)
{
    return (size_t)c->shape.batch * c->shape.seq_len * c->shape.n_heads * c->shape.head_dim;
}

static size_t attn_kv_len(const attn_ctx *c)
{
    return (size_t)c->shape.batch * c->shape.seq_len * c->shape.n_kv_heads * c->shape.head_dim;
}

static void attn_apply(void *ctx, sp_real *const *in, sp_real *out)
{
    attn_ctx *c = ctx;
    cpu()->attn_fwd(&c->shape, in[0], in[1], in[2], c->saved, out);
}

static void attn_vjp(void *ctx, sp_real *const *in, const sp_real *dy, sp_real *const *grad)
{
    attn_ctx *c = ctx;
    attn_apply(c, in, c->out);
    cpu()->attn_bwd(&c->shape, in[0], in[1], in[2], c->saved, dy, grad[0], grad[1], grad[2]);
}

static void attn_jvp(void *ctx, sp_real *const *in, sp_real *const *tangent, sp_real *ty)
{
    attn_ctx *c = ctx;
    attn_apply(c, in, c->out);
    cpu()->attn_jvp(&c->shape, in[0], in[1], in[2], c->saved, tangent[0], tangent[1], tangent[2], ty);
}

static void check_attention_derivatives(sp_attn_shape shape, uint64_t seed, const char *name, int per_element)
{
    attn_ctx c = attn_ctx_make(shape);
    fd_map f = {.n_in = 3,
                .n_jvp_in = 3,
                .in_len = {attn_q_len(&c), attn_kv_len(&c), attn_kv_len(&c)},
                .out_len = attn_q_len(&c),
                .ctx = &c,
                .apply = attn_apply,
                .vjp = attn_vjp,
                .jvp = attn_jvp};
    check_derivatives_opt(&f, seed, name, per_element);
    attn_ctx_free(&c);
}

static void test_attention_forward(void **state)
{
    (void)state;
    int kv_heads[] = {KV_HEADS, HEADS, 1}; /* grouped query, multi-head, multi-query */
    for (int i = 0; i < 3; i++) {
        sp_attn_shape shape = attn_shape(BATCH, SEQ, HEADS, kv_heads[i], HEAD_DIM, 0, 0);
        assert_below(opcmp_attention_fwd(cpu(), &shape, 61 + i), REF_TOL, "attention forward, %d kv heads",
                     kv_heads[i]);
    }
    sp_attn_shape shape = attn_shape(BATCH, SEQ, HEADS, KV_HEADS, HEAD_DIM, 0, 0);
    assert_int_equal(cpu()->attn_saved_elems(&shape), (size_t)BATCH * HEADS * SEQ * SEQ);
    /* longer than the CPU backend's 64-row tiles (two full, one partial), heads wider than a tile */
    shape = attn_shape(2, 130, 2, 1, 70, 0, 0);
    assert_below(opcmp_attention_fwd(cpu(), &shape, 64), REF_TOL, "attention forward, 130 positions");
}

/* A score scale other than 1/sqrt(head_dim), a soft-cap small enough to bite (q at scale 2 gives
 * scores of several units), windows of 1 (only the diagonal), 2 and wider than the sequence, and
 * windows over 130 positions that leave whole 64-key tiles out of the band. */
static void test_attention_forward_scale_softcap_window(void **state)
{
    (void)state;
    const int windows[] = {0, 1, 2, SEQ + 3};
    for (size_t w = 0; w < SP_ARRAY_LEN(windows); w++)
        for (int capped = 0; capped < 2; capped++) {
            sp_attn_shape shape = attn_shape(BATCH, SEQ, HEADS, KV_HEADS, HEAD_DIM, capped ? 1.5 : 0, windows[w]);
            shape.scale = 0.3;
            assert_below(opcmp_attention_fwd(cpu(), &shape, 66 + w), REF_TOL,
                         "attention forward, scale 0.3, softcap %g, window %d", shape.softcap, shape.window);
        }
    const int long_windows[] = {20, 64, 65, 100};
    for (size_t w = 0; w < SP_ARRAY_LEN(long_windows); w++) {
        sp_attn_shape shape = attn_shape(2, 130, 2, 1, 9, 3.0, long_windows[w]);
        assert_below(opcmp_attention_fwd(cpu(), &shape, 70 + w), REF_TOL, "attention forward, 130 positions, window %d",
                     shape.window);
    }
}

/* The visible keys of query i under a window W are exactly i - W < j <= i: probabilities vanish
 * outside, and within it they are the causal softmax of those keys alone. */
static void test_attention_window_mask(void **state)
{
    (void)state;
    enum { T = 9, W = 3 };
    sp_attn_shape shape = attn_shape(1, T, 1, 1, 2, 0, W);
    sp_real q[T * 2] = {0}, k[T * 2] = {0}, v[T * 2], out[T * 2], saved[T * T];
    for (int i = 0; i < T * 2; i++)
        v[i] = (sp_real)i;
    cpu()->attn_fwd(&shape, q, k, v, saved, out); /* equal scores: uniform over the visible keys */
    for (int i = 0; i < T; i++) {
        const int first = i - W + 1 > 0 ? i - W + 1 : 0;
        for (int j = 0; j < T; j++) {
            const double expect = j >= first && j <= i ? 1.0 / (i - first + 1) : 0.0;
            assert_below(fabs(saved[i * T + j] - expect), 1e-15, "P[%d][%d] under a window of %d", i, j, W);
        }
    }
}

static void test_attention_derivatives(void **state)
{
    (void)state;
    check_attention_derivatives(attn_shape(BATCH, SEQ, HEADS, KV_HEADS, HEAD_DIM, 0, 0), 64, "attention", 1);
    sp_attn_shape shape = attn_shape(BATCH, SEQ, HEADS, KV_HEADS, HEAD_DIM, 1.5, 2);
    shape.scale = 0.8;
    check_attention_derivatives(shape, 65, "attention, scale 0.8, softcap 1.5, window 2", 1);
    check_attention_derivatives(attn_shape(BATCH, SEQ, HEADS, 1, HEAD_DIM, 0.7, 0), 66, "attention, softcap 0.7", 1);
    check_attention_derivatives(attn_shape(BATCH, SEQ, HEADS, HEADS, HEAD_DIM, 0, 3), 67, "attention, window 3", 1);
}

/* attn_jvp_at (tangents at one position t of sequence 0) against attn_jvp of each tangent placed
 * at t alone, read at t: both analytic, so to 1e-12 relative; at the first, a middle and the last
 * position, grouped-query heads, a soft-cap that bites and windows. */
static void check_attention_at(sp_attn_shape shape, uint64_t seed, const char *name)
{
    enum { N = 3 };
    const int len = shape.seq_len, qd = shape.n_heads * shape.head_dim, kvd = shape.n_kv_heads * shape.head_dim;
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    sp_real *q = vec_random(&rng, (size_t)len * qd, 2.0), *k = vec_random(&rng, (size_t)len * kvd, 1.0);
    sp_real *v = vec_random(&rng, (size_t)len * kvd, 1.0), *saved = vec_zeros(cpu()->attn_saved_elems(&shape));
    sp_real *out = vec_zeros((size_t)len * qd), *tq = vec_random(&rng, (size_t)N * qd, 1.0);
    sp_real *tk = vec_random(&rng, (size_t)N * kvd, 1.0), *tv = vec_random(&rng, (size_t)N * kvd, 1.0);
    sp_real *at = vec_zeros((size_t)N * qd), *full[3] = {vec_zeros((size_t)len * qd), vec_zeros((size_t)len * kvd),
                                                         vec_zeros((size_t)len * kvd)};
    cpu()->attn_fwd(&shape, q, k, v, saved, out);
    const int positions[3] = {0, len / 2, len - 1};
    for (int p = 0; p < 3; p++) {
        const int t = positions[p];
        cpu()->attn_jvp_at(&shape, q, k, v, saved, t, N, tq, tk, tv, at);
        for (int j = 0; j < N; j++) {
            for (int i = 0; i < 3; i++)
                memset(full[i], 0, (size_t)len * (i ? kvd : qd) * sizeof(sp_real));
            memcpy(full[0] + (size_t)t * qd, tq + (size_t)j * qd, (size_t)qd * sizeof(sp_real));
            memcpy(full[1] + (size_t)t * kvd, tk + (size_t)j * kvd, (size_t)kvd * sizeof(sp_real));
            memcpy(full[2] + (size_t)t * kvd, tv + (size_t)j * kvd, (size_t)kvd * sizeof(sp_real));
            cpu()->attn_jvp(&shape, q, k, v, saved, full[0], full[1], full[2], out);
            assert_below(vec_rel_err((size_t)qd, at + (size_t)j * qd, out + (size_t)t * qd), 1e-12,
                         "%s: tangent %d at position %d", name, j, t);
        }
    }
    sp_real *all[] = {q, k, v, saved, out, tq, tk, tv, at, full[0], full[1], full[2]};
    for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
        free(all[i]);
}

static void test_attention_jvp_at(void **state)
{
    (void)state;
    check_attention_at(attn_shape(1, 9, HEADS, KV_HEADS, HEAD_DIM, 0, 0), 80, "attn_jvp_at");
    check_attention_at(attn_shape(1, 9, HEADS, 1, HEAD_DIM, 1.5, 0), 81, "attn_jvp_at, softcap 1.5");
    check_attention_at(attn_shape(1, 9, HEADS, HEADS, HEAD_DIM, 0, 3), 82, "attn_jvp_at, window 3");
    check_attention_at(attn_shape(1, 70, 2, 1, 5, 2.0, 20), 83, "attn_jvp_at, 70 positions, softcap, window 20");
}

/* The CPU backend works on 64 x 64 tiles of the score matrix: 70 positions make a full, a partial,
 * a diagonal and an off-diagonal tile, checked element by element; 130 positions (three row tiles)
 * with heads of 70 > 64 dims, along directions; then a soft-cap and windows that leave whole key
 * tiles out of the band (20), or cut through them (65). */
static void test_attention_derivatives_tiled(void **state)
{
    (void)state;
    check_attention_derivatives(attn_shape(1, 70, 2, 1, 3, 0, 0), 68, "attention, 70 positions", 1);
    check_attention_derivatives(attn_shape(1, 130, 2, 1, 70, 0, 0), 69, "attention, head_dim 70", 0);
    check_attention_derivatives(attn_shape(1, 70, 2, 1, 3, 2.0, 20), 70, "attention, 70 positions, softcap, window 20",
                                1);
    check_attention_derivatives(attn_shape(1, 130, 2, 1, 5, 2.0, 65), 71, "attention, 130 positions, window 65", 0);
}

/* ---------------------------------------------------------------- embedding */

enum { VOCAB = 11 };

typedef struct {
    int rows, seq_len, dim, with_pos;
    double scale;
    int32_t ids[BATCH * SEQ];
} embed_ctx;

static void embed_apply(void *ctx, sp_real *const *in, sp_real *out)
{
    embed_ctx *c = ctx;
    cpu()->embed_fwd(c->rows, c->seq_len, c->dim, (sp_real)c->scale, c->ids, in[0], c->with_pos ? in[1] : NULL, out);
}

static void embed_vjp(void *ctx, sp_real *const *in, const sp_real *dy, sp_real *const *grad)
{
    (void)in;
    embed_ctx *c = ctx;
    cpu()->embed_bwd(c->rows, c->seq_len, c->dim, (sp_real)c->scale, c->ids, dy, grad[0], c->with_pos ? grad[1] : NULL);
}

/* The embedding is linear in (tok, pos): its JVP is itself applied to the tangents. */
static void embed_jvp(void *ctx, sp_real *const *in, sp_real *const *tangent, sp_real *ty)
{
    (void)in;
    embed_apply(ctx, tangent, ty);
}

static void check_embedding(int with_pos, double scale)
{
    embed_ctx c = {BATCH * SEQ, SEQ, DIM, with_pos, scale, {0}};
    sp_rng rng;
    sp_rng_seed(&rng, 71 + with_pos);
    for (int r = 0; r < c.rows; r++) /* few ids, so some repeat */
        c.ids[r] = (int32_t)sp_rng_below(&rng, 4) * 3;
    size_t n_out = (size_t)c.rows * DIM;
    assert_below(opcmp_embed_fwd(cpu(), BATCH, SEQ, DIM, VOCAB, with_pos, scale, 75 + with_pos), REF_TOL,
                 "embedding forward, pos=%d, scale %g", with_pos, scale);
    fd_map f = {.n_in = with_pos ? 2 : 1,
                .n_jvp_in = with_pos ? 2 : 1,
                .in_len = {VOCAB * DIM, SEQ * DIM},
                .out_len = n_out,
                .ctx = &c,
                .apply = embed_apply,
                .vjp = embed_vjp,
                .jvp = embed_jvp};
    check_derivatives(&f, 73 + with_pos, "embedding");
}

static void test_embedding(void **state)
{
    (void)state;
    check_embedding(1, 1.0);
    check_embedding(0, 1.0);
    check_embedding(1, 2.75);
    check_embedding(0, sqrt(13.0)); /* Gemma's sqrt(d_model) */
}

/* ---------------------------------------------------------------- cross-entropy */

typedef struct {
    int rows, vocab;
    int32_t targets[ROWS];
} xent_ctx;

static void xent_apply(void *ctx, sp_real *const *in, sp_real *out)
{
    xent_ctx *c = ctx;
    cpu()->xent_fwd(c->rows, c->vocab, in[0], c->targets, out);
}

/* One row at a time, so each row's loss can carry its own weight dy[r] as the scale. */
static void xent_vjp(void *ctx, sp_real *const *in, const sp_real *dy, sp_real *const *grad)
{
    xent_ctx *c = ctx;
    for (int r = 0; r < c->rows; r++) {
        size_t at = (size_t)r * c->vocab;
        cpu()->xent_bwd(1, c->vocab, in[0] + at, c->targets + r, dy[r], grad[0] + at);
    }
}

static xent_ctx xent_ctx_make(void)
{
    xent_ctx c = {ROWS, VOCAB, {3, -1, 0, 10, -7, 5, 5}};
    return c;
}

static void test_xent_forward(void **state)
{
    (void)state;
    assert_below(opcmp_xent_fwd(cpu(), ROWS, VOCAB, 1.0, 81), REF_TOL, "cross-entropy forward");
    /* logits far beyond exp's range stay finite through the max shift */
    assert_below(opcmp_xent_fwd(cpu(), ROWS, VOCAB, 1000.0, 82), REF_TOL, "cross-entropy forward, logits x1000");
    xent_ctx c = xent_ctx_make();
    sp_real logits[ROWS * VOCAB] = {0}, losses[ROWS];
    cpu()->xent_fwd(c.rows, c.vocab, logits, c.targets, losses);
    for (int r = 0; r < c.rows; r++) /* uniform logits: log(vocab), or exactly 0 where ignored */
        assert_below(fabs(losses[r] - (c.targets[r] < 0 ? 0 : log(VOCAB))), EXACT_TOL, "uniform row %d", r);
}

static void test_xent_backward(void **state)
{
    (void)state;
    xent_ctx c = xent_ctx_make();
    fd_map f = {.n_in = 1, .in_len = {(size_t)c.rows * c.vocab}, .out_len = ROWS, .ctx = &c,
                .apply = xent_apply, .vjp = xent_vjp};
    check_derivatives(&f, 83, "cross-entropy");

    /* the whole batch in one call equals the rows one by one, and ignored rows get nothing */
    size_t n = (size_t)c.rows * c.vocab;
    sp_rng rng;
    sp_rng_seed(&rng, 84);
    sp_real *logits = vec_random(&rng, n, 1), *whole = vec_random(&rng, n, 1), *by_row = vec_dup(n, whole);
    sp_real *before = vec_dup(n, whole), scale[ROWS];
    for (int r = 0; r < ROWS; r++)
        scale[r] = (sp_real)0.37;
    sp_real *in[] = {logits};
    cpu()->xent_bwd(c.rows, c.vocab, logits, c.targets, (sp_real)0.37, whole);
    xent_vjp(&c, in, scale, &by_row);
    assert_memory_equal(whole, by_row, n * sizeof *whole);
    for (int r = 0; r < ROWS; r++) {
        size_t at = (size_t)r * c.vocab;
        if (c.targets[r] < 0) {
            assert_memory_equal(whole + at, before + at, c.vocab * sizeof *whole);
            continue;
        }
        double added = 0; /* softmax - onehot sums to zero over the row */
        for (int j = 0; j < c.vocab; j++)
            added += (double)whole[at + j] - before[at + j];
        assert_below(fabs(added), EXACT_TOL * 10, "cross-entropy gradient row %d sums to 0", r);
    }
    free(logits);
    free(whole);
    free(by_row);
    free(before);
}

/* ---------------------------------------------------------------- AdamW */

/* Worked by hand with eps = 0 and a constant gradient, where mhat / sqrt(vhat) = sign(g) exactly:
 *   p = 1, g = 0.5, lr = 0.1, b1 = 0.9, b2 = 0.999, wd = 0.01
 *   step 1: m = 0.05, v = 0.00025, mhat = 0.5, vhat = 0.25, p = 1 - 0.1 (1 + 0.01) = 0.899
 *   step 2: m = 0.095, v = 0.00049975, mhat = 0.095/0.19 = 0.5, vhat = 0.00049975/0.001999 = 0.25,
 *           p = 0.899 - 0.1 (1 + 0.00899) = 0.798101
 *   p = -2, g = -0.25: step 1: m = -0.025, v = 0.0000625, p = -2 - 0.1 (-1 - 0.02) = -1.898
 *           step 2: m = -0.0475, v = 0.0001249375, p = -1.898 - 0.1 (-1 - 0.01898) = -1.796102 */
static void test_adamw_hand_computed(void **state)
{
    (void)state;
    sp_real p[2] = {1, -2}, g[2] = {0.5, -0.25}, m[2] = {0, 0}, v[2] = {0, 0};
    cpu()->adamw(2, p, g, m, v, 0.1, 0.9, 0.999, 0.0, 0.01, 1);
    sp_real p1[2] = {0.899, -1.898}, m1[2] = {0.05, -0.025}, v1[2] = {0.00025, 0.0000625};
    assert_below(vec_rel_err(2, p, p1), EXACT_TOL, "adamw step 1 params");
    assert_below(vec_rel_err(2, m, m1), EXACT_TOL, "adamw step 1 first moment");
    assert_below(vec_rel_err(2, v, v1), EXACT_TOL, "adamw step 1 second moment");
    cpu()->adamw(2, p, g, m, v, 0.1, 0.9, 0.999, 0.0, 0.01, 2);
    sp_real p2[2] = {0.798101, -1.796102}, m2[2] = {0.095, -0.0475}, v2[2] = {0.00049975, 0.0001249375};
    assert_below(vec_rel_err(2, p, p2), EXACT_TOL, "adamw step 2 params");
    assert_below(vec_rel_err(2, m, m2), EXACT_TOL, "adamw step 2 first moment");
    assert_below(vec_rel_err(2, v, v2), EXACT_TOL, "adamw step 2 second moment");
}

/* Two steps with different random gradients and eps > 0, against the update rule evaluated
 * element by element here. */
static void test_adamw_two_steps(void **state)
{
    (void)state;
    enum { N = 23 };
    const double lr = 3e-3, b1 = 0.8, b2 = 0.95, eps = 1e-3, wd = 0.1;
    sp_rng rng;
    sp_rng_seed(&rng, 91);
    sp_real *p = vec_random(&rng, N, 1), m[N] = {0}, v[N] = {0};
    double p_ref[N], m_ref[N] = {0}, v_ref[N] = {0};
    for (int i = 0; i < N; i++)
        p_ref[i] = p[i];
    for (long step = 1; step <= 2; step++) {
        sp_real *g = vec_random(&rng, N, 1);
        cpu()->adamw(N, p, g, m, v, lr, b1, b2, eps, wd, step);
        for (int i = 0; i < N; i++) {
            m_ref[i] = b1 * m_ref[i] + (1 - b1) * g[i];
            v_ref[i] = b2 * v_ref[i] + (1 - b2) * g[i] * g[i];
            double mhat = m_ref[i] / (1 - pow(b1, step)), vhat = v_ref[i] / (1 - pow(b2, step));
            p_ref[i] -= lr * (mhat / (sqrt(vhat) + eps) + wd * p_ref[i]);
        }
        free(g);
    }
    for (int i = 0; i < N; i++) {
        assert_below(fabs(p[i] - p_ref[i]), REF_TOL, "adamw param %d after two steps", i);
        assert_below(fabs(m[i] - m_ref[i]), REF_TOL, "adamw m %d after two steps", i);
        assert_below(fabs(v[i] - v_ref[i]), REF_TOL, "adamw v %d after two steps", i);
    }
    free(p);
}

/* ---------------------------------------------------------------- determinism */

/* Ops big enough to run threaded give the same bits with 1 and 3 threads. */
static void test_thread_count_independence(void **state)
{
    (void)state;
    /* 70 positions: two tiles of the CPU attention; a soft-cap and a window take their own paths */
    attn_ctx c = attn_ctx_make(attn_shape(3, 70, 4, 2, 16, 4.0, 50));
    enum { NROWS = 64, NDIM = 301, GM = 300, GN = 70, GK = 130, NOUT = 9 };
    size_t nq = attn_q_len(&c), nkv = attn_kv_len(&c), nx = (size_t)NROWS * NDIM;
    sp_rng rng;
    sp_rng_seed(&rng, 101);
    sp_real *q = vec_random(&rng, nq, 1), *k = vec_random(&rng, nkv, 1), *v = vec_random(&rng, nkv, 1);
    sp_real *dout = vec_random(&rng, nq, 1), *x = vec_random(&rng, nx, 1), *gain = vec_random(&rng, NDIM, 1);
    sp_real *dy = vec_random(&rng, nx, 1), *in[] = {q, k, v};
    sp_real *ga = vec_random(&rng, GM * GK, 1), *gb = vec_random(&rng, GK * GN, 1);
    int32_t ids[NROWS];
    for (int r = 0; r < NROWS; r++)
        ids[r] = (int32_t)sp_rng_below(&rng, 5);
    /* outputs per thread count: attention out, dq, dk, dv, norm dx, dgain, embed dtok, gemm (split
     * into row blocks), gelu backward; and sumsq */
    size_t lens[NOUT] = {nq, nq, nkv, nkv, nx, NDIM, 5 * NDIM, GM * GN, nx};
    sp_real *res[2][NOUT];
    double sums[2];
    int threads[2] = {1, 3}, saved_threads = omp_get_max_threads();
    sp_real rstd[NROWS];
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(threads[t]);
        for (int i = 0; i < NOUT; i++)
            res[t][i] = vec_zeros(lens[i]);
        attn_apply(&c, in, res[t][0]);
        cpu()->attn_bwd(&c.shape, q, k, v, c.saved, dout, res[t][1], res[t][2], res[t][3]);
        cpu()->norm_fwd(SP_NORM_RMSNORM, NROWS, NDIM, 1e-5, x, gain, NULL, res[t][4], NULL, rstd);
        cpu()->norm_bwd(SP_NORM_RMSNORM, NROWS, NDIM, x, gain, NULL, rstd, dy, res[t][4], res[t][5], NULL);
        cpu()->embed_bwd(NROWS, 16, NDIM, 1, ids, dy, res[t][6], NULL);
        cpu()->gemm(0, 0, GM, GN, GK, 1, ga, GK, gb, GN, 0, res[t][7], GN);
        cpu()->act_bwd(SP_ACT_GELU_TANH, nx, x, dy, res[t][8]);
        sums[t] = cpu()->sumsq(nx, x);
    }
    omp_set_num_threads(saved_threads);
    for (int i = 0; i < NOUT; i++) {
        assert_memory_equal(res[0][i], res[1][i], lens[i] * sizeof(sp_real));
        free(res[0][i]);
        free(res[1][i]);
    }
    assert_memory_equal(&sums[0], &sums[1], sizeof sums[0]);
    free(q);
    free(k);
    free(v);
    free(dout);
    free(x);
    free(gain);
    free(dy);
    free(ga);
    free(gb);
    attn_ctx_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_ops),
        cmocka_unit_test(test_cpu_exp),
        cmocka_unit_test(test_gemm_transposes),
        cmocka_unit_test(test_gemm_threaded_blocks),
        cmocka_unit_test(test_gemm_beta_zero_overwrites_nan),
        cmocka_unit_test(test_axpby_and_scale),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_layernorm_forward),
        cmocka_unit_test(test_rmsnorm_forward),
        cmocka_unit_test(test_layernorm_derivatives),
        cmocka_unit_test(test_rmsnorm_derivatives),
        cmocka_unit_test(test_norm_bwd_without_param_grads),
        cmocka_unit_test(test_act),
        cmocka_unit_test(test_glu),
        cmocka_unit_test(test_softcap),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_attention_forward),
        cmocka_unit_test(test_attention_forward_scale_softcap_window),
        cmocka_unit_test(test_attention_window_mask),
        cmocka_unit_test(test_attention_derivatives),
        cmocka_unit_test(test_attention_derivatives_tiled),
        cmocka_unit_test(test_attention_jvp_at),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_xent_forward),
        cmocka_unit_test(test_xent_backward),
        cmocka_unit_test(test_adamw_hand_computed),
        cmocka_unit_test(test_adamw_two_steps),
        cmocka_unit_test(test_thread_count_independence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
