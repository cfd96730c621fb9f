/* tests/support/tree.h: removing a directory tree a test made below its scratch directory (the
 * scratch directory itself removes only plain files). */
#ifndef SP_TEST_TREE_H
#define SP_TEST_TREE_H

/* Removes path and everything below it; a missing path is fine. 0 on success. */
int tree_remove(const char *path);
/* Number of regular files directly in dir whose name ends with suffix (-1: cannot list). */
int tree_count_files(const char *dir, const char *suffix);

#endif
