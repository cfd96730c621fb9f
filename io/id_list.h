/* io/id_list.h: a growable array of token ids. */
#ifndef SP_ID_LIST_H
#define SP_ID_LIST_H

#include <stdint.h>

#include "core/common.h"

typedef struct {
    int32_t *ids;
    size_t n, cap;
} sp_id_list;

static inline sp_status sp_id_list_push(sp_id_list *l, int32_t id)
{
    if (l->n == l->cap)
        SP_TRY(sp_grow((void **)&l->ids, &l->cap, l->n + 1, sizeof *l->ids, "a token list"));
    l->ids[l->n++] = id;
    return SP_OK;
}

#endif
