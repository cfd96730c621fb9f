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
/* Ends MPI if it was started (at exit: cli/main.c). */
void sp_mpi_stop(void);
int sp_mpi_rank(void); /* 0 without MPI */
int sp_mpi_size(void); /* 1 without MPI */
/* The largest of every rank's value (a collective: every rank must call it); v without MPI. */
int sp_mpi_max_int(int v);
/* x[0..n) summed over the ranks, the same bits on every rank (reduced on rank 0 in MPI's fixed
 * order, then broadcast), in place; a collective. Nothing without MPI. */
sp_status sp_mpi_sum(sp_real *x, size_t n);
/* v summed over the ranks likewise. */
double sp_mpi_sum_double(double v);
/* "Open MPI 4.1.4" or "no" (for --version). */
const char *sp_mpi_library(void);

#endif
