/* tests/support/analyze_cli.h: reports made through the CLI for the agreement tests (`compare`, and
 * CPU against CUDA): a small checkpoint from `init` options, a token file, `analyze` with the fp32 CLI
 * ($SPANPROBE_BIN) or the fp64 one ($BUILD_DIR/spanprobe-f64), and a copy of a report with its
 * summary. Each writes into the scratch directory and fails the calling test when it cannot; a
 * missing binary skips it with one line. */
#ifndef SP_TEST_ANALYZE_CLI_H
#define SP_TEST_ANALYZE_CLI_H

#include <stddef.h>
#include <stdint.h>

/* `spanprobe init ARGS... --out <scratch>/<name>` (args NULL-terminated); the checkpoint's path into path. */
void analyze_cli_init(const char *name, const char *const *args, char *path, size_t len);
/* n token ids uniform in [0, vocab), drawn from seed, whitespace-separated, into <scratch>/<name>. */
void analyze_cli_tokens(const char *name, int n, int vocab, uint64_t seed, char *path, size_t len);
/* $BUILD_DIR/spanprobe-f64 (a static buffer); skips the test when it is not built. */
const char *analyze_cli_f64_bin(void);
/* `analyze CKPT --tokens TOKENS --device DEVICE --quiet ARGS... --out <scratch>/<name>` run by bin
 * (NULL: $SPANPROBE_BIN); the report's path into path; fails the test unless it exits 0. */
void analyze_cli_run(const char *bin, const char *ckpt, const char *tokens, const char *device,
                     const char *const *args, const char *name, char *path, size_t len);
/* A copy of the report src and its JSON summary at <scratch>/<name>; its path into path. */
void analyze_cli_copy_report(const char *src, const char *name, char *path, size_t len);

#endif
