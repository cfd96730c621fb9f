#include <string.h>

#include "kernels/backend.h"

#ifndef SP_HAVE_CUDA
const sp_backend *sp_backend_cuda(void) { return NULL; }
#endif

sp_status sp_backend_select(const char *name, const sp_backend **out)
{
    if (strcmp(name, "cpu") == 0) {
        *out = sp_backend_cpu();
        return SP_OK;
    }
    const sp_backend *cuda = sp_backend_cuda();
    if (strcmp(name, "auto") == 0) {
        *out = cuda ? cuda : sp_backend_cpu();
        return SP_OK;
    }
    if (strcmp(name, "cuda") == 0) {
        if (!cuda)
            return sp_error(SP_ERR_USAGE, "--device cuda: %s",
#if defined(SP_DOUBLE)
                            "the float64 build (spanprobe-f64) has no CUDA backend, which is float32 only: use "
                            "--device cpu"
#elif defined(SP_HAVE_CUDA)
                            "no CUDA GPU is visible"
#else
                            "this spanprobe was built without the CUDA backend (nvcc was not found)"
#endif
            );
        *out = cuda;
        return SP_OK;
    }
    return sp_error(SP_ERR_USAGE, "--device: unknown device '%s' (expected cpu|cuda|auto)", name);
}
