/* io/str_map.c: string -> int32 hash map (FNV-1a hashes, linear probing, load factor <= 1/2). */
#include "io/str_map.h"

#include <stdlib.h>
#include <string.h>

#define EMPTY_SLOT UINT32_MAX

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* The slot holding key, or the empty slot where it would go. */
static sp_str_slot *find_slot(const sp_str_map *m, const char *key, size_t len, uint64_t h)
{
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        sp_str_slot *s = &m->slots[i];
        if (s->key_len == EMPTY_SLOT ||
            (s->hash == h && s->key_len == len && memcmp(m->arena + s->key_off, key, len) == 0))
            return s;
    }
}

static sp_status grow_slots(sp_str_map *m)
{
    size_t cap = m->cap ? 2 * m->cap : 64;
    sp_str_slot *slots = sp_malloc(cap * sizeof *slots, "string map");
    if (!slots)
        return SP_ERR_NOMEM;
    for (size_t i = 0; i < cap; i++)
        slots[i].key_len = EMPTY_SLOT;
    sp_str_slot *old = m->slots;
    size_t old_cap = m->cap;
    m->slots = slots;
    m->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key_len != EMPTY_SLOT)
            *find_slot(m, m->arena + old[i].key_off, old[i].key_len, old[i].hash) = old[i];
    free(old);
    return SP_OK;
}

/* Copies the key into the arena with a NUL after it (keys print as C strings). */
static sp_status append_key(sp_str_map *m, const char *key, size_t len, size_t *off)
{
    SP_TRY(sp_grow((void **)&m->arena, &m->arena_cap, m->arena_len + len + 1, 1, "a string map"));
    if (len)
        memcpy(m->arena + m->arena_len, key, len);
    m->arena[m->arena_len + len] = '\0';
    *off = m->arena_len;
    m->arena_len += len + 1;
    return SP_OK;
}

sp_status sp_str_map_put(sp_str_map *m, const char *key, size_t len, int32_t value, int *found, int32_t *value_out,
                         size_t *key_off)
{
    if (len >= EMPTY_SLOT)
        return sp_error(SP_ERR_INPUT, "a string of %zu bytes is too long for a string map key", len);
    if (2 * (m->n + 1) > m->cap)
        SP_TRY(grow_slots(m));
    uint64_t h = hash_bytes(key, len);
    sp_str_slot *s = find_slot(m, key, len, h);
    if (found)
        *found = s->key_len != EMPTY_SLOT;
    if (s->key_len == EMPTY_SLOT) {
        size_t off = 0;
        SP_TRY(append_key(m, key, len, &off));
        *s = (sp_str_slot){.hash = h, .key_off = off, .key_len = (uint32_t)len, .value = value};
        m->n++;
    }
    if (value_out)
        *value_out = s->value;
    if (key_off)
        *key_off = s->key_off;
    return SP_OK;
}

int sp_str_map_get(const sp_str_map *m, const char *key, size_t len, int32_t *value)
{
    if (!m->cap)
        return 0;
    const sp_str_slot *s = find_slot(m, key, len, hash_bytes(key, len));
    if (s->key_len == EMPTY_SLOT)
        return 0;
    *value = s->value;
    return 1;
}

void sp_str_map_free(sp_str_map *m)
{
    free(m->slots);
    free(m->arena);
    *m = (sp_str_map){0};
}
