/*
 * planfile.h - the plan file (model.kplan): in-memory model, reader, writer
 * and the "does this plan apply on this GPU" check.
 *
 * The format is specified in plan/FORMAT.md. This module is shared by the
 * kplan CLI and by the runtime library (libkplanrt), which compiles
 * plan/planfile.c into itself with -fPIC: it depends only on libc and on
 * common/err.c, common/hash.c and common/strbuf.c. No SQLite, no CUDA.
 *
 * The reader parses untrusted files: every count and length is bounded by the
 * KP_PLAN_MAX_* limits below, every field is range-checked, and errors name
 * the file, the line and the field ("model.kplan:14: region 'step': field
 * 'kernels': expected 1..1000000, found 3000000000").
 *
 * Ownership: a struct kp_plan and everything it points to is owned by the
 * plan; kp_plan_free releases it all. Strings in a parsed plan are
 * NUL-terminated, printable (no control characters) and never NULL, except
 * where a field says "NULL when ...".
 */
#ifndef KP_PLANFILE_H
#define KP_PLANFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../common/err.h"
#include "../common/strbuf.h"

#define KP_PLAN_MAGIC "kplan-plan"
#define KP_PLAN_FORMAT_VERSION 4   /* the newest: versions 1 to 4 are read */
#define KP_PLAN_FORMAT_BASE 2      /* written when no version 3 or 4 field is set:
				      version 3 only adds [hard] 'for', version 4
				      the reason 'ranks-differ' (and 'for' optional) */

/* Limits the reader enforces (the writer refuses plans that break them). */
#define KP_PLAN_MAX_FILE_BYTES   (16u << 20)  /* whole file */
#define KP_PLAN_MAX_LINE         4096         /* bytes per line, newline excluded */
#define KP_PLAN_MAX_STR          1024         /* bytes of a decoded string value */
#define KP_PLAN_MAX_REGIONS      4096
#define KP_PLAN_MAX_FUSIONS      4096
#define KP_PLAN_MAX_PATCHES      4096         /* patch slots per region */
#define KP_PLAN_MAX_SHAPES       1024         /* shape keys per region */
#define KP_PLAN_MAX_KERNELS      1000000      /* kernels per region occurrence */
#define KP_PLAN_MAX_PARAM_BYTES  32764        /* CUDA's kernel parameter limit */
#define KP_PLAN_MAX_NS           (INT64_C(1) << 50)  /* ~13 days in ns */
#define KP_PLAN_MAX_BYTES        (INT64_C(1) << 44)  /* 16 TiB */

enum kp_plan_decision {
	KP_PLAN_EAGER = 0,   /* run the region's launches as they are */
	KP_PLAN_GRAPH = 1,   /* capture once, replay as a CUDA graph */
	KP_PLAN_SPLIT = 2,   /* a blocker splits it: see the regions whose parent it is */
};

/* Why a decision was taken; stable tokens in the file (kp_plan_reason_name). */
enum kp_plan_reason {
	KP_PLAN_R_LAUNCH_BOUND = 0,    /* "launch-bound": graph pays off */
	KP_PLAN_R_NOT_LAUNCH_BOUND,    /* "not-launch-bound": GPU rarely waits for the CPU */
	KP_PLAN_R_PREDICTED_LOSS,      /* "predicted-loss": graph not faster than eager */
	KP_PLAN_R_BLOCKER,             /* "blocker": not capturable (sync, malloc, ...) */
	KP_PLAN_R_TOO_FEW_REPLAYS,     /* "too-few-replays": below break-even */
	KP_PLAN_R_MEMORY_BUDGET,       /* "memory-budget": graph memory budget exhausted */
	KP_PLAN_R_RANKS_DIFFER,        /* "ranks-differ" (format 4): the ranks of a job do
					* not agree on the region, so none captures it */
	KP_PLAN_R__N
};

/*
 * One pointer parameter of one kernel node that changes between calls and
 * is patched in place at replay (cudaGraphExecKernelNodeSetParams).
 */
struct kp_plan_patch {
	uint32_t kernel;     /* kernel index in the region's launch order, < kernels */
	uint32_t param;      /* parameter index of that kernel */
	uint32_t offset;     /* byte offset of the parameter in the parameter buffer */
	uint32_t size;       /* bytes; offset + size <= KP_PLAN_MAX_PARAM_BYTES */
	int scalar;          /* 0: a pointer (kp_rt_bind); 1: a value that changes
			      * between calls (a seed, a step, a learning rate),
			      * updated through kp_rt_bind_value. Format v2 writes
			      * "pointer"/"scalar"; v1 lines have none: pointer */
};

struct kp_plan_region {
	char *label;             /* unique in the plan; the runtime's region name */
	char *parent;            /* label of the split region this is a part of; NULL when none */
	int decision;            /* enum kp_plan_decision */
	int reason;              /* enum kp_plan_reason */
	char *reason_text;       /* one human line explaining the decision ("" allowed) */
	uint64_t fingerprint;    /* HARD KEY: hash of the kernel signature sequence */
	uint32_t kernels;        /* kernels per occurrence, 1..KP_PLAN_MAX_KERNELS */
	uint32_t nodes;          /* graph nodes per occurrence (kernels + memsets +
				  * memcpys), kernels..KP_PLAN_MAX_KERNELS */
	uint32_t occurrences;    /* occurrences in the source run */
	uint32_t shape_keys;     /* distinct launch configurations = graphs to keep, >= 1 */
	uint32_t warmup;         /* eager calls before capture (graph regions) */
	uint32_t break_even;     /* replays that amortise one_time_ns */
	int64_t eager_ns;        /* measured, per occurrence */
	int64_t graph_ns;        /* predicted graph replay time, per occurrence */
	int64_t one_time_ns;     /* predicted capture + instantiate */
	int64_t mem_budget_bytes;/* device memory allowed for this region's graphs */
	double speedup_pred;     /* eager_ns / graph_ns as the analyzer predicted */
	size_t n_shapes;
	uint64_t *shapes;        /* fingerprint of each launch configuration seen
				  * (one per shape key), ascending, unique;
				  * n_shapes <= shape_keys; may be empty */
	size_t n_patches;
	struct kp_plan_patch *patches;  /* sorted by (kernel, param) */
};

/*
 * A chain of kernels planned to run as one fused kernel (inside the region's
 * graph). The fused source is a separate file next to the plan, checked by
 * hash; nothing in the plan is executable.
 */
struct kp_plan_fusion {
	uint32_t id;             /* unique, ascending in the file */
	char *region;            /* label of a region in this plan */
	uint32_t first_kernel;   /* index in the region of the chain's first kernel */
	uint32_t kernels;        /* chain length, >= 2 */
	char *names;             /* kernel names, " -> " separated */
	int64_t gain_ns;         /* predicted saving per region occurrence */
	double score;            /* analyzer score (info) */
	char *source;            /* file name next to the plan; NULL: not generated yet */
	uint64_t source_hash;    /* kp_hash64 of that file (0 when source is NULL) */
	/* in memory only (never written): each kernel's captured parameter
	 * bytes from a kernel trace, space separated ("-" when unknown), for the
	 * generator to specialise the catalog's const scalars; NULL: none */
	char *args;
	int exact;               /* 1: the fused kernel's output is bit-identical to
				  * the chain's (no reordered reduction); 0: it
				  * differs within `tolerance`. v1 plans: 1 */
	double tolerance;        /* when !exact, 1e-15..1: max |fused - chain| <=
				  * tolerance x max |chain| over each tensor the
				  * group stores (FORMAT.md); 0 when exact */
	/* in memory only (never written): why the group is not exact, as the
	 * generator found it (kp_fx_numerics), for messages; NULL: exact, or
	 * not known (read from a file) */
	char *inexact_why;
};

struct kp_plan {
	int format_version;      /* the file's (1 to 4) for a parsed plan, else
				  * KP_PLAN_FORMAT_VERSION; the writer writes 4
				  * when a region's reason is ranks-differ, 3 when
				  * model is set, else KP_PLAN_FORMAT_BASE */
	uint64_t body_hash;      /* from the header; verified on parse, set by write */

	/* hard keys: a mismatch means the plan does not apply */
	int cc_major, cc_minor;  /* compute capability */
	int cuda_major;          /* CUDA major version (driver's, e.g. 13) */
	char *model;             /* [hard] 'for' (format 3): the identity of the model
				  * the plan was made for (kplan plan --for), a free
				  * string; NULL: not pinned */

	/* soft keys: a mismatch is reported, the plan still applies */
	char *gpu_name;
	int sm_count;
	int driver_version;      /* cuDriverGetVersion() form, e.g. 13000 */

	/* info */
	char *tool_version;      /* kplan version that wrote the plan */
	int64_t source_run;      /* runId in the source database */
	char *source_kind;       /* record | chrome | nsys | synthetic */
	char *date;              /* UTC ISO 8601 of the source run ("" when unknown) */
	int64_t run_eager_ns;    /* measured time of the source run */
	int64_t run_pred_ns;     /* predicted time with the plan applied */
	double speedup_pred;     /* run_eager_ns / run_pred_ns */
	int64_t mem_budget_bytes;/* device memory for all graphs together */
	int args_checked;        /* 1: the source run recorded kernel arguments
				  * (record --args): scalars that change between
				  * occurrences are patch lines; 0: not recorded,
				  * a scalar passed by value was not checked;
				  * -1: unknown (v1 plans) */

	size_t n_regions;
	struct kp_plan_region *regions;   /* sorted by label */
	size_t n_fusions;
	struct kp_plan_fusion *fusions;   /* sorted by id */
};

/* An empty plan (calloc'd, format_version set, args_checked -1); NULL on
 * allocation failure. */
struct kp_plan *kp_plan_new(void);
void kp_plan_free(struct kp_plan *plan);

/*
 * Parse a plan file held in buf[0..len). name is used in error messages
 * (e.g. the path). Verifies the header, the body length and checksum, then
 * every field. Reads versions 1 to 3 (a key of a later version in an
 * earlier file is an unknown field); what version 1 lacks gets version
 * 1's meaning (patches are pointers, args_checked -1, fusion groups exact).
 * Returns a new plan (free with kp_plan_free) or NULL with err filled:
 * KP_EFORMAT (corrupt, truncated, checksum, missing or bad field),
 * KP_EVERSION (unknown format version), KP_ENOMEM.
 */
struct kp_plan *kp_plan_parse(const char *buf, size_t len, const char *name,
			      struct kp_err *err);
/* Read and parse the file at path (at most KP_PLAN_MAX_FILE_BYTES). */
struct kp_plan *kp_plan_load(const char *path, struct kp_err *err);
/*
 * Read the regular file at path into *buf (malloc'd, the caller frees;
 * NUL-terminated after its *len bytes) and *len, through kp_file_read (a
 * FIFO or a device is refused, never waited on). Returns 0, or
 * KP_ENOTFOUND / KP_EIO / KP_ENOMEM, or KP_EFORMAT (larger than
 * KP_PLAN_MAX_FILE_BYTES) with *buf NULL. For callers that check the bytes
 * (a signature) before parsing them.
 */
int kp_plan_read(const char *path, char **buf, size_t *len, struct kp_err *err);

/*
 * Serialise plan into out (appended), format KP_PLAN_FORMAT_BASE (3 when
 * plan->model is set, so that unpinned plans stay readable by older
 * readers and byte-identical to what they were): header
 * with body length and checksum, then the body. Deterministic: sorts regions
 * by label, shapes, patches by (kernel, param), fusions by id; same plan,
 * same bytes. Sets plan->body_hash, a region's nodes to its kernels when it
 * is 0, and a fusion group's exact to 1 when it is 0 with tolerance 0 (not
 * set: a zeroed group is exact). args_checked -1 is written as no line;
 * tolerances with 6 significant digits. Fails with KP_EINVAL when a field
 * is out of the range the reader accepts (naming it), KP_ENOMEM when out
 * grew out of memory.
 */
int kp_plan_write(struct kp_plan *plan, struct kp_strbuf *out, struct kp_err *err);
/* kp_plan_write to a stdio stream (KP_EIO on write failure). */
int kp_plan_write_file(struct kp_plan *plan, FILE *f, struct kp_err *err);

/*
 * The directory of the plan file at plan_path ("." when it names none),
 * appended to dir: where the fused sources it names are.
 */
void kp_plan_dir(const char *plan_path, struct kp_strbuf *dir);

/* Region by label, or NULL. */
const struct kp_plan_region *kp_plan_find(const struct kp_plan *plan, const char *label);

/* Stable tokens: "graph"/"eager"/"split"; "launch-bound", ...; NULL when out of range. */
const char *kp_plan_decision_name(int decision);
const char *kp_plan_reason_name(int reason);

/* ---------------------------------------------------------------------- */
/* Does a plan apply on a GPU? */

/* A GPU as far as it is known; unknown fields are NULL / -1. */
struct kp_gpu_desc {
	const char *name;        /* NULL: unknown */
	int cc_major, cc_minor;  /* -1: unknown */
	int sm_count;            /* -1: unknown */
	int driver_version;      /* cuDriverGetVersion() form; -1: unknown */
	int cuda_major;          /* -1: unknown (then driver_version / 1000 is used) */
	const char *model;       /* not the GPU: the identity of the model the
				  * application runs (kp_rt_options.model,
				  * kplan check --model); NULL: not given */
};

/* Fill with "all unknown". */
void kp_gpu_desc_init(struct kp_gpu_desc *gpu);

enum kp_plan_verdict {
	KP_PLAN_APPLIES = 0,        /* every key matches (or a soft key is unknown) */
	KP_PLAN_SOFT_MISMATCH = 1,  /* applies, with soft-key mismatches */
	KP_PLAN_NOT_APPLICABLE = 2, /* a hard key mismatches or is unknown */
};

#define KP_PLAN_CHECK_MAX_ITEMS 16

struct kp_plan_check_item {
	int severity;            /* enum kp_plan_verdict this item implies (0: note) */
	char key[32];            /* "compute-capability", "gpu-name", ... */
	char msg[224];           /* "plan wants 9.0, gpu has 8.0" */
};

struct kp_plan_report {
	int verdict;             /* enum kp_plan_verdict, the worst item */
	size_t n_items;
	struct kp_plan_check_item items[KP_PLAN_CHECK_MAX_ITEMS];
};

/*
 * Compare the plan's hard and soft keys with gpu. The plan's model
 * identity ('for') is a hard key compared with gpu->model when both are
 * set (byte for byte); a plan pinned to a model checked without one gets a
 * note (severity 0) and still applies. Fills rep with one item
 * per key checked (matches are not listed; unknown soft keys are notes with
 * severity 0; an unknown hard key makes the plan not applicable). Returns
 * rep->verdict. Region fingerprints are hard keys checked by the runtime at
 * capture time, not here.
 */
int kp_plan_check(const struct kp_plan *plan, const struct kp_gpu_desc *gpu,
		  struct kp_plan_report *rep);

/*
 * Internal to plan/: the hex readers planfile.c and aten_groups.c share.
 * kp__plan_hexval is the value of hex digit c (either case) or -1;
 * kp__plan_parse_hex64 reads s[0..n), exactly 16 lowercase hex digits,
 * into *out: 0, or -1 with *out untouched.
 */
int kp__plan_hexval(int c);
int kp__plan_parse_hex64(const char *s, size_t n, uint64_t *out);

#endif
