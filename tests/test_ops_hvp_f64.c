/* tests/test_ops_hvp_f64.c: the second-order ops of the CPU backend (float64 build), each the JVP
 * of a backward op: the map from a backward op's inputs (its point and its incoming gradient) to
 * the gradients it produces, differenced along random tangents of all of them (central differences,
 * tests/support/fd_check.h), against the op's *_bwd_jvp.
 *
 * Tolerance FD_TOL 1e-6 with step 1e-6 (normwise; truncation ~1e-12, rounding ~1e-10, while a wrong
 * term shows at 1e-2): as tests/test_ops_f64.c. Attention runs on 9 positions (one tile) with
 * grouped, multi-head and multi-query kv heads, a score scale, soft-cap and windows, and on 130
 * positions (three 64-row tiles, windows that leave whole key tiles out of the band). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "tests/support/assert_err.h"
#include "tests/support/fd_check.h"
#include "tests/support/vec_util.h"

#define FD_STEP 1e-6
#define FD_TOL 1e-6

static const sp_backend *cpu(void) { return sp_backend_cpu(); }

/* The map's JVP against central differences at random inputs and tangents. */
static void check_jvp(const fd_map *f, uint64_t seed, const char *name)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    sp_real *in[FD_MAX_IN], *dir[FD_MAX_IN];
    for (int i = 0; i < f->n_in; i++) {
        in[i] = vec_random(&rng, f->in_len[i], 1);
        dir[i] = vec_random(&rng, f->in_len[i], 1);
    }
    assert_below(fd_jvp_err(f, in, dir, FD_STEP), FD_TOL, "%s: bwd_jvp vs differences of bwd", name);
    for (int i = 0; i < f->n_in; i++) {
        free(in[i]);
        free(dir[i]);
    }
}

/* ---- norms: (x, gain, dy) -> [dx, dgain, dbias] ---- */
typedef struct {
    sp_norm_kind kind;
    int rows, dim;
    sp_real *y, *mean, *rstd;
} norm_ctx;

static void norm_stats(norm_ctx *c, sp_real *const *in)
{
    cpu()->norm_fwd(c->kind, c->rows, c->dim, 1e-5, in[0], in[1], NULL, c->y, c->mean, c->rstd);
}

static void norm_bwd_map(void *ctx, sp_real *const *in, sp_real *out)
{
    norm_ctx *c = ctx;
    const size_t n = (size_t)c->rows * c->dim;
    norm_stats(c, in);
    memset(out, 0, (n + 2 * (size_t)c->dim) * sizeof *out);
    cpu()->norm_bwd(c->kind, c->rows, c->dim, in[0], in[1], c->mean, c->rstd, in[2], out, out + n,
                    c->kind == SP_NORM_LAYERNORM ? out + n + c->dim : NULL);
}

static void norm_bwd_tangent(void *ctx, sp_real *const *in, sp_real *const *t, sp_real *ty)
{
    norm_ctx *c = ctx;
    const size_t n = (size_t)c->rows * c->dim;
    norm_stats(c, in);
    memset(ty, 0, (n + 2 * (size_t)c->dim) * sizeof *ty);
    cpu()->norm_bwd_jvp(c->kind, c->rows, c->dim, in[0], in[1], c->mean, c->rstd, t[0], t[1], in[2], t[2], ty,
                        ty + n, c->kind == SP_NORM_LAYERNORM ? ty + n + c->dim : NULL);
}

static void test_norm_bwd_jvp(void **state)
{
    (void)state;
    for (int kind = SP_NORM_LAYERNORM; kind <= SP_NORM_RMSNORM; kind++) {
        norm_ctx c = {kind, 7, 13, vec_zeros(7 * 13), vec_zeros(7), vec_zeros(7)};
        const size_t n = (size_t)c.rows * c.dim;
        fd_map f = {.n_in = 3, .n_jvp_in = 3, .in_len = {n, (size_t)c.dim, n}, .out_len = n + 2 * (size_t)c.dim,
                    .ctx = &c, .apply = norm_bwd_map, .jvp = norm_bwd_tangent};
        check_jvp(&f, 10 + (uint64_t)kind, kind == SP_NORM_LAYERNORM ? "layernorm" : "rmsnorm");
        free(c.y);
        free(c.mean);
        free(c.rstd);
    }
}

/* ---- activations: (x, dy) -> dx; gated (g, u, dh) -> [dg, du] ---- */
typedef struct {
    sp_act_kind kind;
    size_t n;
} act_ctx;

static void act_bwd_map(void *ctx, sp_real *const *in, sp_real *out)
{
    const act_ctx *c = ctx;
    memset(out, 0, c->n * sizeof *out);
    cpu()->act_bwd(c->kind, c->n, in[0], in[1], out);
}

static void act_bwd_tangent(void *ctx, sp_real *const *in, sp_real *const *t, sp_real *ty)
{
    const act_ctx *c = ctx;
    memset(ty, 0, c->n * sizeof *ty);
    cpu()->act_bwd_jvp(c->kind, c->n, in[0], t[0], in[1], t[1], ty);
}

static void glu_bwd_map(void *ctx, sp_real *const *in, sp_real *out)
{
    const act_ctx *c = ctx;
    memset(out, 0, 2 * c->n * sizeof *out);
    cpu()->glu_bwd(c->kind, c->n, in[0], in[1], in[2], out, out + c->n);
}

static void glu_bwd_tangent(void *ctx, sp_real *const *in, sp_real *const *t, sp_real *ty)
{
    const act_ctx *c = ctx;
    memset(ty, 0, 2 * c->n * sizeof *ty);
    cpu()->glu_bwd_jvp(c->kind, c->n, in[0], in[1], t[0], t[1], in[2], t[2], ty, ty + c->n);
}

static void test_act_bwd_jvp(void **state)
{
    (void)state;
    static const char *const names[] = {"gelu tanh", "gelu erf", "silu"};
    for (int kind = SP_ACT_GELU_TANH; kind <= SP_ACT_SILU; kind++) {
        act_ctx c = {kind, 40};
        fd_map act = {.n_in = 2, .n_jvp_in = 2, .in_len = {c.n, c.n}, .out_len = c.n, .ctx = &c,
                      .apply = act_bwd_map, .jvp = act_bwd_tangent};
        check_jvp(&act, 20 + (uint64_t)kind, names[kind]);
        fd_map glu = {.n_in = 3, .n_jvp_in = 3, .in_len = {c.n, c.n, c.n}, .out_len = 2 * c.n, .ctx = &c,
                      .apply = glu_bwd_map, .jvp = glu_bwd_tangent};
        check_jvp(&glu, 30 + (uint64_t)kind, names[kind]);
    }
}

/* ---- soft-cap: (x, dy) -> S'(cap tanh(x / cap)) dy ---- */
typedef struct {
    size_t n;
    double cap;
    sp_real *y, *ty;
} softcap_ctx;

static void softcap_bwd_map(void *ctx, sp_real *const *in, sp_real *out)
{
    softcap_ctx *c = ctx;
    cpu()->softcap_fwd(c->n, c->cap, in[0], c->y);
    cpu()->softcap_jvp(c->n, c->cap, c->y, in[1], out);
}

static void softcap_bwd_tangent(void *ctx, sp_real *const *in, sp_real *const *t, sp_real *ty)
{
    softcap_ctx *c = ctx;
    cpu()->softcap_fwd(c->n, c->cap, in[0], c->y);
    cpu()->softcap_jvp(c->n, c->cap, c->y, t[0], c->ty); /* the capped values' tangent */
    cpu()->softcap_bwd_jvp(c->n, c->cap, c->y, c->ty, in[1], t[1], ty);
}

static void test_softcap_bwd_jvp(void **state)
{
    (void)state;
    softcap_ctx c = {40, 0.8, vec_zeros(40), vec_zeros(40)}; /* inputs of scale 1: the cap bites */
    fd_map f = {.n_in = 2, .n_jvp_in = 2, .in_len = {c.n, c.n}, .out_len = c.n, .ctx = &c,
                .apply = softcap_bwd_map, .jvp = softcap_bwd_tangent};
    check_jvp(&f, 40, "softcap");
    free(c.y);
    free(c.ty);
}

/* ---- cross-entropy: logits -> scale (softmax - onehot), some targets ignored ---- */
enum { XENT_ROWS = 5, XENT_VOCAB = 11 };
static const int32_t xent_targets[XENT_ROWS] = {3, -1, 0, 10, 7};

static void xent_bwd_map(void *ctx, sp_real *const *in, sp_real *out)
{
    (void)ctx;
    memset(out, 0, XENT_ROWS * XENT_VOCAB * sizeof *out);
    cpu()->xent_bwd(XENT_ROWS, XENT_VOCAB, in[0], xent_targets, 0.3, out);
}

static void xent_bwd_tangent(void *ctx, sp_real *const *in, sp_real *const *t, sp_real *ty)
{
    (void)ctx;
    memset(ty, 0, XENT_ROWS * XENT_VOCAB * sizeof *ty);
    cpu()->xent_bwd_jvp(XENT_ROWS, XENT_VOCAB, in[0], xent_targets, 0.3, t[0], ty);
}

static void test_xent_bwd_jvp(void **state)
{
    (void)state;
    fd_map f = {.n_in = 1, .n_jvp_in = 1, .in_len = {XENT_ROWS * XENT_VOCAB}, .out_len = XENT_ROWS * XENT_VOCAB,
                .apply = xent_bwd_map, .jvp = xent_bwd_tangent};
    check_jvp(&f, 50, "xent");
}

/* ---- attention: (q, k, v, dout) -> [dq, dk, dv] ---- */
typedef struct {
    sp_attn_shape shape;
    size_t nq, nkv;
    sp_real *saved, *out;
} attn_ctx;

static void attn_fwd(attn_ctx *c, sp_real *const *in)
{
    cpu()->attn_fwd(&c->shape, in[0], in[1], in[2], c->saved, c->out);
}

static void attn_bwd_map(void *ctx, sp_real *const *in, sp_real *out)
{
    attn_ctx *c = ctx;
    attn_fwd(c, in);
    memset(out, 0, (c->nq + 2 * c->nkv) * sizeof *out);
    cpu()->attn_bwd(&c->shape, in[0], in[1], in[2], c->saved, in[3], out, out + c->nq, out + c->nq + c->nkv);
}

static void attn_bwd_tangent(void *ctx, sp_real *const *in, sp_real *const *t, sp_real *ty)
{
    attn_ctx *c = ctx;
    attn_fwd(c, in);
    memset(ty, 0, (c->nq + 2 * c->nkv) * sizeof *ty);
    cpu()->attn_bwd_jvp(&c->shape, in[0], in[1], in[2], c->saved, t[0], t[1], t[2], in[3], t[3], ty, ty + c->nq,
                        ty + c->nq + c->nkv);
}

static void check_attention(sp_attn_shape shape, uint64_t seed, const char *name)
{
    const size_t rows = (size_t)shape.batch * shape.seq_len;
    attn_ctx c = {shape, rows * shape.n_heads * shape.head_dim, rows * shape.n_kv_heads * shape.head_dim,
                  vec_zeros(cpu()->attn_saved_elems(&shape)), vec_zeros(rows * shape.n_heads * shape.head_dim)};
    fd_map f = {.n_in = 4, .n_jvp_in = 4, .in_len = {c.nq, c.nkv, c.nkv, c.nq}, .out_len = c.nq + 2 * c.nkv,
                .ctx = &c, .apply = attn_bwd_map, .jvp = attn_bwd_tangent};
    check_jvp(&f, seed, name);
    free(c.saved);
    free(c.out);
}

static void test_attn_bwd_jvp(void **state)
{
    (void)state;
    const int kv_heads[] = {2, 4, 1}; /* grouped query, multi-head, multi-query */
    for (int i = 0; i < 3; i++)
        check_attention((sp_attn_shape){2, 9, 4, kv_heads[i], 4, 0.5, 0, 0}, 60 + (uint64_t)i, "causal");
    check_attention((sp_attn_shape){2, 9, 4, 2, 4, 0.9, 1.5, 0}, 63, "softcap 1.5");
    check_attention((sp_attn_shape){2, 9, 4, 2, 4, 0.9, 1.5, 3}, 64, "softcap 1.5, window 3");
    check_attention((sp_attn_shape){1, 130, 2, 1, 5, 0.4, 0, 0}, 65, "130 positions");
    check_attention((sp_attn_shape){1, 130, 2, 1, 5, 0.4, 2.0, 65}, 66, "130 positions, softcap 2, window 65");
    check_attention((sp_attn_shape){1, 130, 2, 2, 5, 0.4, 0, 20}, 67, "130 positions, window 20");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_norm_bwd_jvp),    cmocka_unit_test(test_act_bwd_jvp),
        cmocka_unit_test(test_softcap_bwd_jvp), cmocka_unit_test(test_xent_bwd_jvp),
        cmocka_unit_test(test_attn_bwd_jvp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
