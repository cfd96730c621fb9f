/* study/workers.h: independent tasks run by up to n_workers forked processes at a time, each task in
 * its own process with `threads` OpenMP threads. The caller must not have started OpenMP threads
 * or CUDA before (a forked child cannot use its parent's thread pool or GPU context). A task's
 * standard output is the parent's, line-buffered so that lines of two tasks never mix; its
 * standard error (progress bars, notes) is discarded; its error comes back to the parent. */
#ifndef SP_STUDY_WORKERS_H
#define SP_STUDY_WORKERS_H

#include "core/common.h"

/* Runs task `task` in the child; its status and error message go to the parent. */
typedef sp_status (*sp_worker_task)(void *ctx, int task);
/* Called in the parent when task ended (st: its status) after `seconds` of wall time. */
typedef void (*sp_worker_done)(void *ctx, int task, sp_status st, double seconds);

/* Called in the parent every tick_seconds while tasks run: n of them, task[k] running for
 * seconds[k]. */
typedef void (*sp_worker_tick)(void *ctx, int n, const int *task, const double *seconds);

/* Runs tasks order[0], order[1], ... in that order of starting. After a task fails no new one
 * starts; the running ones are waited for, and the failure of the lowest task number is returned
 * with its message. */
sp_status sp_workers_run(int n_tasks, const int *order, int n_workers, int threads, sp_worker_task task,
                         sp_worker_done done, sp_worker_tick tick, double tick_seconds, void *ctx);

#endif
