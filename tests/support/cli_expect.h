/* tests/support/cli_expect.h: cmocka checks on runs of the CLI ($SPANPROBE_BIN, through
 * scratch_run_cli) and on their one-line error messages, and the group state of CLI test files
 * whose setup leaves *state NULL when the tests must skip. */
#ifndef SP_TEST_CLI_EXPECT_H
#define SP_TEST_CLI_EXPECT_H

/* Runs args (NULL-terminated, without the program name) and fails the test, showing the command,
 * stdout and stderr, unless it exits with `code`; skips the test when SPANPROBE_BIN is not set.
 * *out and *err (either may be NULL) get stdout and stderr (free()). */
void cli_expect_exit(int code, const char *const *args, char **out, char **err);
/* Fails the test unless msg is exactly one line holding every string of needles (NULL-terminated;
 * NULL: none). */
void cli_expect_one_line(const char *msg, const char *const *needles);
/* A run that fails with `code` and exactly one line on stderr holding every needle. */
void cli_expect_error(int code, const char *const *args, const char *const *needles);

/* *state, or a skip printing "skipped: <why>" when the group setup left it NULL. */
void *cli_group_state(void **state, const char *why);
/* A group teardown: frees *state. */
int cli_group_free(void **state);

#endif
