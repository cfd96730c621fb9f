/* `spanprobe analyze` end to end: a tiny initialized checkpoint on a text file (every analyzer of the
 * default set runs or is recorded as skipped; provenance, options, eval set and peak memory
 * recorded; CSV tables), the opt-in curvature analyzer named with its options,
 * an activation dump of the same model on the same tokens (the analyzers that need the model are
 * skipped with a reason, the others agree with the checkpoint run), bad options and bad inputs
 * (exit codes, one-line errors, and never a report, a summary or a temporary file left behind),
 * and a dump that turns out to hold NaN in the middle of the pass. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "analyzers/analyzer.h"
#include "core/sha256.h"
#include "support/act_dump.h"
#include "support/assert_err.h"
#include "support/cli_expect.h"
#include "support/fixtures.h"
#include "support/report_view.h"
#include "support/scratch.h"
#include "support/tree.h"
#include "support/vec_util.h"

/* fixtures/tiny.json: span, 2 layers, d_model 16, d_ff 32, bytes vocabulary, max_seq_len 16 */
enum { L = 2, NH = L + 1, SEQ = 8, N_SEQS = 6 };

typedef struct {
    char ckpt[4200], text[4200], ids[4200];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    *state = NULL;
    if (!getenv("SPANPROBE_BIN") || !fixture_file("tiny.h5", f->ckpt, sizeof f->ckpt)) {
        free(f);
        return 0; /* every test skips */
    }
    char text[4000];
    sp_rng rng;
    sp_rng_seed(&rng, 1);
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (char)(i % 61 == 60 ? '\n' : 'a' + sp_rng_below(&rng, 26));
    scratch_path(f->text, sizeof f->text, "eval.txt");
    /* N_SEQS windows of SEQ + 1 tokens exactly: a checkpoint run takes them all, in order, as the dump */
    char ids[N_SEQS * SEQ * 4 + 8];
    size_t at = 0;
    for (int i = 0; i < N_SEQS * SEQ + 1; i++)
        at += (size_t)sprintf(ids + at, "%d ", (int)(unsigned char)text[i]);
    scratch_path(f->ids, sizeof f->ids, "ids.txt");
    if (scratch_write_file(f->text, text, sizeof text) != 0 || scratch_write_file(f->ids, ids, at) != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static fixture *need_fixture(void **state)
{
    return cli_group_state(state, "SPANPROBE_BIN or BUILD_DIR is not set");
}

static void run_ok(const char *const *args, char **out) { cli_expect_exit(0, args, out, NULL); }

static void test_checkpoint(void **state)
{
    fixture *f = need_fixture(state);
    char report[4200], csv[4200];
    scratch_path(report, sizeof report, "ckpt_report.h5");
    scratch_path(csv, sizeof csv, "csv");
    char *out = NULL;
    run_ok((const char *[]){"analyze", f->ckpt, "--out", report, "--data", f->text, "--n-tokens", "48", "--seq", "8",
                            "--batch", "4", "--device", "cpu", "--csv", csv, "--jac-tokens", "2", "--power-iters",
                            "20", NULL},
           &out);
    assert_non_null(strstr(out, "peak memory"));
    assert_non_null(strstr(out, "forward passes"));
    assert_non_null(strstr(out, "input: load, hash, check"));
    assert_non_null(strstr(out, "MiB of activations for a pass of 4 x 8 tokens"));
    free(out);

    report_view v;
    report_view_open(&v, report);
    /* every analyzer ran (a checkpoint meets every need) */
    for (int i = 0; i < sp_n_analyzers; i++)
        if (report_view_skipped(&v, sp_analyzers[i]->name))
            fail_msg("%s skipped: %s", sp_analyzers[i]->name, report_view_skipped(&v, sp_analyzers[i]->name));
    char hex[65], got[128];
    assert_int_equal(sp_sha256_file(f->ckpt, hex, NULL), SP_OK);
    assert_int_equal(sp_report_get_provenance(v.reader, "input_sha256", got, sizeof got), SP_OK);
    assert_string_equal(got, hex);
    /* the name figure legends use: the checkpoint's file name without its extension */
    assert_int_equal(sp_report_get_provenance(v.reader, "model", got, sizeof got), SP_OK);
    assert_string_equal(got, "tiny");
    assert_non_null(strstr(report_view_input(&v, "eval_set"), f->text));
    const cJSON *opts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v.summary, "input"), "options");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(opts, "n_tokens")->valueint, 48);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(opts, "seq_len")->valueint, 8);
    /* given options as given, the scaling ones not given as resolved: this small model's are the fixed defaults */
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(opts, "power_iters")->valueint, 20);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(opts, "jac_seq")->valueint, 64);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(opts, "prune_seqs")->valueint, 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(opts, "data")->valuestring, f->text);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(opts, "device")->valuestring, "cpu");
    assert_true(report_view_scalar(&v, "run", "peak_rss_mib") > 0);
    /* the total counts loading and hashing the input */
    assert_true(report_view_scalar(&v, "run", "seconds_load") > 0);
    assert_true(report_view_scalar(&v, "run", "seconds_total") >=
                report_view_scalar(&v, "run", "seconds_load") + report_view_scalar(&v, "run", "seconds_input"));
    assert_true(report_view_scalar(&v, "run", "weights_mib") > 0);
    assert_true(report_view_scalar(&v, "run", "activations_mib") > 0);
    assert_int_equal((int)report_view_scalar(&v, "run", "n_tokens"), 48);
    assert_int_equal((int)report_view_scalar(&v, "similarity", "tokens"), 48);
    report_view_close(&v);

    /* CSV: the cosine matrix has a header and one line per layer */
    char path[4600];
    snprintf(path, sizeof path, "%s/similarity.cosine.csv", csv);
    char *table = scratch_read_file(path, NULL);
    assert_non_null(table);
    assert_int_equal(strncmp(table, "layer,layer_0,layer_1,layer_2\n0,", 32), 0);
    assert_int_equal(scratch_count_lines(table), 1 + NH);
    free(table);
    snprintf(path, sizeof path, "%s/growth.rms.csv", csv);
    table = scratch_read_file(path, NULL);
    assert_non_null(table);
    assert_int_equal(strncmp(table, "layer,rms\n", 10), 0);
    free(table);
    assert_int_equal(tree_remove(csv), 0);
}

static void test_dump_matches_checkpoint(void **state)
{
    fixture *f = need_fixture(state);
    char dump[4200], from_dump[4200], from_ckpt[4200];
    scratch_path(dump, sizeof dump, "tiny_dump.h5");
    scratch_path(from_dump, sizeof from_dump, "dump_report.h5");
    scratch_path(from_ckpt, sizeof from_ckpt, "ckpt_tokens_report.h5");
    run_ok((const char *[]){"dump", f->ckpt, "--tokens", f->ids, "--seq", "8", "--out", dump, "--device", "cpu", NULL},
           NULL);
    run_ok((const char *[]){"analyze", dump, "--out", from_dump, "--batch", "4", "--device", "cpu", "--quiet", NULL},
           NULL);
    run_ok((const char *[]){"analyze", f->ckpt, "--out", from_ckpt, "--tokens", f->ids, "--seq", "8", "--batch", "4",
                            "--metrics", "similarity,cka,growth,hidden_spectra,ffn_spectra", "--device", "cpu",
                            "--quiet", NULL},
           NULL);
    report_view vd, vc;
    report_view_open(&vd, from_dump);
    report_view_open(&vc, from_ckpt);
    for (int i = 0; i < sp_n_analyzers; i++) {
        const sp_analyzer *an = sp_analyzers[i];
        const char *reason = report_view_skipped(&vd, an->name);
        if (an->opt_in) /* not in the default set: neither run nor skipped */
            assert_null(reason);
        else if (an->needs & SP_NEEDS_MODEL)
            assert_true(reason && strstr(reason, "dump"));
        else if (reason)
            fail_msg("%s skipped on a dump: %s", an->name, reason);
    }
    const char *arrays[][2] = {{"similarity", "cosine"}, {"similarity", "angular_distance"}, {"cka", "cka"},
                               {"growth", "rms"}, {"growth", "top_abs"}, {"hidden_spectra", "eigenvalues"},
                               {"ffn_spectra", "eigenvalues"}};
    for (size_t k = 0; k < SP_ARRAY_LEN(arrays); k++) {
        int64_t shape_d[4], shape_c[4];
        int rank_d, rank_c;
        double *a = report_view_array(&vd, arrays[k][0], arrays[k][1], &rank_d, shape_d);
        double *b = report_view_array(&vc, arrays[k][0], arrays[k][1], &rank_c, shape_c);
        assert_int_equal(rank_d, rank_c);
        int64_t n = 1;
        for (int i = 0; i < rank_d; i++) {
            assert_int_equal(shape_d[i], shape_c[i]);
            n *= shape_d[i];
        }
        double err = 0, scale = 0;
        for (int64_t i = 0; i < n; i++) {
            err = fmax(err, fabs(a[i] - b[i]));
            scale = fmax(scale, fabs(b[i]));
        }
        assert_below(err, 1e-5 * scale, "%s/%s: dump against checkpoint", arrays[k][0], arrays[k][1]);
        free(a);
        free(b);
    }
    assert_int_equal((int)report_view_scalar(&vd, "run", "n_seqs"), N_SEQS);
    report_view_close(&vd);
    report_view_close(&vc);
}

/* A run that must fail with `code` before or during the analysis, leaving nothing behind. */
/* Memory: the backend peak does not grow with the number of evaluation tokens (every analyzer
 * streams), and --max-memory-gib cuts the sequences per pass (fewer, never none) or refuses a
 * budget that one sequence does not fit, with exit 8 and no report. */
static double peak_of_run(const fixture *f, const char *n_tokens, const char *max_gib, int *batch, int *topk)
{
    char report[4200];
    scratch_path(report, sizeof report, "memory_report.h5");
    run_ok((const char *[]){"analyze", f->ckpt, "--out", report, "--data", f->text, "--n-tokens", n_tokens, "--seq",
                            "8", "--batch", "4", "--device", "cpu", "--quiet", "--max-memory-gib", max_gib,
                            "--power-iters", "5", "--jac-tokens", "1", NULL},
           NULL);
    report_view v;
    report_view_open(&v, report);
    const double peak = report_view_scalar(&v, "run", "peak_backend_mib");
    *batch = (int)report_view_scalar(&v, "run", "batch");
    *topk = (int)report_view_scalar(&v, "jacobian", "topk");
    assert_int_equal((int)report_view_scalar(&v, "jacobian", "topk_requested"), 8);
    report_view_close(&v);
    return peak;
}

static void test_memory_budget(void **state)
{
    fixture *f = need_fixture(state);
    int batch_small, batch_large, batch_capped, topk_small, topk_large, topk_capped;
    const double small = peak_of_run(f, "48", "8", &batch_small, &topk_small);
    const double large = peak_of_run(f, "384", "8", &batch_large, &topk_large);
    assert_true(small > 0);
    assert_int_equal(batch_small, 4);
    assert_int_equal(batch_large, 4);
    assert_int_equal(topk_small, 8);
    assert_true(large <= small * 1.0001); /* 8x the tokens, the same memory */
    /* a budget whose half holds about three sequences' activations: the pass batch and the Jacobian's
     * top-k copies of its sequence are both cut to what fits */
    const double capped = peak_of_run(f, "48", "0.0003", &batch_capped, &topk_capped);
    assert_in_range(batch_capped, 1, 3);
    assert_in_range(topk_capped, 1, 3);
    assert_true(capped < small);
    char report[4200], *err = NULL;
    scratch_path(report, sizeof report, "memory_refused.h5");
    /* 21 KB: above the largest weight array (the 16 KiB embedding: smaller budgets refuse reading it,
     * exit 8 too), below two sequences' activations */
    cli_expect_exit(8, (const char *[]){"analyze", f->ckpt, "--out", report, "--data", f->text, "--seq", "8",
                                        "--device", "cpu", "--max-memory-gib", "2e-5", NULL},
                    NULL, &err);
    assert_non_null(strstr(err, "more than half of --max-memory-gib"));
    assert_int_equal(access(report, F_OK), -1);
    free(err);
}

/* The streaming pass's batch: with accumulators far larger than a pass's activations (d_ff 1024
 * covariances of a d_model 16 model) it runs one sequence at a time, records that, and gives the
 * spectra and CKA of a run asked for one sequence a pass. */
static void stream_run(const fixture *f, const char *ckpt, const char *batch, const char *report, int *stream_batch,
                       double **eig, double **cka, int64_t *n_eig)
{
    char *err = NULL;
    cli_expect_exit(0, (const char *[]){"analyze", ckpt, "--out", report, "--data", f->text, "--n-tokens", "64",
                                        "--seq", "8", "--batch", batch, "--device", "cpu", "--metrics",
                                        "ffn_spectra,cka", NULL},
                    NULL, &err);
    assert_int_equal(strstr(err, "streaming pass in batches of 1 sequence(s) instead of 4") != NULL,
                     strcmp(batch, "4") == 0);
    free(err);
    report_view v;
    report_view_open(&v, report);
    *stream_batch = (int)report_view_scalar(&v, "run", "stream_batch");
    assert_int_equal((int)report_view_scalar(&v, "run", "batch"), atoi(batch));
    int rank;
    int64_t shape[4], cka_shape[4]; /* report_view_array writes all 4 dims of a report array's shape */
    *eig = report_view_array(&v, "ffn_spectra", "eigenvalues", &rank, shape);
    *n_eig = shape[0] * shape[1];
    *cka = report_view_array(&v, "cka", "cka", &rank, cka_shape);
    report_view_close(&v);
}

static void test_stream_batch(void **state)
{
    fixture *f = need_fixture(state);
    char ckpt[4200], report[4200];
    scratch_path(ckpt, sizeof ckpt, "wide_ffn.h5");
    run_ok((const char *[]){"init", "--n-layers", "2", "--d-model", "16", "--n-heads", "2", "--n-kv-heads", "2", "--d-ff", "1024",
                            "--max-seq-len", "8", "--out", ckpt, NULL},
           NULL);
    int cut, whole;
    double *eig_cut, *eig_one, *cka_cut, *cka_one;
    int64_t n, n_one;
    scratch_path(report, sizeof report, "stream_cut.h5");
    stream_run(f, ckpt, "4", report, &cut, &eig_cut, &cka_cut, &n);
    scratch_path(report, sizeof report, "stream_one.h5");
    stream_run(f, ckpt, "1", report, &whole, &eig_one, &cka_one, &n_one);
    assert_int_equal(cut, 1);
    assert_int_equal(whole, 1);
    assert_int_equal(n, n_one);
    /* the same windows in the same batches of one: the same bits */
    assert_memory_equal(eig_cut, eig_one, (size_t)n * sizeof *eig_cut);
    assert_memory_equal(cka_cut, cka_one, NH * NH * sizeof *cka_cut);
    free(eig_cut);
    free(eig_one);
    free(cka_cut);
    free(cka_one);
}

/* The gradient and pruning passes' batch: the wide-FFN model's gradients (0.3 MiB) do not fit beside a
 * pass of 4 sequences within that pass's 0.9 MiB, so they run 2 at a time, say so, record it, stay
 * within the weights plus one pass of --batch on the backend, and give the gradient of each batch of
 * 4 (here equal to the mean of two batches of 2: every target counts) and the same pruning loss.
 * The same after a streaming pass of 4 sequences (similarity), whose activations the model would
 * otherwise still hold. */
static void model_batch_run(const fixture *f, const char *ckpt, const char *batch, const char *grad_batches,
                            const char *metrics, const char *report, double *norms, int64_t *n_norms,
                            double *base_loss)
{
    char *err = NULL;
    cli_expect_exit(0, (const char *[]){"analyze", ckpt, "--out", report, "--data", f->text, "--n-tokens", "64",
                                        "--seq", "8", "--batch", batch, "--grad-batches", grad_batches,
                                        "--prune-seqs", "4", "--device", "cpu", "--metrics", metrics, NULL},
                    NULL, &err);
    report_view v;
    report_view_open(&v, report);
    const int model_batch = (int)report_view_scalar(&v, "run", "model_batch");
    if (strcmp(batch, "4") == 0) {
        assert_int_equal(model_batch, 2);
        assert_non_null(strstr(err, "gradient and pruning passes of 2 sequence(s) instead of 4"));
        const double budget = report_view_scalar(&v, "run", "weights_mib") + report_view_scalar(&v, "run", "activations_mib");
        assert_true(report_view_scalar(&v, "run", "peak_backend_mib_finish_grad_norms") <= budget);
        assert_true(report_view_scalar(&v, "run", "peak_backend_mib_finish_pruning") <= budget);
    }
    free(err);
    int rank;
    int64_t shape[4];
    double *t = report_view_array(&v, "grad_norms", "tensor", &rank, shape);
    assert_in_range(shape[0], 1, 64);
    *n_norms = shape[0];
    memcpy(norms, t, (size_t)shape[0] * sizeof *norms);
    free(t);
    *base_loss = report_view_scalar(&v, "pruning", "base_loss");
    report_view_close(&v);
}

static void test_model_batch(void **state)
{
    fixture *f = need_fixture(state);
    char ckpt[4200], report[4200];
    scratch_path(ckpt, sizeof ckpt, "wide_ffn_grads.h5");
    run_ok((const char *[]){"init", "--n-layers", "2", "--d-model", "16", "--n-heads", "2", "--n-kv-heads", "2", "--d-ff",
                            "1024", "--max-seq-len", "8", "--out", ckpt, NULL},
           NULL);
    double four[64], two[64], loss_four, loss_two;
    int64_t n_four, n_two;
    scratch_path(report, sizeof report, "grads_of_4.h5");
    model_batch_run(f, ckpt, "4", "1", "grad_norms,pruning", report, four, &n_four, &loss_four);
    scratch_path(report, sizeof report, "grads_of_4_after_pass.h5");
    model_batch_run(f, ckpt, "4", "1", "similarity,grad_norms,pruning", report, four, &n_four, &loss_four);
    scratch_path(report, sizeof report, "grads_of_2x2.h5");
    model_batch_run(f, ckpt, "2", "2", "grad_norms,pruning", report, two, &n_two, &loss_two);
    assert_int_equal(n_four, n_two);
    for (int64_t i = 0; i < n_four; i++)
        assert_below(fabs(four[i] - two[i]) / fmax(two[i], 1e-30), 1e-5, "tensor %d", (int)i);
    assert_below(fabs(loss_four - loss_two) / loss_two, 1e-6, "pruning base loss");
}

static void expect_failure(const char *const *args, int code, const char *report, const char *message)
{
    cli_expect_error(code, args, (const char *[]){message, NULL});
    char summary[4300];
    snprintf(summary, sizeof summary, "%.*s.json", (int)(strlen(report) - 3), report);
    assert_false(scratch_file_exists(report));
    assert_false(scratch_file_exists(summary));
    assert_int_equal(scratch_count_entries("*.tmp.*"), 0);
}

/* A run on the device chosen by "auto" records the device that ran (cpu or cuda). */
static void test_device_recorded(void **state)
{
    const fixture *f = need_fixture(state);
    char report[4200];
    scratch_path(report, sizeof report, "auto_device.h5");
    run_ok((const char *[]){"analyze", f->ckpt, "--out", report, "--tokens", f->ids, "--seq", "8", "--metrics", "growth",
                            "--quiet", NULL},
           NULL);
    report_view v;
    report_view_open(&v, report);
    const cJSON *opts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v.summary, "input"), "options");
    const char *device = cJSON_GetObjectItemCaseSensitive(opts, "device")->valuestring;
    if (strcmp(device, "cpu") != 0 && strcmp(device, "cuda") != 0)
        fail_msg("options.device is \"%s\" (expected the device that ran)", device);
    report_view_close(&v);
}

static void test_bad_options(void **state)
{
    fixture *f = need_fixture(state);
    char r[4200];
    scratch_path(r, sizeof r, "bad.h5");
    const char *ck = f->ckpt, *tx = f->text;
    expect_failure((const char *[]){"analyze", ck, "--out", r, "--metrics", "cosine", NULL}, SP_ERR_USAGE, r,
                   "unknown analyzer 'cosine'");
    expect_failure((const char *[]){"analyze", ck, "--out", r, "--n-tokens", "0", NULL}, SP_ERR_USAGE, r, "n_tokens");
    expect_failure((const char *[]){"analyze", ck, "--out", r, "--batch", "x", NULL}, SP_ERR_USAGE, r, "batch");
    expect_failure((const char *[]){"analyze", ck, NULL}, SP_ERR_USAGE, r, "--out");
    expect_failure((const char *[]){"analyze", "--out", r, NULL}, SP_ERR_USAGE, r, "expected an input");
    expect_failure((const char *[]){"analyze", ck, ck, "--out", r, NULL}, SP_ERR_USAGE, r, "one input");
    expect_failure((const char *[]){"analyze", ck, "--out", r, "--frobnicate", "1", NULL}, SP_ERR_USAGE, r,
                   "--frobnicate");
    expect_failure((const char *[]){"analyze", ck, "--out", r, "--data", tx, "--tokens", f->ids, NULL}, SP_ERR_USAGE,
                   r, "at most one");
    expect_failure((const char *[]){"analyze", ck, "--out", r, "--data", tx, "--seq", "17", "--device", "cpu", NULL},
                   SP_ERR_USAGE, r, "max_seq_len");
    expect_failure((const char *[]){"analyze", ck, "--out", r, "--data", tx, "--device", "tpu", NULL}, SP_ERR_USAGE, r,
                   "tpu");
}

static void test_bad_inputs(void **state)
{
    fixture *f = need_fixture(state);
    char r[4200], missing[4200], tiny_text[4200], dump[4200];
    scratch_path(r, sizeof r, "bad.h5");
    scratch_path(missing, sizeof missing, "missing.h5");
    scratch_path(tiny_text, sizeof tiny_text, "tiny.txt");
    assert_int_equal(scratch_write_file(tiny_text, "too short", 9), 0);
    expect_failure((const char *[]){"analyze", missing, "--out", r, NULL}, SP_ERR_IO, r, "missing.h5");
    expect_failure((const char *[]){"analyze", f->text, "--out", r, NULL}, SP_ERR_INPUT, r, "eval.txt");
    expect_failure((const char *[]){"analyze", f->ckpt, "--out", r, "--data", tiny_text, "--device", "cpu", NULL},
                   SP_ERR_INPUT, r, "tiny.txt");
    expect_failure((const char *[]){"analyze", f->ckpt, "--out", r, "--data", missing, "--device", "cpu", NULL},
                   SP_ERR_IO, r, "missing.h5");

    /* a report is not an input */
    char report[4200];
    scratch_path(report, sizeof report, "as_input.h5");
    run_ok((const char *[]){"analyze", f->ckpt, "--out", report, "--data", f->text, "--n-tokens", "16", "--seq", "8",
                            "--metrics", "growth", "--device", "cpu", "--quiet", NULL},
           NULL);
    expect_failure((const char *[]){"analyze", report, "--out", r, NULL}, SP_ERR_INPUT, r, "spanprobe-report");

    /* a dump brings its own tokens */
    sp_real *h[NH];
    sp_rng rng;
    sp_rng_seed(&rng, 3);
    for (int l = 0; l < NH; l++)
        h[l] = vec_random(&rng, 4 * 4 * 5, 1.0);
    scratch_path(dump, sizeof dump, "nan_dump.h5");
    h[1][37] = (sp_real)NAN; /* in the second batch of one sequence */
    act_dump_spec spec = {.n_layers = L, .d_model = 5, .n_streams = 1, .batch = 4, .seq_len = 4, .hidden = h};
    act_dump_write(dump, &spec);
    expect_failure((const char *[]){"analyze", dump, "--out", r, "--data", f->text, NULL}, SP_ERR_USAGE, r, "dump");
    /* NaN found while streaming: the report already begun is removed */
    expect_failure((const char *[]){"analyze", dump, "--out", r, "--batch", "1", "--device", "cpu", "--quiet", NULL},
                   SP_ERR_NUMERIC, r, "NaN");
    for (int l = 0; l < NH; l++)
        free(h[l]);
}

static void test_help(void **state)
{
    (void)need_fixture(state);
    char *out = NULL;
    run_ok((const char *[]){"analyze", "--help", NULL}, &out);
    const sp_field_table *t = &sp_analyze_option_table;
    for (int i = 0; i < t->n_fields; i++) {
        char flag[80];
        snprintf(flag, sizeof flag, "--%s", t->fields[i].name);
        for (char *c = flag + 2; *c; c++)
            *c = *c == '_' ? '-' : *c;
        if (!strstr(out, flag))
            fail_msg("--help does not list %s", flag);
    }
    for (int i = 0; i < sp_n_analyzers; i++)
        assert_non_null(strstr(out, sp_analyzers[i]->name));
    free(out);
}

/* The opt-in curvature analyzer from the command line: its options reach it and are recorded, its
 * arrays have the documented shapes, and only the named analyzer runs. */
static void test_curvature(void **state)
{
    fixture *f = need_fixture(state);
    char report[4200];
    scratch_path(report, sizeof report, "curvature.h5");
    run_ok((const char *[]){"analyze", f->ckpt, "--out", report, "--tokens", f->ids, "--seq", "8", "--metrics",
                            "curvature", "--curv-seqs", "3", "--curv-iters", "7", "--hutchinson-samples", "5",
                            "--device", "cpu", "--quiet", NULL},
           NULL);
    report_view v;
    report_view_open(&v, report);
    const cJSON *opts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v.summary, "input"), "options");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(opts, "hutchinson_samples")->valueint, 5);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(opts, "curv_iters")->valueint, 7);
    assert_true(report_view_scalar(&v, "curvature", "n_seqs") == 3);
    assert_true(report_view_scalar(&v, "curvature", "hutchinson_samples") == 5);
    int rank;
    int64_t shape[4];
    double *samples = report_view_array(&v, "curvature", "trace_samples", &rank, shape);
    assert_int_equal(rank, 2);
    assert_true(shape[0] == L && shape[1] == 5);
    free(samples);
    double *iters = report_view_array(&v, "curvature", "lambda_iters", &rank, shape);
    for (int l = 0; l < L; l++)
        assert_true(iters[l] >= 1 && iters[l] <= 7);
    free(iters);
    assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v.summary, "metrics"), "similarity"));
    report_view_close(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint),
        cmocka_unit_test(test_curvature),
        cmocka_unit_test(test_dump_matches_checkpoint),
        cmocka_unit_test(test_memory_budget),
        cmocka_unit_test(test_stream_batch),
        cmocka_unit_test(test_model_batch),
        cmocka_unit_test(test_device_recorded),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, setup, cli_group_free);
}
