#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int sp_cli_report(const char *command, sp_status status)
{
    if (status == SP_OK)
        return SP_OK;
    const char *msg = sp_error_message();
    fprintf(stderr, "spanprobe %s: %s\n", command, *msg ? msg : "failed");
    return status;
}

int sp_cli_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "spanprobe %s: ", command);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see spanprobe %s --help)\n", command);
    va_end(ap);
    return SP_ERR_USAGE;
}

int sp_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}
