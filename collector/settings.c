/*
 * settings.c - the collector's settings, from the KPLAN_* environment that
 * `kplan record` sets (the list: inject.c), into kp__col.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "../common/log.h"
#include "../common/strbuf.h"

int64_t kp__col_env_int(const char *name, int64_t def)
{
	const char *s = getenv(name);
	char *end;
	long long v;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < 0) {
		kp_warn("%s='%s' is not a non-negative integer; using %lld", name, s,
			(long long)def);
		return def;
	}
	return v;
}

static char *read_cmdline(void)
{
	struct kp_strbuf sb = KP_STRBUF_INIT;
	char buf[4096];
	FILE *f = fopen("/proc/self/cmdline", "rb");
	size_t n, i;

	if (!f)
		return kp_strdup("?");
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		for (i = 0; i < n; i++) {
			if (!buf[i])
				buf[i] = ' ';
		}
		kp_strbuf_add(&sb, buf, n);
	}
	fclose(f);
	while (sb.len && sb.buf[sb.len - 1] == ' ')
		sb.buf[--sb.len] = 0;
	return kp_strbuf_detach(&sb, NULL);
}

/* The settings `kplan record` passes in the environment (KPLAN_*). */
void kp__col_read_settings(void)
{
	const char *s;
	int64_t mb;

	s = getenv("KPLAN_OUT");
	if (s && *s) {
		kp__col.out = kp_strdup(s);
	} else {
		char buf[64];

		snprintf(buf, sizeof(buf), "kplan-%d.db", (int)kp__col.pid);
		kp__col.out = kp_strdup(buf);
	}
	s = getenv("KPLAN_NVTX_RANGE");
	kp__col.nvtx_range = s && *s ? kp_strdup(s) : NULL;
	kp__col.profiler_api = kp__col_env_int("KPLAN_PROFILER_API", 0) != 0;
	kp__col.skip = kp__col_env_int("KPLAN_SKIP", 0);
	kp__col.args = kp__col_env_int("KPLAN_ARGS", 0) != 0;
	s = getenv("KPLAN_DURATION");
	if (s && *s) {
		char *end;

		kp__col.duration_s = strtod(s, &end);
		if (*end || kp__col.duration_s < 0) {
			kp_warn("KPLAN_DURATION='%s' is not a number of seconds; ignored", s);
			kp__col.duration_s = 0;
		}
	}
	mb = kp__col_env_int("KPLAN_MEM_MB", 64);
	if (mb < 1)
		mb = 1;
	kp__col.mem_bytes = (size_t)mb << 20;
	kp__col.buf_size = kp__col.mem_bytes / 8;
	if (kp__col.buf_size > (4u << 20))
		kp__col.buf_size = 4u << 20;
	if (kp__col.buf_size < (128u << 10))
		kp__col.buf_size = 128u << 10;
	s = getenv("KPLAN_COMMAND");
	kp__col.command = s && *s ? kp_strdup(s) : read_cmdline();
}
