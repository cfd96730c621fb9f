/* study/workers.h: tasks in forked workers, at most n at a time. Five tasks of 0.3 s on two workers:
 * every one runs (its marker file appears), never more than two at once, ticks come while they run,
 * and each ends through `done`. A failing task stops new ones from starting and its one-line error
 * comes back (of two failures, the lower task's); a task that dies on a signal is an error naming
 * the signal, not a hang. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "study/workers.h"
#include "support/scratch.h"
#include "support/tree.h"

typedef struct {
    char dir[4096];
    int fail[8];        /* task t returns an error */
    int crash[8];       /* task t aborts */
    int done[8];        /* parent: done() calls per task */
    sp_status status[8];
    int ticks, most_running;
} tasks;

static sp_status task(void *ctx, int t)
{
    tasks *ts = ctx;
    nanosleep(&(struct timespec){0, 300000000}, NULL);
    if (ts->crash[t])
        abort();
    char path[4200];
    snprintf(path, sizeof path, "%s/task%d", ts->dir, t);
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
    return ts->fail[t] ? sp_error(SP_ERR_INPUT, "task %d failed", t) : SP_OK;
}

static void done(void *ctx, int t, sp_status st, double seconds)
{
    tasks *ts = ctx;
    ts->done[t]++;
    ts->status[t] = st;
    assert_true(seconds > 0.2);
}

static void tick(void *ctx, int n, const int *task_ids, const double *seconds)
{
    tasks *ts = ctx;
    ts->ticks++;
    ts->most_running = n > ts->most_running ? n : ts->most_running;
    for (int k = 0; k < n; k++)
        assert_true(task_ids[k] >= 0 && task_ids[k] < 8 && seconds[k] >= 0);
}

static void setup(tasks *ts, const char *name)
{
    memset(ts, 0, sizeof *ts);
    scratch_path(ts->dir, sizeof ts->dir, name);
    tree_remove(ts->dir);
    assert_int_equal(mkdir(ts->dir, 0755), 0);
}

static int ran(const tasks *ts, int t)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/task%d", ts->dir, t);
    return scratch_file_exists(path);
}

static void test_all_tasks_two_at_a_time(void **state)
{
    (void)state;
    tasks ts;
    setup(&ts, "workers_ok");
    const int order[5] = {4, 3, 2, 1, 0};
    sp_error_clear();
    assert_int_equal(sp_workers_run(5, order, 2, 1, task, done, tick, 0.1, &ts), SP_OK);
    for (int t = 0; t < 5; t++) {
        assert_true(ran(&ts, t));
        assert_int_equal(ts.done[t], 1);
        assert_int_equal(ts.status[t], SP_OK);
    }
    assert_true(ts.ticks >= 2);
    assert_int_equal(ts.most_running, 2);
}

static void test_failures_stop_and_report(void **state)
{
    (void)state;
    tasks ts;
    setup(&ts, "workers_fail");
    ts.fail[1] = ts.fail[0] = 1; /* both of the first pair fail: the lower task is reported */
    const int order[5] = {1, 0, 2, 3, 4};
    sp_error_clear();
    assert_int_equal(sp_workers_run(5, order, 2, 1, task, done, tick, 10, &ts), SP_ERR_INPUT);
    assert_string_equal(sp_error_message(), "task 0 failed");
    assert_false(ran(&ts, 2) || ran(&ts, 3) || ran(&ts, 4)); /* none started after the failures */
    assert_int_equal(ts.status[1], SP_ERR_INPUT);

    setup(&ts, "workers_crash");
    ts.crash[2] = 1;
    const int three[3] = {0, 1, 2};
    sp_error_clear();
    assert_int_equal(sp_workers_run(3, three, 3, 1, task, done, tick, 10, &ts), SP_ERR_IO);
    assert_non_null(strstr(sp_error_message(), "ended without a result (signal 6)"));
    assert_true(ran(&ts, 0) && ran(&ts, 1));
    sp_error_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_tasks_two_at_a_time),
        cmocka_unit_test(test_failures_stop_and_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
