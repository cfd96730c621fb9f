/* spanprobe dump CKPT (--text FILE | --tokens FILE) --out DUMP.h5: runs the model over fixed-length
 * sequences of the input and writes every capture point, layer by layer, as an activation dump
 * (io/dump.h). The model runs a few sequences at a time, so the input may be much larger than what
 * one forward pass holds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/model_load.h"
#include "io/dump.h"
#include "io/file_read.h"
#include "io/model_source.h"
#include "io/token_file.h"

/* Rows per forward pass (at least one sequence). */
#define DUMP_CHUNK_ROWS 4096
/* Largest text file tokenized. */
#define DUMP_MAX_TEXT_BYTES ((size_t)1 << 30)

typedef struct {
    const char *ckpt, *text_path, *tokens_path, *out;
    long seq_len, batch_limit; /* 0: default */
    int logits;
} dump_opts;

static void print_help(void)
{
    printf("usage: spanprobe dump CKPT (--text FILE | --tokens FILE) --out DUMP.h5 [--logits] [--seq T]\n"
           "                      [--batch-limit N] [--device cpu|cuda|auto]\n\n"
           "Runs the model in CKPT over the input cut into sequences of T tokens (a shorter tail is\n"
           "dropped) and writes an activation dump (docs/formats.md): every layer's hidden states h_0..h_L\n"
           "(both streams for siamese), the FFN latents (the input of W_2), the pre-normalization sums\n"
           "sum_a and sum_z where the variant has them, and with --logits the logits.\n\n"
           "options:\n"
           "  --text FILE      text, tokenized with the checkpoint's tokenizer (BOS first where it has\n"
           "                   one; bytes for a byte-level model)\n"
           "  --tokens FILE    token ids: decimal integers in [0, vocab_size) separated by whitespace\n"
           "  --out DUMP.h5    the dump, written atomically (no file is left on error)\n"
           "  --logits         also write the logits [rows, vocab_size]\n"
           "  --seq T          tokens per sequence, 1..max_seq_len [min(max_seq_len, 256)]\n"
           "  --batch-limit N  write at most N sequences [all]\n"
           "  --device NAME    cpu, cuda or auto (cuda when a GPU is visible) [auto]\n\n"
           "exit codes: 0 ok, 2 usage, 3 bad input (checkpoint, token file, too few tokens),\n"
           "            4 NaN/Inf, 5 I/O, 8 out of memory\n");
}

static sp_status parse_args(int argc, char **argv, sp_cli_model_args *args, void *opts)
{
    dump_opts *o = opts;
    *o = (dump_opts){0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strncmp(a, "--", 2) != 0) {
            SP_TRY(sp_cli_take_argument(a, &args->ckpt, "checkpoint"));
            continue;
        }
        if (strcmp(a, "--logits") == 0) {
            o->logits = 1;
            continue;
        }
        SP_TRY(sp_cli_option_value(argc, argv, &i, &v));
        if (strcmp(a, "--text") == 0)
            o->text_path = v;
        else if (strcmp(a, "--tokens") == 0)
            o->tokens_path = v;
        else if (strcmp(a, "--out") == 0)
            o->out = v;
        else if (strcmp(a, "--device") == 0)
            args->device = v;
        else if (strcmp(a, "--seq") == 0)
            SP_TRY(sp_cli_parse_long(a, v, 1, 1L << 30, &o->seq_len));
        else if (strcmp(a, "--batch-limit") == 0)
            SP_TRY(sp_cli_parse_long(a, v, 1, 1L << 30, &o->batch_limit));
        else
            return sp_error(SP_ERR_USAGE, "unknown option %s", a);
    }
    if (!args->ckpt)
        return sp_error(SP_ERR_USAGE, "expected a checkpoint");
    o->ckpt = args->ckpt; /* named in the dump's source */
    if (!o->text_path == !o->tokens_path)
        return sp_error(SP_ERR_USAGE, "expected exactly one of --text FILE and --tokens FILE");
    if (!o->out)
        return sp_error(SP_ERR_USAGE, "expected --out DUMP.h5");
    SP_TRY(sp_model_source_check_output(o->ckpt, o->out));
    return sp_model_source_check_output(o->text_path ? o->text_path : o->tokens_path, o->out);
}

static sp_status read_input(const dump_opts *o, const sp_ckpt_meta *meta, int32_t **ids, size_t *n_ids)
{
    if (o->tokens_path)
        return sp_token_file_read(o->tokens_path, meta->cfg.vocab_size, ids, n_ids);
    const sp_tokenizer *tok = NULL;
    SP_TRY(sp_cli_model_tokenizer(o->ckpt, meta, &tok));
    unsigned char *text = NULL;
    size_t len = 0;
    SP_TRY(sp_file_read_all(o->text_path, DUMP_MAX_TEXT_BYTES, &text, &len));
    sp_status st = sp_tokenizer_encode(tok, (const char *)text, len, 1, ids, n_ids);
    free(text);
    return st;
}

/* Downloads rows [0, n_rows) of a backend array of the given width and writes them at row0. A
 * non-finite value is SP_ERR_NUMERIC naming the array, layer and token: a dump of NaN or Inf would
 * only move the failure into every analysis of it. */
static sp_status copy_rows(sp_dump_writer *w, const sp_backend *be, sp_dump_kind kind, int stream, int layer,
                           int64_t row0, int n_rows, int width, const sp_real *src, sp_real *host)
{
    static const char *const names[SP_DUMP_N_KINDS] = {"hidden state", "FFN latent", "sum_a", "sum_z", "logits"};
    if (!src)
        return sp_error(SP_ERR_INTERNAL, "dump: the model has no capture point for array %d, layer %d, stream %d",
                        (int)kind, layer, stream);
    const size_t n = (size_t)n_rows * (size_t)width;
    be->download(host, src, n * sizeof *host);
    if (be->count_nonfinite(n, src) > 0) {
        size_t i = 0;
        while (i < n && isfinite(host[i]))
            i++;
        return sp_error(SP_ERR_NUMERIC,
                        "dump: %s of layer %d%s: %g at token %lld: the activations overflow float32 (nothing written)",
                        names[kind], layer, stream ? " (stream y)" : "", (double)host[i < n ? i : 0],
                        (long long)(row0 + (int64_t)(i / (size_t)width)));
    }
    return sp_dump_write(w, kind, stream, layer, row0, n_rows, host);
}

/* Runs sequences [s0, s0 + n_seq) and writes everything they produce. */
static sp_status dump_chunk(sp_model *m, sp_dump_writer *w, const sp_dump_info *info, const int32_t *tokens,
                            int s0, int n_seq, sp_real *host)
{
    const sp_config *cfg = sp_model_config(m);
    const sp_backend *be = sp_model_backend(m);
    const int T = info->seq_len, rows = n_seq * T, L = cfg->n_layers;
    const int64_t row0 = (int64_t)s0 * T;
    SP_TRY(sp_model_forward(m, tokens + row0, NULL, n_seq, T, NULL));
    for (int l = 0; l <= L; l++)
        for (int s = 0; s < info->n_streams; s++)
            SP_TRY(copy_rows(w, be, SP_DUMP_HIDDEN, s, l, row0, rows, cfg->d_model, sp_model_hidden(m, l, s), host));
    for (int l = 0; l < L; l++) {
        SP_TRY(copy_rows(w, be, SP_DUMP_FFN_LATENT, 0, l, row0, rows, cfg->d_ff, sp_model_ffn_latent(m, l), host));
        const struct {
            const char *slot;
            sp_dump_kind kind;
        } sums[] = {{"sum_a", SP_DUMP_SUM_A}, {"sum_z", SP_DUMP_SUM_Z}};
        for (size_t k = 0; k < SP_ARRAY_LEN(sums); k++) {
            const sp_real *sum = sp_model_slot(m, l, sums[k].slot);
            if (sum)
                SP_TRY(copy_rows(w, be, sums[k].kind, 0, l, row0, rows, cfg->d_model, sum, host));
        }
    }
    if (info->has_logits)
        SP_TRY(copy_rows(w, be, SP_DUMP_LOGITS, 0, 0, row0, rows, cfg->vocab_size, sp_model_logits(m), host));
    return SP_OK;
}

static sp_status run_dump(const dump_opts *o, sp_model *m, const sp_ckpt_meta *meta, const int32_t *tokens,
                          size_t n_tokens)
{
    const sp_config *cfg = &meta->cfg;
    const char *input = o->text_path ? o->text_path : o->tokens_path;
    long T = o->seq_len ? o->seq_len : (cfg->max_seq_len < 256 ? cfg->max_seq_len : 256);
    if (T > cfg->max_seq_len)
        return sp_error(SP_ERR_USAGE, "--seq %ld is longer than the model's max_seq_len %d", T, cfg->max_seq_len);
    size_t batch = n_tokens / (size_t)T;
    if (batch == 0)
        return sp_error(SP_ERR_INPUT, "%s: %zu tokens, fewer than one sequence of %ld (expected at least %ld; see --seq)",
                        input, n_tokens, T, T);
    if (o->batch_limit && batch > (size_t)o->batch_limit)
        batch = (size_t)o->batch_limit;
    if (batch > (size_t)1 << 30)
        return sp_error(SP_ERR_INPUT, "%s: %zu sequences is too many for one dump (use --batch-limit)", input, batch);

    sp_dump_info info = {.n_layers = cfg->n_layers, .d_model = cfg->d_model,
                         .n_streams = sp_config_n_streams(cfg), .d_ff = cfg->d_ff, .vocab_size = cfg->vocab_size,
                         .batch = (int)batch, .seq_len = (int)T, .has_ffn_latent = 1,
                         .has_sum_a = sp_config_has_slot(cfg, "sum_a"), .has_sum_z = sp_config_has_slot(cfg, "sum_z"),
                         .has_logits = o->logits};
    snprintf(info.variant, sizeof info.variant, "%s", sp_variant_names[cfg->variant]);
    snprintf(info.source, sizeof info.source, "spanprobe dump %s on %s %s (%zu of %zu tokens)", o->ckpt,
             o->text_path ? "text" : "token ids", input, batch * (size_t)T, n_tokens);

    int chunk = DUMP_CHUNK_ROWS / (int)T > 0 ? DUMP_CHUNK_ROWS / (int)T : 1;
    size_t width = (size_t)(cfg->d_ff > cfg->d_model ? cfg->d_ff : cfg->d_model);
    if (o->logits && (size_t)cfg->vocab_size > width)
        width = (size_t)cfg->vocab_size;
    size_t host_elems = 0;
    SP_TRY(sp_size_mul3((size_t)chunk, (size_t)T, width, &host_elems, "dump staging buffer"));
    sp_real *host = sp_malloc(host_elems * sizeof *host, "dump staging buffer");
    if (!host)
        return SP_ERR_NOMEM;
    sp_dump_writer *w = NULL;
    sp_status st = sp_dump_create(o->out, &info, tokens, &w);
    for (int s0 = 0; st == SP_OK && s0 < (int)batch; s0 += chunk) {
        int n_seq = (int)batch - s0 < chunk ? (int)batch - s0 : chunk;
        st = dump_chunk(m, w, &info, tokens, s0, n_seq, host);
    }
    free(host);
    if (st != SP_OK) {
        sp_dump_abort(w);
        return st;
    }
    SP_TRY(sp_dump_commit(w));
    printf("wrote %s: %zu sequences x %ld tokens (of %zu), %d layers x %d stream(s), FFN latents%s%s\n", o->out,
           batch, T, n_tokens, cfg->n_layers, info.n_streams,
           info.has_sum_a || info.has_sum_z ? ", pre-normalization sums" : "", info.has_logits ? ", logits" : "");
    return SP_OK;
}

static sp_status dump(sp_model *m, const sp_ckpt_meta *meta, const void *opts)
{
    const dump_opts *o = opts;
    int32_t *tokens = NULL;
    size_t n_tokens = 0;
    sp_status st = read_input(o, meta, &tokens, &n_tokens);
    if (st == SP_OK)
        st = run_dump(o, m, meta, tokens, n_tokens);
    free(tokens);
    return st;
}

int sp_cmd_dump(int argc, char **argv)
{
    dump_opts o;
    return sp_cli_model_command("dump", argc, argv, print_help, parse_args, dump, &o);
}
