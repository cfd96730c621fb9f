#include "shell.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scratch.h"

int shell_run(const char *cmd, char **out)
{
    char log[4200];
    scratch_path(log, sizeof log, "shell_run.log");
    size_t len = strlen(cmd) + sizeof log + 32;
    char *full = malloc(len);
    if (!full)
        return -1;
    snprintf(full, len, "(%s) >%s 2>&1", cmd, log);
    int rc = system(full);
    free(full);
    char *text = scratch_read_file(log, NULL);
    if (rc != 0)
        fprintf(stderr, "`%s` failed:\n%s\n", cmd, text ? text : "");
    if (out)
        *out = text;
    else
        free(text);
    return rc;
}

int shell_has_program(const char *name)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "command -v '%s' >/dev/null 2>&1", name);
    return system(cmd) == 0;
}
