#include "train_runs.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "io/checkpoint.h"
#include "scratch.h"
#include "train/trainlog.h"

char *train_make_text(size_t n, unsigned long long seed)
{
    static const char *const words[] = {"the", "whale", "sea", "ship", "captain", "and", "of", "a", "white",
                                        "deep", "boat", "harpoon", "sailed", "into", "storm", "night"};
    char *text = malloc(n + 16);
    assert_non_null(text);
    sp_rng rng;
    sp_rng_seed(&rng, (uint64_t)seed);
    size_t len = 0;
    while (len < n) {
        const char *w = words[sp_rng_below(&rng, SP_ARRAY_LEN(words))];
        size_t wl = strlen(w);
        if (len + wl + 2 > n)
            break;
        memcpy(text + len, w, wl);
        len += wl;
        text[len++] = sp_rng_below(&rng, 8) == 0 ? '\n' : ' ';
    }
    while (len < n)
        text[len++] = '.';
    text[len] = '\0';
    return text;
}

void train_write_text(const char *name, size_t n, char *path, size_t len)
{
    char *text = train_make_text(n, 42);
    scratch_path(path, len, name);
    assert_int_equal(scratch_write_file(path, text, n), 0);
    free(text);
}

/* A host copy of parameter i. */
static sp_real *host_param(sp_model *m, int i)
{
    sp_real *x = malloc(sp_param_numel(sp_model_param_spec(m, i)) * sizeof *x);
    assert_non_null(x);
    sp_model_get_param(m, i, x);
    return x;
}

void train_expect_same_checkpoints(const char *path_a, const char *path_b)
{
    sp_model *m[2];
    sp_ckpt_meta meta[2];
    const char *paths[2] = {path_a, path_b};
    sp_real **moments[2];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(sp_ckpt_load(paths[k], sp_backend_cpu(), &m[k], &meta[k]), SP_OK);
        int n = sp_model_n_params(m[k]);
        moments[k] = calloc(2 * (size_t)n, sizeof *moments[k]);
        assert_non_null(moments[k]);
        for (int i = 0; i < 2 * n; i++)
            moments[k][i] = calloc(sp_param_numel(sp_model_param_spec(m[k], i % n)), sizeof(sp_real));
        assert_int_equal(sp_ckpt_load_optim(paths[k], m[k], moments[k], moments[k] + n), SP_OK);
    }
    int n = sp_model_n_params(m[0]);
    assert_int_equal(sp_model_n_params(m[1]), n);
    for (int i = 0; i < n; i++) {
        size_t bytes = sp_param_numel(sp_model_param_spec(m[0], i)) * sizeof(sp_real);
        sp_real *x = host_param(m[0], i), *y = host_param(m[1], i);
        assert_memory_equal(x, y, bytes);
        assert_memory_equal(moments[0][i], moments[1][i], bytes);
        assert_memory_equal(moments[0][n + i], moments[1][n + i], bytes);
        free(x);
        free(y);
    }
    assert_int_equal(meta[0].train.step, meta[1].train.step);
    assert_int_equal(meta[0].train.tokens_seen, meta[1].train.tokens_seen);
    assert_int_equal(meta[0].train.data_position, meta[1].train.data_position);
    assert_memory_equal(meta[0].train.rng_state, meta[1].train.rng_state, sizeof meta[0].train.rng_state);
    assert_memory_equal(&meta[0].train.lr, &meta[1].train.lr, sizeof meta[0].train.lr);
    for (int k = 0; k < 2; k++) {
        assert_string_equal(meta[k].train.status, "done");
        for (int i = 0; i < 2 * n; i++)
            free(moments[k][i]);
        free(moments[k]);
        sp_ckpt_meta_free(&meta[k]);
        sp_model_free(m[k]);
    }
}

void train_expect_same_logs(const char *path_a, const char *path_b)
{
    sp_trainlog a, b;
    assert_int_equal(sp_trainlog_read(path_a, &a), SP_OK);
    assert_int_equal(sp_trainlog_read(path_b, &b), SP_OK);
    assert_int_equal(a.n_rows, b.n_rows);
    assert_int_equal(a.n_tensors, b.n_tensors);
    assert_int_equal(a.n_hidden, b.n_hidden);
    for (int c = 0; c < SP_LOG_N_SCALARS; c++) /* bit-identical, NaN where not evaluated */
        if (c != SP_LOG_TOKENS_PER_S)
            assert_memory_equal(a.col[c], b.col[c], (size_t)a.n_rows * sizeof(double));
    size_t per_tensor = (size_t)(a.n_rows * a.n_tensors) * sizeof(double);
    assert_memory_equal(a.tensor_grad_norm, b.tensor_grad_norm, per_tensor);
    assert_memory_equal(a.update_ratio, b.update_ratio, per_tensor);
    assert_memory_equal(a.hidden_rms, b.hidden_rms, (size_t)(a.n_rows * a.n_hidden) * sizeof(double));
    assert_string_equal(a.status, b.status);
    assert_int_equal(a.diverged_step, b.diverged_step);
    assert_memory_equal(&a.final_val_loss, &b.final_val_loss, sizeof a.final_val_loss);
    assert_memory_equal(&a.unigram_entropy, &b.unigram_entropy, sizeof a.unigram_entropy);
    assert_string_equal(a.options_json, b.options_json);
    sp_trainlog_free(&a);
    sp_trainlog_free(&b);
}

/* The CSV text without its tokens_per_s fields (the 7th column). */
static char *csv_without_clock(const char *path)
{
    char *text = scratch_read_file(path, NULL);
    if (!text)
        fail_msg("%s: cannot read", path);
    char *out = malloc(strlen(text) + 1), *o = out;
    assert_non_null(out);
    int field = 0;
    for (const char *p = text; *p; p++) {
        if (*p == '\n')
            field = 0;
        else if (*p == ',')
            field++;
        if (field != SP_LOG_TOKENS_PER_S || *p == '\n')
            *o++ = *p;
    }
    *o = '\0';
    free(text);
    return out;
}

void train_expect_same_csv(const char *path_a, const char *path_b)
{
    char *a = csv_without_clock(path_a), *b = csv_without_clock(path_b);
    assert_string_equal(a, b);
    free(a);
    free(b);
}
