/* analyzers/registry.c: every analyzer `spanprobe analyze` knows, in report order. A new analyzer
 * is one declaration and one table entry here. */
#include "analyzers/analyzer.h"

extern const sp_analyzer sp_analyzer_similarity;
extern const sp_analyzer sp_analyzer_cka;
extern const sp_analyzer sp_analyzer_growth;
extern const sp_analyzer sp_analyzer_token_uniformity;
extern const sp_analyzer sp_analyzer_presums;
extern const sp_analyzer sp_analyzer_hidden_spectra;
extern const sp_analyzer sp_analyzer_ffn_spectra;
extern const sp_analyzer sp_analyzer_logit_lens;
extern const sp_analyzer sp_analyzer_attention;
extern const sp_analyzer sp_analyzer_grad_norms;
extern const sp_analyzer sp_analyzer_jacobian;
extern const sp_analyzer sp_analyzer_weights;
extern const sp_analyzer sp_analyzer_embed_spectrum;
extern const sp_analyzer sp_analyzer_pruning;
extern const sp_analyzer sp_analyzer_curvature;

const sp_analyzer *const sp_analyzers[] = {
    &sp_analyzer_similarity,
    &sp_analyzer_cka,
    &sp_analyzer_growth,
    &sp_analyzer_token_uniformity,
    &sp_analyzer_presums,
    &sp_analyzer_hidden_spectra,
    &sp_analyzer_ffn_spectra,
    &sp_analyzer_logit_lens,
    &sp_analyzer_attention,
    &sp_analyzer_grad_norms,
    &sp_analyzer_jacobian,
    &sp_analyzer_weights,
    &sp_analyzer_embed_spectrum,
    &sp_analyzer_pruning,
    &sp_analyzer_curvature,
};
const int sp_n_analyzers = (int)SP_ARRAY_LEN(sp_analyzers);
