#include "model/rope_freq.h"

#include <math.h>

#define PI 3.14159265358979323846 /* Python's math.pi, as transformers uses */

/* Llama 3's rescaling of one frequency, in transformers' order of operations. */
static double llama3_scaled(const sp_config *cfg, double f)
{
    const double factor = cfg->rope_factor, low = cfg->rope_low_freq_factor, high = cfg->rope_high_freq_factor;
    const double old_len = cfg->rope_original_max_pos;
    const double low_freq_wavelen = old_len / low, high_freq_wavelen = old_len / high;
    const double wavelen = 2 * PI / f;
    if (wavelen > low_freq_wavelen)
        return f / factor;
    if (wavelen < high_freq_wavelen)
        return f;
    const double smooth = (old_len / wavelen - low) / (high - low);
    return (1 - smooth) * f / factor + smooth * f;
}

void sp_rope_inv_freq(const sp_config *cfg, int local, double *inv_freq)
{
    const int r = sp_config_rope_dims(cfg);
    const double base = local ? cfg->rope_local_theta : cfg->rope_theta;
    const int scaling = local ? SP_ROPE_SCALING_NONE : cfg->rope_scaling;
    for (int i = 0; i < r / 2; i++) {
        const double f = pow(base, -2.0 * i / r);
        inv_freq[i] = scaling == SP_ROPE_SCALING_LINEAR ? f / cfg->rope_factor
                      : scaling == SP_ROPE_SCALING_LLAMA3 ? llama3_scaled(cfg, f)
                                                          : f;
    }
}

int sp_rope_layer_local(const sp_config *cfg, int layer)
{
    return cfg->rope_local_theta > 0 && sp_config_layer_windowed(cfg, layer);
}
