#include "cli/inspect_stats.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

/* Integers beyond 2^53 do not survive a JSON number: they are printed as strings. */
#define JSON_EXACT_INT 9007199254740992.0

cJSON *sp_inspect_json_number(double v)
{
    if (isnan(v))
        return cJSON_CreateString("nan");
    if (isinf(v))
        return cJSON_CreateString(v > 0 ? "inf" : "-inf");
    return cJSON_CreateNumber(v);
}

cJSON *sp_inspect_json_int(int64_t v, int is_unsigned)
{
    double d = is_unsigned ? (double)(uint64_t)v : (double)v;
    if (fabs(d) < JSON_EXACT_INT)
        return cJSON_CreateNumber(d);
    char text[32];
    if (is_unsigned)
        snprintf(text, sizeof text, "%" PRIu64, (uint64_t)v);
    else
        snprintf(text, sizeof text, "%" PRId64, v);
    return cJSON_CreateString(text);
}

void sp_inspect_stats_add(sp_inspect_stats *s, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            s->n_nonfinite++;
            continue;
        }
        if (s->n_finite == 0 || x[i] < s->min)
            s->min = x[i];
        if (s->n_finite == 0 || x[i] > s->max)
            s->max = x[i];
        s->n_finite++;
        double delta = x[i] - s->mean;
        s->mean += delta / (double)s->n_finite;
        s->m2 += delta * (x[i] - s->mean);
    }
}

void sp_inspect_stats_to_json(const sp_inspect_stats *s, cJSON *tensor)
{
    if (s->n_finite) {
        cJSON_AddItemToObject(tensor, "min", sp_inspect_json_number(s->min));
        cJSON_AddItemToObject(tensor, "max", sp_inspect_json_number(s->max));
        cJSON_AddItemToObject(tensor, "mean", sp_inspect_json_number(s->mean));
        cJSON_AddItemToObject(tensor, "std", sp_inspect_json_number(sqrt(s->m2 / (double)s->n_finite)));
    }
    cJSON_AddItemToObject(tensor, "nonfinite", sp_inspect_json_int((int64_t)s->n_nonfinite, 0));
}
