#include "analyzers/dev_bufs.h"

#include <stdlib.h>

sp_real **sp_dev_bufs_alloc(const sp_backend *be, int n, size_t bytes, const char *what)
{
    sp_real **bufs = sp_calloc((size_t)(n > 0 ? n : 1), sizeof *bufs, what);
    for (int i = 0; bufs && i < n; i++)
        if (!(bufs[i] = be->alloc(bytes, what))) {
            sp_dev_bufs_free(be, bufs, i);
            return NULL;
        }
    return bufs;
}

void sp_dev_bufs_release(const sp_backend *be, sp_real *const *bufs, int n)
{
    for (int i = 0; i < n; i++)
        if (bufs[i])
            be->free(bufs[i]);
}

void sp_dev_bufs_free(const sp_backend *be, sp_real **bufs, int n)
{
    if (bufs)
        sp_dev_bufs_release(be, bufs, n);
    free(bufs);
}
