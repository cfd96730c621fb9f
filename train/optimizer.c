#include "train/optimizer.h"

#include <math.h>
#include <stdlib.h>

sp_status sp_optim_create(const sp_backend *be, const sp_adamw_config *cfg, int n_tensors, const size_t *numel,
                          const int *decay, sp_optim **out)
{
    *out = NULL;
    sp_optim *o = sp_calloc(1, sizeof *o, "optimizer");
    if (!o)
        return SP_ERR_NOMEM;
    o->be = be;
    o->cfg = *cfg;
    o->n_tensors = n_tensors;
    o->numel = sp_calloc((size_t)n_tensors, sizeof *o->numel, "optimizer sizes");
    o->decay = sp_calloc((size_t)n_tensors, sizeof *o->decay, "optimizer decay flags");
    o->m = sp_calloc((size_t)n_tensors, sizeof *o->m, "AdamW first moments");
    o->v = sp_calloc((size_t)n_tensors, sizeof *o->v, "AdamW second moments");
    if (!o->numel || !o->decay || !o->m || !o->v) {
        sp_optim_free(o);
        return SP_ERR_NOMEM;
    }
    for (int i = 0; i < n_tensors; i++) {
        o->numel[i] = numel[i];
        o->decay[i] = decay[i];
        o->m[i] = be->alloc(numel[i] * sizeof(sp_real), "AdamW first moment");
        o->v[i] = o->m[i] ? be->alloc(numel[i] * sizeof(sp_real), "AdamW second moment") : NULL;
        if (!o->v[i]) {
            sp_optim_free(o);
            return SP_ERR_NOMEM;
        }
    }
    *out = o;
    return SP_OK;
}

void sp_optim_free(sp_optim *o)
{
    if (!o)
        return;
    for (int i = 0; i < o->n_tensors; i++) {
        if (o->m && o->m[i])
            o->be->free(o->m[i]);
        if (o->v && o->v[i])
            o->be->free(o->v[i]);
        if (o->acc && o->acc[i])
            o->be->free(o->acc[i]);
    }
    free(o->numel);
    free(o->decay);
    free(o->m);
    free(o->v);
    free(o->acc);
    free(o);
}

double sp_optim_grad_norm(const sp_optim *o, sp_real *const *grads, double *per_tensor)
{
    double total = 0;
    for (int i = 0; i < o->n_tensors; i++) {
        double sumsq = o->be->sumsq(o->numel[i], grads[i]);
        if (per_tensor)
            per_tensor[i] = sqrt(sumsq);
        total += sumsq;
    }
    return sqrt(total);
}

sp_status sp_optim_accumulate(sp_optim *o, sp_real *const *grads, double scale, int first)
{
    if (!o->acc) {
        o->acc = sp_calloc((size_t)o->n_tensors, sizeof *o->acc, "accumulated gradients");
        if (!o->acc)
            return SP_ERR_NOMEM;
        for (int i = 0; i < o->n_tensors; i++)
            if (!(o->acc[i] = o->be->alloc(o->numel[i] * sizeof(sp_real), "accumulated gradient")))
                return SP_ERR_NOMEM;
    }
    for (int i = 0; i < o->n_tensors; i++)
        o->be->axpby(o->numel[i], (sp_real)scale, grads[i], first ? 0 : 1, o->acc[i]);
    return SP_OK;
}

void sp_optim_step(sp_optim *o, sp_real *const *params, sp_real *const *grads, double grad_norm, double lr)
{
    const sp_adamw_config *c = &o->cfg;
    if (c->grad_clip > 0 && grad_norm > c->grad_clip)
        for (int i = 0; i < o->n_tensors; i++)
            o->be->scale(o->numel[i], (sp_real)(c->grad_clip / grad_norm), grads[i]);
    o->step++;
    for (int i = 0; i < o->n_tensors; i++)
        o->be->adamw(o->numel[i], params[i], grads[i], o->m[i], o->v[i], lr, c->beta1, c->beta2, c->eps,
                     o->decay[i] ? c->weight_decay : 0.0, (long)o->step);
}
