/*  arena.c: the bump allocator behind every workspace. */
#include "core/arena.h"

#include <stdlib.h>

#include "core/status.h"

uform_status_t uform_arena_create(uform_arena_t *arena, size_t capacity) {
    capacity = (capacity + 63) & ~(size_t)63;
    arena->base = capacity ? aligned_alloc(64, capacity) : NULL;
    if (capacity && !arena->base)
        return uform_fail(uform_out_of_memory_k, "cannot allocate a workspace of %zu bytes", capacity);
    arena->capacity = capacity;
    arena->used = 0;
    return uform_ok_k;
}

void uform_arena_destroy(uform_arena_t *arena) {
    free(arena->base);
    arena->base = NULL;
    arena->capacity = arena->used = 0;
}

void *uform_arena_take(uform_arena_t *arena, size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    if (bytes > arena->capacity - arena->used) return NULL;
    void *result = arena->base + arena->used;
    arena->used += bytes;
    return result;
}
