/* fuzz/fuzz_trainlog.c: a training log (HDF5, train/trainlog.h), read whole. */
#include "fuzz/h5_input.h"
#include "train/trainlog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_trainlog log;
    if (sp_trainlog_read(FUZZ_H5_INPUT(data, size), &log) == SP_OK)
        sp_trainlog_free(&log);
    fuzz_h5_done();
    return 0;
}
