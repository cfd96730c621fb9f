#include "io/atomic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/staging_dir.h"

/* The directory part of path ("." when it has none); malloc'ed. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

long sp_atomic_temporary_pid(const char *name)
{
    const char *tag = strstr(name, ".tmp.");
    char *end = NULL;
    long pid = tag ? strtol(tag + 5, &end, 10) : 0;
    return pid > 0 && end && *end == '.' && strlen(end + 1) == 6 ? pid : 0;
}

void sp_atomic_destination(const char *path, char *buf, size_t len)
{
    const char *tag = NULL;
    for (const char *p = strstr(path, ".tmp."); p; p = strstr(p + 1, ".tmp."))
        tag = p; /* the last one: a directory's name may hold ".tmp." too */
    size_t keep = tag && sp_atomic_temporary_pid(tag) ? (size_t)(tag - path) : strlen(path);
    snprintf(buf, len, "%.*s", (int)keep, path);
}

void sp_atomic_remove_stale(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        long pid = sp_atomic_temporary_pid(e->d_name);
        if (pid == 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[4352];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path && unlink(path) != 0 &&
            (errno == EISDIR || errno == EPERM))
            sp_staging_dir_remove(path);
    }
    closedir(d);
}

static void release(sp_atomic_file *af)
{
    if (af->tmp_path && af->fd >= 0) /* a zeroed af owns no descriptor */
        close(af->fd);
    free(af->path);
    free(af->tmp_path);
    af->path = af->tmp_path = NULL;
    af->fd = -1;
}

sp_status sp_atomic_begin(const char *path, sp_atomic_file *af)
{
    *af = (sp_atomic_file){.fd = -1};
    struct stat st;
    if (!*path)
        return sp_error(SP_ERR_USAGE, "empty output path");
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return sp_error(SP_ERR_IO, "%s: cannot write: is a directory", path);
    size_t n = strlen(path) + 32;
    af->path = strdup(path);
    af->tmp_path = malloc(n);
    char *dir = dir_of(path);
    if (!af->path || !af->tmp_path || !dir) {
        free(dir);
        release(af);
        return sp_error(SP_ERR_NOMEM, "%s: out of memory", path);
    }
    /* the writer's pid in the name tells a later writer whether the file is stale */
    snprintf(af->tmp_path, n, "%s.tmp.%ld.XXXXXX", path, (long)getpid());
    sp_atomic_remove_stale(dir);
    af->fd = mkstemp(af->tmp_path);
    if (af->fd < 0) {
        int err = errno;
        sp_error(SP_ERR_IO, "%s: cannot create a file in directory '%s': %s", path, dir, strerror(err));
        free(dir);
        release(af);
        return SP_ERR_IO;
    }
    free(dir);
    /* mkstemp makes the file private (0600); give it the usual permissions */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(af->fd, 0666 & ~mask);
    return SP_OK;
}

sp_status sp_atomic_write(sp_atomic_file *af, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t done = write(af->fd, p, len);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return sp_error(SP_ERR_IO, "%s: write failed: %s", af->path, strerror(done < 0 ? errno : EIO));
        p += done;
        len -= (size_t)done;
    }
    return SP_OK;
}

sp_status sp_atomic_flush(sp_atomic_file *af)
{
    if (af->fd < 0)
        return SP_OK; /* flushed before */
    int err = fsync(af->fd) != 0 ? errno : 0;
    if (close(af->fd) != 0 && !err)
        err = errno;
    af->fd = -1;
    if (err) {
        sp_error(SP_ERR_IO, "%s: cannot flush to disk: %s", af->path, strerror(err));
        sp_atomic_abort(af);
        return SP_ERR_IO;
    }
    return SP_OK;
}

sp_status sp_atomic_publish(sp_atomic_file *af)
{
    if (rename(af->tmp_path, af->path) != 0) {
        sp_error(SP_ERR_IO, "%s: cannot rename the temporary file into place: %s", af->path, strerror(errno));
        sp_atomic_abort(af);
        return SP_ERR_IO;
    }
    /* make the rename itself durable */
    char *dir = dir_of(af->path);
    int dir_fd = dir ? open(dir, O_RDONLY) : -1;
    if (dir_fd >= 0) {
        fsync(dir_fd);
        close(dir_fd);
    }
    free(dir);
    release(af);
    return SP_OK;
}

sp_status sp_atomic_commit(sp_atomic_file *af)
{
    SP_TRY(sp_atomic_flush(af));
    return sp_atomic_publish(af);
}

void sp_atomic_abort(sp_atomic_file *af)
{
    if (af->tmp_path)
        unlink(af->tmp_path);
    release(af);
}

sp_status sp_atomic_write_file(const char *path, const void *buf, size_t len)
{
    sp_atomic_file af;
    SP_TRY(sp_atomic_begin(path, &af));
    sp_status st = sp_atomic_write(&af, buf, len);
    if (st != SP_OK) {
        sp_atomic_abort(&af);
        return st;
    }
    return sp_atomic_commit(&af);
}
