/* vec.c - see vec.h. */
#include "vec.h"

#include <stdint.h>

int kp__vec_reserve(void **data, size_t *cap, size_t esz, size_t want)
{
	size_t n = *cap ? *cap : 16;
	void *p;

	if (want <= *cap)
		return 0;
	while (n < want)
		n *= 2;
	if (n > SIZE_MAX / esz)
		return -1;
	p = realloc(*data, n * esz);
	if (!p)
		return -1;
	*data = p;
	*cap = n;
	return 0;
}
