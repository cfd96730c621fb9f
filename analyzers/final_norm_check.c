/* analyzers/final_norm_check.c: the quadric fit of analyzers/final_norm_check.h. The design matrix
 * D = [y^2, y] ([n, 2d], in double) is built a block of rows at a time, twice: once for the normal
 * equations D^T D theta = D^T 1, once for the residuals D theta - 1. */
#include "analyzers/final_norm_check.h"

#include <math.h>
#include <stdlib.h>

#include "analyzers/linalg.h"

#define BLOCK_ROWS 1024
/* Ridge on the normal equations with unit-RMS columns, relative to their diagonal n: a LayerNorm
 * output makes them singular (its rows also lie on a hyperplane: sum_i (y_i - b_i) / g_i = 0). */
#define RIDGE 1e-10

/* Rows [0, rows) of the design: [x_r^2, x_r]. */
static void design_rows(int rows, int d, const sp_real *x, double *out)
{
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < d; i++) {
            double v = x[(size_t)r * d + i];
            out[(size_t)r * 2 * d + i] = v * v;
            out[(size_t)r * 2 * d + d + i] = v;
        }
}

/* theta solving the normal equations (G = D^T D, its upper triangle, and rhs = D^T 1, both
 * destroyed) with every column of D scaled to unit RMS first (a column of zeros keeps scale 1), so
 * the ridge is relative. */
static sp_status solve_scaled(int n, int p, double *g, double *rhs, double *theta)
{
    for (int j = 0; j < p; j++)
        theta[j] = g[(size_t)j * p + j] > 0 ? sqrt(g[(size_t)j * p + j] / n) : 1; /* the scales, for now */
    for (int i = 0; i < p; i++) {
        for (int j = i; j < p; j++)
            g[(size_t)i * p + j] /= theta[i] * theta[j];
        g[(size_t)i * p + i] += RIDGE * n;
        rhs[i] /= theta[i];
    }
    SP_TRY(sp_linalg_spd_solve(p, g, rhs));
    for (int j = 0; j < p; j++)
        theta[j] = rhs[j] / theta[j];
    return SP_OK;
}

sp_status sp_quadric_fit_rho(int n, int d, const sp_real *x, double *rho)
{
    const int p = 2 * d;
    double *g = calloc((size_t)p * p, sizeof *g), *rhs = calloc((size_t)p, sizeof *rhs);
    double *theta = malloc((size_t)p * sizeof *theta), *abs_res = malloc((size_t)n * sizeof *abs_res);
    double *block = malloc((size_t)BLOCK_ROWS * p * sizeof *block);
    sp_status st = g && rhs && theta && abs_res && block
                       ? SP_OK
                       : sp_error(SP_ERR_NOMEM, "out of memory for the quadric fit of %d rows of width %d", n, d);
    for (int r0 = 0; r0 < n && st == SP_OK; r0 += BLOCK_ROWS) {
        int rows = n - r0 < BLOCK_ROWS ? n - r0 : BLOCK_ROWS;
        design_rows(rows, d, x + (size_t)r0 * d, block);
        sp_linalg_gram_add(rows, p, block, g);
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < p; j++)
                rhs[j] += block[(size_t)r * p + j];
    }
    if (st == SP_OK)
        st = solve_scaled(n, p, g, rhs, theta);
    for (int r0 = 0; r0 < n && st == SP_OK; r0 += BLOCK_ROWS) {
        int rows = n - r0 < BLOCK_ROWS ? n - r0 : BLOCK_ROWS;
        design_rows(rows, d, x + (size_t)r0 * d, block);
        for (int r = 0; r < rows; r++) {
            double fit = 0;
            for (int j = 0; j < p; j++)
                fit += block[(size_t)r * p + j] * theta[j];
            abs_res[r0 + r] = fabs(fit - 1);
        }
    }
    if (st == SP_OK)
        *rho = sp_linalg_median(n, abs_res);
    free(g);
    free(rhs);
    free(theta);
    free(abs_res);
    free(block);
    return st;
}

sp_status sp_dump_check_final_norm(sp_dump *d, sp_final_norm_check *out)
{
    *out = (sp_final_norm_check){0};
    const sp_dump_info *info = sp_dump_get_info(d);
    const int width = info->d_model, n = 4 * width, last = info->n_layers;
    if (width > SP_FINAL_NORM_MAX_DIM || sp_dump_rows(d) < n)
        return SP_OK;
    sp_real *rows = sp_malloc((size_t)n * width * sizeof *rows, "final-norm check rows");
    if (!rows)
        return SP_ERR_NOMEM;
    sp_status st = sp_dump_read(d, SP_DUMP_HIDDEN, 0, last, 0, n, rows);
    if (st == SP_OK)
        st = sp_quadric_fit_rho(n, width, rows, &out->rho_last);
    /* h_{L-1} matters only when h_L fits: a proper dump costs one fit */
    int fits = st == SP_OK && out->rho_last <= SP_FINAL_NORM_FITS;
    if (fits)
        st = sp_dump_read(d, SP_DUMP_HIDDEN, 0, last - 1, 0, n, rows);
    if (fits && st == SP_OK)
        st = sp_quadric_fit_rho(n, width, rows, &out->rho_prev);
    free(rows);
    SP_TRY(st);
    out->checked = 1;
    out->looks_normalized = fits && out->rho_prev >= SP_FINAL_NORM_RAW;
    return SP_OK;
}
