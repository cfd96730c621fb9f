/* tests/support/gguf_model_ref.h: the GGUF models of tools/gguf_models (fixtures/gguf_models/, listed
 * in its manifest.json with float64 reference logits) loaded through io/model_source.h and checked
 * against their references. */
#ifndef SP_TEST_GGUF_MODEL_REF_H
#define SP_TEST_GGUF_MODEL_REF_H

#include "model/model.h"

#define GGUF_MODELS_DIR "fixtures/gguf_models"

/* max |got - reference| / max |reference| over the n float64 values of the reference file
 * GGUF_MODELS_DIR/<ref_file> (which must hold exactly n). */
double gguf_model_ref_compare(const sp_real *got, const char *ref_file, size_t n);
/* max |logit - reference| / max |reference| of m on the reference tokens of manifest entry `file`. */
double gguf_model_ref_error(sp_model *m, const char *file);
/* One cmocka test per model of the manifest: loads it on the CPU backend and fails unless its logits
 * are within tol of max|logit| of the reference. Returns the failed count. */
int gguf_model_ref_run_all(const char *group, double tol);

#endif
