/* io/dir_lock.h: one writer per output directory. A run holds an advisory lock (flock) on
 * "<dir>/.spanprobe.lock" (SP_DIR_LOCK_NAME), which also records its pid; the kernel drops the lock
 * when the process ends, however it ends, so a killed run never leaves a directory locked. */
#ifndef SP_DIR_LOCK_H
#define SP_DIR_LOCK_H

#include "core/common.h"

#define SP_DIR_LOCK_NAME ".spanprobe.lock"

/* Locks dir (which must exist); *fd is the lock to pass to sp_dir_unlock. SP_ERR_USAGE naming the
 * holder's pid when another process holds it, SP_ERR_IO when the lock file cannot be made. */
sp_status sp_dir_lock(const char *dir, const char *command, int *fd);
/* Releases the lock (fd < 0: nothing to do). The lock file stays: removing it would race. */
void sp_dir_unlock(int fd);

#endif
