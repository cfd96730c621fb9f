#include "fuzz/use_tokenizer.h"

#include <stdlib.h>
#include <string.h>

static const char text[] = "Call me Ishmael.  Some years ago--never mind how long\n\n\tprecisely 1234567 "
                           "caf\xc3\xa9 \xe2\x96\x81x \xf0\x9f\x90\x8b <s></s><unk><|endoftext|> <0x0A> \r\n";

void fuzz_use_tokenizer(const sp_tokenizer *t)
{
    char buf[64];
    for (int bos = 0; bos <= 1; bos++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (sp_tokenizer_encode(t, text, strlen(text), bos, &ids, &n) == SP_OK)
            for (size_t i = 0; i < n; i++)
                sp_tokenizer_decode(t, i ? ids[i - 1] : -1, ids[i], buf, sizeof buf);
        free(ids);
    }
    for (int id = 0; id < t->vocab_size; id++)
        sp_tokenizer_decode(t, id ? id - 1 : t->bos_id, id, buf, sizeof buf);
    sp_error_clear();
}
