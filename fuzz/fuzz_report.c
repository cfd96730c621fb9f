/* fuzz/fuzz_report.c: an analysis report (HDF5, io/report.h) and its JSON summary: open, the
 * provenance, every array of every analyzer, then the summary.
 * Input: a 4-byte little-endian length n, n bytes of the report, the rest its summary (an input too
 * short for that is all report, with an empty summary); fuzz/make_seeds.sh joins them. */
#include <cJSON.h>
#include <stdlib.h>

#include "fuzz/h5_input.h"
#include "fuzz/temp_file.h"
#include "io/report.h"

static void read_analyzer(sp_report_reader *r, const char *analyzer)
{
    char **names = NULL;
    int n = 0;
    if (sp_report_list(r, analyzer, &names, &n) != SP_OK)
        return;
    for (int i = 0; i < n; i++) {
        sp_report_array a;
        if (sp_report_read_array(r, analyzer, names[i], &a) == SP_OK)
            sp_report_array_free(&a);
        sp_error_clear();
    }
    sp_report_names_free(names, n);
}

static void read_report(sp_report_reader *r)
{
    char buf[256];
    sp_report_get_provenance(r, "input_sha256", buf, sizeof buf);
    sp_error_clear();
    char **analyzers = NULL;
    int n = 0;
    if (sp_report_list(r, NULL, &analyzers, &n) == SP_OK) {
        for (int i = 0; i < n; i++)
            read_analyzer(r, analyzers[i]);
        sp_report_names_free(analyzers, n);
    }
    sp_error_clear();
    cJSON *summary = NULL;
    if (sp_report_read_summary(r, &summary) == SP_OK)
        cJSON_Delete(summary);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = size;
    if (size >= 4) {
        uint32_t len = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
        if (len <= size - 4) {
            data += 4;
            size -= 4;
            n = len;
        }
    }
    fuzz_temp_file("in.json", data + n, size - n); /* the summary path of in.h5 */
    sp_report_reader *r = NULL;
    if (sp_report_open(FUZZ_H5_INPUT(data, n), &r) == SP_OK) {
        read_report(r);
        sp_report_close(r);
    }
    fuzz_h5_done();
    return 0;
}
