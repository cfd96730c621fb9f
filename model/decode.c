/* model/decode.c: the decoder of model/model.h: the forward pass's output path (sp_output_fwd:
 * final norms, head, logit soft-cap) on any hidden state, into buffers of its own. */
#include <stdlib.h>

#include "model/model_internal.h"

struct sp_decoder {
    sp_model *m;
    int max_rows;
    sp_real *block;  /* the one backend allocation the buffers below are carved from */
    sp_out_bufs bufs;
    sp_real *logits; /* [max_rows, vocab] */
};

sp_status sp_decoder_create(sp_model *m, int max_rows, sp_decoder **out)
{
    *out = NULL;
    if (max_rows < 1)
        return sp_error(SP_ERR_INTERNAL, "sp_decoder_create: max_rows = %d (expected >= 1)", max_rows);
    const size_t rows = (size_t)max_rows, d = (size_t)m->cfg.d_model;
    size_t logit_elems;
    SP_TRY(sp_size_mul3(rows, (size_t)m->cfg.vocab_size, 1, &logit_elems, "decoder logits"));
    /* four [rows, d] buffers, mean and rstd of three norms, the logits */
    size_t bytes;
    SP_TRY(sp_size_mul3(4 * rows * d + 6 * rows + logit_elems, sizeof(sp_real), 1, &bytes, "decoder buffers"));
    sp_decoder *dec = sp_calloc(1, sizeof *dec, "decoder");
    if (!dec)
        return SP_ERR_NOMEM;
    dec->m = m;
    dec->max_rows = max_rows;
    if (!(dec->block = m->be->alloc(bytes, "decoder buffers"))) {
        free(dec);
        return SP_ERR_NOMEM;
    }
    sp_real *p = dec->block;
    sp_real **carve[] = {&dec->bufs.fin_x, &dec->bufs.fin_y, &dec->bufs.fin_sum, &dec->bufs.hf};
    for (size_t i = 0; i < SP_ARRAY_LEN(carve); i++, p += rows * d)
        *carve[i] = p;
    sp_norm_state *norms[] = {&dec->bufs.fin_x_norm, &dec->bufs.fin_y_norm, &dec->bufs.fin_norm};
    for (size_t i = 0; i < SP_ARRAY_LEN(norms); i++, p += 2 * rows) {
        norms[i]->mean = m->cfg.norm == SP_NORM_LAYERNORM ? p : NULL;
        norms[i]->rstd = p + rows;
    }
    dec->logits = p;
    *out = dec;
    return SP_OK;
}

sp_status sp_decoder_run(sp_decoder *dec, int rows, const sp_real *const *h, const sp_real **logits)
{
    if (rows < 1 || rows > dec->max_rows)
        return sp_error(SP_ERR_INTERNAL, "sp_decoder_run: %d rows (the decoder holds 1..%d)", rows, dec->max_rows);
    sp_output_fwd(dec->m, rows, h, &dec->bufs, dec->logits);
    *logits = dec->logits;
    return sp_model_sync(dec->m);
}

void sp_decoder_free(sp_decoder *dec)
{
    if (!dec)
        return;
    dec->m->be->free(dec->block);
    free(dec);
}
