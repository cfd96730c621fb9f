#include "io/file_read.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

sp_status sp_file_read_all(const char *path, size_t max_bytes, unsigned char **data, size_t *size)
{
    FILE *f = NULL;
    int64_t n = 0;
    SP_TRY(sp_file_open_regular(path, &f, &n));
    if ((uint64_t)n > max_bytes) {
        fclose(f);
        return sp_error(SP_ERR_INPUT, "%s: %lld bytes is too large (at most %zu)", path, (long long)n, max_bytes);
    }
    unsigned char *buf = sp_malloc((size_t)n + 1, path);
    if (!buf) {
        fclose(f);
        return SP_ERR_NOMEM;
    }
    size_t got = fread(buf, 1, (size_t)n, f);
    int failed = ferror(f);
    fclose(f);
    if (got != (size_t)n || failed) {
        free(buf);
        return sp_error(SP_ERR_IO, "%s: read %zu of %lld bytes", path, got, (long long)n);
    }
    buf[n] = '\0';
    *data = buf;
    *size = (size_t)n;
    return SP_OK;
}
