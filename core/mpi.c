#include "core/mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef SP_HAVE_MPI
#include <mpi.h>
#include <omp.h>

static int started, rank, size = 1;

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
    if (!getenv("OMP_NUM_THREADS")) { /* the node's cores shared out among its ranks */
        MPI_Comm node;
        int local = 1;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
            MPI_Comm_size(node, &local);
            MPI_Comm_free(&node);
        }
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        omp_set_num_threads(cores / local > 1 ? (int)(cores / local) : 1);
    }
    return SP_OK;
}

void sp_mpi_stop(void)
{
    if (started)
        MPI_Finalize();
    started = 0;
}

int sp_mpi_rank(void) { return rank; }
int sp_mpi_size(void) { return size; }

int sp_mpi_max_int(int v)
{
    int out = v;
    if (started)
        MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

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
    }
    return SP_OK;
}

sp_status sp_mpi_sum(sp_real *x, size_t n)
{
    return sum_in_place(x, n, sizeof *x, sizeof *x == sizeof(float) ? MPI_FLOAT : MPI_DOUBLE);
}

double sp_mpi_sum_double(double v)
{
    sum_in_place(&v, 1, sizeof v, MPI_DOUBLE);
    return v;
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

void sp_mpi_stop(void) {}
int sp_mpi_rank(void) { return 0; }
int sp_mpi_size(void) { return 1; }
int sp_mpi_max_int(int v) { return v; }
const char *sp_mpi_library(void) { return "no"; }

sp_status sp_mpi_sum(sp_real *x, size_t n)
{
    (void)x;
    (void)n;
    return SP_OK;
}

double sp_mpi_sum_double(double v) { return v; }

#endif
