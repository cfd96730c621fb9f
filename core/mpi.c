#include "core/mpi.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef SP_HAVE_MPI
#include <mpi.h>
#include <omp.h>

static int started, rank, size = 1, local_rank, local_size = 1;
static double bytes_moved; /* sp_mpi_bytes_moved */

/* The launchers' markers: Open MPI's mpirun, PMIx (Slurm's srun, newer mpiruns), MPICH's Hydra. */
static int launched_by_mpi(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_SIZE");
}

sp_status sp_mpi_start(int *argc, char ***argv)
{
    if (started || !launched_by_mpi())
        return SP_OK;
    if (MPI_Init(argc, argv) != MPI_SUCCESS)
        return sp_error(SP_ERR_INTERNAL, "MPI_Init failed");
    started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node; /* the ranks of this node: they share its cores and GPUs */
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &local_size);
        MPI_Comm_rank(node, &local_rank);
        MPI_Comm_free(&node);
    }
    if (!getenv("OMP_NUM_THREADS")) { /* the node's cores shared out among its ranks */
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        omp_set_num_threads(cores / local_size > 1 ? (int)(cores / local_size) : 1);
    }
    return SP_OK;
}

void sp_mpi_stop(int status)
{
    if (started && status != 0 && size > 1)
        MPI_Abort(MPI_COMM_WORLD, status); /* mpirun ends every rank and exits with it */
    if (started)
        MPI_Finalize();
    started = 0;
}

int sp_mpi_rank(void) { return rank; }
int sp_mpi_size(void) { return size; }

static int reduce_int(int v, MPI_Op op)
{
    int out = v;
    if (started)
        MPI_Allreduce(&v, &out, 1, MPI_INT, op, MPI_COMM_WORLD);
    return out;
}

int sp_mpi_max_int(int v) { return reduce_int(v, MPI_MAX); }
int sp_mpi_min_int(int v) { return reduce_int(v, MPI_MIN); }

/* Reduces then broadcasts count elements of type in place, in chunks MPI's int counts can hold. */
static sp_status sum_in_place(void *x, size_t n, size_t elem, MPI_Datatype type)
{
    const size_t chunk = (size_t)1 << 30;
    for (size_t at = 0; started && size > 1 && at < n; at += chunk) {
        const int count = (int)(n - at < chunk ? n - at : chunk);
        char *p = (char *)x + at * elem;
        int rc = rank == 0 ? MPI_Reduce(MPI_IN_PLACE, p, count, type, MPI_SUM, 0, MPI_COMM_WORLD)
                           : MPI_Reduce(p, NULL, count, type, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS || MPI_Bcast(p, count, type, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
            return sp_error(SP_ERR_INTERNAL, "MPI: a sum over the ranks failed");
        bytes_moved += 2.0 * count * (double)elem;
    }
    return SP_OK;
}

sp_status sp_mpi_sum(sp_real *x, size_t n)
{
    return sum_in_place(x, n, sizeof *x, sizeof *x == sizeof(float) ? MPI_FLOAT : MPI_DOUBLE);
}

sp_status sp_mpi_sum_f64(double *x, size_t n) { return sum_in_place(x, n, sizeof *x, MPI_DOUBLE); }

double sp_mpi_sum_double(double v)
{
    sum_in_place(&v, 1, sizeof v, MPI_DOUBLE);
    return v;
}

sp_status sp_mpi_gather_f64(const double *x, size_t n_local, double *all, size_t total)
{
    if (!started || size == 1) {
        memcpy(all, x, n_local * sizeof *x);
        return SP_OK;
    }
    if (total > INT_MAX)
        return sp_error(SP_ERR_INTERNAL, "MPI: %zu values to gather exceed what one call takes", total);
    int *counts = sp_malloc(2 * (size_t)size * sizeof *counts, "MPI gather counts"), *offsets = counts + size;
    if (!counts)
        return SP_ERR_NOMEM;
    const int mine = (int)n_local;
    int rc = MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    size_t sum = 0;
    for (int r = 0; r < size; r++) {
        offsets[r] = (int)sum;
        sum += (size_t)counts[r];
    }
    if (rc == MPI_SUCCESS && sum == total)
        rc = MPI_Allgatherv(x, mine, MPI_DOUBLE, all, counts, offsets, MPI_DOUBLE, MPI_COMM_WORLD);
    bytes_moved += (double)(n_local + total) * sizeof *x;
    free(counts);
    if (sum != total)
        return sp_error(SP_ERR_INTERNAL, "MPI: the ranks hold %zu values to gather, not %zu", sum, total);
    return rc == MPI_SUCCESS ? SP_OK : sp_error(SP_ERR_INTERNAL, "MPI: a gather from the ranks failed");
}

sp_status sp_mpi_bcast_f64(double *x, size_t n, int root)
{
    const size_t chunk = (size_t)1 << 30;
    for (size_t at = 0; started && size > 1 && at < n; at += chunk) {
        const int count = (int)(n - at < chunk ? n - at : chunk);
        if (MPI_Bcast(x + at, count, MPI_DOUBLE, root, MPI_COMM_WORLD) != MPI_SUCCESS)
            return sp_error(SP_ERR_INTERNAL, "MPI: a broadcast to the ranks failed");
        bytes_moved += (double)count * sizeof *x;
    }
    return SP_OK;
}

double sp_mpi_bytes_moved(void) { return bytes_moved; }
int sp_mpi_local_rank(void) { return local_rank; }
int sp_mpi_local_size(void) { return local_size; }

sp_status sp_mpi_bcast_bytes(void *x, size_t n, int root)
{
    if (started && size > 1 && (n > INT_MAX || MPI_Bcast(x, (int)n, MPI_BYTE, root, MPI_COMM_WORLD) != MPI_SUCCESS))
        return sp_error(SP_ERR_INTERNAL, "MPI: a broadcast of %zu bytes to the ranks failed", n);
    return SP_OK;
}

const char *sp_mpi_library(void)
{
    static char name[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (!name[0] && MPI_Get_library_version(name, &len) == MPI_SUCCESS) {
        char *end = name; /* the first line, up to the first comma: "Open MPI v4.1.4" */
        while (*end && *end != '\n' && *end != ',')
            end++;
        *end = '\0';
    }
    return name;
}

#else

sp_status sp_mpi_start(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return SP_OK;
}

void sp_mpi_stop(int status) { (void)status; }
int sp_mpi_rank(void) { return 0; }
int sp_mpi_size(void) { return 1; }
int sp_mpi_max_int(int v) { return v; }
int sp_mpi_min_int(int v) { return v; }
double sp_mpi_bytes_moved(void) { return 0; }
int sp_mpi_local_rank(void) { return 0; }
int sp_mpi_local_size(void) { return 1; }

sp_status sp_mpi_bcast_bytes(void *x, size_t n, int root)
{
    (void)x;
    (void)n;
    (void)root;
    return SP_OK;
}
const char *sp_mpi_library(void) { return "no"; }

sp_status sp_mpi_sum(sp_real *x, size_t n)
{
    (void)x;
    (void)n;
    return SP_OK;
}

sp_status sp_mpi_sum_f64(double *x, size_t n)
{
    (void)x;
    (void)n;
    return SP_OK;
}

double sp_mpi_sum_double(double v) { return v; }

sp_status sp_mpi_gather_f64(const double *x, size_t n_local, double *all, size_t total)
{
    (void)total;
    memcpy(all, x, n_local * sizeof *x);
    return SP_OK;
}

sp_status sp_mpi_bcast_f64(double *x, size_t n, int root)
{
    (void)x;
    (void)n;
    (void)root;
    return SP_OK;
}

#endif
