/* io/checkpoint.c: spanprobe checkpoints, format "spanprobe-checkpoint" 1.1 (docs/formats.md).
 *
 *   /              attrs format, format_version "1.1", tool_version, created, source (strings;
 *                  the last three optional for readers)
 *   /config        one attribute per field of core/config.h (sp_config_fields): integers as int64,
 *                  reals as float64, booleans as int64 0/1 (strings "true"/"false" and h5py bools
 *                  are read too), enums as their name ("span", "rmsnorm"). A missing field takes
 *                  its default; an unknown one is an error unless the file's minor version is newer.
 *   /params/<name> one float32 dataset per tensor of sp_param_layout (model/params.h), [out, in]
 *                  for matrices, [dim] for vectors; attrs role (string), layer (int64, -1 outside
 *                  the blocks). Any float width is read; NaN/Inf is rejected by sp_ckpt_load.
 *   /tokenizer     optional; attrs kind ("bytes" | "vocab" | "hf-json"), bos_id, eos_id, max_piece_len
 *                  (int64); for "vocab": pieces uint8 [total bytes] (the pieces concatenated), offsets
 *                  int64 [V+1] (piece i is pieces[offsets[i] .. offsets[i+1])), scores float32 [V];
 *                  for "hf-json" (since 1.1): json uint8 [n] (tokenizer.json's bytes), config_json
 *                  uint8 [m] (optional: tokenizer_config.json's), loaded again by the reader
 *   /optim/m/<name>, /optim/v/<name>  optional AdamW moments, float32, the shapes of /params
 *   /train         optional; attrs step, tokens_seen, data_position, diverged_step (int64),
 *                  rng_state (uint64 [4]), lr (float64), status ("running" | "done" | "diverged"),
 *                  options_json (string, optional)
 * Sizes are validated before any allocation: the config must pass sp_config_validate and the
 * model may hold at most SP_CKPT_MAX_WEIGHTS weights.
 */
#include "io/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5.h"
#include "io/hf_tokenizer.h"

/* 2^32 weights (16 GiB as float32): far above what spanprobe trains or probes, low enough that a
 * corrupt config cannot ask for an impossible allocation. */
#define SP_CKPT_MAX_WEIGHTS ((size_t)1 << 32)
#define SP_TOK_MAX_PIECE_LEN 4096
/* The largest tokenizer.json / tokenizer_config.json copy read back (real ones reach tens of MB). */
#define SP_CKPT_MAX_TOKENIZER_TEXT ((int64_t)1 << 30)

void sp_ckpt_meta_init(sp_ckpt_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    sp_config_defaults(&meta->cfg);
    sp_tokenizer_init_bytes(&meta->tokenizer);
    meta->train.diverged_step = -1;
}

void sp_ckpt_meta_free(sp_ckpt_meta *meta)
{
    if (meta->has_tokenizer)
        sp_tokenizer_free(&meta->tokenizer);
    free(meta->train.options_json);
    meta->train.options_json = NULL;
    meta->has_tokenizer = 0;
}

static void param_dims(const sp_param_spec *spec, int64_t dims[2])
{
    dims[0] = spec->shape[0];
    dims[1] = spec->shape[1];
}

/* ---- writer ---- */

static sp_status write_config(hid_t file, const sp_config *cfg)
{
    hid_t g;
    SP_TRY(sp_h5_create_group(file, "config", &g));
    sp_status st = sp_h5_write_fields(g, &sp_config_table, cfg);
    H5Gclose(g);
    return st;
}

/* Writes one float32 tensor per parameter under group (host copies through `fetch`). */
typedef void (*fetch_fn)(const sp_model *m, int i, sp_real *host, const void *ctx);

static void fetch_param(const sp_model *m, int i, sp_real *host, const void *ctx)
{
    (void)ctx;
    sp_model_get_param(m, i, host);
}

static void fetch_buffer(const sp_model *m, int i, sp_real *host, const void *ctx)
{
    sp_real *const *buffers = ctx;
    sp_model_backend(m)->download(host, buffers[i], sp_param_numel(sp_model_param_spec(m, i)) * sizeof(sp_real));
}

static size_t max_param_numel(const sp_model *m)
{
    size_t most = 0;
    for (int i = 0; i < sp_model_n_params(m); i++) {
        size_t n = sp_param_numel(sp_model_param_spec(m, i));
        most = n > most ? n : most;
    }
    return most;
}

static sp_status write_tensors(hid_t file, const char *group, const sp_model *m, fetch_fn fetch, const void *ctx,
                               int with_attrs)
{
    hid_t g;
    SP_TRY(sp_h5_create_group(file, group, &g));
    sp_real *host = sp_malloc(max_param_numel(m) * sizeof *host, "checkpoint tensor");
    sp_status st = host ? SP_OK : SP_ERR_NOMEM;
    hid_t f32 = sp_h5_float_type(SP_H5_F32);
    for (int i = 0; i < sp_model_n_params(m) && st == SP_OK; i++) {
        const sp_param_spec *spec = sp_model_param_spec(m, i);
        int64_t dims[2];
        param_dims(spec, dims);
        hid_t d;
        fetch(m, i, host, ctx);
        st = sp_h5_create_dataset(g, spec->name, f32, spec->rank, dims, NULL, NULL, &d);
        if (st != SP_OK)
            break;
        st = sp_h5_write(d, sp_h5_real_type(), NULL, NULL, host);
        if (st == SP_OK && with_attrs)
            st = sp_h5_set_str(d, "role", sp_role_names[spec->role]);
        if (st == SP_OK && with_attrs)
            st = sp_h5_set_i64(d, "layer", spec->layer);
        H5Dclose(d);
    }
    H5Tclose(f32);
    free(host);
    H5Gclose(g);
    return st;
}

/* The /tokenizer kind attribute of each sp_tokenizer_kind. */
static const char *const tokenizer_kinds[] = {"bytes", "vocab", "hf-json"};

/* One 1-D dataset of /tokenizer. */
typedef struct {
    const char *name;
    hid_t mem_type, file_type;
    int64_t len;
    const void *data;
} tokenizer_array;

static sp_status write_tokenizer(hid_t file, const sp_tokenizer *t)
{
    hid_t g;
    SP_TRY(sp_h5_create_group(file, "tokenizer", &g));
    sp_status st = sp_h5_set_str(g, "kind", tokenizer_kinds[t->kind]);
    if (st == SP_OK)
        st = sp_h5_set_i64(g, "bos_id", t->bos_id);
    if (st == SP_OK)
        st = sp_h5_set_i64(g, "eos_id", t->eos_id);
    if (st == SP_OK)
        st = sp_h5_set_i64(g, "max_piece_len", t->max_piece_len);
    tokenizer_array arrays[3];
    int n = 0;
    if (t->kind == SP_TOK_VOCAB) {
        int64_t v = t->vocab_size;
        arrays[n++] = (tokenizer_array){"pieces", H5T_NATIVE_UINT8, H5T_STD_U8LE, t->offsets[v], t->bytes};
        arrays[n++] = (tokenizer_array){"offsets", H5T_NATIVE_INT64, H5T_STD_I64LE, v + 1, t->offsets};
        arrays[n++] = (tokenizer_array){"scores", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, v, t->scores};
    } else if (t->kind == SP_TOK_HF) { /* the source texts: loading them again rebuilds the tokenizer */
        const char *json, *config;
        size_t json_len, config_len;
        sp_tokenizer_hf_sources(t, &json, &json_len, &config, &config_len);
        arrays[n++] = (tokenizer_array){"json", H5T_NATIVE_UINT8, H5T_STD_U8LE, (int64_t)json_len, json};
        if (config)
            arrays[n++] = (tokenizer_array){"config_json", H5T_NATIVE_UINT8, H5T_STD_U8LE, (int64_t)config_len,
                                            config};
    }
    for (int i = 0; i < n && st == SP_OK; i++) {
        hid_t d;
        int64_t dims[1] = {arrays[i].len};
        st = sp_h5_create_dataset(g, arrays[i].name, arrays[i].file_type, 1, dims, NULL, NULL, &d);
        if (st != SP_OK)
            break;
        if (arrays[i].len > 0)
            st = sp_h5_write(d, arrays[i].mem_type, NULL, NULL, arrays[i].data);
        H5Dclose(d);
    }
    H5Gclose(g);
    return st;
}

static sp_status write_train(hid_t file, const sp_train_state *tr)
{
    hid_t g;
    SP_TRY(sp_h5_create_group(file, "train", &g));
    sp_status st = sp_h5_set_i64(g, "step", tr->step);
    if (st == SP_OK)
        st = sp_h5_set_i64(g, "tokens_seen", tr->tokens_seen);
    if (st == SP_OK)
        st = sp_h5_set_u64s(g, "rng_state", tr->rng_state, 4);
    if (st == SP_OK)
        st = sp_h5_set_i64(g, "data_position", tr->data_position);
    if (st == SP_OK)
        st = sp_h5_set_f64(g, "lr", tr->lr);
    if (st == SP_OK)
        st = sp_h5_set_str(g, "status", tr->status);
    if (st == SP_OK)
        st = sp_h5_set_i64(g, "diverged_step", tr->diverged_step);
    if (st == SP_OK && tr->options_json)
        st = sp_h5_set_str(g, "options_json", tr->options_json);
    H5Gclose(g);
    return st;
}

static sp_status write_contents(hid_t file, const sp_model *m, const sp_ckpt_meta *meta, sp_real *const *adam_m,
                                sp_real *const *adam_v)
{
    SP_TRY(sp_h5_write_header(file, SP_CKPT_FORMAT, SP_CKPT_VERSION_MAJOR, SP_CKPT_VERSION_MINOR, meta->source));
    SP_TRY(write_config(file, sp_model_config(m)));
    SP_TRY(write_tensors(file, "params", m, fetch_param, NULL, 1));
    if (meta->has_tokenizer)
        SP_TRY(write_tokenizer(file, &meta->tokenizer));
    if (adam_m && adam_v) {
        SP_TRY(write_tensors(file, "optim/m", m, fetch_buffer, adam_m, 0));
        SP_TRY(write_tensors(file, "optim/v", m, fetch_buffer, adam_v, 0));
    }
    if (meta->train.present)
        SP_TRY(write_train(file, &meta->train));
    return SP_OK;
}

sp_status sp_ckpt_write_into(sp_atomic_file *af, const sp_model *m, const sp_ckpt_meta *meta, sp_real *const *adam_m,
                             sp_real *const *adam_v)
{
    hid_t file;
    SP_TRY(sp_h5_create(af->tmp_path, &file));
    sp_status st = write_contents(file, m, meta, adam_m, adam_v);
    if (st == SP_OK)
        return sp_h5_close_written(file);
    sp_h5_discard(file);
    return st;
}

sp_status sp_ckpt_write(const char *path, const sp_model *m, const sp_ckpt_meta *meta, sp_real *const *adam_m,
                        sp_real *const *adam_v)
{
    sp_atomic_file af;
    SP_TRY(sp_atomic_begin(path, &af));
    sp_status st = sp_ckpt_write_into(&af, m, meta, adam_m, adam_v);
    if (st != SP_OK) {
        sp_atomic_abort(&af);
        return st;
    }
    return sp_atomic_commit(&af);
}

/* ---- reader ---- */

typedef struct {
    const char *path;
    hid_t file;
    int minor; /* the file's minor version */
} reader;

static sp_status read_config(const reader *rd, sp_config *cfg)
{
    hid_t g;
    SP_TRY(sp_h5_open_group(rd->file, "config", &g));
    sp_config_defaults(cfg);
    /* a newer minor version may add fields this reader does not know */
    sp_status st = sp_h5_read_fields(g, &sp_config_table, cfg, rd->minor > SP_CKPT_VERSION_MINOR);
    if (st == SP_OK) {
        char where[768];
        sp_h5_where(g, NULL, where, sizeof where);
        st = sp_config_resolve(cfg);
        if (st == SP_OK)
            st = sp_config_validate(cfg, where);
    }
    H5Gclose(g);
    return st;
}

/* Checks that the layout's total size is sane before anything is allocated for it. */
static sp_status check_model_size(const reader *rd, const sp_param_spec *specs, int n)
{
    size_t total = 0, numel;
    char what[768];
    for (int i = 0; i < n; i++) {
        snprintf(what, sizeof what, "%s: /params/%s", rd->path, specs[i].name);
        SP_TRY(sp_size_mul((size_t)specs[i].shape[0], (size_t)specs[i].shape[1], &numel, what));
        if (numel > SP_CKPT_MAX_WEIGHTS - total)
            return sp_error(SP_ERR_INPUT, "%s: /config: the model would hold more than 2^32 weights (at %s, %lld x %lld); "
                                          "sizes are absurd",
                            rd->path, specs[i].name, (long long)specs[i].shape[0], (long long)specs[i].shape[1]);
        total += numel;
    }
    return SP_OK;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef struct {
    const char **sorted; /* the expected names */
    int n;
    char extra[256];
} extra_search;

static herr_t find_extra(hid_t obj, const char *name, const H5O_info_t *info, void *data)
{
    (void)obj;
    extra_search *s = data;
    if (info->type != H5O_TYPE_DATASET || bsearch(&name, s->sorted, (size_t)s->n, sizeof *s->sorted, compare_names))
        return 0;
    snprintf(s->extra, sizeof s->extra, "%s", name);
    return 1;
}

/* Every tensor of the layout present under group with its exact shape and a float type; no other
 * dataset (unless the file's minor version is newer than this reader). */
static sp_status check_tensors(const reader *rd, const char *group, const sp_param_spec *specs, int n)
{
    hid_t g;
    SP_TRY(sp_h5_open_group(rd->file, group, &g));
    sp_status st = SP_OK;
    for (int i = 0; i < n && st == SP_OK; i++) {
        int64_t dims[2];
        hid_t d;
        param_dims(&specs[i], dims);
        st = sp_h5_open_dataset(g, specs[i].name, H5T_FLOAT, specs[i].rank, dims, &d, NULL);
        if (st == SP_OK)
            H5Dclose(d);
    }
    if (st == SP_OK && rd->minor <= SP_CKPT_VERSION_MINOR) {
        extra_search s = {.sorted = malloc((size_t)n * sizeof(char *)), .n = n};
        if (!s.sorted) {
            H5Gclose(g);
            return sp_error(SP_ERR_NOMEM, "%s: out of memory", rd->path);
        }
        for (int i = 0; i < n; i++)
            s.sorted[i] = specs[i].name;
        qsort(s.sorted, (size_t)n, sizeof *s.sorted, compare_names);
        if (H5Ovisit2(g, H5_INDEX_NAME, H5_ITER_NATIVE, find_extra, &s, H5O_INFO_BASIC) > 0) {
            char where[768];
            sp_h5_where(g, s.extra, where, sizeof where);
            st = sp_error(SP_ERR_INPUT, "%s: unexpected dataset (not a parameter of this config)", where);
        }
        free(s.sorted);
    }
    H5Gclose(g);
    return st;
}

static sp_status read_tokenizer_arrays(hid_t g, const char *where, sp_tokenizer *t)
{
    int64_t v = t->vocab_size, offsets_dims[1] = {v + 1}, scores_dims[1] = {v}, n_bytes = 0;
    hid_t d_pieces = -1, d_offsets, d_scores;
    SP_TRY(sp_h5_open_dataset(g, "offsets", H5T_INTEGER, 1, offsets_dims, &d_offsets, NULL));
    sp_status st = sp_h5_open_dataset(g, "scores", H5T_FLOAT, 1, scores_dims, &d_scores, NULL);
    if (st != SP_OK) {
        H5Dclose(d_offsets);
        return st;
    }
    st = sp_h5_open_dataset(g, "pieces", H5T_INTEGER, 1, NULL, &d_pieces, &n_bytes);
    if (st == SP_OK && n_bytes > v * (int64_t)t->max_piece_len)
        st = sp_error(SP_ERR_INPUT, "%s/pieces: %lld bytes exceed vocab_size x max_piece_len = %lld", where,
                      (long long)n_bytes, (long long)(v * t->max_piece_len));
    if (st == SP_OK) {
        t->offsets = sp_malloc((size_t)(v + 1) * sizeof *t->offsets, "tokenizer offsets");
        t->scores = sp_malloc((size_t)v * sizeof *t->scores, "tokenizer scores");
        t->bytes = sp_malloc((size_t)n_bytes, "tokenizer pieces");
        if (!t->offsets || !t->scores || !t->bytes)
            st = SP_ERR_NOMEM;
    }
    if (st == SP_OK)
        st = sp_h5_read(d_offsets, H5T_NATIVE_INT64, NULL, NULL, t->offsets);
    if (st == SP_OK)
        st = sp_h5_read(d_scores, H5T_NATIVE_FLOAT, NULL, NULL, t->scores);
    if (st == SP_OK && n_bytes > 0)
        st = sp_h5_read(d_pieces, H5T_NATIVE_UINT8, NULL, NULL, t->bytes);
    for (int64_t i = 0; i < v && st == SP_OK; i++) {
        int64_t len = t->offsets[i + 1] - t->offsets[i];
        if (t->offsets[i] < 0 || len < 0 || len > t->max_piece_len || t->offsets[i + 1] > n_bytes)
            st = sp_error(SP_ERR_INPUT, "%s/offsets: piece %lld spans [%lld, %lld) (expected increasing offsets, "
                                        "pieces of at most %d bytes inside %lld bytes)",
                          where, (long long)i, (long long)t->offsets[i], (long long)t->offsets[i + 1],
                          t->max_piece_len, (long long)n_bytes);
        else if (!isfinite(t->scores[i]))
            st = sp_error(SP_ERR_INPUT, "%s/scores: score %lld is not finite", where, (long long)i);
    }
    if (st == SP_OK && (t->offsets[0] != 0 || t->offsets[v] != n_bytes))
        st = sp_error(SP_ERR_INPUT, "%s/offsets: expected 0 .. %lld (the pieces' length), found %lld .. %lld", where,
                      (long long)n_bytes, (long long)t->offsets[0], (long long)t->offsets[v]);
    H5Dclose(d_offsets);
    H5Dclose(d_scores);
    if (d_pieces >= 0)
        H5Dclose(d_pieces);
    return st;
}

/* A whole uint8 dataset as NUL-terminated text (free()); *name gets "<where>/<dataset>". */
static sp_status read_text(hid_t g, const char *where, const char *dataset, char **text, size_t *len, char *name,
                           size_t name_len)
{
    hid_t d;
    int64_t n = 0;
    snprintf(name, name_len, "%s/%s", where, dataset);
    SP_TRY(sp_h5_open_dataset(g, dataset, H5T_INTEGER, 1, NULL, &d, &n));
    sp_status st = SP_OK;
    if (n > SP_CKPT_MAX_TOKENIZER_TEXT)
        st = sp_error(SP_ERR_INPUT, "%s: %lld bytes (at most %lld)", name, (long long)n,
                      (long long)SP_CKPT_MAX_TOKENIZER_TEXT);
    if (st == SP_OK && !(*text = sp_malloc((size_t)n + 1, "tokenizer text")))
        st = SP_ERR_NOMEM;
    if (st == SP_OK && n > 0)
        st = sp_h5_read(d, H5T_NATIVE_UINT8, NULL, NULL, *text);
    if (st == SP_OK) {
        (*text)[n] = '\0';
        *len = (size_t)n;
    }
    H5Dclose(d);
    return st;
}

/* "hf-json": the stored tokenizer.json (and tokenizer_config.json) loaded again; the bos_id and
 * eos_id attributes must be what they resolve to. */
static sp_status read_hf_tokenizer(hid_t g, const char *where, const sp_config *cfg, sp_tokenizer *t)
{
    char *json = NULL, *config = NULL, json_name[800], config_name[800] = "";
    size_t json_len = 0, config_len = 0;
    int64_t bos = -1, eos = -1;
    sp_status st = sp_h5_get_i64(g, "bos_id", &bos);
    if (st == SP_OK)
        st = sp_h5_get_i64(g, "eos_id", &eos);
    if (st == SP_OK)
        st = read_text(g, where, "json", &json, &json_len, json_name, sizeof json_name);
    if (st == SP_OK && sp_h5_exists(g, "config_json"))
        st = read_text(g, where, "config_json", &config, &config_len, config_name, sizeof config_name);
    if (st == SP_OK)
        st = sp_tokenizer_load_hf_text(json_name, json, json_len, config_name, config, config_len, cfg->vocab_size, t);
    if (st == SP_OK && (bos != t->bos_id || eos != t->eos_id)) {
        st = sp_error(SP_ERR_INPUT, "%s: bos_id %lld / eos_id %lld, but the stored tokenizer gives %d / %d", where,
                      (long long)bos, (long long)eos, t->bos_id, t->eos_id);
        sp_tokenizer_free(t);
    }
    free(json);
    free(config);
    return st;
}

static sp_status read_tokenizer(const reader *rd, const sp_config *cfg, sp_tokenizer *t)
{
    hid_t g;
    SP_TRY(sp_h5_open_group(rd->file, "tokenizer", &g));
    char where[768], kind[16];
    int64_t bos = -1, eos = -1, max_len = 1;
    sp_h5_where(g, NULL, where, sizeof where);
    sp_status st = sp_h5_get_str(g, "kind", kind, sizeof kind);
    if (st == SP_OK && strcmp(kind, "bytes") == 0) {
        sp_tokenizer_init_bytes(t);
        if (cfg->vocab_size != 256)
            st = sp_error(SP_ERR_INPUT, "%s: the bytes tokenizer needs vocab_size 256, /config has %d", where,
                          cfg->vocab_size);
    } else if (st == SP_OK && strcmp(kind, "vocab") == 0) {
        st = sp_h5_get_i64(g, "bos_id", &bos);
        if (st == SP_OK)
            st = sp_h5_get_i64(g, "eos_id", &eos);
        if (st == SP_OK)
            st = sp_h5_get_i64(g, "max_piece_len", &max_len);
        if (st == SP_OK && (bos < -1 || bos >= cfg->vocab_size || eos < -1 || eos >= cfg->vocab_size))
            st = sp_error(SP_ERR_INPUT, "%s: bos_id %lld / eos_id %lld out of range (expected -1 .. %d)", where,
                          (long long)bos, (long long)eos, cfg->vocab_size - 1);
        if (st == SP_OK && (max_len < 1 || max_len > SP_TOK_MAX_PIECE_LEN))
            st = sp_error(SP_ERR_INPUT, "%s/max_piece_len: %lld is out of range (expected 1..%d)", where,
                          (long long)max_len, SP_TOK_MAX_PIECE_LEN);
        if (st == SP_OK) {
            *t = (sp_tokenizer){.kind = SP_TOK_VOCAB, .vocab_size = cfg->vocab_size, .bos_id = (int)bos,
                                .eos_id = (int)eos, .max_piece_len = (int)max_len};
            st = read_tokenizer_arrays(g, where, t);
            if (st != SP_OK)
                sp_tokenizer_free(t);
        }
    } else if (st == SP_OK && strcmp(kind, "hf-json") == 0) {
        st = read_hf_tokenizer(g, where, cfg, t);
    } else if (st == SP_OK) {
        st = sp_error(SP_ERR_INPUT, "%s/kind: expected \"bytes\", \"vocab\" or \"hf-json\", found \"%s\"", where,
                      kind);
    }
    H5Gclose(g);
    return st;
}

static sp_status read_train(const reader *rd, sp_train_state *tr)
{
    hid_t g;
    SP_TRY(sp_h5_open_group(rd->file, "train", &g));
    char where[768];
    sp_h5_where(g, NULL, where, sizeof where);
    sp_status st = sp_h5_get_i64(g, "step", &tr->step);
    if (st == SP_OK)
        st = sp_h5_get_i64(g, "tokens_seen", &tr->tokens_seen);
    if (st == SP_OK)
        st = sp_h5_get_u64s(g, "rng_state", tr->rng_state, 4);
    if (st == SP_OK)
        st = sp_h5_get_i64(g, "data_position", &tr->data_position);
    if (st == SP_OK)
        st = sp_h5_get_f64(g, "lr", &tr->lr);
    if (st == SP_OK)
        st = sp_h5_get_str(g, "status", tr->status, sizeof tr->status);
    if (st == SP_OK)
        st = sp_h5_get_i64(g, "diverged_step", &tr->diverged_step);
    if (st == SP_OK && sp_h5_has_attr(g, "options_json"))
        st = sp_h5_get_str_alloc(g, "options_json", &tr->options_json);
    static const char *const statuses[] = {"running", "done", "diverged", NULL};
    if (st == SP_OK && (tr->step < 0 || tr->tokens_seen < 0 || tr->data_position < 0))
        st = sp_error(SP_ERR_INPUT, "%s: step, tokens_seen and data_position must be >= 0, found %lld, %lld, %lld",
                      where, (long long)tr->step, (long long)tr->tokens_seen, (long long)tr->data_position);
    if (st == SP_OK && sp_enum_lookup(statuses, tr->status) < 0)
        st = sp_error(SP_ERR_INPUT, "%s/status: expected running|done|diverged, found \"%s\"", where, tr->status);
    if (st == SP_OK && !(tr->lr >= 0 && tr->lr < 1e300))
        st = sp_error(SP_ERR_INPUT, "%s/lr: expected a finite value >= 0, found %g", where, tr->lr);
    tr->present = st == SP_OK;
    H5Gclose(g);
    return st;
}

/* Reads root provenance: each attribute optional (files written by other tools may lack it). */
static sp_status read_provenance(const reader *rd, sp_ckpt_meta *meta)
{
    struct {
        const char *name;
        char *buf;
        size_t len;
    } fields[] = {{"source", meta->source, sizeof meta->source},
                  {"created", meta->created, sizeof meta->created},
                  {"tool_version", meta->tool_version, sizeof meta->tool_version}};
    for (size_t i = 0; i < SP_ARRAY_LEN(fields); i++)
        if (sp_h5_has_attr(rd->file, fields[i].name))
            SP_TRY(sp_h5_get_str(rd->file, fields[i].name, fields[i].buf, fields[i].len));
    return SP_OK;
}

/* Everything but the tensor values; the layout is returned for the caller (free()). */
static sp_status read_meta(const reader *rd, sp_ckpt_meta *meta, sp_param_spec **specs, int *n_specs)
{
    SP_TRY(read_provenance(rd, meta));
    SP_TRY(read_config(rd, &meta->cfg));
    SP_TRY(sp_param_layout(&meta->cfg, specs, n_specs));
    sp_status st = check_model_size(rd, *specs, *n_specs);
    if (st == SP_OK)
        st = check_tensors(rd, "params", *specs, *n_specs);
    if (st == SP_OK && sp_h5_exists(rd->file, "optim")) {
        st = check_tensors(rd, "optim/m", *specs, *n_specs);
        if (st == SP_OK)
            st = check_tensors(rd, "optim/v", *specs, *n_specs);
    }
    if (st == SP_OK && sp_h5_exists(rd->file, "tokenizer")) {
        st = read_tokenizer(rd, &meta->cfg, &meta->tokenizer);
        meta->has_tokenizer = st == SP_OK;
    }
    if (st == SP_OK && sp_h5_exists(rd->file, "train"))
        st = read_train(rd, &meta->train);
    if (st != SP_OK) {
        free(*specs);
        *specs = NULL;
    }
    return st;
}

static sp_status open_reader(const char *path, reader *rd)
{
    *rd = (reader){.path = path};
    SP_TRY(sp_h5_open(path, &rd->file));
    sp_status st = sp_h5_check_format(rd->file, SP_CKPT_FORMAT, SP_CKPT_VERSION_MAJOR, &rd->minor);
    if (st != SP_OK)
        H5Fclose(rd->file);
    return st;
}

sp_status sp_ckpt_read_meta(const char *path, sp_ckpt_meta *meta)
{
    sp_ckpt_meta_init(meta);
    reader rd;
    SP_TRY(open_reader(path, &rd));
    sp_param_spec *specs = NULL;
    int n = 0;
    sp_status st = read_meta(&rd, meta, &specs, &n);
    free(specs);
    H5Fclose(rd.file);
    if (st != SP_OK)
        sp_ckpt_meta_free(meta);
    return st;
}

/* Reads group/<name> of every parameter of m into host memory, rejects NaN/Inf, hands it to store. */
typedef void (*store_fn)(const sp_model *m, int i, const sp_real *host, void *ctx);

static sp_status read_tensors(const reader *rd, const char *group, const sp_model *m, store_fn store, void *ctx)
{
    sp_real *host = sp_malloc(max_param_numel(m) * sizeof *host, "checkpoint tensor");
    if (!host)
        return SP_ERR_NOMEM;
    hid_t g = -1;
    sp_status st = sp_h5_open_group(rd->file, group, &g);
    for (int i = 0; i < sp_model_n_params(m) && st == SP_OK; i++) {
        const sp_param_spec *spec = sp_model_param_spec(m, i);
        int64_t dims[2];
        hid_t d;
        param_dims(spec, dims);
        st = sp_h5_open_dataset(g, spec->name, H5T_FLOAT, spec->rank, dims, &d, NULL);
        if (st != SP_OK)
            break;
        st = sp_h5_read(d, sp_h5_real_type(), NULL, NULL, host);
        H5Dclose(d);
        size_t numel = sp_param_numel(spec), bad = st == SP_OK ? sp_h5_count_nonfinite(host, numel) : 0;
        if (bad)
            st = sp_error(SP_ERR_NUMERIC, "%s: /%s/%s: %zu of %zu values are NaN or Inf", rd->path, group, spec->name,
                          bad, numel);
        if (st == SP_OK)
            store(m, i, host, ctx);
    }
    if (g >= 0)
        H5Gclose(g);
    free(host);
    return st;
}

/* ctx: the model being loaded (m is the same model, read-only) */
static void store_param(const sp_model *m, int i, const sp_real *host, void *ctx)
{
    (void)m;
    sp_model_set_param(ctx, i, host);
}

typedef struct {
    sp_real *const *buffers; /* one backend buffer per parameter */
} buffer_set;

static void store_buffer(const sp_model *m, int i, const sp_real *host, void *ctx)
{
    const buffer_set *set = ctx;
    sp_model_backend(m)->upload(set->buffers[i], host, sp_param_numel(sp_model_param_spec(m, i)) * sizeof(sp_real));
}

sp_status sp_ckpt_load(const char *path, const sp_backend *be, sp_model **model, sp_ckpt_meta *meta)
{
    *model = NULL;
    sp_ckpt_meta_init(meta);
    reader rd;
    SP_TRY(open_reader(path, &rd));
    sp_param_spec *specs = NULL;
    int n = 0;
    sp_model *m = NULL;
    sp_status st = read_meta(&rd, meta, &specs, &n);
    free(specs);
    if (st == SP_OK)
        st = sp_model_create(&meta->cfg, be, &m);
    if (st == SP_OK)
        st = read_tensors(&rd, "params", m, store_param, m);
    H5Fclose(rd.file);
    if (st != SP_OK) {
        sp_model_free(m);
        sp_ckpt_meta_free(meta);
        return st;
    }
    *model = m;
    return SP_OK;
}

sp_status sp_ckpt_load_optim(const char *path, const sp_model *m, sp_real *const *adam_m, sp_real *const *adam_v)
{
    reader rd;
    SP_TRY(open_reader(path, &rd));
    sp_status st = SP_OK;
    if (!sp_h5_exists(rd.file, "optim"))
        st = sp_error(SP_ERR_INPUT, "%s: /optim: missing group (the checkpoint holds no optimizer state)", path);
    buffer_set m_set = {adam_m}, v_set = {adam_v};
    if (st == SP_OK)
        st = read_tensors(&rd, "optim/m", m, store_buffer, &m_set);
    if (st == SP_OK)
        st = read_tensors(&rd, "optim/v", m, store_buffer, &v_set);
    H5Fclose(rd.file);
    return st;
}
