/* check/source.c: reading a rule's metric from a report and its summary (check/source.h). */
#include "check/source.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5.h"
#include "io/report.h"

struct sp_check_source {
    char *path;
    sp_report_reader *reader;
    hid_t file;             /* a second handle on the report, to list what an analyzer wrote */
    cJSON *summary;
    const cJSON *metrics;   /* summary.metrics */
    const cJSON *skipped;   /* summary.skipped */
};

const char *sp_check_source_path(const sp_check_source *s) { return s->path; }

void sp_check_source_close(sp_check_source *s)
{
    if (!s)
        return;
    sp_report_close(s->reader);
    if (s->file >= 0)
        H5Fclose(s->file);
    cJSON_Delete(s->summary);
    free(s->path);
    free(s);
}

/* The summary, checked to be this report's (io/report.h), and its two groups. */
static sp_status open_summary(sp_check_source *s)
{
    SP_TRY(sp_report_read_summary(s->reader, &s->summary));
    s->metrics = cJSON_GetObjectItemCaseSensitive(s->summary, "metrics");
    s->skipped = cJSON_GetObjectItemCaseSensitive(s->summary, "skipped");
    return SP_OK;
}

sp_status sp_check_source_open(const char *path, sp_check_source **out)
{
    *out = NULL;
    sp_check_source *s = sp_calloc(1, sizeof *s, "report source");
    if (!s)
        return SP_ERR_NOMEM;
    s->file = -1;
    s->path = strdup(path);
    sp_status st = s->path ? sp_report_open(path, &s->reader) : sp_error(SP_ERR_NOMEM, "out of memory");
    if (st == SP_OK)
        st = sp_h5_open(path, &s->file);
    if (st == SP_OK)
        st = open_summary(s);
    if (st != SP_OK) {
        sp_check_source_close(s);
        return st;
    }
    *out = s;
    return SP_OK;
}

static void set_state(sp_metric_value *v, sp_metric_state state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_state(sp_metric_value *v, sp_metric_state state, const char *fmt, ...)
{
    v->state = state;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->reason, sizeof v->reason, fmt, ap);
    va_end(ap);
}

/* Why the report has nothing of the analyzer. */
static void set_absent(const sp_check_source *s, const char *analyzer, sp_metric_value *v)
{
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(s->skipped, analyzer);
    if (cJSON_IsString(why))
        set_state(v, SP_METRIC_ABSENT, "%s skipped %s: %s", s->path, analyzer, why->valuestring);
    else if (strcmp(analyzer, "train") == 0)
        set_state(v, SP_METRIC_ABSENT, "%s has no training state (its input was not a checkpoint written by "
                  "spanprobe train)", s->path);
    else
        set_state(v, SP_METRIC_ABSENT, "%s has no %s results (analyzer not selected with --metrics?)", s->path,
                  analyzer);
}

/* "a, b, c" of names[n], shortened to fit. */
static void join_names(char *const *names, int n, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t used = strlen(buf);
        if (used + strlen(names[i]) + 8 >= len) {
            snprintf(buf + used, len - used, ", ...");
            return;
        }
        snprintf(buf + used, len - used, "%s%s", i ? ", " : "", names[i]);
    }
}

static sp_status read_summary_scalar(const sp_check_source *s, const sp_check_rule *rule, sp_metric_value *v)
{
    const cJSON *group = cJSON_GetObjectItemCaseSensitive(s->metrics, rule->analyzer);
    if (!cJSON_IsObject(group)) {
        set_absent(s, rule->analyzer, v);
        return SP_OK;
    }
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(group, rule->item);
    if (!item) {
        char *names[64];
        int n = 0;
        for (const cJSON *k = group->child; k && n < 64; k = k->next)
            names[n++] = k->string;
        char keys[320];
        join_names(names, n, keys, sizeof keys);
        set_state(v, SP_METRIC_INVALID, "%s: the summary has no metrics.%s.%s (its %s keys: %s)", s->path,
                  rule->analyzer, rule->item, rule->analyzer, keys);
        return SP_OK;
    }
    if (!cJSON_IsNumber(item) && !cJSON_IsNull(item)) {
        set_state(v, SP_METRIC_INVALID, "%s: metrics.%s.%s is not a number", s->path, rule->analyzer, rule->item);
        return SP_OK;
    }
    v->n_values = 1;
    v->n_nonfinite = cJSON_IsNull(item); /* the summary writes non-finite values as null */
    v->value = cJSON_IsNull(item) ? NAN : item->valuedouble;
    return SP_OK;
}

double sp_check_reduce_values(sp_check_reduce how, const double *x, size_t n, int64_t *n_nonfinite)
{
    double acc = how == SP_REDUCE_MAX ? -INFINITY : how == SP_REDUCE_MIN ? INFINITY : 0;
    *n_nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            (*n_nonfinite)++;
            continue;
        }
        acc = how == SP_REDUCE_MAX ? fmax(acc, x[i]) : how == SP_REDUCE_MIN ? fmin(acc, x[i]) : acc + x[i];
    }
    if (*n_nonfinite > 0 || n == 0)
        return NAN;
    return how == SP_REDUCE_MEAN ? acc / (double)n : acc;
}

static sp_status read_array(const sp_check_source *s, const sp_check_rule *rule, sp_metric_value *v)
{
    char group_path[2 * SP_CHECK_NAME_MAX + 16];
    snprintf(group_path, sizeof group_path, "metrics/%s", rule->analyzer);
    if (!sp_h5_exists(s->file, group_path)) {
        set_absent(s, rule->analyzer, v);
        return SP_OK;
    }
    char array_path[sizeof group_path];
    snprintf(array_path, sizeof array_path, "metrics/%s/%s", rule->analyzer, rule->item);
    if (!sp_h5_exists(s->file, array_path)) {
        hid_t g;
        char **names = NULL;
        int n = 0;
        SP_TRY(sp_h5_open_group(s->file, group_path, &g));
        sp_status st = sp_h5_list(g, &names, &n);
        H5Gclose(g);
        SP_TRY(st);
        char arrays[320];
        join_names(names, n, arrays, sizeof arrays);
        sp_h5_list_free(names, n);
        set_state(v, SP_METRIC_INVALID, "%s has no array /%s (its %s arrays: %s)", s->path, array_path,
                  rule->analyzer, arrays);
        return SP_OK;
    }
    sp_report_array arr;
    SP_TRY(sp_report_read_array(s->reader, rule->analyzer, rule->item, &arr));
    size_t row = 1;
    for (int i = 1; i < arr.rank; i++)
        row *= (size_t)arr.shape[i];
    int64_t first = 0, last = 0;
    if (row == 0) {
        set_state(v, SP_METRIC_INVALID, "%s: /%s %s holds no values", s->path, array_path, arr.shape_desc);
    } else if (!sp_check_layers_resolve(&rule->layers, arr.shape[0], &first, &last)) {
        char range[64];
        sp_check_layers_format(&rule->layers, range, sizeof range);
        set_state(v, SP_METRIC_INVALID, "%s: /%s %s: layers %s select none of its %lld entries", s->path,
                  array_path, arr.shape_desc, range, (long long)arr.shape[0]);
    } else {
        size_t n = (size_t)(last - first + 1) * row;
        v->value = sp_check_reduce_values(rule->reduce, arr.data + (size_t)first * row, n, &v->n_nonfinite);
        v->n_values = (int64_t)n;
        snprintf(v->selection, sizeof v->selection, "entries %lld..%lld of %lld %s", (long long)first,
                 (long long)last, (long long)arr.shape[0], arr.shape_desc);
    }
    sp_report_array_free(&arr);
    return SP_OK;
}

sp_status sp_check_source_read(sp_check_source *s, const sp_check_rule *rule, sp_metric_value *out)
{
    *out = (sp_metric_value){.state = SP_METRIC_OK, .value = NAN};
    return rule->is_summary ? read_summary_scalar(s, rule, out) : read_array(s, rule, out);
}
