/*
 * cmd_precompile.c - `kplan precompile model.kplan [--cc X.Y ...]`: compile
 * every fused source a plan ships (its [fusion] groups' kpfuse-*.cu and the
 * torch fusion groups' kpaten-*.cu of PLAN.aten) with NVRTC for the named
 * compute capabilities, into the kernel cache that libkplanrt loads from,
 * on a machine without a GPU. The compilation is libkplanrt's own
 * (kp_rt_kernel_precompile, opened with dlopen so that kplan itself needs
 * no CUDA): same options, same cache entries as a load on the GPU.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#include "../common/fileio.h"
#include "../common/hash.h"
#include "../common/strbuf.h"
#include "../plan/aten_groups.h"
#include "../plan/bundle.h"
#include "../plan/fused_limits.h"
#include "../plan/planfile.h"

const char kp_usage_precompile[] =
	"usage: kplan precompile model.kplan|model.kplanb [--cc X.Y]...\n"
	"\n"
	"Compiles every fused source the plan ships - its fusion groups' kpfuse-*.cu\n"
	"and the torch fusion groups of model.kplan.aten (kplan.torch's\n"
	"save_fusion) - with NVRTC for each compute capability given (default: the\n"
	"plan's), into the kernel cache libkplanrt loads from: KPLAN_CACHE_DIR, else\n"
	"$XDG_CACHE_HOME/kplan, else ~/.cache/kplan. Needs no GPU: make the cache on\n"
	"a build machine and ship the directory (KPLAN_CACHE_DIR on the GPU machine),\n"
	"so that no process there pays NVRTC time. Entries are keyed by the source's\n"
	"SHA-256, the compute capability and the NVRTC version: the GPU machine needs\n"
	"the same NVRTC (CUDA toolkit) release. Each source must still hash to what\n"
	"the plan pins. Uses libkplanrt (KPLAN_RT_LIB, else next to kplan) and NVRTC.\n"
	"For a bundle (kplan bundle): every entry's sources, each entry's torch\n"
	"fusion groups included, for the given compute capabilities or else each\n"
	"for its own entry's.\n"
	"\n"
	"exit status:\n"
	"  0  every source compiled or already in the cache\n"
	"  2  a source is missing or changed, NVRTC or libkplanrt cannot be loaded, a\n"
	"     compile failed, or there is no usable cache directory\n"
	"\n"
	"examples:\n"
	"  kplan precompile model.kplan\n"
	"  kplan precompile model.kplanb\n"
	"  KPLAN_CACHE_DIR=ship/cubins kplan precompile model.kplan --cc 9.0 --cc 10.0\n";

typedef int (*precompile_fn)(const char *, size_t, int, int, char *, size_t);

/* kp_rt_kernel_precompile from libkplanrt: KPLAN_RT_LIB, else next to kplan. */
static precompile_fn load_rt(char *why, size_t n)
{
	const char *env = getenv("KPLAN_RT_LIB"), *names[] = { "libkplanrt.so", "kplan/libkplanrt.so" };
	char self[PATH_MAX - 64], path[PATH_MAX];
	void *lib = NULL, *fn;
	ssize_t len;
	size_t i;

	if (env && *env) {
		lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
	} else if ((len = readlink("/proc/self/exe", self, sizeof(self) - 1)) > 0) {
		self[len] = 0;
		if (strrchr(self, '/'))
			*strrchr(self, '/') = 0;
		for (i = 0; !lib && i < sizeof(names) / sizeof(names[0]); i++) {
			snprintf(path, sizeof(path), "%s/../lib/%s", self, names[i]);
			lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		}
	}
	if (!lib)
		lib = dlopen("libkplanrt.so.0", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(why, n, "cannot load libkplanrt (set KPLAN_RT_LIB): %s", dlerror());
		return NULL;
	}
	fn = dlsym(lib, "kp_rt_kernel_precompile");
	if (!fn) {
		snprintf(why, n, "this libkplanrt has no kp_rt_kernel_precompile");
		return NULL;
	}
	return (precompile_fn)(uintptr_t)fn;
}

/* Compile the source name (next to the plan in dir, pinned to hash) for each cc. */
static int one(precompile_fn fn, const char *dir, const char *name, uint64_t hash,
	       const int (*cc)[2], int n_cc)
{
	struct kp_strbuf path = KP_STRBUF_INIT;
	struct kp_err err = {0};
	char msg[1024], shown[300];
	char *buf = NULL;
	size_t len;
	int i, rc = 0;

	kp_strbuf_addf(&path, "%s/%s", dir, name);
	if (kp_file_read(AT_FDCWD, path.buf, 0, KP_FX_MAX_SOURCE_BYTES, &buf, &len, &err)) {
		rc = kp_cli_error(&err);
		goto out;
	}
	if (kp_hash64(buf, len, KP_HASH_SEED) != hash) {
		kp_err_set(&err, KP_EMISMATCH, "%s: source file changed since the plan was written",
			   path.buf);
		rc = kp_cli_error(&err);
		goto out;
	}
	for (i = 0; i < n_cc; i++) {
		if (fn(buf, len, cc[i][0], cc[i][1], msg, sizeof(msg))) {
			kp_err_set(&err, KP_EIO, "%s for sm_%d%d: %s", path.buf, cc[i][0], cc[i][1],
				   msg);
			rc = kp_cli_error(&err);
			goto out;
		}
		printf("%s: sm_%d%d %s\n", kp_printable(shown, sizeof(shown), name), cc[i][0],
		       cc[i][1], strcmp(msg, "cache") ? "compiled" : "already in the cache");
	}
out:
	free(buf);
	kp_strbuf_release(&path);
	return rc;
}

/*
 * Compile the sources plan p ships (its fusion groups', then the torch
 * fusion groups' in the file aten_path) from dir for the n_cc compute
 * capabilities cc (none: the plan's); *n counts the sources. 0 or
 * KP_EXIT_ERROR (printed).
 */
static int precompile_plan(precompile_fn fn, const char *dir, const struct kp_plan *p,
			   const char *aten_path, const int (*cc)[2], int n_cc, int *n)
{
	struct kp_aten_groups *g = NULL;
	struct kp_err err = {0};
	const int own[1][2] = { { p->cc_major, p->cc_minor } };
	size_t k;
	int rc = 0, i;

	if (!n_cc) {
		cc = own;
		n_cc = 1;
	}
	i = kp_aten_groups_read(aten_path, &g, NULL, NULL, &err);
	if (i && i != KP_ENOTFOUND)
		return kp_cli_error(&err);
	if (g && g->plan_hash != p->body_hash) {
		kp_err_set(&err, KP_EMISMATCH, "%s: torch fusion groups found with another plan",
			   aten_path);
		kp_aten_groups_free(g);
		return kp_cli_error(&err);
	}
	for (k = 0; !rc && k < p->n_fusions; k++) {
		if (p->fusions[k].source) {
			rc = one(fn, dir, p->fusions[k].source, p->fusions[k].source_hash, cc, n_cc);
			++*n;
		}
	}
	for (k = 0; !rc && g && k < g->n_groups; k++) {
		rc = one(fn, dir, g->groups[k].source, g->groups[k].source_hash, cc, n_cc);
		++*n;
	}
	kp_aten_groups_free(g);
	return rc;
}

KP_CMD(precompile)
{
	struct kp_strbuf dir = KP_STRBUF_INIT, ap = KP_STRBUF_INIT;
	struct kp_bundle *b = NULL;
	struct kp_err err = {0};
	struct kp_plan *p = NULL;
	const char *plan = NULL;
	int cc[8][2], n_cc = 0, i, rc = KP_EXIT_OK, n = 0;
	precompile_fn fn;
	char why[512];
	size_t k;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--cc") && i + 1 < argc) {
			int maj, min;
			char c;

			if (n_cc == 8 || sscanf(argv[++i], "%d.%d%c", &maj, &min, &c) != 2 ||
			    maj < 1 || maj > 99 || min < 0 || min > 9)
				return kp_cli_usage("precompile", "--cc wants MAJOR.MINOR (at most 8)");
			cc[n_cc][0] = maj;
			cc[n_cc++][1] = min;
		} else if (argv[i][0] == '-' || plan) {
			return kp_cli_usage("precompile", "unexpected argument '%s'", argv[i]);
		} else {
			plan = argv[i];
		}
	}
	if (!plan)
		return kp_cli_usage("precompile", "expected a plan file or a bundle");
	if (kp_bundle_is(plan) ? !(b = kp_bundle_load(plan, NULL, NULL, &err)) :
	    !(p = kp_plan_load(plan, &err)))
		return kp_cli_error(&err);
	if (!(fn = load_rt(why, sizeof(why)))) {
		kp_err_set(&err, KP_EUNSUPPORTED, "%s", why);
		rc = kp_cli_error(&err);
		goto out;
	}
	if (p) {
		kp_plan_dir(plan, &dir);
		kp_aten_groups_path(plan, &ap);
		rc = dir.oom || ap.oom ? KP_EXIT_ERROR :
		     precompile_plan(fn, dir.buf, p, ap.buf, (const int (*)[2])cc, n_cc, &n);
	}
	/* a bundle: every entry's sources, for its own compute capability by default */
	for (k = 0; b && !rc && k < b->n_entries; k++) {
		kp_strbuf_reset(&dir);
		kp_strbuf_reset(&ap);
		kp_plan_dir(b->path, &dir);
		kp_bundle_aten_path(b, k, &ap);
		rc = dir.oom || ap.oom ? KP_EXIT_ERROR :
		     precompile_plan(fn, dir.buf, b->entries[k].plan, ap.buf,
				     (const int (*)[2])cc, n_cc, &n);
	}
	if (!rc && p)
		printf("%d sources, %d compute capabilities: in the kernel cache\n", n,
		       n_cc ? n_cc : 1);
	else if (!rc && n_cc)
		printf("%d sources of %zu entries, %d compute capabilities: in the kernel cache\n",
		       n, b->n_entries, n_cc);
	else if (!rc)
		printf("%d sources of %zu entries, each for its entry's compute capability: in the "
		       "kernel cache\n", n, b->n_entries);
out:
	kp_bundle_free(b);
	kp_plan_free(p);
	kp_strbuf_release(&dir);
	kp_strbuf_release(&ap);
	return rc;
}
