#include "io/dirs.h"

#include <dirent.h>
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

sp_status sp_make_output_dir(const char *path, int *made)
{
    struct stat st;
    *made = stat(path, &st) != 0;
    return sp_make_dirs(path);
}

sp_status sp_check_not_in_dir(const char *path, const char *dir, const char *what)
{
    struct stat out;
    if (stat(path, &out) != 0)
        return SP_OK; /* a new file replaces nothing */
    DIR *d = opendir(dir);
    if (!d)
        return SP_OK;
    char entry_path[4096];
    sp_status st = SP_OK;
    for (struct dirent *e; st == SP_OK && (e = readdir(d));) {
        struct stat in;
        snprintf(entry_path, sizeof entry_path, "%s/%s", dir, e->d_name);
        if (stat(entry_path, &in) == 0 && S_ISREG(in.st_mode) && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
            st = sp_error(SP_ERR_USAGE, "%s: the output is %s of %s, an input (choose another output path)", path,
                          e->d_name, what);
    }
    closedir(d);
    return st;
}
