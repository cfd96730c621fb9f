/* io/dump.c: activation dumps, format "spanprobe-activations" 1.0. The layout is in io/dump.h and
 * docs/formats.md; this file holds the writer (atomic, layer by layer) and the validating reader. */
#include "io/dump.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "io/atomic.h"
#include "io/h5.h"

/* Limits, as in core/config.c: far above anything spanprobe runs, low enough that products of two
 * fit comfortably in int64. */
#define DUMP_MAX_LAYERS 4096
#define DUMP_MAX_DIM (1 << 20)
#define DUMP_MAX_VOCAB (1 << 22)
#define DUMP_MAX_ROWS ((int64_t)1 << 32)
/* Elements per chunk: about 1 MiB of float32. */
#define DUMP_CHUNK_ELEMS (1 << 18)

/* The arrays a dump may hold, in file order: hidden/0, hidden/1, ffn_latent, presum/sum_a,
 * presum/sum_z, logits. */
enum { SLOT_HIDDEN0, SLOT_HIDDEN1, SLOT_FFN, SLOT_SUM_A, SLOT_SUM_Z, SLOT_LOGITS, N_SLOTS };
static const char *const slot_paths[N_SLOTS] = {"hidden/0", "hidden/1", "ffn_latent",
                                                "presum/sum_a", "presum/sum_z", "logits"};

typedef struct {
    int present;
    int n_layers; /* leading extent; 0 for logits (rank 2) */
    int width;
    int partial;  /* presum: layers may be missing, recorded in attr "present" */
} slot_desc;

static slot_desc describe(const sp_dump_info *info, int slot)
{
    const int L = info->n_layers;
    switch (slot) {
    case SLOT_HIDDEN0: return (slot_desc){1, L + 1, info->d_model, 0};
    case SLOT_HIDDEN1: return (slot_desc){info->n_streams == 2, L + 1, info->d_model, 0};
    case SLOT_FFN: return (slot_desc){info->has_ffn_latent, L, info->d_ff, 0};
    case SLOT_SUM_A: return (slot_desc){info->has_sum_a, L, info->d_model, 1};
    case SLOT_SUM_Z: return (slot_desc){info->has_sum_z, L, info->d_model, 1};
    default: return (slot_desc){info->has_logits, 0, info->vocab_size, 0};
    }
}

static int slot_of(sp_dump_kind kind, int stream)
{
    switch (kind) {
    case SP_DUMP_HIDDEN: return stream == 0 ? SLOT_HIDDEN0 : stream == 1 ? SLOT_HIDDEN1 : -1;
    case SP_DUMP_FFN_LATENT: return stream == 0 ? SLOT_FFN : -1;
    case SP_DUMP_SUM_A: return stream == 0 ? SLOT_SUM_A : -1;
    case SP_DUMP_SUM_Z: return stream == 0 ? SLOT_SUM_Z : -1;
    case SP_DUMP_LOGITS: return stream == 0 ? SLOT_LOGITS : -1;
    default: return -1;
    }
}

/* Shape of a slot's dataset; returns its rank. */
static int slot_dims(const slot_desc *s, int64_t rows, int64_t dims[3])
{
    if (s->n_layers == 0) {
        dims[0] = rows;
        dims[1] = s->width;
        return 2;
    }
    dims[0] = s->n_layers;
    dims[1] = rows;
    dims[2] = s->width;
    return 3;
}

/* The /config values in range, and every array's element count representable. */
static sp_status check_info(const sp_dump_info *info, const char *where, int64_t *rows)
{
    struct {
        const char *name;
        int value, min, max;
    } fields[] = {{"n_layers", info->n_layers, 1, DUMP_MAX_LAYERS},  {"d_model", info->d_model, 1, DUMP_MAX_DIM},
                  {"n_streams", info->n_streams, 1, 2},               {"d_ff", info->d_ff, info->has_ffn_latent, DUMP_MAX_DIM},
                  {"vocab_size", info->vocab_size, 1, DUMP_MAX_VOCAB}, {"batch", info->batch, 1, DUMP_MAX_DIM},
                  {"seq_len", info->seq_len, 1, DUMP_MAX_DIM}};
    for (size_t i = 0; i < SP_ARRAY_LEN(fields); i++)
        if (fields[i].value < fields[i].min || fields[i].value > fields[i].max)
            return sp_error(SP_ERR_INPUT, "%s/%s: %d is out of range (expected %d..%d)", where, fields[i].name,
                            fields[i].value, fields[i].min, fields[i].max);
    *rows = (int64_t)info->batch * info->seq_len;
    if (*rows > DUMP_MAX_ROWS)
        return sp_error(SP_ERR_INPUT, "%s: batch x seq_len = %lld rows is absurd (limit 2^32)", where, (long long)*rows);
    for (int slot = 0; slot < N_SLOTS; slot++) {
        slot_desc s = describe(info, slot);
        size_t numel;
        char what[256];
        snprintf(what, sizeof what, "%s: /%s", where, slot_paths[slot]);
        if (s.present)
            SP_TRY(sp_size_mul3((size_t)(s.n_layers ? s.n_layers : 1), (size_t)*rows, (size_t)s.width, &numel, what));
    }
    return SP_OK;
}

/* ---- writer ---- */

struct sp_dump_writer {
    sp_atomic_file af;
    hid_t file;
    sp_dump_info info;
    int64_t rows;
    hid_t dsets[N_SLOTS];
    int64_t *rows_written[N_SLOTS]; /* per layer (one entry for logits) */
};

static void close_writer(sp_dump_writer *w)
{
    for (int s = 0; s < N_SLOTS; s++) {
        if (w->dsets[s] >= 0)
            H5Dclose(w->dsets[s]);
        w->dsets[s] = -1;
        free(w->rows_written[s]);
        w->rows_written[s] = NULL;
    }
    sp_h5_discard(w->file);
    w->file = -1;
}

void sp_dump_abort(sp_dump_writer *w)
{
    if (!w)
        return;
    close_writer(w);
    sp_atomic_abort(&w->af);
    free(w);
}

static sp_status write_config_group(sp_dump_writer *w)
{
    const sp_dump_info *in = &w->info;
    struct {
        const char *name;
        int value;
    } fields[] = {{"n_layers", in->n_layers}, {"d_model", in->d_model}, {"n_streams", in->n_streams},
                  {"d_ff", in->d_ff},         {"vocab_size", in->vocab_size}, {"batch", in->batch},
                  {"seq_len", in->seq_len}};
    hid_t g;
    SP_TRY(sp_h5_create_group(w->file, "config", &g));
    sp_status st = SP_OK;
    for (size_t i = 0; i < SP_ARRAY_LEN(fields) && st == SP_OK; i++)
        st = sp_h5_set_i64(g, fields[i].name, fields[i].value);
    if (st == SP_OK && in->variant[0])
        st = sp_h5_set_str(g, "variant", in->variant);
    H5Gclose(g);
    return st;
}

static sp_status write_tokens(sp_dump_writer *w, const int32_t *tokens)
{
    for (int64_t i = 0; i < w->rows; i++)
        if (tokens[i] < 0 || tokens[i] >= w->info.vocab_size)
            return sp_error(SP_ERR_INPUT, "%s: /tokens: token %lld is %d (expected 0..%d)", w->af.path, (long long)i,
                            tokens[i], w->info.vocab_size - 1);
    int64_t dims[2] = {w->info.batch, w->info.seq_len};
    hid_t d;
    SP_TRY(sp_h5_create_dataset(w->file, "tokens", H5T_STD_I32LE, 2, dims, NULL, NULL, &d));
    sp_status st = sp_h5_write(d, H5T_NATIVE_INT32, NULL, NULL, tokens);
    H5Dclose(d);
    return st;
}

static sp_status create_arrays(sp_dump_writer *w)
{
    hid_t type = sp_h5_float_type(w->info.float16 ? SP_H5_F16 : SP_H5_F32);
    const float unwritten = NAN; /* rows never written read as NaN, which readers reject */
    sp_status st = SP_OK;
    for (int slot = 0; slot < N_SLOTS && st == SP_OK; slot++) {
        slot_desc s = describe(&w->info, slot);
        if (!s.present)
            continue;
        int64_t dims[3], chunk[3];
        int rank = slot_dims(&s, w->rows, dims);
        int64_t chunk_rows = DUMP_CHUNK_ELEMS / s.width;
        chunk_rows = chunk_rows < 1 ? 1 : chunk_rows > w->rows ? w->rows : chunk_rows;
        if (rank == 3)
            chunk[0] = 1; /* one layer per chunk: a reader streams layer by layer */
        chunk[rank - 2] = chunk_rows;
        chunk[rank - 1] = s.width;
        st = sp_h5_create_dataset(w->file, slot_paths[slot], type, rank, dims, chunk, &unwritten, &w->dsets[slot]);
        w->rows_written[slot] = calloc((size_t)(s.n_layers ? s.n_layers : 1), sizeof(int64_t));
        if (st == SP_OK && !w->rows_written[slot])
            st = sp_error(SP_ERR_NOMEM, "%s: out of memory", w->af.path);
    }
    H5Tclose(type);
    return st;
}

sp_status sp_dump_create(const char *path, const sp_dump_info *info, const int32_t *tokens, sp_dump_writer **out)
{
    *out = NULL;
    int64_t rows = 0;
    SP_TRY(check_info(info, path, &rows));
    sp_dump_writer *w = sp_calloc(1, sizeof *w, "dump writer");
    if (!w)
        return SP_ERR_NOMEM;
    w->info = *info;
    w->rows = rows;
    w->file = -1;
    for (int s = 0; s < N_SLOTS; s++)
        w->dsets[s] = -1;
    sp_status st = sp_atomic_begin(path, &w->af);
    if (st != SP_OK) {
        free(w);
        return st;
    }
    st = sp_h5_create(w->af.tmp_path, &w->file);
    if (st == SP_OK)
        st = sp_h5_write_header(w->file, SP_DUMP_FORMAT, SP_DUMP_VERSION_MAJOR, SP_DUMP_VERSION_MINOR, info->source);
    if (st == SP_OK)
        st = write_config_group(w);
    if (st == SP_OK)
        st = write_tokens(w, tokens);
    if (st == SP_OK)
        st = create_arrays(w);
    if (st != SP_OK) {
        sp_dump_abort(w);
        return st;
    }
    *out = w;
    return SP_OK;
}

/* Checks kind/stream/layer/rows against a dump's shape; returns the slot. */
static sp_status check_request(const char *path, const sp_dump_info *info, int64_t rows, sp_dump_kind kind,
                               int stream, int layer, int64_t row0, int64_t n_rows, int *slot_out)
{
    int slot = slot_of(kind, stream);
    slot_desc s = describe(info, slot < 0 ? SLOT_HIDDEN0 : slot);
    if (slot < 0 || !s.present)
        return sp_error(SP_ERR_USAGE, "%s: the dump has no array of kind %d, stream %d", path, (int)kind, stream);
    if (s.n_layers && (layer < 0 || layer >= s.n_layers))
        return sp_error(SP_ERR_USAGE, "%s: /%s: layer %d is out of range (expected 0..%d)", path, slot_paths[slot],
                        layer, s.n_layers - 1);
    if (row0 < 0 || n_rows < 1 || row0 > rows - n_rows)
        return sp_error(SP_ERR_USAGE, "%s: /%s: rows [%lld, %lld) are out of range (expected within [0, %lld))", path,
                        slot_paths[slot], (long long)row0, (long long)(row0 + n_rows), (long long)rows);
    *slot_out = slot;
    return SP_OK;
}

static void slab(const slot_desc *s, int layer, int64_t row0, int64_t n_rows, int64_t start[3], int64_t count[3])
{
    int64_t lead = s->n_layers ? 1 : 0;
    start[0] = layer, count[0] = 1;
    start[lead] = row0, count[lead] = n_rows;
    start[lead + 1] = 0, count[lead + 1] = s->width;
}

sp_status sp_dump_write(sp_dump_writer *w, sp_dump_kind kind, int stream, int layer, int64_t row0, int64_t n_rows,
                        const sp_real *data)
{
    int slot;
    SP_TRY(check_request(w->af.path, &w->info, w->rows, kind, stream, layer, row0, n_rows, &slot));
    slot_desc s = describe(&w->info, slot);
    int64_t start[3], count[3];
    slab(&s, layer, row0, n_rows, start, count);
    SP_TRY(sp_h5_write(w->dsets[slot], sp_h5_real_type(), start, count, data));
    w->rows_written[slot][s.n_layers ? layer : 0] += n_rows;
    return SP_OK;
}

/* Every declared layer fully written (presum arrays: each layer all or nothing, recorded). */
static sp_status finish_arrays(sp_dump_writer *w)
{
    for (int slot = 0; slot < N_SLOTS; slot++) {
        slot_desc s = describe(&w->info, slot);
        if (!s.present)
            continue;
        int n = s.n_layers ? s.n_layers : 1;
        int32_t *present = calloc((size_t)n, sizeof *present);
        if (!present)
            return sp_error(SP_ERR_NOMEM, "%s: out of memory", w->af.path);
        sp_status st = SP_OK;
        for (int l = 0; l < n && st == SP_OK; l++) {
            int64_t done = w->rows_written[slot][l];
            present[l] = done >= w->rows;
            if ((done > 0 || !s.partial) && done != w->rows)
                st = sp_error(SP_ERR_USAGE, "%s: /%s: layer %d has %lld of %lld rows written (incomplete dump)",
                              w->af.path, slot_paths[slot], l, (long long)done, (long long)w->rows);
        }
        if (st == SP_OK && s.partial)
            st = sp_h5_set_i32s(w->dsets[slot], "present", present, (size_t)n);
        free(present);
        SP_TRY(st);
    }
    return SP_OK;
}

sp_status sp_dump_commit(sp_dump_writer *w)
{
    sp_status st = finish_arrays(w);
    for (int s = 0; s < N_SLOTS; s++) {
        if (w->dsets[s] >= 0)
            H5Dclose(w->dsets[s]);
        w->dsets[s] = -1;
    }
    if (st == SP_OK) {
        st = sp_h5_close_written(w->file);
        w->file = -1;
    }
    if (st != SP_OK) {
        sp_dump_abort(w);
        return st;
    }
    close_writer(w);
    st = sp_atomic_commit(&w->af);
    free(w);
    return st;
}

/* ---- reader ---- */

struct sp_dump {
    char *path;
    hid_t file;
    sp_dump_info info;
    int64_t rows;
    hid_t dsets[N_SLOTS];
    int32_t *present[N_SLOTS]; /* presum arrays: layers present; NULL: all */
};

void sp_dump_close(sp_dump *d)
{
    if (!d)
        return;
    for (int s = 0; s < N_SLOTS; s++) {
        if (d->dsets[s] >= 0)
            H5Dclose(d->dsets[s]);
        free(d->present[s]);
    }
    if (d->file >= 0)
        H5Fclose(d->file);
    free(d->path);
    free(d);
}

static sp_status read_config_group(sp_dump *d, int minor)
{
    hid_t g;
    SP_TRY(sp_h5_open_group(d->file, "config", &g));
    sp_dump_info *in = &d->info;
    struct {
        const char *name;
        int *value;
    } fields[] = {{"n_layers", &in->n_layers}, {"d_model", &in->d_model}, {"n_streams", &in->n_streams},
                  {"d_ff", &in->d_ff},         {"vocab_size", &in->vocab_size}, {"batch", &in->batch},
                  {"seq_len", &in->seq_len}};
    char where[768];
    sp_status st = SP_OK;
    for (size_t i = 0; i < SP_ARRAY_LEN(fields) && st == SP_OK; i++) {
        int64_t v = 0;
        st = sp_h5_get_i64(g, fields[i].name, &v);
        if (st == SP_OK && (v < 0 || v > INT32_MAX)) {
            sp_h5_where(g, fields[i].name, where, sizeof where);
            st = sp_error(SP_ERR_INPUT, "%s: %lld is out of range (expected 0..2^31-1)", where, (long long)v);
        }
        *fields[i].value = (int)v;
    }
    if (st == SP_OK && sp_h5_has_attr(g, "variant"))
        st = sp_h5_get_str(g, "variant", in->variant, sizeof in->variant);
    if (st == SP_OK && in->variant[0] && sp_enum_lookup(sp_variant_names, in->variant) < 0) {
        sp_h5_where(g, "variant", where, sizeof where);
        st = sp_error(SP_ERR_INPUT, "%s: \"%s\" is not a variant spanprobe knows (leave it out for a model of "
                                    "another framework)", where, in->variant);
    }
    /* unknown attributes are typos, as in a checkpoint's /config; a newer minor version may add some */
    static const char *const known[] = {"n_layers", "d_model", "n_streams", "d_ff", "vocab_size",
                                        "batch",    "seq_len", "variant",   NULL};
    char other[256];
    if (st == SP_OK && minor <= SP_DUMP_VERSION_MINOR && sp_h5_other_attr(g, known, other, sizeof other)) {
        sp_h5_where(g, other, where, sizeof where);
        st = sp_error(SP_ERR_INPUT, "%s: unknown field (not one spanprobe %s knows: a typo, or a newer file "
                                    "mislabeled as this version?)", where, SP_VERSION);
    }
    H5Gclose(g);
    return st;
}

/* Opens every array the file has, checking shape and float type; fills the has_* flags. */
static sp_status open_arrays(sp_dump *d)
{
    sp_dump_info *in = &d->info;
    in->has_ffn_latent = sp_h5_exists(d->file, slot_paths[SLOT_FFN]);
    in->has_sum_a = sp_h5_exists(d->file, slot_paths[SLOT_SUM_A]);
    in->has_sum_z = sp_h5_exists(d->file, slot_paths[SLOT_SUM_Z]);
    in->has_logits = sp_h5_exists(d->file, slot_paths[SLOT_LOGITS]);
    char where[768];
    SP_TRY(check_info(in, d->path, &d->rows));
    for (int slot = 0; slot < N_SLOTS; slot++) {
        slot_desc s = describe(in, slot);
        if (!s.present)
            continue;
        int64_t dims[3];
        int rank = slot_dims(&s, d->rows, dims);
        SP_TRY(sp_h5_open_dataset(d->file, slot_paths[slot], H5T_FLOAT, rank, dims, &d->dsets[slot], NULL));
        hid_t type = H5Dget_type(d->dsets[slot]);
        in->float16 |= H5Tget_size(type) == 2;
        H5Tclose(type);
        if (s.partial && sp_h5_has_attr(d->dsets[slot], "present")) {
            d->present[slot] = sp_calloc((size_t)s.n_layers, sizeof(int32_t), "dump present flags");
            if (!d->present[slot])
                return SP_ERR_NOMEM;
            SP_TRY(sp_h5_get_i32s(d->dsets[slot], "present", d->present[slot], (size_t)s.n_layers));
        }
    }
    if (in->n_streams == 1 && sp_h5_exists(d->file, slot_paths[SLOT_HIDDEN1])) {
        sp_h5_where(d->file, slot_paths[SLOT_HIDDEN1], where, sizeof where);
        return sp_error(SP_ERR_INPUT, "%s: unexpected dataset (/config/n_streams is 1)", where);
    }
    int64_t token_dims[2] = {in->batch, in->seq_len};
    hid_t tokens;
    SP_TRY(sp_h5_open_dataset(d->file, "tokens", H5T_INTEGER, 2, token_dims, &tokens, NULL));
    H5Dclose(tokens);
    return SP_OK;
}

static sp_status check_tokens(sp_dump *d)
{
    int32_t *tokens = sp_malloc((size_t)d->rows * sizeof *tokens, "dump tokens");
    if (!tokens)
        return SP_ERR_NOMEM;
    sp_status st = sp_dump_read_tokens(d, tokens);
    free(tokens);
    return st;
}

sp_status sp_dump_open(const char *path, sp_dump **out)
{
    *out = NULL;
    sp_dump *d = sp_calloc(1, sizeof *d, "dump reader");
    if (!d)
        return SP_ERR_NOMEM;
    d->file = -1;
    for (int s = 0; s < N_SLOTS; s++)
        d->dsets[s] = -1;
    d->path = strdup(path);
    sp_status st = d->path ? sp_h5_open(path, &d->file) : sp_error(SP_ERR_NOMEM, "out of memory");
    int minor = 0;
    if (st == SP_OK)
        st = sp_h5_check_format(d->file, SP_DUMP_FORMAT, SP_DUMP_VERSION_MAJOR, &minor);
    if (st == SP_OK && sp_h5_has_attr(d->file, "source"))
        st = sp_h5_get_str(d->file, "source", d->info.source, sizeof d->info.source);
    if (st == SP_OK)
        st = read_config_group(d, minor);
    if (st == SP_OK)
        st = open_arrays(d);
    if (st == SP_OK) /* every reader of the dump agrees on its tokens, inspect included */
        st = check_tokens(d);
    if (st != SP_OK) {
        sp_dump_close(d);
        return st;
    }
    *out = d;
    return SP_OK;
}

const sp_dump_info *sp_dump_get_info(const sp_dump *d) { return &d->info; }
int64_t sp_dump_rows(const sp_dump *d) { return d->rows; }

int sp_dump_width(const sp_dump *d, sp_dump_kind kind)
{
    int slot = slot_of(kind, 0);
    return slot < 0 ? 0 : describe(&d->info, slot).width;
}

int sp_dump_has_layer(const sp_dump *d, sp_dump_kind kind, int stream, int layer)
{
    int slot = slot_of(kind, stream);
    if (slot < 0)
        return 0;
    slot_desc s = describe(&d->info, slot);
    if (!s.present || (s.n_layers && (layer < 0 || layer >= s.n_layers)))
        return 0;
    return !d->present[slot] || d->present[slot][layer];
}

sp_status sp_dump_read_tokens(sp_dump *d, int32_t *tokens)
{
    int64_t token_dims[2] = {d->info.batch, d->info.seq_len};
    hid_t ds;
    SP_TRY(sp_h5_open_dataset(d->file, "tokens", H5T_INTEGER, 2, token_dims, &ds, NULL));
    sp_status st = sp_h5_read(ds, H5T_NATIVE_INT32, NULL, NULL, tokens);
    H5Dclose(ds);
    for (int64_t i = 0; i < d->rows && st == SP_OK; i++)
        if (tokens[i] < 0 || tokens[i] >= d->info.vocab_size)
            st = sp_error(SP_ERR_INPUT, "%s: /tokens: token %lld is %d (expected 0..%d)", d->path, (long long)i,
                          tokens[i], d->info.vocab_size - 1);
    return st;
}

sp_status sp_dump_read(sp_dump *d, sp_dump_kind kind, int stream, int layer, int64_t row0, int64_t n_rows,
                       sp_real *out)
{
    int slot;
    SP_TRY(check_request(d->path, &d->info, d->rows, kind, stream, layer, row0, n_rows, &slot));
    slot_desc s = describe(&d->info, slot);
    if (!sp_dump_has_layer(d, kind, stream, layer))
        return sp_error(SP_ERR_USAGE, "%s: /%s: layer %d has no values (its block has no such sum)", d->path,
                        slot_paths[slot], layer);
    int64_t start[3], count[3];
    slab(&s, layer, row0, n_rows, start, count);
    SP_TRY(sp_h5_read(d->dsets[slot], sp_h5_real_type(), start, count, out));
    size_t n = (size_t)n_rows * (size_t)s.width, bad = sp_h5_count_nonfinite(out, n);
    if (bad)
        return sp_error(SP_ERR_NUMERIC, "%s: /%s: layer %d, rows [%lld, %lld): %zu of %zu values are NaN or Inf",
                        d->path, slot_paths[slot], layer, (long long)row0, (long long)(row0 + n_rows), bad, n);
    return SP_OK;
}
