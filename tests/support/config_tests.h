/* tests/support/config_tests.h: the configurations the model checks run on (the gradient, JVP and
 * Hessian-vector checks), and their cmocka test table. */
#ifndef SP_TEST_CONFIG_TESTS_H
#define SP_TEST_CONFIG_TESTS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/support/model_fixture.h"

#define CONFIG_GRAD_COMBOS 8
#define CONFIG_N_TESTS (SP_N_VARIANTS + FIXTURE_N_PRETRAINED)

/* Combination combo (0..CONFIG_GRAD_COMBOS-1) of the gradient check for a variant: {layernorm,
 * rmsnorm} x {gelu, swiglu} x {learned, rope} from its bits, half of them tying the head, some
 * flipping the variant's final-norm default, peri with RMSNorm turning its embedding norm on, so
 * every path of the model is differentiated somewhere; its name into what. */
void config_grad_combo(int variant, int combo, sp_config *cfg, char *what, size_t len);
/* check(cfg, seed, what) on every combination of the gradient check for a variant, seeded
 * variant * CONFIG_GRAD_COMBOS + combo. */
void config_grad_combos(int variant, void (*check)(const sp_config *cfg, uint64_t seed, const char *what));
/* check(cfg, seed_base + i, name) on tiny pretrained config i. */
void config_pretrained(int i, uint64_t seed_base, void (*check)(const sp_config *cfg, uint64_t seed, const char *what));
/* tests[0..CONFIG_N_TESTS): one test per variant (named by it; state: the variant), then one per
 * tiny pretrained config ("pretrained <name>"; state: its index). */
void config_tests(struct CMUnitTest *tests, CMUnitTestFunction per_variant, CMUnitTestFunction per_pretrained);

#endif
