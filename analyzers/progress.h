/* analyzers/progress.h: progress lines on stderr for long stages, and the monotonic clock that
 * times them. Nothing is printed for a stage shorter than SP_PROGRESS_DELAY seconds; on a terminal
 * the line is rewritten in place, elsewhere (logs) a new line appears every few seconds. */
#ifndef SP_PROGRESS_H
#define SP_PROGRESS_H

#include <stdint.h>

#define SP_PROGRESS_DELAY 2.0

typedef struct {
    const char *label;
    int quiet, tty, printed;
    double start, last;
} sp_progress;

/* Seconds on a monotonic clock. */
double sp_clock_seconds(void);

void sp_progress_start(sp_progress *p, const char *label, int quiet);
/* done of total units (batches) finished. */
void sp_progress_update(sp_progress *p, int64_t done, int64_t total);
/* Ends the line if anything was printed. */
void sp_progress_end(sp_progress *p);

#endif
