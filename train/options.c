#include "train/options.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/config_file.h"

const char *const sp_device_names[] = {"auto", "cpu", "cuda", NULL};

#define F(field, type, names, help) {#field, type, offsetof(sp_train_options, field), names, help}
static const sp_field train_fields[] = {
    F(data, SP_FIELD_STRING, NULL, "training text file (byte tokens, vocab 256)"),
    F(val_fraction, SP_FIELD_DOUBLE, NULL, "fraction of the text at its end held out for validation (0..0.5)"),
    F(batch_size, SP_FIELD_INT, NULL, "sequences per micro-batch"),
    F(seq_len, SP_FIELD_INT, NULL, "tokens per sequence (0: the model's max_seq_len)"),
    F(grad_accum, SP_FIELD_INT, NULL, "micro-batches accumulated per optimizer step"),
    F(steps, SP_FIELD_INT64, NULL, "optimizer steps (a resumed run may raise it)"),
    F(tokens, SP_FIELD_INT64, NULL, "token budget; > 0 sets steps = ceil(tokens / tokens per step)"),
    F(lr, SP_FIELD_DOUBLE, NULL, "peak learning rate, per step"),
    F(min_lr, SP_FIELD_DOUBLE, NULL, "learning rate at the end of the cosine decay"),
    F(warmup_steps, SP_FIELD_INT64, NULL, "steps of linear warm-up to lr"),
    F(beta1, SP_FIELD_DOUBLE, NULL, "AdamW first-moment decay"),
    F(beta2, SP_FIELD_DOUBLE, NULL, "AdamW second-moment decay"),
    F(adam_eps, SP_FIELD_DOUBLE, NULL, "AdamW epsilon"),
    F(weight_decay, SP_FIELD_DOUBLE, NULL, "decoupled weight decay, matrices only, per unit lr"),
    F(grad_clip, SP_FIELD_DOUBLE, NULL, "clip the global gradient L2 norm to this (0: off)"),
    F(seed, SP_FIELD_INT64, NULL, "seed of the model init and the data order"),
    F(log_every, SP_FIELD_INT64, NULL, "steps between training-log rows"),
    F(eval_every, SP_FIELD_INT64, NULL, "steps between validation losses (0: only at the end)"),
    F(eval_windows, SP_FIELD_INT, NULL, "validation sequences evaluated each time (a fixed set)"),
    F(ckpt_every, SP_FIELD_INT64, NULL, "steps between checkpoints (0: only at the end)"),
    F(keep, SP_FIELD_INT, NULL, "newest checkpoints kept in the output directory"),
    F(device, SP_FIELD_ENUM, sp_device_names, "backend: auto (CUDA when a GPU is visible), cpu or cuda"),
};
#undef F
const sp_field_table sp_train_options_table = {train_fields, (int)SP_ARRAY_LEN(train_fields)};

void sp_train_options_defaults(sp_train_options *opt)
{
    /* The default run (docs/training.md): the default model (pre, 4 layers, d_model 64) on
     * data/mobydick.txt, measured to finish within 5 minutes on 2 cores with a validation loss well
     * below the text's unigram entropy. */
    *opt = (sp_train_options){
        .data = SP_TRAIN_DEFAULT_DATA,
        .val_fraction = 0.1,
        .batch_size = 16,
        .seq_len = 0,
        .grad_accum = 1,
        .steps = 2000,
        .tokens = 0,
        .lr = 3e-3,
        .min_lr = 3e-4,
        .warmup_steps = 100,
        .beta1 = 0.9,
        .beta2 = 0.95,
        .adam_eps = 1e-8,
        .weight_decay = 0.1,
        .grad_clip = 1.0,
        .seed = 1,
        .log_every = 10,
        .eval_every = 200,
        .eval_windows = 64,
        .ckpt_every = 500,
        .keep = 3,
        .device = SP_DEVICE_AUTO,
    };
}

int64_t sp_train_tokens_per_step(const sp_train_options *opt)
{
    return (int64_t)opt->batch_size * opt->seq_len * opt->grad_accum;
}

sp_status sp_train_options_resolve(sp_train_options *opt, const sp_config *cfg, const char *where)
{
    if (!opt->data[0])
        return sp_error(SP_ERR_USAGE, "%s: data is empty (expected a text file)", where);
    const sp_int_range ranges[] = {
        {"batch_size", opt->batch_size, 1, 1 << 20, NULL},
        {"seq_len", opt->seq_len, 0, cfg->max_seq_len, ", the model's max_seq_len"},
        {"grad_accum", opt->grad_accum, 1, 1 << 20, NULL},
        {"steps", opt->steps, 1, INT64_C(1) << 40, NULL},
        {"tokens", opt->tokens, 0, INT64_C(1) << 50, NULL},
        {"warmup_steps", opt->warmup_steps, 0, INT64_C(1) << 40, NULL},
        {"log_every", opt->log_every, 1, INT64_C(1) << 40, NULL},
        {"eval_every", opt->eval_every, 0, INT64_C(1) << 40, NULL},
        {"eval_windows", opt->eval_windows, 1, 1 << 20, NULL},
        {"ckpt_every", opt->ckpt_every, 0, INT64_C(1) << 40, NULL},
        {"keep", opt->keep, 1, 1000, NULL},
    };
    SP_TRY(sp_check_int_ranges(ranges, SP_ARRAY_LEN(ranges), SP_ERR_USAGE, where));
    struct {
        const char *name;
        double value, lo, hi; /* lo < value < hi, or lo <= value with closed */
        int closed;
    } reals[] = {
        {"val_fraction", opt->val_fraction, 0, 0.5, 1},
        {"lr", opt->lr, 0, INFINITY, 0},
        {"min_lr", opt->min_lr, 0, opt->lr, 1},
        {"beta1", opt->beta1, 0, 1, 0},
        {"beta2", opt->beta2, 0, 1, 0},
        {"adam_eps", opt->adam_eps, 0, 1, 0},
        {"weight_decay", opt->weight_decay, 0, 1e6, 1},
        {"grad_clip", opt->grad_clip, 0, INFINITY, 1},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(reals); i++) {
        double v = reals[i].value;
        int ok = reals[i].closed ? (v >= reals[i].lo && v <= reals[i].hi) : (v > reals[i].lo && v < reals[i].hi);
        if (!ok)
            return sp_error(SP_ERR_USAGE, "%s: %s = %g is out of range (expected %g %s %s %s %g)", where,
                            reals[i].name, v, reals[i].lo, reals[i].closed ? "<=" : "<", reals[i].name,
                            reals[i].closed ? "<=" : "<", reals[i].hi);
    }
    if (opt->seed < 0)
        return sp_error(SP_ERR_USAGE, "%s: seed = %lld is negative (expected >= 0)", where, (long long)opt->seed);
    if (opt->seq_len == 0)
        opt->seq_len = cfg->max_seq_len;
    if (opt->tokens > 0) {
        int64_t per_step = sp_train_tokens_per_step(opt);
        opt->steps = (opt->tokens + per_step - 1) / per_step;
        opt->tokens = 0; /* resolved: the stored options name the step count */
    }
    return SP_OK;
}

char *sp_train_options_to_json(const sp_config *cfg, const sp_train_options *opt)
{
    cJSON *root = cJSON_CreateObject();
    sp_fields_to_json(&sp_config_table, cfg, root);
    sp_fields_to_json(&sp_train_options_table, opt, root);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

sp_status sp_train_options_from_json(const char *text, const char *where, sp_config *cfg, sp_train_options *opt)
{
    const sp_field_table *tables[] = {&sp_config_table, &sp_train_options_table};
    void *objs[] = {cfg, opt};
    return sp_fields_apply_json(text, where, 2, tables, objs);
}

/* Field f the same in objects a and b: its formatted values equal; for a double, also when they agree
 * to 15 significant digits, all that the options records written before 2026-11-27 hold (cJSON's
 * printing; io/config_file.c now writes every bit), so runs recorded then still match. */
static int same_value(const sp_field *f, const void *a, const void *b, char *va, char *vb, size_t len)
{
    if (f->type == SP_FIELD_DOUBLE) {
        snprintf(va, len, "%.15g", *(const double *)((const char *)a + f->offset));
        snprintf(vb, len, "%.15g", *(const double *)((const char *)b + f->offset));
        if (strcmp(va, vb) == 0)
            return 1;
    }
    sp_fields_format(a, f, va, len);
    sp_fields_format(b, f, vb, len);
    return strcmp(va, vb) == 0;
}

const sp_field *sp_train_options_diff(const sp_config *cfg_a, const sp_train_options *a, const sp_config *cfg_b,
                                      const sp_train_options *b, const char *const *allowed, char *va, char *vb,
                                      size_t len)
{
    const sp_field_table *tables[] = {&sp_config_table, &sp_train_options_table};
    const void *objs_a[] = {cfg_a, a}, *objs_b[] = {cfg_b, b};
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < tables[t]->n_fields; i++) {
            const sp_field *f = &tables[t]->fields[i];
            if (allowed && sp_enum_lookup(allowed, f->name) >= 0)
                continue;
            if (!same_value(f, objs_a[t], objs_b[t], va, vb, len))
                return f;
        }
    return NULL;
}
