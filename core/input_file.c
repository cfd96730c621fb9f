#include "core/input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t mode)
{
    return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISSOCK(mode) ? "a socket" : "a device";
}

sp_status sp_file_open_regular(const char *path, FILE **f, int64_t *size)
{
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return sp_error(SP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return sp_error(SP_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return sp_error(SP_ERR_IO, "%s: expected a regular file, found %s", path, kind_of(st.st_mode));
    }
    FILE *fp = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!fp) {
        int e = errno;
        close(fd);
        return sp_error(SP_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    *f = fp;
    if (size)
        *size = (int64_t)st.st_size;
    return SP_OK;
}

static uint64_t read_budget; /* 0: not set, the machine's memory */

void sp_read_budget_set(uint64_t bytes) { read_budget = bytes; }

uint64_t sp_read_budget(void)
{
    if (read_budget)
        return read_budget;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
}

const char *sp_read_budget_hint(void) { return read_budget ? " (raise --max-memory-gib)" : " (the machine's memory)"; }
