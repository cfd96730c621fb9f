/* analyzers/drift_parts.h: the three parts of a drift run (analyzers/drift.h), private to
 * analyzers/drift*.c: hidden states by layer, next-token distributions, weights. */
#ifndef SP_DRIFT_PARTS_H
#define SP_DRIFT_PARTS_H

#include "analyzers/moments.h"
#include "io/report.h"
#include "model/model.h"

/* Per layer output l = 0..L of both models on the evaluation tokens (analyzers/drift_acts.c). */
typedef struct {
    int n_h, d, max_rows;
    sp_rowops ro;
    sp_real *unit_ref, *unit, *diff; /* backend [max_rows, d] */
    sp_real *shifted[2];             /* backend [max_rows, d]: shifted rows of ref, model (moments.h) */
    sp_real *product;                /* backend [d, d]: one batch's cross-product, lent to every total */
    double *sq_ref, *sq, *dsq;       /* host [max_rows] */
    double *err_sq, *ref_sq, *cos_sum; /* [n_h] sums over tokens */
    sp_mom_cols *cols;               /* [2 * n_h]: ref, model of each layer */
    sp_mom_cross *cross;             /* [3 * n_h]: ref-ref, model-model, ref-model of each layer */
    int64_t n_tokens;
} sp_drift_acts;

sp_status sp_drift_acts_init(sp_drift_acts *s, const sp_backend *be, int n_layers, int d, int max_rows);
/* Adds the layer outputs of the last forward pass of both models (rows tokens). */
sp_status sp_drift_acts_add(sp_drift_acts *s, const sp_model *ref, const sp_model *model, int rows);
/* Writes rel_error, cosine, cka [layer] and their summaries. */
sp_status sp_drift_acts_write(sp_drift_acts *s, sp_report *r);
void sp_drift_acts_free(sp_drift_acts *s); /* safe on a zeroed struct */

/* Next-token distributions of both models, per token, on the host in fp64 (drift_logits.c). */
typedef struct {
    const sp_backend *be;
    int vocab, chunk_rows;
    sp_real *ref_host, *host;  /* [chunk_rows * vocab] */
    double *kl, *top1;         /* [cap]: per evaluation token */
    int64_t n, cap;
} sp_drift_logits;

sp_status sp_drift_logits_init(sp_drift_logits *s, const sp_backend *be, int vocab, int64_t n_tokens);
sp_status sp_drift_logits_add(sp_drift_logits *s, const sp_model *ref, const sp_model *model, int rows);
/* Writes kl, top1_match [token] and kl_mean, kl_p50, kl_p99, kl_max, top1_agreement. */
sp_status sp_drift_logits_write(const sp_drift_logits *s, sp_report *r);
void sp_drift_logits_free(sp_drift_logits *s);

/* Relative errors of every weight matrix of model against ref (same parameter layout), written
 * into r (drift_weights.c). */
sp_status sp_drift_weights(const sp_backend *be, sp_model *ref, sp_model *model, sp_report *r);

#endif
