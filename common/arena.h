/*
 * arena.h - bump allocator: many small allocations freed at once.
 *
 * Analysis objects come from one arena per analysis (kp_arena_init, then
 * kp_arena_release frees everything). Allocations are 16-byte aligned and
 * zero-filled. Returns NULL on allocation failure.
 */
#ifndef KP_ARENA_H
#define KP_ARENA_H

#include <stddef.h>

struct kp_arena_block;

struct kp_arena {
	struct kp_arena_block *head;
	size_t used_bytes;   /* bytes handed out, for memory accounting */
};

void kp_arena_init(struct kp_arena *a);
void kp_arena_release(struct kp_arena *a);
void *kp_arena_alloc(struct kp_arena *a, size_t n);
/* Copy of s (NUL-terminated) in the arena. */
char *kp_arena_strdup(struct kp_arena *a, const char *s);

#endif
