#include "io/dirs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

sp_status sp_make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return sp_error(SP_ERR_USAGE, "%.64s...: output path too long", path);
    for (char *p = buf + 1;; p++) {
        const int end = *p == '\0';
        if (*p != '/' && !end)
            continue;
        *p = '\0';
        struct stat st;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return sp_error(SP_ERR_IO, "%s: cannot create the directory: %s", buf, strerror(errno));
        if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
            return sp_error(SP_ERR_IO, "%s: exists and is not a directory", buf);
        if (end)
            return SP_OK;
        *p = '/';
    }
}
