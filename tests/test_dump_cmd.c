/* `spanprobe dump`: a tiny initialized checkpoint (made with `spanprobe init`) is dumped over token
 * ids and text; the dump's shapes follow the options, h_0 is the embedding rows, and h_L, the FFN
 * latents, the pre-normalization sums and the logits are what a forward pass of the same model on
 * the same tokens computes. Token files with bad contents are rejected with the position named and
 * no output left behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/dump.h"
#include "io/token_file.h"
#include "support/assert_err.h"
#include "support/cli_expect.h"
#include "support/scratch.h"
#include "support/vec_util.h"

#define SEQ 8
#define N_IDS (3 * SEQ + 5) /* three sequences and a dropped tail */

typedef struct {
    char ckpt[4200];
    int32_t ids[N_IDS];
    char tokens_path[4200];
} fixture;

/* A checkpoint made by the tool itself: bytes vocabulary, RoPE (so h_0 is exactly the embedding). */
static int make_checkpoint(const char *variant, char *path, size_t len)
{
    char name[64];
    snprintf(name, sizeof name, "ckpt_%s.h5", variant);
    scratch_path(path, len, name);
    return scratch_run_cli((const char *[]){"init", "--variant", variant, "--pos", "rope", "--norm", "rmsnorm",
                                            "--ffn", "swiglu", "--n-layers", "2", "--d-model", "16", "--n-heads",
                                            "2", "--n-kv-heads", "1", "--d-ff", "24", "--max-seq-len", "16",
                                            "--init-std", "0.3", "--seed", "5", "--out", path, NULL},
                           NULL, NULL);
}

/* Writes ids separated by assorted whitespace. */
static void write_ids(const char *name, const int32_t *ids, int n, char *path, size_t len)
{
    char *text = malloc((size_t)n * 8 + 1);
    assert_non_null(text);
    size_t at = 0;
    for (int i = 0; i < n; i++)
        at += (size_t)sprintf(text + at, "%d%s", ids[i], i % 5 == 4 ? "\n" : i % 3 ? " " : "\t ");
    scratch_path(path, len, name);
    assert_int_equal(scratch_write_file(path, text, at), 0);
    free(text);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    int rc = make_checkpoint("span", f->ckpt, sizeof f->ckpt);
    if (rc != 0) {
        free(f);
        if (rc == -1) { /* no SPANPROBE_BIN: every test skips */
            *state = NULL;
            return 0;
        }
        fprintf(stderr, "spanprobe init exited %d\n", rc);
        return -1;
    }
    sp_rng rng;
    sp_rng_seed(&rng, 11);
    for (int i = 0; i < N_IDS; i++)
        f->ids[i] = (int32_t)sp_rng_below(&rng, 256);
    write_ids("ids.txt", f->ids, N_IDS, f->tokens_path, sizeof f->tokens_path);
    *state = f;
    return 0;
}

static fixture *need_fixture(void **state) { return cli_group_state(state, "SPANPROBE_BIN is not set"); }

static void run_ok(const char *const *args) { cli_expect_exit(0, args, NULL, NULL); }

/* A host copy of one layer of a dump array. */
static sp_real *read_layer(sp_dump *d, sp_dump_kind kind, int stream, int layer)
{
    size_t n = (size_t)sp_dump_rows(d) * (size_t)sp_dump_width(d, kind);
    sp_real *x = vec_zeros(n);
    assert_int_equal(sp_dump_read(d, kind, stream, layer, 0, sp_dump_rows(d), x), SP_OK);
    return x;
}

static void assert_matches(sp_model *m, sp_dump *d, sp_dump_kind kind, int stream, int layer, const sp_real *ref,
                           const char *what)
{
    size_t n = (size_t)sp_dump_rows(d) * (size_t)sp_dump_width(d, kind);
    sp_real *got = read_layer(d, kind, stream, layer);
    sp_real *want = vec_zeros(n);
    sp_model_backend(m)->download(want, ref, n * sizeof *want);
    assert_below(vec_rel_err(n, got, want), 1e-6, "%s, layer %d, stream %d", what, layer, stream);
    free(got);
    free(want);
}

static void test_dump_tokens(void **state)
{
    fixture *f = need_fixture(state);
    char out[4200];
    scratch_path(out, sizeof out, "dump.h5");
    run_ok((const char *[]){"dump", f->ckpt, "--tokens", f->tokens_path, "--seq", "8", "--logits", "--out", out,
                            "--device", "cpu", NULL});

    sp_dump *d = NULL;
    sp_error_clear();
    assert_int_equal(sp_dump_open(out, &d), SP_OK);
    const sp_dump_info *info = sp_dump_get_info(d);
    assert_int_equal(info->batch, N_IDS / SEQ);
    assert_int_equal(info->seq_len, SEQ);
    assert_int_equal(sp_dump_rows(d), (N_IDS / SEQ) * SEQ);
    assert_int_equal(info->n_layers, 2);
    assert_int_equal(info->d_model, 16);
    assert_int_equal(info->d_ff, 24);
    assert_int_equal(info->vocab_size, 256);
    assert_int_equal(info->n_streams, 1);
    assert_true(info->has_ffn_latent && info->has_sum_a && info->has_sum_z && info->has_logits);
    assert_string_equal(info->variant, "span");
    assert_non_null(strstr(info->source, f->tokens_path));
    int32_t tokens[N_IDS];
    assert_int_equal(sp_dump_read_tokens(d, tokens), SP_OK);
    assert_memory_equal(tokens, f->ids, (size_t)sp_dump_rows(d) * sizeof *tokens);

    /* the same model, the same tokens, in this process */
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    assert_int_equal(sp_ckpt_load(f->ckpt, sp_backend_cpu(), &m, &meta), SP_OK);
    assert_int_equal(sp_model_forward(m, f->ids, NULL, info->batch, SEQ, NULL), SP_OK);

    /* h_0 is the token embedding rows */
    int embed = sp_model_find_param(m, "embed/tok");
    assert_true(embed >= 0);
    sp_real *table = vec_zeros(256 * 16);
    sp_model_get_param(m, embed, table);
    sp_real *h0 = read_layer(d, SP_DUMP_HIDDEN, 0, 0);
    for (int r = 0; r < sp_dump_rows(d); r++)
        assert_memory_equal(h0 + (size_t)r * 16, table + (size_t)f->ids[r] * 16, 16 * sizeof *h0);
    free(h0);
    free(table);

    for (int l = 0; l <= info->n_layers; l++)
        assert_matches(m, d, SP_DUMP_HIDDEN, 0, l, sp_model_hidden(m, l, 0), "hidden");
    for (int l = 0; l < info->n_layers; l++) {
        assert_true(sp_dump_has_layer(d, SP_DUMP_SUM_A, 0, l) && sp_dump_has_layer(d, SP_DUMP_SUM_Z, 0, l));
        assert_matches(m, d, SP_DUMP_FFN_LATENT, 0, l, sp_model_ffn_latent(m, l), "ffn latent");
        assert_matches(m, d, SP_DUMP_SUM_A, 0, l, sp_model_slot(m, l, "sum_a"), "sum_a");
        assert_matches(m, d, SP_DUMP_SUM_Z, 0, l, sp_model_slot(m, l, "sum_z"), "sum_z");
    }
    assert_matches(m, d, SP_DUMP_LOGITS, 0, 0, sp_model_logits(m), "logits");
    sp_dump_close(d);
    sp_model_free(m);
    sp_ckpt_meta_free(&meta);
}

/* --text with a byte-level model: the ids are the bytes; --batch-limit caps the sequences; the
 * default sequence length is min(max_seq_len, 256) = 16. */
static void test_dump_text(void **state)
{
    fixture *f = need_fixture(state);
    const char *text = "It is a truth universally acknowledged, that a single man in possession of a good fortune";
    char text_path[4200], out[4200];
    scratch_path(text_path, sizeof text_path, "text.txt");
    assert_int_equal(scratch_write_file(text_path, text, strlen(text)), 0);
    scratch_path(out, sizeof out, "dump_text.h5");
    run_ok((const char *[]){"dump", f->ckpt, "--text", text_path, "--batch-limit", "2", "--out", out, "--device",
                            "cpu", NULL});
    sp_dump *d = NULL;
    assert_int_equal(sp_dump_open(out, &d), SP_OK);
    const sp_dump_info *info = sp_dump_get_info(d);
    assert_int_equal(info->seq_len, 16);
    assert_int_equal(info->batch, 2);
    assert_false(info->has_logits);
    int32_t tokens[32];
    assert_int_equal(sp_dump_read_tokens(d, tokens), SP_OK);
    for (int i = 0; i < 32; i++)
        assert_int_equal(tokens[i], (unsigned char)text[i]);
    sp_dump_close(d);
}

/* Two streams: siamese dumps X and Y; both start from the same embedding. */
static void test_dump_siamese(void **state)
{
    fixture *f = need_fixture(state);
    char ckpt[4200], out[4200];
    assert_int_equal(make_checkpoint("siamese", ckpt, sizeof ckpt), 0);
    scratch_path(out, sizeof out, "dump_siamese.h5");
    run_ok((const char *[]){"dump", ckpt, "--tokens", f->tokens_path, "--seq", "4", "--out", out, "--device", "cpu",
                            NULL});
    sp_dump *d = NULL;
    assert_int_equal(sp_dump_open(out, &d), SP_OK);
    const sp_dump_info *info = sp_dump_get_info(d);
    assert_int_equal(info->n_streams, 2);
    assert_int_equal(info->batch, N_IDS / 4);
    size_t n = (size_t)sp_dump_rows(d) * 16;
    sp_real *x0 = read_layer(d, SP_DUMP_HIDDEN, 0, 0), *y0 = read_layer(d, SP_DUMP_HIDDEN, 1, 0);
    assert_memory_equal(x0, y0, n * sizeof *x0);
    sp_real *x2 = read_layer(d, SP_DUMP_HIDDEN, 0, 2), *y2 = read_layer(d, SP_DUMP_HIDDEN, 1, 2);
    assert_true(vec_rel_err(n, x2, y2) > 1e-3); /* the streams part ways */
    free(x0);
    free(y0);
    free(x2);
    free(y2);
    sp_dump_close(d);
}

/* Runs a dump expected to fail with `code`: one stderr line holding each needle, no output file. */
static void expect_dump_error(const char *const *args, int code, const char *out, const char *const *needles)
{
    cli_expect_error(code, args, needles);
    assert_false(scratch_file_exists(out));
}

static void test_dump_errors(void **state)
{
    fixture *f = need_fixture(state);
    char bad[4200], out[4200];
    scratch_path(out, sizeof out, "dump_bad.h5");
    const struct {
        const char *contents;
        const char *needles[4];
    } cases[] = {
        {"12 7\n3 x7 4", {"token 3", "line 2", "not an integer", NULL}},
        {"5 256 1", {"token 1", "outside [0, 256)", NULL}},
        {"5\n\n-1", {"token 1", "line 3", NULL}},
        {"1.5", {"token 0", "not an integer", NULL}},
        {"1 2 3", {"fewer than one sequence", NULL}},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(cases); i++) {
        scratch_path(bad, sizeof bad, "bad_ids.txt");
        assert_int_equal(scratch_write_file(bad, cases[i].contents, strlen(cases[i].contents)), 0);
        expect_dump_error((const char *[]){"dump", f->ckpt, "--tokens", bad, "--seq", "8", "--out", out, NULL},
                          SP_ERR_INPUT, out, cases[i].needles);
        if (i < 4) /* the reader names the file too */
            expect_dump_error((const char *[]){"dump", f->ckpt, "--tokens", bad, "--out", out, NULL}, SP_ERR_INPUT,
                              out, (const char *[]){bad, NULL});
    }
    const char *tok = f->tokens_path;
    expect_dump_error((const char *[]){"dump", f->ckpt, "--tokens", tok, "--seq", "17", "--out", out, NULL},
                      SP_ERR_USAGE, out, (const char *[]){"max_seq_len", NULL});
    expect_dump_error((const char *[]){"dump", f->ckpt, "--tokens", tok, "--text", tok, "--out", out, NULL},
                      SP_ERR_USAGE, out, (const char *[]){"--text", NULL});
    expect_dump_error((const char *[]){"dump", f->ckpt, "--tokens", tok, NULL}, SP_ERR_USAGE, out,
                      (const char *[]){"--out", NULL});
    expect_dump_error((const char *[]){"dump", f->ckpt, "--tokens", tok, "--seq", "zero", "--out", out, NULL},
                      SP_ERR_USAGE, out, (const char *[]){"--seq", NULL});
    expect_dump_error((const char *[]){"dump", "/nonexistent.h5", "--tokens", tok, "--out", out, NULL}, SP_ERR_IO,
                      out, (const char *[]){"/nonexistent.h5", NULL});
    expect_dump_error((const char *[]){"dump", f->ckpt, "--tokens", "/nonexistent.txt", "--out", out, NULL},
                      SP_ERR_IO, out, (const char *[]){"/nonexistent.txt", NULL});
    size_t before = 0, after = 0; /* an --out naming an input is refused before anything is written */
    char *original = scratch_read_file(f->ckpt, &before);
    cli_expect_error(SP_ERR_USAGE, (const char *[]){"dump", f->ckpt, "--tokens", tok, "--out", f->ckpt, NULL},
                     (const char *[]){"the output is the input", NULL});
    cli_expect_error(SP_ERR_USAGE, (const char *[]){"dump", f->ckpt, "--tokens", tok, "--out", tok, NULL},
                     (const char *[]){"the output is the input", NULL});
    char *now = scratch_read_file(f->ckpt, &after);
    assert_true(original && now && before == after && memcmp(original, now, before) == 0);
    free(original);
    free(now);
    char *help = NULL;
    assert_int_equal(scratch_run_cli((const char *[]){"dump", "--help", NULL}, &help, NULL), 0);
    assert_non_null(strstr(help, "--batch-limit"));
    free(help);
    assert_int_equal(scratch_run_cli((const char *[]){"generate", "--help", NULL}, &help, NULL), 0);
    assert_non_null(strstr(help, "--temperature"));
    free(help);
}

/* The token file reader itself, whatever the CLI. */
static void test_token_file_reader(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "reader_ids.txt");
    const char *good = "  0 1\t2\r\n255\n\n7  ";
    assert_int_equal(scratch_write_file(path, good, strlen(good)), 0);
    int32_t *ids = NULL;
    size_t n = 0;
    sp_error_clear();
    assert_int_equal(sp_token_file_read(path, 256, &ids, &n), SP_OK);
    const int32_t want[] = {0, 1, 2, 255, 7};
    assert_int_equal(n, SP_ARRAY_LEN(want));
    assert_memory_equal(ids, want, sizeof want);
    free(ids);
    /* empty files give no ids */
    assert_int_equal(scratch_write_file(path, "", 0), 0);
    assert_int_equal(sp_token_file_read(path, 256, &ids, &n), SP_OK);
    assert_int_equal(n, 0);
    free(ids);
    /* the byte offset of the bad id is named */
    const char *bad = "1 2\n+3";
    assert_int_equal(scratch_write_file(path, bad, strlen(bad)), 0);
    assert_int_equal(sp_token_file_read(path, 256, &ids, &n), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "token 2 (line 2, byte offset 4)"));
    sp_error_clear();
    const char *huge = "99999999999999999999";
    assert_int_equal(scratch_write_file(path, huge, strlen(huge)), 0);
    assert_int_equal(sp_token_file_read(path, 256, &ids, &n), SP_ERR_INPUT);
    sp_error_clear();
}

/* ids streamed across the reader's 64 KiB blocks: a good id and a bad one split by a block edge */
static void test_token_file_blocks(void **state)
{
    (void)state;
    enum { EDGE = 65536 };
    char path[4200];
    scratch_path(path, sizeof path, "block_ids.txt");
    char *text = malloc(EDGE + 16);
    assert_non_null(text);
    for (int i = 0; i < EDGE - 2; i += 2)
        memcpy(text + i, "1 ", 2);
    memcpy(text + EDGE - 2, "255 7", 5); /* "255" holds bytes EDGE - 2 .. EDGE */
    assert_int_equal(scratch_write_file(path, text, EDGE + 3), 0);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(sp_token_file_read(path, 256, &ids, &n), SP_OK);
    assert_int_equal(n, EDGE / 2 + 1);
    assert_int_equal(ids[n - 2], 255);
    assert_int_equal(ids[n - 1], 7);
    free(ids);
    memcpy(text + EDGE - 2, "12x4", 4);
    assert_int_equal(scratch_write_file(path, text, EDGE + 2), 0);
    sp_error_clear();
    assert_int_equal(sp_token_file_read(path, 256, &ids, &n), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "token 32767 (line 1, byte offset 65534): '12x4' is not an integer id"));
    sp_error_clear();
    free(text);
    unlink(path);
}

/* Reads path in a child whose address space may grow by at most `budget` bytes; 1 when it read
 * want_n ids within that. */
static int read_within(const char *path, size_t budget, size_t want_n)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        FILE *status = fopen("/proc/self/status", "r");
        char line[256];
        long vm_kib = -1;
        while (status && fgets(line, sizeof line, status))
            if (sscanf(line, "VmSize: %ld kB", &vm_kib) == 1)
                break;
        if (status)
            fclose(status);
        struct rlimit limit = {(rlim_t)vm_kib * 1024 + budget, (rlim_t)vm_kib * 1024 + budget};
        if (vm_kib < 0 || setrlimit(RLIMIT_AS, &limit) != 0)
            _exit(2);
        int32_t *ids = NULL;
        size_t n = 0;
        sp_status st = sp_token_file_read(path, 256, &ids, &n);
        _exit(st == SP_OK && n == want_n ? 0 : 1);
    }
    int wstatus = 0;
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 2);
    return WEXITSTATUS(wstatus) == 0;
}

/* Reading a token file takes the ids' memory, not the text's: a 24 MiB file of 2 Mi ids (8 MiB)
 * reads within 20 MiB of address space, and a 16 MiB line of mostly blanks holding 4096 ids within
 * 4 MiB. The reader that read the whole text, then allocated for size / 2 ids, needed 72 MiB and
 * 48 MiB. */
static void test_token_file_memory(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* ASan reserves terabytes of shadow address space: RLIMIT_AS cannot hold it */
#endif
    enum { RECORD = 12, N_PADDED = 2 << 20, SPARSE_BYTES = 16 << 20, SPARSE_STEP = 4096 };
    char path[4200];
    scratch_path(path, sizeof path, "large_ids.txt");
    /* + 1: snprintf ends the last record with a NUL past its newline */
    char *text = malloc((SPARSE_BYTES > (size_t)N_PADDED * RECORD ? SPARSE_BYTES : (size_t)N_PADDED * RECORD) + 1);
    assert_non_null(text);
    for (size_t i = 0; i < N_PADDED; i++)
        snprintf(text + i * RECORD, RECORD + 1, "%011zu\n", i % 256); /* zero-padded ids are valid */
    assert_int_equal(scratch_write_file(path, text, (size_t)N_PADDED * RECORD), 0);
    if (!read_within(path, 20u << 20, N_PADDED))
        fail_msg("a token file of 24 MiB holding 8 MiB of ids did not read within 20 MiB");
    memset(text, ' ', SPARSE_BYTES);
    for (size_t i = 0; i < SPARSE_BYTES; i += SPARSE_STEP)
        text[i] = '7';
    assert_int_equal(scratch_write_file(path, text, SPARSE_BYTES), 0);
    if (!read_within(path, 4u << 20, SPARSE_BYTES / SPARSE_STEP))
        fail_msg("a one-line token file of 16 MiB holding 4096 ids did not read within 4 MiB");
    free(text);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dump_tokens),  cmocka_unit_test(test_dump_text),
        cmocka_unit_test(test_dump_siamese), cmocka_unit_test(test_dump_errors),
        cmocka_unit_test(test_token_file_reader),
        cmocka_unit_test(test_token_file_blocks),
        cmocka_unit_test(test_token_file_memory),
    };
    return cmocka_run_group_tests(tests, setup, cli_group_free);
}
