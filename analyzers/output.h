/* analyzers/output.h: how the analyzers write their results: arrays and summary scalars named per
 * stream. Stream 0 (the residual stream; X for siamese) keeps the plain name, so reports of every
 * variant share keys; siamese's Y stream appends "_y" ("cosine_y", "s1_y"). */
#ifndef SP_AN_OUTPUT_H
#define SP_AN_OUTPUT_H

#include "analyzers/analyzer.h"

/* base, or base + "_y" for stream 1, into buf. */
void sp_stream_name(char *buf, size_t len, const char *base, int stream);

/* /metrics/<analyzer>/<name per stream> from fp64 host data. */
sp_status sp_out_array(const sp_analysis *a, const char *analyzer, const char *name, int stream, int rank,
                       const int64_t *shape, const double *data, const char *units, const char *shape_desc,
                       const char *description);
/* A summary scalar metrics.<analyzer>.<key per stream>. */
sp_status sp_out_scalar(const sp_analysis *a, const char *analyzer, const char *key, int stream, double value);

#endif
