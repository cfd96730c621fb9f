/* --skip-positions N (issue 16 item 6): every analyzer that pools tokens leaves out the first N
 * positions of each sequence. The check is an identity: a dump analyzed with --skip-positions N
 * gives the same report, array for array, as the dump that holds only positions N.. of each
 * sequence analyzed without it (similarity, CKA, growth, the hidden, FFN and presum statistics,
 * token uniformity), except that growth's positions count from the start of the whole sequence;
 * the option is recorded in the report; without it sinks planted at position 0 dominate every
 * layer (growth's summary says so), with it none does; and a value that leaves nothing is refused. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analyzers/driver.h"
#include "core/rng.h"
#include "io/report.h"
#include "support/act_dump.h"
#include "support/assert_err.h"
#include "support/report_view.h"
#include "support/scratch.h"
#include "support/vec_util.h"

enum { L = 3, NH = L + 1, D = 8, DFF = 12, BATCH = 4, SEQ = 8, SKIP = 3, KEPT = SEQ - SKIP };
static const char METRICS[] = "similarity,cka,growth,hidden_spectra,ffn_spectra,presums,token_uniformity";

/* The rows of positions SKIP.. of every sequence of x [BATCH * SEQ, width] (malloc'd). */
static sp_real *kept_rows(const sp_real *x, int width)
{
    sp_real *out = vec_zeros((size_t)BATCH * KEPT * width);
    for (int s = 0; s < BATCH; s++)
        memcpy(out + (size_t)s * KEPT * width, x + ((size_t)s * SEQ + SKIP) * width, (size_t)KEPT * width * sizeof *x);
    return out;
}

static void analyze(const char *dump, const char *report, int skip, int batch)
{
    sp_analyze_options o;
    sp_analyze_options_defaults(&o);
    snprintf(o.metrics, sizeof o.metrics, "%s", METRICS);
    o.batch = batch;
    o.n_tokens = (int64_t)BATCH * SEQ;
    o.skip_positions = skip;
    act_dump_analyze(dump, report, &o);
}

/* Every array of every analyzer of `got` equal to `want`'s within 1e-6 relative, growth's positions
 * shifted by SKIP. */
static void compare_reports(const char *got_path, const char *want_path)
{
    sp_report_reader *got = NULL, *want = NULL;
    assert_int_equal(sp_report_open(got_path, &got), SP_OK);
    assert_int_equal(sp_report_open(want_path, &want), SP_OK);
    char **analyzers = NULL;
    int n_analyzers = 0, n_compared = 0;
    assert_int_equal(sp_report_list(want, NULL, &analyzers, &n_analyzers), SP_OK);
    for (int i = 0; i < n_analyzers; i++) {
        char **names = NULL;
        int n = 0;
        assert_int_equal(sp_report_list(want, analyzers[i], &names, &n), SP_OK);
        for (int j = 0; j < n; j++) {
            sp_report_array g, w;
            assert_int_equal(sp_report_read_array(got, analyzers[i], names[j], &g), SP_OK);
            assert_int_equal(sp_report_read_array(want, analyzers[i], names[j], &w), SP_OK);
            assert_int_equal(g.rank, w.rank);
            int64_t numel = 1;
            for (int k = 0; k < w.rank; k++) {
                assert_int_equal(g.shape[k], w.shape[k]);
                numel *= w.shape[k];
            }
            const double shift = strcmp(names[j], "token_norm_max_position") == 0 ? SKIP : 0;
            for (int64_t e = 0; e < numel; e++) {
                const double x = g.data[e], y = w.data[e] + shift;
                if (!(isnan(x) && isnan(y)))
                    assert_below(fabs(x - y), 1e-6 * fmax(1, fabs(y)), "%s/%s[%lld]: %g with the option, %g without",
                                 analyzers[i], names[j], (long long)e, x, y);
            }
            sp_report_array_free(&g);
            sp_report_array_free(&w);
            n_compared++;
        }
        sp_report_names_free(names, n);
    }
    sp_report_names_free(analyzers, n_analyzers);
    sp_report_close(got);
    sp_report_close(want);
    assert_true(n_compared >= 20);
}

static void test_same_as_a_dump_without_those_positions(void **state)
{
    (void)state;
    sp_rng rng;
    sp_rng_seed(&rng, 9);
    sp_real *h[NH], *h_kept[NH], *lat[L], *lat_kept[L], *sum[L], *sum_kept[L];
    for (int l = 0; l < NH; l++) {
        h[l] = vec_random(&rng, BATCH * SEQ * D, 1.0 + l);
        for (int s = 0; s < BATCH; s++) /* a sink at position 0 of every sequence */
            h[l][(size_t)s * SEQ * D] = (sp_real)(300.0 * (l + 1));
        h_kept[l] = kept_rows(h[l], D);
    }
    for (int l = 0; l < L; l++) {
        lat[l] = vec_random(&rng, BATCH * SEQ * DFF, 0.5);
        lat_kept[l] = kept_rows(lat[l], DFF);
        sum[l] = vec_random(&rng, BATCH * SEQ * D, 2.0);
        sum_kept[l] = kept_rows(sum[l], D);
    }
    char dump[4200], kept_dump[4200], with_skip[4200], without[4200], with_skip_small[4200];
    scratch_path(dump, sizeof dump, "skip_full.h5");
    scratch_path(kept_dump, sizeof kept_dump, "skip_kept.h5");
    scratch_path(with_skip, sizeof with_skip, "skip_report.h5");
    scratch_path(with_skip_small, sizeof with_skip_small, "skip_report_one.h5");
    scratch_path(without, sizeof without, "kept_report.h5");
    act_dump_write(dump, &(act_dump_spec){.n_layers = L, .d_model = D, .n_streams = 1, .d_ff = DFF, .batch = BATCH,
                                          .seq_len = SEQ, .hidden = h, .latent = lat, .sum_a = sum, .sum_z = sum});
    act_dump_write(kept_dump, &(act_dump_spec){.n_layers = L, .d_model = D, .n_streams = 1, .d_ff = DFF,
                                               .batch = BATCH, .seq_len = KEPT, .hidden = h_kept,
                                               .latent = lat_kept, .sum_a = sum_kept, .sum_z = sum_kept});
    analyze(dump, with_skip, SKIP, BATCH);
    analyze(dump, with_skip_small, SKIP, 1); /* one sequence a pass: the rows move per batch */
    analyze(kept_dump, without, 0, BATCH);
    compare_reports(with_skip, without);
    compare_reports(with_skip_small, without);
    /* recorded, and the sink no longer dominates what is left */
    report_view v;
    report_view_open(&v, with_skip);
    const cJSON *opts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v.summary, "input"), "options");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(opts, "skip_positions")->valueint, SKIP);
    assert_int_equal((int)report_view_scalar(&v, "growth", "dominant_token_layers"), 0);
    report_view_close(&v);
    /* without the option the sinks dominate every layer, from position 0 */
    char full[4200];
    scratch_path(full, sizeof full, "skip_none_report.h5");
    analyze(dump, full, 0, BATCH);
    report_view_open(&v, full);
    assert_int_equal((int)report_view_scalar(&v, "growth", "dominant_token_layers"), NH);
    assert_int_equal((int)report_view_scalar(&v, "growth", "token_norm_max_position"), 0);
    report_view_close(&v);
    /* a value that leaves nothing of a sequence: a usage error, no report */
    char refused[4200];
    scratch_path(refused, sizeof refused, "skip_refused.h5");
    sp_analyze_job job = {.input = dump, .out = refused, .device = "cpu", .quiet = 1};
    sp_analyze_options_defaults(&job.opts);
    job.opts.skip_positions = SEQ;
    sp_error_clear();
    assert_int_equal(sp_analyze_run(&job), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "--skip-positions 8 leaves nothing"));
    assert_false(scratch_file_exists(refused));
    for (int l = 0; l < NH; l++) {
        free(h[l]);
        free(h_kept[l]);
    }
    for (int l = 0; l < L; l++) {
        free(lat[l]);
        free(lat_kept[l]);
        free(sum[l]);
        free(sum_kept[l]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_a_dump_without_those_positions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
