/* tests/support/assert_err.h: a cmocka assertion on a numerical error, which prints what was
 * measured: assert_below(err, tol, "what %d", i) fails with "what 3: error 2.1e-05, tolerance
 * 1e-06" unless err <= tol (a NaN error fails). */
#ifndef SP_TEST_ASSERT_ERR_H
#define SP_TEST_ASSERT_ERR_H

void assert_below_at(double err, double tol, const char *file, int line, const char *what_fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define assert_below(err, tol, ...) assert_below_at((err), (tol), __FILE__, __LINE__, __VA_ARGS__)

#endif
