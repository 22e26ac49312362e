/*
 * u64map.h - open-addressing map from uint64 keys to uint32 values.
 *
 * For hot loops over millions of records (signature ids, chain keys): no
 * allocation per entry, linear probing, grows at 1/2 load. Key 0 is
 * allowed (stored out of band).
 */
#ifndef KP_U64MAP_H
#define KP_U64MAP_H

#include <stddef.h>
#include <stdint.h>

struct kp_u64map {
	uint64_t *keys;
	uint32_t *vals;
	size_t cap, len;     /* cap is a power of two (or 0) */
	int has_zero;
	uint32_t zero_val;
};

void kp_u64map_init(struct kp_u64map *m);
void kp_u64map_release(struct kp_u64map *m);
/* 1 and *val when present, else 0. */
int kp_u64map_get(const struct kp_u64map *m, uint64_t key, uint32_t *val);
/* Insert or replace; 0 ok, KP_ENOMEM. */
int kp_u64map_put(struct kp_u64map *m, uint64_t key, uint32_t val);

#endif
