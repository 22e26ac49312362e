/*
 * chrome_json.c - yajl's callbacks for a Chrome trace: a small state
 * machine that follows where in the document each value lands (top-level
 * keys in any order, traceEvents, an event's fields and args,
 * deviceProperties) and hands each completed event to chrome_events.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chrome_internal.h"
#include "kineto.h"
#include "../common/hash.h"
#include "../common/log.h"

struct key_id {
	const char *key;
	size_t len;
	int id;
};

#define KEY(s, id) { s, sizeof(s) - 1, id }
static const struct key_id arg_keys[] = {
	KEY("device", A_DEVICE), KEY("context", A_CONTEXT), KEY("stream", A_STREAM),
	KEY("correlation", A_CORR), KEY("registers per thread", A_REGS),
	KEY("shared memory", A_SMEM), KEY("static shared memory", A_SSMEM),
	KEY("dynamic shared memory", A_DSMEM), KEY("grid", A_GRID), KEY("block", A_BLOCK),
	KEY("bytes", A_BYTES), KEY("return value", A_RETVAL), KEY("value", A_VALUE),
	KEY("launch type", A_LAUNCH), KEY("graph node id", A_GRAPH_NODE),
	KEY("graph id", A_GRAPH_ID), KEY("event id", A_EVENT_ID),
	KEY("cache config", A_CACHE), KEY("local memory per thread", A_LMEM_THREAD),
	KEY("local memory total", A_LMEM_TOTAL), KEY("grid id", A_GRID_ID),
	KEY("sync type", A_SYNC_TYPE),
	KEY("kplan pdl", A_PDL),      /* kplan export --chrome: programmatic dependent launch */
	KEY("kplan region", A_KPLAN_REGION),  /* and a libkplanrt range's category */
	/* a collective (PyTorch's record_param_comms metadata, which Kineto
	 * also copies onto the collective's kernel) */
	KEY("External id", A_EXT_ID), KEY("In msg nelems", A_IN_NELEMS),
	KEY("Out msg nelems", A_OUT_NELEMS), KEY("Group size", A_GROUP_SIZE),
	KEY("Seq", A_SEQ), KEY("seq", A_SEQ),
	KEY("Collective name", CK_NAME), KEY("dtype", CK_DTYPE),
	KEY("Process Group Name", CK_PG_NAME), KEY("Process Group Description", CK_PG_DESC),
	KEY("Process Group Ranks", CK_RANKS),
	/* a CPU op's inputs (profiler record_shapes=True) */
	KEY("Input Dims", SK_DIMS), KEY("Input type", SK_TYPES),
	KEY("Input Strides", SK_STRIDES), KEY("Concrete Inputs", SK_CONCRETE),
};

static const struct key_id dev_keys[] = {
	KEY("id", D_ID), KEY("name", D_NAME), KEY("totalGlobalMem", D_MEM),
	KEY("computeMajor", D_MAJOR), KEY("computeMinor", D_MINOR),
	KEY("maxThreadsPerBlock", D_MAXTPB), KEY("regsPerMultiprocessor", D_REGS_SM),
	KEY("sharedMemPerBlock", D_SHMEM_BLOCK), KEY("sharedMemPerMultiprocessor", D_SHMEM_SM),
	KEY("warpSize", D_WARP), KEY("numSms", D_SMS), KEY("clockRate", D_CLOCK),
	KEY("l2CacheSize", D_L2), KEY("memoryBandwidth", D_BW), KEY("busLocation", D_BUS),
	KEY("uuid", D_UUID),
};

static void ev_reset(struct kp__chrome_ev *e)
{
	e->ph = 0;
	e->cat = C_NONE;
	e->have = e->ahave = 0;
	e->pid_str = e->tid_str = 0;
	e->pid = e->tid = e->ts = e->dur = e->id = 0;
	memset(e->a, 0, sizeof(e->a));
	memset(e->grid, 0, sizeof(e->grid));
	memset(e->block, 0, sizeof(e->block));
	e->comm.name[0] = e->comm.dtype[0] = e->comm.pg_name[0] = '\0';
	e->comm.pg_desc[0] = e->comm.ranks[0] = '\0';
	kp_strbuf_reset(&e->name);
	kp_strbuf_reset(&e->cat_s);
}

static int keyeq(const unsigned char *k, size_t len, const char *s)
{
	return strlen(s) == len && !memcmp(k, s, len);
}

/* The id of key k[0..len) in keys[0..n), or none. */
static int key_lookup(const struct key_id *keys, size_t n, const unsigned char *k, size_t len,
		      int none)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (keys[i].len == len && !memcmp(k, keys[i].key, len))
			return keys[i].id;
	return none;
}

static int classify_cat(const char *s, size_t len)
{
	static const struct { const char *name; int cat; } cats[] = {
		{ KP_CAT_KERNEL, C_KERNEL }, { KP_CAT_MEMCPY, C_MEMCPY },
		{ KP_CAT_MEMSET, C_MEMSET }, { KP_CAT_RUNTIME, C_RUNTIME },
		{ KP_CAT_DRIVER, C_DRIVER }, { KP_CAT_SYNC, C_SYNC },
		{ KP_CAT_ANNOT, C_ANNOT }, { KP_CAT_GPU_ANNOT, C_GPU_ANNOT },
		{ KP_CAT_CPU_OP, C_CPU_OP }, { KP_CAT_PYFUNC, C_PYFUNC }, { KP_CAT_FLOW, C_FLOW },
		{ KP_CAT_OVERHEAD, C_OVERHEAD }, { KP_CAT_REGION, C_KPLAN },
		{ KP_CAT_GAP, C_KPLAN },
		/* names used by PyTorch 1.8 - 1.10 */
		{ "Memcpy", C_MEMCPY }, { "Memset", C_MEMSET }, { "Runtime", C_RUNTIME },
		{ "Operator", C_CPU_OP },
	};
	size_t i;

	for (i = 0; i < sizeof(cats) / sizeof(cats[0]); i++) {
		if (strlen(cats[i].name) == len && !strncasecmp(cats[i].name, s, len))
			return cats[i].cat;
	}
	return C_OTHER;
}

/* ---- a CPU op's shape args: JSON arrays kept as text (kp__chrome.shp) ---- */

static int is_shape_key(int key)
{
	return key >= SK_DIMS && key < SK__END;
}

/* Arg k is malformed: dropped (and counted when the event is written). */
static void shape_bad(struct kp__chrome *r, int k)
{
	r->shp_have |= 1u << k;
	r->shp_bad |= 1u << k;
	kp_strbuf_reset(&r->shp[k]);
}

/* Append text to the arg being read, with the comma before an element. */
static void shape_put(struct kp__chrome *r, const char *s, size_t len, int elem)
{
	struct kp_strbuf *b = &r->shp[r->shp_key];

	if (r->shp_bad & (1u << r->shp_key))
		return;
	if (elem && !r->shp_first)
		kp_strbuf_addch(b, ',');
	r->shp_first = 0;
	kp_strbuf_add(b, s, len);
	if (b->len > SHAPE_ARG_MAX || b->oom)
		shape_bad(r, r->shp_key);
}

/* A string element, quoted as JSON (control characters as \u00XX). */
static void shape_str(struct kp__chrome *r, const char *s, size_t len)
{
	char buf[8];

	shape_put(r, "\"", 1, 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			buf[0] = '\\';
			buf[1] = (char)c;
			shape_put(r, buf, 2, 0);
		} else if (c < 0x20) {
			snprintf(buf, sizeof(buf), "\\u%04x", c);
			shape_put(r, buf, 6, 0);
		} else {
			shape_put(r, (const char *)&s[i], 1, 0);
		}
	}
	shape_put(r, "\"", 1, 0);
}

static int skip_value(struct kp__chrome *r, enum state ret)
{
	r->state = S_SKIP;
	r->skip_depth = r->depth - 1;
	r->ret_state = ret;
	return 1;
}

static int ev_scalar(struct kp__chrome *r, int type, const char *s, size_t len)
{
	struct kp__chrome_ev *e = &r->ev;
	int64_t v;

	switch (r->key) {
	case K_PH:
		if (type == V_STR && len >= 1)
			e->ph = s[0];
		break;
	case K_CAT:
		if (type == V_STR) {
			kp_strbuf_add(&e->cat_s, s, len);
			e->cat = classify_cat(s, len);
		}
		break;
	case K_NAME:
		if (type == V_STR)
			kp_strbuf_add(&e->name, s, len);
		else if (type == V_NUM)
			kp_strbuf_add(&e->name, s, len);
		break;
	case K_PID: case K_TID:
		if (type == V_NUM) {
			if (kp_import_parse_int(s, len, &v))
				return kp__chrome_fail(r, KP_EFORMAT, "%s: event %lld: bad number '%.*s'",
					    r->path, (long long)r->ev_index, (int)len, s);
		} else if (type == V_STR) {
			v = 0;
			if (r->key == K_PID)
				e->pid_str = 1;
			else
				e->tid_str = 1;
		} else {
			return 1;
		}
		if (r->key == K_PID)
			e->pid = v;
		else
			e->tid = v;
		break;
	case K_TS: case K_DUR:
		if (type != V_NUM && type != V_STR)
			return 1;
		if (kp_import_parse_us(s, len, &v))
			return kp__chrome_fail(r, KP_EFORMAT, "%s: event %lld: field '%s' is not a number ('%.*s')",
				    r->path, (long long)r->ev_index, kp__chrome_key_names[r->key],
				    (int)(len > 40 ? 40 : len), s);
		if (r->key == K_TS)
			e->ts = v;
		else
			e->dur = v;
		break;
	case K_ID:
		if (type == V_NUM || type == V_STR) {
			if (kp_import_parse_int(s, len, &v))
				v = (int64_t)kp_hash64(s, len, KP_HASH_SEED);  /* string ids */
			e->id = v;
		} else {
			return 1;
		}
		break;
	default:
		return 1;
	}
	e->have |= 1u << r->key;
	return 1;
}

static void dev_scalar(struct kp__chrome *r, int key, int type, const char *s, size_t len)
{
	struct kp__chrome_gpu *g = &r->cur_gpu;
	int64_t v = 0;

	if (type == V_STR) {
		char *dst = key == D_NAME ? g->name : key == D_BUS ? g->bus :
			    key == D_UUID ? g->uuid : NULL;
		size_t cap = key == D_NAME ? sizeof(g->name) : sizeof(g->bus);

		if (dst) {
			snprintf(dst, cap, "%.*s", (int)len, s);
			return;
		}
	}
	if ((type != V_NUM && type != V_STR) || kp_import_parse_int(s, len, &v))
		return;
	switch (key) {
	case D_ID: g->rec.id = (int)v; break;
	case D_MEM: g->rec.total_memory = v; break;
	case D_MAJOR: g->rec.compute_major = (int)v; break;
	case D_MINOR: g->rec.compute_minor = (int)v; break;
	case D_MAXTPB: g->rec.max_threads_per_block = (int)v; break;
	case D_REGS_SM: g->rec.max_registers_per_sm = (int)v; break;
	case D_SHMEM_BLOCK: g->rec.max_shmem_per_block = (int)v; break;
	case D_SHMEM_SM: g->rec.max_shmem_per_sm = (int)v; break;
	case D_WARP: g->rec.threads_per_warp = (int)v; break;
	case D_SMS: g->rec.sm_count = (int)v; break;
	case D_CLOCK: g->rec.clock_rate = (int)v; break;
	case D_L2: g->rec.l2_cache_size = v; break;
	case D_BW: g->rec.memory_bandwidth = v; break;
	}
}

/* A collective's string arg (a number, for a process group named by one). */
static void comm_arg(struct kp__chrome_comm *c, int key, int type, const char *s, size_t len)
{
	char *dst = key == CK_NAME ? c->name : key == CK_DTYPE ? c->dtype :
		    key == CK_PG_NAME ? c->pg_name : key == CK_PG_DESC ? c->pg_desc : c->ranks;
	size_t cap = key == CK_NAME ? sizeof(c->name) : key == CK_DTYPE ? sizeof(c->dtype) :
		     key == CK_PG_NAME ? sizeof(c->pg_name) :
		     key == CK_PG_DESC ? sizeof(c->pg_desc) : sizeof(c->ranks);

	if (type == V_STR || type == V_NUM)
		snprintf(dst, cap, "%.*s", (int)len, s);
}

static int scalar(struct kp__chrome *r, int type, const char *s, size_t len)
{
	int64_t v;

	switch (r->state) {
	case S_START:
		return kp__chrome_fail(r, KP_EFORMAT,
			    "%s: not a trace: expected a JSON object with \"traceEvents\", found a JSON %s",
			    r->path, type == V_STR ? "string" : type == V_NUM ? "number" : "literal");
	case S_TOPVAL:
		if (r->top_key == TK_EVENTS)
			return kp__chrome_fail(r, KP_EFORMAT, "%s: not a trace: \"traceEvents\" is not an array",
				    r->path);
		if (r->top_key >= TK_DRIVER && (type == V_NUM || type == V_STR) &&
		    !kp_import_parse_int(s, len, &v))
			r->versions[r->top_key - TK_DRIVER] = v;
		if (r->top_key == TK_BASE && (type == V_NUM || type == V_STR) &&
		    !kp_import_parse_int(s, len, &v))
			r->base_ns = v;
		r->state = S_TOP;
		return 1;
	case S_EVENTS:
		return kp__chrome_fail(r, KP_EFORMAT, "%s: event %lld: expected an object, found a JSON %s",
			    r->path, (long long)r->ev_index,
			    type == V_STR ? "string" : type == V_NUM ? "number" : "literal");
	case S_EVVAL:
		r->state = S_EV;
		return ev_scalar(r, type, s, len);
	case S_ARGVAL:
		r->state = S_ARGS;
		if (is_shape_key(r->key)) {   /* a shape arg that is not an array */
			shape_bad(r, r->key - SK_DIMS);
			return 1;
		}
		if (r->key >= CK_NAME) {
			comm_arg(&r->ev.comm, r->key, type, s, len);
			return 1;
		}
		if (r->key != A_NONE && (type == V_NUM || type == V_STR) &&
		    !kp_import_parse_int(s, len, &v)) {
			r->ev.a[r->key] = v;
			r->ev.ahave |= 1u << r->key;
		}
		return 1;
	case S_ARGARR:
		if (r->arr && r->arr_idx < 3 && type == V_NUM && !kp_import_parse_int(s, len, &v))
			r->arr[r->arr_idx] = (int32_t)v;
		r->arr_idx++;
		return 1;
	case S_DEVVAL:
		r->state = S_DEV;
		dev_scalar(r, r->key, type, s, len);
		return 1;
	case S_SHAPE:
		if (type == V_STR)
			shape_str(r, s, len);
		else if (type == V_NUM)
			shape_put(r, s, len, 1);
		else if (type == V_BOOL)
			shape_put(r, *s == '1' ? "true" : "false", *s == '1' ? 4 : 5, 1);
		else
			shape_put(r, "null", 4, 1);
		return 1;
	case S_DISTVAL:
		r->state = S_DIST;
		if (r->dist_key && (type == V_NUM || type == V_STR) &&
		    !kp_import_parse_int(s, len, &v)) {
			if (r->dist_key == 1)
				r->rank = v;
			else
				r->world_size = v;
		}
		return 1;
	default:
		return 1;
	}
}

static int cb_null(void *ctx)
{
	return scalar(ctx, V_NULL, "", 0);
}

static int cb_bool(void *ctx, int b)
{
	return scalar(ctx, V_BOOL, b ? "1" : "0", 1);
}

static int cb_number(void *ctx, const char *s, size_t len)
{
	return scalar(ctx, V_NUM, s, len);
}

static int cb_string(void *ctx, const unsigned char *s, size_t len)
{
	return scalar(ctx, V_STR, (const char *)s, len);
}

static int cb_start_map(void *ctx)
{
	struct kp__chrome *r = ctx;

	r->depth++;
	switch (r->state) {
	case S_START:
		r->state = S_TOP;
		return 1;
	case S_TOPVAL:
		if (r->top_key == TK_EVENTS)
			return kp__chrome_fail(r, KP_EFORMAT, "%s: not a trace: \"traceEvents\" is not an array",
				    r->path);
		if (r->top_key == TK_DIST) {
			r->state = S_DIST;
			return 1;
		}
		return skip_value(r, S_TOP);
	case S_EVENTS:
		ev_reset(&r->ev);
		r->shp_have = r->shp_bad = 0;
		for (int k = 0; k < 4; k++)
			kp_strbuf_reset(&r->shp[k]);
		r->state = S_EV;
		return 1;
	case S_EVVAL:
		if (r->key == K_ARGS) {
			r->state = S_ARGS;
			return 1;
		}
		return skip_value(r, S_EV);
	case S_ARGVAL:
		if (is_shape_key(r->key))
			shape_bad(r, r->key - SK_DIMS);
		return skip_value(r, S_ARGS);
	case S_ARGARR:
		return skip_value(r, S_ARGARR);
	case S_SHAPE:
		shape_bad(r, r->shp_key);
		return skip_value(r, S_SHAPE);
	case S_DEVS:
		memset(&r->cur_gpu, 0, sizeof(r->cur_gpu));
		r->state = S_DEV;
		return 1;
	case S_DEVVAL:
		return skip_value(r, S_DEV);
	case S_DISTVAL:
		return skip_value(r, S_DIST);
	default:
		return 1;
	}
}

static int cb_start_array(void *ctx)
{
	struct kp__chrome *r = ctx;

	r->depth++;
	switch (r->state) {
	case S_START:
		return kp__chrome_fail(r, KP_EFORMAT,
			    "%s: not a trace: expected a JSON object with \"traceEvents\", found an array",
			    r->path);
	case S_TOPVAL:
		if (r->top_key == TK_EVENTS) {
			r->have_events = 1;
			r->state = S_EVENTS;
			return 1;
		}
		if (r->top_key == TK_DEVPROPS) {
			r->state = S_DEVS;
			return 1;
		}
		return skip_value(r, S_TOP);
	case S_EVENTS:
		return kp__chrome_fail(r, KP_EFORMAT, "%s: event %lld: expected an object, found an array",
			    r->path, (long long)r->ev_index);
	case S_EVVAL:
		return skip_value(r, S_EV);
	case S_ARGVAL:
		if (r->key == A_GRID || r->key == A_BLOCK) {
			r->arr = r->key == A_GRID ? r->ev.grid : r->ev.block;
			r->ev.ahave |= 1u << r->key;
			r->arr_idx = 0;
			r->state = S_ARGARR;
			return 1;
		}
		if (is_shape_key(r->key)) {
			r->shp_key = r->key - SK_DIMS;
			r->shp_have |= 1u << r->shp_key;
			r->shp_bad &= ~(1u << r->shp_key);   /* a repeated key: the last one */
			kp_strbuf_reset(&r->shp[r->shp_key]);
			r->shp_first = 1;
			shape_put(r, "[", 1, 0);
			r->shp_first = 1;
			r->shp_depth = r->depth;
			r->state = S_SHAPE;
			return 1;
		}
		return skip_value(r, S_ARGS);
	case S_ARGARR:
		return skip_value(r, S_ARGARR);
	case S_SHAPE:
		shape_put(r, "[", 1, 1);
		r->shp_first = 1;
		return 1;
	case S_DEVS:
		return skip_value(r, S_DEVS);
	case S_DEVVAL:
		return skip_value(r, S_DEV);
	case S_DISTVAL:
		return skip_value(r, S_DIST);
	default:
		return 1;
	}
}

static int store_gpu(struct kp__chrome *r)
{
	struct kp__chrome_gpu *g = &r->cur_gpu;

	g->rec.name = g->name;
	g->rec.bus_location = g->bus[0] ? g->bus : NULL;
	g->rec.uuid = g->uuid[0] ? g->uuid : NULL;
	if (kp_writer_gpu(&r->w, &g->rec, r->err) < 0)
		return r->rc = r->err->code, 0;
	if (r->gpus.len < 64 && kp_vec_push(&r->gpus, *g))
		return kp__chrome_fail(r, KP_ENOMEM, "out of memory");
	return 1;
}

static int cb_end_map(void *ctx)
{
	struct kp__chrome *r = ctx;

	r->depth--;
	switch (r->state) {
	case S_SKIP:
		if (r->depth == r->skip_depth)
			r->state = r->ret_state;
		return 1;
	case S_TOP:
		r->state = S_DONE;
		return 1;
	case S_EV:
		r->state = S_EVENTS;
		if (kp__chrome_handle_event(r))
			return 0;
		r->ev_index++;
		return 1;
	case S_ARGS:
		r->state = S_EV;
		return 1;
	case S_DEV:
		r->state = S_DEVS;
		return store_gpu(r);
	case S_DIST:
		r->state = S_TOP;
		return 1;
	default:
		return 1;
	}
}

static int cb_end_array(void *ctx)
{
	struct kp__chrome *r = ctx;

	r->depth--;
	switch (r->state) {
	case S_SKIP:
		if (r->depth == r->skip_depth)
			r->state = r->ret_state;
		return 1;
	case S_EVENTS:
	case S_DEVS:
		r->state = S_TOP;
		return 1;
	case S_ARGARR:
		r->state = S_ARGS;
		return 1;
	case S_SHAPE:
		shape_put(r, "]", 1, 0);
		if (r->depth < r->shp_depth)
			r->state = S_ARGS;
		return 1;
	default:
		return 1;
	}
}

static int cb_map_key(void *ctx, const unsigned char *k, size_t len)
{
	struct kp__chrome *r = ctx;

	switch (r->state) {
	case S_TOP:
		r->top_key = keyeq(k, len, "traceEvents") ? TK_EVENTS :
			     keyeq(k, len, "deviceProperties") ? TK_DEVPROPS :
			     keyeq(k, len, "distributedInfo") ? TK_DIST :
			     keyeq(k, len, "baseTimeNanoseconds") ? TK_BASE :
			     keyeq(k, len, "cuda_driver_version") ? TK_DRIVER :
			     keyeq(k, len, "cuda_runtime_version") ? TK_RUNTIME :
			     keyeq(k, len, "cupti_version") ? TK_CUPTI : TK_OTHER;
		r->state = S_TOPVAL;
		return 1;
	case S_EV:
		r->key = K_NONE;
		switch (len) {
		case 2:
			r->key = k[0] == 'p' && k[1] == 'h' ? K_PH :
				 k[0] == 't' && k[1] == 's' ? K_TS :
				 k[0] == 'i' && k[1] == 'd' ? K_ID : K_NONE;
			break;
		case 3:
			r->key = !memcmp(k, "cat", 3) ? K_CAT : !memcmp(k, "pid", 3) ? K_PID :
				 !memcmp(k, "tid", 3) ? K_TID : !memcmp(k, "dur", 3) ? K_DUR : K_NONE;
			break;
		case 4:
			r->key = !memcmp(k, "name", 4) ? K_NAME : !memcmp(k, "args", 4) ? K_ARGS :
				 K_NONE;
			break;
		}
		r->state = S_EVVAL;
		return 1;
	case S_ARGS:
		r->key = key_lookup(arg_keys, sizeof(arg_keys) / sizeof(arg_keys[0]), k, len, A_NONE);
		r->state = S_ARGVAL;
		return 1;
	case S_DEV:
		r->key = key_lookup(dev_keys, sizeof(dev_keys) / sizeof(dev_keys[0]), k, len, D_NONE);
		r->state = S_DEVVAL;
		return 1;
	case S_DIST:
		r->dist_key = keyeq(k, len, "rank") ? 1 : keyeq(k, len, "world_size") ? 2 : 0;
		r->state = S_DISTVAL;
		return 1;
	default:
		return 1;
	}
}

const yajl_callbacks kp__chrome_callbacks = {
	.yajl_null = cb_null,
	.yajl_boolean = cb_bool,
	.yajl_number = cb_number,
	.yajl_string = cb_string,
	.yajl_start_map = cb_start_map,
	.yajl_map_key = cb_map_key,
	.yajl_end_map = cb_end_map,
	.yajl_start_array = cb_start_array,
	.yajl_end_array = cb_end_array,
};
