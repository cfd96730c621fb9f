/* spanprobe tokenize MODEL --text FILE [--no-bos]: the token ids of a text under a model's
 * tokenizer, whitespace-separated on stdout, the form `--tokens FILE` reads back. MODEL is any
 * model input (a checkpoint, a Hugging Face directory); only its tokenizer is read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/file_read.h"
#include "io/model_source.h"

/* Largest text file tokenized. */
#define TOKENIZE_MAX_TEXT_BYTES ((size_t)1 << 30)

typedef struct {
    const char *model, *text_path;
    int add_bos;
} tokenize_opts;

static void print_help(void)
{
    printf("usage: spanprobe tokenize MODEL --text FILE [--no-bos]\n\n"
           "Prints the token ids of FILE under MODEL's tokenizer (a spanprobe checkpoint or a Hugging Face\n"
           "model directory with tokenizer.json), whitespace-separated, 20 to a line: the format --tokens\n"
           "reads. The ids are those of Hugging Face tokenizers' encode(text) (docs/import.md).\n\n"
           "options:\n"
           "  --text FILE   the text (UTF-8)\n"
           "  --no-bos      no BOS token first, even where the tokenizer adds one\n\n"
           "exit codes: 0 ok, 2 usage, 3 bad model, tokenizer or text, 5 I/O, 8 out of memory\n");
}

static sp_status parse_args(int argc, char **argv, tokenize_opts *o)
{
    *o = (tokenize_opts){.add_bos = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strncmp(a, "--", 2) != 0) {
            SP_TRY(sp_cli_take_argument(a, &o->model, "model"));
            continue;
        }
        if (strcmp(a, "--no-bos") == 0) {
            o->add_bos = 0;
            continue;
        }
        SP_TRY(sp_cli_option_value(argc, argv, &i, &v));
        if (strcmp(a, "--text") == 0)
            o->text_path = v;
        else
            return sp_error(SP_ERR_USAGE, "unknown option %s", a);
    }
    if (!o->model)
        return sp_error(SP_ERR_USAGE, "expected a model (checkpoint or Hugging Face directory)");
    if (!o->text_path)
        return sp_error(SP_ERR_USAGE, "expected --text FILE");
    return SP_OK;
}

static sp_status print_ids(const tokenize_opts *o, const sp_ckpt_meta *meta)
{
    if (!meta->has_tokenizer && meta->cfg.vocab_size != 256)
        return sp_error(SP_ERR_INPUT, "%s: has no tokenizer (and vocab_size %d is not bytes)", o->model,
                        meta->cfg.vocab_size);
    unsigned char *text = NULL;
    size_t len = 0;
    SP_TRY(sp_file_read_all(o->text_path, TOKENIZE_MAX_TEXT_BYTES, &text, &len));
    int32_t *ids = NULL;
    size_t n = 0;
    sp_status st = sp_tokenizer_encode(&meta->tokenizer, (const char *)text, len, o->add_bos, &ids, &n);
    free(text);
    for (size_t i = 0; st == SP_OK && i < n; i++)
        printf("%d%c", ids[i], i + 1 == n || i % 20 == 19 ? '\n' : ' ');
    free(ids);
    if (st == SP_OK && fflush(stdout) != 0)
        return sp_error(SP_ERR_IO, "stdout: write failed");
    return st;
}

int sp_cmd_tokenize(int argc, char **argv)
{
    if (sp_cli_wants_help(argc, argv)) {
        print_help();
        return SP_OK;
    }
    sp_error_clear();
    tokenize_opts o;
    if (parse_args(argc, argv, &o) != SP_OK)
        return sp_cli_usage_error("tokenize", "%s", sp_error_message());
    sp_ckpt_meta meta;
    sp_status st = sp_model_source_read_meta(o.model, &meta);
    if (st == SP_OK) {
        st = print_ids(&o, &meta);
        sp_ckpt_meta_free(&meta);
    }
    return sp_cli_report("tokenize", st);
}
