/* cli/cmd_init.c: `spanprobe init`: a freshly initialized checkpoint from model options. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/checkpoint.h"
#include "io/model_source.h"
#include "kernels/backend.h"

static void print_help(void)
{
    printf("usage: spanprobe init [model options] [--seed S] --out CKPT.h5\n\n"
           "Creates a checkpoint (docs/formats.md) holding a model drawn from its initialization: every\n"
           "matrix from N(0, std^2) as the config says, norm gains 1, biases 0. Models with vocab_size 256\n"
           "get the byte tokenizer. Nothing is written unless the whole file is.\n\n"
           "  --out FILE         the checkpoint to write (required); replaced atomically if it exists\n"
           "  --seed S           seed of the initialization, 0..%ld [1]; the same seed gives the same bits\n"
           "  --help             this text\n\n",
           LONG_MAX);
    sp_cli_print_config_help();
    printf("\nexit codes: 0 written; 2 bad option or config contradiction; 3 bad --config file;\n"
           "            5 cannot read the config or write the output; 8 out of memory\n");
}

static sp_status write_checkpoint(const sp_config *cfg, long seed, const char *out)
{
    sp_model *m = NULL;
    sp_status st = sp_model_create(cfg, sp_backend_cpu(), &m);
    if (st == SP_OK)
        st = sp_model_init(m, (uint64_t)seed);
    if (st == SP_OK) {
        sp_ckpt_meta meta;
        sp_ckpt_meta_init(&meta);
        meta.has_tokenizer = cfg->vocab_size == 256; /* sp_ckpt_meta_init set up the byte tokenizer */
        snprintf(meta.source, sizeof meta.source, "spanprobe init --variant %s --seed %ld",
                 sp_variant_names[cfg->variant], seed);
        st = sp_ckpt_write(out, m, &meta, NULL, NULL);
        if (st == SP_OK)
            printf("%s: %s model, %d layers, d_model %d, %zu weights, seed %ld\n", out,
                   sp_variant_names[cfg->variant], cfg->n_layers, cfg->d_model, sp_model_n_weights(m), seed);
        sp_ckpt_meta_free(&meta);
    }
    sp_model_free(m);
    return st;
}

int sp_cmd_init(int argc, char **argv)
{
    if (sp_cli_wants_help(argc, argv)) {
        print_help();
        return SP_OK;
    }
    unsigned char *consumed = calloc((size_t)argc, 1);
    if (!consumed)
        return SP_ERR_NOMEM;
    sp_config cfg;
    long seed = 1;
    const char *out = NULL, *value = NULL;
    sp_status st = sp_cli_parse_config(argc, argv, consumed, &cfg);
    for (int i = 1; i < argc && st == SP_OK; i++) {
        if (consumed[i])
            continue;
        if (strcmp(argv[i], "--seed") == 0) {
            st = sp_cli_option_value(argc, argv, &i, &value);
            if (st == SP_OK)
                st = sp_cli_parse_long("--seed", value, 0, LONG_MAX, &seed);
        } else if (strcmp(argv[i], "--out") == 0) {
            st = sp_cli_option_value(argc, argv, &i, &out);
        } else {
            free(consumed);
            return sp_cli_usage_error("init", "unknown option or argument '%s'", argv[i]);
        }
    }
    free(consumed);
    if (st != SP_OK)
        return sp_cli_report("init", st);
    if (!out)
        return sp_cli_usage_error("init", "--out CKPT.h5 is required");
    for (int i = 1; i + 1 < argc; i++) /* the checkpoint may not replace a config file it was made from */
        if (strcmp(argv[i], "--config") == 0 && (st = sp_check_outputs(&out, 1, (const char *[]){argv[i + 1]}, 1)) != SP_OK)
            return sp_cli_report("init", st);
    return sp_cli_report("init", write_checkpoint(&cfg, seed, out));
}
