/* analyzers/dev_bufs.h: groups of backend buffers: n buffers of one size allocated together, and
 * freeing several at once whatever state a failed setup left them in (NULL entries are skipped). */
#ifndef SP_DEV_BUFS_H
#define SP_DEV_BUFS_H

#include "kernels/backend.h"

/* A malloc'd array of n (>= 0) zeroed backend buffers of `bytes` each; NULL when an allocation
 * fails (after sp_error), with nothing left allocated. Free with sp_dev_bufs_free. */
sp_real **sp_dev_bufs_alloc(const sp_backend *be, int n, size_t bytes, const char *what);
/* Frees the buffers of sp_dev_bufs_alloc and the array (bufs may be NULL). */
void sp_dev_bufs_free(const sp_backend *be, sp_real **bufs, int n);
/* Frees the non-NULL buffers of bufs[0..n), an array the caller owns. */
void sp_dev_bufs_release(const sp_backend *be, sp_real *const *bufs, int n);

#endif
