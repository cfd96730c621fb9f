#include "drift_ref.h"

#include <cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "analyzers/drift.h"
#include "io/report.h"
#include "json_file.h"
#include "report_view.h"
#include "scratch.h"

void drift_ref_run(const char *ref, const char *model, const char *tokens, const char *out_name, char *report,
                   size_t len)
{
    char name[256];
    snprintf(name, sizeof name, "%s.h5", out_name);
    scratch_path(report, len, name);
    sp_drift_job job;
    sp_drift_job_defaults(&job);
    job.ref = ref;
    job.model = model;
    job.out = report;
    job.tokens = tokens;
    job.seq_len = 32;
    job.n_tokens = 1 << 20; /* every window of the file */
    job.backend = sp_backend_cpu();
    job.quiet = 1;
    sp_status st = sp_drift_run(&job);
    if (st != SP_OK)
        fail_msg("drift %s %s: %s", ref, model, sp_error_message());
}

cJSON *drift_ref_load(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "fixtures/drift/ref/%s.json", name);
    return json_file_read(path);
}

double drift_ref_scalar(const char *report, const char *key)
{
    report_view v;
    report_view_open(&v, report);
    double x = report_view_scalar(&v, SP_DRIFT_GROUP, key);
    report_view_close(&v);
    return x;
}

/* want[i] (JSON numbers, null = NaN, flattened nested arrays) into out; returns the count. */
static size_t flatten(const cJSON *j, double *out, size_t cap, size_t n)
{
    if (cJSON_IsArray(j)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, j) n = flatten(e, out, cap, n);
        return n;
    }
    if (n < cap)
        out[n] = cJSON_IsNumber(j) ? j->valuedouble : NAN;
    return n + 1;
}

static void check_values(const char *what, size_t n, const double *got, const double *want, double rel, double abs_tol)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(want[i]) || isnan(got[i])) {
            if (isnan(want[i]) != isnan(got[i]))
                fail_msg("drift %s[%zu]: got %.17g, expected %.17g", what, i, got[i], want[i]);
            continue;
        }
        const double err = fabs(got[i] - want[i]), allowed = rel * fabs(want[i]) + abs_tol;
        if (err > allowed)
            fail_msg("drift %s[%zu]: got %.17g, expected %.17g (|diff| %.3g > %.3g)", what, i, got[i], want[i], err,
                     allowed);
        worst = fmax(worst, err / fmax(fabs(want[i]), 1e-300));
    }
    print_message("  %-28s %6zu values, worst relative error %.3g\n", what, n, worst);
}

static void check_array(const report_view *v, const cJSON *want, const char *name, double rel, double abs_tol)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(want, name);
    assert_non_null(j);
    int rank = 0;
    int64_t shape[4] = {0};
    double *got = report_view_array(v, SP_DRIFT_GROUP, name, &rank, shape);
    size_t n = 1;
    for (int k = 0; k < rank; k++)
        n *= (size_t)shape[k];
    double *w = malloc(n * sizeof *w);
    assert_non_null(w);
    assert_int_equal(flatten(j, w, n, 0), n);
    check_values(name, n, got, w, rel, abs_tol);
    free(got);
    free(w);
}

static void check_scalar(const report_view *v, const cJSON *want, const char *key, const char *json_key, double rel,
                         double abs_tol)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(want, json_key);
    assert_non_null(j);
    double got = report_view_scalar(v, SP_DRIFT_GROUP, key), w = cJSON_IsNumber(j) ? j->valuedouble : NAN;
    check_values(key, 1, &got, &w, rel, abs_tol);
}

/* Top-1 matches agree except at near-ties. */
static void check_top1(const report_view *v, const cJSON *want, double margin)
{
    int64_t shape[4];
    double *got = report_view_array(v, SP_DRIFT_GROUP, "top1_match", NULL, shape);
    const cJSON *match = cJSON_GetObjectItemCaseSensitive(want, "top1_match");
    const cJSON *margins = cJSON_GetObjectItemCaseSensitive(want, "top1_margin");
    assert_int_equal(cJSON_GetArraySize(match), shape[0]);
    int excused = 0;
    for (int t = 0; t < shape[0]; t++) {
        const double w = cJSON_GetArrayItem(match, t)->valuedouble, m = cJSON_GetArrayItem(margins, t)->valuedouble;
        if (got[t] == w)
            continue;
        if (m >= margin)
            fail_msg("drift top1_match[%d]: got %g, expected %g with a top-1 margin of %.3g", t, got[t], w, m);
        excused++;
    }
    print_message("  %-28s %6lld tokens, %d near-tie(s) differ\n", "top1_match", (long long)shape[0], excused);
    free(got);
}

void drift_ref_check(const char *report, const cJSON *want, const drift_ref_tolerance *tol)
{
    report_view v;
    report_view_open(&v, report);
    static const char *const arrays[] = {"rel_error", "cosine", "cka", "weight_rel_frobenius", "weight_rel_spectral",
                                         "weight_rel_frobenius_global", "weight_rel_spectral_global"};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        check_array(&v, want, arrays[i], tol->rel, tol->abs);
    check_array(&v, want, "kl", tol->kl_rel, tol->kl_abs);
    static const char *const kl_keys[] = {"kl_mean", "kl_p50", "kl_p99", "kl_max"};
    for (size_t i = 0; i < sizeof kl_keys / sizeof *kl_keys; i++)
        check_scalar(&v, want, kl_keys[i], kl_keys[i], tol->kl_rel, tol->kl_abs);
    check_scalar(&v, want, "loss_ref", "loss_ref", tol->rel, tol->abs);
    check_scalar(&v, want, "loss", "loss", tol->rel, tol->abs);
    check_top1(&v, want, tol->margin);
    /* the agreement from the per-token matches the reference itself records */
    const cJSON *agree = cJSON_GetObjectItemCaseSensitive(want, "top1_agreement");
    const int64_t n = (int64_t)report_view_scalar(&v, SP_DRIFT_GROUP, "tokens");
    assert_true(fabs(report_view_scalar(&v, SP_DRIFT_GROUP, "top1_agreement") - agree->valuedouble) <=
                (tol->margin > 0 ? 4.0 / (double)n : 0) + 1e-15);
    report_view_close(&v);
}

void drift_ref_check_copies(const drift_ref_tolerance *tol, double *kl_mean, double *rel_error_final)
{
    static const char *const copies[DRIFT_REF_N_COPIES] = {"llama-f32-noise0.003", "llama-f32-noise0.03",
                                                           "llama-f32-noise0.3"};
    for (int i = 0; i < DRIFT_REF_N_COPIES; i++) {
        char model[256], report[4200];
        snprintf(model, sizeof model, "fixtures/drift/%s", copies[i]);
        print_message("%s\n", copies[i]);
        drift_ref_run("fixtures/hf/llama-f32", model, DRIFT_REF_TOKENS, copies[i], report, sizeof report);
        cJSON *want = drift_ref_load(copies[i]);
        drift_ref_check(report, want, tol);
        cJSON_Delete(want);
        kl_mean[i] = drift_ref_scalar(report, "kl_mean");
        rel_error_final[i] = drift_ref_scalar(report, "rel_error_final");
    }
}
