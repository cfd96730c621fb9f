/* HDF5 headers are not trusted (issue 15, io/h5_vet.c): a dataset is read only when the file holds
 * what it declares and it fits the reading budget.
 * - a few hundred bytes declaring terabytes of never-written data (a chunked dataset with no chunks,
 *   in a checkpoint beside its weights or in place of one) are refused at once by every reader,
 *   exit 3 with one line naming the dataset, instead of reading fill values for hours;
 * - a compression bomb (hundreds of MiB of deflated zeros in a few hundred KiB) is read where the
 *   budget allows it and refused under --max-memory-gib before anything is allocated (exit 8, the
 *   out-of-memory code, with the sizes);
 * - what spanprobe writes itself stays readable (the same rule on real files);
 * - a file whose object headers stop the vetting walk part-way, or whose attributes cannot be listed,
 *   is refused, not read past the walk (inputs the fuzzer found: libhdf5 then overran a global-heap
 *   copy or looped in its cache). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "io/h5.h"
#include "support/cli_expect.h"
#include "support/h5_edit.h"
#include "support/scratch.h"

#define LIMIT 60 /* seconds; each run here takes about one */

typedef struct {
    char ckpt[4200], ids[4200];
} fixture;

static int group_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char config[4200];
    if (!f)
        return -1;
    scratch_path(f->ckpt, sizeof f->ckpt, "declared_ckpt.h5");
    scratch_path(f->ids, sizeof f->ids, "declared_ids.txt");
    scratch_path(config, sizeof config, "declared_config.json");
    const char *cfg = "{\"n_layers\": 2, \"d_model\": 16, \"n_heads\": 2, \"n_kv_heads\": 2, \"d_ff\": 32, \"max_seq_len\": 16}\n";
    const char *ids = "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n";
    if (scratch_write_file(config, cfg, strlen(cfg)) != 0 || scratch_write_file(f->ids, ids, strlen(ids)) != 0 ||
        scratch_run_cli((const char *[]){"init", "--config", config, "--out", f->ckpt, NULL}, NULL, NULL) != 0) {
        free(f);
        *state = NULL;
        return 0;
    }
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    free(*state);
    return 0;
}

static fixture *need(void **state) { return cli_group_state(state, "SPANPROBE_BIN is not set"); }

/* A copy of the checkpoint with the dataset at path declared [rows, cols] (h5_edit_declare). */
static const char *edited_copy(const fixture *f, const char *name, const char *path, int64_t rows, int64_t cols,
                               int64_t zero_rows)
{
    static char buf[4][4200];
    static int next;
    char *out = buf[next++ % 4];
    scratch_path(out, sizeof buf[0], name);
    h5_edit_copy(f->ckpt, out);
    h5_edit_declare(out, path, rows, cols, zero_rows);
    return out;
}

static void expect(int code, const char *const *args, const char *needle)
{
    char *out = NULL, *err = NULL;
    int rc = scratch_run_cli_within(LIMIT, args, &out, &err);
    if (rc != code || (code != 0 && (scratch_count_lines(err) != 1 || !strstr(err, needle))))
        fail_msg("%s %s: exit %d (expected %d within %d s, one line with \"%s\"), stderr:\n%s", args[0], args[1], rc,
                 code, LIMIT, needle, err);
    free(out);
    free(err);
}

static void test_unwritten_data_is_refused(void **state)
{
    fixture *f = need(state);
    char report[4200];
    scratch_path(report, sizeof report, "declared_report.h5");
    /* 2^21 x 2^20 float32: 8 TiB declared, nothing stored */
    const char *beside = edited_copy(f, "declared_beside.h5", "/extra/huge", 1 << 21, 1 << 20, 0);
    const char *instead = edited_copy(f, "declared_instead.h5", "/params/embed/tok", 256, 16, 0);
    const char *const *cases[] = {
        (const char *[]){"inspect", beside, NULL},
        (const char *[]){"generate", beside, "--steps", "2", NULL},
        (const char *[]){"analyze", beside, "--tokens", f->ids, "--seq", "8", "--out", report, "--quiet", NULL},
        (const char *[]){"inspect", instead, NULL},
        (const char *[]){"analyze", instead, "--tokens", f->ids, "--seq", "8", "--out", report, "--quiet", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect(3, cases[i], "but the file holds 0 for it");
    assert_false(scratch_file_exists(report));
    /* the same verdict from the vetting in this process (the fuzz harnesses' way), and the
     * untouched checkpoint passes it */
    sp_h5_set_vet_in_process(1);
    assert_int_equal(sp_h5_vet(beside), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "but the file holds 0 for it"));
    sp_error_clear();
    assert_int_equal(sp_h5_vet(f->ckpt), SP_OK);
    sp_h5_set_vet_in_process(0);
}

static void test_compression_bomb_within_budget_only(void **state)
{
    fixture *f = need(state);
    char report[4200];
    scratch_path(report, sizeof report, "bomb_report.h5");
    /* 64 rows of 2^20 zeros: 256 MiB of data in a few hundred KiB of file */
    const char *bomb = edited_copy(f, "declared_bomb.h5", "/extra/bomb", 64, 1 << 20, 64);
    expect(8,
           (const char *[]){"analyze", bomb, "--tokens", f->ids, "--seq", "8", "--out", report, "--max-memory-gib", "0.1",
                            "--quiet", NULL},
           "over the reading budget of 0.1 GiB (raise --max-memory-gib)");
    assert_false(scratch_file_exists(report));
    expect(0, (const char *[]){"inspect", bomb, NULL}, "");
}

static void test_unvisitable_objects_are_refused(void **state)
{
    (void)state;
    static const char *const found[] = {
        "fuzz/corpus/checkpoint/regress-vet-visit-stops-h5hg-read-overflow",
        "fuzz/corpus/checkpoint/regress-vet-visit-stops-h5hg-read-overflow-2",
        "fuzz/corpus/dump/regress-vet-visit-stops-h5hg-hang",
        "fuzz/corpus/dump/regress-vet-visit-stops-h5hg-hang-2",
    };
    for (size_t i = 0; i < sizeof found / sizeof found[0]; i++) {
        /* the walk stops at an object header, or earlier at the root's attributes */
        expect(3, (const char *[]){"inspect", found[i], NULL}, "corrupt HDF5 file: ");
        expect(3, (const char *[]){"generate", found[i], "--steps", "2", NULL}, "corrupt HDF5 file: ");
    }
    /* /config's attributes cannot be listed, but one read by name made libhdf5 copy 80 GB */
    const char *unlisted = "fuzz/corpus/checkpoint/regress-vet-attribute-list-unreadable";
    expect(3, (const char *[]){"inspect", unlisted, NULL}, "/config: its attributes cannot be listed");
    expect(3, (const char *[]){"generate", unlisted, "--steps", "2", NULL}, "/config: its attributes cannot be listed");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unwritten_data_is_refused),
        cmocka_unit_test(test_compression_bomb_within_budget_only),
        cmocka_unit_test(test_unvisitable_objects_are_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
