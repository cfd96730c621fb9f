/* plots/gnuplot.c: gnuplot as a child process (fork, chdir, exec), its errors as one line. */
#include "plots/gnuplot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_NO_CHDIR 126
#define EXIT_NO_EXEC 127

/* The line of gnuplot's output that says what went wrong: the first `"file" line N: ...` that is
 * not a warning, else the last non-empty line. */
static void error_line(const char *out, char *buf, size_t len)
{
    snprintf(buf, len, "no message");
    const char *last = NULL;
    size_t last_len = 0;
    for (const char *p = out; *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line - 1 ? n : sizeof line - 1), p);
        if (strstr(line, " line ") && strstr(line, ": ") && !strstr(line, "warning:")) {
            snprintf(buf, len, "%.*s", (int)(len - 1), line);
            return;
        }
        if (strspn(line, " \t^") < strlen(line)) {
            last = p;
            last_len = n;
        }
        p = end ? end + 1 : p + n;
    }
    if (last)
        snprintf(buf, len, "%.*s", (int)(last_len < len - 1 ? last_len : len - 1), last);
}

/* Reads everything from fd into a NUL-terminated buffer of at most cap bytes (the rest dropped). */
static void drain(int fd, char *out, size_t cap)
{
    size_t used = 0;
    char chunk[4096];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t keep = used + (size_t)n < cap - 1 ? (size_t)n : cap - 1 - used;
        memcpy(out + used, chunk, keep);
        used += keep;
    }
    out[used] = '\0';
}

/* Exit status of gnuplot run on script in dir with the expression expr; its output into out. */
static sp_status run_child(const char *dir, const char *script, const char *expr, char *out, size_t cap, int *status)
{
    int fds[2];
    if (pipe(fds) != 0)
        return sp_error(SP_ERR_IO, "%s/%s: cannot create a pipe for gnuplot: %s", dir, script, strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return sp_error(SP_ERR_IO, "%s/%s: cannot start gnuplot: %s", dir, script, strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        if (chdir(dir) != 0)
            _exit(EXIT_NO_CHDIR);
        execlp("gnuplot", "gnuplot", "-e", expr, script, (char *)NULL);
        _exit(EXIT_NO_EXEC);
    }
    close(fds[1]);
    drain(fds[0], out, cap);
    close(fds[0]);
    int wstatus;
    while (waitpid(pid, &wstatus, 0) < 0)
        if (errno != EINTR)
            return sp_error(SP_ERR_IO, "%s/%s: lost the gnuplot process: %s", dir, script, strerror(errno));
    *status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    return SP_OK;
}

typedef enum { IMAGE_OK, IMAGE_INVALID, IMAGE_TRUNCATED } image_check;

/* Whether the image at path starts with its format's signature and ends as its format ends: gnuplot
 * exits 0 after a failed write (a full disk), leaving a cut file. */
static image_check check_image(const char *path, const char *fmt)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return IMAGE_INVALID;
    char head[512] = {0}, tail[65] = {0};
    size_t n = fread(head, 1, sizeof head - 1, f), n_tail = 0;
    if (fseek(f, -(long)(sizeof tail - 1), SEEK_END) == 0 || fseek(f, 0, SEEK_SET) == 0)
        n_tail = fread(tail, 1, sizeof tail - 1, f);
    fclose(f);
    static const char png_end[] = "\0\0\0\0IEND\xae\x42\x60\x82"; /* the empty IEND chunk and its CRC */
    if (strcmp(fmt, "png") == 0) {
        if (n < 8 || memcmp(head, "\x89PNG\r\n\x1a\n", 8) != 0)
            return IMAGE_INVALID;
        return n_tail >= 12 && memcmp(tail + n_tail - 12, png_end, 12) == 0 ? IMAGE_OK : IMAGE_TRUNCATED;
    }
    for (size_t i = 0; i < n_tail; i++) /* the tail as text for strstr */
        tail[i] = tail[i] ? tail[i] : ' ';
    if (strcmp(fmt, "pdf") == 0) {
        if (n < 5 || memcmp(head, "%PDF-", 5) != 0)
            return IMAGE_INVALID;
        return strstr(tail, "%%EOF") ? IMAGE_OK : IMAGE_TRUNCATED;
    }
    if (n == 0 || !strstr(head, "<svg"))
        return IMAGE_INVALID;
    return strstr(tail, "</svg>") ? IMAGE_OK : IMAGE_TRUNCATED;
}

sp_status sp_gnuplot_render(const char *dir, const char *script, const char *base, const char *fmt)
{
    char tmp_name[512], tmp_path[4700], final_path[4700], expr[1200];
    snprintf(tmp_name, sizeof tmp_name, "%s.%s.tmp.%ld", base, fmt, (long)getpid());
    snprintf(tmp_path, sizeof tmp_path, "%s/%s", dir, tmp_name);
    snprintf(final_path, sizeof final_path, "%s/%s.%s", dir, base, fmt);
    snprintf(expr, sizeof expr, "fmt=\"%s\"; out_file=\"%s\"", fmt, tmp_name);
    char *out = malloc(65536);
    if (!out)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory for gnuplot's output", final_path);
    int status = 0;
    sp_status st = run_child(dir, script, expr, out, 65536, &status);
    if (st == SP_OK && status == EXIT_NO_EXEC)
        st = sp_error(SP_ERR_IO, "%s: cannot run gnuplot: not found on the PATH (Debian: apt-get install gnuplot-nox, "
                      "or make deps)", final_path);
    else if (st == SP_OK && status == EXIT_NO_CHDIR)
        st = sp_error(SP_ERR_IO, "%s: cannot enter the directory to run gnuplot", dir);
    else if (st == SP_OK && status != 0) {
        char line[512];
        error_line(out, line, sizeof line);
        st = sp_error(SP_ERR_INTERNAL, "%s/%s: gnuplot failed (exit %d) drawing %s: %s", dir, script, status,
                      final_path, line);
    }
    image_check image = st == SP_OK ? check_image(tmp_path, fmt) : IMAGE_OK;
    if (image == IMAGE_INVALID)
        st = sp_error(SP_ERR_INTERNAL, "%s/%s: gnuplot wrote no valid %s image for %s", dir, script, fmt, final_path);
    else if (image == IMAGE_TRUNCATED)
        st = sp_error(SP_ERR_IO, "%s: gnuplot's %s image is cut short: its write failed (is the disk full?)", final_path,
                      fmt);
    if (st == SP_OK && rename(tmp_path, final_path) != 0)
        st = sp_error(SP_ERR_IO, "%s: cannot rename the image into place: %s", final_path, strerror(errno));
    if (st != SP_OK)
        unlink(tmp_path);
    free(out);
    return st;
}
