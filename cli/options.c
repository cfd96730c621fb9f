/* cli/options.c: option values shared by commands: the value after a flag, numbers in a range. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

sp_status sp_cli_option_value(int argc, char **argv, int *i, const char **value)
{
    if (*i + 1 >= argc)
        return sp_error(SP_ERR_USAGE, "%s needs a value", argv[*i]);
    *value = argv[++*i];
    return SP_OK;
}

sp_status sp_cli_take_argument(const char *arg, const char **slot, const char *what)
{
    if (*slot)
        return sp_error(SP_ERR_USAGE, "unexpected argument '%s' (one %s expected)", arg, what);
    *slot = arg;
    return SP_OK;
}

sp_status sp_cli_parse_long(const char *option, const char *value, long min, long max, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno || end == value || *end || v < min || v > max)
        return sp_error(SP_ERR_USAGE, "%s: expected an integer in %ld..%ld, found '%s'", option, min, max, value);
    *out = v;
    return SP_OK;
}

sp_status sp_cli_parse_double(const char *option, const char *value, double min, double max, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(value, &end);
    if (errno || end == value || *end || !isfinite(v) || v < min || v > max)
        return sp_error(SP_ERR_USAGE, "%s: expected a number in %g..%g, found '%s'", option, min, max, value);
    *out = v;
    return SP_OK;
}
