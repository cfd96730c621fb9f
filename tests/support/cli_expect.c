#include "cli_expect.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scratch.h"

/* "spanprobe arg1 arg2 ..." into buf, cut to its size. */
static void format_command(const char *const *args, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "spanprobe");
    for (int i = 0; args[i] && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, " %s", args[i]);
}

void cli_expect_exit(int code, const char *const *args, char **out, char **err)
{
    char *o = NULL, *e = NULL;
    int rc = scratch_run_cli(args, &o, &e);
    if (rc == -1) {
        print_message("skipped: SPANPROBE_BIN is not set\n");
        skip();
    }
    if (rc != code) {
        char command[2048];
        format_command(args, command, sizeof command);
        fail_msg("%s: exit %d, expected %d\nstdout: %s\nstderr: %s", command, rc, code, o ? o : "", e ? e : "");
    }
    if (out)
        *out = o;
    else
        free(o);
    if (err)
        *err = e;
    else
        free(e);
}

void cli_expect_one_line(const char *msg, const char *const *needles)
{
    if (!msg || scratch_count_lines(msg) != 1)
        fail_msg("expected one line, found: %s", msg ? msg : "(nothing)");
    for (int i = 0; needles && needles[i]; i++)
        if (!strstr(msg, needles[i]))
            fail_msg("'%s' does not mention '%s'", msg, needles[i]);
}

void cli_expect_error(int code, const char *const *args, const char *const *needles)
{
    char *err = NULL;
    cli_expect_exit(code, args, NULL, &err);
    cli_expect_one_line(err, needles);
    free(err);
}

void *cli_group_state(void **state, const char *why)
{
    if (!*state) {
        print_message("skipped: %s\n", why);
        skip();
    }
    return *state;
}

int cli_group_free(void **state)
{
    free(*state);
    return 0;
}
