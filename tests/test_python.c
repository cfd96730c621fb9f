/* The Python package (python/spanprobe, docs/python.md), by its own unittest suite (python/tests):
 * read_report on a report this build wrote, and capture on a PyTorch model, read back by
 * `spanprobe analyze` (that part skips itself where torch is missing). Runs with the first Python of
 * $SPANPROBE_PYTHON, /usr/bin/python3 (Debian's python3-numpy, python3-h5py, python3-torch) and
 * python3 that imports numpy and h5py; skips with one line when none does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_python_package(void **state)
{
    (void)state;
    const char *bin = getenv("SPANPROBE_BIN");
    if (!bin)
        skip();
    const char *env = getenv("SPANPROBE_PYTHON");
    const char *candidates[] = {env ? env : "", "/usr/bin/python3", "python3"};
    const char *python = NULL;
    char cmd[8192];
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0] && !python; i++) {
        snprintf(cmd, sizeof cmd, "%s -c 'import numpy, h5py' >/dev/null 2>&1", candidates[i]);
        if (candidates[i][0] && system(cmd) == 0)
            python = candidates[i];
    }
    if (!python) {
        print_message("skipped: no Python with numpy and h5py (Debian: python3-numpy python3-h5py)\n");
        skip();
    }
    snprintf(cmd, sizeof cmd,
             "SPANPROBE_BIN=%s PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1 %s -m unittest discover -s python/tests 2>&1",
             bin, python);
    print_message("%s\n", cmd);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[4096];
    while (fgets(line, sizeof line, p))
        print_message("%s", line);
    int rc = pclose(p);
    if (rc != 0)
        fail_msg("the Python tests failed (%s)", python);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_python_package),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
