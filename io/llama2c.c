/* io/llama2c.c: the llama2.c checkpoint reader; the format and the name mapping are in io/llama2c.h. */
#include "io/llama2c.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file_read.h"
#include "io/le.h"

/* The sizes a tensor's shape is made of. */
typedef enum { DIM_ONE, DIM_D, DIM_HIDDEN, DIM_KV, DIM_VOCAB, DIM_SEQ, DIM_HALF_HEAD, N_DIMS } dim_ref;

typedef struct {
    const char *name;  /* llama2.c's name */
    const char *param; /* the spanprobe parameter ("blocks/<l>/" prefixed when per layer); NULL: skipped */
    int per_layer;
    dim_ref rows, cols;
} file_tensor;

/* In file order. wcls is present only for an untied classifier. */
static const file_tensor file_tensors[] = {
    {"token_embedding_table", "embed/tok", 0, DIM_VOCAB, DIM_D},
    {"rms_att_weight", "n1/gain", 1, DIM_D, DIM_ONE},
    {"wq", "attn/wq", 1, DIM_D, DIM_D},
    {"wk", "attn/wk", 1, DIM_KV, DIM_D},
    {"wv", "attn/wv", 1, DIM_KV, DIM_D},
    {"wo", "attn/wo", 1, DIM_D, DIM_D},
    {"rms_ffn_weight", "n2/gain", 1, DIM_D, DIM_ONE},
    {"w1", "ffn/w1", 1, DIM_HIDDEN, DIM_D},
    {"w2", "ffn/w2", 1, DIM_D, DIM_HIDDEN},
    {"w3", "ffn/w3", 1, DIM_HIDDEN, DIM_D},
    {"rms_final_weight", "final_norm/gain", 0, DIM_D, DIM_ONE},
    {"freq_cis_real", NULL, 0, DIM_SEQ, DIM_HALF_HEAD},
    {"freq_cis_imag", NULL, 0, DIM_SEQ, DIM_HALF_HEAD},
    {"wcls", "head/w", 0, DIM_VOCAB, DIM_D},
};
#define N_FILE_TENSORS ((int)SP_ARRAY_LEN(file_tensors))

static const char *const header_names[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                            "n_kv_heads", "vocab_size", "seq_len"};

/* Where each file tensor starts and how large one layer's slice of it is. */
typedef struct {
    int present;
    int n_slices;
    size_t slice_numel;
    int64_t offset;
} tensor_extent;

static void param_name(const file_tensor *ft, int layer, char *buf, size_t len)
{
    if (!ft->param)
        snprintf(buf, len, "not imported");
    else if (ft->per_layer)
        snprintf(buf, len, "blocks/%d/%s", layer, ft->param);
    else
        snprintf(buf, len, "%s", ft->param);
}

/* "wq layer 3 (blocks/3/attn/wq)" */
static void describe(const file_tensor *ft, int layer, char *buf, size_t len)
{
    char param[SP_PARAM_NAME_MAX];
    param_name(ft, layer, param, sizeof param);
    if (ft->per_layer)
        snprintf(buf, len, "%s layer %d (%s)", ft->name, layer, param);
    else
        snprintf(buf, len, "%s (%s)", ft->name, param);
}

static sp_status parse_header(const char *path, const unsigned char *raw, sp_config *cfg, size_t dims[N_DIMS])
{
    int32_t h[7];
    for (int i = 0; i < 7; i++) {
        h[i] = sp_le_i32(raw + 4 * i);
        int bad = i == 5 ? h[i] == 0 || h[i] == INT32_MIN : h[i] <= 0;
        if (bad)
            return sp_error(SP_ERR_INPUT, "%s: header field %s at byte offset %d is %d (expected %s)", path,
                            header_names[i], 4 * i, (int)h[i],
                            i == 5 ? "a non-zero vocabulary size" : "a positive integer");
    }
    int dim = h[0], hidden = h[1], n_layers = h[2], n_heads = h[3], n_kv = h[4], seq_len = h[6];
    int vocab = h[5] < 0 ? -h[5] : h[5];
    if (dim % n_heads)
        return sp_error(SP_ERR_INPUT, "%s: header field n_heads at byte offset 12 is %d, which does not divide dim %d",
                        path, n_heads, dim);
    if (n_kv > n_heads || n_heads % n_kv)
        return sp_error(SP_ERR_INPUT,
                        "%s: header field n_kv_heads at byte offset 16 is %d, which does not divide n_heads %d", path,
                        n_kv, n_heads);
    int head_size = dim / n_heads;
    if (head_size % 2)
        return sp_error(SP_ERR_INPUT, "%s: header: head size dim / n_heads = %d is odd (RoPE rotates pairs)", path,
                        head_size);

    sp_config_defaults(cfg);
    cfg->variant = SP_VARIANT_PRE;
    cfg->norm = SP_NORM_RMSNORM;
    cfg->norm_eps = 1e-5;
    cfg->ffn = SP_FFN_SWIGLU;
    cfg->pos = SP_POS_ROPE;
    cfg->rope_theta = 10000.0;
    cfg->final_norm = 1;
    cfg->d_model = dim;
    cfg->d_ff = hidden;
    cfg->n_layers = n_layers;
    cfg->n_heads = n_heads;
    cfg->n_kv_heads = n_kv;
    cfg->vocab_size = vocab;
    cfg->tie_embeddings = h[5] > 0;
    cfg->max_seq_len = seq_len;

    dims[DIM_ONE] = 1;
    dims[DIM_D] = (size_t)dim;
    dims[DIM_HIDDEN] = (size_t)hidden;
    dims[DIM_KV] = (size_t)n_kv * (size_t)head_size;
    dims[DIM_VOCAB] = (size_t)vocab;
    dims[DIM_SEQ] = (size_t)seq_len;
    dims[DIM_HALF_HEAD] = (size_t)head_size / 2;
    return SP_OK;
}

/* Lays the tensors out after the header; *end is the file size the header implies. */
static sp_status lay_out(const char *path, const sp_config *cfg, const size_t dims[N_DIMS],
                         tensor_extent ext[N_FILE_TENSORS], int64_t *end)
{
    int64_t offset = SP_LLAMA2C_HEADER_BYTES;
    for (int t = 0; t < N_FILE_TENSORS; t++) {
        const file_tensor *ft = &file_tensors[t];
        char what[1024];
        snprintf(what, sizeof what, "%s: tensor %s at byte offset %lld", path, ft->name, (long long)offset);
        ext[t] = (tensor_extent){.present = strcmp(ft->name, "wcls") != 0 || !cfg->tie_embeddings,
                                 .n_slices = ft->per_layer ? cfg->n_layers : 1,
                                 .offset = offset};
        if (!ext[t].present)
            continue;
        size_t bytes = 0;
        SP_TRY(sp_size_mul(dims[ft->rows], dims[ft->cols], &ext[t].slice_numel, what));
        SP_TRY(sp_size_mul3(ext[t].slice_numel, (size_t)ext[t].n_slices, sizeof(float), &bytes, what));
        if (bytes > (size_t)(INT64_MAX - offset))
            return sp_error(SP_ERR_INPUT, "%s: %zu bytes overflow the file offset", what, bytes);
        offset += (int64_t)bytes;
    }
    *end = offset;
    return SP_OK;
}

/* The header implies `expected` bytes; names the tensor the file ends in, or the trailing bytes. */
static sp_status check_file_size(const char *path, const tensor_extent ext[N_FILE_TENSORS], int64_t expected,
                                 int64_t actual)
{
    if (actual > expected)
        return sp_error(SP_ERR_INPUT,
                        "%s: %lld trailing bytes at byte offset %lld after the last tensor (the header implies a "
                        "file of %lld bytes, found %lld)",
                        path, (long long)(actual - expected), (long long)expected, (long long)expected,
                        (long long)actual);
    int t = N_FILE_TENSORS - 1;
    while (t > 0 && (!ext[t].present || ext[t].offset > actual))
        t--;
    /* the file ends inside tensor t (every present tensor has at least one value) */
    int64_t slice_bytes = (int64_t)(ext[t].slice_numel * sizeof(float));
    int layer = (int)((actual - ext[t].offset) / slice_bytes);
    char name[160];
    describe(&file_tensors[t], layer, name, sizeof name);
    return sp_error(SP_ERR_INPUT,
                    "%s: tensor %s at byte offset %lld is truncated (the header implies a file of %lld bytes, "
                    "found %lld)",
                    path, name, (long long)(ext[t].offset + (int64_t)layer * slice_bytes), (long long)expected,
                    (long long)actual);
}

static sp_status check_finite(const char *path, const sp_llama2c_tensor *t, const char *name)
{
    size_t n_bad = 0, first = 0;
    for (size_t i = 0; i < t->numel; i++)
        if (!isfinite(t->data[i]) && n_bad++ == 0)
            first = i;
    if (!n_bad)
        return SP_OK;
    return sp_error(SP_ERR_NUMERIC,
                    "%s: tensor %s at byte offset %lld: %zu non-finite values, the first (%g) at byte offset %lld "
                    "(expected finite weights)",
                    path, name, (long long)t->offset, n_bad, (double)t->data[first],
                    (long long)(t->offset + (int64_t)(first * sizeof(float))));
}

/* Reads the kept tensors into w->storage, splitting per-layer ones, and checks every value. */
static sp_status read_tensors(const char *path, FILE *f, const tensor_extent ext[N_FILE_TENSORS],
                              sp_llama2c_weights *w)
{
    size_t total = 0;
    for (int t = 0; t < N_FILE_TENSORS; t++)
        if (ext[t].present && file_tensors[t].param) {
            total += ext[t].slice_numel * (size_t)ext[t].n_slices;
            w->n_tensors += ext[t].n_slices;
        }
    w->storage = sp_malloc(total * sizeof(float), "llama2.c weights");
    w->tensors = sp_calloc((size_t)w->n_tensors, sizeof *w->tensors, "llama2.c tensor table");
    if (!w->storage || !w->tensors)
        return SP_ERR_NOMEM;
    float *next = w->storage;
    int k = 0;
    for (int t = 0; t < N_FILE_TENSORS; t++) {
        const file_tensor *ft = &file_tensors[t];
        if (!ext[t].present || !ft->param)
            continue;
        if (fseeko(f, (off_t)ext[t].offset, SEEK_SET) != 0)
            return sp_error(SP_ERR_IO, "%s: cannot seek to tensor %s at byte offset %lld: %s", path, ft->name,
                            (long long)ext[t].offset, strerror(errno));
        for (int l = 0; l < ext[t].n_slices; l++) {
            sp_llama2c_tensor *tensor = &w->tensors[k++];
            char name[160];
            describe(ft, l, name, sizeof name);
            param_name(ft, l, tensor->name, sizeof tensor->name);
            tensor->offset = ext[t].offset + (int64_t)((size_t)l * ext[t].slice_numel * sizeof(float));
            tensor->numel = ext[t].slice_numel;
            tensor->data = next;
            if (fread(next, sizeof(float), tensor->numel, f) != tensor->numel)
                return sp_error(SP_ERR_IO, "%s: cannot read tensor %s at byte offset %lld", path, name,
                                (long long)tensor->offset);
            for (size_t i = 0; i < tensor->numel; i++) /* the file is little-endian, the host may not be */
                next[i] = sp_le_f32((const unsigned char *)&next[i]);
            SP_TRY(check_finite(path, tensor, name));
            next += tensor->numel;
        }
    }
    return SP_OK;
}

sp_status sp_llama2c_read(const char *path, sp_llama2c_weights *w)
{
    *w = (sp_llama2c_weights){0};
    FILE *f = NULL;
    int64_t expected = 0, actual = 0;
    SP_TRY(sp_file_open_regular(path, &f, &actual));
    sp_status st = SP_OK;
    unsigned char header[SP_LLAMA2C_HEADER_BYTES];
    size_t dims[N_DIMS];
    tensor_extent ext[N_FILE_TENSORS];
    size_t got = fread(header, 1, sizeof header, f);
    if (got != sizeof header) {
        st = sp_error(SP_ERR_INPUT, "%s: byte offset 0: truncated header (expected %d bytes, found %zu)", path,
                      SP_LLAMA2C_HEADER_BYTES, got);
        goto done;
    }
    if ((st = parse_header(path, header, &w->cfg, dims)) != SP_OK ||
        (st = lay_out(path, &w->cfg, dims, ext, &expected)) != SP_OK)
        goto done;
    if (actual != expected) {
        st = check_file_size(path, ext, expected, actual);
        goto done;
    }
    if ((st = sp_config_resolve(&w->cfg)) != SP_OK || (st = sp_config_validate(&w->cfg, path)) != SP_OK)
        goto done;
    st = read_tensors(path, f, ext, w);
done:
    fclose(f);
    if (st != SP_OK)
        sp_llama2c_free(w);
    return st;
}

void sp_llama2c_free(sp_llama2c_weights *w)
{
    free(w->storage);
    free(w->tensors);
    *w = (sp_llama2c_weights){0};
}

static const sp_llama2c_tensor *find_tensor(const sp_llama2c_weights *w, const char *name)
{
    for (int i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return &w->tensors[i];
    return NULL;
}

sp_status sp_llama2c_to_model(const sp_llama2c_weights *w, const sp_backend *be, sp_model **out)
{
    sp_model *m = NULL;
    SP_TRY(sp_model_create(&w->cfg, be, &m));
    sp_status st = SP_OK;
    sp_real *buf = NULL;
    int n = sp_model_n_params(m);
    if (n != w->n_tensors) {
        st = sp_error(SP_ERR_INTERNAL, "llama2.c import: the model has %d parameters, the file %d tensors", n,
                      w->n_tensors);
        goto done;
    }
    size_t max_numel = 0;
    for (int i = 0; i < w->n_tensors; i++)
        if (w->tensors[i].numel > max_numel)
            max_numel = w->tensors[i].numel;
    buf = sp_malloc(max_numel * sizeof *buf, "parameter staging buffer");
    if (!buf) {
        st = SP_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const sp_param_spec *spec = sp_model_param_spec(m, i);
        const sp_llama2c_tensor *t = find_tensor(w, spec->name);
        if (!t || t->numel != sp_param_numel(spec)) {
            st = sp_error(SP_ERR_INTERNAL, "llama2.c import: parameter %s has no tensor of %zu values in the file",
                          spec->name, sp_param_numel(spec));
            goto done;
        }
        for (size_t k = 0; k < t->numel; k++)
            buf[k] = (sp_real)t->data[k];
        sp_model_set_param(m, i, buf);
    }
done:
    free(buf);
    if (st != SP_OK) {
        sp_model_free(m);
        m = NULL;
    }
    *out = m;
    return st;
}
