/*
 * nccl.c - NCCL kernels by name (nccl.h): one table of the tokens NCCL's
 * kernel names are made of, read in any order.
 */
#include "nccl.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kname.h"

static const char *const coll_names[KP_NCCL__N] = {
	"nccl", "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce",
	"SendRecv", "Send", "Recv", "AllToAll",
};

const char *kp_nccl_coll_name(int coll)
{
	return coll >= 0 && coll < KP_NCCL__N ? coll_names[coll] : coll_names[0];
}

/* What a token of a name is: the field it fills and the value it gives. */
enum { F_COLL, F_REDOP, F_DTYPE, F_ALGO, F_PROTO, F_SKIP };

static const struct tok {
	const char *tok;         /* as in names, compared without case */
	int field;
	const char *val;         /* F_COLL: the enum as text is in coll */
	int coll;
} toks[] = {
	{ "AllReduce", F_COLL, NULL, KP_NCCL_ALLREDUCE },
	{ "AllGather", F_COLL, NULL, KP_NCCL_ALLGATHER },
	{ "ReduceScatter", F_COLL, NULL, KP_NCCL_REDUCESCATTER },
	{ "Broadcast", F_COLL, NULL, KP_NCCL_BROADCAST },
	{ "Reduce", F_COLL, NULL, KP_NCCL_REDUCE },
	{ "SendRecv", F_COLL, NULL, KP_NCCL_SENDRECV },
	{ "Send", F_COLL, NULL, KP_NCCL_SEND },
	{ "Recv", F_COLL, NULL, KP_NCCL_RECV },
	{ "AllToAll", F_COLL, NULL, KP_NCCL_ALLTOALL },
	{ "Generic", F_SKIP, NULL, 0 },
	{ "Sum", F_REDOP, "sum", 0 },
	{ "Prod", F_REDOP, "prod", 0 },
	{ "Min", F_REDOP, "min", 0 },
	{ "Max", F_REDOP, "max", 0 },
	{ "PreMulSum", F_REDOP, "premulsum", 0 },
	{ "SumPostDiv", F_REDOP, "sumpostdiv", 0 },
	{ "Avg", F_REDOP, "avg", 0 },
	/* NCCL >= 2.19 spells types short; older names use the C type
	 * (int8_t splits into "int8" and "t" at the underscore) */
	{ "i8", F_DTYPE, "i8", 0 }, { "int8", F_DTYPE, "i8", 0 }, { "char", F_DTYPE, "i8", 0 },
	{ "u8", F_DTYPE, "u8", 0 }, { "uint8", F_DTYPE, "u8", 0 },
	{ "i32", F_DTYPE, "i32", 0 }, { "int32", F_DTYPE, "i32", 0 }, { "int", F_DTYPE, "i32", 0 },
	{ "u32", F_DTYPE, "u32", 0 }, { "uint32", F_DTYPE, "u32", 0 },
	{ "i64", F_DTYPE, "i64", 0 }, { "int64", F_DTYPE, "i64", 0 },
	{ "u64", F_DTYPE, "u64", 0 }, { "uint64", F_DTYPE, "u64", 0 },
	{ "f16", F_DTYPE, "f16", 0 }, { "half", F_DTYPE, "f16", 0 },
	{ "f32", F_DTYPE, "f32", 0 }, { "float", F_DTYPE, "f32", 0 },
	{ "f64", F_DTYPE, "f64", 0 }, { "double", F_DTYPE, "f64", 0 },
	{ "bf16", F_DTYPE, "bf16", 0 }, { "bfloat16", F_DTYPE, "bf16", 0 },
	{ "f8e4m3", F_DTYPE, "f8e4m3", 0 }, { "e4m3", F_DTYPE, "f8e4m3", 0 },
	{ "f8e5m2", F_DTYPE, "f8e5m2", 0 }, { "e5m2", F_DTYPE, "f8e5m2", 0 },
	{ "RING", F_ALGO, "ring", 0 },
	{ "TREE", F_ALGO, "tree", 0 },
	{ "COLLNET", F_ALGO, "collnet", 0 },
	{ "NVLS", F_ALGO, "nvls", 0 },
	{ "PAT", F_ALGO, "pat", 0 },
	{ "LL", F_PROTO, "ll", 0 },
	{ "LL128", F_PROTO, "ll128", 0 },
	{ "SIMPLE", F_PROTO, "simple", 0 },
	{ "t", F_SKIP, NULL, 0 }, { "nv", F_SKIP, NULL, 0 }, { "fp8", F_SKIP, NULL, 0 },
};

/* Algorithms of two tokens: the first one's value and the second token. */
static const struct { const char *first, *second, *val; } algo2[] = {
	{ "collnet", "DIRECT", "collnet_direct" },
	{ "collnet", "CHAIN", "collnet_chain" },
	{ "nvls", "TREE", "nvls_tree" },
};

static const struct tok *tok_find(const char *s, size_t n)
{
	for (size_t i = 0; i < sizeof(toks) / sizeof(*toks); i++)
		if (strlen(toks[i].tok) == n && !strncasecmp(toks[i].tok, s, n))
			return &toks[i];
	return NULL;
}

static void tok_apply(struct kp_nccl_kernel *k, const struct tok *t)
{
	switch (t->field) {
	case F_COLL:
		if (!k->coll)
			k->coll = t->coll;
		break;
	case F_REDOP:
		k->redop = t->val;
		break;
	case F_DTYPE:
		k->dtype = t->val;
		break;
	case F_ALGO:
		k->algo = t->val;
		break;
	case F_PROTO:
		k->proto = t->val;
		break;
	}
}

/* Read the '_'-separated tokens of s[0..n). */
static void read_tokens(struct kp_nccl_kernel *k, const char *s, size_t n)
{
	const char *end = s + n;

	while (s < end) {
		const char *e = memchr(s, '_', (size_t)(end - s));
		const struct tok *t;
		size_t len;

		if (!e)
			e = end;
		len = (size_t)(e - s);
		if (len && k->algo) {
			/* COLLNET_DIRECT, NVLS_TREE: a second token completes the algorithm */
			for (size_t i = 0; i < sizeof(algo2) / sizeof(*algo2); i++)
				if (!strcmp(k->algo, algo2[i].first) && strlen(algo2[i].second) == len &&
				    !strncasecmp(s, algo2[i].second, len)) {
					k->algo = algo2[i].val;
					len = 0;
					break;
				}
		}
		if (len && (t = tok_find(s, len)))
			tok_apply(k, t);
		s = e + 1;
	}
}

/*
 * NCCL <= 2.6: "AllReduceRingLL" before "Kernel": the collective, then the
 * algorithm and protocol in camel case.
 */
static void read_camel(struct kp_nccl_kernel *k, const char *s, size_t n)
{
	static const struct { const char *p; int coll; } colls[] = {
		{ "AllReduce", KP_NCCL_ALLREDUCE }, { "AllGather", KP_NCCL_ALLGATHER },
		{ "ReduceScatter", KP_NCCL_REDUCESCATTER }, { "Broadcast", KP_NCCL_BROADCAST },
		{ "Reduce", KP_NCCL_REDUCE }, { "SendRecv", KP_NCCL_SENDRECV },
	};
	static const struct { const char *p, *val; } algos[] = {
		{ "CollNet", "collnet" }, { "Ring", "ring" }, { "Tree", "tree" },
	};
	static const struct { const char *p, *val; } protos[] = {
		{ "LL128", "ll128" }, { "LL", "ll" }, { "Simple", "simple" },
	};
	size_t i, l;

	for (i = 0; i < sizeof(colls) / sizeof(*colls); i++) {
		l = strlen(colls[i].p);
		if (l <= n && !strncmp(s, colls[i].p, l)) {
			k->coll = colls[i].coll;
			s += l;
			n -= l;
			break;
		}
	}
	for (i = 0; i < sizeof(algos) / sizeof(*algos); i++) {
		l = strlen(algos[i].p);
		if (l <= n && !strncmp(s, algos[i].p, l)) {
			k->algo = algos[i].val;
			s += l;
			n -= l;
			break;
		}
	}
	for (i = 0; i < sizeof(protos) / sizeof(*protos); i++) {
		l = strlen(protos[i].p);
		if (l == n && !strncmp(s, protos[i].p, l))
			k->proto = protos[i].val;
	}
}

int kp_nccl_parse(const char *name, struct kp_nccl_kernel *out)
{
	struct kp_nccl_kernel k = {0};
	char id[256];
	const char *p;
	size_t n;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!name || !strstr(name, "nccl"))
		return 0;
	kp_kernel_ident(name, id, sizeof(id));
	n = strlen(id);
	if (!strncmp(id, "ncclDevKernel_", 14)) {
		read_tokens(&k, id + 14, n - 14);
	} else if (!strncmp(id, "ncclKernel_", 11)) {
		read_tokens(&k, id + 11, n - 11);
	} else if (!strncmp(id, "nccl", 4) && (p = strstr(id, "Kernel")) != NULL) {
		read_camel(&k, id + 4, (size_t)(p - id - 4));
		p += 6;
		if (*p == '_')
			read_tokens(&k, p + 1, strlen(p + 1));
	} else {
		return 0;
	}
	if (out)
		*out = k;
	return 1;
}

char *kp_nccl_desc(const struct kp_nccl_kernel *k, char *buf, unsigned n)
{
	if (!n)
		return buf;
	snprintf(buf, n, "%s%s%s%s%s%s%s%s%s", kp_nccl_coll_name(k->coll),
		 k->redop ? " " : "", k->redop ? k->redop : "",
		 k->dtype ? " " : "", k->dtype ? k->dtype : "",
		 k->algo ? " " : "", k->algo ? k->algo : "",
		 k->proto ? "/" : "", k->proto ? k->proto : "");
	return buf;
}

int kp_nccl_dtype_bytes(const char *dtype)
{
	/* PyTorch's c10::ScalarType names, then NCCL's short ones */
	static const struct { const char *name; int bytes; } sizes[] = {
		{ "Float", 4 }, { "Half", 2 }, { "BFloat16", 2 }, { "Double", 8 },
		{ "Long", 8 }, { "Int", 4 }, { "Short", 2 }, { "Char", 1 }, { "Byte", 1 },
		{ "Bool", 1 }, { "ComplexHalf", 4 }, { "ComplexFloat", 8 },
		{ "ComplexDouble", 16 }, { "UInt16", 2 }, { "UInt32", 4 }, { "UInt64", 8 },
		{ "Float8_e4m3fn", 1 }, { "Float8_e5m2", 1 }, { "Float8_e4m3fnuz", 1 },
		{ "Float8_e5m2fnuz", 1 }, { "Float8_e8m0fnu", 1 },
		{ "i8", 1 }, { "u8", 1 }, { "i32", 4 }, { "u32", 4 }, { "i64", 8 },
		{ "u64", 8 }, { "f16", 2 }, { "bf16", 2 }, { "f32", 4 }, { "f64", 8 },
		{ "f8e4m3", 1 }, { "f8e5m2", 1 },
	};

	if (!dtype)
		return 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++)
		if (!strcmp(dtype, sizes[i].name))
			return sizes[i].bytes;
	return 0;
}
