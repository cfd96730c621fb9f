#include "study/workers.h"

#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <time.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    int task, fd; /* fd: the read end of the child's error pipe */
    double start; /* seconds (CLOCK_MONOTONIC) */
} worker;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* In the child: runs the task and reports "<status> <message>" through fd; never returns. */
static void child(int fd, int threads, sp_worker_task task, void *ctx, int t, pid_t parent)
{
#ifdef __linux__
    /* a study killed outright takes its workers with it, so that a rerun finds no run still written */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(1);
#else
    (void)parent;
#endif
    setvbuf(stdout, NULL, _IOLBF, 0);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, STDERR_FILENO);
        close(null);
    }
    omp_set_num_threads(threads);
    sp_error_clear();
    const sp_status st = task(ctx, t);
    char msg[4200];
    const int len = snprintf(msg, sizeof msg, "%d %s", (int)st, st == SP_OK ? "" : sp_error_message());
    if (write(fd, msg, (size_t)(len < (int)sizeof msg ? len : (int)sizeof msg - 1)) < 0)
        _exit(1);
    fflush(stdout);
    _exit(st == SP_OK ? 0 : 1); /* no atexit handlers: the parent's libraries own their state */
}

static sp_status start(worker *w, int threads, sp_worker_task task, void *ctx, int t)
{
    int fds[2];
    if (pipe(fds) != 0)
        return sp_error(SP_ERR_IO, "study: cannot start a worker (pipe: %s)", strerror(errno));
    fflush(NULL); /* nothing buffered is written twice */
    const pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        const int e = errno;
        close(fds[0]);
        close(fds[1]);
        return sp_error(SP_ERR_IO, "study: cannot start a worker (fork: %s)", strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        child(fds[1], threads, task, ctx, t, parent);
    }
    close(fds[1]);
    *w = (worker){pid, t, fds[0], now_s()};
    return SP_OK;
}

/* The status a finished worker reported, its message set as the current error. */
static sp_status collect(const worker *w, int wstatus)
{
    char msg[4200];
    size_t len = 0;
    for (ssize_t got; len + 1 < sizeof msg && (got = read(w->fd, msg + len, sizeof msg - 1 - len)) != 0;) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            break;
        len += (size_t)got;
    }
    close(w->fd);
    msg[len] = '\0';
    int code = 0, offset = 0;
    if (len == 0 || sscanf(msg, "%d %n", &code, &offset) < 1)
        return sp_error(SP_ERR_IO, "study: a worker process ended without a result (%s %d)",
                        WIFSIGNALED(wstatus) ? "signal" : "exit status",
                        WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : WEXITSTATUS(wstatus));
    return code == SP_OK ? SP_OK : sp_error((sp_status)code, "%s", msg + offset);
}

typedef struct {
    sp_worker_tick fn;
    double every, last; /* seconds */
    void *ctx;
} ticker;

/* Waits for any worker to end, ticking meanwhile. */
static pid_t wait_any(const worker *w, int running, int *wstatus, ticker *tick)
{
    for (;;) {
        const pid_t pid = waitpid(-1, wstatus, WNOHANG);
        if (pid != 0)
            return pid;
        const double now = now_s();
        if (now - tick->last >= tick->every) {
            int task[64];
            double seconds[64];
            int n = 0;
            for (int k = 0; k < running && n < 64; k++, n++) {
                task[n] = w[k].task;
                seconds[n] = now - w[k].start;
            }
            tick->fn(tick->ctx, n, task, seconds);
            tick->last = now;
        }
        nanosleep(&(struct timespec){0, 200000000}, NULL); /* a worker runs for minutes: 0.2 s is nothing */
    }
}

sp_status sp_workers_run(int n_tasks, const int *order, int n_workers, int threads, sp_worker_task task,
                         sp_worker_done done, sp_worker_tick tick, double tick_seconds, void *ctx)
{
    ticker ticks = {tick, tick_seconds, now_s(), ctx};
    worker *w = calloc((size_t)n_workers, sizeof *w);
    if (!w)
        return sp_error(SP_ERR_NOMEM, "study: out of memory");
    sp_status first = SP_OK;
    int first_task = 0;
    char first_msg[4200] = "";
    int next = 0, running = 0;
    while (running > 0 || (next < n_tasks && first == SP_OK)) {
        while (running < n_workers && next < n_tasks && first == SP_OK) {
            sp_status st = start(&w[running], threads, task, ctx, order[next]);
            if (st != SP_OK) {
                first = st;
                snprintf(first_msg, sizeof first_msg, "%s", sp_error_message());
                break;
            }
            running++;
            next++;
        }
        if (running == 0)
            break;
        int wstatus;
        const pid_t pid = wait_any(w, running, &wstatus, &ticks);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0) { /* cannot happen while children run; never spin */
            if (first == SP_OK) {
                first = SP_ERR_IO;
                snprintf(first_msg, sizeof first_msg, "study: lost track of its workers (waitpid: %s)", strerror(errno));
            }
            break;
        }
        int k = 0;
        while (k < running && w[k].pid != pid)
            k++;
        if (k == running)
            continue; /* not one of ours (a vetting child reaped elsewhere never gets here) */
        sp_status st = collect(&w[k], wstatus);
        if (st != SP_OK && (first == SP_OK || w[k].task < first_task)) { /* the same report however they interleave */
            first = st;
            first_task = w[k].task;
            snprintf(first_msg, sizeof first_msg, "%s", sp_error_message());
        }
        sp_error_clear();
        done(ctx, w[k].task, st, now_s() - w[k].start);
        w[k] = w[--running];
    }
    free(w);
    return first == SP_OK ? SP_OK : sp_error(first, "%s", first_msg);
}
