#include "fuzz/h5_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/h5_tree.h"
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

const char *fuzz_h5_tree_file(const uint8_t *data, size_t size)
{
    sp_h5_set_vet_in_process(1);
    size_t n;
    uint8_t *image = fuzz_h5_tree_image(data, size, &n);
    const char *path = fuzz_temp_file("in.h5", image, n);
    free(image);
    return path;
}

/* FUZZ_H5_DESCRIBE=DIR: describe the HDF5 files named on the command line (libFuzzer calls this
 * before it reads its arguments). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("FUZZ_H5_DESCRIBE");
    if (!dir)
        return 0;
    int status = 0;
    for (int i = 1; i < *argc; i++) {
        const char *in = (*argv)[i], *base = strrchr(in, '/');
        size_t n;
        uint8_t *tree = in[0] == '-' ? NULL : fuzz_h5_tree_describe(in, &n);
        char out[4096];
        snprintf(out, sizeof out, "%s/%s", dir, base ? base + 1 : in);
        FILE *f = tree ? fopen(out, "wb") : NULL;
        int written = f && fwrite(tree, 1, n, f) == n;
        if ((f && fclose(f) != 0) || !written) {
            fprintf(stderr, "fuzz: %s: cannot describe it as %s\n", in, out);
            status = 1;
        }
        free(tree);
    }
    exit(status);
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
