#include "cli/model_load.h"

#include "cli/cli.h"
#include "io/model_source.h"

static sp_status load_model(const char *path, const char *device, sp_model **model, sp_ckpt_meta *meta)
{
    const sp_backend *be = NULL;
    SP_TRY(sp_backend_select(device, &be));
    SP_TRY(sp_model_source_load(path, be, model, meta));
    sp_status uploaded = sp_model_sync(*model);
    if (uploaded != SP_OK) {
        sp_model_free(*model);
        *model = NULL;
        return uploaded;
    }
    if (!meta->has_tokenizer && meta->cfg.vocab_size == 256)
        sp_tokenizer_init_bytes(&meta->tokenizer);
    return SP_OK;
}

sp_status sp_cli_model_tokenizer(const char *path, const sp_ckpt_meta *meta, const sp_tokenizer **tok)
{
    if (!meta->has_tokenizer && meta->cfg.vocab_size != 256)
        return sp_error(SP_ERR_INPUT, "%s: has no tokenizer and vocab_size is %d (expected a stored tokenizer, "
                                      "tokenizer.json, or 256 for bytes; token ids work without one)",
                        path, meta->cfg.vocab_size);
    *tok = &meta->tokenizer;
    return SP_OK;
}

static sp_status run_on_model(const sp_cli_model_args *args, sp_cli_model_fn fn, const void *opts)
{
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    sp_status st = load_model(args->ckpt, args->device, &m, &meta);
    if (st == SP_OK)
        st = fn(m, &meta, opts);
    sp_model_free(m);
    sp_ckpt_meta_free(&meta);
    return st;
}

int sp_cli_model_command(const char *command, int argc, char **argv, void (*print_help)(void),
                         sp_cli_model_parse_fn parse, sp_cli_model_fn fn, void *opts)
{
    if (sp_cli_wants_help(argc, argv)) {
        print_help();
        return SP_OK;
    }
    sp_error_clear();
    sp_cli_model_args args = {.device = "auto"};
    if (parse(argc, argv, &args, opts) != SP_OK)
        return sp_cli_usage_error(command, "%s", sp_error_message());
    return sp_cli_report(command, run_on_model(&args, fn, opts));
}
