/* kernels/cpu/cpu_attention_at.c: the attention JVP at one query position t for tangents that
 * live at t alone (backend.h, attn_jvp_at): the token-local Jacobians' attention step.
 *
 * For tangent j and query head h (kv head g), with P the saved probabilities of row t and the
 * visible keys s (window included; P is 0 elsewhere):
 *   tS_s = S'_s scale (tq_j . k_s + [s = t] q_t . tk_j)   (S' the soft-cap's slope, 1 without)
 *   tout_j = sum_s P_s (tS_s - sum_s' P_s' tS_s') v_s + P_t tv_j
 * the row t of attn_jvp when the tangents at the other positions are zero. Sums in double. */
#include <math.h>

#include "kernels/cpu/cpu_ops.h"

void sp_cpu_attn_jvp_at(const sp_attn_shape *shape, const sp_real *q, const sp_real *k, const sp_real *v,
                        const sp_real *saved, int t, int n, const sp_real *tq, const sp_real *tk, const sp_real *tv,
                        sp_real *tout)
{
    const int hd = shape->head_dim, len = shape->seq_len, group = shape->n_heads / shape->n_kv_heads;
    const int ldq = shape->n_heads * hd, ldkv = shape->n_kv_heads * hd, lo = sp_cpu_attn_first_key(shape->window, t);
    const double scale = shape->scale, cap = shape->softcap;
#pragma omp parallel for collapse(2) schedule(static)
    for (int j = 0; j < n; j++)
        for (int h = 0; h < shape->n_heads; h++) {
            const int g = h / group;
            const sp_real *p = saved + ((size_t)h * len + (size_t)t) * (size_t)len; /* sequence 0, row t */
            const sp_real *qt = q + (size_t)t * ldq + (size_t)h * hd, *tqj = tq + (size_t)j * ldq + (size_t)h * hd;
            const sp_real *tkj = tk + (size_t)j * ldkv + (size_t)g * hd, *tvj = tv + (size_t)j * ldkv + (size_t)g * hd;
            double ts[t - lo + 1]; /* the visible keys' tS, then their weights */
            double mean = 0;       /* sum_s P_s tS_s */
            for (int s = lo; s <= t; s++) {
                const sp_real *ks = k + (size_t)s * ldkv + (size_t)g * hd;
                double a = 0, z = 0;
                for (int i = 0; i < hd; i++) {
                    a += (double)tqj[i] * ks[i];
                    z += (double)qt[i] * ks[i];
                }
                if (s == t)
                    for (int i = 0; i < hd; i++)
                        a += (double)qt[i] * tkj[i];
                a *= scale;
                if (cap > 0) {
                    const double th = tanh(scale * z / cap);
                    a *= 1 - th * th;
                }
                ts[s - lo] = a;
                mean += (double)p[s] * a;
            }
            for (int s = lo; s <= t; s++)
                ts[s - lo] = (double)p[s] * (ts[s - lo] - mean);
            sp_real *out = tout + (size_t)j * ldq + (size_t)h * hd;
            for (int i = 0; i < hd; i++) {
                double acc = (double)p[t] * tvj[i];
                for (int s = lo; s <= t; s++)
                    acc += ts[s - lo] * v[(size_t)s * ldkv + (size_t)g * hd + i];
                out[i] = (sp_real)acc;
            }
        }
}
