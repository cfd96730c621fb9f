#include "fuzz/temp_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { MAX_FILES = 4 };

typedef struct {
    char path[4096];
    int fd;
} temp_file;

static char dir[4096];
static temp_file files[MAX_FILES];
static int n_files;
static time_t stamp;

static void die(const char *what, const char *path)
{
    perror(path);
    fprintf(stderr, "fuzz: %s failed\n", what);
    abort();
}

static void remove_all(void)
{
    for (int i = 0; i < n_files; i++) {
        close(files[i].fd);
        unlink(files[i].path);
    }
    rmdir(dir);
}

static void make_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/spanprobe-fuzz-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir))
        die("mkdtemp", dir);
    atexit(remove_all);
}

static temp_file *find_or_create(const char *name)
{
    for (int i = 0; i < n_files; i++)
        if (strcmp(strrchr(files[i].path, '/') + 1, name) == 0)
            return &files[i];
    if (n_files == MAX_FILES)
        die("too many temporary files", name);
    if (!dir[0])
        make_dir();
    temp_file *f = &files[n_files];
    snprintf(f->path, sizeof f->path, "%s/%s", dir, name);
    f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (f->fd < 0)
        die("open", f->path);
    n_files++;
    return f;
}

const char *fuzz_temp_file(const char *name, const uint8_t *data, size_t size)
{
    temp_file *f = find_or_create(name);
    for (size_t done = 0; done < size;) {
        ssize_t n = pwrite(f->fd, data + done, size - done, (off_t)done);
        if (n <= 0)
            die("pwrite", f->path);
        done += (size_t)n;
    }
    if (ftruncate(f->fd, (off_t)size) != 0)
        die("ftruncate", f->path);
    /* mtimes 1, 2, 3, ... seconds after the epoch: never the same twice in this process */
    const struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = ++stamp}};
    if (futimens(f->fd, times) != 0)
        die("futimens", f->path);
    return f->path;
}
