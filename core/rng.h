/* core/rng.h: a small deterministic generator (xoshiro256**, seeded through splitmix64).
 * Its whole state is four integers, saved in checkpoints so a resumed run draws the same numbers. */
#ifndef SP_RNG_H
#define SP_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} sp_rng;

void sp_rng_seed(sp_rng *rng, uint64_t seed);
uint64_t sp_rng_next(sp_rng *rng);
double sp_rng_uniform(sp_rng *rng);  /* [0, 1) with 53 random bits */
double sp_rng_normal(sp_rng *rng);   /* standard normal (Box-Muller, one draw per call) */
uint64_t sp_rng_below(sp_rng *rng, uint64_t n); /* uniform in [0, n), n > 0, unbiased */

#endif
