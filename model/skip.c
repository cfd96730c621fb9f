/* model/skip.c: blocks replaced by the identity, for layer-pruning probes. The flags live in the
 * model (allocated on first use); the interpreters consult sp_model_block_skipped. */
#include "model/model_internal.h"

sp_status sp_model_set_block_skip(sp_model *m, int l, int skip)
{
    if (l < 0 || l >= m->cfg.n_layers)
        return sp_error(SP_ERR_USAGE, "sp_model_set_block_skip: block %d is outside 0..%d", l, m->cfg.n_layers - 1);
    if (!m->skipped) {
        if (!skip)
            return SP_OK;
        m->skipped = sp_calloc((size_t)m->cfg.n_layers, 1, "block skip flags");
        if (!m->skipped)
            return SP_ERR_NOMEM;
    }
    m->skipped[l] = skip != 0;
    return SP_OK;
}

int sp_model_block_skipped(const sp_model *m, int l)
{
    return m->skipped && l >= 0 && l < m->cfg.n_layers && m->skipped[l];
}

void sp_block_identity(const sp_model *m, int l, const sp_real *const *in, sp_real *const *out, int accumulate)
{
    const size_t n = (size_t)m->rows * (size_t)m->cfg.d_model;
    for (int s = 0; s < m->blocks[l].recipe->n_streams; s++) {
        if (accumulate)
            m->be->axpby(n, 1, in[s], 1, out[s]);
        else
            m->be->copy(out[s], in[s], n * sizeof(sp_real));
    }
}
