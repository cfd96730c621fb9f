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
    for (int i = 0; i < 2; i++)
        if (op->chain[i])
            sp_model_backend(op->m)->free(op->chain[i]);
    *op = (sp_block_op){0};
}

sp_status sp_block_op_init(sp_block_op *op, sp_model *m, int copies, int len)
{
    *op = (sp_block_op){0};
    if ((int64_t)sp_model_rows(m) != (int64_t)copies * len)
        return sp_error(SP_ERR_INTERNAL, "sp_block_op_init: the last forward pass has %d rows, not %d copies x %d",
                        sp_model_rows(m), copies, len);
    const sp_config *cfg = sp_model_config(m);
    *op = (sp_block_op){.m = m, .copies = copies, .len = len, .n_streams = sp_config_n_streams(cfg),
                        .d_model = cfg->d_model};
    return SP_OK;
}

/* Elements of one stream over the copies: a segment of a vector block. */
static size_t segment_elems(const sp_block_op *op)
{
    return (size_t)op->copies * (size_t)op->len * (size_t)op->d_model;
}

/* The stream pointers of a vector block. */
static void streams_of(const sp_block_op *op, const sp_real *block, sp_real *streams[2])
{
    for (int s = 0; s < op->n_streams; s++)
        streams[s] = (sp_real *)block + (size_t)s * segment_elems(op);
}

/* y = J x (transpose 0, blocks first..last-1 forward) or x = J^T y (transpose 1, backward), whole
 * blocks of copies vectors; the intermediate vectors of a chain ping-pong between op->chain. */
static sp_status run_chain(sp_block_op *op, int transpose, const sp_real *in, sp_real *out)
{
    const sp_backend *be = sp_model_backend(op->m);
    const size_t bytes = (size_t)op->n_streams * segment_elems(op) * sizeof(sp_real);
    const int n_blocks = op->last - op->first;
    if (n_blocks == 0) {
        be->copy(out, in, bytes);
        return SP_OK;
    }
    for (int i = 0; i < n_blocks - 1 && i < 2; i++)
        if (!op->chain[i] && !(op->chain[i] = be->alloc(bytes, "block Jacobian chain vectors")))
            return SP_ERR_NOMEM;
    const sp_real *from = in;
    for (int i = 0; i < n_blocks; i++) {
        sp_real *to = i == n_blocks - 1 ? out : op->chain[i % 2];
        sp_real *src[2], *dst[2];
        streams_of(op, from, src);
        streams_of(op, to, dst);
        if (transpose)
            SP_TRY(sp_model_block_vjp(op->m, op->last - 1 - i, (const sp_real *const *)src, dst));
        else
            SP_TRY(sp_model_block_jvp(op->m, op->first + i, (const sp_real *const *)src, dst));
        from = to;
    }
    return SP_OK;
}

/* k is not needed: the copies past k hold vectors the caller ignores */
static sp_status op_apply(void *ctx, int k, const sp_real *x, sp_real *y)
{
    (void)k;
    return run_chain(ctx, 0, x, y);
}

static sp_status op_apply_t(void *ctx, int k, const sp_real *y, sp_real *x)
{
    (void)k;
    return run_chain(ctx, 1, y, x);
}

sp_linop sp_block_op_linop(sp_block_op *op, int first, int last)
{
    op->first = first;
    op->last = last;
    return (sp_linop){.be = sp_model_backend(op->m), .n_segments = op->n_streams,
                      .seg_len = (int64_t)op->len * op->d_model, .max_k = op->copies, .ctx = op,
                      .apply = op_apply, .apply_t = op_apply_t};
}

sp_status sp_block_token_jacobians(sp_model *m, const int32_t *tokens, int len, int max_rows, double *jt)
{
    const sp_backend *be = sp_model_backend(m);
    const sp_config *cfg = sp_model_config(m);
    const int d = cfg->d_model, S = sp_config_n_streams(cfg), sd = S * d, t = len - 1;
    const size_t E = sizeof(sp_real), nn = (size_t)sd * (size_t)sd;
    /* columns per chunk: with RoPE their tangents are turned in a pad of as many copies of the prefix */
    int copies = max_rows / len;
    copies = copies < 1 ? 1 : copies > sd ? sd : copies;
    SP_TRY(sp_block_forward_copies(m, tokens, len, 1));
    /* tangent and output rows [S][copies][d]: row j of stream s is column j's vector at t */
    const size_t block = (size_t)S * (size_t)copies * (size_t)d;
    sp_real *tangent = be->alloc(block * E, "token Jacobian tangents");
    sp_real *out = tangent ? be->alloc(block * E, "token Jacobian products") : NULL;
    sp_real *rows = out ? be->alloc(block * E, "token Jacobian rows") : NULL;
    sp_real *host = rows ? sp_malloc(block * E, "token Jacobian basis rows") : NULL;
    sp_status st = host ? SP_OK : SP_ERR_NOMEM;
    sp_real *t_in[2], *t_out[2];
    for (int s = 0; s < S; s++) {
        t_in[s] = tangent ? tangent + (size_t)s * copies * d : NULL;
        t_out[s] = out ? out + (size_t)s * copies * d : NULL;
    }
    for (int c0 = 0; c0 < sd && st == SP_OK; c0 += copies) {
        const int k = sd - c0 < copies ? sd - c0 : copies;
        /* row j carries basis vector c0 + j: stream (c0 + j) / d, feature (c0 + j) % d */
        memset(host, 0, block * E);
        for (int j = 0; j < k; j++)
            host[(size_t)((c0 + j) / d) * copies * d + (size_t)j * d + (size_t)((c0 + j) % d)] = 1;
        be->upload(tangent, host, block * E);
        for (int l = 0; l < cfg->n_layers && st == SP_OK; l++) {
            st = sp_model_block_jvp_at(m, l, t, k, (const sp_real *const *)t_in, t_out);
            /* output stream s of copy j: entries s d .. s d + d - 1 of column c0 + j of J_t */
            for (int s = 0; s < S && st == SP_OK; s++)
                be->copy_rows(rows + (size_t)s * d, (size_t)sd * E, t_out[s], (size_t)d * E, (size_t)d * E, (size_t)k);
            if (st == SP_OK)
                be->to_f64((size_t)k * (size_t)sd, rows, jt + (size_t)l * nn + (size_t)c0 * sd, 0);
        }
    }
    if (st == SP_OK)
        st = sp_model_sync(m);
    sp_real *all[] = {tangent, out, rows};
    for (size_t i = 0; i < SP_ARRAY_LEN(all); i++)
        if (all[i])
            be->free(all[i]);
    free(host);
    return st;
}
