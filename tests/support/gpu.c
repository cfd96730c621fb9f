#include "tests/support/gpu.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

const sp_backend *gpu_require(void)
{
    static int said;
    const sp_backend *gpu = sp_backend_cuda();
    sp_error_clear();
    if (!gpu) {
        if (!said++)
            print_message("skipped: no CUDA GPU\n");
        skip();
    }
    return gpu;
}

int gpu_tf32(void)
{
    const char *tf32 = getenv("SPANPROBE_TF32");
    return tf32 && strcmp(tf32, "1") == 0;
}
