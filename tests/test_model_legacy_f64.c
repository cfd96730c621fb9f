/* A model whose pretrained-architecture options (head_dim, biases, q/k norms, RoPE scaling, soft-caps,
 * sliding windows, embedding scale, ...) are all at their defaults computes what spanprobe computed
 * before those options existed: its logits against values recorded with the code of commit af322fb
 * (the last one without them), float64, for every variant in four option combinations and one
 * longer configuration whose attention spans two 64-row tiles.
 *
 * Each configuration's logits are recorded as the SHA-256 of their bytes (bit for bit) and a
 * weighted sum (to 1e-13 relative). The bits depend on the CPU's kernels (OpenBLAS picks a dgemm
 * kernel per CPU, and the softmax sum is added in vector-width order) and on the build (the
 * sanitizer build vectorizes differently), so the bitwise check runs where the machine matches the
 * recording one (the same OpenBLAS core and AVX-512 support) in the normal build; other machines and
 * builds check the weighted sum, which a changed computation moves far beyond 1e-13.
 * SP_RECORD_LEGACY=1 prints the table instead of checking it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <cmocka.h>

#include "core/sha256.h"
#include "tests/support/model_fixture.h"

#define N_COMBOS 4
#define RECORDED_CORE "Zen"
#define RECORDED_AVX512 0

typedef struct {
    const char *name;
    const char *sha256_prefix; /* first 16 hex digits of the SHA-256 of the logits' bytes */
    double weighted_sum;       /* sum_i logits[i] (1 + (i % 7) / 7) */
} recorded;

static const recorded table[] = {
#include "tests/data/legacy_logits.inc"
};

typedef struct {
    char name[96];
    sp_config cfg;
    int batch, seq;
} legacy_case;

/* Case i: variant i / N_COMBOS in combination i % N_COMBOS; the last case is the long one. */
static int n_cases(void) { return SP_N_VARIANTS * N_COMBOS + 1; }

static void make_case(int i, legacy_case *c)
{
    static const int combos[N_COMBOS][3] = {{SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED},
                                            {SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE},
                                            {SP_NORM_LAYERNORM, SP_FFN_SWIGLU, SP_POS_ROPE},
                                            {SP_NORM_RMSNORM, SP_FFN_GELU, SP_POS_LEARNED}};
    c->batch = 2;
    c->seq = 5;
    if (i < SP_N_VARIANTS * N_COMBOS) {
        const int v = i / N_COMBOS, *o = combos[i % N_COMBOS];
        fixture_tiny_config(&c->cfg, v, o[0], o[1], o[2]);
        c->cfg.tie_embeddings = i % 2;
        c->cfg.embed_norm = v == SP_VARIANT_PERI && i % N_COMBOS == 3;
        snprintf(c->name, sizeof c->name, "%s/%s/%s/%s", sp_variant_names[v], sp_norm_names[o[0]], sp_ffn_names[o[1]],
                 sp_pos_names[o[2]]);
        return;
    }
    fixture_tiny_config(&c->cfg, SP_VARIANT_PRE, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE);
    c->cfg.d_model = 32;
    c->cfg.n_heads = 4;
    c->cfg.n_kv_heads = 2;
    c->cfg.d_ff = 40;
    c->cfg.n_layers = 2;
    c->cfg.max_seq_len = 80;
    c->batch = 1;
    c->seq = 70;
    snprintf(c->name, sizeof c->name, "pre/rmsnorm/swiglu/rope, 70 positions");
}

/* The logits of case c, host copy of [batch * seq, vocab]. */
static sp_real *case_logits(const legacy_case *c, size_t *n)
{
    sp_model *m = fixture_model(&c->cfg, 4242, 0.3);
    sp_rng rng;
    sp_rng_seed(&rng, 99);
    const int rows = c->batch * c->seq;
    int32_t *tokens = malloc((size_t)rows * sizeof *tokens);
    assert_non_null(tokens);
    fixture_tokens(&rng, rows, c->cfg.vocab_size, tokens);
    assert_int_equal(sp_model_forward(m, tokens, NULL, c->batch, c->seq, NULL), SP_OK);
    *n = (size_t)rows * (size_t)c->cfg.vocab_size;
    sp_real *logits = fixture_download(m, sp_model_logits(m), *n);
    free(tokens);
    sp_model_free(m);
    return logits;
}

static void digest_prefix(size_t n, const sp_real *x, char out[17])
{
    sp_sha256 h;
    unsigned char digest[32];
    char hex[65];
    assert_int_equal(sp_sha256_init(&h), SP_OK);
    sp_sha256_update(&h, x, n * sizeof *x);
    sp_sha256_final(&h, digest);
    sp_sha256_hex(digest, hex);
    memcpy(out, hex, 16);
    out[16] = '\0';
}

static double weighted_sum(size_t n, const sp_real *x)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * (1 + (double)(i % 7) / 7);
    return s;
}

/* The recording machine, and the recording build: sanitizers change how loops vectorize. */
static int same_machine(void)
{
#ifdef __SANITIZE_ADDRESS__
    return 0;
#else
    return strcmp(openblas_get_corename(), RECORDED_CORE) == 0 &&
           (__builtin_cpu_supports("avx512f") != 0) == RECORDED_AVX512;
#endif
}

static void test_default_options_match_recorded_logits(void **state)
{
    (void)state;
    const int record = getenv("SP_RECORD_LEGACY") != NULL, bitwise = same_machine();
    if (record)
        printf("/* recorded on OpenBLAS core %s, avx512f %d */\n", openblas_get_corename(),
               __builtin_cpu_supports("avx512f") != 0);
    else
        assert_int_equal((int)SP_ARRAY_LEN(table), n_cases());
    for (int i = 0; i < n_cases(); i++) {
        legacy_case c;
        make_case(i, &c);
        size_t n;
        sp_real *logits = case_logits(&c, &n);
        char prefix[17];
        digest_prefix(n, logits, prefix);
        const double sum = weighted_sum(n, logits);
        free(logits);
        if (record) {
            printf("{\"%s\", \"%s\", %a},\n", c.name, prefix, sum);
            continue;
        }
        assert_string_equal(table[i].name, c.name);
        const double rel = fabs(sum - table[i].weighted_sum) / fabs(table[i].weighted_sum);
        if (rel >= 1e-13)
            print_error("%s: weighted logit sum %.17g, recorded %.17g (rel %.3g)\n", c.name, sum,
                        table[i].weighted_sum, rel);
        assert_true(rel < 1e-13);
        if (bitwise)
            assert_string_equal(prefix, table[i].sha256_prefix);
    }
    if (!record && !bitwise)
        print_message("legacy logits: another CPU or build than the recording one; checked to 1e-13, not bit for bit\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_default_options_match_recorded_logits)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
