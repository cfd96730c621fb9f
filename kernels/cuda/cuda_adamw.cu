/* kernels/cuda/cuda_adamw.cu: one AdamW step, bias-corrected, decoupled weight decay:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mhat = m/(1-b1^t);  vhat = v/(1-b2^t);
 *   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p).
 * Evaluated in double per element like the CPU reference (the step is bound by memory traffic). */
#include "kernels/cuda/cuda_ops.h"

struct adamw_coefs {
    double lr, beta1, beta2, eps, weight_decay, bias1, bias2;
};

static __global__ void adamw_kernel(size_t n, float *param, const float *grad, float *m, float *v, adamw_coefs k)
{
    SP_CUDA_GRID_STRIDE(i, n)
    {
        const double g = grad[i];
        const double mi = k.beta1 * m[i] + (1.0 - k.beta1) * g;
        const double vi = k.beta2 * v[i] + (1.0 - k.beta2) * g * g;
        m[i] = (float)mi;
        v[i] = (float)vi;
        const double update = (mi / k.bias1) / (sqrt(vi / k.bias2) + k.eps) + k.weight_decay * param[i];
        param[i] = (float)(param[i] - k.lr * update);
    }
}

void sp_cuda_adamw(size_t n, float *param, const float *grad, float *m, float *v, double lr, double beta1,
                   double beta2, double eps, double weight_decay, long step)
{
    const adamw_coefs coefs = {lr, beta1, beta2, eps, weight_decay, 1.0 - pow(beta1, (double)step),
                               1.0 - pow(beta2, (double)step)};
    SP_CUDA_LAUNCH_ELEMENTWISE(adamw_kernel, n, param, grad, m, v, coefs);
}
