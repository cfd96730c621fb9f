/* cli/cmd_compare.c: `spanprobe compare A.h5 B.h5 [--rtol R] [--atol A] [--metrics LIST] [--quiet]`:
 * metric-by-metric agreement of two reports of the same run (another device or precision), with the
 * per-metric tolerances of analyzers/agreement.h (docs/cli.md, docs/cuda.md). */
#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/agreement.h"
#include "analyzers/analyzer.h"
#include "cli/cli.h"
#include "io/report.h"

static void print_help(void)
{
    printf("usage: spanprobe compare A.h5 B.h5 [--rtol R] [--atol A] [--metrics LIST] [--quiet]\n\n"
           "Compares two reports of `spanprobe analyze` on the same input and options, made on another device\n"
           "or in another precision (--device cpu against --device cuda, spanprobe-f64 against spanprobe):\n"
           "every array /metrics/<analyzer>/<name> and every summary scalar, A being the reference. An entry\n"
           "agrees when |b - a| <= atol * scale + rtol * |a|, scale the array's max |a| (1 for metrics whose\n"
           "atol is absolute: cosines, nats), and NaN/Inf sit at the same places in both. atol and rtol come\n"
           "per metric from the table of docs/cuda.md (\"Agreement with the CPU\"), which also lists what is\n"
           "not compared (iteration counts, timings) and why. One line per array or scalar (PASS, FAIL,\n"
           "MISSING: in one report only, SKIP: not compared), then a summary line.\n\n"
           "options:\n"
           "  --rtol R        the relative term for every compared metric, instead of the table's\n"
           "  --atol A        the absolute term for every compared metric, as a fraction of the array's\n"
           "                  max |a|, instead of the table's\n"
           "  --metrics LIST  compare only these analyzers or summary groups (comma-separated; run, train)\n"
           "  --quiet         print only the failing lines and the summary\n\n"
           "exit codes: 0 every compared metric agrees, 7 one differs or is missing (or nothing was compared),\n"
           "            2 usage, 3 not a report or arrays of different shapes, 5 a file cannot be read\n");
}

typedef struct {
    const char *path[2];
    const char *metrics;
    double rtol, atol; /* NaN: the table's */
    int quiet;
} compare_args;

typedef struct {
    const char *path;
    sp_report_reader *reader;
    cJSON *summary;
} report_side;

typedef enum { LINE_PASS, LINE_FAIL, LINE_MISSING, LINE_SKIP, N_LINE_KINDS } line_kind;
static const char *const line_names[N_LINE_KINDS] = {"PASS", "FAIL", "MISSING", "SKIP"};

typedef struct {
    const compare_args *args;
    report_side side[2];
    int counts[N_LINE_KINDS];
    char *text;  /* every line, printed once all are known (an input error prints none) */
    size_t len, cap;
} compare_run;

static sp_status parse_args(int argc, char **argv, compare_args *a)
{
    *a = (compare_args){.rtol = NAN, .atol = NAN};
    int n_paths = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = NULL;
        if (strcmp(arg, "--quiet") == 0) {
            a->quiet = 1;
        } else if (strcmp(arg, "--rtol") == 0 || strcmp(arg, "--atol") == 0) {
            SP_TRY(sp_cli_option_value(argc, argv, &i, &value));
            SP_TRY(sp_cli_parse_double(arg, value, 0, 1e300, arg[2] == 'r' ? &a->rtol : &a->atol));
        } else if (strcmp(arg, "--metrics") == 0) {
            SP_TRY(sp_cli_option_value(argc, argv, &i, &a->metrics));
        } else if (strncmp(arg, "--", 2) == 0) {
            return sp_error(SP_ERR_USAGE, "unknown option '%s'", arg);
        } else if (n_paths == 2) {
            return sp_error(SP_ERR_USAGE, "unexpected argument '%s' (two reports expected)", arg);
        } else {
            a->path[n_paths++] = arg;
        }
    }
    if (n_paths != 2)
        return sp_error(SP_ERR_USAGE, "expected two reports: spanprobe compare A.h5 B.h5");
    return SP_OK;
}

/* 1 when `name` is in the comma-separated list. */
static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* Every --metrics name is an analyzer or a summary group of the run. */
static sp_status check_metrics(const char *list)
{
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        int known = (len == 3 && strncmp(p, "run", 3) == 0) || (len == 5 && strncmp(p, "train", 5) == 0);
        for (int i = 0; i < sp_n_analyzers && !known; i++)
            known = strlen(sp_analyzers[i]->name) == len && strncmp(p, sp_analyzers[i]->name, len) == 0;
        if (!known)
            return sp_error(SP_ERR_USAGE, "--metrics: unknown analyzer '%.*s' (spanprobe analyze --help lists them; "
                            "also run, train)", (int)len, p);
        p += len + (p[len] == ',');
    }
    return SP_OK;
}

static int selected(const compare_run *c, const char *analyzer)
{
    return !c->args->metrics || !*c->args->metrics || in_list(c->args->metrics, analyzer); /* "": all */
}

static sp_status add_line(compare_run *c, line_kind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static sp_status add_line(compare_run *c, line_kind kind, const char *fmt, ...)
{
    c->counts[kind]++;
    if (c->args->quiet && (kind == LINE_PASS || kind == LINE_SKIP))
        return SP_OK;
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int body = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    const size_t need = c->len + 8 + (size_t)(body > 0 ? body : 0) + 2; /* outcome, body, newline, NUL */
    if (need > c->cap) {
        size_t cap = need > 2 * c->cap ? need : 2 * c->cap;
        char *text = realloc(c->text, cap);
        if (!text) {
            va_end(again);
            return sp_error(SP_ERR_NOMEM, "out of memory collecting the comparison (%zu bytes)", cap);
        }
        c->text = text;
        c->cap = cap;
    }
    c->len += (size_t)snprintf(c->text + c->len, c->cap - c->len, "%-7s ", line_names[kind]);
    c->len += (size_t)vsnprintf(c->text + c->len, c->cap - c->len, fmt, again);
    va_end(again);
    c->text[c->len++] = '\n';
    c->text[c->len] = '\0';
    return SP_OK;
}

/* "[4, 8]" */
static void format_shape(int rank, const int64_t *shape, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

/* The flat index i of an array of that shape as "[i0, i1]" ("" for a scalar). */
static void format_index(int rank, const int64_t *shape, int64_t i, char *buf, size_t len)
{
    int64_t idx[4] = {0};
    for (int d = rank - 1; d >= 0; d--) {
        idx[d] = shape[d] > 0 ? i % shape[d] : 0;
        i = shape[d] > 0 ? i / shape[d] : 0;
    }
    format_shape(rank, idx, buf, len);
}

/* The tolerance of t with the command line's overrides. */
static void effective_tolerance(const compare_run *c, const sp_tolerance *t, double *atol, double *rtol, int *absolute)
{
    *atol = isnan(c->args->atol) ? t->atol : c->args->atol;
    *rtol = isnan(c->args->rtol) ? t->rtol : c->args->rtol;
    *absolute = isnan(c->args->atol) ? t->absolute : 0;
}

/* One PASS or FAIL line for `name` (a[n] against b[n], of that shape; rank 0 for a summary scalar). */
static sp_status judge(compare_run *c, const sp_tolerance *t, const char *name, int rank, const int64_t *shape,
                       const double *a, const double *b, size_t n)
{
    double atol, rtol;
    int absolute;
    effective_tolerance(c, t, &atol, &rtol, &absolute);
    sp_agreement g;
    sp_agreement_check(a, b, n, atol, rtol, absolute, &g);
    char shape_text[80] = "", where[80] = "";
    if (rank > 0) {
        shape_text[0] = ' ';
        format_shape(rank, shape, shape_text + 1, sizeof shape_text - 1);
    }
    if (g.worst >= 0 && rank > 0)
        format_index(rank, shape, g.worst, where, sizeof where);
    char stats[200];
    snprintf(stats, sizeof stats, "max |diff| %.3g, max rel %.3g; allowed %.3g + %.3g |a|%s", g.max_abs_diff,
             g.max_rel_diff, g.abs_term, rtol, absolute ? " (absolute)" : "");
    if (sp_agreement_pass(&g))
        return add_line(c, LINE_PASS, "%s%s: %s", name, shape_text, stats);
    double wa = a[g.worst], wb = b[g.worst];
    if (g.n_nonfinite)
        return add_line(c, LINE_FAIL, "%s%s: NaN/Inf differ at %lld entr%s, first %s: A %.9g, B %.9g; %s", name,
                        shape_text, (long long)g.n_nonfinite, g.n_nonfinite == 1 ? "y" : "ies", where, wa, wb, stats);
    return add_line(c, LINE_FAIL, "%s%s: %lld of %zu beyond tolerance, worst %s: A %.9g, B %.9g; %s", name,
                    shape_text, (long long)g.n_outside, n, where, wa, wb, stats);
}

/* MISSING or SKIP when the pair cannot or must not be compared; returns 1 when it said so. */
static int settle_unpaired(compare_run *c, const sp_tolerance *t, const char *name, const int *present,
                           sp_status *st)
{
    if (!t->compared) {
        *st = add_line(c, LINE_SKIP, "%s: not compared (%s)", name, t->reason);
        return 1;
    }
    if (present[0] && present[1])
        return 0;
    *st = add_line(c, LINE_MISSING, "%s: only in %s", name, c->side[present[0] ? 0 : 1].path);
    return 1;
}

static sp_status compare_array(compare_run *c, const char *analyzer, const char *name, const int *present)
{
    char label[300];
    snprintf(label, sizeof label, "%s/%s", analyzer, name);
    const sp_tolerance *t = sp_tolerance_find(SP_AGREE_ARRAY, analyzer, name);
    sp_status st = SP_OK;
    if (settle_unpaired(c, t, label, present, &st))
        return st;
    sp_report_array arr[2];
    SP_TRY(sp_report_read_array(c->side[0].reader, analyzer, name, &arr[0]));
    st = sp_report_read_array(c->side[1].reader, analyzer, name, &arr[1]);
    if (st != SP_OK) {
        sp_report_array_free(&arr[0]);
        return st;
    }
    int same = arr[0].rank == arr[1].rank;
    size_t numel = 1;
    for (int i = 0; i < arr[0].rank && same; i++) {
        same = arr[0].shape[i] == arr[1].shape[i];
        numel *= (size_t)arr[0].shape[i];
    }
    if (same) {
        st = judge(c, t, label, arr[0].rank, arr[0].shape, arr[0].data, arr[1].data, numel);
    } else {
        char sa[80], sb[80];
        format_shape(arr[0].rank, arr[0].shape, sa, sizeof sa);
        format_shape(arr[1].rank, arr[1].shape, sb, sizeof sb);
        st = sp_error(SP_ERR_INPUT, "%s: /metrics/%s: shape %s, expected %s as in %s (reports of different runs?)",
                      c->side[1].path, label, sb, sa, c->side[0].path);
    }
    sp_report_array_free(&arr[0]);
    sp_report_array_free(&arr[1]);
    return st;
}

static int has_name(char **names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

/* Visits the names of both lists once each, A's first: visit(name, present[2]). */
typedef sp_status (*visit_fn)(compare_run *c, const char *group, const char *name, const int *present);
static sp_status visit_union(compare_run *c, const char *group, char **names[2], const int n[2], visit_fn visit)
{
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < n[s]; i++) {
            int present[2] = {s == 0 || has_name(names[0], n[0], names[s][i]), has_name(names[1], n[1], names[s][i])};
            if (s == 1 && present[0])
                continue; /* seen with A's */
            SP_TRY(visit(c, group, names[s][i], present));
        }
    return SP_OK;
}

static sp_status visit_analyzer(compare_run *c, const char *unused, const char *analyzer, const int *present)
{
    (void)unused;
    (void)present;
    if (!selected(c, analyzer))
        return SP_OK;
    char **names[2] = {NULL, NULL};
    int n[2] = {0, 0};
    sp_status st = SP_OK;
    for (int s = 0; s < 2 && st == SP_OK; s++)
        st = sp_report_list(c->side[s].reader, analyzer, &names[s], &n[s]);
    if (st == SP_OK)
        st = visit_union(c, analyzer, names, n, compare_array);
    for (int s = 0; s < 2; s++)
        sp_report_names_free(names[s], n[s]);
    return st;
}

static sp_status compare_arrays(compare_run *c)
{
    char **names[2] = {NULL, NULL};
    int n[2] = {0, 0};
    sp_status st = SP_OK;
    for (int s = 0; s < 2 && st == SP_OK; s++)
        st = sp_report_list(c->side[s].reader, NULL, &names[s], &n[s]);
    if (st == SP_OK)
        st = visit_union(c, NULL, names, n, visit_analyzer);
    for (int s = 0; s < 2; s++)
        sp_report_names_free(names[s], n[s]);
    return st;
}

/* metrics.<group> of a side's summary (NULL when absent). */
static const cJSON *summary_group(const report_side *side, const char *group)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(side->summary, "metrics"), group);
}

/* The keys of a summary object as a name list (pointers into the JSON; free the list only). */
static sp_status object_keys(const report_side *side, const cJSON *obj, const char *group, char ***names, int *n)
{
    *names = NULL;
    *n = 0;
    if (obj && !cJSON_IsObject(obj))
        return sp_error(SP_ERR_INPUT, "%s: summary metrics.%s: expected an object", side->path, group);
    int count = cJSON_GetArraySize(obj);
    if (count == 0)
        return SP_OK;
    *names = sp_calloc((size_t)count, sizeof **names, "summary keys");
    if (!*names)
        return SP_ERR_NOMEM;
    for (const cJSON *k = obj->child; k; k = k->next)
        (*names)[(*n)++] = k->string;
    return SP_OK;
}

/* A summary value: a number, or NaN for null (the summary writes non-finite values as null). */
static sp_status scalar_value(const report_side *side, const char *group, const char *key, double *out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(summary_group(side, group), key);
    if (!cJSON_IsNumber(item) && !cJSON_IsNull(item))
        return sp_error(SP_ERR_INPUT, "%s: summary metrics.%s.%s: expected a number or null", side->path, group, key);
    *out = cJSON_IsNull(item) ? NAN : item->valuedouble;
    return SP_OK;
}

static sp_status compare_scalar(compare_run *c, const char *group, const char *key, const int *present)
{
    char label[300];
    snprintf(label, sizeof label, "summary:%s.%s", group, key);
    const sp_tolerance *t = sp_tolerance_find(SP_AGREE_SCALAR, group, key);
    sp_status st = SP_OK;
    if (settle_unpaired(c, t, label, present, &st))
        return st;
    double v[2];
    for (int s = 0; s < 2; s++)
        SP_TRY(scalar_value(&c->side[s], group, key, &v[s]));
    return judge(c, t, label, 0, NULL, &v[0], &v[1], 1);
}

static sp_status visit_group(compare_run *c, const char *unused, const char *group, const int *present)
{
    (void)unused;
    (void)present;
    if (!selected(c, group))
        return SP_OK;
    char **names[2] = {NULL, NULL};
    int n[2] = {0, 0};
    sp_status st = SP_OK;
    for (int s = 0; s < 2 && st == SP_OK; s++)
        st = object_keys(&c->side[s], summary_group(&c->side[s], group), group, &names[s], &n[s]);
    if (st == SP_OK)
        st = visit_union(c, group, names, n, compare_scalar);
    free(names[0]);
    free(names[1]);
    return st;
}

static sp_status compare_scalars(compare_run *c)
{
    char **names[2] = {NULL, NULL};
    int n[2] = {0, 0};
    sp_status st = SP_OK;
    for (int s = 0; s < 2 && st == SP_OK; s++)
        st = object_keys(&c->side[s], cJSON_GetObjectItemCaseSensitive(c->side[s].summary, "metrics"), "", &names[s],
                         &n[s]);
    if (st == SP_OK)
        st = visit_union(c, NULL, names, n, visit_group);
    free(names[0]);
    free(names[1]);
    return st;
}

static sp_status run_compare(compare_run *c)
{
    for (int s = 0; s < 2; s++) {
        c->side[s].path = c->args->path[s];
        SP_TRY(sp_report_open(c->side[s].path, &c->side[s].reader));
        SP_TRY(sp_report_read_summary(c->side[s].reader, &c->side[s].summary));
    }
    SP_TRY(compare_arrays(c));
    SP_TRY(compare_scalars(c));
    printf("compare %s against %s\n%s", c->side[1].path, c->side[0].path, c->text ? c->text : "");
    int n_bad = c->counts[LINE_FAIL] + c->counts[LINE_MISSING];
    printf("compare: %d passed, %d failed, %d missing, %d not compared%s\n", c->counts[LINE_PASS],
           c->counts[LINE_FAIL], c->counts[LINE_MISSING], c->counts[LINE_SKIP],
           c->counts[LINE_PASS] + n_bad == 0 ? " (nothing to compare: a failure)" : "");
    fflush(stdout);
    return n_bad > 0 || c->counts[LINE_PASS] == 0 ? SP_ERR_CHECK : SP_OK;
}

int sp_cmd_compare(int argc, char **argv)
{
    if (sp_cli_wants_help(argc, argv)) {
        print_help();
        return SP_OK;
    }
    sp_error_clear();
    compare_args args;
    sp_status st = parse_args(argc, argv, &args);
    if (st == SP_OK && args.metrics)
        st = check_metrics(args.metrics);
    if (st != SP_OK)
        return sp_cli_usage_error("compare", "%s", sp_error_message());
    compare_run c = {.args = &args};
    st = run_compare(&c);
    for (int s = 0; s < 2; s++) {
        sp_report_close(c.side[s].reader);
        cJSON_Delete(c.side[s].summary);
    }
    free(c.text);
    /* a failed comparison has said everything on stdout */
    return st == SP_ERR_CHECK ? (int)st : sp_cli_report("compare", st);
}
