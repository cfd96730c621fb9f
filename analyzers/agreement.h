/* analyzers/agreement.h: when two reports of the same run agree: the table of per-metric tolerances
 * for a report computed on another backend or in another precision (fp32 CUDA against fp32 CPU, and
 * either against the fp64 CPU build, spanprobe-f64), and the elementwise rule that `spanprobe compare`
 * and the GPU agreement tests apply. docs/cuda.md ("Agreement with the CPU") gives every value and
 * its reason.
 *
 * The rule, per array, a the reference and b the other report's array of the same shape:
 *     |b - a| <= atol * scale + rtol * |a|      for every entry,
 * scale = max |a| over the array's finite entries, so the small entries of a spectrum are judged
 * against its top rather than themselves; an entry marked `absolute` has scale 1 (atol in the
 * metric's own units: cosines, nats). NaN and +-Inf must sit at the same positions, with the same
 * sign for Inf. A summary scalar is a one-entry array (its scale is |a|).
 */
#ifndef SP_AGREEMENT_H
#define SP_AGREEMENT_H

#include <stddef.h>
#include <stdint.h>

typedef enum { SP_AGREE_ARRAY, SP_AGREE_SCALAR } sp_agree_kind;

typedef struct {
    const char *analyzer; /* an analyzer name, a summary group ("run", "train"), or "*" (any) */
    const char *pattern;  /* fnmatch(3) pattern of the array name or summary key */
    sp_agree_kind kind;
    int compared;         /* 0: not compared; reason says why */
    int absolute;         /* 1: atol in the metric's units (scale 1); 0: a fraction of max |a| */
    double atol, rtol;
    const char *reason;   /* why these values */
} sp_tolerance;

extern const sp_tolerance sp_tolerances[]; /* the table, first match wins; the last entries catch all */
extern const int sp_n_tolerances;

/* The entry for an array or summary key of `analyzer`. A siamese Y-stream name ("cosine_y") is looked
 * up without its "_y". Never NULL: names no entry covers get the catch-all (sp_tolerance_is_fallback). */
const sp_tolerance *sp_tolerance_find(sp_agree_kind kind, const char *analyzer, const char *name);
int sp_tolerance_is_fallback(const sp_tolerance *t);

typedef struct {
    double max_abs_diff;   /* max |b - a| over the entries finite in both (0 when none) */
    double max_rel_diff;   /* max |b - a| / |a| over them; +inf where a = 0 != b */
    double abs_term;       /* atol * scale: the absolute part of the allowance */
    int64_t n_outside;     /* finite entries beyond the tolerance */
    int64_t n_nonfinite;   /* entries where NaN/Inf differ (position, kind or sign) */
    int64_t worst;         /* the first non-finite mismatch, else the entry furthest beyond its allowance
                              relative to it (the largest |b - a| / allowance); -1 when n == 0 */
} sp_agreement;

/* Applies the rule to a[n] (the reference) and b[n]. */
void sp_agreement_check(const double *a, const double *b, size_t n, double atol, double rtol, int absolute,
                        sp_agreement *out);
/* 1 when every entry is within the tolerance and the non-finite entries match. */
int sp_agreement_pass(const sp_agreement *g);

#endif
