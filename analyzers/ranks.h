/* analyzers/ranks.h: one analysis over MPI ranks (`mpirun -np N spanprobe analyze`, docs/scaling.md).
 *
 * Every rank loads the whole input and runs every selected analyzer. The streaming pass (and its
 * replays) walks a contiguous share of the evaluation batches on each rank, rank 0 the first ones,
 * so that sp_batch_first_seq stays an index into the whole set; the gradient and loss passes split
 * their batches likewise. Before it finalizes, an analyzer sums its accumulators over the ranks with
 * the calls below, in float64 and MPI's fixed order, so every rank holds the same bits; work per
 * block that shares no state is spread (block i on rank i mod N, the other entries zero, then summed,
 * which is exact). Every rank then computes the same results, and rank 0 alone writes them: the
 * others' report is NULL, which the writing calls take as a sink (io/report.h).
 *
 * Outside such a run (a single process, each run of an MPI study, the C API) a->n_ranks is 0 or 1
 * and every call here does nothing, so the results are bit for bit those of one process. Every call
 * is a collective: each rank makes the same calls in the same order. */
#ifndef SP_RANKS_H
#define SP_RANKS_H

#include "analyzers/analyzer.h"
#include "analyzers/moments.h"

/* The ranks sharing this analysis, at least 1. */
int sp_analysis_n_ranks(const sp_analysis *a);
/* This rank's share [*begin, *end) of n items: contiguous, rank 0 first, sizes differing by at most 1. */
void sp_analysis_share(const sp_analysis *a, int n, int *begin, int *end);
/* 1 when item i of work spread over the ranks is this rank's (i mod N). */
int sp_analysis_owns(const sp_analysis *a, int i);

/* x[0..n) summed over the ranks, in place: host memory, or backend float64 memory for _backend. */
sp_status sp_analysis_sum(const sp_analysis *a, double *x, size_t n);
sp_status sp_analysis_sum_backend(const sp_analysis *a, double *x, size_t n);
/* A count summed likewise. */
sp_status sp_analysis_sum_count(const sp_analysis *a, int64_t *n);
/* x[0..n), backend sp_real memory (parameter gradients), summed likewise in float64, then rounded. */
sp_status sp_analysis_sum_real_backend(const sp_analysis *a, sp_real *x, size_t n);
/* The largest of every rank's x[i], in place (a NaN anywhere stays NaN). */
sp_status sp_analysis_max(const sp_analysis *a, double *x, size_t n);
/* x[0..n) as rank `owner` holds it, on every rank (work spread whole, not in sums). */
sp_status sp_analysis_bcast(const sp_analysis *a, double *x, size_t n, int owner);
/* Every rank's x[0..n_local) concatenated in rank order into all[0..total) (total: the sum of the
 * n_local, which the caller knows; all may not be x). */
sp_status sp_analysis_gather(const sp_analysis *a, const double *x, size_t n_local, double *all, size_t total);

/* Column moments over the ranks. share_shift, in begin() after sp_mom_cols_init, makes the first
 * add of each column set take rank 0's shift (the mean of the evaluation set's first batch, as in one
 * process), so every rank's sums and cross-products are on one shift and simply add up: join_cols
 * adds up the column sums and row counts (once), join_cross a cross-product accumulator's totals
 * (each pass's, after it). Every rank must see at least one batch (the driver sees to it). */
void sp_analysis_share_shift(const sp_analysis *a, sp_mom_cols *cols, int n_cols);
sp_status sp_analysis_join_cols(const sp_analysis *a, sp_mom_cols *cols, int n_cols);
sp_status sp_analysis_join_cross(const sp_analysis *a, sp_mom_cross *x);

#endif
