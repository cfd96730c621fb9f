/* Random single-bit flips of every kind of spanprobe HDF5 file (issue 15): a checkpoint, an
 * activation dump, a report and a training log, made by the CLI, are each corrupted FLIPS times
 * (seeded, so a failure names a reproducible flip) and read in this process by the library reader
 * of that kind, reading everything it holds. Each read must end in a clean error (one message, a
 * documented status) or a read that still describes the same thing (the checkpoint's config, the
 * dump's shape, the report's arrays); it must never crash, hang (an alarm per read) or trip a
 * sanitizer. Before io/h5_vet.c about 1 flip in 100 crashed inside libhdf5 (H5HG_read, H5Dread). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/dump.h"
#include "io/h5.h"
#include "io/report.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "support/cli_expect.h"
#include "support/scratch.h"
#include "train/trainlog.h"

#define FLIPS 500         /* per kind of file: 2,000 reads per run */
#define READ_SECONDS 30   /* a read that takes longer is a hang */
#define SEED 0x5eed15ULL

typedef struct {
    char ckpt[4200], dump[4200], report[4200], trainlog[4300];
} fixture;

static int group_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char config[4200], text[4200], ids[4200], train_dir[4200];
    if (!f)
        return -1;
    scratch_path(f->ckpt, sizeof f->ckpt, "flip_ckpt.h5");
    scratch_path(f->dump, sizeof f->dump, "flip_dump.h5");
    scratch_path(f->report, sizeof f->report, "flip_report.h5");
    scratch_path(config, sizeof config, "flip_config.json");
    scratch_path(text, sizeof text, "flip_text.txt");
    scratch_path(ids, sizeof ids, "flip_ids.txt");
    scratch_path(train_dir, sizeof train_dir, "flip_train");
    snprintf(f->trainlog, sizeof f->trainlog, "%s/trainlog.h5", train_dir);
    const char *cfg = "{\"n_layers\": 2, \"d_model\": 16, \"n_heads\": 2, \"n_kv_heads\": 2, \"d_ff\": 32, \"max_seq_len\": 16}\n";
    const char *token_ids = "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n";
    char words[4096] = "";
    for (int i = 0; i < 60; i++)
        strcat(words, "call me ishmael. some years ago, never mind how long. ");
    if (scratch_write_file(config, cfg, strlen(cfg)) != 0 || scratch_write_file(ids, token_ids, strlen(token_ids)) != 0 ||
        scratch_write_file(text, words, strlen(words)) != 0 ||
        scratch_run_cli((const char *[]){"init", "--config", config, "--out", f->ckpt, NULL}, NULL, NULL) != 0 ||
        scratch_run_cli((const char *[]){"dump", f->ckpt, "--tokens", ids, "--seq", "8", "--out", f->dump, "--device",
                                         "cpu", NULL},
                        NULL, NULL) != 0 ||
        scratch_run_cli((const char *[]){"analyze", f->ckpt, "--tokens", ids, "--seq", "8", "--out", f->report,
                                         "--metrics", "similarity,growth,grad_norms", "--device", "cpu", "--quiet", NULL},
                        NULL, NULL) != 0 ||
        scratch_run_cli((const char *[]){"train", "--config", config, "--data", text, "--steps", "3", "--batch-size", "2",
                                         "--seq-len", "8", "--out", train_dir, "--device", "cpu", NULL},
                        NULL, NULL) != 0) {
        free(f);
        *state = NULL; /* no CLI to make the files: every test skips */
        return 0;
    }
    sp_h5_set_vet_seconds(READ_SECONDS);
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    free(*state);
    return 0;
}

static fixture *need(void **state) { return cli_group_state(state, "SPANPROBE_BIN is not set"); }

/* ---- one reader per kind: SP_OK only when everything was read and still describes `like` ---- */

typedef sp_status (*read_all_fn)(const char *path, const void *like, void *summary);

typedef struct {
    int n_layers, d_model, vocab_size;
} ckpt_summary;

static sp_status read_ckpt(const char *path, const void *like, void *summary)
{
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    sp_status st = sp_ckpt_load(path, sp_backend_cpu(), &m, &meta);
    if (st == SP_OK) {
        ckpt_summary got = {meta.cfg.n_layers, meta.cfg.d_model, meta.cfg.vocab_size};
        if (summary)
            *(ckpt_summary *)summary = got;
        if (like && memcmp(like, &got, sizeof got) != 0)
            fail_msg("%s: read without error but describes another model (%d layers, d_model %d)", path, got.n_layers,
                     got.d_model);
    }
    sp_model_free(m);
    sp_ckpt_meta_free(&meta);
    return st;
}

static sp_status read_dump(const char *path, const void *like, void *summary)
{
    sp_dump *d = NULL;
    SP_TRY(sp_dump_open(path, &d));
    const sp_dump_info *info = sp_dump_get_info(d);
    int64_t rows = sp_dump_rows(d);
    int32_t *tokens = calloc((size_t)info->batch * (size_t)info->seq_len, sizeof *tokens);
    sp_status st = tokens ? sp_dump_read_tokens(d, tokens) : SP_ERR_NOMEM;
    for (int kind = 0; kind < SP_DUMP_N_KINDS && st == SP_OK; kind++) {
        sp_real *buf = calloc((size_t)rows * (size_t)sp_dump_width(d, (sp_dump_kind)kind) + 1, sizeof *buf);
        for (int stream = 0; stream < info->n_streams && st == SP_OK; stream++)
            for (int layer = 0; layer <= info->n_layers && st == SP_OK; layer++)
                if (sp_dump_has_layer(d, (sp_dump_kind)kind, stream, layer))
                    st = buf ? sp_dump_read(d, (sp_dump_kind)kind, stream, layer, 0, rows, buf) : SP_ERR_NOMEM;
        free(buf);
    }
    int64_t shape[2] = {rows, info->d_model};
    if (st == SP_OK && summary)
        memcpy(summary, shape, sizeof shape);
    if (st == SP_OK && like && memcmp(like, shape, sizeof shape) != 0)
        fail_msg("%s: read without error but has another shape", path);
    free(tokens);
    sp_dump_close(d);
    return st;
}

static sp_status read_report(const char *path, const void *like, void *summary)
{
    sp_report_reader *r = NULL;
    SP_TRY(sp_report_open(path, &r));
    char **analyzers = NULL;
    int n_analyzers = 0, n_arrays_total = 0;
    sp_status st = sp_report_list(r, NULL, &analyzers, &n_analyzers);
    for (int a = 0; a < n_analyzers && st == SP_OK; a++) {
        char **names = NULL;
        int n = 0;
        st = sp_report_list(r, analyzers[a], &names, &n);
        for (int i = 0; i < n && st == SP_OK; i++) {
            sp_report_array arr;
            st = sp_report_read_array(r, analyzers[a], names[i], &arr);
            if (st == SP_OK)
                sp_report_array_free(&arr);
            n_arrays_total++;
        }
        sp_report_names_free(names, n);
    }
    sp_report_names_free(analyzers, n_analyzers);
    sp_report_close(r);
    if (st == SP_OK && summary)
        *(int *)summary = n_arrays_total;
    if (st == SP_OK && like && *(const int *)like != n_arrays_total)
        fail_msg("%s: read without error but lists %d arrays instead of %d", path, n_arrays_total, *(const int *)like);
    return st;
}

static sp_status read_trainlog(const char *path, const void *like, void *summary)
{
    sp_trainlog log;
    sp_status st = sp_trainlog_read(path, &log);
    if (st != SP_OK)
        return st;
    if (summary)
        *(int64_t *)summary = log.n_rows;
    if (like && *(const int64_t *)like != log.n_rows)
        fail_msg("%s: read without error but holds %lld rows instead of %lld", path, (long long)log.n_rows,
                 (long long)*(const int64_t *)like);
    sp_trainlog_free(&log);
    return st;
}

/* ---- the flips ---- */

static void flip_and_read(const char *original, const char *name, read_all_fn read_all, size_t summary_size)
{
    size_t len = 0;
    unsigned char *bytes = (unsigned char *)scratch_read_file(original, &len);
    assert_non_null(bytes);
    assert_true(len > 0);
    void *like = calloc(1, summary_size);
    sp_error_clear();
    if (read_all(original, NULL, like) != SP_OK)
        fail_msg("%s: the unflipped file does not read: %s", original, sp_error_message());
    char path[4200];
    scratch_path(path, sizeof path, name);
    sp_rng rng;
    sp_rng_seed(&rng, SEED ^ (uint64_t)len);
    int errors = 0;
    for (int i = 0; i < FLIPS; i++) {
        size_t bit = (size_t)(sp_rng_next(&rng) % ((uint64_t)len * 8));
        bytes[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        assert_int_equal(scratch_write_file(path, bytes, len), 0);
        alarm(READ_SECONDS * 4); /* the default action kills the test: a hang fails it */
        sp_error_clear();
        sp_status st = read_all(path, like, NULL);
        alarm(0);
        if (st != SP_OK) {
            errors++;
            if (sp_error_message()[0] == '\0' || strchr(sp_error_message(), '\n'))
                fail_msg("%s flip %d (bit %zu): status %d with no one-line message", name, i, bit, (int)st);
        }
        bytes[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    print_message("%s: %d flips of a %zu-byte file, %d read as errors, %d read whole\n", name, FLIPS, len, errors,
                  FLIPS - errors);
    free(like);
    free(bytes);
}

static void test_checkpoint_flips(void **state)
{
    flip_and_read(need(state)->ckpt, "flipped_ckpt.h5", read_ckpt, sizeof(ckpt_summary));
}

static void test_dump_flips(void **state)
{
    flip_and_read(need(state)->dump, "flipped_dump.h5", read_dump, 2 * sizeof(int64_t));
}

static void test_report_flips(void **state)
{
    flip_and_read(need(state)->report, "flipped_report.h5", read_report, sizeof(int));
}

static void test_trainlog_flips(void **state)
{
    flip_and_read(need(state)->trainlog, "flipped_trainlog.h5", read_trainlog, sizeof(int64_t));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_flips),
        cmocka_unit_test(test_dump_flips),
        cmocka_unit_test(test_report_flips),
        cmocka_unit_test(test_trainlog_flips),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
