/* fuzz/fuzz_rules.c: a `check` rules file (check/rules.h), parsed from memory as the loader does. */
#include <stdlib.h>
#include <string.h>

#include "check/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    sp_check_rules rules;
    if (sp_check_rules_parse(text, "rules.json", &rules) == SP_OK)
        sp_check_rules_free(&rules);
    free(text);
    sp_error_clear();
    return 0;
}
