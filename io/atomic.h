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
/* sp_atomic_flush then sp_atomic_publish: on failure the temporary file is removed. Either way af
 * is released. */
sp_status sp_atomic_commit(sp_atomic_file *af);
/* The two halves of commit, for outputs that appear together (io/output_set.h): flush fsyncs and
 * closes the temporary file (on failure it is removed and af released; a second flush does
 * nothing), so a writer of many files holds no descriptor per file; publish renames it over path
 * and fsyncs the directory, then releases af (on failure the temporary file is removed). */
sp_status sp_atomic_flush(sp_atomic_file *af);
sp_status sp_atomic_publish(sp_atomic_file *af);
/* Removes the temporary file and releases af (safe on a zeroed or released af). */
void sp_atomic_abort(sp_atomic_file *af);

/* Removes the temporary files (and staging directories, io/staging_dir.h) in dir that a process
 * which no longer runs left behind (killed mid-write); a live writer's, and anything else, stay.
 * sp_atomic_begin does it for its destination's directory. */
void sp_atomic_remove_stale(const char *dir);
/* The writer's pid when name is that of a temporary file ("<anything>.tmp.<pid>.XXXXXX", the form
 * sp_atomic_begin makes), else 0. */
long sp_atomic_temporary_pid(const char *name);

/* The destination a temporary file stands for, for messages: path without its ".tmp.<pid>.XXXXXX"
 * tail, or path itself when it is no temporary file's. */
void sp_atomic_destination(const char *path, char *buf, size_t len);

/* The whole file path is buf[len]: begin, write, commit (abort on failure). */
sp_status sp_atomic_write_file(const char *path, const void *buf, size_t len);

#endif
