/* io/dirs.h: output directories, created with their missing parents (mkdir -p). */
#ifndef SP_DIRS_H
#define SP_DIRS_H

#include "core/common.h"

/* Creates path and any missing parent; an existing directory is fine. SP_ERR_IO naming the part
 * that could not be created, or that exists and is not a directory. */
sp_status sp_make_dirs(const char *path);
/* The same for a command's output directory: *made = 1 when path did not exist before, so that a
 * command that fails can take it back (rmdir: it removes only an empty directory). */
sp_status sp_make_output_dir(const char *path, int *made);
/* SP_ERR_USAGE when path names an existing file of directory dir (the same inode, whatever the
 * spelling): an output that would replace one of the inputs read from dir. */
sp_status sp_check_not_in_dir(const char *path, const char *dir, const char *what);

#endif
