#include "llama2c_build.h"

#include <stdio.h>
#include <string.h>

const char *const l2c_tensor_names[N_T] = {"token_embedding_table", "rms_att_weight", "wq", "wk", "wv", "wo",
                                           "rms_ffn_weight", "w1", "w2", "w3", "rms_final_weight",
                                           "freq_cis_real", "freq_cis_imag", "wcls"};

void l2c_tensor_layout(const l2c_header *h, size_t numel[N_T], int per_layer[N_T])
{
    size_t d = (size_t)h->dim, hd = (size_t)(h->dim / h->n_heads), kv = hd * (size_t)h->n_kv_heads;
    size_t v = (size_t)(h->vocab < 0 ? -h->vocab : h->vocab), f = (size_t)h->hidden;
    const size_t n[N_T] = {v * d, d, d * d, kv * d, kv * d, d * d, d, f * d, d * f, f * d, d,
                           (size_t)h->seq_len * hd / 2, (size_t)h->seq_len * hd / 2, h->vocab < 0 ? v * d : 0};
    const int pl[N_T] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    memcpy(numel, n, sizeof n);
    memcpy(per_layer, pl, sizeof pl);
}

size_t l2c_tensor_offset(const l2c_header *h, int t, int layer)
{
    size_t numel[N_T];
    int per_layer[N_T];
    l2c_tensor_layout(h, numel, per_layer);
    size_t offset = 28;
    for (int i = 0; i < t; i++)
        offset += 4 * numel[i] * (per_layer[i] ? (size_t)h->n_layers : 1);
    return offset + 4 * numel[t] * (size_t)layer;
}

/* A distinct, reproducible value for every float of the file. */
static float file_value(size_t index) { return 0.01f * (float)((index * 37) % 101) - 0.5f; }

byte_buf l2c_build_checkpoint(const l2c_header *h)
{
    byte_buf b = {0};
    const int32_t fields[7] = {h->dim, h->hidden, h->n_layers, h->n_heads, h->n_kv_heads, h->vocab, h->seq_len};
    for (int i = 0; i < 7; i++)
        byte_buf_put_i32(&b, fields[i]);
    size_t numel[N_T];
    int per_layer[N_T];
    l2c_tensor_layout(h, numel, per_layer);
    size_t index = 0;
    for (int t = 0; t < N_T; t++)
        for (size_t i = 0; i < numel[t] * (per_layer[t] ? (size_t)h->n_layers : 1); i++)
            byte_buf_put_f32(&b, file_value(index++));
    return b;
}

byte_buf l2c_build_tokenizer(int vocab)
{
    byte_buf b = {0};
    byte_buf_put_i32(&b, 6); /* max_token_length */
    for (int i = 0; i < vocab; i++) {
        char piece[8];
        snprintf(piece, sizeof piece, "%s", i == 0 ? "<unk>" : i == 1 ? "\n<s>\n" : i == 2 ? "\n</s>\n" : "x");
        if (i >= 3)
            piece[0] = (char)('a' + (i - 3) % 26);
        byte_buf_put_f32(&b, (float)-i);
        byte_buf_put_i32(&b, (int32_t)strlen(piece));
        byte_buf_put(&b, piece, strlen(piece));
    }
    return b;
}
