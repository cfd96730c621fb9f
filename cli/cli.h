/* cli/cli.h: the command table and what commands share (errors, help, option parsing). */
#ifndef SP_CLI_H
#define SP_CLI_H

#include "core/common.h"
#include "core/config.h"

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command name; returns an sp_status */
} sp_command;

/* Prints "spanprobe <command>: <last sp_error message>" on one line to stderr, returns its code. */
int sp_cli_report(const char *command, sp_status status);
/* Prints a usage error and returns SP_ERR_USAGE. */
int sp_cli_usage_error(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when argv holds -h or --help. */
int sp_cli_wants_help(int argc, char **argv);

/* Model config options shared by `init` and `train`: --config FILE.json, then --<field> VALUE for
 * every field of core/config.h (e.g. --d-model 64, --variant span). Unknown options are left for
 * the caller: consumed[i] is set for each argv entry taken. Resolves and validates the config. */
sp_status sp_cli_parse_config(int argc, char **argv, unsigned char *consumed, sp_config *cfg);
/* Prints the config options with their defaults, for --help. */
void sp_cli_print_config_help(void);

/* The generic pieces behind sp_cli_parse_config, for commands with more option tables (train):
 * applies every --config FILE.json (keys of any of the tables) in argv order; then --<field> VALUE
 * for every field of t; prints the fields of t with their values in `defaults`. */
sp_status sp_cli_load_config_files(int argc, char **argv, unsigned char *consumed, int n_tables,
                                   const sp_field_table *const *tables, void *const *objs);
sp_status sp_cli_parse_fields(int argc, char **argv, unsigned char *consumed, const sp_field_table *t, void *obj);
void sp_cli_print_fields_help(const char *title, const sp_field_table *t, const void *defaults);

/* Takes arg as the command's one positional argument into *slot; a second one is a usage error
 * ("unexpected argument 'x' (one <what> expected)"). */
sp_status sp_cli_take_argument(const char *arg, const char **slot, const char *what);
/* The value after the flag argv[*i] (advancing *i); numbers checked against [min, max]. Usage errors
 * name the option (cli/options.c). */
sp_status sp_cli_option_value(int argc, char **argv, int *i, const char **value);
sp_status sp_cli_parse_long(const char *option, const char *value, long min, long max, long *out);
sp_status sp_cli_parse_double(const char *option, const char *value, double min, double max, double *out);

int sp_cmd_inspect(int argc, char **argv);
int sp_cmd_init(int argc, char **argv);
int sp_cmd_train(int argc, char **argv);
int sp_cmd_import(int argc, char **argv);
int sp_cmd_tokenize(int argc, char **argv);
int sp_cmd_generate(int argc, char **argv);
int sp_cmd_dump(int argc, char **argv);
int sp_cmd_analyze(int argc, char **argv);
int sp_cmd_plot(int argc, char **argv);
int sp_cmd_study(int argc, char **argv);
int sp_cmd_check(int argc, char **argv);
int sp_cmd_compare(int argc, char **argv);
int sp_cmd_drift(int argc, char **argv);

#endif
