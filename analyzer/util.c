/* util.c - sorting, distributions, API name classes for the analyzer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cuda_api.h"
#include "../common/hash.h"
#include "../common/kname.h"
#include "internal.h"

void kp__radix_sort(struct kp__kv *a, struct kp__kv *tmp, size_t n)
{
	struct kp__kv *src = a, *dst = tmp;
	uint64_t all_or = 0, all_and = ~0ULL;
	size_t i;

	for (i = 0; i < n; i++) {
		all_or |= a[i].key;
		all_and &= a[i].key;
	}
	for (int shift = 0; shift < 64; shift += 8) {
		size_t cnt[256] = {0}, sum = 0;

		/* skip a digit every key shares */
		if ((((all_or ^ all_and) >> shift) & 0xff) == 0)
			continue;
		for (i = 0; i < n; i++)
			cnt[(src[i].key >> shift) & 0xff]++;
		for (int d = 0; d < 256; d++) {
			size_t c = cnt[d];
			cnt[d] = sum;
			sum += c;
		}
		for (i = 0; i < n; i++)
			dst[cnt[(src[i].key >> shift) & 0xff]++] = src[i];
		struct kp__kv *t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, n * sizeof(*a));
}

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return (a > b) - (a < b);
}

int64_t kp__nth(int64_t *v, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1;

	while (hi > lo + 16) {
		/* median of three as pivot, Hoare partition */
		size_t mid = lo + (hi - lo) / 2;
		int64_t x = v[lo], y = v[mid], z = v[hi];
		int64_t p = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
		size_t i = lo, j = hi;
		for (;;) {
			while (v[i] < p)
				i++;
			while (v[j] > p)
				j--;
			if (i >= j)
				break;
			int64_t t = v[i];
			v[i] = v[j];
			v[j] = t;
			i++;
			j--;
		}
		if (k <= j)
			hi = j;
		else
			lo = j + 1;
	}
	qsort(v + lo, hi - lo + 1, sizeof(*v), cmp_i64);
	return v[k];
}

void kp__dist(int64_t *v, size_t n, struct kp_dist *d)
{
	double s = 0;
	int64_t mx = INT64_MIN;

	memset(d, 0, sizeof(*d));
	if (!n)
		return;
	for (size_t i = 0; i < n; i++) {
		s += (double)v[i];
		if (v[i] > mx)
			mx = v[i];
	}
	d->n = (int64_t)n;
	d->max = mx;
	d->mean = s / (double)n;
	/* selections from the top down: each narrows the next one's range */
	size_t k99 = (size_t)((double)(n - 1) * 0.99), k90 = (size_t)((double)(n - 1) * 0.9);
	d->p99 = kp__nth(v, n, k99);
	d->p90 = kp__nth(v, k99 + 1, k90);
	d->p50 = kp__nth(v, k90 + 1, (n - 1) / 2);
}

int64_t kp__median(int64_t *v, size_t n)
{
	if (!n)
		return 0;
	return kp__nth(v, n, (n - 1) / 2);
}

/*
 * Runtime and driver API names (and PyTorch trace names, which use the
 * runtime's) to the classes that matter for capture, from the one table of
 * CUDA calls (common/cuda_api.def) that the collector and the runtime's
 * watch use too. Stream-ordered allocation (cudaMallocAsync/cudaFreeAsync)
 * is capturable: not malloc. A synchronous memset runs on the legacy
 * stream and syncs with it: a blocking copy.
 */
int kp__classify_api(const char *n)
{
	static const uint8_t cls[KP_API__N] = {
		[KP_API_LAUNCH] = KP__C_LAUNCH, [KP_API_GRAPH_LAUNCH] = KP__C_GRAPH_LAUNCH,
		[KP_API_HOST_FUNC] = KP__C_HOST_NODE, [KP_API_STREAM_CALLBACK] = KP__C_HOST_FUNC,
		[KP_API_SYNC] = KP__C_SYNC, [KP_API_QUERY] = KP__C_POLL,
		[KP_API_EVENT_QUERY] = KP__C_POLL, [KP_API_ALLOC] = KP__C_MALLOC,
		[KP_API_FREE] = KP__C_FREE, [KP_API_REGISTER] = KP__C_REGISTER,
		[KP_API_COPY] = KP__C_COPY_SYNC, [KP_API_COPY_ASYNC] = KP__C_COPY_ASYNC,
		[KP_API_MEMSET] = KP__C_COPY_SYNC, [KP_API_MEMSET_ASYNC] = KP__C_MEMSET,
		[KP_API_EVENT_RECORD] = KP__C_EVENT_RECORD, [KP_API_EVENT_WAIT] = KP__C_WAIT_EVENT,
		[KP_API_LIMIT] = KP__C_LIMIT, [KP_API_CAPTURE_BEGIN] = KP__C_CAPTURE,
	};

	return cls[kp_cuda_api_class(n)];   /* KP__C_OTHER (0) for the rest */
}

int kp__api_blocker(int c)
{
	static const int8_t kind[] = {
		[KP__C_SYNC] = KP__B_SYNC + 1, [KP__C_COPY_SYNC] = KP__B_BLOCKING_COPY + 1,
		[KP__C_MALLOC] = KP__B_MALLOC + 1, [KP__C_FREE] = KP__B_FREE + 1,
		[KP__C_HOST_FUNC] = KP__B_HOST_CALLBACK + 1,
		[KP__C_WAIT_EVENT] = KP__B_CROSS_STREAM_EVENT + 1,
		[KP__C_REGISTER] = KP__B_HOST_REGISTER + 1, [KP__C_LIMIT] = KP__B_DEVICE_LIMIT + 1,
		[KP__C_CAPTURE] = KP__B_NESTED_CAPTURE + 1, [KP__C_POLL] = KP__B_SYNC + 1,
	};

	return c >= 0 && c < (int)sizeof(kind) ? kind[c] - 1 : -1;
}

static const char *const bk_names[KP__B__N] = {
	"sync", "blocking_copy", "pageable_copy", "malloc", "free",
	"host_callback", "cross_stream_event", "legacy_stream", "shape_key",
	"patch_slot", "host_register", "device_limit", "nested_capture", "graph_replay",
	"collective",
	"capture_path",
};

const char *kp__blocker_kind_name(int kind)
{
	return kind >= 0 && kind < KP__B__N ? bk_names[kind] : "unknown";
}

int kp__name_get(struct kp__ana *a, int64_t id, uint32_t *ix, struct kp_err *err)
{
	static const char sql[] = "SELECT value FROM StringIds WHERE id = ?1";
	sqlite3_stmt *st;
	struct kp__name nm = { .id = id, .s = "", .cls = KP__C_OTHER };
	int rc;

	if (kp_u64map_get(&a->namemap, (uint64_t)id, ix))
		return 0;
	rc = kp_db_prepare(a->db, sql, &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW) {
		const char *s = (const char *)sqlite3_column_text(st, 0);
		nm.s = kp_arena_strdup(&a->arena, s ? s : "");
	}
	sqlite3_finalize(st);
	if (!nm.s)
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	nm.cls = kp__classify_api(nm.s);
	*ix = (uint32_t)a->names.len;
	if (kp_vec_push(&a->names, nm) ||
	    kp_u64map_put(&a->namemap, (uint64_t)id, *ix))
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	return 0;
}

const char *kp__sig_desc(struct kp__ana *a, const struct kp__sig *s)
{
	char buf[160];

	if (s->kind != KP__OP_KERNEL)
		snprintf(buf, sizeof(buf), "%lld bytes", (long long)s->bytes);
	else
		snprintf(buf, sizeof(buf), "grid %d,%d,%d block %d,%d,%d smem %d",
			 s->grid[0], s->grid[1], s->grid[2], s->block[0],
			 s->block[1], s->block[2], s->smem);
	return kp_arena_strdup(&a->arena, buf);
}

uint64_t kp__kernel_sig(const char *name, const int32_t grid[3], const int32_t block[3],
			int32_t dyn_smem)
{
	uint32_t g[3] = { (uint32_t)grid[0], (uint32_t)grid[1], (uint32_t)grid[2] };
	uint32_t b[3] = { (uint32_t)block[0], (uint32_t)block[1], (uint32_t)block[2] };

	return kp_kernel_sig(name, g, b, (uint32_t)dyn_smem);
}

const struct kp__arg *kp__args_of(struct kp__ana *a, uint32_t corr, size_t *n)
{
	size_t lo = 0, hi = a->n_args;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->args[mid].corr < corr)
			lo = mid + 1;
		else
			hi = mid;
	}
	*n = 0;
	while (lo + *n < a->n_args && a->args[lo + *n].corr == corr)
		(*n)++;
	return *n ? &a->args[lo] : NULL;
}

size_t kp__lower_bound(const void *ctx, size_t n, int64_t t,
		       int64_t (*at)(const void *ctx, size_t i))
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (at(ctx, mid) < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int64_t cpu_at(const void *ctx, size_t i)
{
	const struct kp__ana *a = ctx;

	return a->ops[a->by_cpu[i]].api_start;
}

static int64_t ev_at(const void *ctx, size_t i)
{
	return ((const struct kp__ana *)ctx)->ev[i].start;
}

size_t kp__cpu_lower(const struct kp__ana *a, int64_t t)
{
	return kp__lower_bound(a, a->n_ops, t, cpu_at);
}

size_t kp__ev_lower(const struct kp__ana *a, int64_t t)
{
	return kp__lower_bound(a, a->n_ev, t, ev_at);
}

int64_t kp__nvtx_domain(struct kp__ana *a, const char *name)
{
	static const char sql[] =
		"SELECT n.domainId FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId"
		" WHERE n.runId = ?1 AND n.eventType = 75 AND n.domainId > 0"
		" AND COALESCE(n.text, s.value) = ?2 LIMIT 1";
	sqlite3_stmt *st;
	int64_t id = -1;

	if (kp_db_prepare(a->db, sql, &st, NULL))
		return -1;
	sqlite3_bind_int64(st, 1, a->run);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return id;
}
