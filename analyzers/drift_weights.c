/* analyzers/drift_weights.c: the weight part of a drift run (analyzers/drift.h): for every matrix of
 * the model, ||W - W_ref|| / ||W_ref|| in the Frobenius and the spectral norm, fp64.
 *
 * Both norms come from the singular values (||A||_F^2 = sum sigma_i^2, ||A||_2 = sigma_max), computed
 * on the backend in fp64 like the weights analyzer's (sp_linalg_backend_singvals). The difference is
 * formed in fp64 too: W widened, then -W_ref widened and accumulated onto it (be->to_f64), so it is
 * exact whatever sp_real is. Matrices are taken one at a time, so the peak is two fp64 copies of
 * the largest (the embedding). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyzers/drift.h"
#include "analyzers/drift_parts.h"
#include "analyzers/linalg.h"

enum { N_BLOCK_MATRICES = 7, N_GLOBAL = 3 };
static const sp_param_role block_roles[N_BLOCK_MATRICES] = {SP_ROLE_WQ, SP_ROLE_WK, SP_ROLE_WV, SP_ROLE_WO,
                                                            SP_ROLE_W1, SP_ROLE_W2, SP_ROLE_W3};
static const sp_param_role global_roles[N_GLOBAL] = {SP_ROLE_TOK_EMBED, SP_ROLE_POS_EMBED, SP_ROLE_HEAD};
static const char *const global_names[N_GLOBAL] = {"tok_embed", "pos_embed", "head"};

/* ||A||_F and ||A||_2 of the fp64 backend matrix a [m, n] (destroyed); sv is host scratch [min(m, n)]. */
static sp_status norms_of(const sp_backend *be, int m, int n, double *a, double *sv, double *frob, double *spec)
{
    SP_TRY(sp_linalg_backend_singvals(be, m, n, 1, a, sv));
    double ss = 0;
    for (int i = 0; i < (m < n ? m : n); i++)
        ss += sv[i] * sv[i];
    *frob = sqrt(ss);
    *spec = sv[0];
    return SP_OK;
}

/* Relative Frobenius and spectral errors of parameter i (a matrix of both models). */
static sp_status matrix_drift(const sp_backend *be, sp_model *ref, sp_model *model, int i, double *rel_frob,
                              double *rel_spec)
{
    const sp_param_spec *spec = sp_model_param_spec(ref, i);
    const int m = (int)spec->shape[0], n = (int)spec->shape[1];
    const size_t cells = (size_t)m * (size_t)n;
    double *diff = be->alloc(cells * sizeof *diff, "drift weight difference fp64");
    double *w_ref = be->alloc(cells * sizeof *w_ref, "drift reference weight fp64");
    sp_real *neg = be->alloc(cells * sizeof *neg, "drift negated weight");
    double *sv = sp_malloc((size_t)(m < n ? m : n) * sizeof *sv, "drift singular values");
    sp_status st = diff && w_ref && neg && sv ? SP_OK : SP_ERR_NOMEM;
    if (st == SP_OK) {
        be->to_f64(cells, sp_model_param(model, i), diff, 0);
        be->copy(neg, sp_model_param(ref, i), cells * sizeof *neg);
        be->scale(cells, (sp_real)-1, neg);
        be->to_f64(cells, neg, diff, 1);
        be->to_f64(cells, sp_model_param(ref, i), w_ref, 0);
        double f_diff, s_diff, f_ref, s_ref;
        st = norms_of(be, m, n, diff, sv, &f_diff, &s_diff);
        if (st == SP_OK)
            st = norms_of(be, m, n, w_ref, sv, &f_ref, &s_ref);
        if (st == SP_OK) {
            *rel_frob = f_diff / f_ref;
            *rel_spec = s_diff / s_ref;
        }
    }
    if (diff)
        be->free(diff);
    if (w_ref)
        be->free(w_ref);
    if (neg)
        be->free(neg);
    free(sv);
    return st;
}

/* The column of role in list[n], or -1. */
static int role_index(const sp_param_role *list, int n, sp_param_role role)
{
    for (int k = 0; k < n; k++)
        if (list[k] == role)
            return k;
    return -1;
}

static sp_status write_results(sp_report *r, int L, const double *frob, const double *spec, const double *g_frob,
                               const double *g_spec)
{
    static const char cols[] = "columns: wq, wk, wv, wo, w1, w2, w3 (NaN: absent)";
    char desc[256];
    const int64_t shape[2] = {L, N_BLOCK_MATRICES};
    snprintf(desc, sizeof desc, "||W - W_ref||_F / ||W_ref||_F of each block matrix; %s", cols);
    SP_TRY(sp_report_write_array(r, SP_DRIFT_GROUP, "weight_rel_frobenius", 2, shape, frob,
                                 &(sp_report_array_attrs){"1", "[block, matrix]", desc}));
    snprintf(desc, sizeof desc, "||W - W_ref||_2 / ||W_ref||_2 (spectral norms) of each block matrix; %s", cols);
    SP_TRY(sp_report_write_array(r, SP_DRIFT_GROUP, "weight_rel_spectral", 2, shape, spec,
                                 &(sp_report_array_attrs){"1", "[block, matrix]", desc}));
    static const char gcols[] = "entries: tok_embed, pos_embed, head (NaN: absent, e.g. a head tied to tok_embed)";
    snprintf(desc, sizeof desc, "||W - W_ref||_F / ||W_ref||_F of the matrices outside the blocks; %s", gcols);
    SP_TRY(sp_report_write_array(r, SP_DRIFT_GROUP, "weight_rel_frobenius_global", 1, (int64_t[]){N_GLOBAL}, g_frob,
                                 &(sp_report_array_attrs){"1", "[matrix]", desc}));
    snprintf(desc, sizeof desc, "||W - W_ref||_2 / ||W_ref||_2 of the matrices outside the blocks; %s", gcols);
    SP_TRY(sp_report_write_array(r, SP_DRIFT_GROUP, "weight_rel_spectral_global", 1, (int64_t[]){N_GLOBAL}, g_spec,
                                 &(sp_report_array_attrs){"1", "[matrix]", desc}));
    double max_f = -INFINITY, max_s = -INFINITY; /* fmax skips the NaN of absent matrices */
    for (int k = 0; k < L * N_BLOCK_MATRICES; k++) {
        max_f = fmax(max_f, frob[k]);
        max_s = fmax(max_s, spec[k]);
    }
    SP_TRY(sp_report_set_scalar(r, SP_DRIFT_GROUP, "weight_rel_frobenius_max", max_f));
    SP_TRY(sp_report_set_scalar(r, SP_DRIFT_GROUP, "weight_rel_spectral_max", max_s));
    for (int g = 0; g < N_GLOBAL; g++) {
        char key[64];
        snprintf(key, sizeof key, "%s_rel_frobenius", global_names[g]);
        SP_TRY(sp_report_set_scalar(r, SP_DRIFT_GROUP, key, g_frob[g]));
        snprintf(key, sizeof key, "%s_rel_spectral", global_names[g]);
        SP_TRY(sp_report_set_scalar(r, SP_DRIFT_GROUP, key, g_spec[g]));
    }
    return SP_OK;
}

sp_status sp_drift_weights(const sp_backend *be, sp_model *ref, sp_model *model, sp_report *r)
{
    const int L = sp_model_config(ref)->n_layers;
    const size_t n_cells = (size_t)L * N_BLOCK_MATRICES;
    double *buf = sp_malloc((2 * n_cells + 2 * N_GLOBAL) * sizeof *buf, "drift weight errors");
    if (!buf)
        return SP_ERR_NOMEM;
    double *frob = buf, *spec = buf + n_cells, *g_frob = spec + n_cells, *g_spec = g_frob + N_GLOBAL;
    for (size_t k = 0; k < 2 * n_cells + 2 * N_GLOBAL; k++)
        buf[k] = NAN;
    sp_status st = SP_OK;
    for (int i = 0; i < sp_model_n_params(ref) && st == SP_OK; i++) {
        const sp_param_spec *p = sp_model_param_spec(ref, i);
        const int col = role_index(block_roles, N_BLOCK_MATRICES, p->role);
        const int g = role_index(global_roles, N_GLOBAL, p->role);
        if (col >= 0 && p->layer >= 0 && p->layer < L) {
            const size_t at = (size_t)p->layer * N_BLOCK_MATRICES + (size_t)col;
            st = matrix_drift(be, ref, model, i, &frob[at], &spec[at]);
        } else if (g >= 0) {
            st = matrix_drift(be, ref, model, i, &g_frob[g], &g_spec[g]);
        }
    }
    if (st == SP_OK)
        st = write_results(r, L, frob, spec, g_frob, g_spec);
    free(buf);
    return st;
}
