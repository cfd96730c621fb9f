/* study/presets.c: the presets of `spanprobe study` (docs/figures/README.md lists them with their
 * cost, measured for quick). Sizes: d_model 64 byte-level models on Moby Dick, the default corpus; the quick
 * preset is sized to finish (train 3 runs, analyze, draw) well inside 10 minutes on 2 CPU cores. */
#include "study/presets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/config_file.h"

/* The small model every preset but `test` trains: d_model 64, 4 heads, d_ff 256, sequences of 128
 * bytes in batches of 16 (2048 tokens a step). */
#define SMALL_MODEL "\"d_model\": 64, \"n_heads\": 4, \"n_kv_heads\": 4, \"d_ff\": 256, \"max_seq_len\": 128, " \
                    "\"seq_len\": 128, \"batch_size\": 16, \"warmup_steps\": 50, \"log_every\": 10, "           \
                    "\"eval_windows\": 32, \"keep\": 2"
/* Analysis on 8192 evaluation tokens; the presets cap the power iteration at 40 steps and sample 8
 * token-local Jacobians. */
#define SMALL_ANALYSIS "\"n_tokens\": 8192, \"grad_batches\": 2"

const sp_study_preset sp_study_presets[] = {
    {"quick", "pre, post and span at 8 layers, scaled init, lr 1e-3, 600 steps (1.2 M tokens): the README's main job",
     "pre,post,span", "scaled", "8", "0.001",
     "{" SMALL_MODEL ", \"steps\": 600, \"min_lr\": 0.0001, \"eval_every\": 100, \"ckpt_every\": 100}",
     "{" SMALL_ANALYSIS ", \"power_iters\": 40, \"jac_tokens\": 8}"},
    {"variants", "every normalization placement at 8 layers, scaled init, lr 1e-3, 600 steps (the quick settings)",
     "pre,post,span,peri,mixln,lns,deepnorm,hybrid,olmo2,siamese", "scaled", "8", "0.001",
     "{" SMALL_MODEL ", \"steps\": 600, \"min_lr\": 0.0001, \"eval_every\": 100, \"ckpt_every\": 100}",
     "{" SMALL_ANALYSIS ", \"power_iters\": 40, \"jac_tokens\": 8}"},
    {"init", "span and pre with global and scaled init at 12, 24 and 48 layers, lr 1e-3, 400 steps (paper Fig. 2, 3)",
     "span,pre", "global,scaled", "12,24,48", "0.001",
     "{" SMALL_MODEL ", \"steps\": 400, \"min_lr\": 0.0001, \"eval_every\": 100, \"ckpt_every\": 100}",
     "{" SMALL_ANALYSIS ", \"power_iters\": 20, \"jac_tokens\": 4}"},
    {"depth", "depth stress test: pre, post, span at 4 to 64 layers, d_model 64 and lr 1e-3 for all, 300 steps (Fig. 11)",
     "pre,post,span", "scaled", "4,8,16,32,64", "0.001",
     "{" SMALL_MODEL ", \"steps\": 300, \"min_lr\": 0.0001, \"eval_every\": 100, \"ckpt_every\": 100}",
     "{" SMALL_ANALYSIS ", \"metrics\": \"similarity,growth,ffn_spectra,grad_norms,weights,embed_spectrum\"}"},
    {"test", "tiny runs for the test suite: pre and span, 2 layers, d_model 16, 12 steps, at lr 3e-3 and at lr 1e30 "
     "(which diverges)", "pre,span", "scaled", "2", "0.003,1e30",
     "{\"d_model\": 16, \"n_heads\": 2, \"n_kv_heads\": 2, \"d_ff\": 32, \"max_seq_len\": 32, \"seq_len\": 32, "
     "\"batch_size\": 4, \"steps\": 12, \"warmup_steps\": 2, \"log_every\": 2, \"eval_every\": 6, "
     "\"eval_windows\": 4, \"ckpt_every\": 6, \"keep\": 2}",
     "{\"n_tokens\": 512, \"seq_len\": 32, \"batch\": 4, \"topk\": 2, \"power_iters\": 10, \"jac_tokens\": 2, "
     "\"prune_batches\": 1}"},
};
const int sp_study_n_presets = (int)SP_ARRAY_LEN(sp_study_presets);

const sp_study_preset *sp_study_find_preset(const char *name)
{
    for (int i = 0; i < sp_study_n_presets; i++)
        if (strcmp(sp_study_presets[i].name, name) == 0)
            return &sp_study_presets[i];
    return NULL;
}

/* Number of comma-separated items of list; item k into buf. */
static int list_count(const char *list)
{
    int n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    return n;
}

static void list_item(const char *list, int k, char *buf, size_t len)
{
    const char *p = list;
    for (int i = 0; i < k; i++)
        p = strchr(p, ',') + 1;
    const size_t n = strcspn(p, ",");
    snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), p);
}

static sp_status make_run(const sp_study_preset *p, const char *variant, const char *init, const char *depth,
                          const char *lr, const char *data, const char *device, sp_study_run_spec *run)
{
    char where[128];
    snprintf(where, sizeof where, "study preset %s", p->name);
    sp_config_defaults(&run->cfg);
    sp_train_options_defaults(&run->opt);
    SP_TRY(sp_train_options_from_json(p->train_json, where, &run->cfg, &run->opt));
    SP_TRY(sp_config_set(&run->cfg, "variant", variant, where));
    SP_TRY(sp_config_set(&run->cfg, "init", init, where));
    SP_TRY(sp_config_set(&run->cfg, "n_layers", depth, where));
    SP_TRY(sp_fields_set(&sp_train_options_table, &run->opt, "lr", lr, where));
    if (data)
        SP_TRY(sp_fields_set(&sp_train_options_table, &run->opt, "data", data, "--data"));
    if (device)
        SP_TRY(sp_fields_set(&sp_train_options_table, &run->opt, "device", device, "--device"));
    SP_TRY(sp_config_resolve(&run->cfg));
    SP_TRY(sp_config_validate(&run->cfg, where));
    SP_TRY(sp_train_options_resolve(&run->opt, &run->cfg, where));
    snprintf(run->name, sizeof run->name, "%s-L%s-%s-lr%s", variant, depth, init, lr);
    return SP_OK;
}

sp_status sp_study_expand(const sp_study_preset *p, const char *data, const char *device, sp_study_run_spec **runs,
                          int *n_runs)
{
    const int nv = list_count(p->variants), ni = list_count(p->inits), nd = list_count(p->depths),
              nl = list_count(p->lrs);
    const int n = nv * ni * nd * nl;
    *runs = sp_calloc((size_t)n, sizeof **runs, "study runs");
    *n_runs = 0;
    if (!*runs)
        return SP_ERR_NOMEM;
    char v[32], in[32], d[32], lr[32];
    sp_status st = SP_OK;
    for (int a = 0; a < nv && st == SP_OK; a++)
        for (int b = 0; b < ni && st == SP_OK; b++)
            for (int c = 0; c < nd && st == SP_OK; c++)
                for (int e = 0; e < nl && st == SP_OK; e++) {
                    list_item(p->variants, a, v, sizeof v);
                    list_item(p->inits, b, in, sizeof in);
                    list_item(p->depths, c, d, sizeof d);
                    list_item(p->lrs, e, lr, sizeof lr);
                    st = make_run(p, v, in, d, lr, data, device, &(*runs)[*n_runs]);
                    if (st == SP_OK)
                        (*n_runs)++;
                }
    if (st != SP_OK) {
        free(*runs);
        *runs = NULL;
        *n_runs = 0;
    }
    return st;
}

sp_status sp_study_analyze_options(const sp_study_preset *p, sp_analyze_options *o)
{
    char where[128];
    snprintf(where, sizeof where, "study preset %s: analysis options", p->name);
    sp_analyze_options_defaults(o);
    const sp_field_table *tables[] = {&sp_analyze_option_table};
    void *objs[] = {o};
    SP_TRY(sp_fields_apply_json(p->analyze_json, where, 1, tables, objs));
    return sp_analyze_options_validate(o, where);
}
