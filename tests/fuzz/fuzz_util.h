/*
 * fuzz_util.h - helpers shared by the libFuzzer harnesses in tests/fuzz/.
 *
 * Each harness is one translation unit that includes this header. Inputs
 * that must reach a reader as a file are written to one scratch file per
 * process under $TMPDIR (libFuzzer's -fork/-jobs modes run several
 * processes at once, hence the pid in the name).
 */
#ifndef KP_FUZZ_UTIL_H
#define KP_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

/* A per-process scratch directory, created on first use, removed at exit. */
static char fz_dir[512];

static void fz_cleanup(void)
{
	char cmd[600];

	if (fz_dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fz_dir);
		if (system(cmd))
			fz_dir[0] = '\0';
	}
}

static __attribute__((unused)) const char *fz_path(const char *name)
{
	static char p[600];

	if (!fz_dir[0]) {
		const char *t = getenv("TMPDIR");

		snprintf(fz_dir, sizeof(fz_dir), "%s/kplan-fuzz-XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(fz_dir))
			abort();
		atexit(fz_cleanup);
	}
	snprintf(p, sizeof(p), "%s/%s", fz_dir, name);
	return p;
}

/* Write data to the scratch file name; returns its path (static storage). */
static __attribute__((unused)) const char *fz_write(const char *name, const uint8_t *data, size_t len)
{
	const char *p = fz_path(name);
	FILE *f = fopen(p, "wb");

	if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f))
		abort();
	return p;
}

/*
 * A malloc'd copy of the input (size bytes; 1 allocated when size is 0), so
 * that ASan catches a reader going past its end, which libFuzzer's own
 * buffer does not guarantee; NULL when out of memory. The caller frees it.
 */
static __attribute__((unused)) char *fz_copy(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1);

	if (copy)
		memcpy(copy, data, size);
	return copy;
}

/* A harness-detected bug: print what and crash so libFuzzer keeps the input. */
#define FZ_CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "fuzz check failed: %s: ", #cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		abort(); \
	} \
} while (0)

#endif
