#include "io/json_number.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

cJSON *sp_json_exact_number(double v)
{
    if (!isfinite(v))
        return cJSON_CreateNull();
    char text[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, v);
        if (strtod(text, NULL) == v)
            break;
    }
    return cJSON_CreateRaw(text);
}
