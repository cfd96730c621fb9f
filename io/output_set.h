/* io/output_set.h: several output files that appear together or not at all.
 *
 * Each member is an atomic file (io/atomic.h) written under its temporary name. Commit flushes every
 * member to disk first, and only when all of them are there renames them into place, in the order
 * they were added: a write that fails (a full disk) leaves every destination as it was, with no
 * temporary file. A kill during the renames can leave the first members renamed and the rest not:
 * add the files a reader checks first (a checkpoint after its log) last.
 */
#ifndef SP_OUTPUT_SET_H
#define SP_OUTPUT_SET_H

#include "io/atomic.h"

typedef struct {
    sp_atomic_file **files; /* each malloc'ed, so a member's address holds while the set grows */
    size_t n, cap;
} sp_output_set;            /* zero-initialized: empty */

/* Begins the temporary file of path as a new member; *af is it until commit or abort. */
sp_status sp_output_set_begin(sp_output_set *set, const char *path, sp_atomic_file **af);
/* Takes over an atomic file begun elsewhere (af is released either way; on failure its temporary
 * file is removed). */
sp_status sp_output_set_adopt(sp_output_set *set, sp_atomic_file *af);
/* Flushes every member, then renames every one into place; on failure removes the temporary files
 * left. Either way the set is empty afterwards. */
sp_status sp_output_set_commit(sp_output_set *set);
/* Removes every member's temporary file and empties the set. */
void sp_output_set_abort(sp_output_set *set);

#endif
