#include "analyzers/report_csv.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/h5.h"
#include "io/report.h"

/* A growing text buffer; a failed allocation sticks (failed = 1) and is reported once at the end. */
typedef struct {
    char *text;
    size_t len, cap;
    int failed;
} text_buf;

static void put(text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text_buf *b, const char *fmt, ...)
{
    char item[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(item, sizeof item, fmt, ap);
    va_end(ap);
    if (b->failed || n < 0)
        return;
    size_t k = (size_t)n < sizeof item ? (size_t)n : sizeof item - 1;
    if (b->len + k + 1 > b->cap) {
        size_t cap = (b->cap ? 2 * b->cap : 4096) + k;
        char *t = realloc(b->text, cap);
        if (!t) {
            b->failed = 1;
            return;
        }
        b->text = t;
        b->cap = cap;
    }
    memcpy(b->text + b->len, item, k);
    b->len += k;
    b->text[b->len] = '\0';
}

static void put_value(text_buf *b, double v)
{
    if (isnan(v))
        put(b, ",nan");
    else if (isinf(v))
        put(b, v > 0 ? ",inf" : ",-inf");
    else
        put(b, ",%.17g", v);
}

/* The dimension names of a shape_desc "[layer, layer]"; "dim<i>" where it does not have rank of them. */
static void dim_names(const char *shape_desc, int rank, char names[][64])
{
    char desc[64];
    snprintf(desc, sizeof desc, "%s", shape_desc);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(desc, "[], ", &save); tok && n < SP_H5_MAX_RANK; tok = strtok_r(NULL, "[], ", &save))
        snprintf(names[n++], 64, "%s", tok);
    if (n != rank)
        for (int i = 0; i < rank; i++)
            snprintf(names[i], 64, "dim%d", i);
}

static void format_table(const sp_report_array *arr, const char *array_name, text_buf *b)
{
    char names[SP_H5_MAX_RANK][64];
    dim_names(arr->shape_desc, arr->rank, names);
    const int last = arr->rank - 1;
    const int64_t width = arr->shape[last];
    int64_t n_rows = 1;
    for (int i = 0; i < last; i++)
        n_rows *= arr->shape[i];
    if (arr->rank == 1) {
        put(b, "%s,%s\n", names[0], array_name);
        for (int64_t i = 0; i < width; i++) {
            put(b, "%lld", (long long)i);
            put_value(b, arr->data[i]);
            put(b, "\n");
        }
        return;
    }
    for (int i = 0; i < last; i++)
        put(b, "%s%s", i ? "," : "", names[i]);
    for (int64_t j = 0; j < width; j++)
        put(b, ",%s_%lld", names[last], (long long)j);
    put(b, "\n");
    for (int64_t r = 0; r < n_rows; r++) {
        int64_t rem = r, idx[SP_H5_MAX_RANK];
        for (int i = last - 1; i >= 0; i--) {
            idx[i] = rem % arr->shape[i];
            rem /= arr->shape[i];
        }
        for (int i = 0; i < last; i++)
            put(b, "%s%lld", i ? "," : "", (long long)idx[i]);
        for (int64_t j = 0; j < width; j++)
            put_value(b, arr->data[r * width + j]);
        put(b, "\n");
    }
}

static sp_status write_table(sp_report_reader *rd, const char *analyzer, const char *array, const char *dir,
                             sp_output_set *set)
{
    sp_report_array arr;
    SP_TRY(sp_report_read_array(rd, analyzer, array, &arr));
    text_buf b = {0};
    format_table(&arr, array, &b);
    sp_report_array_free(&arr);
    if (b.failed) {
        free(b.text);
        return sp_error(SP_ERR_NOMEM, "out of memory formatting the CSV table of /metrics/%s/%s", analyzer, array);
    }
    size_t n = strlen(dir) + strlen(analyzer) + strlen(array) + 8;
    char *path = malloc(n);
    if (!path) {
        free(b.text);
        return sp_error(SP_ERR_NOMEM, "out of memory");
    }
    snprintf(path, n, "%s/%s.%s.csv", dir, analyzer, array);
    sp_atomic_file *af;
    sp_status st = sp_output_set_begin(set, path, &af);
    if (st == SP_OK)
        st = sp_atomic_write(af, b.text ? b.text : "", b.len);
    if (st == SP_OK)
        st = sp_atomic_flush(af); /* its descriptor closed: a report may have hundreds of arrays */
    free(path);
    free(b.text);
    return st;
}

/* Exports every array of one analyzer group. */
static sp_status export_group(hid_t metrics, sp_report_reader *rd, const char *analyzer, const char *dir,
                              sp_output_set *set, int *n_files)
{
    hid_t g;
    SP_TRY(sp_h5_open_group(metrics, analyzer, &g));
    char **arrays = NULL;
    int n = 0;
    sp_status st = sp_h5_list(g, &arrays, &n);
    H5Gclose(g);
    for (int j = 0; j < n && st == SP_OK; j++) {
        st = write_table(rd, analyzer, arrays[j], dir, set);
        *n_files += st == SP_OK;
    }
    sp_h5_list_free(arrays, n);
    return st;
}

sp_status sp_report_export_csv(const char *report_path, const char *dir, sp_output_set *set, int *n_files)
{
    *n_files = 0;
    sp_report_reader *rd = NULL;
    SP_TRY(sp_report_open(report_path, &rd)); /* validates every array first */
    hid_t file = -1, metrics = -1;
    sp_status st = sp_h5_open(report_path, &file);
    char **groups = NULL;
    int n = 0;
    if (st == SP_OK && sp_h5_exists(file, "metrics")) {
        st = sp_h5_open_group(file, "metrics", &metrics);
        if (st == SP_OK)
            st = sp_h5_list(metrics, &groups, &n);
    }
    for (int i = 0; i < n && st == SP_OK; i++)
        st = export_group(metrics, rd, groups[i], dir, set, n_files);
    sp_h5_list_free(groups, n);
    if (metrics >= 0)
        H5Gclose(metrics);
    if (file >= 0)
        H5Fclose(file);
    sp_report_close(rd);
    return st;
}
