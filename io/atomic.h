/* io/atomic.h: files that appear complete or not at all.
 *
 * sp_atomic_begin creates "<path>.tmp.<pid>.XXXXXX" in the destination's directory (so the final
 * rename cannot cross file systems), after removing the temporary files there whose writer no
 * longer runs (killed mid-write); the caller writes it, by name (HDF5) or through fd (plain files).
 * sp_atomic_commit fsyncs the file, renames it over path and fsyncs the directory, so after a crash
 * the path holds either the old file or the whole new one. sp_atomic_abort unlinks the temporary
 * file. An unwritable destination fails in begin, before any work, with SP_ERR_IO naming the path.
 */
#ifndef SP_ATOMIC_H
#define SP_ATOMIC_H

#include "core/common.h"

typedef struct {
    char *path;     /* the destination */
    char *tmp_path; /* the file being written */
    int fd;         /* open on tmp_path until commit or abort */
} sp_atomic_file;

sp_status sp_atomic_begin(const char *path, sp_atomic_file *af);
/* Writes all of buf through af->fd. */
sp_status sp_atomic_write(sp_atomic_file *af, const void *buf, size_t len);
/* On failure the temporary file is removed. Either way af is released. */
sp_status sp_atomic_commit(sp_atomic_file *af);
/* Removes the temporary file and releases af (safe on a zeroed or released af). */
void sp_atomic_abort(sp_atomic_file *af);

#endif
