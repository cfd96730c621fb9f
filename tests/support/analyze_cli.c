#include "analyze_cli.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "io/report.h"
#include "scratch.h"

enum { MAX_ARGS = 64 };

/* Runs bin with args; fails the test, showing stderr, unless it exits 0; skips without a binary. */
static void run_ok(const char *bin, const char *const *args)
{
    char *err = NULL;
    int rc = scratch_run_program(bin, args, NULL, &err);
    if (rc == -1) {
        print_message("skipped: SPANPROBE_BIN is not set\n");
        skip();
    }
    if (rc != 0)
        fail_msg("spanprobe %s %s: exit %d: %s", args[0], args[1], rc, err ? err : "");
    free(err);
}

/* argv = head..., extra... (NULL-terminated), tail... */
static void append(const char **argv, int *n, const char *const *extra)
{
    for (int i = 0; extra && extra[i]; i++) {
        assert_true(*n < MAX_ARGS - 1);
        argv[(*n)++] = extra[i];
    }
    argv[*n] = NULL;
}

void analyze_cli_init(const char *name, const char *const *args, char *path, size_t len)
{
    scratch_path(path, len, name);
    const char *argv[MAX_ARGS] = {"init"};
    int n = 1;
    append(argv, &n, args);
    append(argv, &n, (const char *const[]){"--out", path, NULL});
    run_ok(NULL, argv);
}

void analyze_cli_tokens(const char *name, int n, int vocab, uint64_t seed, char *path, size_t len)
{
    char *text = malloc((size_t)n * 12 + 1);
    assert_non_null(text);
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    size_t used = 0;
    for (int i = 0; i < n; i++)
        used += (size_t)sprintf(text + used, "%d ", (int)sp_rng_below(&rng, (uint64_t)vocab));
    scratch_path(path, len, name);
    assert_int_equal(scratch_write_file(path, text, used), 0);
    free(text);
}

const char *analyze_cli_f64_bin(void)
{
    static char bin[4200];
    const char *dir = getenv("BUILD_DIR");
    snprintf(bin, sizeof bin, "%s/spanprobe-f64", dir ? dir : "");
    if (!dir || !scratch_file_exists(bin)) {
        print_message("skipped: the fp64 CLI ($BUILD_DIR/spanprobe-f64) is not built\n");
        skip();
    }
    return bin;
}

void analyze_cli_run(const char *bin, const char *ckpt, const char *tokens, const char *device,
                     const char *const *args, const char *name, char *path, size_t len)
{
    scratch_path(path, len, name);
    const char *argv[MAX_ARGS] = {"analyze", ckpt, "--tokens", tokens, "--device", device, "--quiet"};
    int n = 7;
    append(argv, &n, args);
    append(argv, &n, (const char *const[]){"--out", path, NULL});
    run_ok(bin, argv);
}

void analyze_cli_copy_report(const char *src, const char *name, char *path, size_t len)
{
    scratch_path(path, len, name);
    char *src_json = sp_report_summary_path(src), *dst_json = sp_report_summary_path(path);
    assert_non_null(src_json);
    assert_non_null(dst_json);
    const char *from[2] = {src, src_json}, *to[2] = {path, dst_json};
    for (int i = 0; i < 2; i++) {
        size_t size = 0;
        char *bytes = scratch_read_file(from[i], &size);
        assert_non_null(bytes);
        assert_int_equal(scratch_write_file(to[i], bytes, size), 0);
        free(bytes);
    }
    free(src_json);
    free(dst_json);
}
