#include "report_view.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scratch.h"

static void die(const char *what, const char *name)
{
    fprintf(stderr, "report_view: %s %s: %s\n", what, name, sp_error_message());
    abort();
}

void report_view_open(report_view *v, const char *report_path)
{
    *v = (report_view){0};
    if (sp_report_open(report_path, &v->reader) != SP_OK)
        die("open", report_path);
    char *json_path = sp_report_summary_path(report_path);
    char *text = json_path ? scratch_read_file(json_path, NULL) : NULL;
    v->summary = text ? cJSON_Parse(text) : NULL;
    if (!v->summary)
        die("parse the summary of", report_path);
    free(json_path);
    free(text);
}

void report_view_close(report_view *v)
{
    sp_report_close(v->reader);
    cJSON_Delete(v->summary);
    *v = (report_view){0};
}

double *report_view_array(const report_view *v, const char *analyzer, const char *name, int *rank, int64_t *shape)
{
    sp_report_array arr;
    if (sp_report_read_array(v->reader, analyzer, name, &arr) != SP_OK)
        die("read array", name);
    if (rank)
        *rank = arr.rank;
    if (shape)
        memcpy(shape, arr.shape, sizeof arr.shape);
    return arr.data; /* ownership passes to the caller */
}

static const cJSON *group(const report_view *v, const char *top, const char *analyzer)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v->summary, top), analyzer);
}

double report_view_scalar(const report_view *v, const char *analyzer, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(group(v, "metrics", analyzer), key);
    if (!item) {
        fprintf(stderr, "report_view: no summary scalar metrics.%s.%s\n", analyzer, key);
        abort();
    }
    return cJSON_IsNumber(item) ? item->valuedouble : NAN;
}

const char *report_view_skipped(const report_view *v, const char *analyzer)
{
    const cJSON *item = group(v, "skipped", analyzer);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}

const char *report_view_input(const report_view *v, const char *key)
{
    const cJSON *item = group(v, "input", key);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}
