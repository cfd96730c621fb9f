#include "scratch.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tree.h"

static char scratch_dir[4096];

static void remove_scratch_dir(void) { tree_remove(scratch_dir); }

static const char *scratch_root(void)
{
    if (scratch_dir[0])
        return scratch_dir;
    const char *build = getenv("BUILD_DIR");
    snprintf(scratch_dir, sizeof scratch_dir, "%s/scratch-XXXXXX", build && *build ? build : "/tmp");
    if (!mkdtemp(scratch_dir)) {
        perror("scratch_path: mkdtemp");
        abort();
    }
    atexit(remove_scratch_dir);
    return scratch_dir;
}

void scratch_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", scratch_root(), name);
}

int scratch_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = len ? fwrite(data, 1, len, f) : 0;
    return (fclose(f) != 0 || n != len) ? -1 : 0;
}

char *scratch_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, 2 * cap + 1);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = n;
    }
    return buf;
}

int scratch_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int scratch_count_entries(const char *pattern)
{
    DIR *d = opendir(scratch_root());
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += fnmatch(pattern, e->d_name, 0) == 0;
    closedir(d);
    return n;
}

int scratch_shared_data(const char *rel, char *buf, size_t len)
{
    snprintf(buf, len, "../shared/data/%s", rel);
    return scratch_file_exists(buf);
}

char **scratch_argv(const char *bin, const char *const *args)
{
    int n_args = 0;
    while (args[n_args])
        n_args++;
    char **argv = calloc((size_t)n_args + 2, sizeof *argv);
    if (!argv)
        abort();
    argv[0] = (char *)bin;
    for (int i = 0; i < n_args; i++)
        argv[i + 1] = (char *)args[i];
    return argv;
}

/* Starts bin (NULL: $SPANPROBE_BIN) with args, its stdout and stderr into the files named, to be
 * killed after `seconds`; -1 when there is no program to run. */
static pid_t spawn_cli(const char *bin, const char *const *args, const char *out_path, const char *err_path,
                       unsigned seconds)
{
    if (!bin)
        bin = getenv("SPANPROBE_BIN");
    if (!bin || !*bin)
        return -1;
    char **argv = scratch_argv(bin, args);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(126);
        alarm(seconds); /* kept across execv: the default action ends the program */
        execv(bin, argv);
        _exit(127);
    }
    free(argv);
    return pid;
}

pid_t scratch_spawn_cli(const char *const *args)
{
    return spawn_cli(NULL, args, "/dev/null", "/dev/null", SCRATCH_CLI_TIMEOUT);
}

static int run_program(const char *bin, unsigned seconds, const char *const *args, char **out, char **err)
{
    char out_path[4200], err_path[4200];
    scratch_path(out_path, sizeof out_path, "cli-stdout.txt");
    scratch_path(err_path, sizeof err_path, "cli-stderr.txt");
    pid_t pid = spawn_cli(bin, args, out_path, err_path, seconds);
    if (pid < 0)
        return -1;
    int status = 0;
    if (waitpid(pid, &status, 0) < 0)
        abort();
    if (out)
        *out = scratch_read_file(out_path, NULL);
    if (err)
        *err = scratch_read_file(err_path, NULL);
    unlink(out_path);
    unlink(err_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int scratch_run_cli(const char *const *args, char **out, char **err)
{
    return run_program(NULL, SCRATCH_CLI_TIMEOUT, args, out, err);
}

int scratch_run_cli_within(unsigned seconds, const char *const *args, char **out, char **err)
{
    return run_program(NULL, seconds, args, out, err);
}

int scratch_run_program(const char *bin, const char *const *args, char **out, char **err)
{
    return run_program(bin, SCRATCH_CLI_TIMEOUT, args, out, err);
}

int scratch_count_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p == '\n' || p[1] == '\0')
            n++;
    return n;
}
