/* analyzers/block_jacobian.h: the Jacobians of a model's blocks around its last forward pass: the
 * map of a range of blocks h_first -> h_last as a linear operator (analyzers/linop.h) built from
 * exact block JVPs and VJPs, and the token-local Jacobians J_t as explicit matrices.
 *
 * Copies: a forward pass over `copies` copies of one len-token sequence (sp_block_forward_copies)
 * makes every block's Jacobian block diagonal over the copies, since sequences do not interact; one
 * JVP or VJP then carries `copies` independent vectors, one per copy.
 *
 * A vector of the operator holds every stream of one sequence, [stream][position][feature], so
 * n = n_streams * len * d_model; for siamese the map is the joint (X, Y) -> (X', Y'). */
#ifndef SP_BLOCK_JACOBIAN_H
#define SP_BLOCK_JACOBIAN_H

#include "analyzers/linop.h"
#include "model/model.h"

/* Forward pass without targets over `copies` copies of tokens[len] (batch = copies, seq_len = len). */
sp_status sp_block_forward_copies(sp_model *m, const int32_t *tokens, int len, int copies);

typedef struct {
    sp_model *m;
    int first, last; /* the blocks [first, last) the operator maps through */
    int copies, len, n_streams, d_model;
    sp_real *chain[2]; /* between the blocks of a chain: vector blocks, allocated on first use */
} sp_block_op;

/* For the model's last forward pass, which must have been copies x len rows. */
sp_status sp_block_op_init(sp_block_op *op, sp_model *m, int copies, int len);
void sp_block_op_free(sp_block_op *op); /* safe on a zeroed struct */
/* The map h_first -> h_last (blocks first..last-1; first == last is the identity). Its vectors
 * live in backend memory in the layout of analyzers/linop.h with one segment per stream
 * (seg_len = len * d_model) and max_k = copies: segment s of a block is stream s over the copies,
 * [copies * len, d_model], exactly what the model's JVP and VJP read and write, so no product is
 * staged. Valid while op lives and the forward pass stays; a later call re-aims the same op. */
sp_linop sp_block_op_linop(sp_block_op *op, int first, int last);

/* J_t = d x_{l+1}[t] / d x_l[t] at t = len - 1 for every block l, around tokens[len] (causal
 * attention: position t sees exactly this prefix). The diagonal block of the sequence Jacobian, so
 * it is exact from JVPs whose tangent is one basis vector at t, read at t: the JVP outputs at t are
 * the columns of J_t, gathered on the backend as the rows of its transpose. The forward pass runs
 * on the prefix once; sp_model_block_jvp_at computes position t alone for a chunk of basis
 * vectors (a row each; attention of query t against the prefix). jt (backend memory,
 * fp64) gets n_layers matrices J_t^T of (S d) x (S d), S = n_streams, row-major: row s' * d + j is
 * the derivative by input stream s' feature j, column s * d + i output stream s feature i (J_t^T
 * has the singular values of J_t). Runs its own forward pass over the len tokens, replacing the
 * model's activations; the columns go in chunks of max(1, max_rows / len) (a RoPE pad of at most
 * max_rows rows). */
sp_status sp_block_token_jacobians(sp_model *m, const int32_t *tokens, int len, int max_rows, double *jt);

#endif
