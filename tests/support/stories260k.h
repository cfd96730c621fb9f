/* tests/support/stories260k.h: the real stories260K model of ../shared/data for tests: imported
 * into a scratch checkpoint through the CLI, llama2.c's expected greedy text, and greedy decoding. */
#ifndef SP_TEST_STORIES260K_H
#define SP_TEST_STORIES260K_H

#include <stddef.h>

/* Imports stories260K with `spanprobe import llama2c` into "<scratch>/<name>" (written into ckpt)
 * and fails the test unless that succeeds; skips the test, with a one-line message, when
 * ../shared/data or SPANPROBE_BIN is absent. *import_out (may be NULL) gets the import's stdout. */
void stories260k_import(const char *name, char *ckpt, size_t len, char **import_out);
/* llama2.c's greedy output (expected_greedy_t0_n200.txt), NUL-terminated (free()); call after
 * stories260k_import, which skips when the data is absent. */
char *stories260k_expected_text(void);
/* `generate CKPT --steps steps --temperature 0 --device device`: stdout without its final newline
 * (free()); fails the test unless the command succeeds. */
char *stories260k_greedy_text(const char *ckpt, const char *steps, const char *device);

#endif
