/* core/mpi.h: spanprobe over MPI ranks (docs/scaling.md), through Open MPI where the build has it
 * (`make MPI=1`, auto-detected from mpicc like nvcc). MPI is started only in a process that an MPI
 * launcher started (mpirun, srun: its environment says so), so a plain `spanprobe ...` never touches
 * it; everywhere else, and in a build without MPI, there is one rank and every call here is a no-op. */
#ifndef SP_MPI_H
#define SP_MPI_H

#include "core/common.h"

/* Starts MPI when launched by an MPI launcher; then, unless OMP_NUM_THREADS is set, gives each rank
 * the cores of its node shared out among the node's ranks (so that `mpirun -np N` never
 * oversubscribes a machine). SP_ERR_INTERNAL when MPI fails to start. */
sp_status sp_mpi_start(int *argc, char ***argv);
/* Ends MPI if it was started (at exit: cli/main.c), with the process's exit status. A failure
 * (status != 0) among several ranks aborts the job with that status: a rank that failed alone
 * would otherwise wait in MPI_Finalize for ranks that wait in a sum for it. */
void sp_mpi_stop(int status);
int sp_mpi_rank(void); /* 0 without MPI */
int sp_mpi_size(void); /* 1 without MPI */
/* The largest of every rank's value (a collective: every rank must call it); v without MPI. */
int sp_mpi_max_int(int v);
/* x[0..n) summed over the ranks, the same bits on every rank (reduced on rank 0 in MPI's fixed
 * order, then broadcast), in place; a collective. Nothing without MPI. */
sp_status sp_mpi_sum(sp_real *x, size_t n);
/* x[0..n) in float64 summed over the ranks likewise. */
sp_status sp_mpi_sum_f64(double *x, size_t n);
/* v summed over the ranks likewise. */
double sp_mpi_sum_double(double v);
/* x[0..n) as rank `root` holds it, on every rank; a collective. Nothing without MPI. */
sp_status sp_mpi_bcast_f64(double *x, size_t n, int root);
/* bytes [0..n) as rank `root` holds them, on every rank; a collective. Nothing without MPI. */
sp_status sp_mpi_bcast_bytes(void *x, size_t n, int root);
/* This rank's index among the ranks of its node, and their number (0 and 1 without MPI): which GPU
 * it takes. */
int sp_mpi_local_rank(void);
int sp_mpi_local_size(void);
/* Every rank's x[0..n_local) concatenated in rank order into all[0..total) on every rank (total:
 * the sum of the n_local); a collective. Without MPI, a copy. */
sp_status sp_mpi_gather_f64(const double *x, size_t n_local, double *all, size_t total);
/* The smallest of every rank's value (a collective); v without MPI. */
int sp_mpi_min_int(int v);
/* Bytes this rank has handed to and taken from the calls above since it started (a sum: its values
 * in and the result out), for the communication figures of docs/scaling.md. 0 without MPI. */
double sp_mpi_bytes_moved(void);
/* "Open MPI 4.1.4" or "no" (for --version). */
const char *sp_mpi_library(void);

#endif
