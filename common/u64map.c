/* u64map.c - see u64map.h. */
#include <stdlib.h>

#include "err.h"
#include "u64map.h"

static inline size_t slot_of(uint64_t k, size_t mask)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	return (size_t)k & mask;
}

void kp_u64map_init(struct kp_u64map *m)
{
	m->keys = NULL;
	m->vals = NULL;
	m->cap = m->len = 0;
	m->has_zero = 0;
	m->zero_val = 0;
}

void kp_u64map_release(struct kp_u64map *m)
{
	free(m->keys);
	free(m->vals);
	kp_u64map_init(m);
}

int kp_u64map_get(const struct kp_u64map *m, uint64_t key, uint32_t *val)
{
	size_t i, mask;

	if (key == 0) {
		if (m->has_zero)
			*val = m->zero_val;
		return m->has_zero;
	}
	if (!m->cap)
		return 0;
	mask = m->cap - 1;
	for (i = slot_of(key, mask); m->keys[i]; i = (i + 1) & mask)
		if (m->keys[i] == key) {
			*val = m->vals[i];
			return 1;
		}
	return 0;
}

static int grow(struct kp_u64map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64, mask = ncap - 1, i, j;
	uint64_t *nk = calloc(ncap, sizeof(*nk));
	uint32_t *nv = malloc(ncap * sizeof(*nv));

	if (!nk || !nv) {
		free(nk);
		free(nv);
		return KP_ENOMEM;
	}
	for (i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		for (j = slot_of(m->keys[i], mask); nk[j]; j = (j + 1) & mask)
			;
		nk[j] = m->keys[i];
		nv[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
	return 0;
}

int kp_u64map_put(struct kp_u64map *m, uint64_t key, uint32_t val)
{
	size_t i, mask;

	if (key == 0) {
		m->has_zero = 1;
		m->zero_val = val;
		return 0;
	}
	if ((m->len + 1) * 2 > m->cap && grow(m))
		return KP_ENOMEM;
	mask = m->cap - 1;
	for (i = slot_of(key, mask); m->keys[i]; i = (i + 1) & mask)
		if (m->keys[i] == key) {
			m->vals[i] = val;
			return 0;
		}
	m->keys[i] = key;
	m->vals[i] = val;
	m->len++;
	return 0;
}
