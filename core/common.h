/* core/common.h: the scalar type, status codes, one-line errors, overflow-safe sizes.
 *
 * spanprobe is compiled twice from the same sources: the normal float32 build, and a float64 build
 * (-DSP_DOUBLE) that the gradient and Jacobian checks use, so finite differences are meaningful.
 * Every model, kernel and I/O routine works in sp_real; eigen and singular-value problems are always
 * solved in double whatever sp_real is.
 *
 * Errors: a function that can fail returns an sp_status (SP_OK = 0, else the process exit code the CLI
 * will use) after calling sp_error(code, fmt, ...) once with a message naming the file, the object
 * inside it and what was expected versus found. The CLI prints that one line and exits with the code.
 */
#ifndef SP_COMMON_H
#define SP_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef SP_DOUBLE
typedef double sp_real;
#define SP_REAL_NAME "float64"
#else
typedef float sp_real;
#define SP_REAL_NAME "float32"
#endif

#define SP_VERSION "0.1.0"

/* Exit codes, documented in docs/cli.md. */
typedef enum {
    SP_OK = 0,
    SP_ERR_INTERNAL = 1,  /* a bug: an invariant failed */
    SP_ERR_USAGE = 2,     /* bad command line or option value */
    SP_ERR_INPUT = 3,     /* bad input file or contents */
    SP_ERR_NUMERIC = 4,   /* numerical failure (NaN/Inf where it would poison a computation) */
    SP_ERR_IO = 5,        /* cannot read or write a file */
    SP_ERR_DIVERGED = 6,  /* training diverged (a result, recorded in the log) */
    SP_ERR_CHECK = 7,     /* `spanprobe check`: at least one rule failed */
    SP_ERR_NOMEM = 8      /* out of memory (host or device) */
} sp_status;

/* Records the first error of the current operation (later ones are ignored until sp_error_clear).
 * Returns code so callers can write `return sp_error(SP_ERR_INPUT, "...")`. */
sp_status sp_error(sp_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* in with every control character written as an escape (\n, \r, \t, \x1b, ...), cut to fit len:
 * what error messages and warnings do with names that come from files or the command line. */
void sp_escape_controls(const char *in, char *out, size_t len);
const char *sp_error_message(void);
/* Puts "<context>: " before the message of the error already set (nothing when none is): the
 * caller that knows which file, analyzer or block failed says so. */
void sp_error_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
sp_status sp_error_code(void);
void sp_error_clear(void);

/* Overflow-safe size arithmetic: return 0 and set *out, or SP_ERR_INPUT with a message naming what. */
sp_status sp_size_mul(size_t a, size_t b, size_t *out, const char *what);
sp_status sp_size_mul3(size_t a, size_t b, size_t c, size_t *out, const char *what);

/* Makes room for at least `need` elements of elem_size bytes in *items (realloc, capacity doubling
 * from 64); SP_ERR_NOMEM naming `what` on failure, *items and *cap unchanged then. */
sp_status sp_grow(void **items, size_t *cap, size_t need, size_t elem_size, const char *what);

/* Allocation that records a one-line error with the size on failure (returns NULL). */
void *sp_malloc(size_t bytes, const char *what);
void *sp_calloc(size_t n, size_t size, const char *what);

#define SP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define SP_TRY(expr)                        \
    do {                                    \
        sp_status sp_try_status_ = (expr);  \
        if (sp_try_status_ != SP_OK)        \
            return sp_try_status_;          \
    } while (0)

#endif
