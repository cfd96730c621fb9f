/* kernels/cuda/cuda_ranks.cu: the CUDA backend over MPI ranks (docs/scaling.md). Each rank of a node
 * takes its own GPU (its index among the node's ranks, modulo the GPUs it sees). Sums over the
 * ranks go through NCCL's all-reduce between the GPUs where the build has NCCL (SP_HAVE_NCCL:
 * make NCCL=1, auto-detected beside CUDA and MPI) and every rank has a GPU of its own (NCCL refuses
 * two ranks on one GPU); else through host copies and MPI. NCCL's ring all-reduce hands every rank
 * the same bits; its order of summation is its own (fixed for one set of GPUs), not MPI's. */
#include "kernels/cuda/cuda_ops.h"

#ifdef SP_HAVE_NCCL
#include <nccl.h>
#endif

#include <stdlib.h>

extern "C" {
#include "core/mpi.h"
}

bool sp_cuda_select_device(int n_devices)
{
    return SP_CUDA_CHECK(cudaSetDevice(sp_mpi_local_rank() % n_devices));
}

/* x[0..n) on the device summed over the ranks through host copies and MPI's sum. */
static sp_status sum_through_host(float *x, size_t n)
{
    float *host = (float *)sp_malloc(n * sizeof *host, "sum over MPI ranks");
    if (!host)
        return SP_ERR_NOMEM;
    sp_status st = SP_CUDA_CHECK(cudaMemcpy(host, x, n * sizeof *host, cudaMemcpyDeviceToHost)) ? SP_OK
                                                                                               : SP_ERR_INTERNAL;
    if (st == SP_OK)
        st = sp_mpi_sum(host, n);
    if (st == SP_OK && !SP_CUDA_CHECK(cudaMemcpy(x, host, n * sizeof *host, cudaMemcpyHostToDevice)))
        st = SP_ERR_INTERNAL;
    free(host);
    return st;
}

#ifdef SP_HAVE_NCCL

/* One communicator over every rank, made at the first sum where every rank has a GPU of its own
 * (decided together: 1 use, -1 not): rank 0's unique id broadcast over MPI. */
static ncclComm_t comm;
static int comm_state;

static sp_status nccl_check(ncclResult_t rc, const char *call)
{
    return rc == ncclSuccess ? SP_OK : sp_error(SP_ERR_INTERNAL, "NCCL: %s: %s", call, ncclGetErrorString(rc));
}

static sp_status make_comm(void)
{
    ncclUniqueId id;
    if (sp_mpi_rank() == 0)
        SP_TRY(nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    SP_TRY(sp_mpi_bcast_bytes(&id, sizeof id, 0));
    SP_TRY(nccl_check(ncclCommInitRank(&comm, sp_mpi_size(), id, sp_mpi_rank()), "ncclCommInitRank"));
    return SP_OK;
}

sp_status sp_cuda_sum_over_ranks(float *x, size_t n)
{
    if (sp_mpi_size() == 1 || n == 0)
        return SP_OK;
    if (comm_state == 0) {
        int gpus_on_node = 0; /* a failed query counts as none: every rank still joins the decision */
        if (cudaGetDeviceCount(&gpus_on_node) != cudaSuccess)
            gpus_on_node = 0;
        comm_state = sp_mpi_min_int(sp_mpi_local_size() <= gpus_on_node) ? 1 : -1;
        if (comm_state == 1)
            SP_TRY(make_comm());
    }
    if (comm_state < 0)
        return sum_through_host(x, n);
    /* on the legacy default stream, ordered with every other op; the result is waited for, as the
     * host-memory sums are */
    SP_TRY(nccl_check(ncclAllReduce(x, x, n, ncclFloat, ncclSum, comm, cudaStreamLegacy), "ncclAllReduce"));
    return SP_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy)) ? SP_OK : SP_ERR_INTERNAL;
}

#else

sp_status sp_cuda_sum_over_ranks(float *x, size_t n)
{
    return sp_mpi_size() == 1 || n == 0 ? SP_OK : sum_through_host(x, n);
}

#endif
