/* bench_hf_open: what opening a Hugging Face model directory costs next to reading its bytes once.
 *
 *   build/bench/bench_hf_open DIR [--rounds N]
 *
 * Each round times, back to back: (a) read() of every *.safetensors file of DIR into a buffer of
 * the file's size, allocated for the round (what a loader that reads the files into memory pays:
 * the copy out of the page cache and the faults of fresh memory); (b) the same bytes through one
 * 1 MiB buffer (the copy alone, a lower bound); (c) sp_hf_load on the CPU backend (mapping,
 * headers, config, model allocation, every tensor widened into the model's memory), then
 * sp_model_free. The page cache is left warm (nothing is dropped: all three read cached pages).
 * Prints the best of the rounds for each and the ratios load / read; the target is
 * load <= 1.5 x (a). bench/run_hf_analyze_bench.sh runs it. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/hf_dir.h"
#include "kernels/backend.h"
#include "model/model.h"

#define CHUNK_BYTES ((size_t)1 << 20)
#define MAX_FILES 256

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Wall and CPU seconds of fn(arg) (the CPU time of the process: every step here is single-threaded,
 * and on a shared machine it is what waiting for a core does not inflate). */
typedef struct {
    double wall, cpu;
} timing;

static timing timed(void (*fn)(void *), void *arg)
{
    const double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    fn(arg);
    return (timing){clock_s(CLOCK_MONOTONIC) - w0, clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0};
}

/* The *.safetensors files of dir (full paths) into files; their count, -1 on error. */
static int list_safetensors(const char *dir, char files[][4096])
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    const char *suffix = ".safetensors";
    for (struct dirent *e; (e = readdir(d)) && n < MAX_FILES;) {
        size_t len = strlen(e->d_name), s = strlen(suffix);
        if (len > s && strcmp(e->d_name + len - s, suffix) == 0)
            snprintf(files[n++], 4096, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    return n;
}

/* Reads the whole file, into a buffer of its size (chunk == NULL) or through chunk. */
static void read_file(const char *path, unsigned char *chunk)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(path);
        exit(1);
    }
    unsigned char *whole = chunk ? NULL : malloc((size_t)st.st_size);
    for (off_t total = 0;;) {
        unsigned char *dst = chunk ? chunk : whole + total;
        size_t want = chunk ? CHUNK_BYTES : (size_t)(st.st_size - total);
        ssize_t got = want ? read(fd, dst, want) : 0;
        if (got < 0) {
            perror(path);
            exit(1);
        }
        if (got == 0)
            break;
        total += got;
    }
    free(whole);
    close(fd);
}

typedef struct {
    const char *dir;
    char (*files)[4096];
    int n_files;
    unsigned char *chunk; /* NULL: read into buffers of the files' sizes */
} job;

static void read_all(void *arg)
{
    const job *j = arg;
    for (int i = 0; i < j->n_files; i++)
        read_file(j->files[i], j->chunk);
}

/* Loads the model and frees it; its number of weights. */
static size_t load_model(const char *dir)
{
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    if (sp_hf_load(dir, sp_backend_cpu(), &m, &meta) != SP_OK) {
        fprintf(stderr, "bench_hf_open: %s\n", sp_error_message());
        exit(1);
    }
    const size_t n = sp_model_n_weights(m);
    sp_model_free(m);
    sp_ckpt_meta_free(&meta);
    return n;
}

static void load(void *arg) { load_model(((const job *)arg)->dir); }

/* The peak resident memory of a process that does one load (MiB), and the model's weights as
 * float32 (MiB): what the mapped files add on top shows as the difference. */
static double load_peak_rss_mib(const job *j, double *weights_mib)
{
    pid_t child = fork();
    if (child == 0) {
        load_model(j->dir);
        _exit(0);
    }
    int status = 0;
    struct rusage ru;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        getrusage(RUSAGE_CHILDREN, &ru) != 0) {
        fprintf(stderr, "bench_hf_open: the load in a child process failed\n");
        exit(1);
    }
    *weights_mib = (double)load_model(j->dir) * 4 / 1048576.0;
    return ru.ru_maxrss / 1024.0;
}

static void keep_best(timing *best, timing t)
{
    best->wall = best->wall < t.wall ? best->wall : t.wall;
    best->cpu = best->cpu < t.cpu ? best->cpu : t.cpu;
}

static long long total_bytes(char files[][4096], int n)
{
    long long total = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(files[i], &st) == 0)
            total += st.st_size;
    }
    return total;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_hf_open DIR [--rounds N]\n");
        return 2;
    }
    const char *dir = argv[1];
    int rounds = argc >= 4 && strcmp(argv[2], "--rounds") == 0 ? atoi(argv[3]) : 5;
    static char files[MAX_FILES][4096];
    int n = list_safetensors(dir, files);
    if (n <= 0) {
        fprintf(stderr, "bench_hf_open: %s: no .safetensors files\n", dir);
        return 1;
    }
    job whole = {dir, files, n, NULL}, chunked = whole;
    double weights_mib = 0, peak_mib = load_peak_rss_mib(&whole, &weights_mib);
    printf("%s: peak RSS of a load %.1f MiB (float32 weights %.1f MiB, files %.1f MiB)\n", dir, peak_mib,
           weights_mib, (double)total_bytes(files, n) / 1048576.0);
    chunked.chunk = malloc(CHUNK_BYTES);
    timing best[3] = {{1e30, 1e30}, {1e30, 1e30}, {1e30, 1e30}};
    for (int r = 0; r < rounds; r++) {
        timing t[3] = {timed(read_all, &whole), timed(read_all, &chunked), timed(load, &whole)};
        for (int k = 0; k < 3; k++)
            keep_best(&best[k], t[k]);
        printf("round %d: read %.3f s (cpu %.3f), read through 1 MiB %.3f s (cpu %.3f), sp_hf_load %.3f s (cpu %.3f)\n",
               r + 1, t[0].wall, t[0].cpu, t[1].wall, t[1].cpu, t[2].wall, t[2].cpu);
    }
    free(chunked.chunk);
    const double mib = (double)total_bytes(files, n) / 1048576.0;
    printf("%s: %.1f MiB in %d file(s), best of %d: read %.3f s (cpu %.3f), read through 1 MiB %.3f s, sp_hf_load "
           "%.3f s (cpu %.3f); load / read %.2f (cpu %.2f)\n",
           dir, mib, n, rounds, best[0].wall, best[0].cpu, best[1].wall, best[2].wall, best[2].cpu,
           best[2].wall / best[0].wall, best[2].cpu / best[0].cpu);
    printf("{\"dir\": \"%s\", \"mib\": %.1f, \"rounds\": %d, \"read_s\": %.4f, \"read_cpu_s\": %.4f, "
           "\"read_chunked_s\": %.4f, \"load_s\": %.4f, \"load_cpu_s\": %.4f, \"load_peak_rss_mib\": %.1f, "
           "\"weights_f32_mib\": %.1f}\n",
           dir, mib, rounds, best[0].wall, best[0].cpu, best[1].wall, best[2].wall, best[2].cpu, peak_mib, weights_mib);
    return 0;
}
