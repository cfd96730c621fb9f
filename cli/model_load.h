/* cli/model_load.h: what `generate` and `dump` share: a command on one checkpoint, loaded with its
 * tokenizer. */
#ifndef SP_CLI_MODEL_LOAD_H
#define SP_CLI_MODEL_LOAD_H

#include "io/checkpoint.h"

/* The checkpoint a command runs on, and the device: "cpu", "cuda" or "auto" (the default). */
typedef struct {
    const char *ckpt, *device;
} sp_cli_model_args;

/* Parses argv into args and the command's own options (every failure a usage error). */
typedef sp_status (*sp_cli_model_parse_fn)(int argc, char **argv, sp_cli_model_args *args, void *opts);
/* What the command does with the loaded model. */
typedef sp_status (*sp_cli_model_fn)(sp_model *model, const sp_ckpt_meta *meta, const void *opts);

/* The tokenizer for text: the stored one, else bytes when vocab_size is 256; an error naming path
 * otherwise. */
sp_status sp_cli_model_tokenizer(const char *path, const sp_ckpt_meta *meta, const sp_tokenizer **tok);

/* The whole command: with -h or --help prints its help; else parses argv (a failure is a usage
 * error), loads the checkpoint (or any model source: io/model_source.h) and runs fn on it (a failure
 * is reported on one line). Commands that read text take the tokenizer through
 * sp_cli_model_tokenizer. Returns the sp_status to exit with. */
int sp_cli_model_command(const char *command, int argc, char **argv, void (*print_help)(void),
                         sp_cli_model_parse_fn parse, sp_cli_model_fn fn, void *opts);

#endif
