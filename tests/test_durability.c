/* Durability (issue 15): what a kill or a full disk leaves behind.
 * - a tiny `train` (40 steps, a checkpoint every 10) is killed with SIGKILL at 20 moments drawn from
 *   a seeded generator, one in each twentieth of an uninterrupted run's duration (so before the
 *   process wrote anything, before its first checkpoint, during checkpoint writes and between
 *   them), and resumed with `--resume`: every resumed run ends with the same checkpoints, a final
 *   checkpoint bit-identical to the uninterrupted run's (weights, AdamW moments, step, data
 *   position, data-order generator state, lr), the same HDF5 and CSV logs (bit for bit but the
 *   throughput, a clock) and no temporary file;
 * - every writing command (init, train fresh and resumed, analyze --csv, dump, drift, check --junit,
 *   import hf, import gguf, import llama2c, study, plot when gnuplot is installed, and tokenize and
 *   compare, which write standard output) runs under a file-size limit (RLIMIT_FSIZE with SIGXFSZ ignored: a write past
 *   it fails with EFBIG, as on a full disk; a tmpfs would need root) of 0, 4 KiB and half its
 *   largest output file, once with its outputs already there and once without: each exits 5 with one
 *   line naming the file it could not write, and the input and output directories are byte for byte
 *   what they were (no partial output, no temporary file, nothing replaced); only a train
 *   directory's lock file may appear, and a study's directories (its runs' places, which a rerun
 *   continues into);
 * - `analyze --csv` that fails after its report is written (a table's path is a directory) leaves
 *   neither the new report nor any table, and an earlier run's report and tables as they were. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/rng.h"
#include "io/dir_lock.h"
#include "support/cli_expect.h"
#include "support/llama2c_build.h"
#include "support/scratch.h"
#include "support/shell.h"
#include "support/train_runs.h"
#include "support/tree.h"

#define LIMIT_S 60 /* seconds: every run here takes well under one */
#define N_KILLS 20

typedef struct {
    char root[4096]; /* the scratch directory of this file's runs */
    char in[4200];   /* the inputs every command reads: <root>/in */
} fixture;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- running the CLI in a directory, under a file-size limit ---- */

/* Runs $SPANPROBE_BIN args in directory cwd with files limited to `limit` bytes (RLIM_INFINITY: no
 * limit) and SIGXFSZ ignored, so that a write past the limit fails with EFBIG like one on a full disk.
 * stdout goes to stdout_path (relative to cwd; NULL: /dev/null), stderr through a pipe, which no
 * limit applies to, into *err (free()). Returns the exit status, 128 + signal when killed. */
static int run_limited(const char *cwd, rlim_t limit, const char *const *args, const char *stdout_path, char **err)
{
    const char *bin = getenv("SPANPROBE_BIN");
    int fds[2];
    if (!bin || pipe(fds) != 0)
        abort();
    char **argv = scratch_argv(bin, args);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0) {
        close(fds[0]);
        struct rlimit rl = {limit, limit};
        if (chdir(cwd) != 0 || setrlimit(RLIMIT_FSIZE, &rl) != 0 || signal(SIGXFSZ, SIG_IGN) == SIG_ERR)
            _exit(126);
        int out = open(stdout_path ? stdout_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || dup2(out, 1) < 0 || dup2(fds[1], 2) < 0)
            _exit(126);
        alarm(LIMIT_S);
        execv(bin, argv);
        _exit(127);
    }
    close(fds[1]);
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    for (ssize_t got; text && (got = read(fds[0], text + len, cap - len - 1)) != 0;) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            break;
        len += (size_t)got;
        if (len + 1 == cap)
            text = realloc(text, cap *= 2);
    }
    close(fds[0]);
    if (!text)
        abort();
    text[len] = '\0';
    int status = 0;
    if (waitpid(pid, &status, 0) < 0)
        abort();
    free(argv);
    *err = text;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- what a directory holds ---- */

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

typedef struct {
    char **lines;
    int n, cap;
} line_list;

static void add_line(line_list *l, const char *text)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 32;
        l->lines = realloc(l->lines, (size_t)l->cap * sizeof *l->lines);
        assert_non_null(l->lines);
    }
    l->lines[l->n] = strdup(text);
    assert_non_null(l->lines[l->n]);
    l->n++;
}

/* One line per entry below dir/rel: "rel/" for a directory, "rel size hash" for a file; the lock
 * file of a train directory (not an output) is left out. *max_size gets the largest file's size. */
static void list_entries(const char *dir, const char *rel, line_list *l, size_t *max_size)
{
    char path[8192];
    snprintf(path, sizeof path, "%s%s%s", dir, *rel ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || strcmp(e->d_name, SP_DIR_LOCK_NAME) == 0)
            continue;
        char sub[4096], full[8192], line[4400];
        snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", dir, sub);
        struct stat st;
        assert_int_equal(lstat(full, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            snprintf(line, sizeof line, "%s/", sub);
            add_line(l, line);
            list_entries(dir, sub, l, max_size);
            continue;
        }
        size_t size = 0;
        unsigned char *bytes = (unsigned char *)scratch_read_file(full, &size);
        assert_non_null(bytes);
        snprintf(line, sizeof line, "%s %zu %016llx", sub, size, (unsigned long long)fnv1a(bytes, size));
        free(bytes);
        add_line(l, line);
        if (max_size && size > *max_size)
            *max_size = size;
    }
    closedir(d);
}

static int cmp_lines(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every entry below dir with its size and a hash of its bytes, sorted, one per line (free()). */
static char *snapshot(const char *dir, size_t *max_size)
{
    line_list l = {0};
    if (max_size)
        *max_size = 0;
    list_entries(dir, "", &l, max_size);
    if (l.n)
        qsort(l.lines, (size_t)l.n, sizeof *l.lines, cmp_lines);
    size_t len = 1;
    for (int i = 0; i < l.n; i++)
        len += strlen(l.lines[i]) + 1;
    char *text = malloc(len), *p = text;
    assert_non_null(text);
    for (int i = 0; i < l.n; i++) {
        p += sprintf(p, "%s\n", l.lines[i]);
        free(l.lines[i]);
    }
    *p = '\0';
    free(l.lines);
    return text;
}

/* ---- fixture ---- */

static int make_inputs(fixture *f)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/text.txt", f->in);
    char *text = train_make_text(6000, 42);
    int failed = scratch_write_file(path, text, 6000);
    free(text);
    const char *ids = "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32\n";
    byte_buf model = l2c_build_checkpoint(&(l2c_header){16, 32, 2, 2, 1, 32, 16}), tok = l2c_build_tokenizer(32);
    snprintf(path, sizeof path, "%s/model.bin", f->in);
    failed |= scratch_write_file(path, model.data, model.len);
    snprintf(path, sizeof path, "%s/tok.bin", f->in);
    failed |= scratch_write_file(path, tok.data, tok.len);
    byte_buf_free(&model);
    byte_buf_free(&tok);
    snprintf(path, sizeof path, "%s/ids.txt", f->in);
    failed |= scratch_write_file(path, ids, strlen(ids));
    const char *config = "{\"variant\": \"span\", \"n_layers\": 2, \"d_model\": 16, \"n_heads\": 2, \"n_kv_heads\": 1, "
                         "\"d_ff\": 32, \"max_seq_len\": 16}\n";
    snprintf(path, sizeof path, "%s/tiny.json", f->in);
    failed |= scratch_write_file(path, config, strlen(config));
    const char *const *setup[] = {
        (const char *[]){"init", "--config", "tiny.json", "--out", "ckpt.h5", NULL},
        (const char *[]){"init", "--config", "tiny.json", "--seed", "2", "--out", "ckpt2.h5", NULL},
        (const char *[]){"analyze", "ckpt.h5", "--tokens", "ids.txt", "--seq", "8", "--out", "report.h5", "--metrics",
                         "similarity,growth", "--device", "cpu", "--quiet", NULL},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(setup) && !failed; i++) {
        char *err = NULL;
        failed = run_limited(f->in, RLIM_INFINITY, setup[i], NULL, &err) != 0;
        if (failed)
            fprintf(stderr, "test_durability setup: %s: %s", setup[i][0], err);
        free(err);
    }
    return failed;
}

static int group_setup(void **state)
{
    *state = NULL;
    if (!getenv("SPANPROBE_BIN"))
        return 0; /* every test skips */
    setenv("OMP_NUM_THREADS", "1", 0); /* the runs are tiny: threads only contend on a busy machine */
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    scratch_path(f->root, sizeof f->root, "durability");
    snprintf(f->in, sizeof f->in, "%s/in", f->root);
    if (mkdir(f->root, 0755) != 0 || mkdir(f->in, 0755) != 0 || make_inputs(f) != 0) {
        tree_remove(f->root);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    fixture *f = *state;
    if (f)
        tree_remove(f->root);
    return cli_group_free(state);
}

static fixture *need(void **state) { return cli_group_state(state, "SPANPROBE_BIN is not set"); }

/* ---- kills at random moments ---- */

/* The run killed: 40 steps, a checkpoint every 10 (the newest 3 kept), evaluation and gradient
 * accumulation on, so their state is covered too. text: the same path in every run (it is one of
 * the options a resumed run must keep). */
#define KILL_RUN_ARGS(text)                                                                                    \
    "train", TINY_RUN_ARGS, "--data", text, "--steps", "40", "--ckpt-every", "10", "--log-every", "2", \
        "--eval-every", "5", "--grad-accum", "2"

/* What the killed run had left in dir: a name for the tally. */
static const char *moment_of(const char *dir, int finished)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/train_options.json", dir);
    if (finished)
        return "after the end";
    if (!scratch_file_exists(path))
        return "before it wrote anything";
    DIR *d = opendir(dir);
    int n_ckpt = 0, n_tmp = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        n_ckpt += strncmp(e->d_name, "ckpt_", 5) == 0 && !strstr(e->d_name, ".tmp.");
        n_tmp += strstr(e->d_name, ".tmp.") != NULL;
    }
    if (d)
        closedir(d);
    if (n_tmp)
        return "during a write";
    return n_ckpt ? "between checkpoints" : "before the first checkpoint";
}

/* dir ended as the uninterrupted run in ref did. */
static void expect_same_run(const char *ref, const char *dir)
{
    const char *names[] = {"ckpt_00000020.h5", "ckpt_00000030.h5", "ckpt_00000040.h5", "trainlog.h5", "trainlog.csv",
                           "train_options.json"};
    char a[4400], b[4400];
    for (size_t i = 0; i < SP_ARRAY_LEN(names); i++) {
        snprintf(b, sizeof b, "%s/%s", dir, names[i]);
        if (!scratch_file_exists(b))
            fail_msg("%s: missing after the resume", b);
    }
    snprintf(a, sizeof a, "%s/ckpt_00000040.h5", ref);
    snprintf(b, sizeof b, "%s/ckpt_00000040.h5", dir);
    train_expect_same_checkpoints(a, b);
    snprintf(a, sizeof a, "%s/trainlog.h5", ref);
    snprintf(b, sizeof b, "%s/trainlog.h5", dir);
    train_expect_same_logs(a, b);
    snprintf(a, sizeof a, "%s/trainlog.csv", ref);
    snprintf(b, sizeof b, "%s/trainlog.csv", dir);
    train_expect_same_csv(a, b);
    assert_int_equal(tree_count_files(dir, ".h5"), 4); /* the newest --keep 3 checkpoints and the log */
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strstr(e->d_name, ".tmp."))
            fail_msg("%s/%s: a temporary file left after the resume", dir, e->d_name);
    closedir(d);
}

static void test_kill_at_random_moments(void **state)
{
    fixture *f = need(state);
    const double t_start = now_s();
    char ref[4200], text[4300];
    snprintf(ref, sizeof ref, "%s/ref", f->root);
    snprintf(text, sizeof text, "%s/text.txt", f->in);
    /* the run's duration: the shorter of two uninterrupted runs (a busy machine slows either) */
    double duration = 1e9;
    for (int k = 0; k < 2; k++) {
        const char *straight[] = {KILL_RUN_ARGS(text), "--out", k ? "ref" : "warm_up", NULL};
        char *err = NULL;
        double t0 = now_s();
        if (run_limited(f->root, RLIM_INFINITY, straight, NULL, &err) != 0)
            fail_msg("an uninterrupted run failed: %s", err);
        free(err);
        duration = fmin(duration, now_s() - t0);
    }
    char warm_up[4200];
    snprintf(warm_up, sizeof warm_up, "%s/warm_up", f->root);
    assert_int_equal(tree_remove(warm_up), 0);
    char *err = NULL;

    sp_rng rng;
    sp_rng_seed(&rng, 15);
    const char *moments[N_KILLS];
    for (int i = 0; i < N_KILLS; i++) {
        char name[32], dir[4300];
        snprintf(name, sizeof name, "killed_%02d", i);
        snprintf(dir, sizeof dir, "%s/%s", f->root, name);
        /* the directory is there already, as a study's or a user's would be: a kill before the run
         * made it would leave nothing to resume, and --resume of a missing directory is refused */
        assert_int_equal(mkdir(dir, 0755), 0);
        /* one moment in each twentieth of the run, uniform within it */
        double delay = duration * ((double)i + (double)sp_rng_below(&rng, 1000000) / 1e6) / N_KILLS;
        const char *killed[] = {KILL_RUN_ARGS(text), "--out", dir, NULL};
        pid_t pid = scratch_spawn_cli(killed);
        assert_true(pid > 0);
        nanosleep(&(struct timespec){(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)}, NULL);
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid)
            duration = delay; /* it ran faster than measured: the later moments lie within the faster run */
        else {
            kill(pid, SIGKILL);
            assert_int_equal(waitpid(pid, &status, 0), pid);
        }
        moments[i] = moment_of(dir, WIFEXITED(status));
        if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
            fail_msg("killed_%02d: exit %d before the kill", i, WEXITSTATUS(status));

        const char *resume[] = {KILL_RUN_ARGS(text), "--resume", name, NULL};
        int rc = run_limited(f->root, RLIM_INFINITY, resume, NULL, &err);
        if (rc != 0)
            fail_msg("killed_%02d (%s, %.3f s into a %.3f s run): resume: exit %d: %s", i, moments[i], delay, duration,
                     rc, err);
        free(err);
        expect_same_run(ref, dir);
        assert_int_equal(tree_remove(dir), 0);
    }
    print_message("kills over a %.2f s run (%.1f s in all):", duration, now_s() - t_start);
    for (int i = 0; i < N_KILLS; i++)
        print_message("%s%s", i ? ", " : " ", moments[i]);
    print_message("\n");
    assert_int_equal(tree_remove(ref), 0);
}

/* ---- full disk ---- */

typedef struct {
    const char *name;
    const char *args[40];       /* run in the case's directory; "@hf", "@gguf": the repository's fixtures */
    const char *again[16];      /* the run over existing outputs when it differs ({NULL}: args) */
    const char *outputs[4];     /* what the failure may name (files or directories in the case directory) */
    const char *premade;        /* a directory that exists before the first run, or NULL */
    const char *stdout_file;    /* the output is standard output, into this file (excluded from the check) */
    int normal_exit;            /* the exit of a run without a limit besides 0 (check: 7 on a failed rule) */
    int is_study;               /* a failed run may leave its directory tree (and run locks), no file; a rerun
                                   over a finished study may succeed, redrawing its small files identically */
} disk_case;

static const disk_case disk_cases[] = {
    {"init", {"init", "--config", "../in/tiny.json", "--out", "init.h5"}, {NULL}, {"init.h5"}, NULL, NULL, 0, 0},
    {"train",
     {"train", TINY_RUN_ARGS, "--data", "../in/text.txt", "--steps", "12", "--ckpt-every", "4", "--log-every", "2",
      "--out", "run"},
     {"train", "--resume", "run", "--steps", "24"},
     {"run/"},
     "run",
     NULL,
     0, 0},
    {"analyze --csv",
     {"analyze", "../in/ckpt.h5", "--tokens", "../in/ids.txt", "--seq", "8", "--out", "report.h5", "--metrics",
      "similarity,growth", "--device", "cpu", "--quiet", "--csv", "tables"},
     {NULL},
     {"report.h5", "report.json", "tables/"},
     NULL,
     NULL,
     0, 0},
    {"dump", {"dump", "../in/ckpt.h5", "--tokens", "../in/ids.txt", "--seq", "8", "--out", "dump.h5"}, {NULL},
     {"dump.h5"}, NULL, NULL, 0, 0},
    {"drift",
     {"drift", "../in/ckpt.h5", "../in/ckpt2.h5", "--tokens", "../in/ids.txt", "--seq", "8", "--out", "drift.h5",
      "--device", "cpu", "--quiet"},
     {NULL},
     {"drift.h5", "drift.json"},
     NULL,
     NULL,
     0, 0},
    {"check --junit", {"check", "../in/report.h5", "--junit", "junit.xml"}, {NULL}, {"junit.xml"}, NULL, NULL, 7, 0},
    {"import hf", {"import", "hf", "@hf", "hf.h5"}, {NULL}, {"hf.h5"}, NULL, NULL, 0, 0},
    {"import gguf", {"import", "gguf", "@gguf", "gguf.h5"}, {NULL}, {"gguf.h5"}, NULL, NULL, 0, 0},
    {"import llama2c", {"import", "llama2c", "../in/model.bin", "../in/tok.bin", "llama2c.h5"}, {NULL},
     {"llama2c.h5"}, NULL, NULL, 0, 0},
    {"study", /* two worker processes: their failures come back as the parent's one line */
     {"study", "--preset", "test", "--data", "../in/text.txt", "--out", "study_dir", "--device", "cpu", "--jobs", "2"},
     {NULL},
     {"study_dir/"}, NULL, NULL, 0, 1},
    {"plot", {"plot", "../in/report.h5", "--out", "figures", "--quiet"}, {NULL}, {"figures/"}, NULL, NULL, 0, 0},
    {"tokenize", {"tokenize", "../in/ckpt.h5", "--text", "../in/text.txt"}, {NULL}, {"stdout"}, NULL,
     "ids.txt", 0, 0},
    {"compare", {"compare", "../in/report.h5", "../in/report.h5"}, {NULL}, {"stdout"}, NULL, "table.txt", 0, 0},
};

/* args with "@hf" and "@gguf" replaced by absolute paths of the repository's fixtures. */
static void resolve_args(const char *const *args, const char **out, size_t n, const char *hf, const char *gguf)
{
    size_t i = 0;
    for (; args[i] && i + 1 < n; i++)
        out[i] = strcmp(args[i], "@hf") == 0 ? hf : strcmp(args[i], "@gguf") == 0 ? gguf : args[i];
    out[i] = NULL;
}

/* The error is one line, the last, naming one of the case's outputs (other lines on stderr are
 * progress and notes, which never start with "spanprobe "). */
static void expect_one_error_line(const disk_case *c, const char *err, const char *what)
{
    const char *last = NULL;
    int n_errors = 0;
    for (const char *p = err; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
        if (strncmp(p, "spanprobe ", 10) == 0) {
            n_errors++;
            last = p;
        }
    }
    if (n_errors != 1 || strchr(last, '\n') != last + strlen(last) - 1)
        fail_msg("%s %s: expected one error line, the last, found:\n%s", c->name, what, err);
    if (strstr(last, ".tmp.") && !strstr(last, ".stage.tmp.")) /* the file the user named, not its temporary */
        fail_msg("%s %s: the error names a temporary file: %s", c->name, what, last);
    for (size_t i = 0; i < SP_ARRAY_LEN(c->outputs) && c->outputs[i]; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s", c->outputs[i]);
        name[strcspn(name, "/")] = '\0'; /* a directory: its name */
        if (strstr(last, name))
            return;
    }
    fail_msg("%s %s: the error names none of the outputs: %s", c->name, what, last);
}

/* Removes the directory lines ("rel/") of a snapshot, leaving its files. */
static void drop_directories(char *snap)
{
    char *out = snap;
    for (char *line = snap; *line;) {
        char *end = strchr(line, '\n');
        size_t len = (size_t)(end - line) + 1;
        if (end[-1] != '/') {
            memmove(out, line, len);
            out += len;
        }
        line = end + 1;
    }
    *out = '\0';
}

/* Runs args in dir under `limit`: exit 5 and one error line (or, for a study over a finished one,
 * exit 0), and dir and the inputs as they were. */
static void expect_clean_failure(const fixture *f, const disk_case *c, const char *dir, const char *const *args,
                                 rlim_t limit, const char *what)
{
    char *in_before = snapshot(f->in, NULL), *before = snapshot(dir, NULL), *err = NULL;
    int rc = run_limited(dir, limit, args, c->stdout_file, &err);
    char detail[128];
    snprintf(detail, sizeof detail, "%s, files limited to %llu bytes", what, (unsigned long long)limit);
    if (rc != 5 && !(rc == 0 && c->is_study && strstr(what, "earlier")))
        fail_msg("%s (%s): exit %d, expected 5 (I/O); stderr:\n%s", c->name, detail, rc, err);
    if (rc == 5)
        expect_one_error_line(c, err, detail);
    if (c->stdout_file) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, c->stdout_file);
        unlink(path); /* the shell's file, not the command's */
    }
    char *after = snapshot(dir, NULL), *in_after = snapshot(f->in, NULL);
    if (c->is_study) {
        drop_directories(before);
        drop_directories(after);
    }
    if (strcmp(before, after) != 0)
        fail_msg("%s (%s): the directory changed:\nbefore:\n%safter:\n%s", c->name, detail, before, after);
    if (strcmp(in_before, in_after) != 0)
        fail_msg("%s (%s): an input changed", c->name, detail);
    free(in_before);
    free(in_after);
    free(before);
    free(after);
    free(err);
}

static void run_disk_case(const fixture *f, const disk_case *c, const char *hf, const char *gguf)
{
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/disk_%s", f->root, c->name);
    for (char *p = dir + strlen(f->root) + 1; *p; p++)
        *p = *p == ' ' || *p == '-' ? '_' : *p;
    assert_int_equal(mkdir(dir, 0755), 0);
    const char *args[40], *again[40];
    resolve_args(c->args, args, SP_ARRAY_LEN(args), hf, gguf);
    resolve_args(c->again[0] ? c->again : c->args, again, SP_ARRAY_LEN(again), hf, gguf);
    char premade[4500];
    snprintf(premade, sizeof premade, "%s/%s", dir, c->premade ? c->premade : "");

    /* a run without a limit: the outputs a failed run must leave as they are, and their size */
    if (c->premade)
        assert_int_equal(mkdir(premade, 0755), 0);
    char *err = NULL;
    int rc = run_limited(dir, RLIM_INFINITY, args, c->stdout_file, &err);
    if (rc != 0 && rc != c->normal_exit)
        fail_msg("%s without a limit: exit %d: %s", c->name, rc, err);
    free(err);
    size_t largest = 0;
    free(snapshot(dir, &largest));
    if (c->stdout_file) {
        char path[4500];
        snprintf(path, sizeof path, "%s/%s", dir, c->stdout_file);
        unlink(path);
    }
    const rlim_t limits[] = {0, 4096, (rlim_t)largest / 2};
    for (size_t k = 0; k < SP_ARRAY_LEN(limits); k++) /* a limit every file fits under fails nothing */
        if (limits[k] < largest && !c->stdout_file)
            expect_clean_failure(f, c, dir, again, limits[k], "over its earlier outputs");
    for (size_t k = 0; k < SP_ARRAY_LEN(limits); k++) {
        if (limits[k] >= largest)
            continue;
        assert_int_equal(tree_remove(dir), 0); /* into a directory without them */
        assert_int_equal(mkdir(dir, 0755), 0);
        if (c->premade)
            assert_int_equal(mkdir(premade, 0755), 0);
        expect_clean_failure(f, c, dir, args, limits[k], "with no earlier outputs");
    }
    assert_int_equal(tree_remove(dir), 0);
}

/* analyze --csv that fails after the report is written (a table's path is a directory) leaves no
 * new report and no table, and an earlier run's report and tables as they were. */
static void test_analyze_csv_failure_leaves_nothing(void **state)
{
    fixture *f = need(state);
    char dir[4300], blocker[4400];
    snprintf(dir, sizeof dir, "%s/csv_failure", f->root);
    snprintf(blocker, sizeof blocker, "%s/tables/growth.rms.csv", dir);
    const char *args[] = {"analyze", "../in/ckpt.h5", "--tokens", "../in/ids.txt", "--seq", "8", "--out", "report.h5",
                          "--metrics", "similarity,growth", "--device", "cpu", "--quiet", "--csv", "tables", NULL};
    const disk_case c = {"analyze --csv", {NULL}, {NULL}, {"growth.rms.csv"}, NULL, NULL, 0, 0};
    for (int earlier = 0; earlier < 2; earlier++) {
        assert_int_equal(mkdir(dir, 0755), 0);
        char *err = NULL;
        if (earlier) { /* an earlier run's outputs, one table of which is now in the way */
            assert_int_equal(run_limited(dir, RLIM_INFINITY, args, NULL, &err), 0);
            free(err);
            assert_int_equal(unlink(blocker), 0);
        } else {
            snprintf(blocker, sizeof blocker, "%s/tables", dir);
            assert_int_equal(mkdir(blocker, 0755), 0);
            snprintf(blocker, sizeof blocker, "%s/tables/growth.rms.csv", dir);
        }
        assert_int_equal(mkdir(blocker, 0755), 0);
        char *before = snapshot(dir, NULL);
        assert_int_equal(run_limited(dir, RLIM_INFINITY, args, NULL, &err), 5);
        expect_one_error_line(&c, err, earlier ? "over an earlier run" : "into an empty directory");
        char *after = snapshot(dir, NULL);
        if (strcmp(before, after) != 0)
            fail_msg("analyze --csv failing at a table changed its directory:\nbefore:\n%safter:\n%s", before, after);
        free(before);
        free(after);
        free(err);
        assert_int_equal(tree_remove(dir), 0);
    }
}

static void test_full_disk_under_every_writer(void **state)
{
    fixture *f = need(state);
    char hf[PATH_MAX], gguf[PATH_MAX];
    assert_non_null(realpath("fixtures/hf/gpt2-f32", hf));
    assert_non_null(realpath("fixtures/gguf_models/hf-gpt2-f32.gguf", gguf));
    const int have_gnuplot = shell_has_program("gnuplot");
    const double t_start = now_s();
    for (size_t i = 0; i < SP_ARRAY_LEN(disk_cases); i++) {
        const char *command = disk_cases[i].args[0];
        if ((strcmp(command, "plot") == 0 || strcmp(command, "study") == 0) && !have_gnuplot) {
            print_message("note: gnuplot is not installed: %s (it draws figures) is not run under a full disk\n",
                          command);
            continue;
        }
        run_disk_case(f, &disk_cases[i], hf, gguf);
    }
    print_message("%zu commands under a full disk in %.1f s\n", SP_ARRAY_LEN(disk_cases), now_s() - t_start);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_at_random_moments),
        cmocka_unit_test(test_full_disk_under_every_writer),
        cmocka_unit_test(test_analyze_csv_failure_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
