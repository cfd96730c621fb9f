/* model/recipe.h: each normalization placement as data.
 *
 * A block recipe is a short list of steps over numbered slots. Slot 0 is the block input x (slot 1
 * the second stream y for two-stream variants); every step writes one new slot, so the forward pass
 * keeps every intermediate for the backward (VJP) and forward-mode (JVP) passes, which are two more
 * interpreters of the same list (model/forward.c, model/backward.c, model/jvp.c). Slots have names
 * ("sum_a", "u", ...) that analyzers read by name: "sum_a"/"sum_z" are the pre-normalization sums.
 *
 * Norm instances are named per recipe ("n1", "n2", ...); each becomes the parameters
 * blocks/<l>/<name>/gain (and /bias for LayerNorm). Attention may normalize its own projections:
 * per head over head_dim for q, k and v (hybrid), or over the whole projected q and k (olmo2); a
 * recipe without its own attention norm takes the config's qk_norm (q and k per head, or whole).
 * Those gains live under blocks/<l>/attn/.
 */
#ifndef SP_RECIPE_H
#define SP_RECIPE_H

#include "core/config.h"

#define SP_RECIPE_MAX_STEPS 24
#define SP_RECIPE_MAX_NORMS 8
#define SP_RECIPE_MAX_SLOTS (SP_RECIPE_MAX_STEPS + 2)

typedef enum {
    SP_STEP_NORM, /* dst = coef_a * norm[norm](a) */
    SP_STEP_ATTN, /* dst = A(a), the attention sub-layer with W_O */
    SP_STEP_FFN,  /* dst = F(a), the FFN sub-layer with W_2 */
    SP_STEP_ADD   /* dst = coef_a * a + coef_b * b */
} sp_step_kind;

/* Coefficients that depend on the layer or the config, resolved by sp_recipe_coef(). */
typedef enum {
    SP_COEF_ONE,
    SP_COEF_DEEPNORM_ALPHA, /* (2L)^(1/4) by default */
    SP_COEF_LNS,            /* 1/sqrt(l+1) */
    SP_COEF_SIAMESE_INV_C   /* 1/c_l, c_l = sqrt(mult (l+1)) */
} sp_coef;

typedef enum {
    SP_ATTN_PLAIN,
    SP_ATTN_QKV_HEADNORM, /* hybrid: q, k, v each normalized per head over head_dim */
    SP_ATTN_QK_NORM,      /* olmo2, qk_norm full: over the whole projected q and k before the head split */
    SP_ATTN_QK_HEADNORM   /* qk_norm head (Qwen3, Gemma 3): q and k each normalized per head over head_dim */
} sp_attn_norm;

typedef struct {
    sp_step_kind kind;
    int dst, a, b; /* slot indices; b only for ADD */
    sp_coef coef_a, coef_b;
    int norm;      /* index into sp_recipe.norm_names, for NORM */
} sp_step;

typedef struct {
    const char *name;
    int n_streams;                /* 1, or 2 for siamese */
    int n_slots;                  /* inputs + one per step */
    const char *slot_names[SP_RECIPE_MAX_SLOTS];
    int n_norms;
    const char *norm_names[SP_RECIPE_MAX_NORMS];
    sp_attn_norm attn_norm;
    int n_steps;
    sp_step steps[SP_RECIPE_MAX_STEPS];
    int out_slots[2];             /* block outputs, per stream */
} sp_recipe;

/* The recipe block l runs under cfg (span's block 0 and mixln's bottom blocks differ). */
const sp_recipe *sp_recipe_for_layer(const sp_config *cfg, int layer);
double sp_recipe_coef(const sp_config *cfg, int layer, sp_coef coef);
/* Slot index by name, -1 when the recipe has none (e.g. "sum_z" in pre). */
int sp_recipe_slot(const sp_recipe *r, const char *name);
/* Does any block of the model cfg describes have the slot (e.g. a pre-normalization sum)? */
int sp_config_has_slot(const sp_config *cfg, const char *name);
/* Does the model end with stream norms (siamese: N_fin(N_x(X) + N_y(Y))) or one optional final norm? */
int sp_config_n_streams(const sp_config *cfg);
/* The attention norm a block of recipe r runs: the recipe's own, else the one cfg->qk_norm asks for. */
sp_attn_norm sp_recipe_attn_norm(const sp_config *cfg, const sp_recipe *r);
/* How many of q, k, v (in that order) an attention norm normalizes, and whether per head over
 * head_dim (else over the whole projection). */
int sp_attn_norm_count(sp_attn_norm kind);
int sp_attn_norm_per_head(sp_attn_norm kind);
/* Is the FFN gated (SwiGLU, GEGLU: h = act(x W1^T) * (x W3^T)), so that it has W3? */
int sp_config_ffn_gated(const sp_config *cfg);

#endif
