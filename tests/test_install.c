/* `make install` into a temporary prefix, then programs of one's own built against it through
 * pkg-config: examples/probe_model.c compiled with `pkg-config --cflags --libs spanprobe`, linked to
 * libspanprobe.so.0 by its soname, runs a Hugging Face fixture and prints its loss, and
 * examples/train_and_probe.c trains through the C API (spanprobe/spanprobe.h) and probes; the man pages,
 * the bash completion and the headers are where docs/install.md says; `make uninstall` leaves no
 * file behind; with DESTDIR the same files are staged for the prefix the .pc file names. Runs in the plain build only (the sanitizer build's library needs its
 * runtime in every program linked to it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/scratch.h"
#include "support/shell.h"

/* make uninstall (with the same DESTDIR and PREFIX) leaves no file or link under dir. */
static void uninstall_all(const char *destdir, const char *prefix, const char *dir)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "make -s uninstall DESTDIR=%s PREFIX=%s && test -z \"$(find %s -type f -o -type l)\"",
             destdir, prefix, dir);
    assert_int_equal(shell_run(cmd, NULL), 0);
}

static void test_install_build_against_uninstall(void **state)
{
    (void)state;
    const char *build = getenv("BUILD_DIR"), *san = getenv("SPANPROBE_SAN");
    if (!build || !getenv("SPANPROBE_BIN"))
        skip();
    if (san && strcmp(san, "1") == 0) {
        print_message("skipped under the sanitizers: the plain build installs\n");
        skip();
    }
    if (!shell_has_program("help2man")) {
        print_message("skipped: help2man is not installed (make install writes the man pages with it)\n");
        skip();
    }
    char prefix[2048], cmd[32768];
    scratch_path(prefix, sizeof prefix, "install_prefix");
    snprintf(cmd, sizeof cmd, "rm -rf %s && make -s BUILD=%s install PREFIX=%s", prefix, build, prefix);
    assert_int_equal(shell_run(cmd, NULL), 0);
    const char *files[] = {"bin/spanprobe", "bin/spanprobe-f64", "lib/libspanprobe.so", "lib/libspanprobe.so.0",
                           "lib/libspanprobe.a", "lib/pkgconfig/spanprobe.pc", "include/spanprobe/spanprobe.h",
                           "include/spanprobe/model/model.h",
                           "include/spanprobe/io/model_source.h", "share/man/man1/spanprobe.1",
                           "share/man/man1/spanprobe-analyze.1", "share/bash-completion/completions/spanprobe"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", prefix, files[i]);
        if (!scratch_file_exists(path))
            fail_msg("%s: not installed", path);
    }
    char *out = NULL;
    snprintf(cmd, sizeof cmd,
             "export PKG_CONFIG_PATH=%s/lib/pkgconfig && "
             "cc -std=c11 examples/probe_model.c $(pkg-config --cflags --libs spanprobe) -lm -o %s/probe_model && "
             "readelf -d %s/probe_model | grep -q 'NEEDED.*libspanprobe.so.0' && "
             "LD_LIBRARY_PATH=%s/lib %s/probe_model fixtures/hf/gpt2-f32 1 2 3 4 5",
             prefix, prefix, prefix, prefix, prefix);
    assert_int_equal(shell_run(cmd, &out), 0);
    assert_non_null(out);
    if (!strstr(out, "loss ") || !strstr(out, "h_2 rms"))
        fail_msg("probe_model printed:\n%s", out);
    free(out);
    /* the C API: a training loop of one's own, probed every 10 steps */
    snprintf(cmd, sizeof cmd,
             "export PKG_CONFIG_PATH=%s/lib/pkgconfig && "
             "cc -std=c11 examples/train_and_probe.c $(pkg-config --cflags --libs spanprobe) -o %s/train_and_probe && "
             "LD_LIBRARY_PATH=%s/lib %s/train_and_probe 20 10",
             prefix, prefix, prefix, prefix);
    assert_int_equal(shell_run(cmd, &out), 0);
    if (!strstr(out, "step 20: loss "))
        fail_msg("train_and_probe printed:\n%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "rm -f %s/probe_model %s/train_and_probe", prefix, prefix);
    assert_int_equal(shell_run(cmd, NULL), 0);
    uninstall_all("", prefix, prefix);

    /* DESTDIR stages the same files under it, for the prefix the .pc file names */
    char stage[2048];
    scratch_path(stage, sizeof stage, "install_stage");
    snprintf(cmd, sizeof cmd,
             "make -s BUILD=%s install DESTDIR=%s PREFIX=/opt/spanprobe && test -x %s/opt/spanprobe/bin/spanprobe && "
             "grep -qx 'prefix=/opt/spanprobe' %s/opt/spanprobe/lib/pkgconfig/spanprobe.pc",
             build, stage, stage, stage);
    assert_int_equal(shell_run(cmd, NULL), 0);
    uninstall_all(stage, "/opt/spanprobe", stage);
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", prefix, stage);
    assert_int_equal(shell_run(cmd, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_install_build_against_uninstall),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
