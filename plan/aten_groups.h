/*
 * aten_groups.h - the torch fusion groups shipped with a plan (PLAN.aten).
 *
 * kplan.torch fuses chains of pointwise ATen ops while it captures a region
 * (python/kplan/aten_fuse.py). kt.save_fusion() writes the groups it fused
 * next to the plan it ran with: PLAN.aten lists them, and each group's
 * generated CUDA source is a file kpaten-<hash>.cu beside it. A process
 * that opens the plan later fuses exactly these groups with these sources.
 * The file is read here so that `kplan sign` covers the groups and their
 * sources, `kplan check` finds a missing or changed source and `kplan
 * show` lists them; the matching of a captured chain against a group is
 * the binding's (python/kplan/aten_plan.py), which writes the format.
 * Spec: plan/FORMAT.md, "Torch fusion groups".
 *
 * Text, one field per line, read like a plan: bounded, nothing in it is
 * executable, an unknown key or a missing required one is an error naming
 * the line. Depends on common/ only (libkplanrt compiles it).
 */
#ifndef KP_ATEN_GROUPS_H
#define KP_ATEN_GROUPS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/strbuf.h"

#define KP_ATEN_MAGIC "kplan-aten-groups"     /* the first line: magic, version */
#define KP_ATEN_FORMAT_VERSION 2              /* the newest: versions 1 and 2 are read */
#define KP_ATEN_SUFFIX ".aten"                /* PLAN.aten */
#define KP_ATEN_MAX_FILE_BYTES (16u << 20)
#define KP_ATEN_MAX_GROUPS 4096

/* One fused chain of one region. Strings are NUL-terminated, never NULL. */
struct kp_aten_group {
	uint32_t id;             /* 1, 2, ... in file order */
	char *region;            /* the region's label (decoded) */
	uint64_t key;            /* kp_hash64 of the chain's description: what a
				  * captured chain must hash to (aten_plan.py) */
	int exact;               /* numerics: 1 exact, 0 tolerant */
	char *ops;               /* ATen ops, " -> " separated (for people) */
	char *shape;             /* iteration space, "1x1x3072" */
	char *inputs;            /* each input's dtype, how it is read, its
				  * strides ("f16 full s3072,1; ...") */
	uint32_t outputs;        /* values the kernel writes, 1..64 */
	char *kernel;            /* the kernel's name in the source */
	char *source;            /* plain file name next to the plan */
	uint64_t source_hash;    /* kp_hash64 of the source file's bytes */
	/* the cost model's figures per occurrence of the chain (version 2;
	 * -1 in a version 1 file: not known) */
	int64_t saved_kernels;   /* eager kernels the one fused kernel replaces, less one */
	int64_t saved_bytes;     /* DRAM traffic the fusion removes */
	int64_t gain_ns;         /* predicted saving (kp_cost_fusion_gain_ns with the
				  * cost model's defaults, computed when saved) */
	int64_t per_call;        /* times the chain ran in one call of its region (the
				  * most of any capture): the region saves
				  * gain_ns x per_call per call */
};

struct kp_aten_groups {
	int format_version;      /* the file's, 1 or 2 */
	uint64_t plan_hash;      /* body-hash of the plan they were found with */
	size_t n_groups;
	struct kp_aten_group *groups;   /* by id */
};

/*
 * PLAN.aten for the plan at plan_path, appended to out (reset first).
 */
void kp_aten_groups_path(const char *plan_path, struct kp_strbuf *out);

/*
 * The groups file of the bundle entry whose plan has body-hash plan_hash,
 * in the bundle directory dir (DIR/plan-<16 hex>.aten), appended to out.
 */
void kp_aten_groups_bundle_path(const char *dir, uint64_t plan_hash, struct kp_strbuf *out);

/*
 * Parse buf[0..len) (name: in errors). Returns a new struct (free with
 * kp_aten_groups_free), or NULL with err: KP_EFORMAT (a line and field
 * named), KP_EVERSION (another magic's version), KP_ENOMEM.
 */
struct kp_aten_groups *kp_aten_groups_parse(const char *buf, size_t len, const char *name,
					    struct kp_err *err);

/*
 * Read and parse the groups beside the plan at plan_path. 0 with *out set
 * (and, when buf is not NULL, *buf and *len the file's bytes: malloc'd, the
 * caller frees), KP_ENOTFOUND with *out NULL when the plan has none (no
 * file: not an error for the caller to print), or an error naming the file.
 */
int kp_aten_groups_load(const char *plan_path, struct kp_aten_groups **out, char **buf,
			size_t *len, struct kp_err *err);

/*
 * As kp_aten_groups_load, for the groups file at aten_path itself (a
 * bundle entry's, kp_bundle_aten_path).
 */
int kp_aten_groups_read(const char *aten_path, struct kp_aten_groups **out, char **buf,
			size_t *len, struct kp_err *err);

/* Free g and everything it holds; NULL is a no-op. */
void kp_aten_groups_free(struct kp_aten_groups *g);

#endif
