#include "analyzers/output.h"

#include <stdio.h>

void sp_stream_name(char *buf, size_t len, const char *base, int stream)
{
    snprintf(buf, len, "%s%s", base, stream ? "_y" : "");
}

sp_status sp_out_array(const sp_analysis *a, const char *analyzer, const char *name, int stream, int rank,
                       const int64_t *shape, const double *data, const char *units, const char *shape_desc,
                       const char *description)
{
    char full[128];
    sp_stream_name(full, sizeof full, name, stream);
    sp_report_array_attrs attrs = {.units = units, .shape_desc = shape_desc, .description = description};
    return sp_report_write_array(a->report, analyzer, full, rank, shape, data, &attrs);
}

sp_status sp_out_scalar(const sp_analysis *a, const char *analyzer, const char *key, int stream, double value)
{
    char full[128];
    sp_stream_name(full, sizeof full, key, stream);
    return sp_report_set_scalar(a->report, analyzer, full, value);
}
