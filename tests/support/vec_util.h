/* tests/support/vec_util.h: small helpers on host sp_real vectors for tests: random fills, dot
 * products and normwise errors, all evaluated in double. */
#ifndef SP_TEST_VEC_UTIL_H
#define SP_TEST_VEC_UTIL_H

#include <stddef.h>

#include "core/common.h"
#include "core/rng.h"

/* x[i] = scale * N(0, 1) */
void vec_fill_normal(sp_rng *rng, size_t n, sp_real *x, double scale);
/* A malloc'd array of n draws scale * N(0, 1) (aborts on allocation failure: tests only). */
sp_real *vec_random(sp_rng *rng, size_t n, double scale);
double vec_dot(size_t n, const sp_real *x, const sp_real *y);
double vec_max_abs(size_t n, const sp_real *x);
/* max_i |a_i - b_i| / max_i |b_i| (b is the reference; an all-zero b gives the absolute error). */
double vec_rel_err(size_t n, const sp_real *a, const sp_real *b);
/* A malloc'd copy of x (aborts on allocation failure: tests only). */
sp_real *vec_dup(size_t n, const sp_real *x);
/* A malloc'd array of n zeros (aborts on allocation failure: tests only). */
sp_real *vec_zeros(size_t n);

#endif
