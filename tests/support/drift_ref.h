/* tests/support/drift_ref.h: `spanprobe drift` as a library call on the CPU backend, and its report
 * checked against the float64 numbers of tools/drift_ref/generate.py (fixtures/drift/ref/<name>.json,
 * or one entry of fixtures/drift/gguf_ref.json): every array and summary scalar of the drift group. */
#ifndef SP_TEST_DRIFT_REF_H
#define SP_TEST_DRIFT_REF_H

#include <stddef.h>

struct cJSON;

/* Tolerances: an entry agrees when |got - want| <= rel |want| + abs. Top-1 matches may differ only
 * where the reference's top-1 margin is below `margin` (a near-tie the precision can flip). */
typedef struct {
    double rel, abs;       /* hidden-state metrics, losses, weight errors */
    double kl_rel, kl_abs; /* KL values (nats) */
    double margin;
} drift_ref_tolerance;

#define DRIFT_REF_TOKENS "fixtures/drift/tokens.txt"

/* Runs drift of model against ref on the token file (every window of 32 tokens) into scratch
 * <out_name>.h5 and writes its path into report (len bytes). Fails the test on an error. */
void drift_ref_run(const char *ref, const char *model, const char *tokens, const char *out_name, char *report,
                   size_t len);
/* The reference numbers of fixtures/drift/ref/<name>.json (cJSON_Delete). */
struct cJSON *drift_ref_load(const char *name);
/* Fails the test unless the report agrees with the reference numbers `want` within tol. */
void drift_ref_check(const char *report, const struct cJSON *want, const drift_ref_tolerance *tol);
/* Every perturbed copy of fixtures/drift (noise ascending) against fixtures/hf/llama-f32, checked with
 * drift_ref_check; kl_mean[i] and rel_error_final[i] (DRIFT_REF_N_COPIES each) get their summaries. */
#define DRIFT_REF_N_COPIES 3
void drift_ref_check_copies(const drift_ref_tolerance *tol, double *kl_mean, double *rel_error_final);
/* metrics.drift.<key> of the report's summary. */
double drift_ref_scalar(const char *report, const char *key);

#endif
