/* core/sha256.h: SHA-256 (FIPS 180-4), to record which input file a report was computed from. */
#ifndef SP_SHA256_H
#define SP_SHA256_H

#include "core/common.h"

typedef struct {
    uint32_t state[8];
    uint64_t n_bytes;          /* message length so far */
    unsigned char block[64];   /* pending input, n_bytes % 64 of it used */
} sp_sha256;

void sp_sha256_init(sp_sha256 *h);
void sp_sha256_update(sp_sha256 *h, const void *data, size_t len);
/* Finishes the digest (h must be initialized again before reuse). */
void sp_sha256_final(sp_sha256 *h, unsigned char digest[32]);
/* 64 lower-case hex digits and a NUL. */
void sp_sha256_hex(const unsigned char digest[32], char hex[65]);
/* Hashes a whole file; *n_bytes (may be NULL) gets its size. SP_ERR_IO naming the path on failure. */
sp_status sp_sha256_file(const char *path, char hex[65], int64_t *n_bytes);

#endif
