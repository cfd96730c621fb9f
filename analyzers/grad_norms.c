/* analyzers/grad_norms.c: "grad_norms", the Frobenius norm of the loss gradient of every parameter
 * tensor, on evaluation batches.
 *
 * The gradient is the one the optimizer would consume: the gradient of each batch's mean loss,
 * accumulated over grad_batches batches with weight 1/n_batches each (the training loop's
 * accumulation), before clipping. Tables group it by block and role; the FFN gradient norm of block
 * l is the norm of all its FFN matrices together, sqrt(||dW_1||^2 + ||dW_2||^2 (+ ||dW_3||^2)), and
 * ffn_ratio = ffn[0] / ffn[L-1] (<< 1: vanishing toward the input). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyzers/model_eval.h"
#include "analyzers/ranks.h"

#define NAME "grad_norms"

/* Columns of the [block, role] table. */
static const sp_param_role table_roles[] = {SP_ROLE_WQ, SP_ROLE_WK, SP_ROLE_WV, SP_ROLE_WO, SP_ROLE_W1,
                                            SP_ROLE_W2, SP_ROLE_W3, SP_ROLE_NORM_GAIN, SP_ROLE_NORM_BIAS};
#define N_TABLE_ROLES ((int)SP_ARRAY_LEN(table_roles))

static int table_column(sp_param_role role)
{
    for (int c = 0; c < N_TABLE_ROLES; c++)
        if (table_roles[c] == role)
            return c;
    return -1;
}

/* "what: name0, name1, ..." listing roles[0..n) into buf. */
static void role_list(char *buf, size_t len, const char *what, const sp_param_role *roles, int n)
{
    size_t used = (size_t)snprintf(buf, len, "%s", what);
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", sp_role_names[roles[i]]);
}

typedef struct {
    int n_params, n_layers, n_batches;
    double loss;             /* mean over the batches of each batch's mean loss */
    double *tensor;          /* [n_params] */
    double *tensor_layer;    /* [n_params] block index, -1 outside the blocks */
    double *tensor_role;     /* [n_params] index into sp_role_names */
    double *table;           /* [n_layers, N_TABLE_ROLES], NaN where the block has no such tensor */
    double *ffn;             /* [n_layers] */
} grad_result;

/* The model's gradients become sum_b grad(batch b's mean loss) / n_batches: each batch's passes
 * add into them with their weight (sp_eval_batch_gradient), so no second gradient buffer is held. */
static sp_status accumulate(const sp_analysis *a, grad_result *g)
{
    int first, end; /* this MPI rank's batches (analyzers/ranks.h): all of them alone */
    sp_analysis_share(a, g->n_batches, &first, &end);
    double loss_sum = 0;
    for (int b = first; b < end; b++) {
        double loss;
        SP_TRY(sp_eval_batch_gradient(a, b, 1.0 / g->n_batches, b > first, &loss));
        loss_sum += loss;
    }
    for (int i = 0; sp_analysis_n_ranks(a) > 1 && i < g->n_params; i++) { /* every rank's share added up */
        const size_t n = sp_param_numel(sp_model_param_spec(a->model, i));
        if (first == end) /* a rank without a batch adds nothing */
            a->be->zero(sp_model_grad(a->model, i), n * sizeof(sp_real));
        SP_TRY(sp_analysis_sum_real_backend(a, sp_model_grad(a->model, i), n));
    }
    SP_TRY(sp_analysis_sum(a, &loss_sum, 1));
    g->loss = loss_sum / g->n_batches;
    return SP_OK;
}

static int is_ffn_role(sp_param_role role) { return role == SP_ROLE_W1 || role == SP_ROLE_W2 || role == SP_ROLE_W3; }

static void tabulate(const sp_analysis *a, grad_result *g)
{
    sp_model *m = a->model;
    for (int at = 0; at < g->n_layers * N_TABLE_ROLES; at++)
        g->table[at] = NAN; /* sums of squares first, NaN until a tensor lands in the cell */
    for (int i = 0; i < g->n_params; i++) {
        const sp_param_spec *spec = sp_model_param_spec(m, i);
        const double ss = a->be->sumsq(sp_param_numel(spec), sp_model_grad(m, i));
        g->tensor[i] = sqrt(ss);
        g->tensor_layer[i] = spec->layer;
        g->tensor_role[i] = spec->role;
        const int c = table_column(spec->role);
        if (spec->layer >= 0 && c >= 0) {
            double *cell = &g->table[spec->layer * N_TABLE_ROLES + c];
            *cell = (isnan(*cell) ? 0 : *cell) + ss;
        }
    }
    for (int l = 0; l < g->n_layers; l++) {
        double ffn_sq = 0;
        for (int c = 0; c < N_TABLE_ROLES; c++) {
            double *cell = &g->table[l * N_TABLE_ROLES + c];
            if (is_ffn_role(table_roles[c]) && !isnan(*cell))
                ffn_sq += *cell;
            *cell = sqrt(*cell);
        }
        g->ffn[l] = sqrt(ffn_sq);
    }
}

static sp_status write_result(const sp_analysis *a, const grad_result *g)
{
    sp_report *r = a->report;
    const int64_t np = g->n_params, L = g->n_layers;
    char cols[256], roles[512];
    role_list(cols, sizeof cols, "||dLoss/dW||_F of each block's tensors by role (several norms of one role: their joint "
                                 "norm; NaN: no such tensor); columns: ",
              table_roles, N_TABLE_ROLES);
    sp_param_role all[SP_N_ROLES];
    for (int i = 0; i < SP_N_ROLES; i++)
        all[i] = (sp_param_role)i;
    role_list(roles, sizeof roles, "role of each tensor, an index into: ", all, SP_N_ROLES);
    SP_TRY(sp_report_write_array(r, NAME, "tensor", 1, &np, g->tensor,
                                 &(sp_report_array_attrs){"1", "[tensor]",
                                                          "||dLoss/dW||_F of every parameter tensor, in the "
                                                          "checkpoint's parameter order"}));
    SP_TRY(sp_report_write_array(r, NAME, "tensor_layer", 1, &np, g->tensor_layer,
                                 &(sp_report_array_attrs){"1", "[tensor]", "block index of each tensor, -1 outside the blocks"}));
    SP_TRY(sp_report_write_array(r, NAME, "tensor_role", 1, &np, g->tensor_role,
                                 &(sp_report_array_attrs){"1", "[tensor]", roles}));
    SP_TRY(sp_report_write_array(r, NAME, "layer_role", 2, (int64_t[]){L, N_TABLE_ROLES}, g->table,
                                 &(sp_report_array_attrs){"1", "[block, role]", cols}));
    SP_TRY(sp_report_write_array(r, NAME, "ffn", 1, &L, g->ffn,
                                 &(sp_report_array_attrs){"1", "[block]",
                                                          "FFN gradient norm sqrt(||dW_1||^2 + ||dW_2||^2 (+ ||dW_3||^2))"}));
    double global_sq = 0;
    for (int i = 0; i < g->n_params; i++)
        global_sq += g->tensor[i] * g->tensor[i];
    const int w1 = table_column(SP_ROLE_W1), w2 = table_column(SP_ROLE_W2);
    const double *first = g->table, *last = g->table + (L - 1) * N_TABLE_ROLES;
    SP_TRY(sp_report_set_scalar(r, NAME, "global_norm", sqrt(global_sq)));
    SP_TRY(sp_report_set_scalar(r, NAME, "ffn_ratio", g->ffn[0] / g->ffn[L - 1]));
    SP_TRY(sp_report_set_scalar(r, NAME, "w1_ratio", first[w1] / last[w1]));
    SP_TRY(sp_report_set_scalar(r, NAME, "w2_ratio", first[w2] / last[w2]));
    SP_TRY(sp_report_set_scalar(r, NAME, "ffn_first", g->ffn[0]));
    SP_TRY(sp_report_set_scalar(r, NAME, "ffn_last", g->ffn[L - 1]));
    SP_TRY(sp_report_set_scalar(r, NAME, "loss", g->loss));
    SP_TRY(sp_report_set_scalar(r, NAME, "n_batches", g->n_batches));
    return SP_OK;
}

static sp_status grad_norms_finish(const sp_analysis *a, void *state)
{
    (void)state;
    sp_model *m = a->model;
    grad_result g = {.n_params = sp_model_n_params(m), .n_layers = a->n_layers};
    g.n_batches = sp_eval_n_batches(a) < a->opts->grad_batches ? sp_eval_n_batches(a) : a->opts->grad_batches;
    const size_t np = (size_t)g.n_params, L = (size_t)g.n_layers;
    double *buf = sp_malloc((3 * np + L * (N_TABLE_ROLES + 1)) * sizeof *buf, "gradient norm tables");
    if (!buf)
        return SP_ERR_NOMEM;
    g.tensor = buf;
    g.tensor_layer = buf + np;
    g.tensor_role = buf + 2 * np;
    g.table = buf + 3 * np;
    g.ffn = g.table + L * N_TABLE_ROLES;
    sp_status st = accumulate(a, &g);
    if (st == SP_OK) {
        tabulate(a, &g);
        st = write_result(a, &g);
    }
    free(buf);
    return st;
}

const sp_analyzer sp_analyzer_grad_norms = {
    .name = NAME,
    .description = "Frobenius norms of the loss gradient of every parameter tensor, by layer and role",
    .needs = SP_NEEDS_MODEL | SP_NEEDS_EVAL_PASSES,
    .finish = grad_norms_finish,
};
