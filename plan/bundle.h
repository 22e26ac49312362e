/*
 * bundle.h - plan bundles: one shipped directory holding the plans of one
 * model for several kinds of GPU, their fused sources and one signature.
 *
 * A bundle is a directory (model.kplanb/) with the file `bundle` (an index
 * line per entry followed by that entry's plan file, byte for byte), the
 * kpfuse-*.cu sources any entry names, each entry's torch fusion groups
 * (plan-<its body-hash>.aten, aten_groups.h) with their kpaten-*.cu
 * sources, and `bundle.sig` (plan/sign.h, kp_bundle_sign). Format: plan/FORMAT.md, "Bundles". The runtime opens a
 * bundle where it would open a plan and applies the entry kp_bundle_choose
 * picks for its GPU; `kplan bundle` builds and extends one; `kplan show`
 * and `kplan check` read it.
 *
 * Like planfile.c this module is compiled into libkplanrt: libc and
 * common/ only. Ownership: a struct kp_bundle owns its bytes and its
 * entries' plans; kp_bundle_free releases them.
 */
#ifndef KP_PLAN_BUNDLE_H
#define KP_PLAN_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/strbuf.h"
#include "planfile.h"

#define KP_BUNDLE_MAGIC "kplan-bundle"
#define KP_BUNDLE_FORMAT_VERSION 1
#define KP_BUNDLE_FILE "bundle"           /* the index inside the directory */
#define KP_BUNDLE_MAX_ENTRIES 64
#define KP_BUNDLE_MAX_FILE_BYTES (64u << 20)

struct kp_bundle_entry {
	char *bytes;             /* the plan file, byte for byte (owned) */
	size_t len;
	struct kp_plan *plan;    /* its parse (owned; NULL once taken by kp_bundle_take) */
	char *src_dir;           /* where its fused sources are read from when the
				  * bundle is saved: the input plan's directory, or
				  * the bundle's own (owned) */
	char *aten_from;         /* where its torch fusion groups are read from when
				  * the bundle is saved (their sources: beside it):
				  * PLAN.aten of the input plan, or the bundle's
				  * plan-<hash>.aten; no such file: none (owned) */
};

struct kp_bundle {
	char *path;              /* the index file (DIR/bundle); NULL for a new bundle */
	size_t n_entries;
	struct kp_bundle_entry *entries;  /* a parsed or saved bundle: sorted by target */
};

/* How well an entry fits a GPU (kp_bundle_choose); lower is better. */
enum kp_bundle_match {
	KP_BUNDLE_M_EXACT = 1,   /* same GPU name and SM count */
	KP_BUNDLE_M_NAME = 2,    /* same GPU name, SM count differs or unknown */
	KP_BUNDLE_M_SMS = 3,     /* same SM count, another or unknown name */
	KP_BUNDLE_M_HARD = 4,    /* only the hard keys match (compute capability,
				  * CUDA major, model) */
	KP_BUNDLE_M_NONE = 5,    /* a hard key differs: the entry does not apply */
};

/* Stable words for a match ("gpu-name and sm-count", ...; "?" out of range). */
const char *kp_bundle_match_name(int match);

/* An empty bundle (NULL on allocation failure). */
struct kp_bundle *kp_bundle_new(void);
/* Free the bundle and everything it owns; NULL is a no-op. */
void kp_bundle_free(struct kp_bundle *b);

/*
 * 1 when path is a bundle: a directory holding an index (DIR/bundle, of
 * any kind: reading it refuses what is not a regular file), or a regular
 * file starting with "kplan-bundle ". 0 otherwise (a plan, a missing file,
 * a directory without an index: the plan reader says what is wrong).
 */
int kp_bundle_is(const char *path);

/*
 * The index file of the bundle at path (a directory: path/bundle; else
 * path itself), appended to out.
 */
void kp_bundle_index_path(const char *path, struct kp_strbuf *out);

/*
 * Parse a bundle index held in buf[0..len); name is the file named in
 * errors ("model.kplanb/bundle: entry 2: ..."). Checks the layout, parses
 * each entry as a plan, and refuses entries that name different models
 * ([hard] for) or the same target GPU twice (kp_bundle_add's duplicates).
 * Returns a new bundle (path set to name) or NULL: KP_EFORMAT, KP_EVERSION,
 * KP_EMISMATCH (different models, duplicates), KP_ENOMEM.
 */
struct kp_bundle *kp_bundle_parse(const char *buf, size_t len, const char *name,
				  struct kp_err *err);

/*
 * Read (through kp_file_read: regular files only) and parse the bundle at
 * path (a directory or its index). *bytes and *len (may be NULL) receive the
 * index's bytes (malloc'd, the caller frees): what a signature covers.
 */
struct kp_bundle *kp_bundle_load(const char *path, char **bytes, size_t *len,
				 struct kp_err *err);

/*
 * Add the plan file buf[0..len) (name: its path; its sources are read
 * from name's directory when the bundle is saved, its torch fusion groups
 * from name.aten) to b. Duplicates: the same bytes as an entry already
 * there are skipped (notes says so), though groups beside name replace the
 * entry's (kplan.torch saved them again); a plan
 * for the same target (compute capability, CUDA major, GPU name, SM count)
 * as an entry already there replaces it when replace is set (notes says
 * so), else it is refused (KP_EMISMATCH naming both). A plan pinned to
 * another model than the entries' is refused (KP_EMISMATCH). notes (may be
 * NULL) gets one line per skip or replacement. 0 or an error naming name.
 */
int kp_bundle_add(struct kp_bundle *b, const char *buf, size_t len, const char *name,
		  int replace, struct kp_strbuf *notes, struct kp_err *err);

/*
 * Serialise b into out (appended), entries sorted by target (GPU name, SM
 * count, compute capability, CUDA major): the same plans give the same
 * bytes whatever order they were added in. KP_EINVAL for an empty bundle.
 */
int kp_bundle_write(struct kp_bundle *b, struct kp_strbuf *out, struct kp_err *err);

/*
 * Write b into the directory dir (created when missing, mode 0777 less the
 * umask): first every fused source its entries name, copied from each
 * entry's src_dir after checking its source-hash (a file of that name
 * already in dir must have the same bytes), then each entry's torch fusion
 * groups (from aten_from: its sources, checked and deduplicated the same
 * way, then the file as plan-<body-hash>.aten; groups found with another
 * plan than the entry are refused, KP_EMISMATCH), then the index,
 * atomically (kp_file_write_atomic): a reader sees the old bundle or the
 * new one. A bundle.sig left there signs the old index: it is removed, and
 * *unsigned_now (may be NULL) set to 1. 0 or an error naming the file.
 */
int kp_bundle_save(struct kp_bundle *b, const char *dir, int *unsigned_now,
		   struct kp_err *err);

/*
 * After kp_bundle_save: remove from dir the torch fusion group files
 * (plan-<16 hex>.aten) of no entry of b, those of entries a new plan for
 * the same GPU replaced (the runtime never reads them, and a reader of the
 * directory would take them for part of the bundle). Their sources stay
 * (another entry may share them). Returns how many were removed.
 */
size_t kp_bundle_prune_aten(const struct kp_bundle *b, const char *dir);

/* Why each entry does or does not fit a GPU (kp_bundle_choose). */
struct kp_bundle_verdict {
	int match;               /* enum kp_bundle_match */
	int driver_match;        /* 1: the plan's driver version is the GPU's */
	char why[256];           /* "gpu-name and sm-count match" / the first hard
				  * mismatch ("plan wants 8.0, gpu has 9.0") */
};

struct kp_bundle_choice {
	int entry;               /* index of the chosen entry; -1: none applies */
	int match;               /* its enum kp_bundle_match (KP_BUNDLE_M_NONE when none) */
	char why[320];           /* one line: which entry and why, or why none */
	struct kp_bundle_verdict v[KP_BUNDLE_MAX_ENTRIES];  /* per entry */
};

/*
 * Choose the entry for gpu: among the entries whose hard keys match
 * (kp_plan_check is not KP_PLAN_NOT_APPLICABLE), the best match (enum
 * kp_bundle_match), then one whose driver version is the GPU's, then the
 * first in the bundle (its entries are sorted by target, so the choice
 * does not depend on the order plans were given in). Returns c->entry.
 */
int kp_bundle_choose(const struct kp_bundle *b, const struct kp_gpu_desc *gpu,
		     struct kp_bundle_choice *c);

/*
 * One line naming entry i's target for messages and listings:
 * "#2 NVIDIA H100 80GB HBM3, 132 SMs, cc 9.0, CUDA 13" (printable), into
 * buf[n].
 */
void kp_bundle_entry_name(const struct kp_bundle *b, size_t i, char *buf, size_t n);

/*
 * Plans by target, the GPU a plan is for: GPU name, then SM count, compute
 * capability, CUDA major (strcmp-like). Two plans of one target are
 * duplicates in a bundle.
 */
int kp_bundle_target_cmp(const struct kp_plan *a, const struct kp_plan *b);
/* "NVIDIA H200, 132 SMs, cc 9.0, CUDA 13" (printable) into buf[n]. */
void kp_bundle_target_name(const struct kp_plan *p, char *buf, size_t n);

/*
 * The torch fusion groups file of entry i (DIR/plan-<its body-hash>.aten,
 * beside the index: whether or not it exists), appended to out. Nothing
 * for an entry whose plan was taken.
 */
void kp_bundle_aten_path(const struct kp_bundle *b, size_t i, struct kp_strbuf *out);

/* Take entry i's plan out of b (the caller frees it); NULL when taken. */
struct kp_plan *kp_bundle_take(struct kp_bundle *b, size_t i);

#endif /* KP_PLAN_BUNDLE_H */
