/* plots/registry.c: every figure `spanprobe plot` draws, in drawing order (docs/figures/README.md).
 * A new figure is a preparer (plots/fig_*.c) and one row here. */
#include "plots/figure.h"

const sp_plot_figure sp_plot_figures[] = {
    {"loss", "training and validation loss curves (SpanNorm paper Fig. 2, 4)", "panels", sp_fig_loss},
    {"grad-steps", "FFN weight gradient norm of every layer over training (Fig. 3, 7, 14)", "grad-steps",
     sp_fig_grad_steps},
    {"grad-layers", "FFN gradient norm by layer at the start, middle and end of training (Fig. 7)", "panels",
     sp_fig_grad_layers},
    {"attn-steps", "least attention entropy of a head and largest attention score over training", "panels",
     sp_fig_attn_steps},
    {"depth", "final loss against depth, diverged runs marked (Fig. 11)", "depth", sp_fig_depth},
    {"cos-heatmap", "cosine similarity between every pair of layer outputs (Fig. 5)", "heatmap", sp_fig_cos_heatmap},
    {"cos-distance", "mean cosine similarity by layer distance, with its std (Fig. 6)", "panels", sp_fig_cos_distance},
    {"cka", "linear CKA between every pair of layer outputs", "heatmap", sp_fig_cka},
    {"spectral-util", "hard rank, soft rank and EDR of the FFN latents by block, and their means (Fig. 8)", "panels",
     sp_fig_spectral_util},
    {"embed-eigs", "token-embedding eigenvalues over their median (Fig. 9)", "panels", sp_fig_embed_eigs},
    {"cond", "condition numbers of W_1 and W_2 by block, and their means (Fig. 10)", "panels", sp_fig_cond},
    {"alpha", "power-law exponent alpha of every block matrix's spectrum by block (WeightWatcher's fit)", "alpha",
     sp_fig_alpha},
    {"jac", "block Jacobian spectral norm by block, with the SpanNorm bound", "panels", sp_fig_jac},
    {"grad-blocks", "FFN gradient norm of the loss by block, from a report's grad_norms", "panels", sp_fig_grad_blocks},
    {"growth", "hidden-state RMS and largest |h| over the median by layer", "panels", sp_fig_growth},
    {"hidden-spectra", "soft and hard rank of the hidden-state covariance by layer", "panels", sp_fig_hidden_spectra},
    {"presums", "the scale of the sums before each norm by block", "panels", sp_fig_presums},
    {"block-influence", "block influence 1 - cos(h_l, h_l+1) by block (ShortGPT)", "panels", sp_fig_block_influence},
    {"token-uniformity", "mean pairwise cosine of a sequence's tokens and their relative residual by layer (rank "
     "collapse)", "panels", sp_fig_token_uniformity},
    {"logit-lens", "every layer decoded through the final norm and head: loss, top-1 accuracy, KL to the output",
     "panels", sp_fig_logit_lens},
    {"attention", "attention by block: entropy over the uniform one, sink mass, largest score, head redundancy",
     "panels", sp_fig_attention},
    {"prune", "loss increase when removing block l, and the last k blocks", "panels", sp_fig_prune},
    {"curvature", "top eigenvalue and trace per parameter of each block's loss Hessian (opt-in analyzer)", "panels",
     sp_fig_curvature},
    {"drift", "how a model departs from its reference by layer: relative error, 1 - cosine, 1 - CKA (spanprobe drift)",
     "panels", sp_fig_drift},
};
const int sp_plot_n_figures = (int)SP_ARRAY_LEN(sp_plot_figures);
