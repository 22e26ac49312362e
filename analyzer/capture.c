/*
 * capture.c - capturability of each region, its split into capturable
 * parts, shape keys, patch slots, and the cost model's prediction.
 *
 * Blocking API calls inside an occurrence (sync, query, blocking or
 * pageable copy, synchronous memset, malloc/free, stream callback, a wait
 * on an event recorded outside the region) are fatal. In a runtime region
 * (libkplanrt's own NVTX domain: the application enters it whole) every one
 * is; elsewhere one between two launches splits the region there, and one
 * before the first or after the last launch only bounds the capture
 * (fatal = 0). Stream membership is checked op by op: an op must be on the
 * capture stream or on a stream forked from it and joined back within the
 * occurrence; work on the legacy default stream in a region that runs
 * elsewhere is fatal. Blockers seen only in the first few occurrences
 * become fatal = 2 (warm-up only) when later ones are clean: the planner
 * sets the warm-up to cover them. Shape keys and patch slots (pointers and
 * scalars whose values change) are advisories (fatal = 0): the runtime
 * handles them (one graph per shape key, in-place patching of bound
 * buffers and values).
 *
 * Region edges: outside runtime regions, the copies a graph cannot hold
 * (pageable or synchronous host copies) that open or close an occurrence,
 * like a step's loss.item() (a DtoH copy and a stream sync), are what a
 * user leaves outside the capture. They are taken off the occurrence's ops
 * (o->lead, o->trail), so nodes, splits and the graph model see only the
 * capturable body, and the calls at the edges become fatal = 0 rows that
 * say what was left outside and what it costs; that cost (o->edge_ns) is
 * added to the predicted graph time. In traces with PyTorch CPU ops and
 * Python frames each blocking call is named by the op and the user's line
 * it came from.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "internal.h"

#define MAX_BLK_ROWS 2000   /* blocker rows kept per region */

/* Where a blocking call came from, in the user's terms (all may be NULL). */
struct src {
	const char *op;          /* innermost CPU op around the call */
	const char *outer;       /* outermost one, when it differs */
	const char *frame;       /* innermost user Python frame, "FILE:LINE" */
	const char *chain[16];   /* the CPU ops around the call, innermost first */
	size_t n_chain;
	int lib_frame;           /* innermost Python frame: 1 library code, 0 the user's, -1 unknown */
};

static int add_blk_src(struct kp__ana *a, struct kp__region *r, int kind, int fatal,
		       const char *api, int64_t start, int64_t corr, int occ, int pos,
		       const char *detail, const struct src *sr, int64_t cost_ns)
{
	struct kp__blk b = {
		.kind = (uint8_t)kind, .fatal = (uint8_t)fatal, .api = api,
		.start = start, .corr = corr, .occ = occ, .pos = pos,
		.detail = detail ? kp_arena_strdup(&a->arena, detail) : NULL,
		.cpu_op = sr ? sr->op : NULL, .py_frame = sr ? sr->frame : NULL,
		.cost_ns = cost_ns,
	};
	if (r->blk.len >= MAX_BLK_ROWS)
		return 0;
	return kp_vec_push(&r->blk, b) ? KP_ENOMEM : 0;
}

static int add_blk(struct kp__ana *a, struct kp__region *r, int kind, int fatal,
		   const char *api, int64_t start, int64_t corr, int occ, int pos,
		   const char *detail)
{
	return add_blk_src(a, r, kind, fatal, api, start, corr, occ, pos, detail, NULL, -1);
}

/* ---- blockers in the user's terms: the CPU op and Python frame around a call ---- */

/* A cpu_op or python_function range of an imported PyTorch trace. */
struct srange {
	int64_t tid, start, end;
	const char *name;        /* arena */
	int32_t parent;          /* innermost range on the thread enclosing it; -1 none */
};

struct srcdom {
	struct srange *r;        /* by (tid, start, longest first) */
	size_t n;
};

/*
 * The ranges of both domains, loaded on the first lookup: a run without
 * them (CUPTI recordings, nsys exports) costs one query.
 */
struct kp__srcix {
	int loaded;
	struct srcdom op, py;
	sqlite3_stmt *by_corr, *by_start;
};

static int cmp_srange(const void *x, const void *y)
{
	const struct srange *a = x, *b = y;

	if (a->tid != b->tid)
		return (a->tid > b->tid) - (a->tid < b->tid);
	if (a->start != b->start)
		return (a->start > b->start) - (a->start < b->start);
	return (a->end < b->end) - (a->end > b->end);
}

/*
 * Load one domain's ranges and link each to its innermost enclosing range
 * on the same thread (a stack over the ranges in start order): then the
 * ranges around a time t are the last one starting at or before t and its
 * parents, those that end after t. Names are interned (a trace repeats
 * a few hundred op names millions of times).
 */
static int srcdom_load(struct kp__ana *a, int64_t dom, struct srcdom *d)
{
	static const char sql[] =
		"SELECT n.globalTid, n.start, n.end, COALESCE(n.text, s.value)"
		" FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId"
		" WHERE n.runId = ?1 AND n.domainId = ?2 AND n.eventType IN (59, 60)"
		" AND n.end IS NOT NULL AND n.end >= n.start";
	KP_VEC(struct srange) v = KP_VEC_INIT;
	struct kp_strmap names;
	int32_t *stack = NULL;
	sqlite3_stmt *st;
	size_t sp = 0;
	int rc = 0;

	if (dom <= 0)
		return 0;
	if (kp_db_prepare(a->db, sql, &st, NULL))
		return 0;   /* no names: the blockers stay as they are */
	kp_strmap_init(&names);
	sqlite3_bind_int64(st, 1, a->run);
	sqlite3_bind_int64(st, 2, dom);
	while (!rc && sqlite3_step(st) == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(st, 3);
		struct srange x = {
			.tid = sqlite3_column_int64(st, 0), .start = sqlite3_column_int64(st, 1),
			.end = sqlite3_column_int64(st, 2), .parent = -1,
		};
		int64_t p;

		if (!t || !*t)
			continue;
		if (kp_strmap_get(&names, t, &p)) {
			x.name = (const char *)(intptr_t)p;
		} else if (!(x.name = kp_arena_strdup(&a->arena, t)) ||
			   kp_strmap_put(&names, t, (int64_t)(intptr_t)x.name)) {
			rc = KP_ENOMEM;
			break;
		}
		if (kp_vec_push(&v, x))
			rc = KP_ENOMEM;
	}
	sqlite3_finalize(st);
	kp_strmap_release(&names);
	if (!rc && v.len) {
		qsort(v.data, v.len, sizeof(*v.data), cmp_srange);
		stack = malloc(v.len * sizeof(*stack));
		if (!stack)
			rc = KP_ENOMEM;
	}
	for (size_t i = 0; !rc && i < v.len; i++) {
		struct srange *x = &v.data[i];

		if (i && x->tid != v.data[i - 1].tid)
			sp = 0;
		while (sp && v.data[stack[sp - 1]].end <= x->start)
			sp--;
		x->parent = sp ? stack[sp - 1] : -1;
		stack[sp++] = (int32_t)i;
	}
	free(stack);
	if (rc) {
		kp_vec_release(&v);
		return rc;
	}
	d->r = v.data;
	d->n = v.len;
	return 0;
}

static void srcix_release(struct kp__srcix *sx)
{
	free(sx->op.r);
	free(sx->py.r);
	sqlite3_finalize(sx->by_corr);
	sqlite3_finalize(sx->by_start);
	memset(sx, 0, sizeof(*sx));
}

static int srcix_load(struct kp__ana *a, struct kp__srcix *sx)
{
	static const char sql_c[] = "SELECT globalTid, start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME"
		" WHERE runId = ?1 AND correlationId = ?2";
	static const char sql_s[] = "SELECT globalTid, start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME"
		" WHERE runId = ?1 AND start = ?2 LIMIT 1";
	int rc;

	sx->loaded = 1;
	if (!kp_db_has_table(a->db, "NVTX_EVENTS"))
		return 0;
	/* the Chrome importer's domains (importers/import.h KP_IMPORT_*_DOMAIN) */
	rc = srcdom_load(a, kp__nvtx_domain(a, "pytorch.cpu_op"), &sx->op);
	if (!rc)
		rc = srcdom_load(a, kp__nvtx_domain(a, "pytorch.python"), &sx->py);
	if (rc || (!sx->op.n && !sx->py.n))
		return rc;
	if (kp_db_prepare(a->db, sql_c, &sx->by_corr, NULL) ||
	    kp_db_prepare(a->db, sql_s, &sx->by_start, NULL)) {
		free(sx->op.r);
		free(sx->py.r);
		sx->op.n = sx->py.n = 0;
		sx->op.r = sx->py.r = NULL;
	}
	return 0;
}

/* Innermost range of d on thread tid around [t0, t1], or -1. */
static int32_t enclosing(const struct srcdom *d, int64_t tid, int64_t t0, int64_t t1)
{
	size_t lo = 0, hi = d->n;
	int32_t i;

	while (lo < hi) {   /* first range after (tid, t0) */
		size_t mid = lo + (hi - lo) / 2;
		const struct srange *x = &d->r[mid];

		if (x->tid < tid || (x->tid == tid && x->start <= t0))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || d->r[lo - 1].tid != tid)
		return -1;
	for (i = (int32_t)lo - 1; i >= 0 && d->r[i].end < t1; i = d->r[i].parent)
		;
	return i;
}

/*
 * Kineto names a Python frame "FILE(LINE): FUNCTION". A user frame is one
 * whose FILE is not the interpreter's, the standard library's or an
 * installed package's (torch/... is how the profiler writes torch's own
 * files). OUT: the FILE:LINE text (arena), shortened to the last two path
 * components when long. NULL when name is not a user frame.
 */
static const char *user_frame(struct kp__ana *a, const char *name)
{
	static const char *const lib[] = {
		"site-packages/", "dist-packages/", "/lib/python", "/lib64/python", "/torch/",
	};
	static const char *const stdlib[] = {
		"contextlib.py", "functools.py", "threading.py", "runpy.py", "typing.py",
		"weakref.py", "abc.py", "_contextlib.py",
	};
	const char *paren, *close, *file = name, *base;
	char buf[160];
	size_t flen;
	long line;

	close = strstr(name, "): ");
	if (!close || *name == '<' || !strncmp(name, "torch/", 6))
		return NULL;
	for (paren = close; paren > name && *paren != '('; paren--)
		;
	if (paren == name || paren + 1 == close)
		return NULL;
	for (const char *c = paren + 1; c < close; c++)
		if (*c < '0' || *c > '9')
			return NULL;
	line = strtol(paren + 1, NULL, 10);
	flen = (size_t)(paren - name);
	for (size_t i = 0; i < sizeof(lib) / sizeof(*lib); i++) {
		const char *m = strstr(name, lib[i]);
		if (m && m < paren)
			return NULL;
	}
	base = file;
	for (const char *c = file; c < paren; c++)
		if (*c == '/')
			base = c + 1;
	for (size_t i = 0; i < sizeof(stdlib) / sizeof(*stdlib); i++)
		if ((size_t)(paren - base) == strlen(stdlib[i]) &&
		    !strncmp(base, stdlib[i], (size_t)(paren - base)))
			return NULL;
	if (flen > 48) {   /* ".../dir/file.py" */
		int slashes = 0;
		for (file = paren; file > name && slashes < 2; file--)
			slashes += file[-1] == '/';
		if (slashes == 2)
			file++;
		snprintf(buf, sizeof(buf), ".../%.*s:%ld", (int)(paren - file), file, line);
	} else {
		snprintf(buf, sizeof(buf), "%.*s:%ld", (int)flen, file, line);
	}
	return kp_arena_strdup(&a->arena, buf);
}

/*
 * The API call with correlation id corr (0: the one that started at
 * *start): its thread *tid, its start (when found by id) and end *t1, never
 * before its start. A launch has a runtime and a driver row with one id:
 * the call at *start wins. 0 when no call is found.
 */
static int launch_call(struct kp__ana *a, struct kp__srcix *sx, uint32_t corr, int64_t *start,
		       int64_t *tid, int64_t *t1)
{
	sqlite3_stmt *st = corr ? sx->by_corr : sx->by_start;
	const int64_t want = *start;
	int found = 0;

	sqlite3_bind_int64(st, 1, a->run);
	sqlite3_bind_int64(st, 2, corr ? (int64_t)corr : want);
	while (sqlite3_step(st) == SQLITE_ROW && found < 2) {
		int at = sqlite3_column_int64(st, 1) == want;

		if (!found || at) {
			*tid = sqlite3_column_int64(st, 0);
			if (corr)
				*start = sqlite3_column_int64(st, 1);
			*t1 = sqlite3_column_int64(st, 2);
			found = at ? 2 : 1;
		}
	}
	sqlite3_reset(st);
	if (found && *t1 < *start)
		*t1 = *start;
	return found;
}

/*
 * The CPU op and Python frame around the API call with correlation id corr
 * that started at start (its thread and end come from the runtime table).
 * *out is cleared first; unknown parts stay NULL.
 */
static int name_source(struct kp__ana *a, struct kp__srcix *sx, uint32_t corr, int64_t start,
		       struct src *out)
{
	int64_t tid = 0, t1 = start, at = start;
	int rc = 0;
	int32_t i;

	memset(out, 0, sizeof(*out));
	out->lib_frame = -1;
	if (!sx)
		return 0;
	if (!sx->loaded && (rc = srcix_load(a, sx)))
		return rc;
	if (!sx->op.n && !sx->py.n)
		return 0;
	/* the call's own start stays the caller's (at: a copy launch_call may move) */
	if (!launch_call(a, sx, corr, &at, &tid, &t1))
		return 0;
	if (t1 < start)
		t1 = start;
	if ((i = enclosing(&sx->op, tid, start, t1)) >= 0) {
		out->op = out->outer = sx->op.r[i].name;
		out->chain[out->n_chain++] = out->op;
		for (int32_t p = sx->op.r[i].parent; p >= 0; p = sx->op.r[p].parent)
			if (sx->op.r[p].end >= t1) {
				out->outer = sx->op.r[p].name;
				if (out->n_chain < sizeof(out->chain) / sizeof(*out->chain))
					out->chain[out->n_chain++] = out->outer;
			}
		if (out->outer == out->op)
			out->outer = NULL;
	}
	for (i = enclosing(&sx->py, tid, start, t1); i >= 0 && !out->frame;
	     i = sx->py.r[i].parent) {
		const char *name = sx->py.r[i].name;

		if (sx->py.r[i].end < t1)
			continue;
		out->frame = user_frame(a, name);
		/* the innermost frame of a file (not a builtin's) says whose code it is */
		if (out->lib_frame < 0 && *name != '<' && strstr(name, "): "))
			out->lib_frame = out->frame == NULL;
	}
	return 0;
}

void kp__src_free(struct kp__ana *a)
{
	if (a->src)
		srcix_release(a->src);
	free(a->src);
	a->src = NULL;
}

int kp__cpu_op_of(struct kp__ana *a, uint32_t corr, int64_t start, struct kp__cpu_op *out)
{
	struct kp__srcix *sx;
	int64_t tid = 0, t1 = start;
	int rc;
	int32_t i;

	memset(out, 0, sizeof(*out));
	if (!a->src && !(a->src = calloc(1, sizeof(*a->src))))
		return KP_ENOMEM;
	sx = a->src;
	if (!sx->loaded && (rc = srcix_load(a, sx)))
		return rc;
	if (!sx->op.n || !corr)
		return 0;
	if (!launch_call(a, sx, corr, &start, &tid, &t1))
		return 0;
	if ((i = enclosing(&sx->op, tid, start, t1)) >= 0) {
		out->tid = sx->op.r[i].tid;
		out->start = sx->op.r[i].start;
		out->name = sx->op.r[i].name;
		if ((i = sx->op.r[i].parent) >= 0) {
			out->outer_tid = sx->op.r[i].tid;
			out->outer_start = sx->op.r[i].start;
			out->outer_name = sx->op.r[i].name;
		}
	}
	return 0;
}

/* "aten::nonzero (train.py:42)", "aten::x (from aten::y, f.py:3)"; "" when unknown. */
static void src_text(const struct src *sr, char *buf, size_t len)
{
	if (sr->op && (sr->outer || sr->frame))
		snprintf(buf, len, "in %.80s (%s%.80s%s%.80s)", sr->op, sr->outer ? "from " : "",
			 sr->outer ? sr->outer : "", sr->outer && sr->frame ? ", " : "",
			 sr->frame ? sr->frame : "");
	else if (sr->op)
		snprintf(buf, len, "in %.80s", sr->op);
	else if (sr->frame)
		snprintf(buf, len, "at %.80s", sr->frame);
	else
		buf[0] = 0;
}

struct occ_ctx { const struct kp__ana *a; const struct kp__occ *o; };

static int64_t occ_at(const void *ctx, size_t i)
{
	const struct occ_ctx *c = ctx;

	return c->a->ops[c->o->ops[i]].api_start;
}

/* Number of the occurrence's ops whose launch call began before t. */
static uint32_t pos_in(struct kp__ana *a, const struct kp__occ *o, int64_t t)
{
	struct occ_ctx c = { a, o };

	return (uint32_t)kp__lower_bound(&c, o->n, t, occ_at);
}

static int64_t time_at(const void *ctx, size_t i)
{
	return ((const int64_t *)ctx)[i];
}

/* Index of the first of the n ascending times v[] at or after t. */
static size_t first_at(const int64_t *v, size_t n, int64_t t)
{
	return kp__lower_bound(v, n, t, time_at);
}

/* 1 when a cudaEventRecord call started in [t0, t1). */
static int recorded_inside(struct kp__ana *a, int64_t t0, int64_t t1)
{
	size_t lo = first_at(a->rec, a->n_rec, t0);

	return lo < a->n_rec && a->rec[lo] < t1;
}

static const char *op_name(struct kp__ana *a, const struct kp__op *op)
{
	return a->sigs.data[op->sig].name;
}

static int64_t sid(const struct kp__ana *a, const struct kp__op *op)
{
	return a->streams.data[op->stream].stream_id;
}

static const char *api_of(const struct kp__ana *a, const struct kp__op *op)
{
	return op->api_name != UINT32_MAX ? a->names.data[op->api_name].s : NULL;
}

/* The fix, in one sentence, for a blocker kind. */
static const char *fix_of(int kind)
{
	switch (kind) {
	case KP__B_SYNC:
		return "move the synchronisation or query out of the region";
	case KP__B_BLOCKING_COPY:
		return "use the Async variant on the region's stream (pinned host memory)";
	case KP__B_PAGEABLE_COPY:
		return "pin the host buffer (cudaMallocHost or cudaHostRegister)";
	case KP__B_MALLOC:
		return "allocate once before the region, or cudaMallocAsync on the region's stream";
	case KP__B_FREE:
		return "free after the region, or cudaFreeAsync on the region's stream";
	case KP__B_HOST_CALLBACK:
		return "use cudaLaunchHostFunc, which captures";
	case KP__B_CROSS_STREAM_EVENT:
		return "wait only on events recorded inside the region";
	case KP__B_HOST_REGISTER:
		return "register host memory before the region";
	case KP__B_DEVICE_LIMIT:
		return "set device limits before the region";
	case KP__B_NESTED_CAPTURE:
		return "capture outside the region: a region cannot hold a capture of its own";
	default:
		return "move it out of the region";
	}
}

/* ---- region edges: what a user leaves outside the capture ---- */

/*
 * A copy a graph cannot hold: from or to pageable host memory, or made by
 * a synchronous cudaMemcpy. At an occurrence's start or end it is the
 * region's edge (the step's loss.item(), a logits copy to the host).
 */
static int edge_op(const struct kp__ana *a, const struct kp__op *op)
{
	if (op->kind != KP__OP_MEMCPY || (op->flags & KP__F_GRAPH))
		return 0;
	return (op->flags & KP__F_PAGEABLE) ||
		(op->api_name != UINT32_MAX && a->names.data[op->api_name].cls == KP__C_COPY_SYNC);
}

/* "cudaMemcpyAsync DtoH (pageable)": the call, and for a copy its direction. */
static void call_text(const struct kp__ana *a, const char *api, const struct kp__op *op,
		      char *buf, size_t len)
{
	static const char *const dir[] = {
		[1] = "HtoD", [2] = "DtoH", [8] = "DtoD", [9] = "HtoH", [10] = "PtoP",
	};
	int64_t k = op && op->kind == KP__OP_MEMCPY ? -a->sigs.data[op->sig].name_id - 1 : 0;
	const char *d = k > 0 && k < (int64_t)(sizeof(dir) / sizeof(*dir)) ? dir[k] : NULL;

	snprintf(buf, len, "%s%s%s%s", api, d ? " " : "", d ? d : "",
		 op && (op->flags & KP__F_PAGEABLE) ? " (pageable)" : "");
}

/*
 * The op of occurrence o (edges included) whose launch call, with
 * correlation id corr, started at start (a copy's blocker row carries its
 * call's start), or NULL. OUT: *edge (may be NULL): 1 when it is one of the
 * edge ops left outside.
 */
static const struct kp__op *occ_op(const struct kp__ana *a, const struct kp__occ *o,
				   uint32_t corr, int64_t start, int *edge)
{
	const uint32_t *ops = o->ops - o->lead;
	uint32_t n = o->lead + o->n + o->trail, lo = 0, hi = n;

	if (edge)
		*edge = 0;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (a->ops[ops[mid]].api_start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; corr && lo < n && a->ops[ops[lo]].api_start == start; lo++) {
		if (a->ops[ops[lo]].corr != corr)
			continue;
		if (edge)
			*edge = lo < o->lead || lo >= o->lead + o->n;
		return &a->ops[ops[lo]];
	}
	return NULL;
}

#define EDGE_LOOKBACK 1024   /* launches scanned back for the GPU work an edge waits on */

/*
 * The eager cost of an edge call or copy running from s to e: the time
 * past the later of its start, the end of the GPU work launched before it
 * (which it waits for, and which the graph's own time already counts) and
 * floor (the end of the edge items before it, so overlapping ones count
 * once). Ops launched before s are scanned back EDGE_LOOKBACK launches.
 */
static int64_t edge_cost(const struct kp__ana *a, int64_t s, int64_t e, int64_t floor)
{
	size_t lo = kp__cpu_lower(a, s);
	int64_t b = s > floor ? s : floor;

	for (size_t i = lo, k = 0; i > 0 && k < EDGE_LOOKBACK; i--, k++)
		if (a->ops[a->by_cpu[i - 1]].end > b)
			b = a->ops[a->by_cpu[i - 1]].end;
	return e > b ? e - b : 0;
}

/* An edge op's span: its launch call's start to the later of the call's and the copy's end. */
static void op_span(const struct kp__op *op, int64_t *s, int64_t *e)
{
	*s = op->has_api ? op->api_start : op->start;
	*e = op->end;
	if (op->has_api && op->api_start + op->api_dur > *e)
		*e = op->api_start + op->api_dur;
}

struct span { int64_t s, e; };

static int cmp_span(const void *x, const void *y)
{
	const struct span *a = x, *b = y;
	return (a->s > b->s) - (a->s < b->s);
}

static uint32_t pos_in(struct kp__ana *a, const struct kp__occ *o, int64_t t);

/*
 * Take the edge copies off each occurrence's ops (at least one op stays)
 * and sum what the edges cost in that occurrence: the copies and the
 * blocking calls before the body's first launch or after its last, each
 * counted by edge_cost. The region's edge_ns is the median.
 */
static int region_edges(struct kp__ana *a, struct kp__region *r)
{
	KP_VEC(struct span) sp = KP_VEC_INIT;
	int64_t *v = malloc((r->n_occ ? r->n_occ : 1) * sizeof(*v));
	int rc = 0;

	if (!v)
		return KP_ENOMEM;
	for (uint32_t k = 0; k < r->n_occ && !rc; k++) {
		struct kp__occ *o = &r->occ[k];
		uint32_t lead = 0, trail = 0;
		int64_t floor = INT64_MIN, sum = 0;

		while (lead < o->n && edge_op(a, &a->ops[o->ops[lead]]))
			lead++;
		while (trail < o->n - lead && edge_op(a, &a->ops[o->ops[o->n - 1 - trail]]))
			trail++;
		if (lead + trail < o->n) {
			o->ops += lead;
			o->n -= lead + trail;
			o->lead = lead;
			o->trail = trail;
		}
		sp.len = 0;
		for (uint32_t i = 0; i < o->lead + o->trail && !rc; i++) {
			const struct kp__op *op = &a->ops[i < o->lead ? o->ops[(int32_t)i - (int32_t)o->lead]
							      : o->ops[o->n + i - o->lead]];
			struct span x;

			op_span(op, &x.s, &x.e);
			rc = kp_vec_push(&sp, x) ? KP_ENOMEM : 0;
		}
		for (size_t e = kp__ev_lower(a, o->t0); e < a->n_ev && a->ev[e].start <= o->t1 && !rc; e++) {
			const struct kp__ev *ev = &a->ev[e];
			uint32_t pos = pos_in(a, o, ev->start);
			struct span x = { ev->start, ev->end };
			int own = 0;

			if (pos > 0 && pos < o->n)
				continue;   /* inside the body */
			if (occ_op(a, o, ev->corr, ev->start, &own) && own)
				continue;   /* an edge copy's own call: counted with the copy */
			rc = kp_vec_push(&sp, x) ? KP_ENOMEM : 0;
		}
		if (sp.len > 1)
			qsort(sp.data, sp.len, sizeof(*sp.data), cmp_span);
		for (size_t i = 0; i < sp.len; i++) {
			sum += edge_cost(a, sp.data[i].s, sp.data[i].e, floor);
			if (sp.data[i].e > floor)
				floor = sp.data[i].e;
		}
		o->edge_ns = sum;
		v[k] = sum;
	}
	if (!rc && r->n_occ) {
		r->nodes = r->occ[r->tmpl].n;
		r->edge_ns = kp__median(v, r->n_occ);
	}
	kp_vec_release(&sp);
	free(v);
	return rc;
}

/*
 * Blocking API calls. In a runtime region every one is fatal: the runtime
 * captures the whole body, so even one before the first launch would be
 * inside the capture. Elsewhere one before the body's first launch or
 * after its last is the region's edge: left outside the graph, with its
 * cost (fatal = 0). Each is named by the CPU op and Python frame around
 * it when the trace has them.
 */
static int event_blockers(struct kp__ana *a, struct kp__region *r, struct kp__srcix *sx)
{
	char d[1536], who[512], call[160], from[320];
	int rc = 0;

	for (uint32_t k = 0; k < r->n_occ && !rc; k++) {
		const struct kp__occ *o = &r->occ[k];
		for (size_t e = kp__ev_lower(a, o->t0); e < a->n_ev && a->ev[e].start <= o->t1 && !rc; e++) {
			const struct kp__ev *ev = &a->ev[e];
			uint32_t pos = pos_in(a, o, ev->start);
			int edge = pos == 0 || pos >= o->n;
			const char *api = ev->name != UINT32_MAX ? a->names.data[ev->name].s : "memcpy";
			int own = 0;
			const struct kp__op *op = ev->kind == KP__B_PAGEABLE_COPY ||
				ev->kind == KP__B_BLOCKING_COPY ?
				occ_op(a, o, ev->corr, ev->start, &own) : NULL;
			int64_t cost = -1;
			struct src sr;

			if (r->blk.len >= MAX_BLK_ROWS)
				return 0;
			int fork_join = ev->kind == KP__B_CROSS_STREAM_EVENT &&
				recorded_inside(a, o->t0, ev->start);
			if (r->rt_kind)
				edge = 0;
			if ((rc = name_source(a, sx, ev->corr, ev->start, &sr)))
				break;
			src_text(&sr, from, sizeof(from));
			call_text(a, api, op, call, sizeof(call));
			snprintf(who, sizeof(who), "%s%s%s", call, *from ? " " : "", from);
			const char *why = NULL, *path_op = edge || fork_join ? NULL :
				kp__path_op(ev->kind, sr.chain, sr.n_chain, sr.lib_frame, &why);
			if (path_op) {
				/* the captured path skips it: no split, a wider interval */
				snprintf(d, sizeof(d), "path differs under capture (%s): %s at node %u: "
					 "%s; the graph prediction keeps the region whole without it, and "
					 "its interval says how far the other path may take it", path_op,
					 who, pos, why);
				r->path_points += k == r->tmpl;
				rc = add_blk_src(a, r, KP__B_CAPTURE_PATH, 0, api, ev->start, ev->corr,
						 (int)k, (int)pos, d, &sr, -1);
				continue;
			}
			if (edge) {
				int64_t s0 = ev->start, s1 = ev->end;

				if (own)
					op_span(op, &s0, &s1);
				cost = edge_cost(a, s0, s1, INT64_MIN);
				snprintf(d, sizeof(d), "left outside the graph (%s the body): %s, %.1f us in "
					 "this occurrence; the region's edges cost %.1f us per occurrence, "
					 "counted in its graph time", pos == 0 ? "before" : "after", who,
					 (double)cost / 1e3, (double)r->edge_ns / 1e3);
			} else if (!fork_join && !o->n)
				snprintf(d, sizeof(d), "%s cannot be captured: %s", who,
					 fix_of(ev->kind));
			else if (!fork_join && pos >= o->n)
				snprintf(d, sizeof(d), "after node %u (%.80s): %s cannot be captured: %s",
					 o->n - 1, op_name(a, &a->ops[o->ops[o->n - 1]]), who,
					 fix_of(ev->kind));
			else if (!fork_join && pos == 0)
				snprintf(d, sizeof(d), "before node 0 (%.80s): %s cannot be captured: %s",
					 op_name(a, &a->ops[o->ops[0]]), who, fix_of(ev->kind));
			else if (!fork_join && r->rt_kind)
				snprintf(d, sizeof(d), "between node %u (%.80s) and node %u (%.80s): %s "
					 "cannot be captured: %s", pos - 1,
					 op_name(a, &a->ops[o->ops[pos - 1]]), pos,
					 op_name(a, &a->ops[o->ops[pos]]), who, fix_of(ev->kind));
			else if (fork_join)
				snprintf(d, sizeof(d), "%s%sbefore node %u: waits on an event recorded "
					 "inside the region (fork/join): capture both streams",
					 *from ? who : "", *from ? ": " : "", pos);
			else
				snprintf(d, sizeof(d), "%s%sbetween node %u (%.80s) and node %u (%.80s): "
					 "splits the region", *from ? who : "", *from ? ": " : "",
					 pos - 1, op_name(a, &a->ops[o->ops[pos - 1]]), pos,
					 op_name(a, &a->ops[o->ops[pos]]));
			const char *fix = kp__advice(a, ev->kind, ev->start, sr.op, sr.outer);
			size_t at = strlen(d);
			if (fix && !fork_join && at < sizeof(d))
				snprintf(d + at, sizeof(d) - at, "; %s", fix);
			int fatal = !edge && !fork_join;
			rc = add_blk_src(a, r, ev->kind, fatal, api, ev->start, ev->corr, (int)k,
					 (int)pos, d, &sr, cost);
		}
	}
	return rc;
}

static int is_legacy(const struct kp__ana *a, int64_t stream_id)
{
	return a->o.legacy_stream >= 0 && stream_id == a->o.legacy_stream;
}

static int waits_on(const struct kp__ana *a, const struct kp__occ *o, int64_t stream_id,
		    int64_t t0, int64_t t1);

/*
 * The stream a region is captured on: the stream of its template's first op
 * that was not forked (no event wait on that stream before its first op in
 * the occurrence); without wait streams in the trace, where most of its ops
 * run.
 */
static uint32_t capture_stream(const struct kp__ana *a, const struct kp__region *r)
{
	const struct kp__occ *o = &r->occ[r->tmpl];
	uint32_t best = o->n ? a->ops[o->ops[0]].stream : 0, best_n = 0;

	for (uint32_t i = 0; a->wait_streams && i < o->n; i++) {
		const struct kp__op *op = &a->ops[o->ops[i]];
		int seen = 0;

		for (uint32_t j = 0; j < i && !seen; j++)
			seen = a->ops[o->ops[j]].stream == op->stream;
		if (!seen && !waits_on(a, o, sid(a, op), o->t0, op->api_start))
			return op->stream;
	}
	for (uint32_t i = 0; i < o->n && i < 4096; i++) {
		uint32_t s = a->ops[o->ops[i]].stream, n = 0;

		if (s == best && best_n)
			continue;
		for (uint32_t j = 0; j < o->n; j++)
			n += a->ops[o->ops[j]].stream == s;
		if (n > best_n) {
			best = s;
			best_n = n;
		}
	}
	return best;
}

/* 1 when occurrence o has an event wait on stream_id in [t0, t1]. */
static int waits_on(const struct kp__ana *a, const struct kp__occ *o, int64_t stream_id,
		    int64_t t0, int64_t t1)
{
	for (size_t e = kp__ev_lower(a, t0); e < a->n_ev && a->ev[e].start <= t1; e++) {
		const struct kp__ev *ev = &a->ev[e];

		if (ev->kind == KP__B_CROSS_STREAM_EVENT && ev->stream_id == stream_id &&
		    ev->start >= o->t0 && ev->start <= o->t1)
			return 1;
	}
	return 0;
}

/*
 * Stream membership: every op of an occurrence must be on the capture
 * stream, or on a stream forked from it (an event wait on that stream
 * before the op) and joined back (a wait on the capture stream after that
 * stream's last op in the occurrence). Work on the legacy default stream
 * while the region runs elsewhere is never captured: with a blocking
 * capture stream it invalidates the capture (the application sees the
 * error), with a non-blocking one it silently stays out of the graph.
 * Without wait streams in the trace (imported traces), ops on other
 * streams are advisory unless on the legacy stream.
 */
static int stream_blockers(struct kp__ana *a, struct kp__region *r)
{
	uint32_t cs;
	int64_t cid;
	char d[768];
	int rc = 0;

	if (!r->n_occ || !r->occ[r->tmpl].n)
		return 0;
	cs = capture_stream(a, r);
	cid = a->streams.data[cs].stream_id;
	if (is_legacy(a, cid)) {
		const struct kp__occ *o = &r->occ[r->tmpl];
		const struct kp__op *op = &a->ops[o->ops[0]];

		if (r->rt_kind == 1)
			snprintf(d, sizeof(d), "the region runs on the legacy default stream (stream "
				 "%lld), which cannot be captured: give kp_region_begin a stream you "
				 "created and launch the body on it (or compile with --default-stream "
				 "per-thread)", (long long)cid);
		else
			snprintf(d, sizeof(d), "launches on the legacy default stream, which cannot "
				 "be captured: %s", kp__advice_legacy(a, o));
		return add_blk(a, r, KP__B_LEGACY_STREAM, r->rt_kind == 1, api_of(a, op),
			       op->api_start, op->corr, (int)r->tmpl, 0, d);
	}
	for (uint32_t k = 0; k < r->n_occ && !rc; k++) {
		const struct kp__occ *o = &r->occ[k];

		for (uint32_t i = 0; i < o->n && !rc; i++) {
			const struct kp__op *op = &a->ops[o->ops[i]];
			int64_t s = sid(a, op), last = op->api_start;
			int fatal = 1, kind = KP__B_CROSS_STREAM_EVENT, seen = 0;

			if (op->stream == cs)
				continue;
			for (uint32_t j = 0; j < i && !seen; j++)
				seen = a->ops[o->ops[j]].stream == op->stream;
			if (seen)
				continue;   /* one row per stream and occurrence */
			for (uint32_t j = i + 1; j < o->n; j++) {
				if (a->ops[o->ops[j]].stream == op->stream)
					last = a->ops[o->ops[j]].api_start;
			}
			if (is_legacy(a, s)) {
				kind = KP__B_LEGACY_STREAM;
				snprintf(d, sizeof(d), "node %u (%.80s) runs on the legacy default stream "
					 "(stream %lld) while the region runs on stream %lld: launch it "
					 "on stream %lld", i, op_name(a, op), (long long)s,
					 (long long)cid, (long long)cid);
			} else if (!a->wait_streams) {
				fatal = r->rt_kind != 0;
				snprintf(d, sizeof(d), "node %u (%.80s) runs on stream %lld while the "
					 "region runs on stream %lld, and the trace does not say whether "
					 "it is forked and joined: launch it on stream %lld, or fork and "
					 "join it with events", i, op_name(a, op), (long long)s,
					 (long long)cid, (long long)cid);
			} else if (!waits_on(a, o, s, o->t0, op->api_start)) {
				snprintf(d, sizeof(d), "node %u (%.80s) runs on stream %lld, which is not "
					 "forked from the region's stream %lld: record an event on %lld and "
					 "cudaStreamWaitEvent(%lld, it) first, or launch it on %lld", i,
					 op_name(a, op), (long long)s, (long long)cid, (long long)cid,
					 (long long)s, (long long)cid);
			} else if (!waits_on(a, o, cid, last, o->t1)) {
				snprintf(d, sizeof(d), "stream %lld (node %u, %.80s) is forked from the "
					 "region's stream %lld but never joined back: record an event on "
					 "%lld after its last launch and cudaStreamWaitEvent(%lld, it)",
					 (long long)s, i, op_name(a, op), (long long)cid, (long long)s,
					 (long long)cid);
			} else {
				continue;   /* forked and joined: captures */
			}
			rc = add_blk(a, r, kind, fatal, api_of(a, op), op->api_start, op->corr,
				     (int)k, (int)i, d);
		}
	}
	return rc;
}

/*
 * NCCL collectives in a region are graph nodes like any kernel: NCCL >= 2.9
 * (CUDA >= 11.3) captures collective, P2P and group calls. They do not
 * block the capture; what capturing them needs is written once per region
 * as an advisory (fatal 0), with the collectives of the template. The
 * host-side calls that would block (a sync on the collective's stream, a
 * poll by the launching thread) are blockers of their own kinds; polls by
 * threads that launch nothing (watchdogs, NCCL's proxy) were dropped when
 * loading (load.c).
 */
static int collective_advisory(struct kp__ana *a, struct kp__region *r)
{
	int64_t n_of[KP_NCCL__N] = {0}, n = 0;
	const struct kp__occ *o;
	const struct kp__op *first = NULL;
	char d[1024], list[256] = "";
	size_t at = 0;

	if (!r->n_occ)
		return 0;
	o = &r->occ[r->tmpl];
	for (uint32_t i = 0; i < o->n; i++) {
		const struct kp__op *op = &a->ops[o->ops[i]];
		uint8_t c = a->sigs.data[op->sig].coll;

		if (!c)
			continue;
		if (!first)
			first = op;
		n_of[c - 1]++;
		n++;
	}
	if (!n)
		return 0;
	for (int c = 0; c < KP_NCCL__N && at < sizeof(list); c++)
		if (n_of[c])
			at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s x%lld",
					       at ? ", " : "", kp_nccl_coll_name(c),
					       (long long)n_of[c]);
	snprintf(d, sizeof(d), "%lld NCCL collective kernel(s) per occurrence (%s) are "
		 "captured as graph nodes: this needs NCCL >= 2.9 and CUDA >= 11.3, one GPU "
		 "per process, and every rank of the communicator capturing and replaying the "
		 "same collectives in the same order (a replay is itself collective: plan the "
		 "region alike on every rank, and warm up alike); send/recv connect on their "
		 "first eager call, so warm up before capturing; several threads per process "
		 "capture with cudaStreamCaptureModeThreadLocal; no host-side wait on the "
		 "collective inside the region (a stream or event sync, or a query by the "
		 "launching thread, is a blocker of its own); NCCL_GRAPH_REGISTER=1 (NCCL >= "
		 "2.11) registers the graph's buffers for CollNet and NVLS",
		 (long long)n, list);
	return add_blk(a, r, KP__B_COLLECTIVE, 0, api_of(a, first), first->api_start,
		       first->corr, (int)r->tmpl, 0, d);
}

/*
 * A region a language binding captures (kplan.torch: NVTX category 2) was
 * recorded eagerly, and libraries take other paths while a capture is on
 * (transformers skips its mask checks' host syncs when
 * torch.cuda.is_current_stream_capturing()). A failed torch capture raises
 * inside the binding, which falls back to eager, so nothing here stops the
 * plan from trying: fatal blockers become advisories that say so.
 */
static int binding_advisory(struct kp__ana *a, struct kp__region *r)
{
	char d[640];

	for (size_t b = 0; b < r->blk.len; b++) {
		struct kp__blk *bk = &r->blk.data[b];

		if (bk->fatal != 1)
			continue;
		bk->fatal = 0;
		snprintf(d, sizeof(d), "%s (advisory in a kplan.torch region: libraries may avoid "
			 "it while capturing; the binding tries the capture and falls back)",
			 bk->detail ? bk->detail : "");
		if (!(bk->detail = kp_arena_strdup(&a->arena, d)))
			return KP_ENOMEM;
	}
	return 0;
}

#define MAX_WARMUP_COVER 8   /* most warm-up calls a plan asks for */

/*
 * Steady state: fatal blockers seen only in the first occurrences (a
 * caching allocator's first cudaMalloc, lazy module loading) do not stop a
 * graph when the warm-up covers them and at least two later occurrences
 * were clean: they become fatal = 2 ("warm-up only") and the region asks
 * for that many warm-up calls (r->warmup_occ).
 */
static void steady_state(struct kp__region *r)
{
	int last = -1;

	r->warmup_occ = 0;
	for (size_t b = 0; b < r->blk.len; b++) {
		if (r->blk.data[b].fatal == 1 && r->blk.data[b].occ > last)
			last = r->blk.data[b].occ;
	}
	if (last < 0 || last + 1 > MAX_WARMUP_COVER || r->n_occ < (uint32_t)last + 3)
		return;
	for (size_t b = 0; b < r->blk.len; b++) {
		if (r->blk.data[b].fatal == 1)
			r->blk.data[b].fatal = 2;
	}
	r->warmup_occ = last + 1;
}

/* One advisory row per launch configuration other than the template's. */
static int shape_blockers(struct kp__ana *a, struct kp__region *r)
{
	const struct kp__occ *t = &r->occ[r->tmpl];
	uint64_t seen[64];
	int n_seen = 0, rc = 0;
	char d[512];

	if (r->shape_keys <= 1)
		return 0;
	for (uint32_t k = 0; k < r->n_occ && !rc; k++) {
		const struct kp__occ *o = &r->occ[k];
		int dup = o->fp == t->fp;
		for (int s = 0; s < n_seen && !dup; s++)
			dup = seen[s] == o->fp;
		if (dup)
			continue;
		if (n_seen < 64)
			seen[n_seen++] = o->fp;
		uint32_t i = 0, m = o->n < t->n ? o->n : t->n;
		while (i < m && a->ops[o->ops[i]].sig == a->ops[t->ops[i]].sig)
			i++;
		if (i == m) {
			snprintf(d, sizeof(d), "occurrence %u has %u nodes, the common sequence %u",
				 k, o->n, t->n);
		} else {
			const struct kp__sig *sa = &a->sigs.data[a->ops[t->ops[i]].sig];
			const struct kp__sig *sb = &a->sigs.data[a->ops[o->ops[i]].sig];
			snprintf(d, sizeof(d), "occurrence %u node %u: %.80s %s -> %.80s %s",
				 k, i, sa->name, kp__sig_desc(a, sa), sb->name, kp__sig_desc(a, sb));
		}
		const struct kp__op *op = &a->ops[o->ops[i < o->n ? i : 0]];
		rc = add_blk(a, r, KP__B_SHAPE_KEY, 0,
			     op->api_name != UINT32_MAX ? a->names.data[op->api_name].s : NULL,
			     op->api_start, op->corr, (int)k, (int)i, d);
	}
	return rc;
}

/*
 * Arguments (up to 8 bytes) whose value changes between occurrences: 8-byte
 * ones that look like device addresses are pointers, the rest scalars (a
 * seed, a step, a learning rate) that a replay would reuse stale unless the
 * application binds them with kp_rt_bind_value.
 */
static int patch_slots(struct kp__ana *a, struct kp__region *r)
{
	const struct kp__occ *t = &r->occ[r->tmpl];
	char d[256];
	int rc = 0;

	r->patch_slots = r->patched_nodes = 0;
	if (!a->n_args)
		return 0;
	for (uint32_t i = 0; i < t->n && !rc; i++) {
		const struct kp__op *top = &a->ops[t->ops[i]];
		size_t na, nb;
		const struct kp__arg *ta = kp__args_of(a, top->corr, &na);
		int node_patched = 0;

		if (top->kind != KP__OP_KERNEL || !ta)
			continue;
		for (size_t j = 0; j < na && !rc; j++) {
			uint32_t changed = 0, compared = 0;
			int ptr = ta[j].size == 8;
			if (ta[j].size == 0 || ta[j].size > 8)
				continue;
			for (uint32_t k = 0; k < r->n_occ; k++) {
				const struct kp__occ *o = &r->occ[k];
				if (k == r->tmpl || o->n != t->n)
					continue;
				const struct kp__arg *b = kp__args_of(a, a->ops[o->ops[i]].corr, &nb);
				for (size_t x = 0; b && x < nb; x++) {
					if (b[x].idx != ta[j].idx)
						continue;
					compared++;
					if (b[x].value != ta[j].value) {
						changed++;
						uint64_t v = (uint64_t)b[x].value;
						if (v < (1ULL << 32) || (v & 0x3))
							ptr = 0;
					}
				}
			}
			if (!changed)
				continue;
			uint64_t v0 = (uint64_t)ta[j].value;
			if (v0 < (1ULL << 32) || (v0 & 0x3))
				ptr = 0;
			r->patch_slots++;
			node_patched = 1;
			snprintf(d, sizeof(d), "node %u (%.80s) arg %u: %s changes in %u of %u "
				 "occurrences%s", i, op_name(a, top), ta[j].idx,
				 ptr ? "pointer" : "scalar", changed, compared,
				 ptr ? "" : ": a replay would reuse the captured value; bind it with "
				 "kp_rt_bind_value");
			rc = add_blk(a, r, KP__B_PATCH_SLOT, 0,
				     top->api_name != UINT32_MAX ? a->names.data[top->api_name].s : NULL,
				     top->api_start, top->corr, (int)r->tmpl, (int)i, d);
		}
		r->patched_nodes += node_patched;
	}
	return rc;
}

/*
 * What each op of occurrence o adds to the model: its duration, except where
 * it overlaps the op before it on the same stream (programmatic dependent
 * launch lets a kernel start while its predecessor finishes): then only the
 * time past the predecessor's end counts, and no dependency gap is added on
 * top (kp_cost_predict adds the class's gap to every duration, so it is
 * taken off here; the node cost stays the floor). A kernel recorded as
 * launched with programmatic dependent launch (kp_launch_attrs) after an op
 * on its stream but not overlapping it (a host-bound eager run: the trace
 * shows it alone) pays graph_traced_gap_pdl_ns instead of its class's gap:
 * in a graph its launch and block start-up overlap its predecessor, which
 * hides part of what CUPTI recorded (negative; kplan calibrate measures it
 * on a chain of PDL kernels).
 */
static int node_cls(struct kp__ana *a, const struct kp__op *op)
{
	struct kp__sig *s = &a->sigs.data[op->sig];

	if (op->kind != KP__OP_KERNEL)
		return KP_NODE_MEMOP;
	if (!s->node_cls)
		s->node_cls = 1 + (kp_kernel_is_gemm(s->name) ? KP_NODE_GEMM : KP_NODE_KERNEL);
	return s->node_cls - 1;
}

static void node_durations(struct kp__ana *a, const struct kp_cost *c,
			   const struct kp__occ *o, int64_t *dur, uint8_t *mem, uint32_t *stream)
{
	for (uint32_t i = 0; i < o->n; i++) {
		const struct kp__op *op = &a->ops[o->ops[i]];
		const struct kp__op *prev = i ? &a->ops[o->ops[i - 1]] : NULL;

		stream[i] = op->stream;
		dur[i] = op->end - op->start;
		mem[i] = (uint8_t)node_cls(a, op);
		int64_t gap = llround(kp_cost_node_gap(c, mem[i]));
		if (prev && prev->stream == op->stream && op->start < prev->end)
			dur[i] = (op->end > prev->end ? op->end - prev->end : 0) - gap;
		else if (prev && prev->stream == op->stream && (op->flags & KP__F_PDL) &&
			 mem[i] != KP_NODE_MEMOP)
			dur[i] += llround(c->v[KP_COST_TRACED_GAP_PDL]) - gap;
	}
}

/* cudaLaunchHostFunc calls (host nodes once captured) in [t0, t1). */
static int64_t host_funcs(struct kp__ana *a, int64_t t0, int64_t t1)
{
	return (int64_t)(first_at(a->hostfn, a->n_hostfn, t1) -
			 first_at(a->hostfn, a->n_hostfn, t0));
}

/*
 * Graphed time: the model on each occurrence's body (up to ~1000
 * occurrences), plus the eager cost of the edges it leaves outside (the
 * user still runs them every step), median.
 */
static int predict(struct kp__ana *a, struct kp__region *r)
{
	const struct kp__occ *t = &r->occ[r->tmpl];
	uint32_t n = t->n, step = r->n_occ > 1000 ? r->n_occ / 1000 : 1, nv = 0;
	int64_t *dur = calloc(n ? n : 1, sizeof(*dur));
	uint8_t *mem = calloc(n ? n : 1, 1);
	uint32_t *str = calloc(n ? n : 1, sizeof(*str));
	int64_t *v = malloc((r->n_occ / step + 2) * sizeof(*v));
	struct kp_region_pred p;

	if (!dur || !mem || !str || !v) {
		free(dur);
		free(mem);
		free(str);
		free(v);
		return KP_ENOMEM;
	}
	for (uint32_t k = 0; k < r->n_occ; k += step) {
		const struct kp__occ *o = &r->occ[k];
		if (o->n != n)
			continue;
		node_durations(a, &a->cost, o, dur, mem, str);
		kp_cost_predict(&a->cost, dur, mem, str, host_funcs(a, o->t0, o->t1), n, o->eager,
				r->patched_nodes, r->shape_keys, &p);
		v[nv++] = p.graph_ns + o->edge_ns;
	}
	/* the template itself fixes one-time cost and memory */
	node_durations(a, &a->cost, t, dur, mem, str);
	kp_cost_predict(&a->cost, dur, mem, str, host_funcs(a, t->t0, t->t1), n, r->eager,
			r->patched_nodes, r->shape_keys, &r->pred);
	r->pred.graph_ns += t->edge_ns;
	if (nv)
		r->pred.graph_ns = kp__median(v, nv);
	if (r->pred.graph_ns > 0)
		r->pred.speedup = (double)r->eager / (double)r->pred.graph_ns;
	r->pred.break_even = r->eager > r->pred.graph_ns
		? (r->pred.one_time_ns + (r->eager - r->pred.graph_ns) - 1) / (r->eager - r->pred.graph_ns)
		: -1;
	r->has_pred = 1;
	free(dur);
	free(mem);
	free(str);
	free(v);
	return 0;
}

static int examine(struct kp__ana *a, struct kp__region *r, uint8_t *cut, struct kp__srcix *sx)
{
	uint32_t tn = r->n_occ ? r->occ[r->tmpl].n : 0;
	size_t n_calls;
	int rc = 0;

	/* the calls between launches (syncs, copies, event waits) are read in
	 * the region as mined (cut given); its parts lie between the fatal
	 * ones by construction */
	if (cut)
		rc = event_blockers(a, r, sx);
	n_calls = r->blk.len;   /* the split below cuts at those calls only */
	if (!rc)
		rc = stream_blockers(a, r);
	if (!rc)
		rc = collective_advisory(a, r);
	if (!rc)
		steady_state(r);
	if (!rc && r->rt_kind == 2)
		rc = binding_advisory(a, r);
	/* the parts a split would keep: cut before each fatal call between
	 * two launches (runtime regions are entered whole: never split) */
	for (size_t b = 0; cut && !r->rt_kind && b < n_calls; b++) {
		const struct kp__blk *bk = &r->blk.data[b];

		if (bk->fatal == 1 && bk->pos > 0 &&
		    (uint32_t)bk->pos < tn && r->occ[bk->occ].n == tn)
			cut[bk->pos] = 1;
	}
	if (!rc)
		rc = shape_blockers(a, r);
	if (!rc)
		rc = patch_slots(a, r);
	if (!rc)
		rc = predict(a, r);
	return rc;
}

static int split(struct kp__ana *a, struct kp__region *r, const uint8_t *cut,
		 struct kp_err *err)
{
	const struct kp__occ *t = &r->occ[r->tmpl];
	uint32_t n = t->n, beg = 0, n_occ = 0;
	int64_t benefit = 0;
	char label[256];

	/* cuts are positions in the template: only occurrences of its length
	 * line up with them */
	for (uint32_t k = 0; k < r->n_occ; k++)
		n_occ += r->occ[k].n == n;
	r->capturable = 0;
	for (uint32_t i = 1; i <= n; i++) {
		if (i < n && !cut[i])
			continue;
		uint32_t len = i - beg;
		/* one kernel alone is one launch either way: no part of its own */
		if (len >= 2) {
			snprintf(label, sizeof(label), "%.200s[%u:%u]", r->label, beg, i);
			struct kp__region *c = kp__region_new(a, label, "split", n_occ);
			if (!c)
				return kp_err_set(err, KP_ENOMEM, "out of memory");
			c->parent = r->id;
			c->stream_id = r->stream_id;
			uint32_t m = 0;
			for (uint32_t k = 0; k < r->n_occ; k++) {
				const struct kp__occ *o = &r->occ[k];
				if (o->n != n)
					continue;
				struct kp__occ *co = &c->occ[m++];
				co->ops = o->ops + beg;
				co->n = len;
				co->t0 = a->ops[co->ops[0]].api_start;
				co->t1 = a->ops[co->ops[len - 1]].api_start;
			}
			kp__region_stats(a, c);
			if (examine(a, c, NULL, NULL))
				return kp_err_set(err, KP_ENOMEM, "out of memory");
			if (c->eager > c->pred.graph_ns)
				benefit += c->eager - c->pred.graph_ns;
		}
		beg = i;
	}
	/* the parent runs its capturable parts as graphs, the rest eagerly */
	r->pred.graph_ns = r->eager - benefit;
	r->pred.speedup = r->pred.graph_ns > 0 ? (double)r->eager / (double)r->pred.graph_ns : 1;
	r->pred.break_even = -1;
	return 0;
}

int kp__capturability(struct kp__ana *a, struct kp_err *err)
{
	size_t n_top = a->regions.len;
	int rc = 0;

	if (!a->src && !(a->src = calloc(1, sizeof(*a->src))))
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	for (size_t i = 0; i < n_top && !rc; i++) {
		struct kp__region *r = a->regions.data[i];
		uint8_t *cut;
		uint32_t n;
		int any = 0;

		/* the program's own graph replays: no prediction, what runs between them */
		if ((rc = kp__graph_finding(a, r)) != 0) {
			rc = rc < 0 ? kp_err_set(err, rc, "out of memory") : 0;
			continue;
		}
		/* runtime regions are entered whole: no edges left outside */
		if (!r->rt_kind && region_edges(a, r)) {
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
			break;
		}
		n = r->n_occ ? r->occ[r->tmpl].n : 0;
		if (!(cut = calloc(n + 1, 1))) {
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
			break;
		}
		if (examine(a, r, cut, a->src)) {
			free(cut);
			rc = kp_err_set(err, KP_ENOMEM, "out of memory");
			break;
		}
		for (uint32_t p = 1; p < n; p++)
			any |= cut[p];
		if (any)
			rc = split(a, r, cut, err);
		free(cut);
	}
	for (size_t i = 0; i < a->regions.len && !rc; i++)
		kp__pred_interval(a, a->regions.data[i]);
	return rc;
}
