/* kernels/cuda/cuda_rope.cu: rotary position embedding, in place, llama2.c's interleaved layout.
 * Pair i < rot_dims / 2 of each head (dims 2i, 2i+1) of row r turns by pos * inv_freq[i],
 * pos = r % seq_len; the angle, its sine and cosine are computed in double (pos * freq reaches
 * hundreds of radians, where float would lose about 1e-5). Dims from rot_dims on are not touched.
 * direction -1 turns by the opposite angle: the inverse, and the transpose. One thread per
 * (row, pair) computes the angle once and turns that pair in every head. */
#include "kernels/cuda/cuda_ops.h"

static __global__ void rope_kernel(size_t n, int seq_len, int n_heads, int head_dim, int n_pairs,
                                   const double *inv_freq, int direction, float *x)
{
    SP_CUDA_GRID_STRIDE(item, n)
    {
        const size_t row = item / n_pairs;
        const int i = (int)(item % n_pairs);
        const double pos = (double)(row % seq_len);
        double s, c;
        sincos(direction * pos * inv_freq[i], &s, &c);
        float *p = x + row * n_heads * head_dim + 2 * i;
        for (int h = 0; h < n_heads; h++, p += head_dim) {
            const double x0 = p[0], x1 = p[1];
            p[0] = (float)(x0 * c - x1 * s);
            p[1] = (float)(x0 * s + x1 * c);
        }
    }
}

void sp_cuda_rope(int rows, int seq_len, int n_heads, int head_dim, int rot_dims, const double *inv_freq,
                  int direction, float *x)
{
    const int n_pairs = rot_dims / 2;
    if (rows <= 0 || n_pairs <= 0 || n_heads <= 0)
        return;
    SP_CUDA_LAUNCH_ELEMENTWISE(rope_kernel, (size_t)rows * n_pairs, seq_len, n_heads, head_dim, n_pairs, inv_freq,
                               direction, x);
}
