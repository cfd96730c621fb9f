/* analyzers/drift_acts.c: the hidden-state part of a drift run (analyzers/drift.h): per layer
 * output, the relative error, the mean per-token cosine and the linear CKA of a model's hidden
 * states against the reference's on the same tokens, streamed batch by batch on the backend.
 *
 * Row norms come from analyzers/rowops.h; the cosine uses the difference form of the similarity
 * analyzer, cos = 1 - ||u - u_ref||^2 / 2 for the unit rows u (accurate near 1, where drift lives;
 * a zero row has cosine 0). CKA totals the three cross-products H_ref^T H_ref, H^T H, H_ref^T H in
 * fp64 (analyzers/moments.h) and takes the cka analyzer's biased HSIC (sp_mom_hsic). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyzers/dev_bufs.h"
#include "analyzers/drift.h"
#include "analyzers/drift_parts.h"

enum { C_REF, C_MODEL, C_CROSS };

static sp_mom_cross *cross_of(sp_drift_acts *s, int l, int which) { return &s->cross[3 * l + which]; }

sp_status sp_drift_acts_init(sp_drift_acts *s, const sp_backend *be, int n_layers, int d, int max_rows)
{
    *s = (sp_drift_acts){.n_h = n_layers + 1, .d = d, .max_rows = max_rows};
    const size_t cells = (size_t)max_rows * (size_t)d * sizeof(sp_real), n_h = (size_t)s->n_h;
    SP_TRY(sp_rowops_init(&s->ro, be, max_rows, d));
    s->unit_ref = be->alloc(cells, "drift unit rows");
    s->unit = be->alloc(cells, "drift unit rows");
    s->diff = be->alloc(cells, "drift differences");
    s->shifted[0] = be->alloc(cells, "drift shifted rows");
    s->shifted[1] = be->alloc(cells, "drift shifted rows");
    s->product = be->alloc((size_t)d * (size_t)d * sizeof(sp_real), "drift cross-product scratch");
    s->sq_ref = sp_malloc((size_t)max_rows * sizeof(double), "drift norms");
    s->sq = sp_malloc((size_t)max_rows * sizeof(double), "drift norms");
    s->dsq = sp_malloc((size_t)max_rows * sizeof(double), "drift norms");
    s->err_sq = sp_calloc(n_h, sizeof(double), "drift sums");
    s->ref_sq = sp_calloc(n_h, sizeof(double), "drift sums");
    s->cos_sum = sp_calloc(n_h, sizeof(double), "drift sums");
    s->cols = sp_calloc(2 * n_h, sizeof *s->cols, "drift column sums");
    s->cross = sp_calloc(3 * n_h, sizeof *s->cross, "drift cross-products");
    if (!s->unit_ref || !s->unit || !s->diff || !s->shifted[0] || !s->shifted[1] || !s->product || !s->sq_ref ||
        !s->sq || !s->dsq || !s->err_sq || !s->ref_sq || !s->cos_sum || !s->cols || !s->cross)
        return SP_ERR_NOMEM;
    for (int i = 0; i < 2 * s->n_h; i++)
        SP_TRY(sp_mom_cols_init(&s->cols[i], &s->ro, d));
    for (int i = 0; i < 3 * s->n_h; i++)
        SP_TRY(sp_mom_cross_init(&s->cross[i], be, d, d, s->product));
    return SP_OK;
}

void sp_drift_acts_free(sp_drift_acts *s)
{
    const sp_backend *be = s->ro.be;
    for (int i = 0; s->cols && i < 2 * s->n_h; i++)
        sp_mom_cols_free(&s->cols[i]);
    for (int i = 0; s->cross && i < 3 * s->n_h; i++)
        sp_mom_cross_free(&s->cross[i]);
    if (be)
        sp_dev_bufs_release(be, (sp_real *[]){s->unit_ref, s->unit, s->diff, s->shifted[0], s->shifted[1], s->product},
                            6);
    sp_rowops_free(&s->ro);
    free(s->sq_ref);
    free(s->sq);
    free(s->dsq);
    free(s->err_sq);
    free(s->ref_sq);
    free(s->cos_sum);
    free(s->cols);
    free(s->cross);
    *s = (sp_drift_acts){0};
}

/* ||a - b||^2 of every row into s->dsq, their sum returned. */
static double diff_sqnorms(sp_drift_acts *s, int rows, const sp_real *a, const sp_real *b, sp_status *st)
{
    const sp_backend *be = s->ro.be;
    const size_t n = (size_t)rows * (size_t)s->d;
    be->copy(s->diff, a, n * sizeof *a);
    be->axpby(n, (sp_real)-1, b, (sp_real)1, s->diff);
    *st = sp_rowops_sqnorms(&s->ro, rows, s->d, s->diff, s->dsq);
    double sum = 0;
    for (int t = 0; t < rows; t++)
        sum += s->dsq[t];
    return sum;
}

static sp_status add_layer(sp_drift_acts *s, int l, const sp_real *x_ref, const sp_real *x, int rows)
{
    sp_status st;
    SP_TRY(sp_rowops_unit(&s->ro, rows, s->d, x_ref, s->unit_ref, s->sq_ref));
    SP_TRY(sp_rowops_unit(&s->ro, rows, s->d, x, s->unit, s->sq));
    s->err_sq[l] += diff_sqnorms(s, rows, x, x_ref, &st);
    SP_TRY(st);
    for (int t = 0; t < rows; t++)
        s->ref_sq[l] += s->sq_ref[t];
    diff_sqnorms(s, rows, s->unit, s->unit_ref, &st);
    SP_TRY(st);
    for (int t = 0; t < rows; t++)
        if (s->sq_ref[t] > 0 && s->sq[t] > 0)
            s->cos_sum[l] += 1 - s->dsq[t] / 2;
    SP_TRY(sp_mom_cols_add(&s->cols[2 * l], x_ref, rows, s->shifted[0]));
    SP_TRY(sp_mom_cols_add(&s->cols[2 * l + 1], x, rows, s->shifted[1]));
    SP_TRY(sp_mom_cross_add(cross_of(s, l, C_REF), s->shifted[0], s->shifted[0], rows));
    SP_TRY(sp_mom_cross_add(cross_of(s, l, C_MODEL), s->shifted[1], s->shifted[1], rows));
    return sp_mom_cross_add(cross_of(s, l, C_CROSS), s->shifted[0], s->shifted[1], rows);
}

sp_status sp_drift_acts_add(sp_drift_acts *s, const sp_model *ref, const sp_model *model, int rows)
{
    for (int l = 0; l < s->n_h; l++)
        SP_TRY(add_layer(s, l, sp_model_hidden(ref, l, 0), sp_model_hidden(model, l, 0), rows));
    s->n_tokens += rows;
    return SP_OK;
}

/* CKA of layer l from its three totals, read back one at a time (each freed once read). */
static sp_status layer_cka(sp_drift_acts *s, int l, double *total, double *cov, double *cka)
{
    static const int sides[3][2] = {{0, 0}, {1, 1}, {0, 1}}; /* column sets of C_REF, C_MODEL, C_CROSS */
    double hsic[3];
    SP_TRY(sp_mom_cols_flush(&s->cols[2 * l]));
    SP_TRY(sp_mom_cols_flush(&s->cols[2 * l + 1]));
    for (int w = 0; w < 3; w++) {
        sp_mom_cross_download(cross_of(s, l, w), total);
        sp_mom_cross_free(cross_of(s, l, w));
        hsic[w] = sp_mom_hsic(total, &s->cols[2 * l + sides[w][0]], &s->cols[2 * l + sides[w][1]], cov);
    }
    *cka = hsic[C_CROSS] / sqrt(hsic[C_REF] * hsic[C_MODEL]);
    return SP_OK;
}

static sp_status write_layer_array(sp_report *r, const char *name, int n_h, const double *v, const char *units,
                                   const char *desc)
{
    return sp_report_write_array(r, SP_DRIFT_GROUP, name, 1, (int64_t[]){n_h},
                                 v, &(sp_report_array_attrs){units, "[layer]", desc});
}

/* <name>_final (layer L) and <name>_<extreme> (the max, or the min) over the layers. */
static sp_status write_extremes(sp_report *r, const char *name, int n_h, const double *v, int want_max)
{
    double e = v[0];
    for (int l = 1; l < n_h; l++)
        e = want_max ? fmax(e, v[l]) : fmin(e, v[l]);
    char key[64];
    snprintf(key, sizeof key, "%s_final", name);
    SP_TRY(sp_report_set_scalar(r, SP_DRIFT_GROUP, key, v[n_h - 1]));
    snprintf(key, sizeof key, "%s_%s", name, want_max ? "max" : "min");
    return sp_report_set_scalar(r, SP_DRIFT_GROUP, key, e);
}

sp_status sp_drift_acts_write(sp_drift_acts *s, sp_report *r)
{
    const int n_h = s->n_h;
    const size_t dd = (size_t)s->d * (size_t)s->d;
    double *buf = sp_malloc((3 * (size_t)n_h + 2 * dd) * sizeof *buf, "drift results");
    if (!buf)
        return SP_ERR_NOMEM;
    double *rel = buf, *cos = buf + n_h, *cka = buf + 2 * n_h, *total = buf + 3 * n_h, *cov = total + dd;
    sp_status st = s->n_tokens >= 2 ? SP_OK
                                    : sp_error(SP_ERR_INPUT, "drift: CKA needs at least 2 tokens, found %lld",
                                               (long long)s->n_tokens);
    for (int l = 0; l < n_h && st == SP_OK; l++) {
        rel[l] = sqrt(s->err_sq[l] / s->ref_sq[l]);
        cos[l] = s->cos_sum[l] / (double)s->n_tokens;
        st = layer_cka(s, l, total, cov, &cka[l]);
    }
    if (st == SP_OK)
        st = write_layer_array(r, "rel_error", n_h, rel, "1",
                               "||H_l - H_ref,l||_F / ||H_ref,l||_F over the evaluation tokens, layer outputs 0..L");
    if (st == SP_OK)
        st = write_layer_array(r, "cosine", n_h, cos, "cosine",
                               "mean over tokens of cos(h_l,t, h_ref,l,t), layer outputs 0..L (0 for a zero row)");
    if (st == SP_OK)
        st = write_layer_array(r, "cka", n_h, cka, "1",
                               "linear CKA(H_l, H_ref,l), centered, biased HSIC (as the cka analyzer), layers 0..L");
    if (st == SP_OK)
        st = write_extremes(r, "rel_error", n_h, rel, 1);
    if (st == SP_OK)
        st = write_extremes(r, "cosine", n_h, cos, 0);
    if (st == SP_OK)
        st = write_extremes(r, "cka", n_h, cka, 0);
    free(buf);
    return st;
}
