#include "train/trainlog.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5.h"

const char *const sp_log_column_names[] = {"step",         "tokens_seen",      "train_loss",
                                           "val_loss",     "lr",               "grad_norm",
                                           "tokens_per_s", "attn_entropy_min", "attn_max_logit",
                                           NULL};

/* The first column a 1.0 log lacks: from it on, a column a log does not have reads as NaN. */
#define FIRST_COLUMN_OF_1_1 SP_LOG_ATTN_ENTROPY_MIN

/* step and tokens_seen are counts, stored as int64 (held as double in memory: exact below 2^53) */
static int column_is_integer(int c) { return c == SP_LOG_STEP || c == SP_LOG_TOKENS_SEEN; }

/* The per-row arrays wider than one value. */
typedef struct {
    const char *name;
    double *data;
    int width;
} matrix_ref;

static int matrices(const sp_trainlog *log, matrix_ref out[3])
{
    out[0] = (matrix_ref){"tensor_grad_norm", log->tensor_grad_norm, log->n_tensors};
    out[1] = (matrix_ref){"update_ratio", log->update_ratio, log->n_tensors};
    out[2] = (matrix_ref){"hidden_rms", log->hidden_rms, log->n_hidden};
    return 3;
}

sp_status sp_trainlog_init(sp_trainlog *log, int n_tensors, const char *const *names, int n_hidden)
{
    memset(log, 0, sizeof *log);
    log->n_tensors = n_tensors;
    log->n_hidden = n_hidden;
    log->diverged_step = -1;
    log->unigram_entropy = NAN;
    log->final_val_loss = NAN;
    snprintf(log->status, sizeof log->status, "running");
    log->tensor_names = sp_calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *log->tensor_names, "log tensor names");
    if (!log->tensor_names)
        return SP_ERR_NOMEM;
    for (int i = 0; names && i < n_tensors; i++)
        snprintf(log->tensor_names[i], SP_PARAM_NAME_MAX, "%s", names[i]);
    return SP_OK;
}

void sp_trainlog_free(sp_trainlog *log)
{
    for (int c = 0; c < SP_LOG_N_SCALARS; c++)
        free(log->col[c]);
    free(log->tensor_grad_norm);
    free(log->update_ratio);
    free(log->hidden_rms);
    free(log->tensor_names);
    free(log->options_json);
    memset(log, 0, sizeof *log);
}

static sp_status grow(double **p, int64_t cap, int width)
{
    size_t bytes;
    SP_TRY(sp_size_mul3((size_t)cap, (size_t)(width ? width : 1), sizeof(double), &bytes, "training log"));
    double *q = realloc(*p, bytes);
    if (!q)
        return sp_error(SP_ERR_NOMEM, "training log: out of memory growing to %lld rows", (long long)cap);
    *p = q;
    return SP_OK;
}

static sp_status reserve(sp_trainlog *log, int64_t rows)
{
    if (rows <= log->cap)
        return SP_OK;
    int64_t cap = log->cap ? log->cap : 64;
    while (cap < rows)
        cap *= 2;
    for (int c = 0; c < SP_LOG_N_SCALARS; c++)
        SP_TRY(grow(&log->col[c], cap, 1));
    SP_TRY(grow(&log->tensor_grad_norm, cap, log->n_tensors));
    SP_TRY(grow(&log->update_ratio, cap, log->n_tensors));
    SP_TRY(grow(&log->hidden_rms, cap, log->n_hidden));
    log->cap = cap;
    return SP_OK;
}

sp_status sp_trainlog_append(sp_trainlog *log, const double *scalars, const double *tensor_grad_norm,
                             const double *update_ratio, const double *hidden_rms)
{
    SP_TRY(reserve(log, log->n_rows + 1));
    int64_t r = log->n_rows;
    for (int c = 0; c < SP_LOG_N_SCALARS; c++)
        log->col[c][r] = scalars[c];
    memcpy(log->tensor_grad_norm + r * log->n_tensors, tensor_grad_norm, (size_t)log->n_tensors * sizeof(double));
    memcpy(log->update_ratio + r * log->n_tensors, update_ratio, (size_t)log->n_tensors * sizeof(double));
    memcpy(log->hidden_rms + r * log->n_hidden, hidden_rms, (size_t)log->n_hidden * sizeof(double));
    log->n_rows++;
    return SP_OK;
}

void sp_trainlog_truncate(sp_trainlog *log, int64_t max_step)
{
    while (log->n_rows > 0 && log->col[SP_LOG_STEP][log->n_rows - 1] > (double)max_step)
        log->n_rows--;
}

/* ---- HDF5 ---- */

static hid_t names_type(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, SP_PARAM_NAME_MAX);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    return t;
}

static sp_status write_array(hid_t file, const char *name, hid_t file_type, hid_t mem_type, int rank,
                             const int64_t *dims, const void *data)
{
    hid_t d;
    SP_TRY(sp_h5_create_dataset(file, name, file_type, rank, dims, NULL, NULL, &d));
    sp_status st = dims[0] > 0 ? sp_h5_write(d, mem_type, NULL, NULL, data) : SP_OK;
    H5Dclose(d);
    return st;
}

static sp_status write_contents(hid_t file, const sp_trainlog *log)
{
    SP_TRY(sp_h5_write_header(file, SP_TRAINLOG_FORMAT, SP_TRAINLOG_VERSION_MAJOR, SP_TRAINLOG_VERSION_MINOR,
                              "spanprobe train"));
    SP_TRY(sp_h5_set_str(file, "status", log->status));
    SP_TRY(sp_h5_set_i64(file, "diverged_step", log->diverged_step));
    SP_TRY(sp_h5_set_f64(file, "unigram_entropy", log->unigram_entropy));
    SP_TRY(sp_h5_set_f64(file, "final_val_loss", log->final_val_loss));
    SP_TRY(sp_h5_set_str(file, "options_json", log->options_json ? log->options_json : "{}"));
    int64_t dims[2] = {log->n_rows, 0};
    for (int c = 0; c < SP_LOG_N_SCALARS; c++)
        SP_TRY(write_array(file, sp_log_column_names[c], column_is_integer(c) ? H5T_STD_I64LE : H5T_IEEE_F64LE,
                           H5T_NATIVE_DOUBLE, 1, dims, log->col[c]));
    matrix_ref mats[3];
    for (int i = 0, n = matrices(log, mats); i < n; i++) {
        dims[1] = mats[i].width;
        SP_TRY(write_array(file, mats[i].name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2, dims, mats[i].data));
    }
    hid_t t = names_type();
    int64_t n_names = log->n_tensors;
    sp_status st = write_array(file, "tensor_names", t, t, 1, &n_names, log->tensor_names);
    H5Tclose(t);
    return st;
}

sp_status sp_trainlog_write_into(const sp_trainlog *log, sp_atomic_file *af)
{
    hid_t file;
    SP_TRY(sp_h5_create(af->tmp_path, &file));
    sp_status st = write_contents(file, log);
    sp_status closed = sp_h5_close_written(file);
    return st != SP_OK ? st : closed;
}

sp_status sp_trainlog_write(const sp_trainlog *log, const char *path)
{
    sp_atomic_file af;
    SP_TRY(sp_atomic_begin(path, &af));
    sp_status st = sp_trainlog_write_into(log, &af);
    if (st != SP_OK) {
        sp_atomic_abort(&af);
        return st;
    }
    return sp_atomic_commit(&af);
}

static sp_status read_array(hid_t file, const char *name, H5T_class_t cls, hid_t mem_type, int rank,
                            const int64_t *dims, void *out)
{
    hid_t d;
    SP_TRY(sp_h5_open_dataset(file, name, cls, rank, dims, &d, NULL));
    sp_status st = dims[0] > 0 ? sp_h5_read(d, mem_type, NULL, NULL, out) : SP_OK;
    H5Dclose(d);
    return st;
}

/* The extent of a dataset along dimension `dim` (any rank up to 2 and class as given). */
static sp_status extent(hid_t file, const char *name, H5T_class_t cls, int rank, int dim, int64_t *out)
{
    hid_t d;
    int64_t any[2] = {-1, -1}, found[2];
    SP_TRY(sp_h5_open_dataset(file, name, cls, rank, any, &d, found));
    H5Dclose(d);
    *out = found[dim];
    return SP_OK;
}

static sp_status read_contents(hid_t file, const char *path, sp_trainlog *log)
{
    int minor;
    SP_TRY(sp_h5_check_format(file, SP_TRAINLOG_FORMAT, SP_TRAINLOG_VERSION_MAJOR, &minor));
    int64_t n_rows, n_tensors, n_hidden;
    SP_TRY(extent(file, "step", H5T_INTEGER, 1, 0, &n_rows));
    SP_TRY(extent(file, "tensor_names", H5T_STRING, 1, 0, &n_tensors));
    SP_TRY(extent(file, "hidden_rms", H5T_FLOAT, 2, 1, &n_hidden));
    if (n_tensors > (1 << 20) || n_hidden > (1 << 20))
        return sp_error(SP_ERR_INPUT, "%s: %lld tensors and %lld hidden states: absurd sizes", path,
                        (long long)n_tensors, (long long)n_hidden);
    SP_TRY(sp_trainlog_init(log, (int)n_tensors, NULL, (int)n_hidden));
    hid_t t = names_type();
    sp_status st = read_array(file, "tensor_names", H5T_STRING, t, 1, &n_tensors, log->tensor_names);
    H5Tclose(t);
    SP_TRY(st);
    for (int64_t i = 0; i < n_tensors; i++)
        log->tensor_names[i][SP_PARAM_NAME_MAX - 1] = '\0';
    SP_TRY(reserve(log, n_rows));
    int64_t dims[2] = {n_rows, 0};
    for (int c = 0; c < SP_LOG_N_SCALARS; c++) {
        if (minor < 1 && c >= FIRST_COLUMN_OF_1_1) {
            for (int64_t r = 0; r < n_rows; r++)
                log->col[c][r] = NAN;
            continue;
        }
        SP_TRY(read_array(file, sp_log_column_names[c], column_is_integer(c) ? H5T_INTEGER : H5T_FLOAT,
                          H5T_NATIVE_DOUBLE, 1, dims, log->col[c]));
    }
    matrix_ref mats[3];
    for (int i = 0, n = matrices(log, mats); i < n; i++) {
        dims[1] = mats[i].width;
        SP_TRY(read_array(file, mats[i].name, H5T_FLOAT, H5T_NATIVE_DOUBLE, 2, dims, mats[i].data));
    }
    log->n_rows = n_rows;
    SP_TRY(sp_h5_get_str(file, "status", log->status, sizeof log->status));
    SP_TRY(sp_h5_get_i64(file, "diverged_step", &log->diverged_step));
    SP_TRY(sp_h5_get_f64(file, "unigram_entropy", &log->unigram_entropy));
    SP_TRY(sp_h5_get_f64(file, "final_val_loss", &log->final_val_loss));
    SP_TRY(sp_h5_get_str_alloc(file, "options_json", &log->options_json));
    for (int64_t r = 1; r < n_rows; r++)
        if (!(log->col[SP_LOG_STEP][r] > log->col[SP_LOG_STEP][r - 1]))
            return sp_error(SP_ERR_INPUT, "%s: /step: expected increasing steps, found %.0f after %.0f at row %lld",
                            path, log->col[SP_LOG_STEP][r], log->col[SP_LOG_STEP][r - 1], (long long)r);
    return SP_OK;
}

sp_status sp_trainlog_read(const char *path, sp_trainlog *log)
{
    memset(log, 0, sizeof *log);
    hid_t file;
    SP_TRY(sp_h5_open(path, &file));
    sp_status st = read_contents(file, path, log);
    H5Fclose(file);
    if (st != SP_OK)
        sp_trainlog_free(log);
    return st;
}

/* ---- CSV ---- */

void sp_trainlog_csv_header(const sp_trainlog *log, FILE *f)
{
    for (int c = 0; c < SP_LOG_N_SCALARS; c++)
        fprintf(f, "%s%s", c ? "," : "", sp_log_column_names[c]);
    for (int l = 0; l < log->n_hidden; l++)
        fprintf(f, ",hidden_rms_%d", l);
    fputc('\n', f);
}

static void csv_value(FILE *f, double v, int integer)
{
    if (integer)
        fprintf(f, "%.0f", v);
    else if (isfinite(v))
        fprintf(f, "%.8g", v);
    /* NaN (no value at this row) stays an empty field */
}

void sp_trainlog_csv_row(const sp_trainlog *log, int64_t row, FILE *f)
{
    for (int c = 0; c < SP_LOG_N_SCALARS; c++) {
        if (c)
            fputc(',', f);
        csv_value(f, log->col[c][row], column_is_integer(c));
    }
    for (int l = 0; l < log->n_hidden; l++) {
        fputc(',', f);
        csv_value(f, log->hidden_rms[row * log->n_hidden + l], 0);
    }
    fputc('\n', f);
}

sp_status sp_trainlog_write_csv(const sp_trainlog *log, const char *path)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory formatting the CSV log", path);
    sp_trainlog_csv_header(log, f);
    for (int64_t r = 0; r < log->n_rows; r++)
        sp_trainlog_csv_row(log, r, f);
    fclose(f);
    sp_status st = sp_atomic_write_file(path, text, len);
    free(text);
    return st;
}
