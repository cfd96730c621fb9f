/* kernels/cuda/cuda_rope.cu: rotary position embedding, in place, llama2.c's interleaved layout.
 * Pair i of each head (dims 2i, 2i+1) of row r turns by pos * theta^(-2i/head_dim), pos = r % seq_len;
 * the angle, its sine and cosine are computed in double (pos * freq reaches hundreds of radians,
 * where float would lose about 1e-5). direction -1 turns by the opposite angle: the inverse, and the
 * transpose. One thread per (row, pair) computes the angle once and turns that pair in every head. */
#include "kernels/cuda/cuda_ops.h"

static __global__ void rope_kernel(size_t n, int seq_len, int n_heads, int head_dim, double theta, int direction,
                                   float *x)
{
    const int n_pairs = head_dim / 2;
    SP_CUDA_GRID_STRIDE(item, n)
    {
        const size_t row = item / n_pairs;
        const int i = (int)(item % n_pairs);
        const double pos = (double)(row % seq_len);
        double s, c;
        sincos(direction * pos * pow(theta, -2.0 * i / head_dim), &s, &c);
        float *p = x + row * n_heads * head_dim + 2 * i;
        for (int h = 0; h < n_heads; h++, p += head_dim) {
            const double x0 = p[0], x1 = p[1];
            p[0] = (float)(x0 * c - x1 * s);
            p[1] = (float)(x0 * s + x1 * c);
        }
    }
}

void sp_cuda_rope(int rows, int seq_len, int n_heads, int head_dim, double theta, int direction, float *x)
{
    if (rows <= 0 || head_dim < 2 || n_heads <= 0)
        return;
    SP_CUDA_LAUNCH_ELEMENTWISE(rope_kernel, (size_t)rows * (head_dim / 2), seq_len, n_heads, head_dim, theta,
                               direction, x);
}
