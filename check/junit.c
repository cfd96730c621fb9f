/* check/junit.c: JUnit XML of a check's outcomes (check/junit.h). */
#include "check/junit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "io/atomic.h"

/* Text or attribute content: markup characters as entities, line breaks and tabs as character
 * references (attribute values would fold them into spaces). */
static void put_escaped(FILE *f, const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    while (*s) {
        int n = sp_utf8_length(s);
        if (n > 1) {
            fwrite(s, 1, (size_t)n, f);
            s += n;
            continue;
        }
        unsigned char c = *s++;
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        case '\n': fputs("&#10;", f); break;
        case '\t': fputs("&#9;", f); break;
        case '\r': fputs("&#13;", f); break;
        default: fputc(n == 1 && c >= 0x20 ? c : '?', f); break;
        }
    }
}

static void put_attr(FILE *f, const char *name, const char *value)
{
    fprintf(f, " %s=\"", name);
    put_escaped(f, value);
    fputc('"', f);
}

static void put_counts(FILE *f, const sp_check_results *r, double seconds)
{
    fprintf(f, " tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\"", r->n,
            r->count[SP_CHECK_FAIL], r->count[SP_CHECK_ERROR], r->count[SP_CHECK_SKIP], seconds);
}

static void put_testcase(FILE *f, const sp_check_result *res)
{
    const sp_check_rule *rule = res->rule;
    fputs("    <testcase classname=\"spanprobe.check\"", f);
    put_attr(f, "name", rule->name);
    fputs(" time=\"0\">\n", f);
    static const char *const element[] = {"system-out", "failure", "skipped", "error"};
    const char *tag = element[res->outcome];
    fprintf(f, "      <%s", tag);
    if (res->outcome != SP_CHECK_PASS)
        put_attr(f, "message", res->detail);
    if (res->outcome == SP_CHECK_FAIL)
        put_attr(f, "type", rule->against_baseline ? "tolerance" : "threshold");
    if (res->outcome == SP_CHECK_ERROR)
        put_attr(f, "type", "rule");
    if (res->outcome == SP_CHECK_SKIP) {
        fputs("/>\n", f);
    } else {
        fputc('>', f);
        put_escaped(f, res->detail);
        if (rule->description[0]) {
            fputc('\n', f);
            put_escaped(f, rule->description);
        }
        fprintf(f, "</%s>\n", tag);
    }
    fputs("    </testcase>\n", f);
}

sp_status sp_check_write_junit(const char *path, const char *report_path, const sp_check_results *r, double seconds)
{
    char *xml = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&xml, &len);
    if (!f)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory building the JUnit XML", path);
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"spanprobe check\"", f);
    put_counts(f, r, seconds);
    fputs(">\n  <testsuite", f);
    char suite[4200];
    snprintf(suite, sizeof suite, "spanprobe check %s", report_path);
    put_attr(f, "name", suite);
    put_counts(f, r, seconds);
    fputs(">\n", f);
    for (int i = 0; i < r->n; i++)
        put_testcase(f, &r->results[i]);
    fputs("  </testsuite>\n</testsuites>\n", f);
    if (fclose(f) != 0 || !xml) {
        free(xml);
        return sp_error(SP_ERR_NOMEM, "%s: out of memory building the JUnit XML", path);
    }
    sp_status st = sp_atomic_write_file(path, xml, len);
    free(xml);
    return st;
}
