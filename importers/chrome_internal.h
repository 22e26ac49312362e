/*
 * chrome_internal.h - what the Chrome-trace reader's files share: the parser's
 * state (struct kp__chrome), the event being read (struct kp__chrome_ev) and
 * the keys the JSON callbacks recognise.
 *
 * chrome.c opens the file and drives yajl; chrome_json.c holds yajl's
 * callbacks (where in the document each value lands); chrome_events.c turns
 * each completed event into rows through struct kp_writer.
 */
#ifndef KP_IMPORTERS_CHROME_INTERNAL_H
#define KP_IMPORTERS_CHROME_INTERNAL_H

#include <stdint.h>
#include <yajl/yajl_parse.h>

#include "../common/strbuf.h"
#include "../common/vec.h"
#include "import.h"

#define FLOW_SLOTS 65536          /* recent flow endpoints kept (power of two) */
#define PENDING_MAX 1024          /* events waiting for their flow */
#define MAX_SKIP_KINDS 64

enum cat {
	C_NONE, C_OTHER, C_KERNEL, C_MEMCPY, C_MEMSET, C_RUNTIME, C_DRIVER, C_SYNC,
	C_ANNOT, C_GPU_ANNOT, C_CPU_OP, C_PYFUNC, C_FLOW, C_OVERHEAD, C_KPLAN,
};

enum evkey { K_NONE, K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ID, K_ARGS };

enum argkey {
	A_NONE, A_DEVICE, A_CONTEXT, A_STREAM, A_CORR, A_REGS, A_SMEM, A_SSMEM, A_DSMEM,
	A_GRID, A_BLOCK, A_BYTES, A_RETVAL, A_VALUE, A_LAUNCH, A_GRAPH_NODE, A_GRAPH_ID,
	A_EVENT_ID, A_CACHE, A_LMEM_THREAD, A_LMEM_TOTAL, A_GRID_ID, A_SYNC_TYPE, A_PDL,
	A_KPLAN_REGION, A_EXT_ID, A_IN_NELEMS, A_OUT_NELEMS, A_GROUP_SIZE, A_SEQ, A__N
};

/* String args of a collective (PyTorch's record_param_comms metadata), kept
 * in struct kp__chrome_comm; numbered past the A_* keys. */
enum commkey { CK_NAME = 64, CK_DTYPE, CK_PG_NAME, CK_PG_DESC, CK_RANKS };

/* A CPU op's inputs (profiler record_shapes=True): "Input Dims", "Input
 * type", "Input Strides", "Concrete Inputs", kept as JSON text in
 * kp__chrome.shp[]; numbered past the CK_* keys. */
enum shapekey { SK_DIMS = 80, SK_TYPES, SK_STRIDES, SK_CONCRETE, SK__END };
#define SHAPE_ARG_MAX 4096        /* bytes of one such arg kept; longer: skipped */

/* A collective's string args; "" when absent. */
struct kp__chrome_comm {
	char name[64], dtype[32], pg_name[64], pg_desc[64], ranks[128];
};

/* the versions last, in the order of kp__chrome.versions */
enum topkey {
	TK_OTHER, TK_EVENTS, TK_DEVPROPS, TK_DIST, TK_BASE, TK_DRIVER, TK_RUNTIME, TK_CUPTI
};

enum devkey {
	D_NONE, D_ID, D_NAME, D_MEM, D_MAJOR, D_MINOR, D_MAXTPB, D_REGS_SM, D_SHMEM_BLOCK,
	D_SHMEM_SM, D_WARP, D_SMS, D_CLOCK, D_L2, D_BW, D_BUS, D_UUID,
};

enum state {
	S_START, S_TOP, S_TOPVAL, S_EVENTS, S_EV, S_EVVAL, S_ARGS, S_ARGVAL, S_ARGARR,
	S_DEVS, S_DEV, S_DEVVAL, S_DIST, S_DISTVAL, S_SKIP, S_DONE,
	S_SHAPE,                  /* inside a shape arg's array (kp__chrome.shp) */
};

enum vtype { V_NULL, V_BOOL, V_NUM, V_STR };

struct kp__chrome_ev {
	char ph;
	int cat;
	unsigned have;          /* 1 << K_* */
	unsigned ahave;         /* 1 << A_* */
	int pid_str, tid_str;   /* pid/tid given as strings */
	int64_t pid, tid, ts, dur, id;
	int64_t a[A__N];
	int32_t grid[3], block[3];
	struct kp__chrome_comm comm;
	struct kp_strbuf name;
	struct kp_strbuf cat_s;
};

struct kp__chrome_gpu {
	struct kp_gpu_rec rec;
	char name[256], bus[64], uuid[64];
};

struct kp__chrome_flow { int64_t pid, tid, ts, id; int used; };

/* A record_param_comms CPU op's collective, by its External id. */
struct kp__chrome_commop {
	int64_t ext_id, in_nelems, out_nelems, group_size, seq;
	struct kp__chrome_comm comm;
};

/* An NCCL kernel whose event carried no collective args: its launching op's
 * External id, tied to a kp__chrome_commop when the trace is read. */
struct kp__chrome_ncclk { int64_t ext_id, start; uint32_t stream; };

struct kp__chrome {
	struct kp_db *db;
	struct kp_writer w;
	const char *path;
	struct kp_err *err;
	struct kp_import_stats *st;
	int rc;                 /* first error raised inside a callback */
	enum state state, ret_state;
	int depth, skip_depth;
	int top_key, key, arr_idx;
	int32_t *arr;
	int have_events;
	int64_t ev_index;
	struct kp__chrome_ev ev;
	/* the event's shape args (SK_* - SK_DIMS): JSON text re-serialized,
	 * len 0 when absent; shp_bad: 1 << k when arg k was malformed */
	struct kp_strbuf shp[4];
	unsigned shp_bad, shp_have;
	int shp_key, shp_depth, shp_first;
	struct kp__chrome_gpu cur_gpu;
	KP_VEC(struct kp__chrome_gpu) gpus;
	int64_t versions[3];    /* driver, runtime, cupti */
	int dist_key;           /* distributedInfo: 1 rank, 2 world_size, 0 other */
	int64_t rank, world_size;   /* distributedInfo's; -1 not said */
	int64_t base_ns;        /* baseTimeNanoseconds; 0 not said */
	KP_VEC(struct kp__chrome_commop) commops;
	KP_VEC(struct kp__chrome_ncclk) nccl_kernels;
	int64_t host_pid;       /* pid of the last CPU-side event */
	int64_t kernel_device;  /* device of the first kernel, -1 none */
	int64_t cpu_op_domain;  /* StringIds id, 0 until first cpu_op */
	int64_t python_domain;  /* StringIds id, 0 until first python_function */
	int64_t kplan_domain;   /* StringIds id, 0 until first libkplanrt range */
	struct kp__chrome_flow *flows;
	KP_VEC(struct kp__chrome_ev) pending;
	struct kp_strmap skipped;
	int n_skip_kinds;
};

/* Store the error (code, printf message) for the parse to return; 0, which
 * makes yajl stop. */
int kp__chrome_fail(struct kp__chrome *r, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Event names of the K_* fields, for messages. */
extern const char *const kp__chrome_key_names[];

/* chrome_events.c: write the event just closed (r->ev); write the events
 * still waiting for their flow. 0 or -1 (code in r->rc). */
int kp__chrome_handle_event(struct kp__chrome *r);
int kp__chrome_flush_pending(struct kp__chrome *r);
/* Tie the NCCL kernels without args to their record_param_comms op by
 * External id and write their kp_collectives rows. 0 or KP_E*. */
int kp__chrome_tie_collectives(struct kp__chrome *r);

/* chrome_json.c: the parser's callbacks (ctx: struct kp__chrome). */
extern const yajl_callbacks kp__chrome_callbacks;

#endif
