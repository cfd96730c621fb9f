/* tests/support/hf_ref.h: the Hugging Face fixtures of tools/hf_fixtures (fixtures/hf/<dir>/, a
 * model directory as save_pretrained wrote it, and fixtures/hf/ref/<name>.json with its float64
 * references) checked against spanprobe's import: logits and hidden states of a forward pass over
 * the reference tokens, the loss, and the gradient norm of every stored tensor. */
#ifndef SP_TEST_HF_REF_H
#define SP_TEST_HF_REF_H

/* Tolerances, relative: logits and hidden states to max|value| of the reference; the loss to itself;
 * each gradient norm to the largest gradient norm of the model. */
typedef struct {
    double logits, hidden, loss, grad;
} hf_ref_tolerance;

/* One cmocka test per fixture (ref/<name>.json): imports fixtures/hf/<its directory> on the CPU
 * backend and checks it against the reference, failing with the first disagreement and printing the
 * worst relative error of each check. Returns the failed count, as cmocka's group runner. */
int hf_ref_run_all(const char *group, const hf_ref_tolerance *tol);

#endif
