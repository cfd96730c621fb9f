/* kernels/cuda/cuda_solver_pool.cu: the cuSOLVER slots (stream, handle, workspaces) and the runner
 * that decomposes the matrices of one batch on them concurrently (cuda_ops.h says how).
 *
 * Ordering. The slot streams come from cudaStreamCreate, so they are blocking streams: work queued
 * on one of them waits for everything queued before on the legacy default stream (the rest of the
 * backend: the gemm that built the matrices), and work queued later on the legacy default stream
 * (the kernels, copies and synchronous downloads after the batch) waits for everything queued
 * before on them. The runner starts its threads after the caller queued the inputs and joins them
 * before the caller queues anything else, so "before" and "after" hold on the host clock too. This
 * needs the legacy default stream: nothing here or in the Makefile may use per-thread default
 * streams (--default-stream per-thread or CUDA_API_PER_THREAD_DEFAULT_STREAM).
 *
 * Threads. The workers only call cuSOLVER (and cudaSetDevice / cudaStreamSynchronize): they never
 * allocate or call sp_error, which are not thread-safe. Each records its first failure, and the
 * caller's thread reports the first failing item after the join. */
#include <stdlib.h>

#include <thread>
#include <vector>

#include "kernels/cuda/cuda_ops.h"

static sp_cuda_solver_slot slots[SP_CUDA_SOLVER_STREAMS];
static bool slots_ready;

static void slot_destroy(sp_cuda_solver_slot *slot)
{
    if (slot->params)
        cusolverDnDestroyParams(slot->params);
    if (slot->handle)
        cusolverDnDestroy(slot->handle);
    if (slot->stream)
        cudaStreamDestroy(slot->stream);
    sp_cuda_free(slot->work);
    free(slot->host_work);
    *slot = sp_cuda_solver_slot{};
}

static bool slot_create(sp_cuda_solver_slot *slot)
{
    return SP_CUDA_CHECK(cudaStreamCreate(&slot->stream)) && SP_CUSOLVER_CHECK(cusolverDnCreate(&slot->handle)) &&
           SP_CUSOLVER_CHECK(cusolverDnSetStream(slot->handle, slot->stream)) &&
           SP_CUSOLVER_CHECK(cusolverDnCreateParams(&slot->params));
}

sp_cuda_solver_slot *sp_cuda_solver_slots(void)
{
    if (slots_ready)
        return slots;
    for (int i = 0; i < SP_CUDA_SOLVER_STREAMS; i++)
        if (!slot_create(&slots[i])) {
            for (int j = 0; j <= i; j++)
                slot_destroy(&slots[j]);
            return NULL; /* slot_create recorded the failing call */
        }
    slots_ready = true;
    return slots;
}

bool sp_cuda_solver_reserve(sp_cuda_solver_slot *slot, size_t device_bytes, size_t host_bytes)
{
    if (device_bytes > slot->work_bytes) {
        sp_cuda_free(slot->work); /* cudaFree waits until the work that used it is done */
        slot->work_bytes = 0;
        slot->work = sp_cuda_alloc(device_bytes, "cuSOLVER workspace");
        if (!slot->work)
            return false;
        slot->work_bytes = device_bytes;
    }
    if (host_bytes > slot->host_work_bytes) {
        free(slot->host_work);
        slot->host_work_bytes = 0;
        slot->host_work = malloc(host_bytes);
        if (!slot->host_work) {
            sp_error(SP_ERR_NOMEM, "out of memory allocating %zu bytes of cuSOLVER host workspace", host_bytes);
            return false;
        }
        slot->host_work_bytes = host_bytes;
    }
    return true;
}

typedef struct {
    int item;                /* first failing item, -1: none */
    cusolverStatus_t status; /* its cuSOLVER status, or SUCCESS when a CUDA call failed */
    cudaError_t cuda_err;
} slot_failure;

static void run_slot(int slot_index, int device, int n_items, sp_cuda_solve_fn solve, void *ctx, slot_failure *fail)
{
    sp_cuda_solver_slot *slot = &slots[slot_index];
    *fail = slot_failure{-1, CUSOLVER_STATUS_SUCCESS, cudaSuccess};
    cudaError_t err = cudaSetDevice(device); /* a new thread starts on device 0 */
    if (err != cudaSuccess) {
        *fail = slot_failure{slot_index, CUSOLVER_STATUS_SUCCESS, err};
        return;
    }
    for (int item = slot_index; item < n_items; item += SP_CUDA_SOLVER_STREAMS) {
        cusolverStatus_t status = solve(slot, item, ctx);
        /* a host workspace may still be read by the queued work: finish it before the next item */
        err = status == CUSOLVER_STATUS_SUCCESS && slot->host_work_bytes ? cudaStreamSynchronize(slot->stream)
                                                                         : cudaSuccess;
        if (status != CUSOLVER_STATUS_SUCCESS || err != cudaSuccess) {
            *fail = slot_failure{item, status, err};
            return;
        }
    }
}

bool sp_cuda_solver_run(int n_items, sp_cuda_solve_fn solve, void *ctx, const char *what)
{
    int device = 0;
    if (!SP_CUDA_CHECK(cudaGetDevice(&device)))
        return false;
    const int n_slots = n_items < SP_CUDA_SOLVER_STREAMS ? n_items : SP_CUDA_SOLVER_STREAMS;
    slot_failure failures[SP_CUDA_SOLVER_STREAMS];
    /* slots 1.. on their own threads, slot 0 (and any slot whose thread cannot start) on this one */
    std::vector<std::thread> workers;
    bool inline_slot[SP_CUDA_SOLVER_STREAMS] = {true};
    for (int s = 1; s < n_slots; s++) {
        try {
            workers.emplace_back(run_slot, s, device, n_items, solve, ctx, &failures[s]);
        } catch (...) { /* std::system_error: no more threads */
            inline_slot[s] = true;
        }
    }
    for (int s = 0; s < n_slots; s++)
        if (inline_slot[s])
            run_slot(s, device, n_items, solve, ctx, &failures[s]);
    for (std::thread &worker : workers)
        worker.join();

    const slot_failure *first = NULL;
    for (int s = 0; s < n_slots; s++)
        if (failures[s].item >= 0 && (!first || failures[s].item < first->item))
            first = &failures[s];
    if (!first)
        return true;
    if (first->cuda_err != cudaSuccess)
        sp_error(SP_ERR_INTERNAL, "%s: CUDA failed on the cuSOLVER stream of item %d of %d: %s (%s)", what,
                 first->item, n_items, cudaGetErrorString(first->cuda_err), cudaGetErrorName(first->cuda_err));
    else
        sp_error(first->status == CUSOLVER_STATUS_ALLOC_FAILED ? SP_ERR_NOMEM : SP_ERR_INTERNAL,
                 "%s: cuSOLVER failed on item %d of %d: %s (status %d)", what, first->item, n_items,
                 sp_cusolver_status_name(first->status), (int)first->status);
    return false;
}
