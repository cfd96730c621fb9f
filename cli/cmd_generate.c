/* spanprobe generate CKPT: text from a checkpoint, as llama2.c's run.c does it: start from BOS (or
 * the prompt's tokens), one token per step, stop early at BOS or EOS. Every step runs the model over
 * the whole sequence so far (no KV cache: simple, and exact for a causal model). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/model_load.h"
#include "core/rng.h"

typedef struct {
    const char *ckpt; /* named in errors */
    const char *prompt;
    long steps, seed;
    double temperature;
} generate_opts;

static void print_help(void)
{
    printf("usage: spanprobe generate CKPT [--steps N] [--temperature T] [--seed S] [--prompt TEXT]\n"
           "                          [--device cpu|cuda|auto]\n\n"
           "Prints text from the model in CKPT, token by token, as llama2.c's run.c: the sequence starts\n"
           "with BOS followed by the prompt's tokens (a byte-level model without a prompt starts from an\n"
           "unprinted newline), every step appends one token (the prompt's next token while there is\n"
           "one), and generation stops early when the model picks BOS or EOS. The prompt is printed too.\n\n"
           "options:\n"
           "  --steps N        number of steps, BOS excluded, at most max_seq_len [256]\n"
           "  --temperature T  0 picks the most likely token (greedy); T > 0 samples from\n"
           "                   softmax(logits / T) [0]\n"
           "  --seed S         seed of the sampler [1]\n"
           "  --prompt TEXT    text to start from, tokenized with the checkpoint's tokenizer [none]\n"
           "  --device NAME    cpu, cuda or auto (cuda when a GPU is visible) [auto]\n\n"
           "exit codes: 0 ok, 2 usage, 3 bad checkpoint, 4 NaN/Inf weights, 5 I/O, 8 out of memory\n");
}

static sp_status parse_args(int argc, char **argv, sp_cli_model_args *args, void *opts)
{
    generate_opts *o = opts;
    *o = (generate_opts){.steps = 256, .seed = 1, .temperature = 0.0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strncmp(a, "--", 2) != 0) {
            SP_TRY(sp_cli_take_argument(a, &args->ckpt, "checkpoint"));
            continue;
        }
        SP_TRY(sp_cli_option_value(argc, argv, &i, &v));
        if (strcmp(a, "--steps") == 0)
            SP_TRY(sp_cli_parse_long(a, v, 1, INT_MAX, &o->steps));
        else if (strcmp(a, "--temperature") == 0)
            SP_TRY(sp_cli_parse_double(a, v, 0.0, 1e6, &o->temperature));
        else if (strcmp(a, "--seed") == 0)
            SP_TRY(sp_cli_parse_long(a, v, 0, LONG_MAX, &o->seed));
        else if (strcmp(a, "--prompt") == 0)
            o->prompt = v;
        else if (strcmp(a, "--device") == 0)
            args->device = v;
        else
            return sp_error(SP_ERR_USAGE, "unknown option %s", a);
    }
    o->ckpt = args->ckpt;
    if (!args->ckpt)
        return sp_error(SP_ERR_USAGE, "expected a checkpoint");
    return SP_OK;
}

/* The most likely token (the first on ties), or a draw from softmax(logits / temperature). */
static int pick_token(const sp_real *logits, int vocab, double temperature, sp_rng *rng, double *probs)
{
    int best = 0;
    for (int i = 1; i < vocab; i++)
        if (logits[i] > logits[best])
            best = i;
    if (temperature == 0.0)
        return best;
    double sum = 0.0;
    for (int i = 0; i < vocab; i++) {
        probs[i] = exp(((double)logits[i] - (double)logits[best]) / temperature);
        sum += probs[i];
    }
    double coin = sp_rng_uniform(rng) * sum, acc = 0.0;
    for (int i = 0; i < vocab; i++) {
        acc += probs[i];
        if (coin < acc)
            return i;
    }
    return best; /* rounding left coin at the very top */
}

/* Whether the tokenizer put a token of its own before the prompt's text (a BOS it adds), found by
 * encoding the text without the sequence's special tokens: a prompt may itself begin with the BOS
 * token's text (a chat template's <|im_start|>), which is then printed like the rest. */
static sp_status adds_first_token(const sp_tokenizer *t, const char *prompt, const int32_t *ids, size_t n,
                                  int *added)
{
    int32_t *plain = NULL;
    size_t n_plain = 0;
    SP_TRY(sp_tokenizer_encode(t, prompt, strlen(prompt), 0, &plain, &n_plain));
    *added = n > n_plain || (n && n_plain && ids[0] != plain[0]);
    free(plain);
    return SP_OK;
}

/* The tokens to start from; *n_tokens is at least 1. The array has room for `capacity` >= 1 tokens.
 * *print_first: the first token is the prompt's text (not a start token the tool or tokenizer put). */
static sp_status start_tokens(const sp_tokenizer *t, const char *prompt, size_t capacity, int32_t **tokens,
                              size_t *n_tokens, int *print_first)
{
    int32_t *ids = NULL;
    size_t n = 0;
    SP_TRY(sp_tokenizer_encode(t, prompt ? prompt : "", prompt ? strlen(prompt) : 0, 1, &ids, &n));
    int added = 1;
    sp_status st = prompt && n ? adds_first_token(t, prompt, ids, n, &added) : SP_OK;
    if (st != SP_OK) {
        free(ids);
        return st;
    }
    *print_first = !added;
    int32_t *all = sp_calloc(n > capacity ? n : capacity, sizeof *all, "generated tokens");
    if (all && n)
        memcpy(all, ids, n * sizeof *ids);
    free(ids);
    if (!all)
        return SP_ERR_NOMEM;
    if (n == 0 && t->kind != SP_TOK_BYTES && t->bos_id < 0) {
        free(all);
        return sp_error(SP_ERR_USAGE, "the tokenizer adds nothing to an empty text and has no BOS token: give --prompt TEXT");
    }
    if (n == 0) /* a byte-level model starts from a newline, a tokenizer that adds no BOS from its BOS */
        all[n++] = t->kind == SP_TOK_BYTES ? '\n' : t->bos_id;
    *tokens = all;
    *n_tokens = n;
    return SP_OK;
}

static sp_status generate(sp_model *m, const sp_ckpt_meta *meta, const void *opts)
{
    const generate_opts *o = opts;
    const sp_tokenizer *tok = NULL;
    SP_TRY(sp_cli_model_tokenizer(o->ckpt, meta, &tok));
    const sp_backend *be = sp_model_backend(m);
    const int vocab = meta->cfg.vocab_size;
    const int steps = o->steps < meta->cfg.max_seq_len ? (int)o->steps : meta->cfg.max_seq_len;
    sp_rng rng;
    sp_rng_seed(&rng, (uint64_t)o->seed);

    int32_t *tokens = NULL;
    size_t n_prompt = 0;
    sp_real *logits = sp_malloc((size_t)vocab * sizeof *logits, "logits");
    double *probs = sp_malloc((size_t)vocab * sizeof *probs, "probabilities");
    char *piece = sp_malloc((size_t)tok->max_piece_len, "decoded piece");
    sp_status st = SP_ERR_NOMEM;
    int print_first = 0;
    if (!logits || !probs || !piece ||
        (st = start_tokens(tok, o->prompt, (size_t)steps + 1, &tokens, &n_prompt, &print_first)))
        goto done;
    if (print_first)
        fwrite(piece, 1, sp_tokenizer_decode(tok, -1, tokens[0], piece, (size_t)tok->max_piece_len), stdout);
    for (int pos = 0; pos < steps; pos++) {
        int next;
        if ((size_t)pos + 1 < n_prompt) {
            next = tokens[pos + 1];
        } else {
            if ((st = sp_model_forward(m, tokens, NULL, 1, pos + 1, NULL)) != SP_OK)
                goto done;
            be->download(logits, sp_model_logits(m) + (size_t)pos * (size_t)vocab, (size_t)vocab * sizeof *logits);
            next = pick_token(logits, vocab, o->temperature, &rng, probs);
        }
        if ((size_t)pos + 1 >= n_prompt && (next == tok->bos_id || next == tok->eos_id))
            break; /* a generated end; the prompt's own specials (a chat template's) are text */
        fwrite(piece, 1, sp_tokenizer_decode(tok, tokens[pos], next, piece, (size_t)tok->max_piece_len), stdout);
        fflush(stdout);
        tokens[pos + 1] = next;
    }
    putchar('\n');
    st = SP_OK;
done:
    free(tokens);
    free(logits);
    free(probs);
    free(piece);
    return st;
}

int sp_cmd_generate(int argc, char **argv)
{
    generate_opts o;
    return sp_cli_model_command("generate", argc, argv, print_help, parse_args, generate, &o);
}
