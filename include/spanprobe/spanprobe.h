/* spanprobe/spanprobe.h: spanprobe's C API, version SPANPROBE_API_VERSION (docs/api.md).
 *
 * Models (any format spanprobe reads, or a fresh one from a JSON config) that your own code runs,
 * trains and saves; analyses (every `spanprobe analyze` option by name) run into a report file or
 * into memory; reports read back by analyzer and name, with units and shapes. Handles are opaque
 * and share no state: two models, analyses or reports live side by side in one process (errors are
 * kept per thread).
 *
 * Every call that can fail returns a spanprobe_status: 0 on success, else the code the command line
 * exits with for the same failure (2 usage, 3 bad input, 4 numerical failure, 5 I/O, 6 diverged,
 * 8 out of memory: docs/cli.md), and spanprobe_last_error() holds its one-line explanation.
 *
 *   spanprobe_analysis *a;  spanprobe_report *r;  double cos;
 *   spanprobe_analysis_new(&a);
 *   spanprobe_analysis_set(a, "metrics", "similarity");
 *   spanprobe_analysis_set(a, "data", "mobydick.txt");
 *   if (spanprobe_analysis_run(a, "ckpt.h5", NULL, &r) == 0 &&
 *       spanprobe_report_scalar(r, "similarity", "adjacent_cosine_mean", &cos) == 0) ...
 *   spanprobe_report_close(r);  spanprobe_analysis_free(a);
 */
#ifndef SPANPROBE_SPANPROBE_H
#define SPANPROBE_SPANPROBE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPANPROBE_API_VERSION 1

typedef int spanprobe_status;
typedef struct spanprobe_model spanprobe_model;
typedef struct spanprobe_analysis spanprobe_analysis;
typedef struct spanprobe_report spanprobe_report;

/* SPANPROBE_API_VERSION of the library that runs (a program checks it against the header's). */
int spanprobe_api_version(void);
/* "0.1.0" */
const char *spanprobe_version(void);
/* The last failure's message in this thread ("" when none). */
const char *spanprobe_last_error(void);

/* ---- models ---- */
/* Opens a spanprobe checkpoint, a Hugging Face directory, a GGUF file or nanoGPT's ckpt.pt on
 * device "cpu", "cuda" or "auto" (NULL: auto). */
spanprobe_status spanprobe_model_open(const char *path, const char *device, spanprobe_model **out);
/* A freshly initialized model from a JSON object of model options ({"n_layers": 4, "d_model": 64,
 * "variant": "span", ...}: docs/model.md; the rest default), drawn with seed; 3 naming the option
 * for a config that is not valid. */
spanprobe_status spanprobe_model_new(const char *config_json, uint64_t seed, const char *device,
                                     spanprobe_model **out);
void spanprobe_model_free(spanprobe_model *m); /* NULL is fine */
/* Sizes: layers, d_model, vocabulary. */
int spanprobe_model_layers(const spanprobe_model *m);
int spanprobe_model_width(const spanprobe_model *m);
int spanprobe_model_vocab(const spanprobe_model *m);
/* One forward pass over tokens [batch * seq_len]; targets (may be NULL; entries < 0 ignored) give
 * *loss (may be NULL), the mean next-token cross-entropy in nats. */
spanprobe_status spanprobe_model_forward(spanprobe_model *m, const int32_t *tokens, const int32_t *targets, int batch,
                                         int seq_len, double *loss);
/* Layer output h_layer (0 = the embedding, n_layers = the last block's output) of the last forward
 * pass, [batch * seq_len, d_model] as float, into out. */
spanprobe_status spanprobe_model_hidden(const spanprobe_model *m, int layer, float *out);
/* One AdamW step (beta 0.9, 0.95, weight decay 0.1 on matrices, gradients clipped at norm 1) at
 * learning rate lr on the mean loss of tokens/targets; *loss (may be NULL) gets it before the step.
 * A non-finite loss or gradient is 6 and leaves the weights as they were. */
spanprobe_status spanprobe_model_train_step(spanprobe_model *m, const int32_t *tokens, const int32_t *targets,
                                            int batch, int seq_len, double lr, double *loss);
/* Writes the model as a spanprobe checkpoint (atomically: nothing at path unless it is complete). */
spanprobe_status spanprobe_model_save(const spanprobe_model *m, const char *path);

/* ---- analyses ---- */
spanprobe_status spanprobe_analysis_new(spanprobe_analysis **out);
/* Sets an option by its name in `spanprobe analyze --help` without the dashes, "-" or "_" alike
 * ("metrics", "n_tokens", "power-iters", ...), plus "data" (evaluation text), "tokens" (a token
 * id file instead), "device" and "quiet" ("true": no progress lines). */
spanprobe_status spanprobe_analysis_set(spanprobe_analysis *a, const char *name, const char *value);
/* Analyzes input (any model spanprobe reads, or an activation dump) into report_path (.h5, with
 * its JSON summary beside it), or into memory when report_path is NULL (a private temporary file
 * that is gone when the report is closed). report (may be NULL when report_path is not) gets the
 * report opened. */
spanprobe_status spanprobe_analysis_run(spanprobe_analysis *a, const char *input, const char *report_path,
                                        spanprobe_report **report);
/* The same on a model handle as it is now (a model your own loop trains): it is written to a
 * private temporary checkpoint for the analysis, removed before the call returns. */
spanprobe_status spanprobe_analysis_run_model(spanprobe_analysis *a, const spanprobe_model *m, const char *report_path,
                                              spanprobe_report **report);
void spanprobe_analysis_free(spanprobe_analysis *a); /* NULL is fine */

/* ---- reports ---- */
spanprobe_status spanprobe_report_open(const char *path, spanprobe_report **out);
void spanprobe_report_close(spanprobe_report *r); /* NULL is fine */
/* A summary scalar, metrics.<analyzer>.<key> of the JSON summary. */
spanprobe_status spanprobe_report_scalar(const spanprobe_report *r, const char *analyzer, const char *key,
                                         double *value);
/* An array /metrics/<analyzer>/<name>: *values (free with spanprobe_free) in row-major order of
 * shape[0 .. *rank - 1] (rank <= 4), units into units (may be NULL; 64 bytes). */
spanprobe_status spanprobe_report_array(spanprobe_report *r, const char *analyzer, const char *name, double **values,
                                        int *rank, int64_t shape[4], char *units);
void spanprobe_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
