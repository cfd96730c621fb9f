#include "train/schedule.h"

#include <math.h>

double sp_lr_at(const sp_lr_schedule *s, int64_t step)
{
    if (step < s->warmup_steps)
        return s->lr * (double)(step + 1) / (double)s->warmup_steps;
    int64_t decay_steps = s->total_steps - 1 - s->warmup_steps;
    double progress = decay_steps > 0 ? (double)(step - s->warmup_steps) / (double)decay_steps : 1.0;
    if (progress >= 1.0)
        return s->min_lr;
    return s->min_lr + 0.5 * (s->lr - s->min_lr) * (1.0 + cos(3.14159265358979323846 * progress));
}
