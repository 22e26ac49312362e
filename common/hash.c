/* hash.c - see hash.h. */
#include "hash.h"
#include "err.h"

#include <stdlib.h>
#include <string.h>

uint64_t kp_hash64(const void *data, size_t len, uint64_t seed)
{
	const unsigned char *p = data;
	uint64_t h = seed;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	/* avalanche (splitmix64 finaliser): FNV alone mixes high bits poorly */
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 31;
	return h;
}

uint64_t kp_hash_str(const char *s)
{
	return kp_hash64(s, strlen(s), KP_HASH_SEED);
}

uint64_t kp_hash_mix(uint64_t h, uint64_t v)
{
	/* scramble the seed first: FNV's xor-then-multiply makes (1,2) == (2,1) */
	return kp_hash64(&v, sizeof(v), h * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL);
}

void kp_strmap_init(struct kp_strmap *m)
{
	m->slots = NULL;
	m->cap = m->len = 0;
}

void kp_strmap_release(struct kp_strmap *m)
{
	size_t i;

	for (i = 0; i < m->cap; i++)
		free(m->slots[i].key);
	free(m->slots);
	kp_strmap_init(m);
}

static struct kp_strmap_slot *find(const struct kp_strmap *m, const char *key,
				   uint64_t h)
{
	size_t i = h & (m->cap - 1);

	for (;;) {
		struct kp_strmap_slot *s = &m->slots[i];

		if (!s->key || (s->hash == h && !strcmp(s->key, key)))
			return s;
		i = (i + 1) & (m->cap - 1);
	}
}

int kp_strmap_get(const struct kp_strmap *m, const char *key, int64_t *value)
{
	struct kp_strmap_slot *s;

	if (!m->cap)
		return 0;
	s = find(m, key, kp_hash_str(key));
	if (!s->key)
		return 0;
	if (value)
		*value = s->value;
	return 1;
}

static int rehash(struct kp_strmap *m, size_t cap)
{
	struct kp_strmap old = *m;
	size_t i;

	m->slots = calloc(cap, sizeof(*m->slots));
	if (!m->slots) {
		*m = old;
		return KP_ENOMEM;
	}
	m->cap = cap;
	for (i = 0; i < old.cap; i++) {
		if (old.slots[i].key)
			*find(m, old.slots[i].key, old.slots[i].hash) = old.slots[i];
	}
	free(old.slots);
	return 0;
}

int kp_strmap_put(struct kp_strmap *m, const char *key, int64_t value)
{
	struct kp_strmap_slot *s;
	uint64_t h = kp_hash_str(key);

	if ((m->len + 1) * 4 > m->cap * 3 && rehash(m, m->cap ? m->cap * 2 : 64))
		return KP_ENOMEM;
	s = find(m, key, h);
	if (!s->key) {
		s->key = strdup(key);
		if (!s->key)
			return KP_ENOMEM;
		s->hash = h;
		m->len++;
	}
	s->value = value;
	return 0;
}
