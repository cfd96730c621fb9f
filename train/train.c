/* train/train.c: the training loop: setup (fresh or resumed), steps, log rows, checkpoints. */
#include "train/train.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/mpi.h"
#include "io/dir_lock.h"
#include "io/dirs.h"
#include "io/file_read.h"
#include "io/output_set.h"
#include "model/attn_summary.h"
#include "train/data.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/trainlog.h"

typedef struct {
    sp_config cfg;
    sp_train_options opt;
    const char *dir;
    const sp_backend *be;
    sp_train_data data;
    sp_model *m;
    sp_optim *o;
    int n_params;
    sp_real **params, **grads, **prev; /* per tensor; prev: the weights before the current update */
    sp_real *prev_buf;
    int32_t *inputs, *targets;
    sp_lr_schedule schedule;
    sp_trainlog log;
    FILE *csv;
    char *options_json;
    int n_eval;
    int64_t step, tokens_seen, position; /* steps done, tokens consumed, windows consumed */
    double lr;                           /* of the last step */
    double *tensor_norms, *update_ratio, *hidden_rms;
    sp_attn_summary *attn;               /* the attention columns of the log */
    sp_attn_head_sums *attn_sums;        /* [n_heads] */
    double *attn_head_cos;               /* [n_heads, n_heads]: computed along, not logged */
    double attn_entropy_min, attn_max_logit;
    double t_start, t_row;               /* wall clock at this process's first step and last row */
    int64_t step_start, tokens_row;      /* step at this process's start; tokens_seen at the last row */
    int tty;
    int lock_fd;                /* the out directory's lock (io/dir_lock.h) */
    int writing;                /* this run has begun to write into the directory */
    int options_record_existed; /* train_options.json was there before this run */
    int has_checkpoint;         /* the directory holds a checkpoint of this run */
    off_t csv_committed;        /* bytes of the CSV that the newest checkpoint's log holds */
    int rank, ranks;            /* under MPI (docs/scaling.md): this process's rank of how many */
    int writer;                 /* rank 0: the one that writes the directory (lock, log, checkpoints) */
} sp_run;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void join_path(char *buf, size_t len, const char *dir, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

static void checkpoint_path(char *buf, size_t len, const char *dir, int64_t step)
{
    snprintf(buf, len, "%s/ckpt_%08lld.h5", dir, (long long)step);
}

/* ---- the checkpoints of a directory ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Steps of the files named exactly ckpt_<step>.h5 in dir, ascending (free *steps). A missing
 * directory holds none. */
static sp_status list_checkpoints(const char *dir, int64_t **steps, int *n)
{
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? SP_OK : sp_error(SP_ERR_IO, "%s: cannot list the directory: %s", dir, strerror(errno));
    int cap = 0;
    sp_status st = SP_OK;
    for (struct dirent *e; (e = readdir(d)) != NULL && st == SP_OK;) {
        long long step;
        char canonical[64];
        if (sscanf(e->d_name, "ckpt_%lld.h5", &step) != 1 || step < 0)
            continue;
        snprintf(canonical, sizeof canonical, "ckpt_%08lld.h5", step);
        if (strcmp(canonical, e->d_name) != 0)
            continue; /* a temporary file or a name of another tool */
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *grown = realloc(*steps, (size_t)cap * sizeof *grown);
            if (!grown) {
                st = sp_error(SP_ERR_NOMEM, "%s: out of memory listing checkpoints", dir);
                break;
            }
            *steps = grown;
        }
        (*steps)[(*n)++] = step;
    }
    closedir(d);
    if (st != SP_OK) {
        free(*steps);
        *steps = NULL;
        *n = 0;
        return st;
    }
    if (*n > 1)
        qsort(*steps, (size_t)*n, sizeof **steps, cmp_i64);
    return SP_OK;
}

sp_status sp_train_latest_checkpoint(const char *dir, char *path, size_t len, sp_ckpt_meta *meta)
{
    int64_t *steps;
    int n;
    SP_TRY(list_checkpoints(dir, &steps, &n));
    for (int i = n - 1; i >= 0; i--) {
        checkpoint_path(path, len, dir, steps[i]);
        sp_ckpt_meta_init(meta);
        if (sp_ckpt_read_meta(path, meta) == SP_OK && meta->train.present && meta->train.options_json) {
            free(steps);
            sp_error_clear();
            return SP_OK;
        }
        /* an unreadable newest file (a kill while the OS wrote it) falls back to the one before */
        sp_ckpt_meta_free(meta);
        fprintf(stderr, "spanprobe train: skipping %s: %s\n", path, sp_error_message());
        sp_error_clear();
    }
    free(steps);
    return sp_error(SP_ERR_INPUT, "%s: no valid training checkpoint (ckpt_<step>.h5 with a /train group) to resume from",
                    dir);
}

/* dir holds nothing but a lock file and temporary files: what a run stopped before it wrote
 * anything leaves (an unrelated directory holds other files). */
static int holds_nothing(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int nothing = 1;
    for (struct dirent *e; nothing && (e = readdir(d)) != NULL;)
        nothing = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
                  strcmp(e->d_name, SP_DIR_LOCK_NAME) == 0 || sp_atomic_temporary_pid(e->d_name) != 0;
    closedir(d);
    return nothing;
}

sp_status sp_train_find_resume(const char *dir, char *ckpt, size_t len, char **options_json, int64_t *step)
{
    *options_json = NULL;
    *step = 0;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sp_error(SP_ERR_INPUT, "%s: not a directory: no run to resume", dir);
    sp_ckpt_meta meta;
    if (sp_train_latest_checkpoint(dir, ckpt, len, &meta) == SP_OK) {
        *step = meta.train.step;
        *options_json = meta.train.options_json; /* taken over */
        meta.train.options_json = NULL;
        sp_ckpt_meta_free(&meta);
        return SP_OK;
    }
    sp_error_clear();
    ckpt[0] = '\0';
    char path[4096];
    join_path(path, sizeof path, dir, SP_TRAIN_OPTIONS_NAME);
    if (access(path, F_OK) == 0) {
        size_t size;
        return sp_file_read_all(path, 1 << 20, (unsigned char **)options_json, &size);
    }
    if (holds_nothing(dir))
        return SP_OK;
    return sp_error(SP_ERR_INPUT, "%s: no run to resume (no checkpoint ckpt_<step>.h5 with a /train group, no %s)", dir,
                    SP_TRAIN_OPTIONS_NAME);
}

/* Removes all but the newest `keep` checkpoints. */
static sp_status prune_checkpoints(const char *dir, int keep)
{
    int64_t *steps;
    int n;
    SP_TRY(list_checkpoints(dir, &steps, &n));
    char path[4096];
    for (int i = 0; i < n - keep; i++) {
        checkpoint_path(path, sizeof path, dir, steps[i]);
        if (unlink(path) != 0 && errno != ENOENT) {
            free(steps);
            return sp_error(SP_ERR_IO, "%s: cannot remove an old checkpoint: %s", path, strerror(errno));
        }
    }
    free(steps);
    return SP_OK;
}

/* ---- setup and teardown ---- */

static sp_status alloc_run_buffers(sp_run *r)
{
    size_t rows = (size_t)r->opt.batch_size * (size_t)r->opt.seq_len;
    int n = r->n_params;
    r->params = sp_calloc((size_t)n, sizeof *r->params, "parameter list");
    r->grads = sp_calloc((size_t)n, sizeof *r->grads, "gradient list");
    r->prev = sp_calloc((size_t)n, sizeof *r->prev, "previous weights list");
    r->inputs = sp_malloc(rows * sizeof *r->inputs, "input tokens");
    r->targets = sp_malloc(rows * sizeof *r->targets, "target tokens");
    r->tensor_norms = sp_calloc((size_t)n, sizeof(double), "tensor gradient norms");
    r->update_ratio = sp_calloc((size_t)n, sizeof(double), "update ratios");
    r->hidden_rms = sp_calloc((size_t)r->cfg.n_layers + 1, sizeof(double), "hidden RMS");
    r->prev_buf = r->be->alloc(sp_model_n_weights(r->m) * sizeof(sp_real), "previous weights");
    const size_t heads = (size_t)r->cfg.n_heads;
    r->attn_sums = sp_malloc(heads * sizeof *r->attn_sums, "attention sums");
    r->attn_head_cos = sp_malloc(heads * heads * sizeof *r->attn_head_cos, "attention head cosines");
    if (!r->params || !r->grads || !r->prev || !r->inputs || !r->targets || !r->tensor_norms || !r->update_ratio ||
        !r->hidden_rms || !r->prev_buf || !r->attn_sums || !r->attn_head_cos)
        return SP_ERR_NOMEM;
    SP_TRY(sp_attn_summary_create(r->m, (int)rows, &r->attn));
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        r->params[i] = sp_model_param(r->m, i);
        r->grads[i] = sp_model_grad(r->m, i);
        r->prev[i] = r->prev_buf + offset;
        offset += sp_param_numel(sp_model_param_spec(r->m, i));
    }
    return SP_OK;
}

static sp_status create_optimizer(sp_run *r)
{
    r->n_params = sp_model_n_params(r->m);
    size_t *numel = sp_calloc((size_t)r->n_params, sizeof *numel, "tensor sizes");
    int *decay = sp_calloc((size_t)r->n_params, sizeof *decay, "decay flags");
    sp_status st = numel && decay ? SP_OK : SP_ERR_NOMEM;
    for (int i = 0; st == SP_OK && i < r->n_params; i++) {
        numel[i] = sp_param_numel(sp_model_param_spec(r->m, i));
        decay[i] = sp_model_param_spec(r->m, i)->decay;
    }
    sp_adamw_config ac = {r->opt.beta1, r->opt.beta2, r->opt.adam_eps, r->opt.weight_decay, r->opt.grad_clip};
    if (st == SP_OK)
        st = sp_optim_create(r->be, &ac, r->n_params, numel, decay, &r->o);
    free(numel);
    free(decay);
    return st;
}

static sp_status new_log(sp_run *r)
{
    const char **names = sp_calloc((size_t)r->n_params, sizeof *names, "tensor names");
    if (!names)
        return SP_ERR_NOMEM;
    for (int i = 0; i < r->n_params; i++)
        names[i] = sp_model_param_spec(r->m, i)->name;
    sp_status st = sp_trainlog_init(&r->log, r->n_params, names, r->cfg.n_layers + 1);
    free(names);
    return st;
}

/* Writes out the CSV's buffered rows; *size (may be NULL) gets its length on disk. */
static sp_status flush_csv(sp_run *r, off_t *size)
{
    struct stat st;
    if (fflush(r->csv) != 0 || ferror(r->csv) || fstat(fileno(r->csv), &st) != 0)
        return sp_error(SP_ERR_IO, "%s/%s: write failed: %s", r->dir, SP_TRAIN_CSV_NAME, strerror(errno));
    if (size)
        *size = st.st_size;
    return SP_OK;
}

static sp_status open_csv(sp_run *r)
{
    char path[4096];
    join_path(path, sizeof path, r->dir, SP_TRAIN_CSV_NAME);
    SP_TRY(sp_trainlog_write_csv(&r->log, path)); /* the header and the rows so far, atomically */
    r->csv = fopen(path, "a");
    if (!r->csv)
        return sp_error(SP_ERR_IO, "%s: cannot open for appending: %s", path, strerror(errno));
    return flush_csv(r, &r->csv_committed);
}

/* Writes train_options.json: what a resume before the first checkpoint continues from (a run
 * resumed from it with a longer --steps records that too). */
static sp_status write_options_record(sp_run *r)
{
    char path[4096];
    join_path(path, sizeof path, r->dir, SP_TRAIN_OPTIONS_NAME);
    r->options_record_existed = access(path, F_OK) == 0;
    return sp_atomic_write_file(path, r->options_json, strlen(r->options_json));
}

static sp_status setup_fresh(sp_run *r)
{
    int64_t *steps;
    int n;
    SP_TRY(list_checkpoints(r->dir, &steps, &n));
    free(steps);
    if (n > 0)
        return sp_error(SP_ERR_USAGE, "%s: already holds the checkpoints of a run (continue it with --resume %s, "
                        "or choose another --out)", r->dir, r->dir);
    SP_TRY(sp_model_create(&r->cfg, r->be, &r->m));
    SP_TRY(sp_model_init(r->m, (uint64_t)r->opt.seed));
    SP_TRY(create_optimizer(r));
    return new_log(r);
}

static sp_status setup_resumed(sp_run *r, const char *path)
{
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    sp_status st = sp_ckpt_load(path, r->be, &r->m, &meta);
    if (st == SP_OK)
        st = create_optimizer(r);
    if (st == SP_OK)
        st = sp_ckpt_load_optim(path, r->m, r->o->m, r->o->v);
    const sp_train_state *ts = &meta.train;
    if (st == SP_OK && !ts->present)
        st = sp_error(SP_ERR_INPUT, "%s: /train: missing (not a training checkpoint)", path);
    if (st == SP_OK && strcmp(ts->status, "diverged") == 0)
        st = sp_error(SP_ERR_USAGE, "%s: the run diverged at step %lld; a diverged run cannot be resumed", path,
                      (long long)ts->diverged_step);
    if (st == SP_OK) {
        r->step = ts->step;
        r->tokens_seen = ts->tokens_seen;
        r->position = ts->data_position;
        r->lr = ts->lr;
        r->o->step = ts->step;
        uint64_t expected[4];
        sp_train_data_rng_state(&r->data, r->position, expected);
        if (memcmp(expected, ts->rng_state, sizeof expected) != 0)
            st = sp_error(SP_ERR_INPUT, "%s: /train/rng_state: does not match the data order of %s with seed %lld "
                          "(the data file changed since the checkpoint)", path, r->opt.data, (long long)r->opt.seed);
    }
    sp_ckpt_meta_free(&meta);
    SP_TRY(st);

    char log_path[4096];
    join_path(log_path, sizeof log_path, r->dir, SP_TRAIN_LOG_NAME);
    SP_TRY(sp_trainlog_read(log_path, &r->log));
    int same = r->log.n_tensors == r->n_params && r->log.n_hidden == r->cfg.n_layers + 1;
    for (int i = 0; same && i < r->n_params; i++)
        same = strcmp(r->log.tensor_names[i], sp_model_param_spec(r->m, i)->name) == 0;
    if (!same)
        return sp_error(SP_ERR_INPUT, "%s: tensors or layers differ from the checkpoint %s's model", log_path, path);
    sp_trainlog_truncate(&r->log, r->step);
    if (r->step < r->opt.steps) { /* continuing: the summary of a finished run no longer holds */
        snprintf(r->log.status, sizeof r->log.status, "running");
        r->log.final_val_loss = NAN;
    }
    int64_t last = r->log.n_rows ? (int64_t)r->log.col[SP_LOG_STEP][r->log.n_rows - 1] : 0;
    if (last < r->step - r->opt.log_every)
        return sp_error(SP_ERR_INPUT, "%s: ends at step %lld, before the checkpoint's step %lld", log_path,
                        (long long)last, (long long)r->step);
    return SP_OK;
}

/* Under MPI the ranks share each step's grad_accum micro-batches (every rank the same number) and
 * sum their gradients (be->sum_over_ranks: host memory and MPI on the CPU, NCCL between GPUs). */
static sp_status check_ranks(const sp_run *r)
{
    if (r->ranks <= 1)
        return SP_OK;
    if (r->opt.grad_accum % r->ranks != 0)
        return sp_error(SP_ERR_USAGE, "--grad-accum %d: over %d MPI ranks it must be a multiple of %d (each rank takes "
                        "an equal share of a step's micro-batches)", r->opt.grad_accum, r->ranks, r->ranks);
    return SP_OK;
}

static sp_status setup(sp_run *r, const char *resume_from)
{
    if (r->cfg.vocab_size < 256)
        return sp_error(SP_ERR_USAGE, "model options: vocab_size = %d is too small for byte tokens (expected >= 256)",
                        r->cfg.vocab_size);
    SP_TRY(sp_backend_select(sp_device_names[r->opt.device], &r->be));
    if (strcmp(r->opt.data, SP_TRAIN_DEFAULT_DATA) == 0 && access(r->opt.data, R_OK) != 0)
        return sp_error(SP_ERR_IO, "%s: missing: the default corpus (fetch it with `make data`, or pass --data FILE)",
                        r->opt.data);
    SP_TRY(check_ranks(r));
    SP_TRY(sp_train_data_load(r->opt.data, r->opt.val_fraction, r->opt.seq_len, (uint64_t)r->opt.seed, &r->data));
    if (r->writer) {
        SP_TRY(sp_make_dirs(r->dir));
        /* one run writes a directory: a second one on it would interleave checkpoints and logs */
        SP_TRY(sp_dir_lock(r->dir, "train", &r->lock_fd));
    }
    SP_TRY(resume_from ? setup_resumed(r, resume_from) : setup_fresh(r));
    SP_TRY(sp_model_sync(r->m)); /* the uploads of the weights and optimizer state */
    SP_TRY(alloc_run_buffers(r));
    r->n_eval = sp_train_data_n_eval(&r->data, r->opt.eval_windows);
    r->schedule = (sp_lr_schedule){r->opt.lr, r->opt.min_lr, r->opt.warmup_steps, r->opt.steps};
    r->options_json = sp_train_options_to_json(&r->cfg, &r->opt);
    free(r->log.options_json);
    r->log.options_json = r->options_json ? strdup(r->options_json) : NULL;
    if (!r->options_json || !r->log.options_json)
        return sp_error(SP_ERR_NOMEM, "training options: out of memory");
    r->log.unigram_entropy = sp_train_data_unigram_entropy(&r->data);
    r->tty = isatty(fileno(stderr));
    r->has_checkpoint = resume_from != NULL;
    if (!r->writer)
        return SP_OK;
    r->writing = 1;
    if (!resume_from) /* from a checkpoint on, the checkpoints hold the options */
        SP_TRY(write_options_record(r));
    return open_csv(r);
}

/* After a failure (train.h): the CSV cut back to the newest checkpoint, or without one, the run's
 * files removed. */
static void take_back(sp_run *r)
{
    char path[4096];
    join_path(path, sizeof path, r->dir, SP_TRAIN_CSV_NAME);
    if (r->has_checkpoint) {
        if (r->csv) {
            fclose(r->csv); /* before the cut: nothing buffered may land after it */
            r->csv = NULL;
            if (truncate(path, r->csv_committed) != 0)
                fprintf(stderr, "spanprobe train: note: %s: cannot cut the rows after the newest checkpoint: %s "
                        "(resume rewrites them)\n", path, strerror(errno));
        }
        return;
    }
    unlink(path);
    join_path(path, sizeof path, r->dir, SP_TRAIN_LOG_NAME);
    unlink(path);
    join_path(path, sizeof path, r->dir, SP_TRAIN_OPTIONS_NAME);
    if (!r->options_record_existed)
        unlink(path);
}

static void teardown(sp_run *r)
{
    if (r->csv)
        fclose(r->csv);
    if (r->prev_buf)
        r->be->free(r->prev_buf);
    free(r->params);
    free(r->grads);
    free(r->prev);
    free(r->inputs);
    free(r->targets);
    free(r->tensor_norms);
    free(r->update_ratio);
    free(r->hidden_rms);
    sp_attn_summary_free(r->attn);
    free(r->attn_sums);
    free(r->attn_head_cos);
    free(r->options_json);
    sp_trainlog_free(&r->log);
    sp_optim_free(r->o);
    sp_model_free(r->m);
    sp_train_data_free(&r->data);
    sp_dir_unlock(r->lock_fd);
}

/* ---- measurements ---- */

/* Mean loss over the fixed validation windows (NaN without a validation split). */
static sp_status eval_loss(sp_run *r, double *out)
{
    if (r->n_eval == 0) {
        *out = NAN;
        return SP_OK;
    }
    double sum = 0;
    for (int first = 0; first < r->n_eval; first += r->opt.batch_size) {
        int count = r->n_eval - first < r->opt.batch_size ? r->n_eval - first : r->opt.batch_size;
        sp_train_data_eval_batch(&r->data, r->n_eval, first, count, r->inputs, r->targets);
        double loss;
        SP_TRY(sp_model_forward(r->m, r->inputs, r->targets, count, r->opt.seq_len, &loss));
        sum += loss * count; /* every window counts seq_len targets */
    }
    *out = sum / r->n_eval;
    return SP_OK;
}

/* RMS of h_0 .. h_L of the last forward pass (stream 0). */
static void measure_hidden(sp_run *r)
{
    size_t n = (size_t)sp_model_rows(r->m) * (size_t)r->cfg.d_model;
    for (int l = 0; l <= r->cfg.n_layers; l++) {
        const sp_real *h = sp_model_hidden(r->m, l, 0);
        r->hidden_rms[l] = h ? sqrt(r->be->sumsq(n, h) / (double)n) : NAN;
    }
}

/* The least mean attention entropy of a head and the largest attention score, over every block of
 * the last forward pass (its q and k: the step's last micro-batch). */
static sp_status measure_attention(sp_run *r)
{
    const int H = r->cfg.n_heads;
    r->attn_entropy_min = INFINITY;
    r->attn_max_logit = -INFINITY;
    for (int l = 0; l < r->cfg.n_layers; l++) {
        sp_attn_head_sums_init(r->attn_sums, H);
        SP_TRY(sp_attn_summary_add(r->attn, l, 0, r->attn_sums, r->attn_head_cos));
        for (int h = 0; h < H; h++) {
            const sp_attn_head_sums *sum = &r->attn_sums[h];
            r->attn_entropy_min = fmin(r->attn_entropy_min, sum->entropy / (double)sum->queries);
            r->attn_max_logit = fmax(r->attn_max_logit, sum->max_logit);
        }
    }
    return SP_OK;
}

/* ||W - W_prev|| / ||W_prev|| per tensor (overwrites prev). */
static void measure_updates(sp_run *r)
{
    for (int i = 0; i < r->n_params; i++) {
        size_t n = sp_param_numel(sp_model_param_spec(r->m, i));
        double w = sqrt(r->be->sumsq(n, r->prev[i]));
        r->be->axpby(n, 1, r->params[i], -1, r->prev[i]);
        double dw = sqrt(r->be->sumsq(n, r->prev[i]));
        r->update_ratio[i] = w > 0 ? dw / w : (dw > 0 ? INFINITY : 0);
    }
}

/* ---- output ---- */

static void print_progress(sp_run *r, double loss, double val, double tokens_per_s)
{
    double elapsed = now_s() - r->t_start;
    int64_t done_here = r->step - r->step_start;
    double eta = done_here > 0 ? elapsed / (double)done_here * (double)(r->opt.steps - r->step) : 0;
    char val_s[32] = "";
    if (isfinite(val))
        snprintf(val_s, sizeof val_s, " val %.4f", val);
    fprintf(stderr, "%sstep %lld/%lld  loss %.4f%s  lr %.3g  %.0f tok/s  ETA %dm%02ds%s", r->tty ? "\r" : "",
            (long long)r->step, (long long)r->opt.steps, loss, val_s, r->lr, tokens_per_s, (int)(eta / 60),
            (int)fmod(eta, 60), r->tty ? "   " : "\n");
    fflush(stderr);
}

static sp_status log_row(sp_run *r, double loss, double grad_norm, int eval)
{
    measure_hidden(r); /* before eval_loss, whose forward passes replace the activations */
    SP_TRY(measure_attention(r));
    measure_updates(r);
    double val = NAN;
    if (eval)
        SP_TRY(eval_loss(r, &val));
    double t = now_s();
    double tokens_per_s = t > r->t_row ? (double)(r->tokens_seen - r->tokens_row) / (t - r->t_row) : 0;
    r->t_row = t;
    r->tokens_row = r->tokens_seen;
    double scalars[SP_LOG_N_SCALARS] = {
        [SP_LOG_STEP] = (double)r->step,         [SP_LOG_TOKENS_SEEN] = (double)r->tokens_seen,
        [SP_LOG_TRAIN_LOSS] = loss,              [SP_LOG_VAL_LOSS] = val,
        [SP_LOG_LR] = r->lr,                     [SP_LOG_GRAD_NORM] = grad_norm,
        [SP_LOG_TOKENS_PER_S] = tokens_per_s,    [SP_LOG_ATTN_ENTROPY_MIN] = r->attn_entropy_min,
        [SP_LOG_ATTN_MAX_LOGIT] = r->attn_max_logit,
    };
    SP_TRY(sp_trainlog_append(&r->log, scalars, r->tensor_norms, r->update_ratio, r->hidden_rms));
    sp_trainlog_csv_row(&r->log, r->log.n_rows - 1, r->csv);
    SP_TRY(flush_csv(r, NULL));
    if (eval && r->step == r->opt.steps)
        r->log.final_val_loss = val;
    print_progress(r, loss, val, tokens_per_s);
    return SP_OK;
}

/* Writes the log and checkpoint ckpt_<step>.h5 together, renamed into place in that order (a kill in
 * between leaves a log ahead of the newest checkpoint, which resume truncates), then prunes old
 * checkpoints. */
static sp_status save(sp_run *r, const char *status, int64_t diverged_step, int with_optim)
{
    snprintf(r->log.status, sizeof r->log.status, "%s", status);
    r->log.diverged_step = diverged_step;
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    meta.cfg = r->cfg;
    meta.has_tokenizer = 1; /* bytes, from sp_ckpt_meta_init */
    snprintf(meta.source, sizeof meta.source, "spanprobe train --data %s (step %lld)", r->opt.data,
             (long long)r->step);
    sp_train_state *ts = &meta.train;
    ts->present = 1;
    ts->step = r->step;
    ts->tokens_seen = r->tokens_seen;
    ts->data_position = r->position;
    sp_train_data_rng_state(&r->data, r->position, ts->rng_state);
    ts->lr = r->lr;
    snprintf(ts->status, sizeof ts->status, "%s", status);
    ts->diverged_step = diverged_step;
    ts->options_json = r->options_json; /* borrowed: meta is not freed */

    char log_path[4096], ckpt_path[4096];
    join_path(log_path, sizeof log_path, r->dir, SP_TRAIN_LOG_NAME);
    checkpoint_path(ckpt_path, sizeof ckpt_path, r->dir, r->step);
    sp_output_set outputs = {0};
    sp_atomic_file *af;
    sp_status st = sp_output_set_begin(&outputs, log_path, &af);
    if (st == SP_OK)
        st = sp_trainlog_write_into(&r->log, af);
    if (st == SP_OK)
        st = sp_output_set_begin(&outputs, ckpt_path, &af);
    if (st == SP_OK)
        st = sp_ckpt_write_into(af, r->m, &meta, with_optim ? r->o->m : NULL, with_optim ? r->o->v : NULL);
    if (st == SP_OK)
        st = sp_output_set_commit(&outputs);
    sp_output_set_abort(&outputs); /* empty after a commit */
    SP_TRY(st);
    r->has_checkpoint = 1;
    SP_TRY(flush_csv(r, &r->csv_committed));
    return prune_checkpoints(r->dir, r->opt.keep);
}

/* Stops the run at step `at` (1-based) with the weights after step at - 1. */
static sp_status diverge(sp_run *r, int64_t at, double loss, double grad_norm, int optim_intact)
{
    if (r->tty)
        fputc('\n', stderr);
    if (r->writer)
        SP_TRY(save(r, "diverged", at, optim_intact));
    char path[4096];
    checkpoint_path(path, sizeof path, r->dir, r->step);
    return sp_error(SP_ERR_DIVERGED,
                    "training diverged at step %lld: loss %g, gradient norm %g; the last finite weights are in %s",
                    (long long)at, loss, grad_norm, path);
}

/* ---- the loop ---- */

static void copy_tensors(sp_run *r, sp_real *const *dst, sp_real *const *src)
{
    for (int i = 0; i < r->n_params; i++)
        r->be->copy(dst[i], src[i], sp_param_numel(sp_model_param_spec(r->m, i)) * sizeof(sp_real));
}

/* The accumulated gradients and the loss, summed over the ranks (MPI); each rank holds 1/accum of
 * its micro-batches' gradients, so the sums are the step's mean gradient and loss. */
static sp_status sum_over_ranks(sp_run *r, double *loss)
{
    for (int i = 0; i < r->n_params; i++)
        SP_TRY(r->be->sum_over_ranks(r->o->acc[i], sp_param_numel(sp_model_param_spec(r->m, i))));
    *loss = sp_mpi_sum_double(*loss);
    return SP_OK;
}

static sp_status train_step(sp_run *r)
{
    int64_t at = r->step + 1;
    int is_last = at == r->opt.steps;
    int logging = at % r->opt.log_every == 0 || is_last;
    int eval = (r->opt.eval_every > 0 && at % r->opt.eval_every == 0) || is_last;
    logging = logging || eval;
    r->lr = sp_lr_at(&r->schedule, r->step);

    double loss = 0;
    int accum = r->opt.grad_accum;
    for (int k = 0; k < accum; k++) {
        double micro_loss;
        if (k % r->ranks != r->rank) { /* another rank's micro-batch */
            r->position += r->opt.batch_size;
            continue;
        }
        sp_train_data_batch(&r->data, r->position, r->opt.batch_size, r->inputs, r->targets);
        r->position += r->opt.batch_size;
        SP_TRY(sp_model_forward(r->m, r->inputs, r->targets, r->opt.batch_size, r->opt.seq_len, &micro_loss));
        SP_TRY(sp_model_backward(r->m));
        if (accum > 1)
            SP_TRY(sp_optim_accumulate(r->o, r->grads, 1.0 / accum, k == r->rank));
        loss += micro_loss / accum;
    }
    if (r->ranks > 1) /* the step's gradient and loss: every rank's share summed, the same on all */
        SP_TRY(sum_over_ranks(r, &loss));
    sp_real *const *grads = accum > 1 ? r->o->acc : r->grads;
    double grad_norm = sp_optim_grad_norm(r->o, grads, r->tensor_norms);
    SP_TRY(sp_model_sync(r->m)); /* a device failure is an error, not a divergence */
    if (!isfinite(loss) || !isfinite(grad_norm))
        return diverge(r, at, loss, grad_norm, 1);

    copy_tensors(r, r->prev, r->params);
    sp_optim_step(r->o, r->params, grads, grad_norm, r->lr);
    size_t bad = 0;
    for (int i = 0; i < r->n_params; i++)
        bad += r->be->count_nonfinite(sp_param_numel(sp_model_param_spec(r->m, i)), r->params[i]);
    SP_TRY(sp_model_sync(r->m));
    if (bad) {
        copy_tensors(r, r->params, r->prev); /* undo the update */
        return diverge(r, at, loss, grad_norm, 0);
    }
    r->step = at;
    r->tokens_seen += sp_train_tokens_per_step(&r->opt);
    if (logging && r->writer)
        SP_TRY(log_row(r, loss, grad_norm, eval));
    if (r->writer && (is_last || (r->opt.ckpt_every > 0 && at % r->opt.ckpt_every == 0)))
        SP_TRY(save(r, is_last ? "done" : "running", -1, 1));
    return SP_OK;
}

static void print_summary(const sp_run *r)
{
    double h = r->log.unigram_entropy, v = r->log.final_val_loss;
    printf("trained %lld steps (%lld tokens) into %s\n", (long long)r->step, (long long)r->tokens_seen, r->dir);
    if (isfinite(v))
        printf("final validation loss %.4f nats/token; unigram entropy of the training split %.4f nats "
               "(validation loss %.1f%% %s it)\n", v, h, 100.0 * fabs(1.0 - v / h), v <= h ? "below" : "above");
    else
        printf("no validation split (val_fraction 0); unigram entropy of the training split %.4f nats\n", h);
}

static sp_status run_on_ranks(const sp_config *cfg, const sp_train_options *opt, const char *out_dir,
                              const char *resume_from, int rank, int ranks)
{
    sp_run r = {.cfg = *cfg, .opt = *opt, .dir = out_dir, .lock_fd = -1, .rank = rank, .ranks = ranks,
                .writer = rank == 0};
    sp_status st = setup(&r, resume_from);
    r.t_start = r.t_row = now_s();
    r.step_start = r.step;
    r.tokens_row = r.tokens_seen;
    while (st == SP_OK && r.step < r.opt.steps)
        st = train_step(&r);
    if (st != SP_OK && st != SP_ERR_DIVERGED && r.writing)
        take_back(&r);
    if (r.tty && r.writer && st != SP_ERR_DIVERGED)
        fputc('\n', stderr);
    if (st == SP_OK && r.step_start == r.opt.steps && r.writer) {
        fprintf(stderr, "spanprobe train: %s is already at step %lld of %lld: nothing to do\n", out_dir,
                (long long)r.step, (long long)r.opt.steps);
        /* a kill between the last checkpoint's commit and its pruning left one old checkpoint too many */
        st = prune_checkpoints(r.dir, r.opt.keep);
    }
    if (st == SP_OK && r.writer)
        print_summary(&r);
    teardown(&r);
    return st;
}

sp_status sp_train_run(const sp_config *cfg, const sp_train_options *opt, const char *out_dir,
                       const char *resume_from)
{
    return run_on_ranks(cfg, opt, out_dir, resume_from, 0, 1);
}

sp_status sp_train_run_mpi(const sp_config *cfg, const sp_train_options *opt, const char *out_dir,
                           const char *resume_from)
{
    return run_on_ranks(cfg, opt, out_dir, resume_from, sp_mpi_rank(), sp_mpi_size());
}
