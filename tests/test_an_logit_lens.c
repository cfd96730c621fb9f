/* logit_lens and token_uniformity through the command line (float32 build): `analyze --metrics
 * logit_lens,token_uniformity` on a checkpoint from `init` (siamese, so the lens decodes two streams
 * and token_uniformity writes both), with the identities that hold in any precision (the last layer
 * is the model's output: KL 0, agreement 1), the arrays' shapes and units; on an activation dump from
 * `dump`, token_uniformity runs and logit_lens is recorded as skipped (it needs the model); `plot`
 * draws both figures when gnuplot is installed. The numbers themselves are checked against fp64
 * references in test_an_logit_lens_f64.c and test_an_token_uniformity.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/analyze_cli.h"
#include "support/cli_expect.h"
#include "support/report_view.h"
#include "support/scratch.h"

enum { L = 3, SEQ = 16, N_TOKENS = 96 };

static void expect_layers(const report_view *v, const char *analyzer, const char *name, const char *units)
{
    sp_report_array a;
    assert_int_equal(sp_report_read_array(v->reader, analyzer, name, &a), SP_OK);
    assert_int_equal(a.rank, 1);
    assert_int_equal(a.shape[0], L + 1);
    assert_string_equal(a.units, units);
    assert_string_equal(a.shape_desc, "[layer]");
    for (int l = 0; l <= L; l++)
        assert_true(isfinite(a.data[l]));
    sp_report_array_free(&a);
}

static void test_checkpoint_and_dump(void **state)
{
    (void)state;
    char ckpt[4200], tokens[4200], report[4200], dump[4200], dump_report[4200];
    analyze_cli_init("lens_ckpt.h5",
                     (const char *[]){"--variant", "siamese", "--n-layers", "3", "--d-model", "16", "--n-heads", "2",
                                      "--n-kv-heads", "2", "--d-ff", "32", "--max-seq-len", "16", NULL},
                     ckpt, sizeof ckpt);
    analyze_cli_tokens("lens_tokens.txt", N_TOKENS + 1, 256, 5, tokens, sizeof tokens);
    analyze_cli_run(NULL, ckpt, tokens, "cpu",
                    (const char *[]){"--metrics", "logit_lens,token_uniformity", "--seq", "16", "--batch", "2", NULL},
                    "lens_report.h5", report, sizeof report);
    report_view v;
    report_view_open(&v, report);
    expect_layers(&v, "logit_lens", "loss", "nats");
    expect_layers(&v, "logit_lens", "accuracy", "1");
    expect_layers(&v, "logit_lens", "kl", "nats");
    expect_layers(&v, "logit_lens", "agreement", "1");
    double *kl = report_view_array(&v, "logit_lens", "kl", NULL, NULL);
    double *agreement = report_view_array(&v, "logit_lens", "agreement", NULL, NULL);
    assert_true(kl[L] == 0);
    assert_true(agreement[L] == 1);
    free(kl);
    free(agreement);
    assert_int_equal((int)report_view_scalar(&v, "logit_lens", "tokens"), N_TOKENS);
    expect_layers(&v, "token_uniformity", "mean_pairwise_cosine", "cosine");
    expect_layers(&v, "token_uniformity", "relative_residual", "1");
    expect_layers(&v, "token_uniformity", "mean_pairwise_cosine_y", "cosine");
    expect_layers(&v, "token_uniformity", "relative_residual_y", "1");
    assert_int_equal((int)report_view_scalar(&v, "token_uniformity", "sequences"), N_TOKENS / SEQ);
    report_view_close(&v);

    scratch_path(dump, sizeof dump, "lens_dump.h5");
    cli_expect_exit(0, (const char *[]){"dump", ckpt, "--tokens", tokens, "--seq", "16", "--out", dump, "--device",
                                        "cpu", NULL},
                    NULL, NULL);
    scratch_path(dump_report, sizeof dump_report, "lens_dump_report.h5");
    cli_expect_exit(0, (const char *[]){"analyze", dump, "--metrics", "logit_lens,token_uniformity", "--quiet",
                                        "--device", "cpu", "--out", dump_report, NULL},
                    NULL, NULL);
    report_view_open(&v, dump_report);
    assert_non_null(strstr(report_view_skipped(&v, "logit_lens"), "needs the model"));
    assert_null(report_view_skipped(&v, "token_uniformity"));
    /* the dump holds the checkpoint's activations: the same statistics */
    report_view ckpt_view;
    report_view_open(&ckpt_view, report);
    for (int k = 0; k < 2; k++) {
        const char *names[2][2] = {{"mean_pairwise_cosine", "relative_residual"},
                                   {"mean_pairwise_cosine_y", "relative_residual_y"}};
        for (int i = 0; i < 2; i++) {
            double *a = report_view_array(&v, "token_uniformity", names[k][i], NULL, NULL);
            double *b = report_view_array(&ckpt_view, "token_uniformity", names[k][i], NULL, NULL);
            for (int l = 0; l <= L; l++)
                assert_true(fabs(a[l] - b[l]) <= 1e-6);
            free(a);
            free(b);
        }
    }
    report_view_close(&ckpt_view);
    report_view_close(&v);

    char figures[4200];
    scratch_path(figures, sizeof figures, "lens_figures");
    char *out = NULL, *err = NULL;
    int rc = scratch_run_cli((const char *[]){"plot", report, "--out", figures, NULL}, &out, &err);
    if (!(rc != 0 && err && strstr(err, "gnuplot: not found on the PATH"))) { /* else gnuplot is not installed */
        assert_int_equal(rc, 0);
        for (int i = 0; i < 2; i++) {
            char png[4300];
            snprintf(png, sizeof png, "%s/%s.png", figures, i ? "token-uniformity" : "logit-lens");
            assert_true(scratch_file_exists(png));
        }
    }
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_and_dump),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
