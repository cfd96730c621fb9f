/* tests/support/scratch.h: files and command runs for tests: a private scratch directory (under
 * $BUILD_DIR, else /tmp, removed at exit), whole-file reads and writes, the shared real data, and
 * running the CLI ($SPANPROBE_BIN) with its exit code and captured output. */
#ifndef SP_TEST_SCRATCH_H
#define SP_TEST_SCRATCH_H

#include <stddef.h>
#include <sys/types.h>

/* Writes "<scratch dir>/<name>" into buf (the directory is created on first use; aborts on failure). */
void scratch_path(char *buf, size_t len, const char *name);
/* 0 on success. */
int scratch_write_file(const char *path, const void *data, size_t len);
/* The whole file, NUL-terminated (free()); NULL when it cannot be read. */
char *scratch_read_file(const char *path, size_t *len);
int scratch_file_exists(const char *path);
/* Number of entries of the scratch directory whose name matches the fnmatch(3) pattern
 * ("out.h5*": the file and its temporary files); -1 when the directory cannot be listed. */
int scratch_count_entries(const char *pattern);
/* Writes "../shared/data/<rel>" (relative to the repository root, the tests' working directory) into
 * buf and returns 1 when that file exists, else 0 (the caller skips). */
int scratch_shared_data(const char *rel, char *buf, size_t len);
/* Runs $SPANPROBE_BIN with args (NULL-terminated, without the program name); *out and *err (may be
 * NULL) get its stdout and stderr (free()). Returns the exit status, 128 + signal when killed, or -1
 * when SPANPROBE_BIN is not set (the caller skips). Every run is killed by SIGALRM (status 142)
 * after SCRATCH_CLI_TIMEOUT seconds, so a hang fails its test instead of stalling the suite. */
#define SCRATCH_CLI_TIMEOUT 900
int scratch_run_cli(const char *const *args, char **out, char **err);
/* The same, killed after `seconds` (a test that a command cannot hang). */
int scratch_run_cli_within(unsigned seconds, const char *const *args, char **out, char **err);
/* The same with the program at bin (NULL: $SPANPROBE_BIN), e.g. $BUILD_DIR/spanprobe-f64. */
int scratch_run_program(const char *bin, const char *const *args, char **out, char **err);
/* Starts $SPANPROBE_BIN with args in the background, stdout and stderr discarded; returns its pid
 * (for waitpid), or -1 when SPANPROBE_BIN is not set. */
pid_t scratch_spawn_cli(const char *const *args);
/* The argv of a run of bin with args: {bin, args..., NULL} (free() the array, not its strings). */
char **scratch_argv(const char *bin, const char *const *args);
/* Number of lines in s (a last line without '\n' counts). */
int scratch_count_lines(const char *s);

#endif
