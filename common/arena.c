/* arena.c - see arena.h. */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK_BYTES (64 * 1024)

struct kp_arena_block {
	struct kp_arena_block *next;
	size_t size, used;
	_Alignas(16) unsigned char mem[];
};

void kp_arena_init(struct kp_arena *a)
{
	a->head = NULL;
	a->used_bytes = 0;
}

void kp_arena_release(struct kp_arena *a)
{
	struct kp_arena_block *b = a->head, *next;

	for (; b; b = next) {
		next = b->next;
		free(b);
	}
	kp_arena_init(a);
}

void *kp_arena_alloc(struct kp_arena *a, size_t n)
{
	struct kp_arena_block *b = a->head;
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (!b || b->size - b->used < n) {
		size_t size = n > BLOCK_BYTES ? n : BLOCK_BYTES;

		b = malloc(sizeof(*b) + size);
		if (!b)
			return NULL;
		b->size = size;
		b->used = 0;
		b->next = a->head;
		a->head = b;
	}
	p = b->mem + b->used;
	b->used += n;
	a->used_bytes += n;
	memset(p, 0, n);
	return p;
}

char *kp_arena_strdup(struct kp_arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = kp_arena_alloc(a, n);

	if (p)
		memcpy(p, s, n);
	return p;
}
