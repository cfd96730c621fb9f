#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "io/config_file.h"

sp_status sp_cli_parse_config(int argc, char **argv, unsigned char *consumed, sp_config *cfg)
{
    sp_config_defaults(cfg);
    /* the config file first, so that options on the command line override it */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--config") == 0) {
            if (i + 1 >= argc)
                return sp_error(SP_ERR_USAGE, "--config needs a file");
            SP_TRY(sp_config_load_json(argv[i + 1], cfg));
            consumed[i] = consumed[i + 1] = 1;
        }
    for (int i = 1; i < argc; i++) {
        if (consumed[i] || strncmp(argv[i], "--", 2) != 0)
            continue;
        const sp_config_field *f = sp_config_find(argv[i] + 2);
        if (!f)
            continue;
        if (i + 1 >= argc)
            return sp_error(SP_ERR_USAGE, "%s needs a value", argv[i]);
        SP_TRY(sp_config_set(cfg, f->name, argv[i + 1], argv[i]));
        consumed[i] = consumed[i + 1] = 1;
        i++;
    }
    SP_TRY(sp_config_resolve(cfg));
    sp_status st = sp_config_validate(cfg, "model options");
    return st == SP_ERR_INPUT ? SP_ERR_USAGE : st;
}

void sp_cli_print_config_help(void)
{
    sp_config def;
    sp_config_defaults(&def);
    printf("model options (also as keys of a JSON file given with --config FILE):\n");
    char value[64], flag[64];
    for (int i = 0; i < sp_n_config_fields; i++) {
        const sp_config_field *f = &sp_config_fields[i];
        snprintf(flag, sizeof flag, "--%s", f->name);
        for (char *c = flag + 2; *c; c++)
            if (*c == '_')
                *c = '-';
        sp_config_format(&def, f, value, sizeof value);
        if (f->type == SP_FIELD_BOOL && *(const int *)((const char *)&def + f->offset) < 0)
            snprintf(value, sizeof value, "per variant");
        printf("  %-18s %s [%s]\n", flag, f->help, value);
    }
}
