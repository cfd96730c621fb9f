/* The final-norm check (analyzers/final_norm_check.h) and `inspect`'s warning. The quadric fit is
 * exact on RMSNorm and LayerNorm outputs whatever their gain and bias (and with a few all-zero rows),
 * and far from exact on rows of unequal norms like a residual stream's; `inspect` warns in one line,
 * exit code 0 and stdout unchanged, on a dump whose h_L is normalized and h_{L-1} is not, and says
 * nothing on a proper dump, a post-norm one (every layer normalized), one with fewer than 4 d rows
 * and one whose h_L holds NaN. */
#include <cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analyzers/final_norm_check.h"
#include "core/rng.h"
#include "kernels/backend.h"
#include "support/act_dump.h"
#include "support/cli_expect.h"
#include "support/scratch.h"

enum { L = 2, D = 16, SEQ = 16, BATCH = 4, ROWS = BATCH * SEQ }; /* ROWS = 4 D: what the check reads */

typedef enum { RAW, RMSNORM, LAYERNORM, LAYERNORM_NO_BIAS } layer_kind;

/* Rows like a residual stream's: N(0, 1) entries times a per-row scale exp(N(0, 0.5^2)). */
static void raw_rows(sp_rng *rng, int rows, sp_real *x)
{
    for (int r = 0; r < rows; r++) {
        double scale = exp(0.5 * sp_rng_normal(rng));
        for (int i = 0; i < D; i++)
            x[r * D + i] = (sp_real)(scale * sp_rng_normal(rng));
    }
}

/* Rows of the given kind: raw, or raw rows through a norm with gain exp(N(0, 0.5^2)) and (LAYERNORM)
 * bias N(0, 0.5^2), as a trained final norm has. */
static void layer_rows(sp_rng *rng, layer_kind kind, int rows, sp_real *y)
{
    raw_rows(rng, rows, y);
    if (kind == RAW)
        return;
    sp_real gain[D], bias[D], mean[ROWS], rstd[ROWS], x[ROWS * D];
    for (int i = 0; i < D; i++) {
        gain[i] = (sp_real)exp(0.5 * sp_rng_normal(rng));
        bias[i] = (sp_real)(kind == LAYERNORM ? 0.5 * sp_rng_normal(rng) : 0);
    }
    memcpy(x, y, (size_t)rows * D * sizeof *x);
    sp_backend_cpu()->norm_fwd(kind == RMSNORM ? SP_NORM_RMSNORM : SP_NORM_LAYERNORM, rows, D, (sp_real)1e-6, x,
                               gain, bias, y, mean, rstd);
}

/* A dump of batch sequences whose layer l holds rows of kinds[l]; h_L's first value is NaN when poison. */
static void write_dump(const char *path, int batch, const layer_kind kinds[L + 1], int poison)
{
    static sp_real layers[L + 1][ROWS * D];
    sp_real *hidden[L + 1];
    sp_rng rng;
    sp_rng_seed(&rng, 7);
    for (int l = 0; l <= L; l++) {
        layer_rows(&rng, kinds[l], batch * SEQ, layers[l]);
        hidden[l] = layers[l];
    }
    if (poison)
        layers[L][0] = NAN;
    act_dump_spec spec = {.n_layers = L, .d_model = D, .n_streams = 1, .batch = batch, .seq_len = SEQ,
                          .hidden = hidden};
    act_dump_write(path, &spec);
}

static double fit_rho(layer_kind kind, int zero_rows)
{
    sp_real y[ROWS * D];
    sp_rng rng;
    sp_rng_seed(&rng, 3);
    layer_rows(&rng, kind, ROWS, y);
    memset(y, 0, (size_t)zero_rows * D * sizeof *y);
    double rho = -1;
    assert_int_equal(sp_quadric_fit_rho(ROWS, D, y, &rho), SP_OK);
    return rho;
}

static void test_fit(void **state)
{
    (void)state;
    assert_true(fit_rho(RAW, 0) >= SP_FINAL_NORM_RAW);
    assert_true(fit_rho(RMSNORM, 0) <= 1e-5);
    assert_true(fit_rho(LAYERNORM, 0) <= 1e-5);
    assert_true(fit_rho(LAYERNORM_NO_BIAS, 0) <= 1e-5); /* singular normal equations: the ridge's case */
    assert_true(fit_rho(RMSNORM, 3) <= 1e-5);           /* zero rows (padding) do not move the median */
}

/* inspect's stderr on a dump of these layers (exit 0, the usual table on stdout) (free()). */
static char *inspect_stderr(const char *name, int batch, const layer_kind kinds[L + 1], int poison)
{
    char path[4200];
    scratch_path(path, sizeof path, name);
    write_dump(path, batch, kinds, poison);
    char *out = NULL, *err = NULL;
    cli_expect_exit(0, (const char *const[]){"inspect", path, NULL}, &out, &err);
    assert_non_null(strstr(out, "/hidden/0"));
    free(out);
    return err;
}

static void test_inspect_warns(void **state)
{
    (void)state;
    const layer_kind rms_last[L + 1] = {RAW, RAW, RMSNORM}, ln_last[L + 1] = {RAW, RAW, LAYERNORM};
    const char *const needles[] = {"spanprobe inspect: warning: ", "final-rms.h5: /hidden/0 layer 2 looks normalized",
                                   "before the final norm", "output_hidden_states", NULL};
    char *err = inspect_stderr("final-rms.h5", BATCH, rms_last, 0);
    cli_expect_one_line(err, needles);
    free(err);
    err = inspect_stderr("final-ln.h5", BATCH, ln_last, 0);
    cli_expect_one_line(err, (const char *const[]){"final-ln.h5: /hidden/0 layer 2 looks normalized", NULL});
    free(err);

    char path[4200], *out = NULL; /* --json: the warning on stderr, stdout still one JSON document */
    scratch_path(path, sizeof path, "final-rms.h5");
    cli_expect_exit(0, (const char *const[]){"inspect", path, "--json", NULL}, &out, &err);
    cJSON *doc = cJSON_Parse(out);
    assert_non_null(doc);
    cJSON_Delete(doc);
    cli_expect_one_line(err, needles);
    free(out);
    free(err);
}

static void test_inspect_silent(void **state)
{
    (void)state;
    const layer_kind proper[L + 1] = {RAW, RAW, RAW}, post_norm[L + 1] = {LAYERNORM, LAYERNORM, LAYERNORM},
                     rms_last[L + 1] = {RAW, RAW, RMSNORM};
    struct {
        const char *name;
        int batch;
        const layer_kind *kinds;
        int poison;
    } cases[] = {
        {"proper.h5", BATCH, proper, 0},
        {"post-norm.h5", BATCH, post_norm, 0},
        {"few-rows.h5", BATCH - 1, rms_last, 0}, /* 3 D rows: not checked */
        {"nan-last.h5", BATCH, rms_last, 1},     /* inspect counts NaN; the check cannot run */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *err = inspect_stderr(cases[i].name, cases[i].batch, cases[i].kinds, cases[i].poison);
        if (*err)
            fail_msg("%s: expected no warning, found: %s", cases[i].name, err);
        free(err);
    }

    char path[4200];
    scratch_path(path, sizeof path, "few-rows.h5");
    sp_dump *d = NULL;
    sp_final_norm_check check;
    assert_int_equal(sp_dump_open(path, &d), SP_OK);
    assert_int_equal(sp_dump_check_final_norm(d, &check), SP_OK);
    assert_false(check.checked);
    sp_dump_close(d);
    scratch_path(path, sizeof path, "post-norm.h5");
    assert_int_equal(sp_dump_open(path, &d), SP_OK);
    assert_int_equal(sp_dump_check_final_norm(d, &check), SP_OK);
    assert_true(check.checked && check.rho_last <= 1e-5 && check.rho_prev <= 1e-5 && !check.looks_normalized);
    sp_dump_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fit),
        cmocka_unit_test(test_inspect_warns),
        cmocka_unit_test(test_inspect_silent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
