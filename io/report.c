/* io/report.c: analysis reports (format "spanprobe-report" 1.0, layout in io/report.h and
 * docs/formats.md) and their JSON summary: an atomic writer for both files and a validating reader. */
#include "io/report.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sha256.h"
#include "io/file_read.h"
#include "io/h5.h"
#include "io/json_number.h"
#include "io/model_source.h"

#define REPORT_MAX_RANK 4
#define SUMMARY_MAX_BYTES (256u << 20)

struct sp_report {
    sp_atomic_file h5, json;
    hid_t file;
    cJSON *summary;            /* the whole JSON document */
    cJSON *metrics, *skipped;  /* owned by summary */
};

char *sp_report_summary_path(const char *path)
{
    size_t n = strlen(path);
    static const char *const suffixes[] = {".h5", ".hdf5"};
    for (size_t i = 0; i < SP_ARRAY_LEN(suffixes); i++) {
        size_t k = strlen(suffixes[i]);
        if (n > k && strcmp(path + n - k, suffixes[i]) == 0)
            n -= k;
    }
    char *out = malloc(n + sizeof ".json");
    if (out) {
        memcpy(out, path, n);
        memcpy(out + n, ".json", sizeof ".json");
    }
    return out;
}

/* Analyzer, array and key names become link names and JSON keys: [A-Za-z0-9_.-]+, not "." or "..". */
static sp_status check_name(const char *what, const char *name)
{
    size_t n = strlen(name);
    int ok = n > 0 && n < 128 && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
    for (size_t i = 0; ok && i < n; i++) {
        char c = name[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
             c == '-';
    }
    return ok ? SP_OK
              : sp_error(SP_ERR_USAGE, "report %s name '%s': expected 1..127 characters of [A-Za-z0-9_.-]", what, name);
}

/* ---- writer ---- */

void sp_report_abort(sp_report *r)
{
    if (!r)
        return;
    sp_h5_discard(r->file);
    sp_atomic_abort(&r->h5);
    sp_atomic_abort(&r->json);
    cJSON_Delete(r->summary);
    free(r);
}

static sp_status write_provenance(sp_report *r, const sp_report_provenance *prov, const char *sha, int64_t n_bytes)
{
    hid_t g;
    SP_TRY(sp_h5_create_group(r->file, "provenance", &g));
    const char *options = prov->options_json ? prov->options_json : "{}";
    sp_status st = sp_h5_set_str(g, "input_file", prov->input_path ? prov->input_path : "");
    if (st == SP_OK)
        st = sp_h5_set_str(g, "input_sha256", sha);
    if (st == SP_OK)
        st = sp_h5_set_i64(g, "input_bytes", n_bytes);
    if (st == SP_OK)
        st = sp_h5_set_str(g, "tool_version", "spanprobe " SP_VERSION);
    if (st == SP_OK)
        st = sp_h5_set_str(g, "options_json", options);
    if (st == SP_OK)
        st = sp_h5_set_str(g, "eval_set", prov->eval_set ? prov->eval_set : "");
    if (st == SP_OK)
        st = sp_h5_set_str(g, "model", prov->model ? prov->model : "");
    H5Gclose(g);
    return st;
}

static sp_status start_summary(sp_report *r, const sp_report_provenance *prov, const char *sha, int64_t n_bytes)
{
    cJSON *options = cJSON_Parse(prov->options_json ? prov->options_json : "{}");
    if (!options)
        return sp_error(SP_ERR_USAGE, "%s: the report options are not valid JSON", r->h5.path);
    cJSON *doc = r->summary = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "format", SP_REPORT_FORMAT);
    char version[32];
    snprintf(version, sizeof version, "%d.%d", SP_REPORT_VERSION_MAJOR, SP_REPORT_VERSION_MINOR);
    cJSON_AddStringToObject(doc, "format_version", version);
    cJSON_AddStringToObject(doc, "tool_version", "spanprobe " SP_VERSION);
    cJSON *input = cJSON_AddObjectToObject(doc, "input");
    cJSON_AddStringToObject(input, "file", prov->input_path ? prov->input_path : "");
    cJSON_AddStringToObject(input, "sha256", sha);
    cJSON_AddNumberToObject(input, "bytes", (double)n_bytes);
    cJSON_AddStringToObject(input, "eval_set", prov->eval_set ? prov->eval_set : "");
    cJSON_AddStringToObject(input, "model", prov->model ? prov->model : "");
    cJSON_AddItemToObject(input, "options", options);
    r->metrics = cJSON_AddObjectToObject(doc, "metrics");
    r->skipped = cJSON_AddObjectToObject(doc, "skipped");
    if (!r->metrics || !r->skipped)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory building the summary", r->h5.path);
    return SP_OK;
}

sp_status sp_report_create(const char *path, const sp_report_provenance *prov, sp_report **out)
{
    *out = NULL;
    char sha[65] = "";
    int64_t n_bytes = 0;
    if (prov->input_path)
        SP_TRY(sp_model_source_sha256(prov->input_path, sha, &n_bytes));
    sp_report *r = sp_calloc(1, sizeof *r, "report writer");
    if (!r)
        return SP_ERR_NOMEM;
    r->file = -1;
    r->json.fd = r->h5.fd = -1;
    char *json_path = sp_report_summary_path(path);
    sp_status st = json_path ? sp_atomic_begin(path, &r->h5) : sp_error(SP_ERR_NOMEM, "out of memory");
    if (st == SP_OK)
        st = sp_atomic_begin(json_path, &r->json);
    free(json_path);
    if (st == SP_OK)
        st = sp_h5_create(r->h5.tmp_path, &r->file);
    if (st == SP_OK)
        st = sp_h5_write_header(r->file, SP_REPORT_FORMAT, SP_REPORT_VERSION_MAJOR, SP_REPORT_VERSION_MINOR,
                                prov->input_path);
    if (st == SP_OK)
        st = write_provenance(r, prov, sha, n_bytes);
    if (st == SP_OK)
        st = start_summary(r, prov, sha, n_bytes);
    if (st != SP_OK) {
        sp_report_abort(r);
        return st;
    }
    *out = r;
    return SP_OK;
}

static sp_status write_array(sp_report *r, const char *analyzer, const char *name, int rank, const int64_t *shape,
                             hid_t file_type, hid_t mem_type, const void *data, const sp_report_array_attrs *attrs)
{
    if (!r)
        return SP_OK;
    SP_TRY(check_name("analyzer", analyzer));
    SP_TRY(check_name("array", name));
    if (rank < 1 || rank > REPORT_MAX_RANK)
        return sp_error(SP_ERR_USAGE, "%s: /metrics/%s/%s: rank %d (expected 1..%d)", r->h5.path, analyzer, name, rank,
                        REPORT_MAX_RANK);
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0)
            return sp_error(SP_ERR_USAGE, "%s: /metrics/%s/%s: negative extent %lld", r->h5.path, analyzer, name,
                            (long long)shape[i]);
    char path[300];
    snprintf(path, sizeof path, "metrics/%s/%s", analyzer, name);
    hid_t d;
    SP_TRY(sp_h5_create_dataset(r->file, path, file_type, rank, shape, NULL, NULL, &d));
    int64_t numel = 1;
    for (int i = 0; i < rank; i++)
        numel *= shape[i];
    sp_status st = numel > 0 ? sp_h5_write(d, mem_type, NULL, NULL, data) : SP_OK;
    if (st == SP_OK)
        st = sp_h5_set_str(d, "units", attrs->units ? attrs->units : "");
    if (st == SP_OK)
        st = sp_h5_set_str(d, "shape_desc", attrs->shape_desc ? attrs->shape_desc : "");
    if (st == SP_OK)
        st = sp_h5_set_str(d, "description", attrs->description ? attrs->description : "");
    H5Dclose(d);
    return st;
}

sp_status sp_report_write_array(sp_report *r, const char *analyzer, const char *name, int rank, const int64_t *shape,
                                const double *data, const sp_report_array_attrs *attrs)
{
    return write_array(r, analyzer, name, rank, shape, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, data, attrs);
}

sp_status sp_report_write_array_f32(sp_report *r, const char *analyzer, const char *name, int rank,
                                    const int64_t *shape, const float *data, const sp_report_array_attrs *attrs)
{
    return write_array(r, analyzer, name, rank, shape, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, data, attrs);
}

sp_status sp_report_set_scalar(sp_report *r, const char *analyzer, const char *key, double value)
{
    if (!r)
        return SP_OK;
    SP_TRY(check_name("analyzer", analyzer));
    SP_TRY(check_name("key", key));
    cJSON *group = cJSON_GetObjectItemCaseSensitive(r->metrics, analyzer);
    if (!group)
        group = cJSON_AddObjectToObject(r->metrics, analyzer);
    cJSON *item = sp_json_exact_number(value); /* the same bits as the array it may come from */
    if (!group || !item) {
        cJSON_Delete(item);
        return sp_error(SP_ERR_NOMEM, "%s: out of memory building the summary", r->h5.path);
    }
    if (cJSON_GetObjectItemCaseSensitive(group, key))
        cJSON_ReplaceItemInObjectCaseSensitive(group, key, item);
    else
        cJSON_AddItemToObject(group, key, item);
    return SP_OK;
}

sp_status sp_report_skip(sp_report *r, const char *analyzer, const char *reason)
{
    if (!r)
        return SP_OK;
    SP_TRY(check_name("analyzer", analyzer));
    char path[200];
    snprintf(path, sizeof path, "skipped/%s", analyzer);
    hid_t g;
    SP_TRY(sp_h5_create_group(r->file, path, &g));
    sp_status st = sp_h5_set_str(g, "reason", reason);
    H5Gclose(g);
    SP_TRY(st);
    cJSON_DeleteItemFromObjectCaseSensitive(r->skipped, analyzer);
    cJSON_AddStringToObject(r->skipped, analyzer, reason);
    return SP_OK;
}

sp_status sp_report_finish(sp_report *r, sp_output_set *set, const char **h5_tmp_path)
{
    sp_status st = sp_h5_close_written(r->file);
    r->file = -1;
    char *text = st == SP_OK ? cJSON_Print(r->summary) : NULL;
    if (st == SP_OK && !text)
        st = sp_error(SP_ERR_NOMEM, "%s: out of memory printing the summary", r->json.path);
    if (st == SP_OK)
        st = sp_atomic_write(&r->json, text, strlen(text));
    if (st == SP_OK)
        st = sp_atomic_write(&r->json, "\n", 1);
    free(text);
    if (h5_tmp_path)
        *h5_tmp_path = r->h5.tmp_path; /* the string moves into the set with the file */
    if (st == SP_OK)
        st = sp_output_set_adopt(set, &r->h5);
    if (st == SP_OK)
        st = sp_output_set_adopt(set, &r->json);
    sp_report_abort(r); /* releases what is left: the adopted files are empty */
    return st;
}

sp_status sp_report_commit(sp_report *r)
{
    sp_output_set set = {0};
    sp_status st = sp_report_finish(r, &set, NULL);
    if (st != SP_OK) {
        sp_output_set_abort(&set);
        return st;
    }
    return sp_output_set_commit(&set);
}

/* ---- reader ---- */

struct sp_report_reader {
    char *path;
    hid_t file;
};

void sp_report_close(sp_report_reader *r)
{
    if (!r)
        return;
    if (r->file >= 0)
        H5Fclose(r->file);
    free(r->path);
    free(r);
}

/* A metrics array: float, rank 1..REPORT_MAX_RANK, with its three attributes; fills out when given. */
static sp_status check_array(hid_t loc, const char *path, sp_report_array *out)
{
    hid_t d;
    sp_report_array local;
    sp_report_array *a = out ? out : &local;
    SP_TRY(sp_h5_open_dataset(loc, path, H5T_FLOAT, -1, NULL, &d, a->shape));
    a->rank = sp_h5_rank(d);
    sp_status st = sp_h5_get_str(d, "units", a->units, sizeof a->units);
    if (st == SP_OK)
        st = sp_h5_get_str(d, "shape_desc", a->shape_desc, sizeof a->shape_desc);
    if (st == SP_OK)
        st = sp_h5_get_str(d, "description", a->description, sizeof a->description);
    size_t numel = 1;
    for (int i = 0; i < a->rank && st == SP_OK; i++)
        st = sp_size_mul(numel, (size_t)a->shape[i], &numel, path);
    if (st == SP_OK && out) {
        out->data = sp_malloc(numel * sizeof *out->data, path);
        st = !out->data ? SP_ERR_NOMEM : numel > 0 ? sp_h5_read(d, H5T_NATIVE_DOUBLE, NULL, NULL, out->data) : SP_OK;
    }
    H5Dclose(d);
    return st;
}

/* Validates /metrics/<analyzer>/<array> (leaves_are_arrays) or /skipped/<analyzer> (a reason each). */
static sp_status check_analyzer_groups(hid_t file, const char *top, int leaves_are_arrays)
{
    if (!sp_h5_exists(file, top))
        return SP_OK;
    hid_t g;
    SP_TRY(sp_h5_open_group(file, top, &g));
    char **names = NULL;
    int n = 0;
    sp_status st = sp_h5_list(g, &names, &n);
    for (int i = 0; i < n && st == SP_OK; i++) {
        hid_t sub;
        st = sp_h5_open_group(g, names[i], &sub);
        if (st != SP_OK)
            break;
        if (leaves_are_arrays) {
            char **leaves = NULL;
            int n_leaves = 0;
            st = sp_h5_list(sub, &leaves, &n_leaves);
            for (int j = 0; j < n_leaves && st == SP_OK; j++)
                st = check_array(sub, leaves[j], NULL);
            sp_h5_list_free(leaves, n_leaves);
        } else {
            char reason[1024];
            st = sp_h5_get_str(sub, "reason", reason, sizeof reason);
        }
        H5Gclose(sub);
    }
    sp_h5_list_free(names, n);
    H5Gclose(g);
    return st;
}

sp_status sp_report_open(const char *path, sp_report_reader **out)
{
    *out = NULL;
    sp_report_reader *r = sp_calloc(1, sizeof *r, "report reader");
    if (!r)
        return SP_ERR_NOMEM;
    r->file = -1;
    r->path = strdup(path);
    sp_status st = r->path ? sp_h5_open(path, &r->file) : sp_error(SP_ERR_NOMEM, "out of memory");
    if (st == SP_OK)
        st = sp_h5_check_format(r->file, SP_REPORT_FORMAT, SP_REPORT_VERSION_MAJOR, NULL);
    if (st == SP_OK) {
        hid_t g;
        char text[128];
        st = sp_h5_open_group(r->file, "provenance", &g);
        if (st == SP_OK) {
            st = sp_h5_get_str(g, "tool_version", text, sizeof text);
            H5Gclose(g);
        }
    }
    if (st == SP_OK)
        st = check_analyzer_groups(r->file, "metrics", 1);
    if (st == SP_OK)
        st = check_analyzer_groups(r->file, "skipped", 0);
    if (st != SP_OK) {
        sp_report_close(r);
        return st;
    }
    *out = r;
    return SP_OK;
}

sp_status sp_report_read_array(sp_report_reader *r, const char *analyzer, const char *name, sp_report_array *out)
{
    memset(out, 0, sizeof *out);
    char path[300];
    snprintf(path, sizeof path, "metrics/%s/%s", analyzer, name);
    sp_status st = check_array(r->file, path, out);
    if (st != SP_OK)
        sp_report_array_free(out);
    return st;
}

void sp_report_array_free(sp_report_array *a)
{
    free(a->data);
    a->data = NULL;
}

sp_status sp_report_get_provenance(sp_report_reader *r, const char *key, char *buf, size_t len)
{
    hid_t g;
    SP_TRY(sp_h5_open_group(r->file, "provenance", &g));
    sp_status st = sp_h5_get_str(g, key, buf, len);
    H5Gclose(g);
    return st;
}

sp_status sp_report_list(sp_report_reader *r, const char *analyzer, char ***names, int *n)
{
    *names = NULL;
    *n = 0;
    char path[300];
    snprintf(path, sizeof path, analyzer ? "metrics/%s" : "metrics", analyzer);
    if (!sp_h5_exists(r->file, path))
        return SP_OK;
    hid_t g;
    SP_TRY(sp_h5_open_group(r->file, path, &g));
    sp_status st = sp_h5_list(g, names, n);
    H5Gclose(g);
    return st;
}

void sp_report_names_free(char **names, int n) { sp_h5_list_free(names, n); }

static sp_status check_summary(sp_report_reader *r, const cJSON *doc, const char *json_path)
{
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(doc, "format");
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(doc, "format_version");
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "input"), "sha256");
    if (!doc)
        return sp_error(SP_ERR_INPUT, "%s: not valid JSON (the summary of %s)", json_path, r->path);
    if (!cJSON_IsString(format) || strcmp(format->valuestring, SP_REPORT_FORMAT) != 0)
        return sp_error(SP_ERR_INPUT, "%s: \"format\": expected \"%s\"", json_path, SP_REPORT_FORMAT);
    if (!cJSON_IsString(version) || atoi(version->valuestring) != SP_REPORT_VERSION_MAJOR)
        return sp_error(SP_ERR_INPUT, "%s: \"format_version\": expected %d.x", json_path, SP_REPORT_VERSION_MAJOR);
    if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "metrics")) ||
        !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "skipped")) || !cJSON_IsString(sha))
        return sp_error(SP_ERR_INPUT, "%s: expected the objects \"metrics\", \"skipped\" and \"input\" with "
                        "\"sha256\"", json_path);
    char expected_sha[80] = "";
    SP_TRY(sp_report_get_provenance(r, "input_sha256", expected_sha, sizeof expected_sha));
    if (strcmp(expected_sha, sha->valuestring) != 0)
        return sp_error(SP_ERR_INPUT, "%s: input.sha256 %.16s... differs from %s's /provenance input_sha256 "
                        "%.16s... (the summary of another report)", json_path, sha->valuestring, r->path,
                        expected_sha);
    return SP_OK;
}

sp_status sp_report_read_summary(sp_report_reader *r, cJSON **out)
{
    *out = NULL;
    char *json_path = sp_report_summary_path(r->path);
    if (!json_path)
        return sp_error(SP_ERR_NOMEM, "out of memory");
    unsigned char *text = NULL;
    size_t size = 0;
    sp_status st = sp_file_read_all(json_path, SUMMARY_MAX_BYTES, &text, &size);
    cJSON *doc = st == SP_OK ? cJSON_ParseWithLength((const char *)text, size) : NULL;
    free(text);
    if (st == SP_OK)
        st = check_summary(r, doc, json_path);
    free(json_path);
    if (st != SP_OK)
        cJSON_Delete(doc);
    else
        *out = doc;
    return st;
}
