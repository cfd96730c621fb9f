#include "study/bound_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/report.h"

enum { SIGMA_MAX, BOUND, SIGMA_A, SIGMA_Z, W2W1, WOWV, N_COLUMNS };
static const char *const column[N_COLUMNS] = {"sigma_max", "bound", "sigma_a", "sigma_z", "ffn_w2w1_norm",
                                              "attn_wo_wv_norm"};

/* The run's jacobian arrays of length L each into col (free() each), 0 when any is missing or the
 * bound is nowhere finite. */
static int read_columns(const char *dir, double *col[N_COLUMNS], int *n_blocks)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/report.h5", dir);
    sp_report_reader *r = NULL;
    int ok = sp_report_open(path, &r) == SP_OK;
    for (int c = 0; c < N_COLUMNS; c++)
        col[c] = NULL;
    *n_blocks = 0;
    for (int c = 0; ok && c < N_COLUMNS; c++) {
        sp_report_array a;
        ok = sp_report_read_array(r, "jacobian", column[c], &a) == SP_OK;
        if (ok && a.rank == 1 && (c == 0 || a.shape[0] == *n_blocks)) {
            *n_blocks = (int)a.shape[0];
            col[c] = a.data; /* kept: freed by the caller */
        } else if (ok) {
            sp_report_array_free(&a);
            ok = 0;
        }
    }
    if (r)
        sp_report_close(r);
    sp_error_clear();
    int finite = 0;
    for (int l = 0; ok && l < *n_blocks; l++)
        finite |= isfinite(col[BOUND][l]) && col[SIGMA_MAX][l] > 0;
    if (!ok || !finite) {
        for (int c = 0; c < N_COLUMNS; c++)
            free(col[c]);
        return 0;
    }
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void sp_study_bound_table(sp_text *md, sp_text *csv, int n_runs, const sp_study_run_spec *runs,
                          const char *const *dirs, const int *diverged)
{
    sp_text_printf(md, "\n## The Jacobian bound\n\nPer block, the SpanNorm bound (1/sigma_Z)(1 + ||W_2 W_1|| "
                       "(1 + ||W_O W_V||) / sigma_A) from the measured sums and weights, over the measured "
                       "sigma_max(dx_{l+1}/dx_l) (power iteration): the bound holds where the ratio is at least 1, "
                       "is loose above %g, fails below 1. Per block in `jacobian_bound.csv`; runs without both "
                       "pre-normalization sums have no bound.\n\n"
                       "| run | blocks | holds | of which loose | fails | ratio min | median | max |\n"
                       "|---|---|---|---|---|---|---|---|\n", SP_BOUND_LOOSE_RATIO);
    sp_text_printf(csv, "run,block,sigma_max,bound,ratio,sigma_a,sigma_z,ffn_w2w1_norm,attn_wo_wv_norm\n");
    int n_tabled = 0;
    for (int i = 0; i < n_runs; i++) {
        double *col[N_COLUMNS];
        int L;
        if (diverged[i] || !read_columns(dirs[i], col, &L))
            continue;
        double *ratio = malloc((size_t)L * sizeof *ratio);
        int n = 0, holds = 0, loose = 0, fails = 0;
        for (int l = 0; ratio && l < L; l++) {
            const double q = col[BOUND][l] / col[SIGMA_MAX][l];
            sp_text_printf(csv, "%s,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", runs[i].name, l, col[SIGMA_MAX][l],
                           col[BOUND][l], q, col[SIGMA_A][l], col[SIGMA_Z][l], col[W2W1][l], col[WOWV][l]);
            if (!isfinite(q))
                continue;
            ratio[n++] = q;
            holds += q >= 1;
            loose += q > SP_BOUND_LOOSE_RATIO;
            fails += q < 1;
        }
        if (ratio && n) {
            qsort(ratio, (size_t)n, sizeof *ratio, cmp_double);
            const double median = n % 2 ? ratio[n / 2] : 0.5 * (ratio[n / 2 - 1] + ratio[n / 2]);
            sp_text_printf(md, "| %s | %d | %d | %d | %d | %.3g | %.3g | %.3g |\n", runs[i].name, n, holds, loose, fails,
                           ratio[0], median, ratio[n - 1]);
            n_tabled++;
        }
        free(ratio);
        for (int c = 0; c < N_COLUMNS; c++)
            free(col[c]);
    }
    if (!n_tabled)
        sp_text_printf(md, "| (no run has a finite bound) | | | | | | | |\n");
}
