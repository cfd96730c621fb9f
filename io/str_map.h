/* io/str_map.h: a hash map from byte strings to int32 values (open addressing, linear probing).
 * The map keeps its own NUL-terminated copy of every key in one arena, so a key is also addressable
 * by the offset sp_str_map_put returns (the Hugging Face tokenizer's id -> piece tables point there). */
#ifndef SP_STR_MAP_H
#define SP_STR_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

typedef struct {
    uint64_t hash;
    size_t key_off; /* into arena */
    uint32_t key_len;
    int32_t value;
} sp_str_slot;

typedef struct {
    sp_str_slot *slots; /* cap entries, key_len == UINT32_MAX marks an empty slot */
    size_t n, cap;
    char *arena;
    size_t arena_len, arena_cap;
} sp_str_map;

/* Inserts key -> value unless the key is present. *found (may be NULL) is set to 1 when it was,
 * with *value_out the stored value (unchanged map); *key_off (may be NULL) gets the key's arena
 * offset either way. Keys longer than UINT32_MAX - 1 bytes are SP_ERR_INPUT. */
sp_status sp_str_map_put(sp_str_map *m, const char *key, size_t len, int32_t value, int *found, int32_t *value_out,
                         size_t *key_off);
/* 1 and *value when key is present, else 0. */
int sp_str_map_get(const sp_str_map *m, const char *key, size_t len, int32_t *value);
/* The stored copy of a key, by the offset sp_str_map_put gave. */
static inline const char *sp_str_map_key(const sp_str_map *m, size_t key_off) { return m->arena + key_off; }
void sp_str_map_free(sp_str_map *m);

#endif
