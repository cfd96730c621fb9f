/* cli/config_opts.c: options described by field tables (core/fields.h) on the command line:
 * --config FILE.json, then --<field> VALUE for every field of each table. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "io/config_file.h"

sp_status sp_cli_load_config_files(int argc, char **argv, unsigned char *consumed, int n_tables,
                                   const sp_field_table *const *tables, void *const *objs)
{
    for (int i = 1; i < argc; i++)
        if (!consumed[i] && strcmp(argv[i], "--config") == 0) {
            if (i + 1 >= argc)
                return sp_error(SP_ERR_USAGE, "--config needs a file");
            SP_TRY(sp_fields_load_json_tables(argv[i + 1], n_tables, tables, objs));
            consumed[i] = consumed[i + 1] = 1;
        }
    return SP_OK;
}

sp_status sp_cli_parse_fields(int argc, char **argv, unsigned char *consumed, const sp_field_table *t, void *obj)
{
    for (int i = 1; i < argc; i++) {
        if (consumed[i] || strncmp(argv[i], "--", 2) != 0)
            continue;
        const sp_field *f = sp_fields_find(t, argv[i] + 2);
        if (!f)
            continue;
        if (i + 1 >= argc)
            return sp_error(SP_ERR_USAGE, "%s needs a value", argv[i]);
        SP_TRY(sp_fields_set(t, obj, f->name, argv[i + 1], argv[i]));
        consumed[i] = consumed[i + 1] = 1;
        i++;
    }
    return SP_OK;
}

sp_status sp_cli_parse_config(int argc, char **argv, unsigned char *consumed, sp_config *cfg)
{
    sp_config_defaults(cfg);
    /* the config file first, so that options on the command line override it */
    const sp_field_table *tables[] = {&sp_config_table};
    void *objs[] = {cfg};
    SP_TRY(sp_cli_load_config_files(argc, argv, consumed, 1, tables, objs));
    SP_TRY(sp_cli_parse_fields(argc, argv, consumed, &sp_config_table, cfg));
    SP_TRY(sp_config_resolve(cfg));
    sp_status st = sp_config_validate(cfg, "model options");
    return st == SP_ERR_INPUT ? SP_ERR_USAGE : st;
}

void sp_cli_print_fields_help(const char *title, const sp_field_table *t, const void *defaults)
{
    printf("%s\n", title);
    char value[SP_FIELD_STRING_MAX], flag[64];
    for (int i = 0; i < t->n_fields; i++) {
        const sp_field *f = &t->fields[i];
        snprintf(flag, sizeof flag, "--%s", f->name);
        for (char *c = flag + 2; *c; c++)
            if (*c == '_')
                *c = '-';
        if (f->type == SP_FIELD_DOUBLE) /* short for reading; files keep every digit */
            snprintf(value, sizeof value, "%g", *(const double *)((const char *)defaults + f->offset));
        else
            sp_fields_format(defaults, f, value, sizeof value);
        /* a negative boolean means "decided later" (the config's per-variant defaults) */
        if (f->type == SP_FIELD_BOOL && *(const int *)((const char *)defaults + f->offset) < 0)
            snprintf(value, sizeof value, "per variant");
        printf("  %-18s %s [%s]\n", flag, f->help, value);
    }
}

void sp_cli_print_config_help(void)
{
    sp_config def;
    sp_config_defaults(&def);
    sp_cli_print_fields_help("model options (also as keys of a JSON file given with --config FILE):",
                             &sp_config_table, &def);
}
