/* tests/support/gpu.h: what the CUDA tests share: the GPU or a skip, and the TF32 switch. */
#ifndef SP_TEST_GPU_H
#define SP_TEST_GPU_H

#include "kernels/backend.h"

/* The CUDA backend; without a visible GPU the calling cmocka test is skipped, and the first skip
 * prints "skipped: no CUDA GPU". Clears the error state either way. */
const sp_backend *gpu_require(void);
/* 1 when SPANPROBE_TF32=1 lets cuBLAS round fp32 operands to TF32. */
int gpu_tf32(void);

#endif
