/* The command line as a user meets it ($SPANPROBE_BIN): --help of every command and --version;
 * `init` writing reproducible checkpoints; `inspect` on checkpoints, dumps and reports (text and
 * JSON, statistics over slabs); and on every bad input the documented exit code, exactly one line
 * on stderr, nothing on stdout and no output file left behind; the OpenMP wait policy a computing
 * command runs under. */
#include <cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/checkpoint.h"
#include "io/dump.h"
#include "io/report.h"
#include "kernels/backend.h"
#include "support/fixtures.h"
#include "support/h5_edit.h"
#include "support/scratch.h"
#include "support/train_runs.h"
#include "support/tree.h"

#define RUN(out, err, ...) scratch_run_cli((const char *const[]){__VA_ARGS__, NULL}, out, err)

static void need_cli(void)
{
    if (!getenv("SPANPROBE_BIN"))
        skip();
}

/* The tiny fixture checkpoint, copied to scratch/name so a test may damage it. */
static void fixture_copy(const char *name, char *path, size_t len)
{
    char fixture[4200];
    if (!fixture_file("tiny.h5", fixture, sizeof fixture)) {
        printf("skipped: no fixture (SPANPROBE_BIN and BUILD_DIR unset, or fixtures/build.sh failed)\n");
        skip();
    }
    scratch_path(path, len, name);
    h5_edit_copy(fixture, path);
}

/* A failed run: the exit code, one line on stderr naming the command and holding fragment, no stdout. */
static void expect_failure(int rc, char *out, char *err, int code, const char *command, const char *fragment)
{
    if (rc != code || scratch_count_lines(err) != 1 || *out)
        fail_msg("expected exit %d and one line on stderr, found %d; stdout '%s'; stderr '%s'", code, rc, out, err);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "spanprobe %s: ", command);
    if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, fragment))
        fail_msg("stderr lacks '%s' or '%s': %s", prefix, fragment, err);
    free(out);
    free(err);
}

static void test_help_and_version(void **state)
{
    (void)state;
    need_cli();
    char *out = NULL, *err = NULL;
    assert_int_equal(RUN(&out, &err, "--version"), 0);
    assert_non_null(strstr(out, SP_VERSION));
    free(out);
    free(err);
    assert_int_equal(RUN(&out, &err, "--help"), 0);
    /* every command listed under "commands:" answers --help on stdout with exit 0 */
    char *list = strstr(out, "commands:\n");
    assert_non_null(list);
    int n_commands = 0;
    for (char *line = strchr(list, '\n') + 1; line && strncmp(line, "  ", 2) == 0; line = strchr(line, '\n') + 1) {
        char name[32];
        assert_int_equal(sscanf(line, " %31s", name), 1);
        char *help = NULL, *help_err = NULL;
        if (RUN(&help, &help_err, name, "--help") != 0 || !*help || *help_err)
            fail_msg("%s --help: exit non-zero, empty stdout or text on stderr: %s", name, help_err);
        if (strcmp(name, "init") == 0 || strcmp(name, "inspect") == 0) {
            assert_non_null(strstr(help, "usage: spanprobe"));
            assert_non_null(strstr(help, "exit codes"));
        }
        if (strcmp(name, "init") == 0)
            assert_true(strstr(help, "--out") && strstr(help, "--seed") && strstr(help, "--d-model") &&
                        strstr(help, "--variant"));
        if (strcmp(name, "inspect") == 0)
            assert_non_null(strstr(help, "--json"));
        free(help);
        free(help_err);
        n_commands++;
    }
    assert_true(n_commands >= 2);
    free(out);
    free(err);
    assert_int_equal(RUN(&out, &err, "no-such-command"), SP_ERR_USAGE);
    free(out);
    free(err);
}

static sp_model *load(const char *path)
{
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    sp_error_clear();
    assert_int_equal(sp_ckpt_load(path, sp_backend_cpu(), &m, &meta), SP_OK);
    sp_ckpt_meta_free(&meta);
    return m;
}

static int same_params(const sp_model *a, const sp_model *b)
{
    int same = sp_model_n_params(a) == sp_model_n_params(b);
    for (int i = 0; same && i < sp_model_n_params(a); i++) {
        size_t bytes = sp_param_numel(sp_model_param_spec(a, i)) * sizeof(sp_real);
        sp_real *x = malloc(bytes), *y = malloc(bytes);
        sp_model_get_param(a, i, x);
        sp_model_get_param(b, i, y);
        same = memcmp(x, y, bytes) == 0;
        free(x);
        free(y);
    }
    return same;
}

static void test_init(void **state)
{
    (void)state;
    need_cli();
    char a[4200], b[4200], c[4200];
    scratch_path(a, sizeof a, "a.h5");
    scratch_path(b, sizeof b, "b.h5");
    scratch_path(c, sizeof c, "c.h5");
    char *out = NULL, *err = NULL;
    assert_int_equal(RUN(&out, &err, "init", "--config", "fixtures/tiny.json", "--seed", "5", "--out", a), 0);
    assert_string_equal(err, "");
    free(out);
    free(err);
    assert_int_equal(RUN(NULL, NULL, "init", "--config", "fixtures/tiny.json", "--seed", "5", "--out", b), 0);
    /* options after --config override it */
    assert_int_equal(RUN(NULL, NULL, "init", "--config", "fixtures/tiny.json", "--seed", "6", "--variant", "pre",
                         "--norm", "rmsnorm", "--out", c),
                     0);
    sp_model *ma = load(a), *mb = load(b), *mc = load(c);
    assert_true(same_params(ma, mb));
    assert_int_equal(sp_model_config(mc)->variant, SP_VARIANT_PRE);
    assert_int_equal(sp_model_config(mc)->norm, SP_NORM_RMSNORM);
    assert_int_equal(sp_model_config(mc)->d_model, sp_model_config(ma)->d_model);
    sp_ckpt_meta meta;
    assert_int_equal(sp_ckpt_read_meta(a, &meta), SP_OK);
    assert_true(meta.has_tokenizer && meta.tokenizer.kind == SP_TOK_BYTES);
    assert_non_null(strstr(meta.source, "--seed 5"));
    sp_ckpt_meta_free(&meta);
    sp_model_free(ma);
    sp_model_free(mb);
    sp_model_free(mc);
}

static void test_init_errors(void **state)
{
    (void)state;
    need_cli();
    char out_path[4200], bad_json[4200], missing_json[4200], no_dir[4200];
    scratch_path(out_path, sizeof out_path, "fail-out.h5");
    scratch_path(bad_json, sizeof bad_json, "bad.json");
    scratch_path(missing_json, sizeof missing_json, "missing.json");
    scratch_path(no_dir, sizeof no_dir, "no/dir/fail-out.h5");
    assert_int_equal(scratch_write_file(bad_json, "{\"d_model\": ", 12), 0);
    char *out, *err;
    int rc;
    rc = RUN(&out, &err, "init", "--out", out_path, "--d-model", "abc");
    expect_failure(rc, out, err, SP_ERR_USAGE, "init", "--d-model");
    rc = RUN(&out, &err, "init", "--out", out_path, "--n-heads", "3");
    expect_failure(rc, out, err, SP_ERR_USAGE, "init", "n_heads = 3 does not divide d_model = 64");
    rc = RUN(&out, &err, "init", "--out", out_path, "--variant", "sandwich");
    expect_failure(rc, out, err, SP_ERR_USAGE, "init", "sandwich");
    rc = RUN(&out, &err, "init", "--out", out_path, "--bogus", "1");
    expect_failure(rc, out, err, SP_ERR_USAGE, "init", "--bogus");
    rc = RUN(&out, &err, "init", "--out", out_path, "--seed", "-1");
    expect_failure(rc, out, err, SP_ERR_USAGE, "init", "--seed");
    rc = RUN(&out, &err, "init", "--d-model", "32");
    expect_failure(rc, out, err, SP_ERR_USAGE, "init", "--out");
    rc = RUN(&out, &err, "init", "--out", no_dir);
    expect_failure(rc, out, err, SP_ERR_IO, "init", "No such file or directory");
    rc = RUN(&out, &err, "init", "--config", missing_json, "--out", out_path);
    expect_failure(rc, out, err, SP_ERR_IO, "init", "missing.json");
    rc = RUN(&out, &err, "init", "--config", bad_json, "--out", out_path);
    expect_failure(rc, out, err, SP_ERR_INPUT, "init", "bad.json");
    assert_int_equal(scratch_count_entries("fail-out.h5*"), 0);
}

static cJSON *inspect_json(const char *path)
{
    char *out = NULL, *err = NULL;
    int rc = RUN(&out, &err, "inspect", path, "--json");
    if (rc != 0)
        fail_msg("inspect --json %s: exit %d: %s", path, rc, err);
    cJSON *doc = cJSON_Parse(out);
    assert_non_null(doc);
    free(out);
    free(err);
    return doc;
}

static const cJSON *find_tensor(const cJSON *doc, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "tensors"))
    {
        if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring, name) == 0)
            return t;
    }
    fail_msg("no tensor %s", name);
    return NULL;
}

static double stat_of(const cJSON *t, const char *key) { return cJSON_GetObjectItem(t, key)->valuedouble; }

static void test_inspect_checkpoint(void **state)
{
    (void)state;
    char path[4200];
    fixture_copy("inspect.h5", path, sizeof path);
    char *out = NULL, *err = NULL;
    assert_int_equal(RUN(&out, &err, "inspect", path), 0);
    assert_string_equal(err, "");
    assert_non_null(strstr(out, "spanprobe-checkpoint 1.1"));
    /* every parameter of the layout is in the table */
    sp_ckpt_meta meta;
    assert_int_equal(sp_ckpt_read_meta(path, &meta), SP_OK);
    sp_param_spec *specs = NULL;
    int n = 0;
    assert_int_equal(sp_param_layout(&meta.cfg, &specs, &n), SP_OK);
    char name[128];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "/params/%s ", specs[i].name);
        if (!strstr(out, name))
            fail_msg("the table lacks %s", name);
    }
    free(out);
    free(err);

    cJSON *doc = inspect_json(path);
    assert_string_equal(cJSON_GetObjectItem(doc, "format")->valuestring, SP_CKPT_FORMAT);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "tensors")), n);
    const cJSON *cfg = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "attributes"), "/config");
    assert_int_equal((int)cJSON_GetObjectItem(cfg, "d_model")->valuedouble, meta.cfg.d_model);
    assert_string_equal(cJSON_GetObjectItem(cfg, "variant")->valuestring, sp_variant_names[meta.cfg.variant]);
    /* statistics are the tensors' own: embeddings drawn with std init_std, gains all 1 */
    const cJSON *tok = find_tensor(doc, "/params/embed/tok");
    assert_string_equal(cJSON_GetObjectItem(tok, "dtype")->valuestring, "float32");
    assert_true(fabs(stat_of(tok, "std") - meta.cfg.init_std) < 0.1 * meta.cfg.init_std);
    assert_true(fabs(stat_of(tok, "mean")) < 0.1 * meta.cfg.init_std);
    assert_true(stat_of(tok, "min") < -2 * meta.cfg.init_std && stat_of(tok, "max") > 2 * meta.cfg.init_std);
    assert_int_equal((int)stat_of(tok, "bytes"), meta.cfg.vocab_size * meta.cfg.d_model * 4);
    const cJSON *gain = find_tensor(doc, "/params/blocks/0/n1/gain");
    assert_true(stat_of(gain, "min") == 1 && stat_of(gain, "max") == 1 && stat_of(gain, "std") == 0);
    cJSON_Delete(doc);
    free(specs);
    sp_ckpt_meta_free(&meta);

    /* NaN/Inf are counted, not fatal, for inspect */
    h5_edit_poison(path, "/params/blocks/1/ffn/w2", 7, NAN);
    doc = inspect_json(path);
    const cJSON *w2 = find_tensor(doc, "/params/blocks/1/ffn/w2");
    assert_int_equal((int)stat_of(w2, "nonfinite"), 7);
    assert_true(isfinite(stat_of(w2, "mean")));
    cJSON_Delete(doc);
}

static void test_inspect_bad_files(void **state)
{
    (void)state;
    char path[4200];
    char *out, *err;
    int rc;
    fixture_copy("bad-inspect.h5", path, sizeof path);
    rc = RUN(&out, &err, "inspect");
    expect_failure(rc, out, err, SP_ERR_USAGE, "inspect", "FILE");
    rc = RUN(&out, &err, "inspect", path, path);
    expect_failure(rc, out, err, SP_ERR_USAGE, "inspect", "unexpected argument");
    rc = RUN(&out, &err, "inspect", "no-such-file.h5");
    expect_failure(rc, out, err, SP_ERR_IO, "inspect", "no-such-file.h5");

    assert_int_equal(scratch_write_file(path, "plain text\n", 11), 0);
    rc = RUN(&out, &err, "inspect", path);
    expect_failure(rc, out, err, SP_ERR_INPUT, "inspect", "not an HDF5 file");

    fixture_copy("bad-inspect.h5", path, sizeof path);
    size_t len = 0;
    free(scratch_read_file(path, &len));
    assert_int_equal(truncate(path, (off_t)(len / 3)), 0);
    rc = RUN(&out, &err, "inspect", path);
    expect_failure(rc, out, err, SP_ERR_INPUT, "inspect", "truncated");

    fixture_copy("bad-inspect.h5", path, sizeof path);
    h5_edit_set_str(path, "/", "format", "keras-weights");
    rc = RUN(&out, &err, "inspect", path);
    expect_failure(rc, out, err, SP_ERR_INPUT, "inspect", "keras-weights");

    fixture_copy("bad-inspect.h5", path, sizeof path);
    h5_edit_set_str(path, "/", "format_version", "9.0");
    rc = RUN(&out, &err, "inspect", path);
    expect_failure(rc, out, err, SP_ERR_INPUT, "inspect", "newer");

    fixture_copy("bad-inspect.h5", path, sizeof path);
    h5_edit_delete(path, "/params/blocks/0/attn/wk");
    rc = RUN(&out, &err, "inspect", path);
    expect_failure(rc, out, err, SP_ERR_INPUT, "inspect", "/params/blocks/0/attn/wk: missing dataset");

    int64_t wrong[2] = {3, 3};
    fixture_copy("bad-inspect.h5", path, sizeof path);
    h5_edit_replace(path, "/params/blocks/0/attn/wk", H5T_IEEE_F32LE, 2, wrong);
    rc = RUN(&out, &err, "inspect", path);
    expect_failure(rc, out, err, SP_ERR_INPUT, "inspect", "expected shape");

    sp_ckpt_meta meta; /* an integer dataset of the right shape */
    fixture_copy("bad-inspect.h5", path, sizeof path);
    sp_error_clear();
    assert_int_equal(sp_ckpt_read_meta(path, &meta), SP_OK);
    int64_t wk[2] = {sp_config_kv_dim(&meta.cfg), meta.cfg.d_model};
    sp_ckpt_meta_free(&meta);
    h5_edit_replace(path, "/params/blocks/0/attn/wk", H5T_STD_U8LE, 2, wk);
    rc = RUN(&out, &err, "inspect", path);
    expect_failure(rc, out, err, SP_ERR_INPUT, "inspect", "expected a float dataset, found uint8");

    fixture_copy("bad-inspect.h5", path, sizeof path);
    h5_edit_set_int(path, "/config", "n_heads", 5);
    rc = RUN(&out, &err, "inspect", path);
    expect_failure(rc, out, err, SP_ERR_INPUT, "inspect", "does not divide");

    fixture_copy("bad-inspect.h5", path, sizeof path);
    h5_edit_set_str(path, "/config", "variant", "postpre");
    rc = RUN(&out, &err, "inspect", path);
    expect_failure(rc, out, err, SP_ERR_INPUT, "inspect", "/config/variant");
}

static void test_inspect_dump_and_report(void **state)
{
    (void)state;
    need_cli();
    /* a dump bigger than one slab (2^20 values): hidden [3, 512, 1024] holding the layer index */
    char path[4200];
    scratch_path(path, sizeof path, "big-dump.h5");
    sp_dump_info info = {.n_layers = 2, .d_model = 1024, .n_streams = 1, .vocab_size = 7, .batch = 2,
                         .seq_len = 256};
    int32_t *tokens = calloc(512, sizeof *tokens);
    sp_real *rows = malloc(512 * 1024 * sizeof *rows);
    sp_dump_writer *w = NULL;
    assert_int_equal(sp_dump_create(path, &info, tokens, &w), SP_OK);
    for (int l = 0; l <= 2; l++) {
        for (int i = 0; i < 512 * 1024; i++)
            rows[i] = (sp_real)l;
        assert_int_equal(sp_dump_write(w, SP_DUMP_HIDDEN, 0, l, 0, 512, rows), SP_OK);
    }
    assert_int_equal(sp_dump_commit(w), SP_OK);
    free(rows);
    free(tokens);
    cJSON *doc = inspect_json(path);
    assert_string_equal(cJSON_GetObjectItem(doc, "format")->valuestring, SP_DUMP_FORMAT);
    const cJSON *hidden = find_tensor(doc, "/hidden/0");
    assert_true(stat_of(hidden, "min") == 0 && stat_of(hidden, "max") == 2);
    assert_true(fabs(stat_of(hidden, "mean") - 1) < 1e-12);
    assert_true(fabs(stat_of(hidden, "std") - sqrt(2.0 / 3.0)) < 1e-12);
    assert_int_equal((int)stat_of(find_tensor(doc, "/tokens"), "max"), 0);
    cJSON_Delete(doc);

    scratch_path(path, sizeof path, "inspect-report.h5");
    sp_report_provenance prov = {NULL, "{}", "nothing", NULL};
    sp_report *r = NULL;
    assert_int_equal(sp_report_create(path, &prov, &r), SP_OK);
    double values[2] = {0.25, 0.75};
    int64_t shape[1] = {2};
    sp_report_array_attrs attrs = {"cosine", "[layer]", "adjacent-layer cosine"};
    assert_int_equal(sp_report_write_array(r, "repr", "adjacent_cosine", 1, shape, values, &attrs), SP_OK);
    assert_int_equal(sp_report_commit(r), SP_OK);
    char *out = NULL, *err = NULL;
    assert_int_equal(RUN(&out, &err, "inspect", path), 0);
    assert_non_null(strstr(out, "spanprobe-report 1.1"));
    assert_non_null(strstr(out, "/metrics/repr/adjacent_cosine"));
    assert_non_null(strstr(out, "units=cosine"));
    free(out);
    free(err);
}

/* The OMP_WAIT_POLICY in the environment of a running `train` (read from /proc while it trains). */
static void policy_of_train(const char *text, const char *out, char *policy, size_t len)
{
    const char *args[] = {"train", "--n-layers", "2", "--d-model", "16", "--n-heads", "2", "--n-kv-heads", "2",
                          "--d-ff", "32", "--max-seq-len", "16", "--steps", "100000", "--data", text, "--out", out,
                          "--device", "cpu", NULL};
    pid_t pid = scratch_spawn_cli(args);
    assert_true(pid > 0);
    snprintf(policy, len, "(unset)");
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    for (int tries = 0; tries < 200; tries++) { /* until the restarted process has begun training */
        nanosleep(&(struct timespec){0, 20000000}, NULL);
        size_t n = 0;
        char *env = scratch_read_file(path, &n);
        int found = 0;
        for (size_t i = 0; env && i < n; i += strlen(env + i) + 1)
            if (strncmp(env + i, "OMP_WAIT_POLICY=", 16) == 0) {
                snprintf(policy, len, "%s", env + i + 16);
                found = 1;
            }
        free(env);
        char out_file[4300];
        snprintf(out_file, sizeof out_file, "%s/train_options.json", out);
        if (found && scratch_file_exists(out_file))
            break;
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* A computing command waits passively unless the user chose a policy. */
static void test_wait_policy(void **state)
{
    (void)state;
    if (!getenv("SPANPROBE_BIN"))
        skip();
    if (access("/proc/self/environ", R_OK) != 0) {
        print_message("skipped: no /proc here\n");
        skip();
    }
    char text[4200], out[4200], policy[64];
    scratch_path(text, sizeof text, "policy.txt");
    char *words = train_make_text(4000, 7);
    assert_int_equal(scratch_write_file(text, words, 4000), 0);
    free(words);
    scratch_path(out, sizeof out, "policy_run");
    unsetenv("OMP_WAIT_POLICY");
    policy_of_train(text, out, policy, sizeof policy);
    assert_string_equal(policy, "passive");
    tree_remove(out);
    setenv("OMP_WAIT_POLICY", "active", 1);
    policy_of_train(text, out, policy, sizeof policy);
    unsetenv("OMP_WAIT_POLICY");
    assert_string_equal(policy, "active");
    tree_remove(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_inspect_checkpoint),
        cmocka_unit_test(test_inspect_bad_files),
        cmocka_unit_test(test_inspect_dump_and_report),
        cmocka_unit_test(test_wait_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
