/* tests/support/masked_backend.h: the CPU backend behind masked pointers, to catch host code that
 * touches backend memory directly (works on the CPU, crashes or reads garbage on a GPU).
 *
 * Every op forwards to sp_backend_cpu()'s after unmasking its backend pointer arguments; alloc
 * hands out the CPU pointer with bit 63 flipped, a non-canonical x86-64 address, so any host
 * dereference of backend memory outside the ops faults at once (SIGSEGV or SIGBUS; ASan reports it), while
 * pointer arithmetic (p + offset) keeps working. NULL stays NULL. Results are bit-identical to the
 * CPU backend's, since the same CPU ops run on the same memory. */
#ifndef SP_TEST_MASKED_BACKEND_H
#define SP_TEST_MASKED_BACKEND_H

#include "kernels/backend.h"

/* The table, named "masked". */
const sp_backend *masked_backend(void);

#endif
