/* train/schedule.h: the learning-rate schedule, linear warm-up then cosine decay to a minimum.
 *
 * Step s = 0, 1, ... is the optimizer step about to be taken. During warm-up (s < warmup) the rate
 * rises linearly, lr (s + 1) / warmup, reaching lr at the last warm-up step; then it follows half a
 * cosine from lr (at s = warmup) to min_lr (at s = total - 1) and stays at min_lr beyond. A pure
 * function of the step, so a resumed run continues the same curve.
 */
#ifndef SP_SCHEDULE_H
#define SP_SCHEDULE_H

#include <stdint.h>

typedef struct {
    double lr, min_lr;
    int64_t warmup_steps, total_steps;
} sp_lr_schedule;

double sp_lr_at(const sp_lr_schedule *s, int64_t step);

#endif
