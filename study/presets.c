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
     {{"pre,post,span", "scaled", "8", "0.001", NULL, NULL}},
     "{" SMALL_MODEL ", \"steps\": 600, \"min_lr\": 0.0001, \"eval_every\": 100, \"ckpt_every\": 100}",
     "{" SMALL_ANALYSIS ", \"power_iters\": 40, \"jac_tokens\": 8}"},
    {"variants", "every normalization placement at 8 layers, scaled init, lr 1e-3, 600 steps (the quick settings)",
     {{"pre,post,span,peri,mixln,lns,deepnorm,hybrid,olmo2,siamese", "scaled", "8", "0.001", NULL, NULL}},
     "{" SMALL_MODEL ", \"steps\": 600, \"min_lr\": 0.0001, \"eval_every\": 100, \"ckpt_every\": 100}",
     "{" SMALL_ANALYSIS ", \"power_iters\": 40, \"jac_tokens\": 8}"},
    {"init", "span and pre with global and scaled init at 12, 24 and 48 layers, lr 1e-3, 400 steps (paper Fig. 2, 3)",
     {{"span,pre", "global,scaled", "12,24,48", "0.001", NULL, NULL}},
     "{" SMALL_MODEL ", \"steps\": 400, \"min_lr\": 0.0001, \"eval_every\": 100, \"ckpt_every\": 100}",
     "{" SMALL_ANALYSIS ", \"power_iters\": 20, \"jac_tokens\": 4}"},
    {"depth", "depth stress test: pre, post, span at 4 to 64 layers, d_model 64 and lr 1e-3 for all, 300 steps (Fig. 11)",
     {{"pre,post,span", "scaled", "4,8,16,32,64", "0.001", NULL, NULL}},
     "{" SMALL_MODEL ", \"steps\": 300, \"min_lr\": 0.0001, \"eval_every\": 100, \"ckpt_every\": 100}",
     "{" SMALL_ANALYSIS ", \"metrics\": \"similarity,growth,ffn_spectra,grad_norms,weights,embed_spectrum\"}"},
    /* docs/reproduction.md: a learning-rate sweep at 8 layers (up to 1e-2: at 3e-3, the first top,
     * three variants had their best loss at the sweep's edge), then every verdict run at its
     * variant's best rate: two seeds at 4 to 32 layers, post and span at 64, span and pre with
     * global init at 16. Sized for about 2 hours on 2 CPU cores; --scale N for a GPU. */
    {"paper", "the claims of docs/reproduction.md: pre, post, span, peri, siamese swept over lr 3e-4, 1e-3, 3e-3, 1e-2 at 8 "
     "layers; then at each variant's best lr pre, post, span at 4 to 32 layers (seeds 1, 2), post and span at 64, span "
     "and pre with global init at 16; 600 steps",
     {{"pre,post,span,peri,siamese", "scaled", "8", "0.0003,0.001,0.003,0.01", "1", "sweep"},
      {"pre,post,span", "scaled", "4,8,16,32", SP_STUDY_BEST_LR, "1,2", "depth"},
      {"post,span", "scaled", "64", SP_STUDY_BEST_LR, "1", "deep"},
      {"span,pre", "global", "16", SP_STUDY_BEST_LR, "1", "init"}},
     "{" SMALL_MODEL ", \"steps\": 600, \"min_lr\": 0.0001, \"eval_every\": 100, \"ckpt_every\": 100}",
     /* the analyzers the verdicts read: pruning's depth-squared passes, CKA, the attention, lens and
      * uniformity statistics would add minutes to the budget and no verdict */
     "{" SMALL_ANALYSIS ", \"power_iters\": 20, \"jac_tokens\": 4, "
     "\"metrics\": \"similarity,growth,ffn_spectra,grad_norms,jacobian,weights,embed_spectrum\"}"},
    {"test", "tiny runs for the test suite: pre and span, 2 layers, d_model 16, 12 steps, at lr 3e-3 and at lr 1e30 "
     "(which diverges)", {{"pre,span", "scaled", "2", "0.003,1e30", NULL, NULL}},
     "{\"d_model\": 16, \"n_heads\": 2, \"n_kv_heads\": 2, \"d_ff\": 32, \"max_seq_len\": 32, \"seq_len\": 32, "
     "\"batch_size\": 4, \"steps\": 12, \"warmup_steps\": 2, \"log_every\": 2, \"eval_every\": 6, "
     "\"eval_windows\": 4, \"ckpt_every\": 6, \"keep\": 2}",
     "{\"n_tokens\": 512, \"seq_len\": 32, \"batch\": 4, \"topk\": 2, \"power_iters\": 10, \"jac_tokens\": 2, "
     "\"prune_batches\": 1}"},
    {"test-sweep", "tiny runs for the test suite: pre and span swept over lr 3e-3 and 1e-2, then each at its best lr "
     "with seeds 1 and 2 at 3 layers", {{"pre,span", "scaled", "2", "0.003,0.01", "1", "sweep"},
                                           {"pre,span", "scaled", "2,3", SP_STUDY_BEST_LR, "1,2", "best"}},
     "{\"d_model\": 16, \"n_heads\": 2, \"n_kv_heads\": 2, \"d_ff\": 32, \"max_seq_len\": 32, \"seq_len\": 32, "
     "\"batch_size\": 4, \"steps\": 12, \"warmup_steps\": 2, \"log_every\": 2, \"eval_every\": 6, "
     "\"eval_windows\": 4, \"ckpt_every\": 6, \"keep\": 2}",
     "{\"n_tokens\": 512, \"seq_len\": 32, \"batch\": 4, \"topk\": 2, \"power_iters\": 10, \"jac_tokens\": 2, "
     "\"prune_batches\": 1, \"metrics\": \"similarity,growth\"}"},
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

int sp_study_n_groups(const sp_study_preset *p)
{
    int n = 0;
    while (n < SP_STUDY_MAX_GROUPS && p->groups[n].variants)
        n++;
    return n;
}

/* The config keys --scale multiplies (the depth and the steps besides). */
static void scale_run(int scale, sp_config *cfg, sp_train_options *opt)
{
    cfg->d_model *= scale;
    cfg->d_ff *= scale;
    cfg->n_heads *= scale;
    cfg->n_kv_heads *= scale;
    opt->steps *= scale;
}

/* seed NULL: the training default, and no "-s" in the name. */
static sp_status make_run(const sp_study_preset *p, const sp_study_overrides *ov, const char *variant,
                          const char *init, const char *depth_text, const char *lr, const char *seed,
                          sp_study_run_spec *run)
{
    char where[128], depth[32];
    snprintf(where, sizeof where, "study preset %s", p->name);
    const int scale = ov->scale > 1 ? ov->scale : 1;
    snprintf(depth, sizeof depth, "%lld", strtoll(depth_text, NULL, 10) * scale);
    const int pending = strcmp(lr, SP_STUDY_BEST_LR) == 0; /* planning: any lr costs the same */
    sp_config_defaults(&run->cfg);
    sp_train_options_defaults(&run->opt);
    SP_TRY(sp_train_options_from_json(p->train_json, where, &run->cfg, &run->opt));
    SP_TRY(sp_config_set(&run->cfg, "variant", variant, where));
    SP_TRY(sp_config_set(&run->cfg, "init", init, where));
    SP_TRY(sp_config_set(&run->cfg, "n_layers", depth, where));
    SP_TRY(sp_fields_set(&sp_train_options_table, &run->opt, "lr", pending ? "0.001" : lr, "--lrs"));
    if (seed)
        SP_TRY(sp_fields_set(&sp_train_options_table, &run->opt, "seed", seed, "--seeds"));
    if (ov->data)
        SP_TRY(sp_fields_set(&sp_train_options_table, &run->opt, "data", ov->data, "--data"));
    if (ov->device)
        SP_TRY(sp_fields_set(&sp_train_options_table, &run->opt, "device", ov->device, "--device"));
    scale_run(scale, &run->cfg, &run->opt);
    SP_TRY(sp_config_resolve(&run->cfg));
    SP_TRY(sp_config_validate(&run->cfg, where));
    SP_TRY(sp_train_options_resolve(&run->opt, &run->cfg, where));
    snprintf(run->variant, sizeof run->variant, "%s", variant);
    snprintf(run->init, sizeof run->init, "%s", init);
    snprintf(run->lr, sizeof run->lr, "%s", lr);
    snprintf(run->name, sizeof run->name, "%s-L%s-%s-lr%s%s%s", variant, depth, init, lr, seed ? "-s" : "",
             seed ? seed : "");
    return SP_OK;
}

sp_status sp_study_expand_group(const sp_study_preset *p, int g, const sp_study_overrides *ov,
                                sp_study_best_lr_fn best, void *ctx, sp_study_run_spec **runs, int *n_runs)
{
    const sp_study_group *grp = &p->groups[g];
    const int best_lr = strcmp(grp->lrs, SP_STUDY_BEST_LR) == 0;
    const char *lrs = ov->lrs && !best_lr ? ov->lrs : grp->lrs, *seeds = ov->seeds ? ov->seeds : grp->seeds;
    const int nv = list_count(grp->variants), ni = list_count(grp->inits), nd = list_count(grp->depths),
              nl = list_count(lrs), ns = seeds ? list_count(seeds) : 1;
    const int n = nv * ni * nd * nl * ns;
    *runs = sp_calloc((size_t)n, sizeof **runs, "study runs");
    *n_runs = 0;
    if (!*runs)
        return SP_ERR_NOMEM;
    char v[32], in[32], d[32], lr[32], seed[32];
    sp_status st = SP_OK;
    for (int k = 0; k < n && st == SP_OK; k++) {
        /* k's digits, seed innermost: variant, init, depth, lr, seed */
        list_item(grp->variants, k / (ni * nd * nl * ns), v, sizeof v);
        list_item(grp->inits, k / (nd * nl * ns) % ni, in, sizeof in);
        list_item(grp->depths, k / (nl * ns) % nd, d, sizeof d);
        list_item(lrs, k / ns % nl, lr, sizeof lr);
        if (seeds)
            list_item(seeds, k % ns, seed, sizeof seed);
        if (best_lr && best)
            st = best(ctx, v, in, lr, sizeof lr);
        if (st == SP_OK)
            st = make_run(p, ov, v, in, d, lr, seeds ? seed : NULL, &(*runs)[*n_runs]);
        if (st == SP_OK)
            (*runs)[(*n_runs)++].group = g;
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
