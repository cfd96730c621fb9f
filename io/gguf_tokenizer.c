/* io/gguf_tokenizer.c: placeholder until the GGUF tokenizer lands: files with a tokenizer are refused. */
#include "io/gguf_tokenizer.h"

int sp_gguf_has_tokenizer(const sp_gguf *g)
{
    return sp_gguf_kv_find(g, "tokenizer.ggml.model") >= 0;
}

sp_status sp_tokenizer_load_gguf(const sp_gguf *g, const char *path, int vocab_size, sp_tokenizer *t)
{
    (void)g;
    (void)vocab_size;
    (void)t;
    return sp_error(SP_ERR_INPUT, "%s: tokenizers from GGUF metadata are not implemented yet", path);
}
