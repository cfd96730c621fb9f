/* io/id_list.h: a growable array of token ids. */
#ifndef SP_ID_LIST_H
#define SP_ID_LIST_H

#include <stdint.h>
#include <stdlib.h>

#include "core/common.h"

typedef struct {
    int32_t *ids;
    size_t n, cap;
} sp_id_list;

static inline sp_status sp_id_list_push(sp_id_list *l, int32_t id)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        int32_t *ids = realloc(l->ids, cap * sizeof *ids);
        if (!ids)
            return sp_error(SP_ERR_NOMEM, "out of memory growing a token list to %zu ids", cap);
        l->ids = ids;
        l->cap = cap;
    }
    l->ids[l->n++] = id;
    return SP_OK;
}

#endif
