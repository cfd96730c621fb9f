/* cli/inspect_stats.h: what `inspect` reports of every tensor, whatever file it comes from: running
 * statistics of its finite values and their JSON form. */
#ifndef SP_CLI_INSPECT_STATS_H
#define SP_CLI_INSPECT_STATS_H

#include <cJSON.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t n_finite, n_nonfinite;
    double min, max, mean, m2; /* Welford's running mean and sum of squared deviations */
} sp_inspect_stats;

void sp_inspect_stats_add(sp_inspect_stats *s, const double *x, size_t n);
/* Adds min, max, mean, std (when any value is finite) and nonfinite to a tensor's JSON object. */
void sp_inspect_stats_to_json(const sp_inspect_stats *s, cJSON *tensor);
/* NaN and Inf as strings; integers beyond 2^53 as strings. */
cJSON *sp_inspect_json_number(double v);
cJSON *sp_inspect_json_int(int64_t v, int is_unsigned);

#endif
