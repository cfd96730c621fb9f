/* check/defaults.c: the built-in rules of `spanprobe check` (what runs without --rules), as a rules
 * document so that they go through the same parser as a user's file and `--print-rules` shows them
 * verbatim. Each limit is justified by measured runs in docs/check.md ("Built-in rules"). Every
 * rule is optional: a report of an activation dump has no gradients or pruning, a checkpoint that
 * was not trained by spanprobe has no training state, and those rules are skipped with the reason. */
#include "check/rules.h"

const char sp_check_default_rules_json[] =
    "{\n"
    "  \"rules\": [\n"
    "    {\"name\": \"collapse.adjacent_cosine\",\n"
    "     \"description\": \"representation collapse: the deepest half of the blocks barely turn the hidden state "
    "(mean cos(h_l, h_l+1) over the last L/2 blocks)\",\n"
    "     \"metric\": \"summary:similarity.adjacent_cosine_deep_half\", \"op\": \"<=\", \"limit\": 0.99,\n"
    "     \"optional\": true},\n"
    "    {\"name\": \"collapse.prune_deep_half\",\n"
    "     \"description\": \"representation collapse: removing the deepest half of the blocks costs almost no "
    "evaluation loss (nats/token)\",\n"
    "     \"metric\": \"summary:pruning.delta_drop_half\", \"op\": \">=\", \"limit\": 0.1,\n"
    "     \"optional\": true},\n"
    "    {\"name\": \"vanishing_gradients.ffn_ratio\",\n"
    "     \"description\": \"vanishing gradients toward the input: FFN gradient norm of the first block over the "
    "last\",\n"
    "     \"metric\": \"summary:grad_norms.ffn_ratio\", \"op\": \">=\", \"limit\": 0.1,\n"
    "     \"optional\": true},\n"
    "    {\"name\": \"divergence.training\",\n"
    "     \"description\": \"divergence: the training run that wrote the checkpoint stopped on a non-finite loss, "
    "gradient or weight\",\n"
    "     \"metric\": \"summary:train.diverged\", \"op\": \"==\", \"limit\": 0,\n"
    "     \"optional\": true},\n"
    "    {\"name\": \"divergence.eval_loss\",\n"
    "     \"description\": \"divergence: the evaluation loss of the analyzed weights is not finite\",\n"
    "     \"metric\": \"summary:grad_norms.loss\", \"op\": \"finite\",\n"
    "     \"optional\": true},\n"
    "    {\"name\": \"divergence.eval_gradient\",\n"
    "     \"description\": \"divergence: the gradient norm of the analyzed weights is not finite\",\n"
    "     \"metric\": \"summary:grad_norms.global_norm\", \"op\": \"finite\",\n"
    "     \"optional\": true}\n"
    "  ]\n"
    "}\n";
