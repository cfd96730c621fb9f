/* fuzz/fuzz_config.c: a JSON config (`--config`: model and training keys, io/config_file.h through
 * sp_fields_load_json_tables), then resolved and validated as `train` does. */
#include "core/config.h"
#include "fuzz/temp_file.h"
#include "io/config_file.h"
#include "train/options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_config cfg;
    sp_train_options opt;
    sp_config_defaults(&cfg);
    sp_train_options_defaults(&opt);
    const sp_field_table *tables[] = {&sp_config_table, &sp_train_options_table};
    void *objs[] = {&cfg, &opt};
    if (sp_fields_load_json_tables(fuzz_temp_file("config.json", data, size), 2, tables, objs) == SP_OK &&
        sp_config_resolve(&cfg) == SP_OK && sp_config_validate(&cfg, "config.json") == SP_OK)
        sp_train_options_resolve(&opt, &cfg, "config.json");
    sp_error_clear();
    return 0;
}
