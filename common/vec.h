/*
 * vec.h - typed growable arrays.
 *
 *   KP_VEC(struct kernel) v = KP_VEC_INIT;
 *   if (kp_vec_push(&v, k)) goto out_nomem;
 *   ... v.data[i], v.len ...
 *   kp_vec_release(&v);
 *
 * kp_vec_push evaluates to 0 on success and -1 when allocation fails (the
 * vector is then unchanged).
 */
#ifndef KP_VEC_H
#define KP_VEC_H

#include <stddef.h>
#include <stdlib.h>

#define KP_VEC(T) struct { T *data; size_t len, cap; }
#define KP_VEC_INIT { NULL, 0, 0 }

/* Grow storage of elements of esz bytes to hold at least want. */
int kp__vec_reserve(void **data, size_t *cap, size_t esz, size_t want);

#define kp_vec_reserve(v, n) \
	kp__vec_reserve((void **)&(v)->data, &(v)->cap, sizeof(*(v)->data), (n))
#define kp_vec_push(v, x) \
	(((v)->len < (v)->cap || kp_vec_reserve((v), (v)->len + 1) == 0) \
		 ? ((v)->data[(v)->len++] = (x), 0) : -1)
#define kp_vec_release(v) \
	do { free((v)->data); (v)->data = NULL; (v)->len = (v)->cap = 0; } while (0)

#endif
