#include "analyzers/block_jacobian.h"

#include <stdlib.h>
#include <string.h>

sp_status sp_block_forward_copies(sp_model *m, const int32_t *tokens, int len, int copies)
{
    size_t n;
    SP_TRY(sp_size_mul((size_t)len, (size_t)copies, &n, "replicated sequence"));
    int32_t *rep = sp_malloc(n * sizeof *rep, "replicated sequence");
    if (!rep)
        return SP_ERR_NOMEM;
    for (int c = 0; c < copies; c++)
        memcpy(rep + (size_t)c * (size_t)len, tokens, (size_t)len * sizeof *rep);
    sp_status st = sp_model_forward(m, rep, NULL, copies, len, NULL);
    free(rep);
    return st;
}

void sp_block_op_free(sp_block_op *op)
{
    for (int p = 0; p < 2; p++)
        for (int s = 0; s < 2; s++)
            if (op->buf[p][s])
                sp_model_backend(op->m)->free(op->buf[p][s]);
    free(op->stage);
    *op = (sp_block_op){0};
}

sp_status sp_block_op_init(sp_block_op *op, sp_model *m, int copies, int len)
{
    *op = (sp_block_op){0};
    if ((int64_t)sp_model_rows(m) != (int64_t)copies * len)
        return sp_error(SP_ERR_INTERNAL, "sp_block_op_init: the last forward pass has %d rows, not %d copies x %d",
                        sp_model_rows(m), copies, len);
    const sp_config *cfg = sp_model_config(m);
    const sp_backend *be = sp_model_backend(m);
    *op = (sp_block_op){.m = m, .copies = copies, .len = len, .n_streams = sp_config_n_streams(cfg),
                        .d_model = cfg->d_model};
    const size_t n = (size_t)copies * (size_t)len * (size_t)cfg->d_model;
    for (int p = 0; p < 2; p++)
        for (int s = 0; s < op->n_streams; s++)
            if (!(op->buf[p][s] = be->alloc(n * sizeof(sp_real), "block Jacobian vectors"))) {
                sp_block_op_free(op);
                return SP_ERR_NOMEM;
            }
    op->stage = sp_malloc(n * sizeof *op->stage, "block Jacobian staging");
    if (!op->stage) {
        sp_block_op_free(op);
        return SP_ERR_NOMEM;
    }
    return SP_OK;
}

static size_t stream_elems(const sp_block_op *op) { return (size_t)op->len * (size_t)op->d_model; }
static size_t vector_elems(const sp_block_op *op) { return (size_t)op->n_streams * stream_elems(op); }

/* Host vectors 0..k-1 into copies 0..k-1 of the backend streams; the other copies get zeros. */
static void put(sp_block_op *op, int k, const double *x, sp_real *const *dst)
{
    const size_t per = stream_elems(op), n = vector_elems(op);
    for (int s = 0; s < op->n_streams; s++) {
        for (int c = 0; c < op->copies; c++)
            for (size_t e = 0; e < per; e++)
                op->stage[(size_t)c * per + e] = c < k ? (sp_real)x[(size_t)c * n + (size_t)s * per + e] : 0;
        sp_model_backend(op->m)->upload(dst[s], op->stage, (size_t)op->copies * per * sizeof(sp_real));
    }
}

static void get(sp_block_op *op, int k, sp_real *const *src, double *y)
{
    const size_t per = stream_elems(op), n = vector_elems(op);
    for (int s = 0; s < op->n_streams; s++) {
        sp_model_backend(op->m)->download(op->stage, src[s], (size_t)k * per * sizeof(sp_real));
        for (int c = 0; c < k; c++)
            for (size_t e = 0; e < per; e++)
                y[(size_t)c * n + (size_t)s * per + e] = op->stage[(size_t)c * per + e];
    }
}

static sp_status op_apply(void *ctx, int k, const double *x, double *y)
{
    sp_block_op *op = ctx;
    int cur = 0;
    put(op, k, x, op->buf[0]);
    for (int l = op->first; l < op->last; l++, cur = 1 - cur)
        SP_TRY(sp_model_block_jvp(op->m, l, (const sp_real *const *)op->buf[cur], op->buf[1 - cur]));
    get(op, k, op->buf[cur], y);
    return SP_OK;
}

static sp_status op_apply_t(void *ctx, int k, const double *y, double *x)
{
    sp_block_op *op = ctx;
    int cur = 0;
    put(op, k, y, op->buf[0]);
    for (int l = op->last - 1; l >= op->first; l--, cur = 1 - cur)
        SP_TRY(sp_model_block_vjp(op->m, l, (const sp_real *const *)op->buf[cur], op->buf[1 - cur]));
    get(op, k, op->buf[cur], x);
    return SP_OK;
}

sp_linop sp_block_op_linop(sp_block_op *op, int first, int last)
{
    op->first = first;
    op->last = last;
    return (sp_linop){.n = (int64_t)vector_elems(op), .max_k = op->copies, .ctx = op, .apply = op_apply,
                      .apply_t = op_apply_t};
}

sp_status sp_block_token_jacobians(sp_model *m, const int32_t *tokens, int len, int max_rows, double *jt)
{
    const sp_config *cfg = sp_model_config(m);
    const int d = cfg->d_model, sd = sp_config_n_streams(cfg) * d, t = len - 1;
    int copies = max_rows / len;
    copies = copies < 1 ? 1 : copies > sd ? sd : copies;
    SP_TRY(sp_block_forward_copies(m, tokens, len, copies));
    sp_block_op op;
    SP_TRY(sp_block_op_init(&op, m, copies, len));
    const size_t n = vector_elems(&op), per = stream_elems(&op);
    double *x = sp_calloc((size_t)copies * n, sizeof *x, "token Jacobian tangents");
    double *y = x ? sp_malloc((size_t)copies * n * sizeof *y, "token Jacobian products") : NULL;
    sp_status st = y ? SP_OK : SP_ERR_NOMEM;
    for (int l = 0; l < cfg->n_layers && st == SP_OK; l++) {
        sp_linop lin = sp_block_op_linop(&op, l, l + 1);
        double *jl = jt + (size_t)l * (size_t)sd * (size_t)sd;
        for (int c0 = 0; c0 < sd && st == SP_OK; c0 += copies) {
            const int k = sd - c0 < copies ? sd - c0 : copies;
            /* copy j carries basis vector c0 + j (stream col / d, feature col % d) at position t */
            for (int j = 0; j < k; j++)
                x[(size_t)j * n + (size_t)((c0 + j) / d) * per + (size_t)t * d + (size_t)((c0 + j) % d)] = 1;
            st = lin.apply(lin.ctx, k, x, y);
            for (int j = 0; j < k; j++) {
                x[(size_t)j * n + (size_t)((c0 + j) / d) * per + (size_t)t * d + (size_t)((c0 + j) % d)] = 0;
                for (int row = 0; row < sd && st == SP_OK; row++)
                    jl[(size_t)row * sd + (size_t)(c0 + j)] =
                        y[(size_t)j * n + (size_t)(row / d) * per + (size_t)t * d + (size_t)(row % d)];
            }
        }
    }
    free(x);
    free(y);
    sp_block_op_free(&op);
    return st;
}
