#include "tests/support/ref_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double *ref_alloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p) {
        fprintf(stderr, "ref_ops: out of memory for %zu doubles\n", n);
        abort();
    }
    return p;
}

/* Element (i, j) of op(M) where M is stored row-major with leading dimension ld. */
static double op_at(const sp_real *mat, int ld, int trans, int i, int j)
{
    return trans ? mat[(size_t)j * ld + i] : mat[(size_t)i * ld + j];
}

void ref_gemm(int trans_a, int trans_b, int m, int n, int k, double alpha, const sp_real *a, int lda,
              const sp_real *b, int ldb, double beta, sp_real *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += op_at(a, lda, trans_a, i, p) * op_at(b, ldb, trans_b, p, j);
            double old = beta == 0 ? 0 : beta * c[(size_t)i * ldc + j];
            c[(size_t)i * ldc + j] = (sp_real)(alpha * s + old);
        }
}

void ref_norm(sp_norm_kind kind, int rows, int dim, double eps, const sp_real *x, const sp_real *gain,
              const sp_real *bias, sp_real *y, sp_real *mean, sp_real *rstd)
{
    for (int r = 0; r < rows; r++) {
        const sp_real *xr = x + (size_t)r * dim;
        double mu = 0, var = 0;
        if (kind == SP_NORM_LAYERNORM) {
            for (int j = 0; j < dim; j++)
                mu += xr[j] / (double)dim;
            for (int j = 0; j < dim; j++)
                var += (xr[j] - mu) * (xr[j] - mu) / dim;
        } else {
            for (int j = 0; j < dim; j++)
                var += (double)xr[j] * xr[j] / dim;
        }
        double inv = 1.0 / sqrt(var + eps);
        for (int j = 0; j < dim; j++) {
            double b = (kind == SP_NORM_LAYERNORM && bias) ? bias[j] : 0.0;
            y[(size_t)r * dim + j] = (sp_real)((xr[j] - mu) * inv * gain[j] + b);
        }
        if (mean)
            mean[r] = (sp_real)mu;
        if (rstd)
            rstd[r] = (sp_real)inv;
    }
}

double ref_act(sp_act_kind kind, double x)
{
    const double pi = acos(-1.0);
    switch (kind) {
    case SP_ACT_GELU_TANH: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / pi) * (x + 0.044715 * pow(x, 3))));
    case SP_ACT_GELU_ERF: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case SP_ACT_SILU: return x / (1.0 + exp(-x));
    }
    return NAN;
}

double ref_softcap(double cap, double x) { return cap * tanh(x / cap); }

void ref_rope(int rows, int seq_len, int n_heads, int head_dim, int rot_dims, const double *inv_freq, sp_real *x)
{
    int width = n_heads * head_dim;
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < n_heads; h++)
            for (int d = 0; d + 1 < rot_dims; d += 2) {
                double angle = (r % seq_len) * inv_freq[d / 2];
                sp_real *p = x + (size_t)r * width + (size_t)h * head_dim + d;
                /* multiply the complex number p[0] + i p[1] by e^{i angle} */
                double re = p[0] * cos(angle) - p[1] * sin(angle);
                double im = p[1] * cos(angle) + p[0] * sin(angle);
                p[0] = (sp_real)re;
                p[1] = (sp_real)im;
            }
}

void ref_attention(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v, sp_real *out,
                   sp_real *probs)
{
    const int seq_len = shape->seq_len, n_heads = shape->n_heads, head_dim = shape->head_dim;
    int qw = n_heads * head_dim, kw = shape->n_kv_heads * head_dim;
    double *score = ref_alloc((size_t)seq_len * seq_len);
    for (int b = 0; b < shape->batch; b++)
        for (int h = 0; h < n_heads; h++) {
            int g = h * shape->n_kv_heads / n_heads; /* heads grouped in consecutive blocks */
            const sp_real *qb = q + (size_t)b * seq_len * qw + (size_t)h * head_dim;
            const sp_real *kb = k + (size_t)b * seq_len * kw + (size_t)g * head_dim;
            const sp_real *vb = v + (size_t)b * seq_len * kw + (size_t)g * head_dim;
            /* full score matrix with the causal (and window) mask as -inf, then a row softmax */
            for (int i = 0; i < seq_len; i++)
                for (int j = 0; j < seq_len; j++) {
                    double s = 0;
                    for (int d = 0; d < head_dim; d++)
                        s += (double)qb[(size_t)i * qw + d] * kb[(size_t)j * kw + d];
                    s *= shape->scale;
                    if (shape->softcap > 0)
                        s = ref_softcap(shape->softcap, s);
                    const int visible = j <= i && (shape->window == 0 || i - j < shape->window);
                    score[(size_t)i * seq_len + j] = visible ? s : -INFINITY;
                }
            for (int i = 0; i < seq_len; i++) {
                double *row = score + (size_t)i * seq_len, mx = row[0], z = 0;
                for (int j = 1; j < seq_len; j++)
                    mx = fmax(mx, row[j]);
                for (int j = 0; j < seq_len; j++)
                    z += exp(row[j] - mx);
                for (int j = 0; j < seq_len; j++)
                    row[j] = exp(row[j] - mx) / z;
                for (int d = 0; d < head_dim; d++) {
                    double o = 0;
                    for (int j = 0; j < seq_len; j++)
                        o += row[j] * vb[(size_t)j * kw + d];
                    out[((size_t)b * seq_len + i) * qw + (size_t)h * head_dim + d] = (sp_real)o;
                }
                if (probs)
                    for (int j = 0; j < seq_len; j++)
                        probs[(((size_t)b * n_heads + h) * seq_len + i) * seq_len + j] = (sp_real)row[j];
            }
        }
    free(score);
}

void ref_embed(int rows, int seq_len, int dim, double scale, const int32_t *ids, const sp_real *tok,
               const sp_real *pos, sp_real *out)
{
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < dim; j++) {
            double e = tok[(size_t)ids[r] * dim + j];
            if (pos)
                e += pos[(size_t)(r % seq_len) * dim + j];
            out[(size_t)r * dim + j] = (sp_real)(scale * e);
        }
}

void ref_xent(int rows, int vocab, const sp_real *logits, const int32_t *targets, sp_real *losses)
{
    double *log_prob = ref_alloc((size_t)vocab);
    for (int r = 0; r < rows; r++) {
        const sp_real *z = logits + (size_t)r * vocab;
        double mx = z[0], total = 0;
        for (int j = 1; j < vocab; j++)
            mx = fmax(mx, z[j]);
        for (int j = 0; j < vocab; j++)
            total += exp(z[j] - mx);
        for (int j = 0; j < vocab; j++)
            log_prob[j] = z[j] - mx - log(total);
        losses[r] = targets[r] < 0 ? 0 : (sp_real)-log_prob[targets[r]];
    }
    free(log_prob);
}
