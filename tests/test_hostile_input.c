/* Hostile or unlucky input at every entry point of the CLI (issue 15), each run bounded by a short
 * alarm so that a hang fails the test instead of stalling the suite:
 * - a FIFO given as any input (model, report, text, token file, config, rules, tokenizer) is
 *   refused at once: exit 5, one line naming it, no output left behind;
 * - no command writes over one of its inputs: the checkpoint, the config it was made from, a token
 *   file that a report's JSON summary would replace, a report or its summary under --junit, a
 *   llama2.c model; exit 2 with one line, every input byte for byte as it was;
 * - HDF5 links: a hard link back to the root, a soft link to the root and an external link to a FIFO
 *   inside a checkpoint leave `inspect` finishing with a warning per link (no recursion, no wait)
 *   and the model readers unaffected; a required tensor replaced by an external link is an error
 *   naming it (exit 3), never a wait on the FIFO;
 * - JSON configs are held to the command line's rules: a fractional integer or a string longer than
 *   its field is refused (exit 3), never rounded or cut;
 * - a checkpoint whose activations overflow float32 (finite weights of 3e38) is no dump of Inf with
 *   exit 0 but exit 4 naming the array, layer and token, with nothing written; one whose Jacobian
 *   products overflow (a single steep path through a block) is exit 4 naming the checkpoint, the
 *   analyzer and the Jacobian (which blocks, how many tokens);
 * - one writer per directory: a second `train` on a directory being trained exits 2 naming the
 *   holder's pid; once the first is killed (SIGKILL, no cleanup) the directory is free again;
 * - temporary files of writers that no longer run are removed by the next write to their
 *   directory; a live writer's, and other files, are left;
 * - messages stay one line: control characters in a file name are escaped, and `spanprobe` with no
 *   command says so in one line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/cli_expect.h"
#include "support/h5_edit.h"
#include "support/scratch.h"

#define LIMIT 60 /* seconds: every run here takes well under one */

typedef struct {
    char ckpt[4200], report[4200], summary[4200], ids[4200], config[4200], fifo[4200];
} fixture;

static char *file_in(const char *name)
{
    static char buf[8][4200];
    static int next;
    char *p = buf[next++ % 8];
    scratch_path(p, sizeof buf[0], name);
    return p;
}

static int group_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    scratch_path(f->ckpt, sizeof f->ckpt, "hostile_ckpt.h5");
    scratch_path(f->report, sizeof f->report, "hostile_report.h5");
    scratch_path(f->summary, sizeof f->summary, "hostile_report.json");
    scratch_path(f->ids, sizeof f->ids, "hostile_ids.json"); /* named like a report's summary on purpose */
    scratch_path(f->config, sizeof f->config, "hostile_config.json");
    scratch_path(f->fifo, sizeof f->fifo, "hostile.fifo");
    const char *ids = "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18\n";
    const char *config = "{\"n_layers\": 2, \"d_model\": 16, \"n_heads\": 2, \"n_kv_heads\": 2, \"d_ff\": 32, \"max_seq_len\": 16}\n";
    unlink(f->fifo);
    if (scratch_write_file(f->ids, ids, strlen(ids)) != 0 || scratch_write_file(f->config, config, strlen(config)) != 0 ||
        mkfifo(f->fifo, 0600) != 0 ||
        scratch_run_cli((const char *[]){"init", "--config", f->config, "--out", f->ckpt, NULL}, NULL, NULL) != 0 ||
        scratch_run_cli((const char *[]){"analyze", f->ckpt, "--tokens", f->ids, "--seq", "8", "--out", f->report,
                                         "--metrics", "similarity,growth", "--device", "cpu", "--quiet", NULL},
                        NULL, NULL) != 0) {
        free(f);
        *state = NULL; /* no CLI to run: every test skips */
        return 0;
    }
    *state = f;
    return 0;
}

static fixture *need(void **state) { return cli_group_state(state, "SPANPROBE_BIN is not set"); }

/* args must fail with `code` within LIMIT seconds, with one line on stderr holding `needle`. */
static void expect_quick_error(int code, const char *const *args, const char *needle)
{
    char *out = NULL, *err = NULL;
    int rc = scratch_run_cli_within(LIMIT, args, &out, &err);
    if (rc != code || scratch_count_lines(err) != 1 || !strstr(err, needle))
        fail_msg("%s %s ...: exit %d (expected %d within %d s), stderr:\n%s", args[0] ? args[0] : "(no arguments)",
                 args[0] && args[1] ? args[1] : "", rc, code, LIMIT, err);
    free(out);
    free(err);
}

static void test_fifo_inputs(void **state)
{
    fixture *f = need(state);
    const char *q = f->fifo, *ck = f->ckpt, *r = f->report, *out = file_in("fifo_out.h5"), *dir = file_in("fifo_dir");
    const char *const *cases[] = {
        (const char *[]){"inspect", q, NULL},
        (const char *[]){"analyze", q, "--out", out, NULL},
        (const char *[]){"analyze", ck, "--tokens", q, "--seq", "8", "--out", out, NULL},
        (const char *[]){"analyze", ck, "--data", q, "--seq", "8", "--out", out, NULL},
        (const char *[]){"dump", q, "--tokens", f->ids, "--out", out, NULL},
        (const char *[]){"dump", ck, "--text", q, "--seq", "8", "--out", out, NULL},
        (const char *[]){"generate", q, "--steps", "2", NULL},
        (const char *[]){"tokenize", q, "--text", f->ids, NULL},
        (const char *[]){"drift", q, ck, "--tokens", f->ids, "--out", out, NULL},
        (const char *[]){"drift", ck, q, "--tokens", f->ids, "--out", out, NULL},
        (const char *[]){"check", q, NULL},
        (const char *[]){"check", r, "--rules", q, NULL},
        (const char *[]){"compare", r, q, NULL},
        (const char *[]){"plot", q, "--out", dir, NULL},
        (const char *[]){"import", "llama2c", q, q, out, NULL},
        (const char *[]){"init", "--config", q, "--out", out, NULL},
        (const char *[]){"train", "--data", q, "--out", dir, "--steps", "2", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_quick_error(5, cases[i], "found a FIFO");
    assert_false(scratch_file_exists(out));
    assert_int_equal(scratch_count_entries("*.tmp.*"), 0);
}

static void test_outputs_never_replace_inputs(void **state)
{
    fixture *f = need(state);
    const char *inputs[] = {f->ckpt, f->report, f->summary, f->ids, f->config};
    enum { N_INPUTS = 5 };
    char *before[N_INPUTS];
    size_t len[N_INPUTS];
    for (int i = 0; i < N_INPUTS; i++)
        before[i] = scratch_read_file(inputs[i], &len[i]);
    char ids_report[4200];
    snprintf(ids_report, sizeof ids_report, "%.*s.h5", (int)(strlen(f->ids) - 5), f->ids); /* its summary: ids */
    const char *const *cases[] = {
        (const char *[]){"init", "--config", f->config, "--out", f->config, NULL},
        (const char *[]){"analyze", f->ckpt, "--tokens", f->ids, "--seq", "8", "--out", f->ckpt, NULL},
        (const char *[]){"analyze", f->ckpt, "--tokens", f->ids, "--seq", "8", "--out", ids_report, NULL},
        (const char *[]){"analyze", f->report, "--out", f->report, NULL},
        (const char *[]){"dump", f->ckpt, "--tokens", f->ids, "--seq", "8", "--out", f->ckpt, NULL},
        (const char *[]){"dump", f->ckpt, "--tokens", f->ids, "--seq", "8", "--out", f->ids, NULL},
        (const char *[]){"drift", f->ckpt, f->ckpt, "--tokens", f->ids, "--seq", "8", "--out", ids_report, NULL},
        (const char *[]){"check", f->report, "--junit", f->report, NULL},
        (const char *[]){"check", f->report, "--junit", f->summary, NULL},
        (const char *[]){"check", f->report, "--rules", f->config, "--junit", f->config, NULL},
        (const char *[]){"import", "llama2c", f->ckpt, f->ids, f->ckpt, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        /* caught by the guard itself, before anything is read or written */
        expect_quick_error(2, cases[c], "the output is the input");
        for (int i = 0; i < N_INPUTS; i++) {
            size_t now_len;
            char *now = scratch_read_file(inputs[i], &now_len);
            if (now_len != len[i] || memcmp(now, before[i], len[i]) != 0)
                fail_msg("%s %s: changed %s", cases[c][0], cases[c][1], inputs[i]);
            free(now);
        }
    }
    for (int i = 0; i < N_INPUTS; i++)
        free(before[i]);
    assert_int_equal(scratch_count_entries("*.tmp.*"), 0);
}

static void test_hdf5_links(void **state)
{
    fixture *f = need(state);
    char linked[4200];
    scratch_path(linked, sizeof linked, "hostile_links.h5");
    h5_edit_copy(f->ckpt, linked);
    h5_edit_link(linked, "/back_to_root", 'h', "/", NULL);
    h5_edit_link(linked, "/soft_to_root", 's', "/", NULL);
    h5_edit_link(linked, "/to_a_fifo", 'e', "/", f->fifo);
    char *out = NULL, *err = NULL;
    int rc = scratch_run_cli_within(LIMIT, (const char *[]){"inspect", linked, NULL}, &out, &err);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(err, "/back_to_root: a link back to a group that holds it, not followed"));
    assert_non_null(strstr(err, "/soft_to_root: a soft link, not followed"));
    assert_non_null(strstr(err, "/to_a_fifo: an external link, not followed"));
    assert_non_null(strstr(out, "/config"));
    free(out);
    free(err);
    /* the model readers open known paths only: the links change nothing for them */
    rc = scratch_run_cli_within(LIMIT, (const char *[]){"generate", linked, "--steps", "2", NULL}, &out, &err);
    assert_int_equal(rc, 0);
    free(out);
    free(err);

    char external[4200];
    scratch_path(external, sizeof external, "hostile_external.h5");
    h5_edit_copy(f->ckpt, external);
    h5_edit_link(external, "/params/embed/tok", 'e', "/params/embed/tok", f->fifo);
    expect_quick_error(3, (const char *[]){"generate", external, "--steps", "2", NULL}, "external link");
    expect_quick_error(3, (const char *[]){"analyze", external, "--tokens", f->ids, "--seq", "8", "--out",
                                           file_in("external_report.h5"), NULL},
                       "external link");
}

static void test_config_values_never_changed(void **state)
{
    fixture *f = need(state);
    char config[4200], dir[4200];
    scratch_path(config, sizeof config, "fractional.json");
    const char *fractional = "{\"n_layers\": 2, \"d_model\": 16.4, \"n_heads\": 2, \"n_kv_heads\": 2}";
    assert_int_equal(scratch_write_file(config, fractional, strlen(fractional)), 0);
    expect_quick_error(3, (const char *[]){"init", "--config", config, "--out", file_in("fractional.h5"), NULL},
                       "d_model");
    char long_path[400], text[600];
    memset(long_path, 'a', 300);
    long_path[300] = '\0';
    snprintf(text, sizeof text, "{\"data\": \"%s\"}", long_path);
    scratch_path(config, sizeof config, "long_path.json");
    assert_int_equal(scratch_write_file(config, text, strlen(text)), 0);
    scratch_path(dir, sizeof dir, "long_path_run");
    expect_quick_error(3, (const char *[]){"train", "--config", config, "--out", dir, NULL},
                       "data: longer than 255 characters");
    assert_false(scratch_file_exists(dir));
    (void)f;
}

static void test_dump_overflow(void **state)
{
    fixture *f = need(state);
    char huge[4200], out[4200];
    scratch_path(huge, sizeof huge, "overflowing.h5");
    scratch_path(out, sizeof out, "overflowing_dump.h5");
    h5_edit_copy(f->ckpt, huge);
    h5_edit_poison(huge, "/params/blocks/0/ffn/w1", 1 << 20, 3e38);
    expect_quick_error(4, (const char *[]){"dump", huge, "--tokens", f->ids, "--seq", "8", "--out", out, NULL},
                       "overflow float32");
    assert_false(scratch_file_exists(out));
    assert_int_equal(scratch_count_entries("*.tmp.*"), 0);
}

static void test_jacobian_overflow_named(void **state)
{
    fixture *f = need(state);
    char steep[4200], out[4200];
    scratch_path(steep, sizeof steep, "steep.h5");
    scratch_path(out, sizeof out, "steep_report.h5");
    h5_edit_copy(f->ckpt, steep);
    /* one path through block 0's FFN with gain 1e38: the forward pass stays finite, J V does not */
    h5_edit_poison(steep, "/params/blocks/0/ffn/w1", 1, 1e19);
    h5_edit_poison(steep, "/params/blocks/0/ffn/w2", 1, 1e19);
    /* named by the first product that overflows: the end-to-end chain from block 0 */
    expect_quick_error(4,
                       (const char *[]){"analyze", steep, "--tokens", f->ids, "--seq", "8", "--out", out, "--metrics",
                                        "jacobian", "--device", "cpu", "--quiet", NULL},
                       "steep.h5: jacobian: d h_2 / d h_0 over the first 8 tokens: ");
    assert_false(scratch_file_exists(out));
}

static void test_train_directory_lock(void **state)
{
    fixture *f = need(state);
    char dir[4200], lock[4300];
    scratch_path(dir, sizeof dir, "locked_run");
    snprintf(lock, sizeof lock, "%s/.spanprobe.lock", dir);
    const char *long_run[] = {"train", "--config", f->config, "--data", f->ids, "--val-fraction", "0", "--seq-len", "4", "--batch-size", "1",
                              "--steps", "100000000", "--eval-every", "0", "--ckpt-every", "0", "--out", dir,
                              "--device", "cpu", NULL};
    pid_t first = scratch_spawn_cli(long_run);
    assert_true(first > 0);
    char *text = NULL;
    for (int i = 0; i < 600 && !(text && atol(text) == (long)first); i++) { /* up to 60 s to start */
        free(text);
        nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL);
        text = scratch_read_file(lock, NULL);
    }
    assert_non_null(text);
    assert_int_equal(atol(text), (long)first);
    free(text);
    char holder[64];
    snprintf(holder, sizeof holder, "in use by another spanprobe process (pid %ld)", (long)first);
    const char *second[] = {"train", "--config", f->config, "--data", f->ids, "--val-fraction", "0", "--seq-len", "4", "--steps", "2",
                            "--out", dir, "--device", "cpu", NULL};
    expect_quick_error(2, second, holder);
    kill(first, SIGKILL);
    waitpid(first, NULL, 0);
    char *out = NULL, *err = NULL;
    int rc = scratch_run_cli_within(LIMIT, second, &out, &err);
    if (rc != 0)
        fail_msg("train after the holder was killed: exit %d: %s", rc, err);
    free(out);
    free(err);
}

static void test_stale_temporaries_removed(void **state)
{
    fixture *f = need(state);
    pid_t gone = fork(); /* a pid that no longer runs */
    if (gone == 0)
        _exit(0);
    waitpid(gone, NULL, 0);
    char stale[4200], live[4200], other[4200], name[128];
    snprintf(name, sizeof name, "old_report.h5.tmp.%ld.AbC123", (long)gone);
    scratch_path(stale, sizeof stale, name);
    snprintf(name, sizeof name, "busy_report.h5.tmp.%ld.XyZ789", (long)getpid());
    scratch_path(live, sizeof live, name);
    scratch_path(other, sizeof other, "notes.tmp.txt");
    const char *paths[] = {stale, live, other};
    for (int i = 0; i < 3; i++)
        assert_int_equal(scratch_write_file(paths[i], "x", 1), 0);
    char *out = NULL, *err = NULL;
    assert_int_equal(scratch_run_cli_within(LIMIT,
                                            (const char *[]){"analyze", f->ckpt, "--tokens", f->ids, "--seq", "8",
                                                             "--out", file_in("after_stale.h5"), "--metrics", "growth",
                                                             "--device", "cpu", "--quiet", NULL},
                                            &out, &err),
                     0);
    free(out);
    free(err);
    assert_false(scratch_file_exists(stale));
    assert_true(scratch_file_exists(live));
    assert_true(scratch_file_exists(other));
    unlink(live);
    unlink(other);
}

static void test_messages_stay_one_line(void **state)
{
    fixture *f = need(state);
    char name[4200];
    scratch_path(name, sizeof name, "line\nbreak\x1b[31mred.h5");
    expect_quick_error(5, (const char *[]){"inspect", name, NULL}, "line\\nbreak\\x1b[31mred.h5");
    expect_quick_error(2, (const char *[]){"no\rsuch\ncommand", NULL}, "unknown command 'no\\rsuch\\ncommand'");
    char *out = NULL, *err = NULL;
    assert_int_equal(scratch_run_cli_within(LIMIT, (const char *[]){NULL}, &out, &err), 2);
    cli_expect_one_line(err, (const char *[]){"expected a command", "--help", NULL});
    free(out);
    free(err);
    (void)f;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_inputs),
        cmocka_unit_test(test_outputs_never_replace_inputs),
        cmocka_unit_test(test_hdf5_links),
        cmocka_unit_test(test_config_values_never_changed),
        cmocka_unit_test(test_dump_overflow),
        cmocka_unit_test(test_jacobian_overflow_named),
        cmocka_unit_test(test_train_directory_lock),
        cmocka_unit_test(test_stale_temporaries_removed),
        cmocka_unit_test(test_messages_stay_one_line),
    };
    return cmocka_run_group_tests(tests, group_setup, cli_group_free);
}
