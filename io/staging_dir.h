/* io/staging_dir.h: many files that appear in a directory together or not at all, for a writer that
 * cannot name each file's temporary path itself (gnuplot draws next to its script).
 *
 * The files are written under their final names into a private directory inside the destination,
 * "<dir>/.stage.tmp.<pid>.XXXXXX" (the form of io/atomic.h, so a later writer into dir removes the
 * directory of a killed one); commit moves each into dir, abort removes them. A failure while
 * writing (a full disk) leaves dir as it was. The directory holds plain files only.
 */
#ifndef SP_STAGING_DIR_H
#define SP_STAGING_DIR_H

#include "core/common.h"

/* Creates the staging directory of dir (which must exist) into stage[len]. */
sp_status sp_staging_dir_begin(const char *dir, char *stage, size_t len);
/* Moves every file of stage into dir (replacing files of the same names), then removes stage. */
sp_status sp_staging_dir_commit(const char *stage, const char *dir);
/* Removes stage's files and stage itself. */
void sp_staging_dir_remove(const char *stage);

#endif
