#include "core/sha256.h"

#include "core/input_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

sp_status sp_sha256_init(sp_sha256 *h)
{
    h->n_bytes = 0;
    h->ctx = EVP_MD_CTX_new();
    if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(h->ctx);
        h->ctx = NULL;
        return sp_error(SP_ERR_NOMEM, "cannot set up a SHA-256 digest (libcrypto)");
    }
    return SP_OK;
}

void sp_sha256_update(sp_sha256 *h, const void *data, size_t len)
{
    EVP_DigestUpdate(h->ctx, data, len); /* cannot fail for SHA-256 in memory */
    h->n_bytes += len;
}

void sp_sha256_final(sp_sha256 *h, unsigned char digest[32])
{
    EVP_DigestFinal_ex(h->ctx, digest, NULL);
    EVP_MD_CTX_free(h->ctx);
    h->ctx = NULL;
}

void sp_sha256_hex(const unsigned char digest[32], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = '\0';
}

sp_status sp_sha256_file(const char *path, char hex[65], int64_t *n_bytes)
{
    FILE *f = NULL;
    SP_TRY(sp_file_open_regular(path, &f, NULL));
    sp_sha256 h;
    sp_status st = sp_sha256_init(&h);
    if (st != SP_OK) {
        fclose(f);
        return st;
    }
    unsigned char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        sp_sha256_update(&h, buf, got);
    int failed = ferror(f);
    fclose(f);
    unsigned char digest[32];
    sp_sha256_final(&h, digest);
    if (failed)
        return sp_error(SP_ERR_IO, "%s: read error", path);
    if (n_bytes)
        *n_bytes = (int64_t)h.n_bytes;
    sp_sha256_hex(digest, hex);
    return SP_OK;
}
