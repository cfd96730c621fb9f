/* The model's analytic gradients against central finite differences of its loss, in double, for
 * every variant x {layernorm, rmsnorm} x {gelu, swiglu} x {learned, rope} (88 configurations), and
 * for the tiny configs of the pretrained architectures (tests/support/model_fixture.h: biases,
 * head_dim != d_model / n_heads, GELU erf, GEGLU, q/k norms, partial, scaled and local RoPE,
 * attention scale, soft-caps, sliding windows, embedding scale), each tied and untied.
 *
 * Each configuration is a tiny model (tests/support/model_fixture.h) with init_std 0.3 and norm
 * gains/biases jittered by 0.3, so no parameter sits at a symmetric point; half of the configs tie
 * the head to the embedding, some flip the variant's final-norm default, and peri with RMSNorm
 * turns its embedding norm on, so every path of the model is differentiated somewhere.
 *
 * Tolerances (central differences, step h = 1e-5, float64):
 * - directional derivative along a random direction of the whole parameter vector: relative
 *   error < 1e-6 (truncation ~h^2 = 1e-10 times third-derivative ratios, roundoff ~1e-16/h);
 * - per element (3 random elements of every tensor): |fd - g| < 1e-6 * max(|g|, 1e-3 max|grad|)
 *   where max|grad| is over the whole model: an element whose gradient is a thousandth of the
 *   largest one is judged against that floor, since roundoff in the loss (~1e-15) over 2h leaves
 *   ~1e-10 absolute error in any finite difference;
 * - the embedding-output gradient must equal the rows of the embed/tok gradient bit for bit
 *   (distinct token ids, untied head: each row receives exactly one contribution added to zero),
 *   and its directional derivative along random changes of the used embedding rows must match
 *   the finite difference to 1e-6;
 * - sp_model_backward_weighted: the batch's gradient as the sum of its two sequences' gradients,
 *   each weighted by its share of the counted targets (the first accumulate replacing what the
 *   gradients held, the second adding), equals the one-pass gradient to 1e-12 of its largest entry:
 *   every parameter-gradient op adds into its gradient. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/support/config_tests.h"
#include "tests/support/vec_util.h"

#define BATCH 2
#define SEQ 5
#define ROWS (BATCH * SEQ)
#define FD_STEP 1e-4
#define TOL 1e-6
#define ELEMENTS_PER_TENSOR 3

typedef struct {
    sp_model *m;
    int n_params;
    int32_t tokens[ROWS], targets[ROWS];
    sp_real **p0;   /* host copies of the parameters at the check point */
    sp_real **grad; /* host copies of the analytic gradients */
} problem;

static double loss_of(problem *p)
{
    double loss = 0;
    assert_int_equal(sp_model_forward(p->m, p->tokens, p->targets, BATCH, SEQ, &loss), SP_OK);
    return loss;
}

/* Sets every parameter to p0 + step * dir (dir may have NULL tensors: left at p0). */
static void set_shifted(problem *p, sp_real *const *dir, double step)
{
    for (int i = 0; i < p->n_params; i++) {
        size_t n = sp_param_numel(sp_model_param_spec(p->m, i));
        sp_real *x = vec_dup(n, p->p0[i]);
        for (size_t j = 0; dir[i] && j < n; j++)
            x[j] += (sp_real)(step * dir[i][j]);
        sp_model_set_param(p->m, i, x);
        free(x);
    }
}

static double loss_shifted(problem *p, sp_real *const *dir, double step)
{
    set_shifted(p, dir, step);
    return loss_of(p);
}

/* Five-point central difference (error O(h^4)) of the loss along dir; parameters end at p0. */
static double central_difference(problem *p, sp_real *const *dir)
{
    const double h = FD_STEP;
    double d1 = loss_shifted(p, dir, h) - loss_shifted(p, dir, -h);
    double d2 = loss_shifted(p, dir, 2 * h) - loss_shifted(p, dir, -2 * h);
    set_shifted(p, dir, 0);
    return (8 * d1 - d2) / (12 * h);
}

static void setup(problem *p, const sp_config *cfg, uint64_t seed)
{
    p->m = fixture_model(cfg, seed, 0.3);
    p->n_params = sp_model_n_params(p->m);
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    /* distinct token ids (ROWS <= vocab): a Fisher-Yates prefix of 0..V-1 */
    int32_t perm[64];
    for (int i = 0; i < cfg->vocab_size; i++)
        perm[i] = i;
    for (int i = 0; i < ROWS; i++) {
        int j = i + (int)sp_rng_below(&rng, (uint64_t)(cfg->vocab_size - i));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        p->tokens[i] = perm[i];
    }
    fixture_tokens(&rng, ROWS, cfg->vocab_size, p->targets);
    p->targets[3] = -1; /* an ignored target */
    p->p0 = calloc((size_t)p->n_params, sizeof *p->p0);
    p->grad = calloc((size_t)p->n_params, sizeof *p->grad);
    assert_non_null(p->p0);
    assert_non_null(p->grad);
    loss_of(p);
    assert_int_equal(sp_model_backward(p->m), SP_OK);
    for (int i = 0; i < p->n_params; i++) {
        size_t n = sp_param_numel(sp_model_param_spec(p->m, i));
        p->p0[i] = vec_zeros(n);
        sp_model_get_param(p->m, i, p->p0[i]);
        p->grad[i] = fixture_download(p->m, sp_model_grad(p->m, i), n);
    }
}

static void teardown(problem *p)
{
    for (int i = 0; i < p->n_params; i++) {
        free(p->p0[i]);
        free(p->grad[i]);
    }
    free(p->p0);
    free(p->grad);
    sp_model_free(p->m);
}

static void check_directional(problem *p, sp_rng *rng, const char *what)
{
    sp_real **dir = calloc((size_t)p->n_params, sizeof *dir);
    assert_non_null(dir);
    /* a unit direction, so the step along it is FD_STEP whatever the parameter count */
    const double scale = 1.0 / sqrt((double)sp_model_n_weights(p->m));
    double analytic = 0;
    for (int i = 0; i < p->n_params; i++) {
        size_t n = sp_param_numel(sp_model_param_spec(p->m, i));
        dir[i] = vec_zeros(n);
        vec_fill_normal(rng, n, dir[i], scale);
        analytic += vec_dot(n, dir[i], p->grad[i]);
    }
    double fd = central_difference(p, dir);
    double err = fabs(fd - analytic) / fmax(fabs(analytic), 1e-12);
    if (getenv("SP_TEST_VERBOSE"))
        print_message("%s: directional rel err %.3g\n", what, err);
    if (err >= TOL)
        print_error("%s: directional derivative %.12g, finite difference %.12g (rel err %.3g)\n", what, analytic, fd,
                    err);
    assert_true(err < TOL);
    for (int i = 0; i < p->n_params; i++)
        free(dir[i]);
    free(dir);
}

static void check_elements(problem *p, sp_rng *rng, const char *what)
{
    double max_grad = 0;
    for (int i = 0; i < p->n_params; i++)
        max_grad = fmax(max_grad, vec_max_abs(sp_param_numel(sp_model_param_spec(p->m, i)), p->grad[i]));
    assert_true(max_grad > 0);
    sp_real **dir = calloc((size_t)p->n_params, sizeof *dir);
    assert_non_null(dir);
    for (int i = 0; i < p->n_params; i++) {
        const sp_param_spec *s = sp_model_param_spec(p->m, i);
        size_t n = sp_param_numel(s);
        dir[i] = vec_zeros(n);
        for (int e = 0; e < ELEMENTS_PER_TENSOR; e++) {
            size_t j = (size_t)sp_rng_below(rng, n);
            dir[i][j] = 1;
            double fd = central_difference(p, dir);
            dir[i][j] = 0;
            double g = p->grad[i][j];
            double err = fabs(fd - g) / fmax(fabs(g), 1e-3 * max_grad);
            if (getenv("SP_TEST_VERBOSE") && err > 1e-8)
                print_message("%s: %s[%zu] rel err %.3g\n", what, s->name, j, err);
            if (err >= TOL)
                print_error("%s: %s[%zu]: gradient %.12g, finite difference %.12g (rel err %.3g)\n", what, s->name, j,
                            g, fd, err);
            assert_true(err < TOL);
        }
        free(dir[i]);
        dir[i] = NULL;
    }
    free(dir);
}

/* The gradient w.r.t. the embedding output against the embed/tok gradient and finite differences.
 * With an embedding scale s, e = s tok[id]: the embed/tok rows are s times the embedding gradient
 * (one contribution each, so exactly the rounded product), and a change of the rows moves e by s
 * times it. */
static void check_embed_grad(problem *p, sp_rng *rng, const char *what)
{
    const sp_config *cfg = sp_model_config(p->m);
    const int d = cfg->d_model, tok = sp_model_find_param(p->m, "embed/tok");
    const sp_real scale = (sp_real)cfg->embed_scale;
    /* the last forward pass ran at a shifted point; go back to p0 for the analytic gradient */
    loss_of(p);
    assert_int_equal(sp_model_backward(p->m), SP_OK);
    assert_non_null(sp_model_embed_grad(p->m));
    sp_real *de = fixture_download(p->m, sp_model_embed_grad(p->m), (size_t)ROWS * d);
    const sp_real *dtok = p->grad[tok];
    int used[64] = {0};
    for (int r = 0; r < ROWS; r++) {
        used[p->tokens[r]] = 1;
        for (int c = 0; c < d; c++)
            assert_true(scale * de[r * d + c] == dtok[p->tokens[r] * d + c]);
    }
    for (int v = 0; v < cfg->vocab_size; v++)
        for (int c = 0; c < d && !used[v]; c++)
            assert_true(dtok[v * d + c] == 0);

    /* moving the used embedding rows moves the block-0 input (before embed_norm) row for row */
    sp_real **dir = calloc((size_t)p->n_params, sizeof *dir);
    assert_non_null(dir);
    dir[tok] = vec_zeros((size_t)cfg->vocab_size * d);
    double analytic = 0;
    for (int r = 0; r < ROWS; r++) {
        vec_fill_normal(rng, (size_t)d, dir[tok] + p->tokens[r] * d, 1.0);
        analytic += scale * vec_dot((size_t)d, dir[tok] + p->tokens[r] * d, de + r * d);
    }
    double fd = central_difference(p, dir);
    double err = fabs(fd - analytic) / fmax(fabs(analytic), 1e-12);
    if (err >= TOL)
        print_error("%s: embedding gradient along a direction %.12g, finite difference %.12g\n", what, analytic, fd);
    assert_true(err < TOL);
    free(dir[tok]);
    free(dir);
    free(de);
}

/* Sequence by sequence with sp_model_backward_weighted against the one-pass gradient p->grad. */
static void check_weighted_sum(problem *p, const char *what)
{
    double count[BATCH] = {0}, total = 0;
    for (int r = 0; r < ROWS; r++)
        count[r / SEQ] += p->targets[r] >= 0;
    for (int b = 0; b < BATCH; b++)
        total += count[b];
    for (int b = 0; b < BATCH; b++) {
        assert_int_equal(sp_model_forward(p->m, p->tokens + b * SEQ, p->targets + b * SEQ, 1, SEQ, NULL), SP_OK);
        assert_int_equal(sp_model_backward_weighted(p->m, count[b] / total, b > 0), SP_OK);
    }
    double max = 0;
    for (int i = 0; i < p->n_params; i++)
        for (size_t j = 0; j < sp_param_numel(sp_model_param_spec(p->m, i)); j++)
            max = fmax(max, fabs(p->grad[i][j]));
    for (int i = 0; i < p->n_params; i++) {
        size_t n = sp_param_numel(sp_model_param_spec(p->m, i));
        sp_real *g = fixture_download(p->m, sp_model_grad(p->m, i), n);
        for (size_t j = 0; j < n; j++)
            if (fabs(g[j] - p->grad[i][j]) > 1e-12 * max)
                fail_msg("%s: %s[%zu]: weighted passes %.17g, one pass %.17g", what,
                         sp_model_param_spec(p->m, i)->name, j, (double)g[j], (double)p->grad[i][j]);
        free(g);
    }
}

static void check_config(const sp_config *cfg, uint64_t seed, const char *what)
{
    problem p = {0};
    setup(&p, cfg, 1000u + seed);
    sp_rng rng;
    sp_rng_seed(&rng, 7u + seed);
    check_directional(&p, &rng, what);
    check_elements(&p, &rng, what);
    if (!cfg->tie_embeddings)
        check_embed_grad(&p, &rng, what);
    check_weighted_sum(&p, what);
    teardown(&p);
}

static void check_variant(void **state) { config_grad_combos((int)(intptr_t)*state, check_config); }

/* The pretrained architectures' configs, tied as they come and untied (so the embedding gradient is
 * checked for each too). */
static void check_pretrained(void **state)
{
    const int i = (int)(intptr_t)*state;
    sp_config cfg;
    const char *name = fixture_pretrained_config(i, &cfg);
    for (int untie = 0; untie < 1 + cfg.tie_embeddings; untie++) {
        char what[96];
        cfg.tie_embeddings = !untie && cfg.tie_embeddings;
        snprintf(what, sizeof what, "%s%s", name, cfg.tie_embeddings ? "/tied" : "");
        check_config(&cfg, (uint64_t)(200 + 2 * i + untie), what);
    }
}

int main(void)
{
    struct CMUnitTest tests[CONFIG_N_TESTS];
    config_tests(tests, check_variant, check_pretrained);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
