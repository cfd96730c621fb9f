#define _XOPEN_SOURCE 700 /* nftw */
#include "tree.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path);
}

int tree_remove(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int tree_count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    const size_t ls = strlen(suffix);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const size_t len = strlen(e->d_name);
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (len >= ls && strcmp(e->d_name + len - ls, suffix) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            n++;
    }
    closedir(d);
    return n;
}
