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
#include "io/str_map.h"

/* What a report holds for one "<analyzer>/<array>", looked up once however many rules name it. */
typedef struct {
    sp_metric_state state; /* SP_METRIC_OK: array holds it; else reason says why not */
    char reason[512];
    sp_report_array array;
} array_lookup;

/* Every rule's metric is found through maps built or filled once, so that checking n rules against a
 * report of m entries costs O(n + m), not O(n m): summary groups and keys are indexed when the source
 * opens, arrays (and an analyzer's list of arrays) when a rule first names them. */
struct sp_check_source {
    char *path;
    sp_report_reader *reader;
    hid_t file;             /* a second handle on the report, to list what an analyzer wrote */
    cJSON *summary;
    const cJSON *metrics;   /* summary.metrics */
    const cJSON *skipped;   /* summary.skipped */
    sp_str_map summary_index; /* "<group>" and "<group>\0<key>" of metrics -> summary_items */
    const cJSON **summary_items;
    size_t n_summary_items, cap_summary_items;
    sp_str_map array_index; /* "<analyzer>/<array>" -> arrays; "<analyzer>/" -> arrays (the listing) */
    array_lookup *arrays;
    size_t n_arrays, cap_arrays;
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
    sp_str_map_free(&s->summary_index);
    free(s->summary_items);
    sp_str_map_free(&s->array_index);
    for (size_t i = 0; i < s->n_arrays; i++)
        sp_report_array_free(&s->arrays[i].array);
    free(s->arrays);
    free(s->path);
    free(s);
}

/* Maps key (len bytes) to item unless the key is there already: the first of repeated JSON keys
 * wins, as in cJSON's own lookups. */
static sp_status index_item(sp_check_source *s, const char *key, size_t len, const cJSON *item)
{
    if (s->n_summary_items >= INT32_MAX)
        return sp_error(SP_ERR_INPUT, "%s: too many summary metrics", s->path);
    int found = 0;
    SP_TRY(sp_str_map_put(&s->summary_index, key, len, (int32_t)s->n_summary_items, &found, NULL, NULL));
    if (found)
        return SP_OK;
    SP_TRY(sp_grow((void **)&s->summary_items, &s->cap_summary_items, s->n_summary_items + 1,
                   sizeof *s->summary_items, "the summary index"));
    s->summary_items[s->n_summary_items++] = item;
    return SP_OK;
}

/* "<group>\0<key>" (names hold no NUL: cJSON strings end at one). */
static sp_status summary_key(const char *group, const char *key, char **buf, size_t *cap, size_t *len)
{
    size_t g = strlen(group), k = strlen(key);
    SP_TRY(sp_grow((void **)buf, cap, g + k + 2, 1, "a summary key"));
    memcpy(*buf, group, g + 1);
    memcpy(*buf + g + 1, key, k + 1);
    *len = g + 1 + k;
    return SP_OK;
}

/* Indexes the first group of each name in summary.metrics, and each group's keys. */
static sp_status index_summary(sp_check_source *s)
{
    char *key = NULL;
    size_t cap = 0, len = 0;
    sp_status st = SP_OK;
    for (const cJSON *group = s->metrics ? s->metrics->child : NULL; st == SP_OK && group; group = group->next) {
        int32_t first = 0;
        if (sp_str_map_get(&s->summary_index, group->string, strlen(group->string), &first))
            continue;
        st = index_item(s, group->string, strlen(group->string), group);
        for (const cJSON *item = cJSON_IsObject(group) ? group->child : NULL; st == SP_OK && item; item = item->next)
            if ((st = summary_key(group->string, item->string, &key, &cap, &len)) == SP_OK)
                st = index_item(s, key, len, item);
    }
    free(key);
    return st;
}

/* The summary, checked to be this report's (io/report.h), and its two groups. */
static sp_status open_summary(sp_check_source *s)
{
    SP_TRY(sp_report_read_summary(s->reader, &s->summary));
    s->metrics = cJSON_GetObjectItemCaseSensitive(s->summary, "metrics");
    s->skipped = cJSON_GetObjectItemCaseSensitive(s->summary, "skipped");
    return index_summary(s);
}

/* The summary item indexed under key, or NULL. */
static const cJSON *summary_item(const sp_check_source *s, const char *key, size_t len)
{
    int32_t i = 0;
    return sp_str_map_get(&s->summary_index, key, len, &i) ? s->summary_items[i] : NULL;
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
    const cJSON *group = summary_item(s, rule->analyzer, strlen(rule->analyzer));
    if (!cJSON_IsObject(group)) {
        set_absent(s, rule->analyzer, v);
        return SP_OK;
    }
    char key[2 * SP_CHECK_NAME_MAX + 1];
    int len = snprintf(key, sizeof key, "%s%c%s", rule->analyzer, '\0', rule->item);
    const cJSON *item = summary_item(s, key, (size_t)len);
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

/* Appends a lookup under key; *out points at it until the next one. */
static sp_status add_lookup(sp_check_source *s, const char *key, const array_lookup *found, array_lookup **out)
{
    if (s->n_arrays >= INT32_MAX)
        return sp_error(SP_ERR_INPUT, "%s: too many arrays named by the rules", s->path);
    SP_TRY(sp_grow((void **)&s->arrays, &s->cap_arrays, s->n_arrays + 1, sizeof *s->arrays, "the array lookups"));
    SP_TRY(sp_str_map_put(&s->array_index, key, strlen(key), (int32_t)s->n_arrays, NULL, NULL, NULL));
    *out = &s->arrays[s->n_arrays++];
    **out = *found;
    return SP_OK;
}

/* "a, b, ..." of the arrays an analyzer wrote, listed once per analyzer (under "<analyzer>/"). */
static sp_status list_arrays(sp_check_source *s, const char *analyzer, const char *group_path, char *buf, size_t len)
{
    char key[SP_CHECK_NAME_MAX + 2];
    snprintf(key, sizeof key, "%s/", analyzer);
    int32_t i = 0;
    if (!sp_str_map_get(&s->array_index, key, strlen(key), &i)) {
        hid_t g;
        char **names = NULL;
        int n = 0;
        SP_TRY(sp_h5_open_group(s->file, group_path, &g));
        sp_status st = sp_h5_list(g, &names, &n);
        H5Gclose(g);
        SP_TRY(st);
        array_lookup listing = {.state = SP_METRIC_INVALID};
        join_names(names, n, listing.reason, len);
        sp_h5_list_free(names, n);
        array_lookup *added = NULL;
        SP_TRY(add_lookup(s, key, &listing, &added));
        i = (int32_t)(s->n_arrays - 1);
    }
    size_t n = strnlen(s->arrays[i].reason, len - 1); /* join_names fitted it to len */
    memcpy(buf, s->arrays[i].reason, n);
    buf[n] = '\0';
    return SP_OK;
}

/* The array a rule names, or why the report has none: read from the file the first time only. */
static sp_status lookup_array(sp_check_source *s, const sp_check_rule *rule, const array_lookup **out)
{
    int32_t i = 0;
    if (sp_str_map_get(&s->array_index, rule->metric, strlen(rule->metric), &i)) {
        *out = &s->arrays[i];
        return SP_OK;
    }
    array_lookup found = {.state = SP_METRIC_OK};
    char group_path[2 * SP_CHECK_NAME_MAX + 16];
    snprintf(group_path, sizeof group_path, "metrics/%s", rule->analyzer);
    char array_path[sizeof group_path];
    snprintf(array_path, sizeof array_path, "metrics/%s/%s", rule->analyzer, rule->item);
    sp_metric_value missing = {.state = SP_METRIC_OK};
    if (!sp_h5_exists(s->file, group_path)) {
        set_absent(s, rule->analyzer, &missing);
    } else if (!sp_h5_exists(s->file, array_path)) {
        char arrays[320];
        SP_TRY(list_arrays(s, rule->analyzer, group_path, arrays, sizeof arrays));
        set_state(&missing, SP_METRIC_INVALID, "%s has no array /%s (its %s arrays: %s)", s->path, array_path,
                  rule->analyzer, arrays);
    } else {
        SP_TRY(sp_report_read_array(s->reader, rule->analyzer, rule->item, &found.array));
    }
    found.state = missing.state;
    snprintf(found.reason, sizeof found.reason, "%s", missing.reason);
    array_lookup *added = NULL;
    sp_status st = add_lookup(s, rule->metric, &found, &added);
    if (st != SP_OK) {
        sp_report_array_free(&found.array);
        return st;
    }
    *out = added;
    return SP_OK;
}

static sp_status read_array(sp_check_source *s, const sp_check_rule *rule, sp_metric_value *v)
{
    const array_lookup *found = NULL;
    SP_TRY(lookup_array(s, rule, &found));
    if (found->state != SP_METRIC_OK) {
        v->state = found->state;
        snprintf(v->reason, sizeof v->reason, "%s", found->reason);
        return SP_OK;
    }
    const sp_report_array *arr = &found->array;
    char array_path[2 * SP_CHECK_NAME_MAX + 16];
    snprintf(array_path, sizeof array_path, "metrics/%s/%s", rule->analyzer, rule->item);
    size_t row = 1;
    for (int i = 1; i < arr->rank; i++)
        row *= (size_t)arr->shape[i];
    int64_t first = 0, last = 0;
    if (row == 0) {
        set_state(v, SP_METRIC_INVALID, "%s: /%s %s holds no values", s->path, array_path, arr->shape_desc);
    } else if (!sp_check_layers_resolve(&rule->layers, arr->shape[0], &first, &last)) {
        char range[64];
        sp_check_layers_format(&rule->layers, range, sizeof range);
        set_state(v, SP_METRIC_INVALID, "%s: /%s %s: layers %s select none of its %lld entries", s->path,
                  array_path, arr->shape_desc, range, (long long)arr->shape[0]);
    } else {
        size_t n = (size_t)(last - first + 1) * row;
        v->value = sp_check_reduce_values(rule->reduce, arr->data + (size_t)first * row, n, &v->n_nonfinite);
        v->n_values = (int64_t)n;
        snprintf(v->selection, sizeof v->selection, "entries %lld..%lld of %lld %s", (long long)first,
                 (long long)last, (long long)arr->shape[0], arr->shape_desc);
    }
    return SP_OK;
}

sp_status sp_check_source_read(sp_check_source *s, const sp_check_rule *rule, sp_metric_value *out)
{
    *out = (sp_metric_value){.state = SP_METRIC_OK, .value = NAN};
    return rule->is_summary ? read_summary_scalar(s, rule, out) : read_array(s, rule, out);
}
