/* analyzers/final_norm_check.h: does a dump's last layer look like the output of a final norm?
 *
 * h_L must be the last block's output before any final norm (docs/formats.md); a dump written from
 * a Hugging Face model's output_hidden_states has the final norm applied to it instead, which
 * silently changes every last-layer metric. The output y of an RMSNorm or LayerNorm, with any gain
 * g and bias b (eps negligible), lies on one axis-aligned quadric: sum_i ((y_i - b_i) / g_i)^2 = d,
 * i.e. sum_i a_i y_i^2 + c_i y_i = 1 for some a, c, while the rows of a residual stream do not. The
 * check fits a, c by least squares over the first 4d rows of a layer (twice the 2d unknowns) and
 * takes rho = the median |residual| of a row: ~1e-7 for a normalized layer stored as float32, ~1e-4
 * as float16, 1e-2 and more for a residual stream (measured margins in docs/formats.md).
 *
 * The last layer looks normalized when h_L fits (rho <= SP_FINAL_NORM_FITS) and h_{L-1} does not
 * (rho >= SP_FINAL_NORM_RAW): in a post-norm model every layer output is normalized, rightly. */
#ifndef SP_FINAL_NORM_CHECK_H
#define SP_FINAL_NORM_CHECK_H

#include "io/dump.h"

#define SP_FINAL_NORM_FITS 1e-3
#define SP_FINAL_NORM_RAW 1e-2
/* Widest layer checked: a fit costs about 8 d^3 flops and 4 d^2 doubles (d = 2048: 7e10 flops,
 * about 7 s on two cores, and 128 MiB). */
#define SP_FINAL_NORM_MAX_DIM 2048

/* rho of the rows x [n, d] (n > 2d for a meaningful fit); SP_ERR_NOMEM when the fit does not fit. */
sp_status sp_quadric_fit_rho(int n, int d, const sp_real *x, double *rho);

typedef struct {
    int checked;          /* 0 when the dump has fewer than 4 d rows or d > SP_FINAL_NORM_MAX_DIM */
    double rho_last;      /* rho of h_L (stream 0), when checked */
    double rho_prev;      /* rho of h_{L-1}, computed only when h_L fits (else 0) */
    int looks_normalized; /* rho_last <= SP_FINAL_NORM_FITS and rho_prev >= SP_FINAL_NORM_RAW */
} sp_final_norm_check;

/* Reads the first 4 d rows of h_L (and of h_{L-1} when h_L fits); fails as sp_dump_read does (NaN/Inf, I/O). */
sp_status sp_dump_check_final_norm(sp_dump *d, sp_final_norm_check *out);

#endif
