/* io/gguf_tokenizer.c: a GGUF file's tokenizer (io/gguf_tokenizer.h): the metadata is read and
 * checked (gguf_tok_vocab.c), the merges taken or derived (gguf_tok_merges.c), and the
 * tokenizer.json and tokenizer_config.json texts transformers' converter amounts to
 * (gguf_tok_json.c) are loaded by the Hugging Face engine, which keeps them for checkpoints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf_tok.h"
#include "io/gguf_tokenizer.h"
#include "io/hf_tokenizer.h"

int sp_gguf_has_tokenizer(const sp_gguf *g)
{
    return sp_gguf_kv_find(g, "tokenizer.ggml.model") >= 0;
}

sp_status sp_tokenizer_load_gguf(const sp_gguf *g, const char *path, int vocab_size, sp_tokenizer *t)
{
    sp_gguf_vocab v;
    sp_gguf_merge *merges = NULL;
    size_t n_merges = 0;
    char *json = NULL, *config = NULL;
    sp_status st = sp_gguf_vocab_read(g, path, vocab_size, &v);
    if (st == SP_OK)
        st = sp_gguf_merges(&v, &merges, &n_merges);
    if (st == SP_OK)
        st = sp_gguf_tok_json(&v, merges, n_merges, vocab_size, &json, &config);
    free(merges);
    sp_gguf_vocab_free(&v);
    if (st == SP_OK) {
        char name[4200], config_name[4200];
        snprintf(name, sizeof name, "%s (tokenizer.ggml.* as tokenizer.json)", path);
        snprintf(config_name, sizeof config_name, "%s (tokenizer.ggml.* as tokenizer_config.json)", path);
        st = sp_tokenizer_load_hf_text(name, json, strlen(json), config_name, config, strlen(config), vocab_size, t);
    }
    free(json);
    free(config);
    return st;
}
