#include "analyzers/progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* Seconds between lines when stderr is not a terminal (rewritten lines update every second). */
#define LOG_INTERVAL 10.0

double sp_clock_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void sp_progress_start(sp_progress *p, const char *label, int quiet)
{
    double now = sp_clock_seconds();
    *p = (sp_progress){.label = label, .quiet = quiet, .tty = isatty(STDERR_FILENO), .start = now, .last = now};
}

void sp_progress_update(sp_progress *p, int64_t done, int64_t total)
{
    double now = sp_clock_seconds(), elapsed = now - p->start;
    if (p->quiet || elapsed < SP_PROGRESS_DELAY || now - p->last < (p->tty ? 1.0 : LOG_INTERVAL) || total <= 0)
        return;
    p->last = now;
    double left = done > 0 ? elapsed * (double)(total - done) / (double)done : 0;
    fprintf(stderr, "%sanalyze: %s %lld/%lld (%.0f%%), %.1f s elapsed, ~%.0f s left%s", p->tty ? "\r" : "",
            p->label, (long long)done, (long long)total, 100.0 * (double)done / (double)total, elapsed, left,
            p->tty ? "   " : "\n");
    p->printed = 1;
}

void sp_progress_end(sp_progress *p)
{
    if (p->printed && p->tty)
        fprintf(stderr, "\n");
    p->printed = 0;
}
