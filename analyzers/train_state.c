/* analyzers/train_state.c: the summary group "train" of a report (analyzers/train_state.h). */
#include "analyzers/train_state.h"

#include <string.h>

sp_status sp_analyze_record_train_state(sp_report *r, const sp_train_state *ts)
{
    if (!ts->present)
        return SP_OK;
    const struct {
        const char *key;
        double value;
    } scalars[] = {
        {"step", (double)ts->step},
        {"tokens_seen", (double)ts->tokens_seen},
        {"diverged", strcmp(ts->status, "diverged") == 0},
        {"diverged_step", (double)ts->diverged_step},
        {"done", strcmp(ts->status, "done") == 0},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(scalars); i++)
        SP_TRY(sp_report_set_scalar(r, SP_TRAIN_STATE_GROUP, scalars[i].key, scalars[i].value));
    return SP_OK;
}
