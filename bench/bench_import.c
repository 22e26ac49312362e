/*
 * bench_import.c - time `kplan import` on a large synthetic Chrome trace.
 *
 *   bench_import [SIZE_MB] [KPLAN] [FIXTURE]
 *
 * Synthesizes a plain-JSON Chrome trace of about SIZE_MB (default 1024) MB
 * under /tmp by repeating the events of the bundled PyTorch profiler trace
 * (FIXTURE, default tests/fixtures/resnet18_b1.json.gz: ten ResNet-18
 * steps), each copy shifted in time by the trace's span and with its
 * correlation / flow / external ids shifted past the previous copy's, so the
 * result reads as one long run. Then runs `KPLAN import` on it (default: the
 * kplan next to this binary), and prints wall time, throughput and the
 * child's peak RSS (getrusage RUSAGE_CHILDREN). Both files are deleted,
 * unless KPLAN_BENCH_KEEP=1 (for profiling: the JSON is kept and not imported).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "common/kptime.h"
#include "importers/import.h"

static char *read_gz(const char *path, size_t *len)
{
	gzFile gz = gzopen(path, "rb");
	size_t cap = 1 << 22, n = 0;
	char *buf = malloc(cap);
	int r;

	if (!gz || !buf)
		return NULL;
	while ((r = gzread(gz, buf + n, (unsigned)(cap - n - 1))) > 0) {
		n += (size_t)r;
		if (cap - n < 2 && !(buf = realloc(buf, cap *= 2)))
			return NULL;
	}
	gzclose(gz);
	buf[n] = '\0';
	*len = n;
	return r < 0 ? NULL : buf;
}

/* end of the JSON array that starts at p ('['), skipping strings */
static const char *array_end(const char *p)
{
	int depth = 0, in_str = 0;

	for (; *p; p++) {
		if (in_str) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"')
				in_str = 0;
			continue;
		}
		if (*p == '"')
			in_str = 1;
		else if (*p == '[' || *p == '{')
			depth++;
		else if ((*p == ']' || *p == '}') && --depth == 0)
			return p;
	}
	return NULL;
}

enum { F_TS, F_ID };
static const struct { const char *key; int kind; } keys[] = {
	{ "\"ts\"", F_TS }, { "\"id\"", F_ID }, { "\"correlation\"", F_ID },
	{ "\"External id\"", F_ID },
};

/* If p starts a shifted field, return the key kind and set *num and *num_len. */
static int match_field(const char *p, const char *end, const char **num, size_t *num_len)
{
	size_t i, kl;
	const char *q;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		kl = strlen(keys[i].key);
		if ((size_t)(end - p) < kl || memcmp(p, keys[i].key, kl))
			continue;
		q = p + kl;
		while (q < end && (*q == ' ' || *q == '\t'))
			q++;
		if (q >= end || *q != ':')
			return -1;
		q++;
		while (q < end && (*q == ' ' || *q == '\t'))
			q++;
		*num = q;
		while (q < end && (*q == '-' || *q == '.' || (*q >= '0' && *q <= '9')))
			q++;
		*num_len = (size_t)(q - *num);
		return *num_len ? keys[i].kind : -1;
	}
	return -1;
}

/* min/max of the ts and id fields in body */
static void scan(const char *b, const char *e, int64_t *ts_lo, int64_t *ts_hi,
		 int64_t *id_lo, int64_t *id_hi)
{
	const char *p, *num;
	size_t nl;
	int64_t v;
	int k;

	*ts_lo = *id_lo = INT64_MAX;
	*ts_hi = *id_hi = INT64_MIN;
	for (p = b; p < e; p++) {
		if (*p != '"' || (k = match_field(p, e, &num, &nl)) < 0)
			continue;
		if (k == F_TS && !kp_import_parse_us(num, nl, &v)) {
			*ts_lo = v < *ts_lo ? v : *ts_lo;
			*ts_hi = v > *ts_hi ? v : *ts_hi;
		} else if (k == F_ID && !kp_import_parse_int(num, nl, &v)) {
			*id_lo = v < *id_lo ? v : *id_lo;
			*id_hi = v > *id_hi ? v : *id_hi;
		}
		p = num + nl - 1;
	}
}

/* write body with ts shifted by dt ns and ids by did */
static size_t emit(FILE *f, const char *b, const char *e, int64_t dt, int64_t did)
{
	const char *p = b, *run = b, *num;
	size_t nl, out = 0;
	int64_t v;
	int k;

	for (; p < e; p++) {
		if (*p != '"' || (k = match_field(p, e, &num, &nl)) < 0)
			continue;
		out += fwrite(run, 1, (size_t)(num - run), f);
		if (k == F_TS && !kp_import_parse_us(num, nl, &v)) {
			v += dt;
			out += (size_t)fprintf(f, "%lld.%03lld", (long long)(v / 1000),
					       (long long)(v % 1000));
		} else if (k == F_ID && !kp_import_parse_int(num, nl, &v)) {
			out += (size_t)fprintf(f, "%lld", (long long)(v + did));
		} else {
			out += fwrite(num, 1, nl, f);
		}
		run = p = num + nl;
		p--;
	}
	out += fwrite(run, 1, (size_t)(e - run), f);
	return out;
}

int main(int argc, char **argv)
{
	long size_mb = argc > 1 ? atol(argv[1]) : 1024;
	const char *fixture = argc > 3 ? argv[3] : "tests/fixtures/resnet18_b1.json.gz";
	char kplan[PATH_MAX], json[] = "/tmp/kplan-bench-import-XXXXXX", db[PATH_MAX + 8];
	const char *key, *open, *close;
	int64_t ts_lo, ts_hi, id_lo, id_hi, period, span, t0, t1;
	size_t len, total, reps = 0;
	struct rusage ru;
	struct stat sb;
	char *text;
	FILE *f;
	pid_t pid;
	int fd, status;

	if (argc > 2) {
		snprintf(kplan, sizeof(kplan), "%s", argv[2]);
	} else {
		ssize_t n = readlink("/proc/self/exe", kplan, sizeof(kplan) - 8);

		if (n < 0)
			return perror("readlink"), 2;
		kplan[n] = '\0';
		strcpy(strrchr(kplan, '/') + 1, "kplan");
	}
	text = read_gz(fixture, &len);
	if (!text || !(key = strstr(text, "\"traceEvents\"")) || !(open = strchr(key, '[')) ||
	    !(close = array_end(open))) {
		fprintf(stderr, "bench_import: %s: cannot read the fixture's traceEvents\n", fixture);
		return 2;
	}
	scan(open + 1, close, &ts_lo, &ts_hi, &id_lo, &id_hi);
	period = (ts_hi - ts_lo) + 1000000;   /* + 1 ms between copies */
	span = id_hi - id_lo + 1;

	fd = mkstemp(json);
	if (fd < 0 || !(f = fdopen(fd, "w")))
		return perror("bench_import: /tmp"), 2;
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	t0 = kp_now_ns();
	total = fwrite(text, 1, (size_t)(open + 1 - text), f);
	while (total < (size_t)size_mb << 20) {
		if (reps)
			total += fwrite(",", 1, 1, f);
		total += emit(f, open + 1, close, (int64_t)reps * period, (int64_t)reps * span);
		reps++;
	}
	total += fwrite(close, 1, len - (size_t)(close - text), f);
	if (fclose(f)) {
		perror("bench_import: write");
		unlink(json);
		return 2;
	}
	t1 = kp_now_ns();
	stat(json, &sb);
	printf("bench_import: synthesized %s: %.1f MB, %zu copies of the fixture's events (%.1f s)\n",
	       json, sb.st_size / 1048576.0, reps, (t1 - t0) / 1e9);
	fflush(stdout);
	if (getenv("KPLAN_BENCH_KEEP") && !strcmp(getenv("KPLAN_BENCH_KEEP"), "1")) {
		free(text);
		return 0;
	}

	snprintf(db, sizeof(db), "%s.db", json);
	t0 = kp_now_ns();
	pid = fork();
	if (pid == 0) {
		execl(kplan, kplan, "import", json, "-o", db, (char *)NULL);
		fprintf(stderr, "bench_import: exec %s: %s\n", kplan, strerror(errno));
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return perror("bench_import: fork"), 2;
	t1 = kp_now_ns();
	getrusage(RUSAGE_CHILDREN, &ru);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "bench_import: kplan import failed (status %d)\n", status);
	} else {
		struct stat dbs;

		stat(db, &dbs);
		printf("bench_import: kplan import %.1f MB in %.2f s = %.1f MB/s, peak RSS %.1f MB,"
		       " database %.1f MB\n", sb.st_size / 1048576.0, (t1 - t0) / 1e9,
		       sb.st_size / 1048576.0 / ((t1 - t0) / 1e9), ru.ru_maxrss / 1024.0,
		       dbs.st_size / 1048576.0);
	}
	unlink(json);
	unlink(db);
	free(text);
	return WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : 1;
}
