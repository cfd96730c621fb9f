#include "io/output_set.h"

#include <stdlib.h>

/* A new zeroed member appended to set, or NULL when out of memory. */
static sp_atomic_file *new_member(sp_output_set *set)
{
    sp_atomic_file *af = calloc(1, sizeof *af);
    if (af && sp_grow((void **)&set->files, &set->cap, set->n + 1, sizeof *set->files, "output files") != SP_OK) {
        free(af);
        return NULL;
    }
    if (af) {
        af->fd = -1;
        set->files[set->n++] = af;
    }
    return af;
}

sp_status sp_output_set_begin(sp_output_set *set, const char *path, sp_atomic_file **af)
{
    *af = new_member(set);
    if (!*af)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory", path);
    sp_status st = sp_atomic_begin(path, *af);
    if (st != SP_OK) { /* no member then */
        free(*af);
        *af = NULL;
        set->n--;
    }
    return st;
}

sp_status sp_output_set_adopt(sp_output_set *set, sp_atomic_file *af)
{
    sp_atomic_file *member = new_member(set);
    if (!member) {
        sp_error(SP_ERR_NOMEM, "%s: out of memory", af->path);
        sp_atomic_abort(af);
        return SP_ERR_NOMEM;
    }
    *member = *af;
    *af = (sp_atomic_file){.fd = -1};
    return SP_OK;
}

sp_status sp_output_set_commit(sp_output_set *set)
{
    sp_status st = SP_OK;
    for (size_t i = 0; i < set->n && st == SP_OK; i++)
        st = sp_atomic_flush(set->files[i]);
    for (size_t i = 0; i < set->n && st == SP_OK; i++)
        st = sp_atomic_publish(set->files[i]);
    sp_output_set_abort(set); /* what is left: nothing after a commit, the temporary files after a failure */
    return st;
}

void sp_output_set_abort(sp_output_set *set)
{
    for (size_t i = 0; i < set->n; i++) {
        sp_atomic_abort(set->files[i]);
        free(set->files[i]);
    }
    free(set->files);
    *set = (sp_output_set){0};
}
