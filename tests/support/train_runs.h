/* tests/support/train_runs.h: training runs through the CLI in tests: a deterministic text to train
 * on, the options of a tiny run, and checks that two runs ended bit-identical. */
#ifndef SP_TEST_TRAIN_RUNS_H
#define SP_TEST_TRAIN_RUNS_H

#include <stddef.h>

/* The options every CLI test run shares: a tiny model on a tiny text, a few ms per step. */
#define TINY_RUN_ARGS                                                                                            \
    "--d-model", "16", "--n-layers", "2", "--n-heads", "2", "--n-kv-heads", "2", "--d-ff", "32", "--max-seq-len", \
        "16", "--batch-size", "4", "--device", "cpu", "--warmup-steps", "3", "--eval-windows", "8"

/* A deterministic English-like text of about n bytes (free()). */
char *train_make_text(size_t n, unsigned long long seed);
/* Writes a text of n bytes into the scratch directory as `name`; path gets its path. */
void train_write_text(const char *name, size_t n, char *path, size_t len);

/* Fails the test unless the two checkpoints hold bit-identical weights, AdamW moments, step, data
 * position and data-order generator state, both with status "done". */
void train_expect_same_checkpoints(const char *path_a, const char *path_b);
/* Fails the test unless the two HDF5 training logs hold the same rows, bit for bit, in every column
 * but the throughput (a clock), and the same status, final validation loss and options. */
void train_expect_same_logs(const char *path_a, const char *path_b);
/* The same for two CSV logs: every field of every row but tokens_per_s. */
void train_expect_same_csv(const char *path_a, const char *path_b);

#endif
