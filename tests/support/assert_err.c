#include "tests/support/assert_err.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

void assert_below_at(double err, double tol, const char *file, int line, const char *what_fmt, ...)
{
    if (err <= tol)
        return;
    char what[256];
    va_list ap;
    va_start(ap, what_fmt);
    vsnprintf(what, sizeof what, what_fmt, ap);
    va_end(ap);
    print_error("%s: error %.3g, tolerance %.3g\n", what, err, tol);
    _fail(file, line);
}
