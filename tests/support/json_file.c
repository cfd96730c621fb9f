#include "json_file.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "scratch.h"

cJSON *json_file_read(const char *path)
{
    char *text = scratch_read_file(path, NULL);
    if (!text)
        fail_msg("%s: cannot be read", path);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    if (!doc)
        fail_msg("%s: not valid JSON", path);
    return doc;
}
