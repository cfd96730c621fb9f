/* tests/support/open_files.h: what the process holds open, from /proc/self, so tests can check
 * that readers release every descriptor and mapping after success and failure alike. */
#ifndef SP_TEST_OPEN_FILES_H
#define SP_TEST_OPEN_FILES_H

/* Entries of /proc/self/fd; -1 when it cannot be listed. */
int count_open_fds(void);
/* Lines of /proc/self/maps naming a path that contains dir. */
int count_mappings_of(const char *dir);

#endif
