/* kernels/cpu/cpu_adamw.c: one AdamW step, bias-corrected, decoupled weight decay:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mhat = m/(1-b1^t);  vhat = v/(1-b2^t);
 *   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p).
 * Evaluated in double per element. */
#include <math.h>

#include "kernels/cpu/cpu_ops.h"

void sp_cpu_adamw(size_t n, sp_real *param, const sp_real *grad, sp_real *m, sp_real *v, double lr, double beta1,
                  double beta2, double eps, double weight_decay, long step)
{
    double bias1 = 1.0 - pow(beta1, (double)step), bias2 = 1.0 - pow(beta2, (double)step);
#pragma omp parallel for schedule(dynamic, SP_CPU_CHUNK) if (n >= SP_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        double g = grad[i];
        double mi = beta1 * m[i] + (1.0 - beta1) * g;
        double vi = beta2 * v[i] + (1.0 - beta2) * g * g;
        m[i] = (sp_real)mi;
        v[i] = (sp_real)vi;
        double update = (mi / bias1) / (sqrt(vi / bias2) + eps) + weight_decay * param[i];
        param[i] = (sp_real)(param[i] - lr * update);
    }
}
