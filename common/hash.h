/*
 * hash.h - hashing and a string-keyed map.
 *
 * kp_hash64 is FNV-1a 64 with a final avalanche: stable across runs and
 * machines, so it may be stored in databases and plan files.
 *
 * struct kp_strmap maps NUL-terminated strings to int64 values with open
 * addressing. Keys are copied; kp_strmap_release frees them.
 */
#ifndef KP_HASH_H
#define KP_HASH_H

#include <stddef.h>
#include <stdint.h>

#define KP_HASH_SEED 0xcbf29ce484222325ULL

uint64_t kp_hash64(const void *data, size_t len, uint64_t seed);
uint64_t kp_hash_str(const char *s);
/* Combine two hashes (order matters). */
uint64_t kp_hash_mix(uint64_t h, uint64_t v);

struct kp_strmap_slot {
	char *key;
	uint64_t hash;
	int64_t value;
};

struct kp_strmap {
	struct kp_strmap_slot *slots;
	size_t cap, len;
};

void kp_strmap_init(struct kp_strmap *m);
void kp_strmap_release(struct kp_strmap *m);
/* Look up key; returns 1 and sets *value when present, else 0. */
int kp_strmap_get(const struct kp_strmap *m, const char *key, int64_t *value);
/* Insert or replace. 0 ok, KP_ENOMEM on failure. */
int kp_strmap_put(struct kp_strmap *m, const char *key, int64_t value);

#endif
