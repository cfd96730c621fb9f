#include "tests/support/op_compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/rng.h"
#include "tests/support/ref_ops.h"
#include "tests/support/vec_util.h"

/* A backend copy of n host elements of size elem (aborts on failure: tests only). */
static void *to_backend(const sp_backend *be, const void *host, size_t n, size_t elem)
{
    void *dev = be->alloc(n * elem, "op_compare input");
    if (!dev) {
        fprintf(stderr, "op_compare: %s\n", sp_error_message());
        abort();
    }
    be->upload(dev, host, n * elem);
    return dev;
}

static sp_real *real_to_backend(const sp_backend *be, const sp_real *host, size_t n)
{
    return to_backend(be, host, n, sizeof *host);
}

/* A backend output buffer of n NaNs, so an output the op fails to write never compares equal. */
static sp_real *poisoned_output(const sp_backend *be, size_t n)
{
    sp_real *host = vec_zeros(n);
    for (size_t i = 0; i < n; i++)
        host[i] = (sp_real)NAN;
    sp_real *dev = real_to_backend(be, host, n);
    free(host);
    return dev;
}

/* Downloads n elements of dev, frees dev, and returns the error against ref. */
static double take_and_compare(const sp_backend *be, sp_real *dev, const sp_real *ref, size_t n)
{
    sp_real *host = vec_zeros(n);
    be->sync();
    be->download(host, dev, n * sizeof *host);
    be->free(dev);
    double err = vec_rel_err(n, host, ref);
    free(host);
    return err;
}

double opcmp_gemm(const sp_backend *be, int trans_a, int trans_b, double beta, uint64_t seed)
{
    return opcmp_gemm_sized(be, trans_a, trans_b, 7, 5, 9, beta, seed);
}

double opcmp_gemm_sized(const sp_backend *be, int trans_a, int trans_b, int m, int n, int k, double beta,
                        uint64_t seed)
{
    enum { PAD = 3 };
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k, b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    int lda = a_cols + PAD, ldb = b_cols + PAD, ldc = n + PAD;
    size_t na = (size_t)a_rows * lda, nb = (size_t)b_rows * ldb, nc = (size_t)m * ldc;
    sp_real *a = vec_random(&rng, na, 1), *b = vec_random(&rng, nb, 1), *c = vec_random(&rng, nc, 1);
    sp_real *da = real_to_backend(be, a, na), *db = real_to_backend(be, b, nb), *dc = real_to_backend(be, c, nc);
    be->gemm(trans_a, trans_b, m, n, k, (sp_real)1.3, da, lda, db, ldb, (sp_real)beta, dc, ldc);
    ref_gemm(trans_a, trans_b, m, n, k, (sp_real)1.3, a, lda, b, ldb, (sp_real)beta, c, ldc);
    double err = take_and_compare(be, dc, c, nc);
    be->free(da);
    be->free(db);
    free(a);
    free(b);
    free(c);
    return err;
}

double opcmp_norm_fwd(const sp_backend *be, sp_norm_kind kind, int rows, int dim, uint64_t seed)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    size_t n = (size_t)rows * dim;
    int ln = kind == SP_NORM_LAYERNORM;
    sp_real *x = vec_random(&rng, n, 1), *gain = vec_random(&rng, dim, 1), *bias = vec_random(&rng, dim, 1);
    for (size_t i = 0; i < n; i++)
        x[i] = (sp_real)(x[i] + 0.8);
    sp_real *y = vec_zeros(n), *mean = vec_zeros(rows), *rstd = vec_zeros(rows);
    ref_norm(kind, rows, dim, 1e-5, x, gain, ln ? bias : NULL, y, mean, rstd);
    sp_real *dx = real_to_backend(be, x, n), *dgain = real_to_backend(be, gain, dim);
    sp_real *dbias = ln ? real_to_backend(be, bias, dim) : NULL, *dy = poisoned_output(be, n);
    sp_real *dmean = ln ? poisoned_output(be, rows) : NULL, *drstd = poisoned_output(be, rows);
    be->norm_fwd(kind, rows, dim, (sp_real)1e-5, dx, dgain, dbias, dy, dmean, drstd);
    double err = fmax(take_and_compare(be, dy, y, n), take_and_compare(be, drstd, rstd, rows));
    if (ln)
        err = fmax(err, take_and_compare(be, dmean, mean, rows));
    be->free(dx);
    be->free(dgain);
    be->free(dbias);
    free(x);
    free(gain);
    free(bias);
    free(y);
    free(mean);
    free(rstd);
    return err;
}

typedef enum { ELEM_ACT, ELEM_GLU, ELEM_SOFTCAP } elementwise_op;

/* act(x), act(x) * u or cap tanh(x / cap) on the backend against the reference, over n inputs x of
 * scale x_scale (and unit-scale u). */
static double opcmp_elementwise(const sp_backend *be, elementwise_op op, sp_act_kind kind, double cap, size_t n,
                                double x_scale, uint64_t seed)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    sp_real *x = vec_random(&rng, n, x_scale), *u = vec_random(&rng, n, 1), *y = vec_zeros(n);
    for (size_t i = 0; i < n; i++)
        y[i] = (sp_real)(op == ELEM_SOFTCAP ? ref_softcap(cap, x[i]) : ref_act(kind, x[i]) * (op == ELEM_GLU ? u[i] : 1));
    sp_real *dx = real_to_backend(be, x, n), *du = real_to_backend(be, u, n), *dy = poisoned_output(be, n);
    switch (op) {
    case ELEM_ACT: be->act_fwd(kind, n, dx, dy); break;
    case ELEM_GLU: be->glu_fwd(kind, n, dx, du, dy); break;
    case ELEM_SOFTCAP: be->softcap_fwd(n, cap, dx, dy); break;
    }
    double err = take_and_compare(be, dy, y, n);
    be->free(dx);
    be->free(du);
    free(x);
    free(u);
    free(y);
    return err;
}

double opcmp_act_fwd(const sp_backend *be, sp_act_kind kind, size_t n, double x_scale, uint64_t seed)
{
    return opcmp_elementwise(be, ELEM_ACT, kind, 0, n, x_scale, seed);
}

double opcmp_glu_fwd(const sp_backend *be, sp_act_kind kind, size_t n, double g_scale, uint64_t seed)
{
    return opcmp_elementwise(be, ELEM_GLU, kind, 0, n, g_scale, seed);
}

double opcmp_softcap_fwd(const sp_backend *be, size_t n, double cap, double x_scale, uint64_t seed)
{
    return opcmp_elementwise(be, ELEM_SOFTCAP, SP_ACT_SILU, cap, n, x_scale, seed);
}

double opcmp_elementwise_all(const sp_backend *be, size_t n, uint64_t seed)
{
    double err = opcmp_softcap_fwd(be, n, 2.0, 3.0, seed);
    for (int kind = SP_ACT_GELU_TANH; kind <= SP_ACT_SILU; kind++)
        err = fmax(err, fmax(opcmp_act_fwd(be, kind, n, 3.0, seed + 1), opcmp_glu_fwd(be, kind, n, 3.0, seed + 2)));
    return err;
}

double opcmp_rope(const sp_backend *be, int batch, int seq_len, int n_heads, int head_dim, int rot_dims,
                  double theta, uint64_t seed)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    int rows = batch * seq_len;
    size_t n = (size_t)rows * n_heads * head_dim;
    double inv_freq[64];
    for (int i = 0; i < rot_dims / 2; i++)
        inv_freq[i] = pow(theta, -2.0 * i / rot_dims);
    double *dfreq = to_backend(be, inv_freq, (size_t)(rot_dims / 2), sizeof *inv_freq);
    sp_real *x = vec_random(&rng, n, 1), *dx = real_to_backend(be, x, n);
    ref_rope(rows, seq_len, n_heads, head_dim, rot_dims, inv_freq, x);
    be->rope(rows, seq_len, n_heads, head_dim, rot_dims, dfreq, 1, dx);
    double err = take_and_compare(be, dx, x, n);
    be->free(dfreq);
    free(x);
    return err;
}

double opcmp_attention_fwd(const sp_backend *be, const sp_attn_shape *shape, uint64_t seed)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    const size_t rows = (size_t)shape->batch * shape->seq_len;
    size_t nq = rows * shape->n_heads * shape->head_dim, nkv = rows * shape->n_kv_heads * shape->head_dim;
    size_t np = (size_t)shape->batch * shape->n_heads * shape->seq_len * shape->seq_len;
    /* q at twice the scale of k makes sharper softmax rows */
    sp_real *q = vec_random(&rng, nq, 2), *k = vec_random(&rng, nkv, 1), *v = vec_random(&rng, nkv, 1);
    sp_real *out = vec_zeros(nq), *probs = vec_zeros(np);
    ref_attention(shape, q, k, v, out, probs);
    sp_real *dq = real_to_backend(be, q, nq), *dk = real_to_backend(be, k, nkv), *dv = real_to_backend(be, v, nkv);
    sp_real *dout = poisoned_output(be, nq);
    size_t n_saved = be->attn_saved_elems(shape);
    sp_real *saved = poisoned_output(be, n_saved);
    be->attn_fwd(shape, dq, dk, dv, saved, dout);
    double err = take_and_compare(be, dout, out, nq);
    if (n_saved == np)
        err = fmax(err, take_and_compare(be, saved, probs, np));
    else { /* a backend that saves something else than the probabilities is compared on out only */
        be->free(saved);
    }
    be->free(dq);
    be->free(dk);
    be->free(dv);
    free(q);
    free(k);
    free(v);
    free(out);
    free(probs);
    return err;
}

double opcmp_embed_fwd(const sp_backend *be, int batch, int seq_len, int dim, int vocab, int with_pos, double scale,
                       uint64_t seed)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    int rows = batch * seq_len;
    size_t n = (size_t)rows * dim;
    int32_t *ids = malloc((size_t)rows * sizeof *ids);
    if (!ids)
        abort();
    for (int r = 0; r < rows; r++)
        ids[r] = (int32_t)sp_rng_below(&rng, (uint64_t)vocab);
    sp_real *tok = vec_random(&rng, (size_t)vocab * dim, 1), *pos = vec_random(&rng, (size_t)seq_len * dim, 1);
    sp_real *out = vec_zeros(n);
    ref_embed(rows, seq_len, dim, scale, ids, tok, with_pos ? pos : NULL, out);
    int32_t *dids = to_backend(be, ids, rows, sizeof *ids);
    sp_real *dtok = real_to_backend(be, tok, (size_t)vocab * dim);
    sp_real *dpos = with_pos ? real_to_backend(be, pos, (size_t)seq_len * dim) : NULL;
    sp_real *dout = poisoned_output(be, n);
    be->embed_fwd(rows, seq_len, dim, (sp_real)scale, dids, dtok, dpos, dout);
    double err = take_and_compare(be, dout, out, n);
    be->free(dids);
    be->free(dtok);
    be->free(dpos);
    free(ids);
    free(tok);
    free(pos);
    free(out);
    return err;
}

double opcmp_xent_fwd(const sp_backend *be, int rows, int vocab, double logit_scale, uint64_t seed)
{
    sp_rng rng;
    sp_rng_seed(&rng, seed);
    size_t n = (size_t)rows * vocab;
    int32_t *targets = malloc((size_t)rows * sizeof *targets);
    if (!targets)
        abort();
    for (int r = 0; r < rows; r++)
        targets[r] = r % 3 == 1 ? -1 : (int32_t)sp_rng_below(&rng, (uint64_t)vocab);
    sp_real *logits = vec_random(&rng, n, logit_scale), *losses = vec_zeros(rows);
    ref_xent(rows, vocab, logits, targets, losses);
    int32_t *dtargets = to_backend(be, targets, rows, sizeof *targets);
    sp_real *dlogits = real_to_backend(be, logits, n), *dlosses = poisoned_output(be, rows);
    be->xent_fwd(rows, vocab, dlogits, dtargets, dlosses);
    double err = take_and_compare(be, dlosses, losses, rows);
    be->free(dtargets);
    be->free(dlogits);
    free(targets);
    free(logits);
    free(losses);
    return err;
}
