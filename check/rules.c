/* check/rules.c: parsing and validating `spanprobe check` rules (check/rules.h). */
#include "check/rules.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/analyzer.h"
#include "analyzers/drift.h"
#include "analyzers/train_state.h"
#include "io/file_read.h"
#include "io/str_map.h"

#define RULES_MAX_BYTES (16u << 20)

const char *const sp_check_op_names[] = {"<", "<=", ">", ">=", "==", "!=", "finite", NULL};
const char *const sp_check_reduce_names[] = {"", "mean", "max", "min", NULL};
const char *const sp_check_fail_on_names[] = {"any", "increase", "decrease", NULL};
static const char *const layer_words[] = {"all", "deepest_half", "shallowest_half", NULL};

/* Summary groups written by the analyze driver itself rather than by an analyzer. */
static const char *const driver_groups[] = {"run", SP_TRAIN_STATE_GROUP};

static int lookup(const char *const *names, const char *value)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], value) == 0)
            return i;
    return -1;
}

/* "a, b or c" of a NULL-terminated list, skipping empty names. */
static void list_names(const char *const *names, char *buf, size_t len)
{
    buf[0] = '\0';
    int n = 0;
    while (names[n])
        n++;
    for (int i = 0, written = 0; i < n; i++) {
        if (!names[i][0])
            continue;
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s'%s'", written ? (i == n - 1 ? " or " : ", ") : "", names[i]);
        written++;
    }
}

/* A JSON value, shortened, for "found ..." in messages. */
static void describe_json(const cJSON *item, char *buf, size_t len)
{
    char *text = item ? cJSON_PrintUnformatted(item) : NULL;
    if (!text)
        snprintf(buf, len, "nothing");
    else if (strlen(text) > 60)
        snprintf(buf, len, "%.57s...", text);
    else
        snprintf(buf, len, "%s", text);
    free(text);
}

/* "<where>: "<field>": expected ..., found ..." (field NULL: the value at `where` itself). */
static sp_status bad_field(const char *where, const char *field, const char *expected, const cJSON *found)
{
    char text[80];
    describe_json(found, text, sizeof text);
    if (!field)
        return sp_error(SP_ERR_INPUT, "%s: expected %s, found %s", where, expected, text);
    return sp_error(SP_ERR_INPUT, "%s: \"%s\": expected %s, found %s", where, field, expected, text);
}

static int valid_name(const char *s, size_t n)
{
    if (n == 0 || n >= SP_CHECK_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return 0;
    }
    return 1;
}

static int known_group(const char *name, int is_summary)
{
    if (strcmp(name, SP_DRIFT_GROUP) == 0) /* reports of `spanprobe drift` */
        return 1;
    for (int i = 0; i < sp_n_analyzers; i++)
        if (strcmp(sp_analyzers[i]->name, name) == 0)
            return 1;
    for (size_t i = 0; is_summary && i < SP_ARRAY_LEN(driver_groups); i++)
        if (strcmp(driver_groups[i], name) == 0)
            return 1;
    return 0;
}

/* "summary:<group>.<key>" or "<analyzer>/<array>" into the rule. */
static sp_status parse_metric(const char *where, const char *metric, sp_check_rule *r)
{
    static const char prefix[] = "summary:";
    const char *body = metric;
    const char *sep;
    r->is_summary = strncmp(metric, prefix, sizeof prefix - 1) == 0;
    if (r->is_summary) {
        body += sizeof prefix - 1;
        sep = strchr(body, '.');
    } else {
        sep = strchr(body, '/');
    }
    size_t group_len = sep ? (size_t)(sep - body) : 0;
    if (!sep || !valid_name(body, group_len) || !valid_name(sep + 1, strlen(sep + 1)))
        return sp_error(SP_ERR_INPUT,
                        "%s: \"metric\": expected \"<analyzer>/<array>\" or \"summary:<analyzer>.<key>\" (names of "
                        "[A-Za-z0-9_.-]), found \"%s\"",
                        where, metric);
    memcpy(r->analyzer, body, group_len);
    r->analyzer[group_len] = '\0';
    snprintf(r->item, sizeof r->item, "%s", sep + 1);
    if (!known_group(r->analyzer, r->is_summary)) {
        char names[1024] = "";
        for (int i = 0; i < sp_n_analyzers; i++) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", sp_analyzers[i]->name);
        }
        return sp_error(SP_ERR_INPUT, "%s: \"metric\": unknown analyzer '%s' in \"%s\" (expected one of %s, %s%s)",
                        where, r->analyzer, metric, names, SP_DRIFT_GROUP, r->is_summary ? ", run, train" : "");
    }
    return SP_OK;
}

static sp_status parse_layers(const char *where, const cJSON *item, sp_check_layers *layers)
{
    const char *expected = "\"all\", \"deepest_half\", \"shallowest_half\" or [first, last] (integers, "
                           "negative from the end)";
    if (cJSON_IsString(item)) {
        int k = lookup(layer_words, item->valuestring);
        if (k < 0)
            return bad_field(where, "layers", expected, item);
        layers->kind = (sp_check_layers_kind)k;
        return SP_OK;
    }
    if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 2)
        return bad_field(where, "layers", expected, item);
    double ends[2];
    for (int i = 0; i < 2; i++) {
        const cJSON *e = cJSON_GetArrayItem(item, i);
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || fabs(e->valuedouble) > 1e9)
            return bad_field(where, "layers", expected, item);
        ends[i] = e->valuedouble;
    }
    /* same-signed ends must be in order; mixed signs depend on the axis and are checked then */
    if ((ends[0] >= 0) == (ends[1] >= 0) && ends[0] > ends[1])
        return bad_field(where, "layers", "[first, last] with first <= last", item);
    *layers = (sp_check_layers){SP_LAYERS_RANGE, (int64_t)ends[0], (int64_t)ends[1]};
    return SP_OK;
}

static sp_status parse_enum(const char *where, const cJSON *item, const char *field, const char *const *names,
                            int *out)
{
    int k = cJSON_IsString(item) ? lookup(names, item->valuestring) : -1;
    int valid = k > 0 || (k == 0 && names[0][0]); /* an empty first name marks "none", not a choice */
    if (!valid) {
        char expected[256];
        list_names(names, expected, sizeof expected);
        return bad_field(where, field, expected, item);
    }
    *out = k;
    return SP_OK;
}

static sp_status parse_number(const char *where, const cJSON *item, const char *field, int non_negative,
                              double *out)
{
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || (non_negative && item->valuedouble < 0))
        return bad_field(where, field, non_negative ? "a number >= 0" : "a number", item);
    *out = item->valuedouble;
    return SP_OK;
}

static sp_status check_keys(const char *where, const cJSON *obj, const char *const *allowed)
{
    for (const cJSON *item = obj->child; item; item = item->next)
        if (lookup(allowed, item->string) < 0) {
            char expected[512];
            list_names(allowed, expected, sizeof expected);
            return sp_error(SP_ERR_INPUT, "%s: unknown key \"%s\" (expected %s)", where, item->string, expected);
        }
    return SP_OK;
}

static sp_status parse_tolerance(const char *where, const cJSON *tol, sp_check_rule *r)
{
    static const char *const keys[] = {"absolute", "relative", "fail_on", NULL};
    if (!cJSON_IsObject(tol))
        return bad_field(where, "tolerance", "an object {\"absolute\": a, \"relative\": r, \"fail_on\": ...}", tol);
    char tol_where[700];
    snprintf(tol_where, sizeof tol_where, "%s: \"tolerance\"", where);
    SP_TRY(check_keys(tol_where, tol, keys));
    const cJSON *abs_item = cJSON_GetObjectItemCaseSensitive(tol, "absolute");
    const cJSON *rel_item = cJSON_GetObjectItemCaseSensitive(tol, "relative");
    const cJSON *fail_on = cJSON_GetObjectItemCaseSensitive(tol, "fail_on");
    if (!abs_item && !rel_item)
        return sp_error(SP_ERR_INPUT, "%s: expected \"absolute\" or \"relative\" (or both), found neither", tol_where);
    if (abs_item)
        SP_TRY(parse_number(tol_where, abs_item, "absolute", 1, &r->abs_tol));
    if (rel_item)
        SP_TRY(parse_number(tol_where, rel_item, "relative", 1, &r->rel_tol));
    int k = SP_FAIL_ON_ANY;
    if (fail_on)
        SP_TRY(parse_enum(tol_where, fail_on, "fail_on", sp_check_fail_on_names, &k));
    r->fail_on = (sp_check_fail_on)k;
    r->against_baseline = 1;
    return SP_OK;
}

static char *dup_string(const char *s)
{
    char *d = strdup(s);
    if (!d)
        sp_error(SP_ERR_NOMEM, "out of memory reading rules");
    return d;
}

static sp_status parse_rule(const char *doc_where, int index, const cJSON *obj, sp_check_rule *r)
{
    static const char *const keys[] = {"name",  "description", "metric",    "reduce",   "layers",
                                       "op",    "limit",       "tolerance", "optional", NULL};
    char where[600];
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(obj, "name");
    if (cJSON_IsString(name))
        snprintf(where, sizeof where, "%s: rule %d (\"%.200s\")", doc_where, index, name->valuestring);
    else
        snprintf(where, sizeof where, "%s: rule %d", doc_where, index);
    if (!cJSON_IsObject(obj))
        return bad_field(where, NULL, "a rule object", obj);
    SP_TRY(check_keys(where, obj, keys));
    if (name && (!cJSON_IsString(name) || !name->valuestring[0]))
        return bad_field(where, "name", "a non-empty string", name);
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(obj, "description");
    if (desc && !cJSON_IsString(desc))
        return bad_field(where, "description", "a string", desc);
    const cJSON *metric = cJSON_GetObjectItemCaseSensitive(obj, "metric");
    if (!cJSON_IsString(metric))
        return bad_field(where, "metric", "a string such as \"similarity/block_influence\"", metric);
    r->metric = dup_string(metric->valuestring);
    r->name = dup_string(name ? name->valuestring : metric->valuestring);
    r->description = dup_string(desc ? desc->valuestring : "");
    if (!r->metric || !r->name || !r->description)
        return SP_ERR_NOMEM;
    SP_TRY(parse_metric(where, r->metric, r));

    const cJSON *reduce = cJSON_GetObjectItemCaseSensitive(obj, "reduce");
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(obj, "layers");
    if (r->is_summary && (reduce || layers))
        return sp_error(SP_ERR_INPUT, "%s: \"%s\" applies to arrays; %s is a summary scalar", where,
                        reduce ? "reduce" : "layers", r->metric);
    if (!r->is_summary) {
        int k = 0;
        SP_TRY(parse_enum(where, reduce, "reduce", sp_check_reduce_names, &k));
        r->reduce = (sp_check_reduce)k;
        if (layers)
            SP_TRY(parse_layers(where, layers, &r->layers));
    }

    const cJSON *op = cJSON_GetObjectItemCaseSensitive(obj, "op");
    const cJSON *limit = cJSON_GetObjectItemCaseSensitive(obj, "limit");
    const cJSON *tol = cJSON_GetObjectItemCaseSensitive(obj, "tolerance");
    if (tol && (op || limit))
        return sp_error(SP_ERR_INPUT, "%s: expected either \"op\" and \"limit\" or \"tolerance\", found both", where);
    if (tol) {
        SP_TRY(parse_tolerance(where, tol, r));
    } else {
        int k = 0;
        if (!op && !limit)
            return sp_error(SP_ERR_INPUT, "%s: expected \"op\" and \"limit\" (a threshold) or \"tolerance\" (against "
                            "a baseline), found neither", where);
        SP_TRY(parse_enum(where, op, "op", sp_check_op_names, &k));
        r->op = (sp_check_op)k;
        if (r->op == SP_OP_FINITE && limit)
            return sp_error(SP_ERR_INPUT, "%s: \"op\": \"finite\" takes no \"limit\"", where);
        if (r->op != SP_OP_FINITE)
            SP_TRY(parse_number(where, limit, "limit", 0, &r->limit));
    }
    const cJSON *optional = cJSON_GetObjectItemCaseSensitive(obj, "optional");
    if (optional && !cJSON_IsBool(optional))
        return bad_field(where, "optional", "true or false", optional);
    r->optional = cJSON_IsTrue(optional);
    return SP_OK;
}

void sp_check_rules_free(sp_check_rules *r)
{
    for (int i = 0; r->rules && i < r->n; i++) {
        free(r->rules[i].name);
        free(r->rules[i].description);
        free(r->rules[i].metric);
    }
    free(r->rules);
    *r = (sp_check_rules){0};
}

static sp_status append_rules(sp_check_rules *dst, sp_check_rules *src)
{
    sp_check_rule *grown = realloc(dst->rules, (size_t)(dst->n + src->n + 1) * sizeof *grown);
    if (!grown)
        return sp_error(SP_ERR_NOMEM, "out of memory reading rules");
    dst->rules = grown;
    memcpy(dst->rules + dst->n, src->rules, (size_t)src->n * sizeof *grown);
    dst->n += src->n;
    free(src->rules);
    *src = (sp_check_rules){0};
    return SP_OK;
}

/* Line and a short excerpt of where cJSON stopped. */
static sp_status parse_error(const char *where, const char *text)
{
    const char *at = cJSON_GetErrorPtr();
    if (!at || at < text || at > text + strlen(text))
        return sp_error(SP_ERR_INPUT, "%s: not valid JSON", where);
    int line = 1;
    for (const char *p = text; p < at; p++)
        line += *p == '\n';
    size_t n = strcspn(at, "\n");
    return sp_error(SP_ERR_INPUT, "%s: not valid JSON at line %d, near \"%.*s\"", where, line, (int)(n > 30 ? 30 : n),
                    at);
}

/* The first rule whose name an earlier rule has, against that earlier rule's first use: one pass
 * with a map from name to first index (a pairwise comparison took minutes on 200k rules). */
static sp_status check_unique_names(const char *where, const sp_check_rules *rules)
{
    sp_str_map first_use = {0};
    sp_status st = SP_OK;
    for (int i = 0; st == SP_OK && i < rules->n; i++) {
        const char *name = rules->rules[i].name;
        int seen = 0;
        int32_t j = 0;
        st = sp_str_map_put(&first_use, name, strlen(name), i, &seen, &j, NULL);
        if (st == SP_OK && seen)
            st = sp_error(SP_ERR_INPUT,
                          "%s: rules %d and %d are both named \"%s\" (names must be unique; set \"name\")", where,
                          j + 1, i + 1, name);
    }
    sp_str_map_free(&first_use);
    return st;
}

static sp_status parse_document(const cJSON *root, const char *where, int allow_defaults, sp_check_rules *out)
{
    static const char *const keys[] = {"rules", "include_defaults", NULL};
    if (!cJSON_IsObject(root))
        return bad_field(where, NULL, "an object {\"rules\": [...]}", root);
    SP_TRY(check_keys(where, root, keys));
    const cJSON *rules = cJSON_GetObjectItemCaseSensitive(root, "rules");
    const cJSON *defaults = cJSON_GetObjectItemCaseSensitive(root, "include_defaults");
    if (defaults && (!cJSON_IsBool(defaults) || (!allow_defaults && cJSON_IsTrue(defaults))))
        return bad_field(where, "include_defaults", allow_defaults ? "true or false" : "false (built-in rules)",
                         defaults);
    if (!cJSON_IsArray(rules))
        return bad_field(where, "rules", "an array of rule objects", rules);
    int n = cJSON_GetArraySize(rules);
    out->rules = sp_calloc((size_t)n + 1, sizeof *out->rules, "rules");
    if (!out->rules)
        return SP_ERR_NOMEM;
    int index = 0;
    for (const cJSON *item = rules->child; item; item = item->next) {
        out->n = ++index;
        SP_TRY(parse_rule(where, index, item, &out->rules[index - 1]));
    }
    if (cJSON_IsTrue(defaults)) {
        sp_check_rules builtin = {0};
        sp_status st = sp_check_rules_defaults(&builtin);
        if (st == SP_OK)
            st = append_rules(out, &builtin);
        sp_check_rules_free(&builtin);
        SP_TRY(st);
    }
    if (out->n == 0)
        return sp_error(SP_ERR_INPUT, "%s: \"rules\": expected at least one rule, found none", where);
    return check_unique_names(where, out);
}

static sp_status parse_text(const char *text, const char *where, int allow_defaults, sp_check_rules *out)
{
    *out = (sp_check_rules){0};
    cJSON *root = cJSON_Parse(text);
    sp_status st = root ? parse_document(root, where, allow_defaults, out) : parse_error(where, text);
    cJSON_Delete(root);
    if (st != SP_OK)
        sp_check_rules_free(out);
    return st;
}

sp_status sp_check_rules_parse(const char *text, const char *where, sp_check_rules *out)
{
    return parse_text(text, where, 1, out);
}

sp_status sp_check_rules_defaults(sp_check_rules *out)
{
    return parse_text(sp_check_default_rules_json, "built-in rules", 0, out);
}

sp_status sp_check_rules_load(const char *path, sp_check_rules *out)
{
    *out = (sp_check_rules){0};
    unsigned char *text = NULL;
    size_t size = 0;
    SP_TRY(sp_file_read_all(path, RULES_MAX_BYTES, &text, &size));
    sp_status st = strlen((const char *)text) == size
                       ? sp_check_rules_parse((const char *)text, path, out)
                       : sp_error(SP_ERR_INPUT, "%s: expected JSON text, found a NUL byte", path);
    free(text);
    return st;
}

int sp_check_layers_resolve(const sp_check_layers *layers, int64_t n, int64_t *first, int64_t *last)
{
    if (n <= 0)
        return 0;
    int64_t half = n / 2 > 1 ? n / 2 : 1;
    switch (layers->kind) {
    case SP_LAYERS_ALL: *first = 0, *last = n - 1; return 1;
    case SP_LAYERS_DEEPEST_HALF: *first = n - half, *last = n - 1; return 1;
    case SP_LAYERS_SHALLOWEST_HALF: *first = 0, *last = half - 1; return 1;
    case SP_LAYERS_RANGE: break;
    }
    *first = layers->first < 0 ? n + layers->first : layers->first;
    *last = layers->last < 0 ? n + layers->last : layers->last;
    return *first >= 0 && *last < n && *first <= *last;
}

void sp_check_layers_format(const sp_check_layers *layers, char *buf, size_t len)
{
    if (layers->kind == SP_LAYERS_RANGE)
        snprintf(buf, len, "[%lld, %lld]", (long long)layers->first, (long long)layers->last);
    else
        snprintf(buf, len, "%s", layer_words[layers->kind]);
}

int sp_check_compare(sp_check_op op, double value, double limit)
{
    if (!isfinite(value))
        return 0;
    switch (op) {
    case SP_OP_LT: return value < limit;
    case SP_OP_LE: return value <= limit;
    case SP_OP_GT: return value > limit;
    case SP_OP_GE: return value >= limit;
    case SP_OP_EQ: return value == limit;
    case SP_OP_NE: return value != limit;
    case SP_OP_FINITE: return 1;
    case SP_N_OPS: break;
    }
    return 0;
}
