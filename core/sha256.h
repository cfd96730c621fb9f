/* core/sha256.h: SHA-256 (FIPS 180-4), to record which input file a report was computed from.
 * OpenSSL's libcrypto computes it (with the CPU's SHA instructions where it has them: about 1.4
 * GB/s here, against 0.27 GB/s for the portable C this replaced). */
#ifndef SP_SHA256_H
#define SP_SHA256_H

#include "core/common.h"

typedef struct {
    void *ctx;                 /* libcrypto's EVP_MD_CTX */
    uint64_t n_bytes;          /* message length so far */
} sp_sha256;

/* SP_ERR_NOMEM when libcrypto cannot set up a digest. */
sp_status sp_sha256_init(sp_sha256 *h);
void sp_sha256_update(sp_sha256 *h, const void *data, size_t len);
/* Finishes the digest and releases h (h must be initialized again before reuse). */
void sp_sha256_final(sp_sha256 *h, unsigned char digest[32]);
/* 64 lower-case hex digits and a NUL. */
void sp_sha256_hex(const unsigned char digest[32], char hex[65]);
/* Hashes a whole file; *n_bytes (may be NULL) gets its size. SP_ERR_IO naming the path on failure. */
sp_status sp_sha256_file(const char *path, char hex[65], int64_t *n_bytes);

#endif
