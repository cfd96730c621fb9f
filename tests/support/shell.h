/* tests/support/shell.h: a shell command line run by a test (make, mpirun, a compiler), its output
 * kept. */
#ifndef SP_TEST_SHELL_H
#define SP_TEST_SHELL_H

/* Runs cmd with sh -c, stdout and stderr together into *out (malloc'd; out may be NULL); on a
 * non-zero status the command and its output go to stderr. Returns the status as system() does. */
int shell_run(const char *cmd, char **out);

/* 1 when the program `name` is on the PATH (gnuplot, help2man: tools that `make deps` installs
 * and a machine without them lacks), else 0. */
int shell_has_program(const char *name);

#endif
