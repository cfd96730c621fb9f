#include "cli/model_load.h"

sp_status sp_cli_load_model(const char *path, const char *device, sp_model **model, sp_ckpt_meta *meta)
{
    const sp_backend *be = NULL;
    SP_TRY(sp_backend_select(device, &be));
    SP_TRY(sp_ckpt_load(path, be, model, meta));
    if (meta->has_tokenizer)
        return SP_OK;
    if (meta->cfg.vocab_size == 256) {
        sp_tokenizer_init_bytes(&meta->tokenizer);
        return SP_OK;
    }
    sp_model_free(*model);
    *model = NULL;
    return sp_error(SP_ERR_INPUT, "%s: /tokenizer is absent and vocab_size is %d (expected a stored tokenizer, or "
                                  "256 for bytes)",
                    path, meta->cfg.vocab_size);
}
