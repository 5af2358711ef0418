/*  arena.h: one aligned block carved by a bump pointer. Taken at set-up; passes only carve it. */
#ifndef UFORM_CORE_ARENA_H
#define UFORM_CORE_ARENA_H

#include <stddef.h>

#include "uform/types.h"

typedef struct uform_arena_t {
    unsigned char *base;
    size_t capacity, used;
} uform_arena_t;

/** Allocates `capacity` bytes (64-byte aligned). */
uform_status_t uform_arena_create(uform_arena_t *arena, size_t capacity);
void uform_arena_destroy(uform_arena_t *arena);
/** Carves `bytes` (rounded up to 64) or returns NULL when the arena is full. */
void *uform_arena_take(uform_arena_t *arena, size_t bytes);
static inline void uform_arena_reset(uform_arena_t *arena) { arena->used = 0; }

#endif
