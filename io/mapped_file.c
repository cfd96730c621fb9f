#define _DEFAULT_SOURCE /* madvise: posix_madvise(POSIX_MADV_DONTNEED) is a no-op in glibc */
#include "io/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *file_kind(mode_t mode)
{
    return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISSOCK(mode) ? "a socket" : "a device";
}

sp_status sp_map_file(const char *path, sp_mapped_file *m)
{
    *m = (sp_mapped_file){0};
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return sp_error(SP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    sp_status status = SP_OK;
    if (fstat(fd, &st) != 0)
        status = sp_error(SP_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        status = sp_error(SP_ERR_INPUT, "%s: expected a regular file, found %s", path, file_kind(st.st_mode));
    else if ((off_t)(size_t)st.st_size != st.st_size)
        status = sp_error(SP_ERR_INPUT, "%s: %lld bytes do not fit in memory addresses", path, (long long)st.st_size);
    else if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
            status = sp_error(SP_ERR_IO, "%s: cannot map %lld bytes: %s", path, (long long)st.st_size,
                              strerror(errno));
        else
            *m = (sp_mapped_file){.data = p, .size = (size_t)st.st_size};
    }
    close(fd);
    return status;
}

void sp_unmap_file(sp_mapped_file *m)
{
    if (m->data)
        munmap((void *)m->data, m->size);
    *m = (sp_mapped_file){0};
}

void sp_mapped_release(const void *p, size_t n)
{
    if (n == 0)
        return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t begin = (uintptr_t)p & ~(page - 1), end = ((uintptr_t)p + n + page - 1) & ~(page - 1);
    madvise((void *)begin, end - begin, MADV_DONTNEED); /* advice: nothing to do when refused */
}
