#include "io/model_source.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/sha256.h"
#include "io/dirs.h"
#include "io/gguf_model.h"
#include "io/hf_dir.h"
#include "io/nanogpt.h"

sp_model_source_kind sp_model_source_kind_of(const char *path)
{
    if (sp_hf_is_model_dir(path))
        return SP_SOURCE_HF_DIR;
    if (sp_gguf_is_model_file(path))
        return SP_SOURCE_GGUF;
    return sp_pt_is_file(path) ? SP_SOURCE_PT : SP_SOURCE_CHECKPOINT;
}

void sp_model_source_name(const char *path, char *buf, size_t len)
{
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/')
        end--;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    static const char *const extensions[] = {".h5", ".gguf", ".pt", ".pth"};
    for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++) {
        size_t n = strlen(extensions[i]);
        if (end - start > n && strncmp(path + end - n, extensions[i], n) == 0) {
            end -= n;
            break;
        }
    }
    snprintf(buf, len, "%.*s", (int)(end - start), path + start);
}

const char *sp_model_source_kind_name(sp_model_source_kind kind)
{
    static const char *const names[] = {"checkpoint", "hugging face directory", "gguf file", "pytorch checkpoint"};
    return names[kind];
}

sp_status sp_model_source_read_meta(const char *path, sp_ckpt_meta *meta)
{
    switch (sp_model_source_kind_of(path)) {
    case SP_SOURCE_HF_DIR: return sp_hf_read_meta(path, meta);
    case SP_SOURCE_GGUF: return sp_gguf_model_read_meta(path, meta);
    case SP_SOURCE_PT: return sp_nanogpt_read_meta(path, meta);
    case SP_SOURCE_CHECKPOINT: break;
    }
    return sp_ckpt_read_meta(path, meta);
}

sp_status sp_model_source_load(const char *path, const sp_backend *be, sp_model **model, sp_ckpt_meta *meta)
{
    switch (sp_model_source_kind_of(path)) {
    case SP_SOURCE_HF_DIR: return sp_hf_load(path, be, model, meta);
    case SP_SOURCE_GGUF: return sp_gguf_model_load(path, be, model, meta);
    case SP_SOURCE_PT: return sp_nanogpt_load(path, be, model, meta);
    case SP_SOURCE_CHECKPOINT: break;
    }
    return sp_ckpt_load(path, be, model, meta);
}

static int regular_entry(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

static sp_status directory_sha256(const char *dir, char hex[65], int64_t *n_bytes)
{
    struct dirent **entries = NULL;
    int n = scandir(dir, &entries, regular_entry, alphasort);
    if (n < 0)
        return sp_error(SP_ERR_IO, "%s: cannot list the directory", dir);
    sp_sha256 h;
    sp_status st = sp_sha256_init(&h);
    int64_t total = 0;
    char path[4096], line[4200], file_hex[65];
    for (int i = 0; i < n; i++) {
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, entries[i]->d_name);
        if (st == SP_OK && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) { /* st: the digest is set up */
            int64_t bytes = 0;
            st = sp_sha256_file(path, file_hex, &bytes);
            int len = snprintf(line, sizeof line, "%s %s\n", entries[i]->d_name, file_hex);
            sp_sha256_update(&h, line, (size_t)len);
            total += bytes;
        }
        free(entries[i]);
    }
    free(entries);
    if (!h.ctx) /* its set-up failed */
        return st;
    unsigned char digest[32];
    sp_sha256_final(&h, digest);
    sp_sha256_hex(digest, hex);
    if (n_bytes)
        *n_bytes = total;
    return st;
}

sp_status sp_model_source_sha256(const char *path, char hex[65], int64_t *n_bytes)
{
    if (sp_model_source_kind_of(path) == SP_SOURCE_HF_DIR)
        return directory_sha256(path, hex, n_bytes);
    return sp_sha256_file(path, hex, n_bytes);
}

sp_status sp_model_source_check_output(const char *input, const char *output)
{
    if (sp_model_source_kind_of(input) == SP_SOURCE_HF_DIR)
        return sp_check_not_in_dir(output, input, "the model directory");
    struct stat in, out;
    if (stat(input, &in) == 0 && stat(output, &out) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
        return sp_error(SP_ERR_USAGE, "%s: the output is the input %s (choose another output path)", output, input);
    return SP_OK;
}

sp_status sp_check_outputs(const char *const *outputs, int n_out, const char *const *inputs, int n_in)
{
    for (int o = 0; o < n_out; o++)
        for (int i = 0; i < n_in; i++)
            if (outputs[o] && inputs[i])
                SP_TRY(sp_model_source_check_output(inputs[i], outputs[o]));
    return SP_OK;
}
