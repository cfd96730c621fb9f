#include "io/dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

sp_status sp_dir_lock(const char *dir, const char *command, int *fd)
{
    *fd = -1;
    char path[4200];
    if (snprintf(path, sizeof path, "%s/%s", dir, SP_DIR_LOCK_NAME) >= (int)sizeof path)
        return sp_error(SP_ERR_USAGE, "%s: path too long", dir);
    int lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0)
        return sp_error(SP_ERR_IO, "%s: cannot create the lock file: %s", path, strerror(errno));
    if (flock(lock, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        char holder[32] = {0};
        ssize_t got = pread(lock, holder, sizeof holder - 1, 0);
        close(lock);
        if (err != EWOULDBLOCK)
            return sp_error(SP_ERR_IO, "%s: cannot lock: %s", path, strerror(err));
        long pid = got > 0 ? strtol(holder, NULL, 10) : 0;
        char who[48] = "";
        if (pid > 0)
            snprintf(who, sizeof who, " (pid %ld)", pid);
        return sp_error(SP_ERR_USAGE, "%s: in use by another spanprobe process%s (wait for it to end, or stop it)", dir,
                        who);
    }
    char mine[64];
    int len = snprintf(mine, sizeof mine, "%ld %s\n", (long)getpid(), command);
    if (ftruncate(lock, 0) != 0 || pwrite(lock, mine, (size_t)len, 0) != len) {
        int err = errno;
        close(lock);
        return sp_error(SP_ERR_IO, "%s: cannot write the lock file: %s", path, strerror(err));
    }
    *fd = lock;
    return SP_OK;
}

void sp_dir_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* closing the descriptor drops the flock */
}
