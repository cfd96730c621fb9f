/* train/optimizer.h: AdamW over a list of tensors with global-norm gradient clipping.
 *
 * The optimizer knows tensors only as backend buffers with an element count and a weight-decay
 * flag (sp_param_spec.decay for a model's parameters), so it can be tested on a tiny vector. The
 * moment buffers m and v (one backend buffer per tensor) are what checkpoints save as /optim.
 * One step: the caller computes the global norm (sp_optim_grad_norm, before clipping, in double),
 * checks it is finite, then sp_optim_step scales the gradients by grad_clip / norm when the norm
 * exceeds grad_clip and applies the bias-corrected AdamW update through be->adamw.
 *
 * Gradient accumulation lives here too, rather than in the model: sp_model_backward overwrites the
 * model's gradients, so for k micro-batches the optimizer keeps one more buffer per tensor and sums
 * grads / k into it (sp_optim_accumulate); the step then reads those sums. This keeps the model's
 * API unchanged and costs one axpby per tensor per micro-batch.
 */
#ifndef SP_OPTIMIZER_H
#define SP_OPTIMIZER_H

#include "kernels/backend.h"

typedef struct {
    double beta1, beta2, eps;
    double weight_decay; /* decoupled: p -= lr * weight_decay * p, on tensors with decay set */
    double grad_clip;    /* 0: no clipping */
} sp_adamw_config;

typedef struct {
    const sp_backend *be;
    sp_adamw_config cfg;
    int n_tensors;
    size_t *numel;
    int *decay;
    sp_real **m, **v; /* backend buffers, zeroed at creation */
    sp_real **acc;    /* accumulated gradients, allocated by the first sp_optim_accumulate */
    int64_t step;     /* updates applied so far (AdamW's t is step + 1 during the next one) */
} sp_optim;

sp_status sp_optim_create(const sp_backend *be, const sp_adamw_config *cfg, int n_tensors, const size_t *numel,
                          const int *decay, sp_optim **out);
void sp_optim_free(sp_optim *o);

/* sqrt(sum of squares of every gradient), and each tensor's own norm into per_tensor (may be NULL).
 * NaN/Inf anywhere makes the result non-finite. */
double sp_optim_grad_norm(const sp_optim *o, sp_real *const *grads, double *per_tensor);
/* acc = (first ? 0 : acc) + scale * grads, per tensor. */
sp_status sp_optim_accumulate(sp_optim *o, sp_real *const *grads, double scale, int first);
/* Clips (scaling grads in place) and updates params with learning rate lr; grad_norm is the value
 * sp_optim_grad_norm returned for these gradients. */
void sp_optim_step(sp_optim *o, sp_real *const *params, sp_real *const *grads, double grad_norm, double lr);

#endif
