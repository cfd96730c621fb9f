/* Reports: the HDF5 arrays and the JSON summary written together and read back (values, units,
 * provenance with the input's sha256, stable summary keys), atomicity of the pair, and bad names,
 * bad options and bad files. */
#include <cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/sha256.h"
#include "io/report.h"
#include "support/h5_edit.h"
#include "support/scratch.h"

static const sp_report_array_attrs cos_attrs = {"cosine", "[layer, layer]", "mean cosine similarity of h_i and h_j"};
static const sp_report_array_attrs norm_attrs = {"1", "[layer]", "RMS of h_l"};

/* Writes report.h5 + report.json in scratch, analyzing a small input file. */
static void write_report(char *path, size_t len, char *input, size_t input_len)
{
    scratch_path(input, input_len, "input.bin");
    assert_int_equal(scratch_write_file(input, "abc", 3), 0);
    scratch_path(path, len, "report.h5");
    sp_report_provenance prov = {input, "{\"layers\": [0, 1], \"center\": false}", "3 tokens of abc", "abc model"};
    sp_report *r = NULL;
    sp_error_clear();
    assert_int_equal(sp_report_create(path, &prov, &r), SP_OK);
    double cos[6] = {1, 0.5, -0.25, 0.5, 1, 1e-300};
    int64_t cos_shape[2] = {2, 3}, rms_shape[1] = {3};
    float rms[3] = {0.5f, 1.25f, INFINITY};
    assert_int_equal(sp_report_write_array(r, "representations", "cosine", 2, cos_shape, cos, &cos_attrs), SP_OK);
    assert_int_equal(sp_report_write_array_f32(r, "growth", "rms", 1, rms_shape, rms, &norm_attrs), SP_OK);
    assert_int_equal(sp_report_set_scalar(r, "representations", "mean_adjacent_cosine", 0.5), SP_OK);
    assert_int_equal(sp_report_set_scalar(r, "representations", "mean_adjacent_cosine", 0.75), SP_OK);
    assert_int_equal(sp_report_set_scalar(r, "growth", "max_rms", INFINITY), SP_OK);
    assert_int_equal(sp_report_skip(r, "spectra", "no FFN latents in the dump"), SP_OK);
    assert_int_equal(sp_report_commit(r), SP_OK);
}

static void test_summary_path(void **state)
{
    (void)state;
    const char *cases[][2] = {{"out/r.h5", "out/r.json"}, {"r.hdf5", "r.json"}, {"report", "report.json"},
                              {".h5", ".h5.json"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *p = sp_report_summary_path(cases[i][0]);
        assert_string_equal(p, cases[i][1]);
        free(p);
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    char path[4200], input[4200];
    write_report(path, sizeof path, input, sizeof input);

    sp_report_reader *rd = NULL;
    assert_int_equal(sp_report_open(path, &rd), SP_OK);
    sp_report_array a;
    assert_int_equal(sp_report_read_array(rd, "representations", "cosine", &a), SP_OK);
    assert_int_equal(a.rank, 2);
    assert_int_equal(a.shape[0], 2);
    assert_int_equal(a.shape[1], 3);
    double want[6] = {1, 0.5, -0.25, 0.5, 1, 1e-300};
    assert_memory_equal(a.data, want, sizeof want);
    assert_string_equal(a.units, "cosine");
    assert_string_equal(a.shape_desc, "[layer, layer]");
    assert_string_equal(a.description, cos_attrs.description);
    sp_report_array_free(&a);
    assert_int_equal(sp_report_read_array(rd, "growth", "rms", &a), SP_OK);
    assert_true(a.data[1] == 1.25 && isinf(a.data[2]));
    sp_report_array_free(&a);
    sp_error_clear();
    assert_int_equal(sp_report_read_array(rd, "growth", "absent", &a), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "/metrics/growth/absent: missing dataset"));
    sp_error_clear();

    char sha[65], got[128];
    assert_int_equal(sp_sha256_file(input, sha, NULL), SP_OK);
    assert_int_equal(sp_report_get_provenance(rd, "input_sha256", got, sizeof got), SP_OK);
    assert_string_equal(got, sha);
    assert_int_equal(sp_report_get_provenance(rd, "eval_set", got, sizeof got), SP_OK);
    assert_string_equal(got, "3 tokens of abc");
    assert_int_equal(sp_report_get_provenance(rd, "model", got, sizeof got), SP_OK);
    assert_string_equal(got, "abc model");
    sp_report_close(rd);

    /* the summary: stable keys in order, scalars, null for non-finite, skipped reasons */
    char json_path[4200];
    scratch_path(json_path, sizeof json_path, "report.json");
    char *text = scratch_read_file(json_path, NULL);
    assert_non_null(text);
    cJSON *doc = cJSON_Parse(text);
    assert_non_null(doc);
    const char *keys[] = {"format", "format_version", "tool_version", "input", "metrics", "skipped"};
    const cJSON *item = doc->child;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++, item = item->next) {
        assert_non_null(item);
        assert_string_equal(item->string, keys[i]);
    }
    assert_null(item);
    assert_string_equal(cJSON_GetObjectItem(doc, "format")->valuestring, "spanprobe-report");
    const cJSON *in = cJSON_GetObjectItem(doc, "input");
    assert_string_equal(cJSON_GetObjectItem(in, "sha256")->valuestring, sha);
    assert_true(cJSON_GetObjectItem(in, "bytes")->valuedouble == 3);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(in, "options"), "center")));
    const cJSON *metrics = cJSON_GetObjectItem(doc, "metrics");
    const cJSON *rep = cJSON_GetObjectItem(metrics, "representations");
    assert_int_equal(cJSON_GetArraySize(rep), 1);
    assert_true(cJSON_GetObjectItem(rep, "mean_adjacent_cosine")->valuedouble == 0.75);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(metrics, "growth"), "max_rms")));
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "skipped"), "spectra")->valuestring,
                        "no FFN latents in the dump");
    cJSON_Delete(doc);
    free(text);
}

static void test_writer_errors(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "aborted.h5");
    sp_report_provenance prov = {NULL, NULL, "none", NULL};
    sp_report *r = NULL;
    assert_int_equal(sp_report_create(path, &prov, &r), SP_OK);
    assert_int_equal(scratch_count_entries("aborted.*"), 2); /* both temporary files */
    double x = 1;
    int64_t shape[1] = {1};
    sp_error_clear();
    assert_int_equal(sp_report_write_array(r, "bad/name", "x", 1, shape, &x, &norm_attrs), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "bad/name"));
    sp_error_clear();
    assert_int_equal(sp_report_set_scalar(r, "ok", "..", 1), SP_ERR_USAGE);
    sp_error_clear();
    assert_int_equal(sp_report_write_array(r, "ok", "x", 5, shape, &x, &norm_attrs), SP_ERR_USAGE);
    sp_error_clear();
    sp_report_abort(r);
    assert_int_equal(scratch_count_entries("aborted.*"), 0);

    prov.options_json = "{not json";
    assert_int_equal(sp_report_create(path, &prov, &r), SP_ERR_USAGE);
    assert_null(r);
    assert_int_equal(scratch_count_entries("aborted.*"), 0);
    sp_error_clear();

    prov.options_json = NULL;
    prov.input_path = "no-such-input.h5";
    assert_int_equal(sp_report_create(path, &prov, &r), SP_ERR_IO);
    assert_non_null(strstr(sp_error_message(), "no-such-input.h5"));
    sp_error_clear();

    prov.input_path = NULL;
    scratch_path(path, sizeof path, "no-dir/report.h5");
    assert_int_equal(sp_report_create(path, &prov, &r), SP_ERR_IO);
    assert_non_null(strstr(sp_error_message(), path));
    sp_error_clear();
}

static void expect_open_failure(const char *path, const char *fragment)
{
    sp_error_clear();
    sp_report_reader *r = NULL;
    sp_status st = sp_report_open(path, &r);
    const char *msg = sp_error_message();
    if (st != SP_ERR_INPUT || !strstr(msg, fragment) || !strstr(msg, path) || strchr(msg, '\n'))
        fail_msg("expected '%s', found %d: %s", fragment, st, msg);
    assert_null(r);
    sp_error_clear();
}

static void test_bad_files(void **state)
{
    (void)state;
    char good[4200], input[4200], path[4200];
    write_report(good, sizeof good, input, sizeof input);
    scratch_path(path, sizeof path, "bad.h5");

    h5_edit_copy(good, path);
    h5_edit_set_str(path, "/", "format", "something-else");
    expect_open_failure(path, "expected \"spanprobe-report\"");
    h5_edit_copy(good, path);
    h5_edit_set_str(path, "/", "format_version", "2.0");
    expect_open_failure(path, "newer");
    h5_edit_copy(good, path);
    h5_edit_delete_attr(path, "/metrics/growth/rms", "units");
    expect_open_failure(path, "/metrics/growth/rms/units: missing attribute");
    int64_t shape[1] = {3};
    h5_edit_copy(good, path);
    h5_edit_replace(path, "/metrics/growth/rms", H5T_STD_I64LE, 1, shape);
    expect_open_failure(path, "/metrics/growth/rms: expected a float dataset, found int64");
    h5_edit_copy(good, path);
    h5_edit_delete_attr(path, "/skipped/spectra", "reason");
    expect_open_failure(path, "/skipped/spectra/reason: missing attribute");
    h5_edit_copy(good, path);
    h5_edit_delete(path, "/provenance");
    expect_open_failure(path, "/provenance: missing group");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_path),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
