/* cli/cmd_inspect.c: `spanprobe inspect FILE [--json]`: what a spanprobe file holds.
 *
 * The format is recognized by the root "format" attribute and the file is first validated by its
 * own reader (so a bad file fails exactly as it would for the commands that use it); then every
 * group's attributes and a table of every dataset (shape, dtype, stored size, min/max/mean/std over
 * the finite values, count of NaN/Inf) are collected into one JSON tree, printed as text or as JSON.
 * Datasets are read in slabs of at most SLAB_ELEMS values, never whole. */
#include <cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/final_norm_check.h"
#include "cli/cli.h"
#include "cli/inspect.h"
#include "cli/inspect_stats.h"
#include "io/model_source.h"
#include "io/checkpoint.h"
#include "io/dump.h"
#include "io/h5.h"
#include "io/report.h"

#define SLAB_ELEMS (1 << 20)

static void print_help(void)
{
    printf("usage: spanprobe inspect FILE [--json]\n\n"
           "Describes a spanprobe checkpoint, activation dump or report (docs/formats.md), a Hugging Face\n"
           "model directory or a GGUF file (the spanprobe config it maps to, which parameters each tensor\n"
           "fills, GGUF's architecture, metadata and tensor types with their counts): the format and\n"
           "version, the provenance and config attributes, and a table of every tensor with its shape,\n"
           "dtype, stored size, min, max, mean and std of its finite values and its count of NaN/Inf.\n"
           "The file is validated first as the commands that read it would; NaN/Inf values are counted,\n"
           "not rejected. Tensors are read slab by slab, so files larger than memory are fine.\n"
           "On an activation dump whose last layer h_L looks normalized (the final norm applied, as in\n"
           "output_hidden_states), one warning line goes to stderr; the exit code stays 0.\n\n"
           "  --json   print one JSON document instead of the text tables\n"
           "  --help   this text\n\n"
           "exit codes: 0 described; 2 bad usage; 3 not a valid spanprobe file (unknown format, newer\n"
           "            major version, missing or misshapen dataset, wrong dtype, bad config);\n"
           "            5 cannot read the file; 8 out of memory\n");
}

/* ---- validation by format ---- */

/* One line on stderr when h_L looks like a final norm's output (analyzers/final_norm_check.h). A
 * heuristic on a valid file: when it cannot run (NaN rows, which inspect counts rather than
 * rejects; no memory) it says nothing and inspect goes on. */
static void warn_if_final_norm(const char *path, sp_dump *d)
{
    sp_final_norm_check check;
    if (sp_dump_check_final_norm(d, &check) != SP_OK) {
        sp_error_clear();
        return;
    }
    if (check.looks_normalized)
        fprintf(stderr,
                "spanprobe inspect: warning: %s: /hidden/0 layer %d looks normalized (its rows lie on one quadric, "
                "as a final norm's output does: fit residual %.1e, layer %d's %.2g): h_L must be the last block's "
                "output before the final norm, not output_hidden_states' last entry (docs/formats.md)\n",
                path, sp_dump_get_info(d)->n_layers, check.rho_last, sp_dump_get_info(d)->n_layers - 1,
                check.rho_prev);
}

static sp_status validate(const char *path, const char *format)
{
    if (strcmp(format, SP_CKPT_FORMAT) == 0) {
        sp_ckpt_meta meta;
        sp_status st = sp_ckpt_read_meta(path, &meta);
        if (st == SP_OK)
            sp_ckpt_meta_free(&meta);
        return st;
    }
    if (strcmp(format, SP_DUMP_FORMAT) == 0) {
        sp_dump *d;
        SP_TRY(sp_dump_open(path, &d));
        warn_if_final_norm(path, d);
        sp_dump_close(d);
        return SP_OK;
    }
    if (strcmp(format, SP_REPORT_FORMAT) == 0) {
        sp_report_reader *r;
        SP_TRY(sp_report_open(path, &r));
        sp_report_close(r);
        return SP_OK;
    }
    return sp_error(SP_ERR_INPUT, "%s: /format: expected %s, %s or %s, found \"%s\"", path, SP_CKPT_FORMAT,
                    SP_DUMP_FORMAT, SP_REPORT_FORMAT, format);
}

/* ---- collection ---- */

static cJSON *json_value(const sp_h5_value *v)
{
    if (v->cls == H5T_STRING)
        return cJSON_CreateString(v->text);
    cJSON *array = v->is_array ? cJSON_CreateArray() : NULL;
    for (size_t i = 0; i < v->n; i++) {
        cJSON *item = v->cls == H5T_FLOAT ? sp_inspect_json_number(v->floats[i]) : sp_inspect_json_int(v->ints[i], v->is_unsigned);
        if (!array)
            return item;
        cJSON_AddItemToArray(array, item);
    }
    return array;
}

static herr_t collect_attr(hid_t obj, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    sp_h5_value v;
    if (sp_h5_attr_read(obj, name, &v) != SP_OK) {
        sp_error_clear(); /* an attribute of a type spanprobe does not use: shown, not fatal */
        cJSON_AddStringToObject(data, name, "(unsupported type)");
        return 0;
    }
    cJSON_AddItemToObject(data, name, json_value(&v));
    sp_h5_value_free(&v);
    return 0;
}

/* Adds an object `key` holding obj's attributes to parent (nothing when it has none). */
static void collect_attrs(hid_t obj, const char *key, cJSON *parent)
{
    H5O_info_t info;
    if (H5Oget_info2(obj, &info, H5O_INFO_BASIC | H5O_INFO_NUM_ATTRS) < 0 || info.num_attrs == 0)
        return;
    cJSON *attrs = cJSON_AddObjectToObject(parent, key);
    unsigned order = 0;
    hid_t cpl = info.type == H5O_TYPE_GROUP ? H5Gget_create_plist(obj) : H5Dget_create_plist(obj);
    if (cpl >= 0) {
        H5Pget_attr_creation_order(cpl, &order);
        H5Pclose(cpl);
    }
    hsize_t idx = 0;
    H5Aiterate2(obj, (order & H5P_CRT_ORDER_INDEXED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME, H5_ITER_INC, &idx,
                collect_attr, attrs);
}

/* Reads the dataset slab by slab: the trailing axes that fit SLAB_ELEMS whole, the axis before them
 * in steps, the leading axes one index at a time. */
static sp_status dataset_stats(hid_t d, int rank, const int64_t *dims, double *buf, sp_inspect_stats *s)
{
    if (rank == 0) { /* a scalar dataset */
        SP_TRY(sp_h5_read(d, H5T_NATIVE_DOUBLE, NULL, NULL, buf));
        sp_inspect_stats_add(s, buf, 1);
        return SP_OK;
    }
    for (int i = 0; i < rank; i++)
        if (dims[i] == 0)
            return SP_OK;
    int axis = rank - 1;
    int64_t inner = 1;
    while (axis > 0 && inner * dims[axis] <= SLAB_ELEMS) {
        inner *= dims[axis];
        axis--;
    }
    int64_t step = SLAB_ELEMS / inner, start[SP_H5_MAX_RANK] = {0}, count[SP_H5_MAX_RANK];
    for (;;) {
        for (int64_t pos = 0; pos < dims[axis]; pos += step) {
            for (int i = 0; i < rank; i++)
                count[i] = i < axis ? 1 : i > axis ? dims[i] : (dims[axis] - pos < step ? dims[axis] - pos : step);
            start[axis] = pos;
            SP_TRY(sp_h5_read(d, H5T_NATIVE_DOUBLE, start, count, buf));
            sp_inspect_stats_add(s, buf, (size_t)(count[axis] * inner));
        }
        start[axis] = 0;
        int k = axis - 1; /* advance the leading axes like an odometer */
        while (k >= 0 && ++start[k] == dims[k])
            start[k--] = 0;
        if (k < 0)
            return SP_OK;
    }
}

static sp_status collect_dataset(hid_t d, const char *path, double *buf, cJSON *tensors)
{
    hid_t type = H5Dget_type(d);
    H5T_class_t cls = H5Tget_class(type);
    char dtype[32];
    sp_h5_type_name(type, dtype, sizeof dtype);
    H5Tclose(type);
    hid_t space = H5Dget_space(d);
    int rank = H5Sget_simple_extent_ndims(space);
    hsize_t ext[H5S_MAX_RANK];
    int64_t dims[H5S_MAX_RANK];
    H5Sget_simple_extent_dims(space, ext, NULL);
    H5Sclose(space);
    cJSON *t = cJSON_CreateObject();
    cJSON_AddItemToArray(tensors, t);
    cJSON_AddStringToObject(t, "name", path);
    cJSON *shape = cJSON_AddArrayToObject(t, "shape");
    for (int i = 0; i < rank && i < H5S_MAX_RANK; i++) {
        dims[i] = (int64_t)ext[i];
        cJSON_AddItemToArray(shape, sp_inspect_json_int(dims[i], 0));
    }
    cJSON_AddStringToObject(t, "dtype", dtype);
    cJSON_AddItemToObject(t, "bytes", sp_inspect_json_int((int64_t)H5Dget_storage_size(d), 0));
    collect_attrs(d, "attributes", t);
    if ((cls != H5T_FLOAT && cls != H5T_INTEGER) || rank > SP_H5_MAX_RANK)
        return SP_OK; /* no statistics for strings and other types */
    sp_inspect_stats s = {0};
    SP_TRY(dataset_stats(d, rank, dims, buf, &s));
    sp_inspect_stats_to_json(&s, t);
    return SP_OK;
}

/* The chain of groups from the root to the one being walked, by object address: a hard link back to
 * one of them would otherwise be walked forever. */
typedef struct {
    haddr_t addr[64];
    int depth;
} ancestry;

/* Walks a group in listing order: attributes of every object, statistics of every dataset. Only hard
 * links are followed; a soft or external link, or a hard link back to an ancestor, is named on
 * stderr and left out. */
static sp_status collect_group(const char *file, hid_t g, const char *path, ancestry *up, double *buf, cJSON *attrs,
                               cJSON *tensors)
{
    collect_attrs(g, path, attrs);
    char **names = NULL;
    int n = 0;
    SP_TRY(sp_h5_list(g, &names, &n));
    sp_status st = SP_OK;
    char child[1024];
    for (int i = 0; i < n && st == SP_OK; i++) {
        snprintf(child, sizeof child, "%s%s%s", path, strcmp(path, "/") ? "/" : "", names[i]);
        char shown[1024]; /* the name as the warnings print it */
        sp_escape_controls(child, shown, sizeof shown);
        H5L_info_t link;
        H5O_info_t info;
        if (H5Lget_info(g, names[i], &link, sp_h5_lapl()) < 0)
            continue;
        if (link.type != H5L_TYPE_HARD) {
            fprintf(stderr, "spanprobe inspect: warning: %s: %s: %s link, not followed\n", file, shown,
                    link.type == H5L_TYPE_SOFT ? "a soft" : "an external");
            continue;
        }
        if (H5Oget_info_by_name2(g, names[i], &info, H5O_INFO_BASIC, sp_h5_lapl()) < 0)
            continue;
        int cycle = 0;
        for (int a = 0; a < up->depth; a++)
            cycle |= up->addr[a] == info.addr;
        if (cycle || (info.type == H5O_TYPE_GROUP && up->depth == (int)SP_ARRAY_LEN(up->addr))) {
            fprintf(stderr, "spanprobe inspect: warning: %s: %s: %s, not followed\n", file, shown,
                    cycle ? "a link back to a group that holds it" : "groups nested too deep");
            continue;
        }
        hid_t obj = H5Oopen(g, names[i], sp_h5_lapl());
        if (obj < 0)
            continue;
        if (info.type == H5O_TYPE_GROUP) {
            up->addr[up->depth++] = info.addr;
            st = collect_group(file, obj, child, up, buf, attrs, tensors);
            up->depth--;
        } else if (info.type == H5O_TYPE_DATASET) {
            st = collect_dataset(obj, child, buf, tensors);
        }
        H5Oclose(obj);
    }
    sp_h5_list_free(names, n);
    return st;
}

static sp_status collect(const char *path, cJSON **out)
{
    hid_t file;
    SP_TRY(sp_h5_open(path, &file));
    char format[128];
    int major = 0, minor = 0;
    sp_status st = sp_h5_read_format(file, format, sizeof format, &major, &minor);
    if (st != SP_OK) {
        H5Fclose(file);
        return st;
    }
    st = validate(path, format);
    double *buf = st == SP_OK ? sp_malloc(SLAB_ELEMS * sizeof *buf, "inspect slab") : NULL;
    if (st == SP_OK && !buf)
        st = SP_ERR_NOMEM;
    cJSON *doc = cJSON_CreateObject();
    char version[32];
    snprintf(version, sizeof version, "%d.%d", major, minor);
    cJSON_AddStringToObject(doc, "file", path);
    cJSON_AddStringToObject(doc, "format", format);
    cJSON_AddStringToObject(doc, "format_version", version);
    cJSON *attrs = cJSON_AddObjectToObject(doc, "attributes");
    cJSON *tensors = cJSON_AddArrayToObject(doc, "tensors");
    hid_t root = st == SP_OK ? H5Gopen2(file, "/", H5P_DEFAULT) : -1;
    if (root >= 0) {
        ancestry up = {.depth = 1};
        H5O_info_t info;
        up.addr[0] = H5Oget_info2(root, &info, H5O_INFO_BASIC) >= 0 ? info.addr : HADDR_UNDEF;
        st = collect_group(path, root, "/", &up, buf, attrs, tensors);
        H5Gclose(root);
    }
    free(buf);
    H5Fclose(file);
    if (st != SP_OK) {
        cJSON_Delete(doc);
        return st;
    }
    *out = doc;
    return SP_OK;
}

/* ---- text rendering ---- */

static void format_item(const cJSON *item, char *buf, size_t len)
{
    if (cJSON_IsString(item)) {
        snprintf(buf, len, "%s", item->valuestring);
    } else if (cJSON_IsNumber(item)) {
        snprintf(buf, len, "%.6g", item->valuedouble);
    } else {
        char *text = cJSON_PrintUnformatted(item);
        snprintf(buf, len, "%s", text ? text : "?");
        free(text);
    }
}

static void format_bytes(double bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

static void print_text(const cJSON *doc)
{
    printf("file     %s\n", cJSON_GetObjectItem(doc, "file")->valuestring);
    printf("format   %s %s\n", cJSON_GetObjectItem(doc, "format")->valuestring,
           cJSON_GetObjectItem(doc, "format_version")->valuestring);
    char value[4096];
    const cJSON *object, *attr;
    cJSON_ArrayForEach(object, cJSON_GetObjectItem(doc, "attributes"))
    {
        printf("\n%s\n", object->string);
        cJSON_ArrayForEach(attr, object)
        {
            if (strcmp(object->string, "/") == 0 &&
                (strcmp(attr->string, "format") == 0 || strcmp(attr->string, "format_version") == 0))
                continue; /* printed above */
            format_item(attr, value, sizeof value);
            printf("  %-16s %s\n", attr->string, value);
        }
    }
    const cJSON *tensors = cJSON_GetObjectItem(doc, "tensors"), *t;
    int name_width = 6;
    cJSON_ArrayForEach(t, tensors)
    {
        int n = (int)strlen(cJSON_GetObjectItem(t, "name")->valuestring);
        name_width = n > name_width ? n : name_width;
    }
    printf("\ntensors (%d)\n  %-*s %-18s %-8s %10s %12s %12s %12s %12s %9s\n", cJSON_GetArraySize(tensors), name_width,
           "name", "shape", "dtype", "size", "min", "max", "mean", "std", "nonfinite");
    static const char *const stat_keys[] = {"min", "max", "mean", "std"};
    char shape[128], size[32], stat[4][32], nonfinite[32];
    cJSON_ArrayForEach(t, tensors)
    {
        format_item(cJSON_GetObjectItem(t, "shape"), shape, sizeof shape);
        format_bytes(cJSON_GetObjectItem(t, "bytes")->valuedouble, size, sizeof size);
        for (int i = 0; i < 4; i++) {
            const cJSON *v = cJSON_GetObjectItem(t, stat_keys[i]);
            if (v)
                format_item(v, stat[i], sizeof stat[i]);
            else
                snprintf(stat[i], sizeof stat[i], "-");
        }
        const cJSON *bad = cJSON_GetObjectItem(t, "nonfinite");
        if (bad)
            format_item(bad, nonfinite, sizeof nonfinite);
        else
            snprintf(nonfinite, sizeof nonfinite, "-");
        printf("  %-*s %-18s %-8s %10s %12s %12s %12s %12s %9s\n", name_width,
               cJSON_GetObjectItem(t, "name")->valuestring, shape, cJSON_GetObjectItem(t, "dtype")->valuestring, size,
               stat[0], stat[1], stat[2], stat[3], nonfinite);
    }
    int header = 0;
    cJSON_ArrayForEach(t, tensors)
    {
        const cJSON *attrs = cJSON_GetObjectItem(t, "attributes");
        if (!attrs)
            continue;
        if (!header++)
            printf("\ntensor attributes\n");
        printf("  %-*s", name_width, cJSON_GetObjectItem(t, "name")->valuestring);
        cJSON_ArrayForEach(attr, attrs)
        {
            format_item(attr, value, sizeof value);
            printf(" %s=%s%s", attr->string, value, attr->next ? ";" : "");
        }
        printf("\n");
    }
}

int sp_cmd_inspect(int argc, char **argv)
{
    if (sp_cli_wants_help(argc, argv)) {
        print_help();
        return SP_OK;
    }
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strncmp(argv[i], "-", 1) == 0 || path)
            return sp_cli_usage_error("inspect", "unexpected argument '%s'", argv[i]);
        else
            path = argv[i];
    }
    if (!path)
        return sp_cli_usage_error("inspect", "a FILE to inspect is required");
    cJSON *doc = NULL;
    sp_status st;
    switch (sp_model_source_kind_of(path)) {
    case SP_SOURCE_HF_DIR: st = sp_inspect_collect_hf(path, &doc); break;
    case SP_SOURCE_GGUF: st = sp_inspect_collect_gguf(path, &doc); break;
    case SP_SOURCE_PT: st = sp_inspect_collect_pt(path, &doc); break;
    default: st = collect(path, &doc); break;
    }
    if (st != SP_OK)
        return sp_cli_report("inspect", st);
    if (json) {
        char *text = cJSON_Print(doc);
        printf("%s\n", text ? text : "{}");
        free(text);
    } else {
        print_text(doc);
    }
    cJSON_Delete(doc);
    return SP_OK;
}
