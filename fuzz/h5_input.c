#include "fuzz/h5_input.h"

#include <stdio.h>
#include <stdlib.h>

#include "fuzz/temp_file.h"
#include "io/h5.h"

const char *fuzz_h5_file(const uint8_t *data, size_t size)
{
    static int vet_set;
    if (!vet_set) {
        sp_h5_set_vet_seconds(1);
        vet_set = 1;
    }
    return fuzz_temp_file("in.h5", data, size);
}

void fuzz_h5_done(void)
{
    ssize_t open_ids = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (open_ids != 0) {
        fprintf(stderr, "fuzz: the reader left %zd HDF5 objects open\n", open_ids);
        abort();
    }
    sp_error_clear();
}
