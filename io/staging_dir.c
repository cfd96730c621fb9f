#include "io/staging_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/atomic.h"

sp_status sp_staging_dir_begin(const char *dir, char *stage, size_t len)
{
    sp_atomic_remove_stale(dir);
    if (snprintf(stage, len, "%s/.stage.tmp.%ld.XXXXXX", dir, (long)getpid()) >= (int)len)
        return sp_error(SP_ERR_USAGE, "%s: path too long", dir);
    if (!mkdtemp(stage))
        return sp_error(SP_ERR_IO, "%s: cannot create a directory there: %s", dir, strerror(errno));
    return SP_OK;
}

/* Renames (to_dir non-NULL) or removes every file of stage; stops at the first failed rename. */
static sp_status each_file(const char *stage, const char *to_dir)
{
    DIR *d = opendir(stage);
    if (!d)
        return sp_error(SP_ERR_IO, "%s: cannot list the directory: %s", stage, strerror(errno));
    sp_status st = SP_OK;
    for (struct dirent *e; st == SP_OK && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char from[4352], to[4352];
        snprintf(from, sizeof from, "%s/%s", stage, e->d_name);
        if (!to_dir) {
            unlink(from);
            continue;
        }
        snprintf(to, sizeof to, "%s/%s", to_dir, e->d_name);
        if (rename(from, to) != 0)
            st = sp_error(SP_ERR_IO, "%s: cannot move the file into place: %s", to, strerror(errno));
    }
    closedir(d);
    return st;
}

sp_status sp_staging_dir_commit(const char *stage, const char *dir)
{
    int dir_fd = open(dir, O_RDONLY);
    sp_status st = each_file(stage, dir);
    if (dir_fd >= 0) { /* make the renames durable */
        fsync(dir_fd);
        close(dir_fd);
    }
    sp_staging_dir_remove(stage); /* empty after a commit */
    return st;
}

void sp_staging_dir_remove(const char *stage)
{
    each_file(stage, NULL);
    rmdir(stage);
}
