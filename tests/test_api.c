/* The C API (include/spanprobe/spanprobe.h): versions and errors (a code and one line, per call); a
 * fresh model trained by the caller's own loop learns (its loss falls), survives a save and a
 * reopen bit for bit; analyses by option name into a file and into memory give the same summary,
 * two analyses interleave without sharing state, and the in-memory report leaves no file. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "spanprobe/spanprobe.h"
#include "support/scratch.h"
#include "support/tree.h"

enum { BATCH = 4, SEQ = 16 };

static const char *const CONFIG = "{\"variant\": \"span\", \"n_layers\": 3, \"d_model\": 16, \"n_heads\": 2, "
                                  "\"n_kv_heads\": 2, \"d_ff\": 32, \"max_seq_len\": 16, \"vocab_size\": 12}";

static void periodic(int32_t *tokens, int32_t *targets)
{
    for (int b = 0; b < BATCH; b++)
        for (int t = 0; t < SEQ; t++) {
            tokens[b * SEQ + t] = (b + 5 * t) % 12;
            targets[b * SEQ + t] = (b + 5 * (t + 1)) % 12;
        }
}

static void test_versions_and_errors(void **state)
{
    (void)state;
    assert_int_equal(spanprobe_api_version(), SPANPROBE_API_VERSION);
    assert_non_null(strchr(spanprobe_version(), '.'));
    spanprobe_analysis *a;
    assert_int_equal(spanprobe_analysis_new(&a), 0);
    assert_int_equal(spanprobe_analysis_set(a, "no-such-option", "1"), 2);
    assert_non_null(strstr(spanprobe_last_error(), "no_such_option"));
    assert_int_equal(spanprobe_analysis_set(a, "power-iters", "7"), 0); /* dashes or underscores */
    assert_string_equal(spanprobe_last_error(), "");
    spanprobe_analysis_free(a);
    spanprobe_model *m = NULL;
    assert_int_equal(spanprobe_model_open("/nonexistent/model.h5", "cpu", &m), 5);
    assert_null(m);
    assert_non_null(strstr(spanprobe_last_error(), "/nonexistent/model.h5"));
    assert_int_equal(spanprobe_model_new("{\"d_model\": 15, \"n_heads\": 2}", 1, "cpu", &m), 3);
    assert_non_null(strstr(spanprobe_last_error(), "d_model"));
    assert_non_null(strstr(spanprobe_last_error(), "d_model"));
    assert_null(m);
}

static void test_train_save_reopen(void **state)
{
    (void)state;
    int32_t tokens[BATCH * SEQ], targets[BATCH * SEQ];
    periodic(tokens, targets);
    spanprobe_model *m;
    assert_int_equal(spanprobe_model_new(CONFIG, 3, "cpu", &m), 0);
    assert_int_equal(spanprobe_model_layers(m), 3);
    double first = 0, last = 0;
    for (int step = 0; step < 40; step++)
        assert_int_equal(spanprobe_model_train_step(m, tokens, targets, BATCH, SEQ, 1e-2, step ? &last : &first), 0);
    print_message("loss %.4f -> %.4f over 40 steps\n", first, last);
    assert_true(last < 0.5 * first);
    char path[4096];
    scratch_path(path, sizeof path, "api_model.h5");
    assert_int_equal(spanprobe_model_save(m, path), 0);
    spanprobe_model *again;
    assert_int_equal(spanprobe_model_open(path, "cpu", &again), 0);
    double la, lb;
    assert_int_equal(spanprobe_model_forward(m, tokens, targets, BATCH, SEQ, &la), 0);
    assert_int_equal(spanprobe_model_forward(again, tokens, targets, BATCH, SEQ, &lb), 0);
    assert_true(la == lb);
    const size_t n = (size_t)BATCH * SEQ * 16;
    float *ha = malloc(n * sizeof *ha), *hb = malloc(n * sizeof *hb);
    assert_int_equal(spanprobe_model_hidden(m, 3, ha), 0);
    assert_int_equal(spanprobe_model_hidden(again, 3, hb), 0);
    assert_memory_equal(ha, hb, n * sizeof *ha);
    assert_int_equal(spanprobe_model_hidden(m, 4, ha), 2); /* layers 0..3 */
    free(ha);
    free(hb);
    spanprobe_model_free(again);
    spanprobe_model_free(m);
}

static int dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n == 0;
}

static void test_analyses_file_memory_interleaved(void **state)
{
    (void)state;
    char model[4096], ids[4096], report[4096], tmp[4096];
    scratch_path(model, sizeof model, "api_probe.h5");
    scratch_path(ids, sizeof ids, "api_ids.txt");
    scratch_path(report, sizeof report, "api_report.h5");
    scratch_path(tmp, sizeof tmp, "api_tmpdir");
    spanprobe_model *m;
    assert_int_equal(spanprobe_model_new(CONFIG, 5, "cpu", &m), 0);
    assert_int_equal(spanprobe_model_save(m, model), 0);
    spanprobe_model_free(m);
    FILE *f = fopen(ids, "w");
    assert_non_null(f);
    for (int i = 0; i < 64; i++)
        fprintf(f, "%d%c", (7 * i) % 12, i % 16 == 15 ? '\n' : ' ');
    fclose(f);

    spanprobe_analysis *a, *b;
    assert_int_equal(spanprobe_analysis_new(&a), 0);
    assert_int_equal(spanprobe_analysis_new(&b), 0);
    const char *opts[][2] = {{"tokens", ids}, {"device", "cpu"}, {"n_tokens", "64"}};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(spanprobe_analysis_set(a, opts[i][0], opts[i][1]), 0);
        assert_int_equal(spanprobe_analysis_set(b, opts[i][0], opts[i][1]), 0);
    }
    assert_int_equal(spanprobe_analysis_set(a, "metrics", "similarity"), 0);
    assert_int_equal(spanprobe_analysis_set(b, "metrics", "growth"), 0);

    assert_int_equal(mkdir(tmp, 0700), 0);
    setenv("TMPDIR", tmp, 1);
    spanprobe_report *in_memory, *from_file, *other;
    assert_int_equal(spanprobe_analysis_run(a, model, NULL, &in_memory), 0);
    assert_int_equal(spanprobe_analysis_run(b, model, NULL, &other), 0);
    assert_true(dir_is_empty(tmp)); /* the open reports are in memory only */
    assert_int_equal(spanprobe_analysis_run(a, model, report, NULL), 0);
    assert_int_equal(spanprobe_report_open(report, &from_file), 0);
    unsetenv("TMPDIR");

    double x, y;
    assert_int_equal(spanprobe_report_scalar(in_memory, "similarity", "adjacent_cosine_mean", &x), 0);
    assert_int_equal(spanprobe_report_scalar(from_file, "similarity", "adjacent_cosine_mean", &y), 0);
    assert_true(x == y && x > -1 && x <= 1);
    /* the model handle itself, analyzed as it is: the same numbers */
    spanprobe_model *again;
    spanprobe_report *of_handle;
    assert_int_equal(spanprobe_model_open(model, "cpu", &again), 0);
    setenv("TMPDIR", tmp, 1);
    assert_int_equal(spanprobe_analysis_run_model(a, again, NULL, &of_handle), 0);
    unsetenv("TMPDIR");
    assert_true(dir_is_empty(tmp));
    assert_int_equal(spanprobe_report_scalar(of_handle, "similarity", "adjacent_cosine_mean", &y), 0);
    assert_true(x == y);
    spanprobe_report_close(of_handle);
    spanprobe_model_free(again);
    assert_int_equal(spanprobe_report_scalar(other, "growth", "rms_last", &y), 0);
    assert_int_equal(spanprobe_report_scalar(other, "similarity", "adjacent_cosine_mean", &y), 3); /* not run */
    double *cos = NULL;
    int rank;
    int64_t shape[4];
    char units[64];
    assert_int_equal(spanprobe_report_array(in_memory, "similarity", "cosine", &cos, &rank, shape, units), 0);
    assert_int_equal(rank, 2);
    assert_int_equal(shape[0], 4);
    assert_int_equal(shape[1], 4);
    assert_string_equal(units, "cosine");
    assert_true(fabs(cos[0] - 1) < 1e-6); /* cos(h_0, h_0) */
    spanprobe_free(cos);
    spanprobe_report_close(in_memory);
    spanprobe_report_close(from_file);
    spanprobe_report_close(other);
    spanprobe_analysis_free(a);
    spanprobe_analysis_free(b);
    assert_int_equal(tree_remove(tmp), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_and_errors),
        cmocka_unit_test(test_train_save_reopen),
        cmocka_unit_test(test_analyses_file_memory_interleaved),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
