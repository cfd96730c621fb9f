/* train/data.h: the training text as byte tokens, its train/validation split and the data order.
 *
 * The text's bytes are the tokens (vocab 256, io/tokenizer.h's byte tokenizer). The last
 * floor(val_fraction * n) tokens are the validation split. Each split is cut into non-overlapping
 * windows of seq_len inputs; window w starts at token w * seq_len and its targets are the inputs
 * shifted by one, so it reads seq_len + 1 tokens.
 *
 * Data order: training windows are visited epoch by epoch, each epoch a permutation of all windows
 * drawn by a generator seeded from (seed, epoch). A run's data position is the number of windows
 * consumed so far, so the window at any position is a pure function of (seed, position) and a
 * resumed run reads exactly what an uninterrupted one would. Validation uses a fixed set of windows
 * evenly spread over the validation split.
 */
#ifndef SP_TRAIN_DATA_H
#define SP_TRAIN_DATA_H

#include "core/common.h"
#include "core/rng.h"

typedef struct {
    unsigned char *bytes;     /* the whole text: byte i is token i (one byte a token in memory) */
    int64_t n_tokens;
    int64_t n_train;          /* tokens [0, n_train) train, [n_train, n_tokens) validation */
    int seq_len;
    int64_t n_train_windows, n_val_windows;
    uint64_t seed;
    int64_t *order;           /* permutation of the cached epoch [n_train_windows] */
    int64_t order_epoch;      /* -1 before the first */
    sp_rng order_rng;         /* the cached epoch's generator after its shuffle */
} sp_train_data;

/* Tokenizes `len` bytes of text (copied); `where` names the source in errors (a path). On an error
 * d holds nothing to free. */
sp_status sp_train_data_init(const char *text, size_t len, double val_fraction, int seq_len, uint64_t seed,
                             const char *where, sp_train_data *d);
/* Reads a text file and initializes from it. */
sp_status sp_train_data_load(const char *path, double val_fraction, int seq_len, uint64_t seed, sp_train_data *d);
void sp_train_data_free(sp_train_data *d);

/* First token of the training window read at data position `position`. */
int64_t sp_train_data_window(sp_train_data *d, int64_t position);
/* The state of position's epoch generator after its shuffle (saved in checkpoints and compared
 * on resume: a mismatch means the data or the seed changed). */
void sp_train_data_rng_state(sp_train_data *d, int64_t position, uint64_t state[4]);
/* Fills a micro-batch of `batch` windows from data position `position` on: inputs and targets
 * [batch * seq_len]. */
void sp_train_data_batch(sp_train_data *d, int64_t position, int batch, int32_t *inputs, int32_t *targets);

/* Number of fixed validation windows for a request of max_windows (0 without a validation split). */
int sp_train_data_n_eval(const sp_train_data *d, int max_windows);
/* Fills validation windows [first, first + count) of the fixed set of n_eval windows. */
void sp_train_data_eval_batch(const sp_train_data *d, int n_eval, int first, int count, int32_t *inputs,
                              int32_t *targets);

/* Unigram entropy of the training split's tokens, in nats. */
double sp_train_data_unigram_entropy(const sp_train_data *d);

#endif
