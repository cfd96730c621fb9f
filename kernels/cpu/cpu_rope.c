/* kernels/cpu/cpu_rope.c: rotary position embedding, in place, llama2.c's interleaved layout.
 * Pair i < rot_dims / 2 of each head (dims 2i, 2i+1) turns by pos * inv_freq[i]; the angle, its
 * sine and cosine are computed in double. Dims from rot_dims on pass through. direction -1 turns by
 * the opposite angle: the inverse, and the transpose. */
#include <math.h>

#include "kernels/cpu/cpu_ops.h"

void sp_cpu_rope(int rows, int seq_len, int n_heads, int head_dim, int rot_dims, const double *inv_freq,
                 int direction, sp_real *x)
{
    int width = n_heads * head_dim, n_pairs = rot_dims / 2;
#pragma omp parallel for schedule(dynamic, sp_cpu_row_chunk(width)) if ((size_t)rows * width >= SP_CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        double pos = r % seq_len;
        for (int i = 0; i < n_pairs; i++) {
            double angle = direction * pos * inv_freq[i];
            double c = cos(angle), s = sin(angle);
            for (int h = 0; h < n_heads; h++) {
                sp_real *p = x + (size_t)r * width + (size_t)h * head_dim + 2 * i;
                double x0 = p[0], x1 = p[1];
                p[0] = (sp_real)(x0 * c - x1 * s);
                p[1] = (sp_real)(x0 * s + x1 * c);
            }
        }
    }
}
