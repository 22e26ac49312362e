/* cuda_api.c - see cuda_api.h; the facts are in cuda_api.def. */
#include "cuda_api.h"

#include <string.h>

#define RT 0
#define DRV 1

static const struct kp_cuda_api table[] = {
#define KP_CUDA_API(name, domain, cls, record, sync) \
	{ #name, domain, KP_API_##cls, record, KP_API_SYNC_##sync },
#include "cuda_api.def"
};

static const struct {
	const char *name;
	uint8_t breaks;
} classes[KP_API__N] = {
#define KP_CUDA_API_CLASS(cls, breaks, what) [KP_API_##cls] = { #cls, breaks },
#include "cuda_api.def"
};

/* length of name without its trailing _v<N>, _ptsz and _ptds suffixes */
static size_t base_len(const char *name, size_t n)
{
	for (;;) {
		size_t d = 0;

		if (n > 5 && (!memcmp(name + n - 5, "_ptsz", 5) || !memcmp(name + n - 5, "_ptds", 5))) {
			n -= 5;
			continue;
		}
		while (d < n && name[n - 1 - d] >= '0' && name[n - 1 - d] <= '9')
			d++;
		if (d && n > d + 2 && name[n - d - 1] == 'v' && name[n - d - 2] == '_') {
			n -= d + 2;
			continue;
		}
		return n;
	}
}

const struct kp_cuda_api *kp_cuda_api_find(const char *name)
{
	size_t i, n;

	if (!name)
		return NULL;
	while (*name == '_')
		name++;
	n = base_len(name, strlen(name));
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (!strncmp(table[i].name, name, n) && !table[i].name[n])
			return &table[i];
	}
	return NULL;
}

int kp_cuda_api_class(const char *name)
{
	const struct kp_cuda_api *a = kp_cuda_api_find(name);

	return a ? a->cls : KP_API_OTHER;
}

int kp_cuda_api_breaks(int cls)
{
	return cls >= 0 && cls < KP_API__N && classes[cls].breaks;
}

const char *kp_cuda_api_class_name(int cls)
{
	return cls >= 0 && cls < KP_API__N ? classes[cls].name : "?";
}

const struct kp_cuda_api *kp_cuda_api_table(size_t *n)
{
	*n = sizeof(table) / sizeof(table[0]);
	return table;
}
