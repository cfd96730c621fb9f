#include "stories260k.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scratch.h"

#define DATA_DIR "checkpoints/stories260K/"

void stories260k_import(const char *name, char *ckpt, size_t len, char **import_out)
{
    char model[4200], tok[4200], expected[4200];
    if (!scratch_shared_data(DATA_DIR "stories260K.bin", model, sizeof model) ||
        !scratch_shared_data(DATA_DIR "tok512.bin", tok, sizeof tok) ||
        !scratch_shared_data(DATA_DIR "expected_greedy_t0_n200.txt", expected, sizeof expected)) {
        print_message("skipped: ../shared/data/checkpoints/stories260K is absent\n");
        skip();
    }
    scratch_path(ckpt, len, name);
    char *err = NULL;
    int rc = scratch_run_cli((const char *[]){"import", "llama2c", model, tok, ckpt, NULL}, import_out, &err);
    if (rc == -1) {
        print_message("skipped: SPANPROBE_BIN is not set\n");
        skip();
    }
    if (rc != 0)
        fail_msg("import llama2c exited %d: %s", rc, err ? err : "");
    free(err);
}

char *stories260k_expected_text(void)
{
    char path[4200];
    assert_true(scratch_shared_data(DATA_DIR "expected_greedy_t0_n200.txt", path, sizeof path));
    char *expected = scratch_read_file(path, NULL);
    assert_non_null(expected);
    return expected;
}

char *stories260k_greedy_text(const char *ckpt, const char *steps, const char *device)
{
    char *out = NULL, *err = NULL;
    int rc = scratch_run_cli(
        (const char *[]){"generate", ckpt, "--steps", steps, "--temperature", "0", "--device", device, NULL}, &out,
        &err);
    if (rc != 0)
        fail_msg("generate --steps %s --device %s exited %d: %s", steps, device, rc, err ? err : "");
    free(err);
    size_t n = strlen(out);
    assert_true(n > 0 && out[n - 1] == '\n');
    out[n - 1] = '\0';
    return out;
}
