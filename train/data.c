#include "train/data.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/file_read.h"

/* Splits and prepares d for the len bytes at text, which d then owns (free() by sp_train_data_free). */
static sp_status adopt_text(unsigned char *text, size_t len, double val_fraction, int seq_len, uint64_t seed,
                            const char *where, sp_train_data *d)
{
    memset(d, 0, sizeof *d);
    d->bytes = text;
    d->order_epoch = -1;
    d->seq_len = seq_len;
    d->seed = seed;
    d->n_tokens = (int64_t)len;
    int64_t n_val = (int64_t)floor(val_fraction * (double)len);
    d->n_train = d->n_tokens - n_val;
    d->n_train_windows = d->n_train > seq_len ? (d->n_train - 1) / seq_len : 0;
    d->n_val_windows = n_val > seq_len ? (n_val - 1) / seq_len : 0;
    sp_status st = SP_OK;
    if (d->n_train_windows < 1)
        st = sp_error(SP_ERR_INPUT, "%s: training split: %lld tokens, expected at least seq_len + 1 = %d", where,
                      (long long)d->n_train, seq_len + 1);
    else if (n_val > 0 && d->n_val_windows < 1)
        st = sp_error(SP_ERR_INPUT,
                      "%s: validation split (val_fraction %g): %lld tokens, expected at least seq_len + 1 = %d",
                      where, val_fraction, (long long)n_val, seq_len + 1);
    else if (!(d->order = sp_malloc((size_t)d->n_train_windows * sizeof *d->order, "data order")))
        st = SP_ERR_NOMEM;
    if (st != SP_OK)
        sp_train_data_free(d);
    return st;
}

sp_status sp_train_data_init(const char *text, size_t len, double val_fraction, int seq_len, uint64_t seed,
                             const char *where, sp_train_data *d)
{
    memset(d, 0, sizeof *d);
    unsigned char *copy = sp_malloc(len ? len : 1, "training text");
    if (!copy)
        return SP_ERR_NOMEM;
    memcpy(copy, text, len);
    return adopt_text(copy, len, val_fraction, seq_len, seed, where, d);
}

sp_status sp_train_data_load(const char *path, double val_fraction, int seq_len, uint64_t seed, sp_train_data *d)
{
    memset(d, 0, sizeof *d);
    unsigned char *text = NULL;
    size_t len = 0;
    SP_TRY(sp_file_read_all(path, SIZE_MAX, &text, &len)); /* no limit but memory: the file's size, once */
    return adopt_text(text, len, val_fraction, seq_len, seed, path, d);
}

void sp_train_data_free(sp_train_data *d)
{
    free(d->bytes);
    free(d->order);
    d->bytes = NULL;
    d->order = NULL;
}

/* Shuffles epoch `epoch` into d->order (Fisher-Yates) unless it is cached. */
static void prepare_epoch(sp_train_data *d, int64_t epoch)
{
    if (d->order_epoch == epoch)
        return;
    /* sp_rng_seed runs splitmix64, so nearby inputs give unrelated streams */
    sp_rng_seed(&d->order_rng, d->seed ^ ((uint64_t)(epoch + 1) * 0x9E3779B97F4A7C15ull));
    int64_t n = d->n_train_windows;
    for (int64_t i = 0; i < n; i++)
        d->order[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)sp_rng_below(&d->order_rng, (uint64_t)i + 1);
        int64_t t = d->order[i];
        d->order[i] = d->order[j];
        d->order[j] = t;
    }
    d->order_epoch = epoch;
}

int64_t sp_train_data_window(sp_train_data *d, int64_t position)
{
    prepare_epoch(d, position / d->n_train_windows);
    return d->order[position % d->n_train_windows] * d->seq_len;
}

void sp_train_data_rng_state(sp_train_data *d, int64_t position, uint64_t state[4])
{
    prepare_epoch(d, position / d->n_train_windows);
    memcpy(state, d->order_rng.s, sizeof d->order_rng.s);
}

static void copy_window(const sp_train_data *d, int64_t start, int32_t *inputs, int32_t *targets)
{
    const unsigned char *w = d->bytes + start;
    for (int t = 0; t < d->seq_len; t++) {
        inputs[t] = w[t];
        targets[t] = w[t + 1];
    }
}

void sp_train_data_batch(sp_train_data *d, int64_t position, int batch, int32_t *inputs, int32_t *targets)
{
    for (int b = 0; b < batch; b++) {
        size_t off = (size_t)b * d->seq_len;
        copy_window(d, sp_train_data_window(d, position + b), inputs + off, targets + off);
    }
}

int sp_train_data_n_eval(const sp_train_data *d, int max_windows)
{
    return d->n_val_windows < max_windows ? (int)d->n_val_windows : max_windows;
}

void sp_train_data_eval_batch(const sp_train_data *d, int n_eval, int first, int count, int32_t *inputs,
                              int32_t *targets)
{
    for (int i = 0; i < count; i++) {
        int64_t w = (int64_t)(first + i) * d->n_val_windows / n_eval; /* evenly spread */
        size_t off = (size_t)i * d->seq_len;
        copy_window(d, d->n_train + w * d->seq_len, inputs + off, targets + off);
    }
}

double sp_train_data_unigram_entropy(const sp_train_data *d)
{
    int64_t counts[256] = {0};
    for (int64_t i = 0; i < d->n_train; i++)
        counts[d->bytes[i]]++;
    double h = 0;
    for (int v = 0; v < 256; v++)
        if (counts[v]) {
            double p = (double)counts[v] / (double)d->n_train;
            h -= p * log(p);
        }
    return h;
}
