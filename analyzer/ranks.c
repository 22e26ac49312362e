/*
 * ranks.c - the ranks of one job side by side (ranks.h): which runs are
 * the job, each rank's NCCL collectives, their matching across ranks, the
 * waits and the straggler.
 */
#include "ranks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../db/csv.h"


/* kp_collectives and kp_runs.clock_base_ns exist (schema v6; an older
 * database opened read-only is not migrated). */
static int has_clock_base(const struct kp_db *db)
{
	return db->schema_version >= 6;
}

static int by_lane_start(const void *x, const void *y)
{
	const struct kp_coll *a = x, *b = y;

	if (a->lane != b->lane)
		return a->lane < b->lane ? -1 : 1;
	return (a->start > b->start) - (a->start < b->start);
}

/* Name communicator name (its description, its size) in job->comms once. */
static void add_comm(struct kp_job *job, const char *name, const char *desc, int64_t size)
{
	char key[64], one[128];
	size_t len = strlen(job->comms);
	int n;

	/* each entry reads "NAME (...", after ", " unless first */
	snprintf(key, sizeof(key), "%s (", name);
	if (!strncmp(job->comms, key, strlen(key)))
		return;
	snprintf(key, sizeof(key), ", %s (", name);
	if (strstr(job->comms, key))
		return;
	n = snprintf(one, sizeof(one), "%s%s (%s", len ? ", " : "", name,
		     desc && *desc ? desc : "no description");
	if (size > 0 && n > 0 && (size_t)n < sizeof(one))
		snprintf(one + n, sizeof(one) - (size_t)n, ", %lld ranks", (long long)size);
	if (len + strlen(one) + 2 < sizeof(job->comms))
		snprintf(job->comms + len, sizeof(job->comms) - len, "%s)", one);
}

/* Append rank r's collectives to job->colls (cap: its capacity). */
static int load_colls(struct kp_db *db, struct kp_job *job, size_t r, size_t *cap,
		      struct kp_err *err)
{
	/* what each moved and on which communicator, where the trace said
	 * (kp_collectives, schema v6); the rank's times on the job's clock */
	static const char sql6[] = "SELECT k.start + b.ns, k.end + b.ns, k.streamId, s.value,"
		" c.bytes, c.pg_name, c.pg_desc, c.group_size"
		" FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
		" JOIN (SELECT COALESCE(clock_base_ns, 0) ns FROM kp_runs WHERE runId = ?1) b"
		" LEFT JOIN kp_collectives c ON c.runId = k.runId AND c.streamId = k.streamId"
		"  AND c.start = k.start"
		" WHERE k.runId = ?1 AND k.demangledName IN"
		" (SELECT id FROM StringIds WHERE value LIKE '%nccl%')"
		" ORDER BY k.start";
	static const char sql5[] = "SELECT k.start, k.end, k.streamId, s.value, NULL, NULL, NULL, NULL"
		" FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
		" WHERE k.runId = ?1 AND k.demangledName IN"
		" (SELECT id FROM StringIds WHERE value LIKE '%nccl%')"
		" ORDER BY k.start";
	struct kp_rank_sum *rs = &job->ranks[r];
	int64_t lanes[64];
	int n_lanes = 0;
	size_t first = job->n_colls;
	sqlite3_stmt *st;
	int rc = kp_db_prepare_run(db, has_clock_base(db) ? sql6 : sql5, rs->run_id, &st, err);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct kp_coll c = { .match = -1, .wait_ns = -1 };
		int l;

		if (!kp_nccl_parse((const char *)sqlite3_column_text(st, 3), &c.k))
			continue;
		c.start = sqlite3_column_int64(st, 0);
		c.end = sqlite3_column_int64(st, 1);
		c.stream_id = sqlite3_column_int64(st, 2);
		c.bytes = sqlite3_column_type(st, 4) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 4);
		if (sqlite3_column_type(st, 5) != SQLITE_NULL) {
			snprintf(c.comm, sizeof(c.comm), "%s", (const char *)sqlite3_column_text(st, 5));
			add_comm(job, c.comm, (const char *)sqlite3_column_text(st, 6),
				 sqlite3_column_type(st, 7) == SQLITE_NULL ? -1 :
				 sqlite3_column_int64(st, 7));
		}
		for (l = 0; l < n_lanes && lanes[l] != c.stream_id; l++)
			;
		if (l == n_lanes) {
			if (n_lanes == (int)(sizeof(lanes) / sizeof(*lanes)))
				continue;   /* more streams than any job gives its communicators */
			lanes[n_lanes++] = c.stream_id;
		}
		c.lane = l;
		if (job->n_colls == *cap) {
			size_t nc = *cap ? *cap * 2 : 256;
			struct kp_coll *p = realloc(job->colls, nc * sizeof(*p));

			if (!p) {
				sqlite3_finalize(st);
				return kp_err_set(err, KP_ENOMEM, "out of memory");
			}
			job->colls = p;
			*cap = nc;
		}
		job->colls[job->n_colls++] = c;
		rs->n_coll++;
		rs->coll_ns += c.end - c.start;
		if (c.bytes >= 0) {
			rs->bytes += c.bytes;
			rs->n_bytes++;
		}
	}
	rc = rc == SQLITE_DONE ? 0 : kp_db_error(db, err, "reading the NCCL kernels of a rank");
	sqlite3_finalize(st);
	if (rc)
		return rc;
	rs->n = job->n_colls - first;
	qsort(job->colls + first, rs->n, sizeof(*job->colls), by_lane_start);
	for (size_t i = 0; i < rs->n; i++) {
		struct kp_coll *c = &job->colls[first + i];

		c->seq = i && c[-1].lane == c->lane ? c[-1].seq + 1 : 0;
	}
	return 0;
}

/* Rank r's collectives of lane l: OUT *n; NULL when none. */
static struct kp_coll *lane_of(struct kp_rank_sum *rs, int32_t l, size_t *n)
{
	size_t i = 0, j;

	while (i < rs->n && rs->colls[i].lane < l)
		i++;
	for (j = i; j < rs->n && rs->colls[j].lane == l; j++)
		;
	*n = j - i;
	return *n ? &rs->colls[i] : NULL;
}

/* the same collective, and of the same size and communicator where known */
static int same_coll(const struct kp_coll *a, const struct kp_coll *b)
{
	return a->k.coll == b->k.coll && a->k.redop == b->k.redop && a->k.dtype == b->k.dtype &&
	       (a->bytes < 0 || b->bytes < 0 || a->bytes == b->bytes) &&
	       (!a->comm[0] || !b->comm[0] || !strcmp(a->comm, b->comm));
}

/* "AllReduce sum f32 ring/ll, 4096 bytes on communicator 0" */
static char *coll_desc(const struct kp_coll *c, char *buf, size_t n)
{
	size_t len;

	kp_nccl_desc(&c->k, buf, (unsigned)n);
	len = strlen(buf);
	if (c->bytes >= 0 && len < n)
		len += (size_t)snprintf(buf + len, n - len, ", %lld bytes", (long long)c->bytes);
	if (c->comm[0] && len < n)
		snprintf(buf + len, n - len, " on communicator %s", c->comm);
	return buf;
}

static void match(struct kp_job *job)
{
	size_t nr = job->n_ranks;
	struct kp_coll **lane = calloc(nr, sizeof(*lane));
	size_t *len = calloc(nr, sizeof(*len));

	if (!lane || !len)
		goto out;
	for (int32_t l = 0;; l++) {
		size_t n = SIZE_MAX, r;
		int any = 0;

		for (r = 0; r < nr; r++) {
			lane[r] = lane_of(&job->ranks[r], l, &len[r]);
			any |= lane[r] != NULL;
			if (len[r] < n)
				n = len[r];
		}
		if (!any)
			break;
		for (size_t k = 0; k < n; k++) {
			int64_t last = INT64_MIN;
			size_t who = 0, bad = 0;
			char a[112], b[112];

			for (r = 1; r < nr && !bad; r++)
				if (!same_coll(&lane[0][k], &lane[r][k]))
					bad = r;
			if (bad) {
				if (!job->mismatch[0])
					snprintf(job->mismatch, sizeof(job->mismatch),
						 "stream lane %d, collective %zu: rank %d runs %s, rank %d %s;"
						 " matching on this lane stops there", (int)l, k,
						 job->ranks[0].rank, coll_desc(&lane[0][k], a, sizeof(a)),
						 job->ranks[bad].rank, coll_desc(&lane[bad][k], b, sizeof(b)));
				break;
			}
			for (r = 0; r < nr; r++) {
				if (lane[r][k].start > last) {
					last = lane[r][k].start;
					who = r;
				}
			}
			int64_t longest = 0;

			for (r = 0; r < nr; r++) {
				struct kp_coll *c = &lane[r][k];

				/* a rank waits inside its kernel: no more than the
				 * kernel lasted (beyond that the processes' clocks
				 * differ, or the kernel sat queued behind others) */
				c->match = (int32_t)job->n_matches;
				c->wait_ns = last - c->start;
				if (c->wait_ns > c->end - c->start)
					c->wait_ns = c->end - c->start;
				if (c->wait_ns > longest)
					longest = c->wait_ns;
				c->last = r == who;
				job->ranks[r].n_matched++;
				job->ranks[r].wait_ns += c->wait_ns;
			}
			job->ranks[who].n_last++;
			job->ranks[who].caused_ns += longest;
			job->n_matches++;
		}
	}
out:
	free(lane);
	free(len);
}

int kp_job_load(struct kp_db *db, int64_t run_id, struct kp_job **out, struct kp_err *err)
{
	struct kp_job_run *runs = NULL;
	struct kp_job *job;
	size_t cap = 0, off = 0, n = 0;
	int64_t best = 0;
	int world_size = -1;
	int rc;

	*out = NULL;
	if ((rc = kp_db_job_runs(db, run_id, &world_size, &runs, &n, err)) || n < 2) {
		free(runs);
		return rc;
	}
	if (!(job = calloc(1, sizeof(*job))) || !(job->ranks = calloc(n, sizeof(*job->ranks)))) {
		free(job);
		free(runs);
		return kp_err_set(err, KP_ENOMEM, "out of memory");
	}
	job->world_size = world_size;
	job->straggler = -1;
	job->n_ranks = n;
	for (size_t r = 0; r < n; r++) {
		job->ranks[r].run_id = runs[r].run_id;
		job->ranks[r].rank = runs[r].rank;
	}
	free(runs);
	for (size_t r = 0; r < job->n_ranks && !rc; r++)
		rc = load_colls(db, job, r, &cap, err);
	if (rc) {
		kp_job_free(job);
		return rc;
	}
	/* the slices, now that job->colls stopped moving */
	job->t0 = INT64_MAX;
	job->t1 = INT64_MIN;
	for (size_t r = 0; r < job->n_ranks; r++) {
		job->ranks[r].colls = job->colls + off;
		off += job->ranks[r].n;
	}
	for (size_t i = 0; i < job->n_colls; i++) {
		if (job->colls[i].start < job->t0)
			job->t0 = job->colls[i].start;
		if (job->colls[i].end > job->t1)
			job->t1 = job->colls[i].end;
	}
	match(job);
	for (size_t r = 0; r < job->n_ranks; r++)
		if (job->ranks[r].caused_ns > best) {
			best = job->ranks[r].caused_ns;
			job->straggler = job->ranks[r].rank;
		}
	*out = job;
	return 0;
}

void kp_job_free(struct kp_job *job)
{
	if (!job)
		return;
	free(job->ranks);
	free(job->colls);
	free(job);
}

char *kp_job_bytes_desc(const struct kp_job *job, char *buf, size_t n)
{
	int64_t known = 0;
	size_t len;

	for (size_t r = 0; r < job->n_ranks; r++)
		known += job->ranks[r].n_bytes;
	if (!known && !job->comms[0]) {
		snprintf(buf, n, "bytes and communicator: unknown (kernel records do not carry them)");
		return buf;
	}
	snprintf(buf, n, "bytes moved:");
	for (size_t r = 0; r < job->n_ranks && (len = strlen(buf)) < n; r++)
		snprintf(buf + len, n - len, "%s rank %d %.3f MB in %lld of %lld collectives",
			 r ? ";" : "", job->ranks[r].rank, job->ranks[r].bytes / 1e6,
			 (long long)job->ranks[r].n_bytes, (long long)job->ranks[r].n_coll);
	if ((len = strlen(buf)) < n)
		snprintf(buf + len, n - len, "; communicators: %s",
			 job->comms[0] ? job->comms : "unknown");
	return buf;
}

void kp_job_print(const struct kp_job *job, FILE *f)
{
	char buf[1024];

	fprintf(f, "job of %zu ranks", job->n_ranks);
	if (job->world_size > 0)
		fprintf(f, " (world size %d)", job->world_size);
	fprintf(f, ": %zu NCCL kernels, %lld collectives matched across the ranks\n",
		job->n_colls, (long long)job->n_matches);
	fprintf(f, "  %4s %5s %11s %14s %10s %8s %8s %10s\n", "rank", "run", "collectives",
		"in coll. ms", "waited ms", "waited%", "last at", "caused ms");
	for (size_t r = 0; r < job->n_ranks; r++) {
		const struct kp_rank_sum *s = &job->ranks[r];

		fprintf(f, "  %4d %5lld %11lld %14.3f %10.3f %7.1f%% %8lld %10.3f\n", s->rank,
			(long long)s->run_id, (long long)s->n_coll, s->coll_ns / 1e6, s->wait_ns / 1e6,
			s->coll_ns > 0 ? 100.0 * (double)s->wait_ns / (double)s->coll_ns : 0.0,
			(long long)s->n_last, s->caused_ns / 1e6);
	}
	for (size_t r = 0; r < job->n_ranks && job->straggler >= 0; r++) {
		const struct kp_rank_sum *s = &job->ranks[r];

		if (s->rank == job->straggler)
			fprintf(f, "  straggler: rank %d arrived last at %lld of %lld collectives; the"
				" others waited %.3f ms in all for it\n", s->rank,
				(long long)s->n_last, (long long)job->n_matches, s->caused_ns / 1e6);
	}
	if (job->n_colls)
		fprintf(f, "  %s\n", kp_job_bytes_desc(job, buf, sizeof(buf)));
	if (job->mismatch[0])
		fprintf(f, "  the ranks' collectives differ at %s\n", job->mismatch);
}

static FILE *open_in(const char *dir, const char *name, char *path, size_t n, struct kp_err *err)
{
	FILE *f;

	snprintf(path, n, "%s/%s", dir, name);
	if (!(f = fopen(path, "w")))
		kp_err_set(err, KP_EIO, "%s: cannot write: %s", path, strerror(errno));
	return f;
}

static int close_out(FILE *f, const char *path, struct kp_err *err)
{
	if (fclose(f))
		return kp_err_set(err, KP_EIO, "%s: write failed: %s", path, strerror(errno));
	return 0;
}

int kp_job_write_csv(const struct kp_job *job, const char *dir, struct kp_err *err)
{
	char path[4096];
	FILE *f;
	int rc;

	if (!(f = open_in(dir, "ranks.csv", path, sizeof(path), err)))
		return err->code;
	fprintf(f, "rank,run_id,collectives,coll_us,matched,wait_us,last_at,caused_us,straggler\n");
	for (size_t r = 0; r < job->n_ranks; r++) {
		const struct kp_rank_sum *s = &job->ranks[r];

		fprintf(f, "%d,%lld,%lld,%.3f,%lld,%.3f,%lld,%.3f,%d\n", s->rank,
			(long long)s->run_id, (long long)s->n_coll, s->coll_ns / 1e3,
			(long long)s->n_matched, s->wait_ns / 1e3, (long long)s->n_last,
			s->caused_ns / 1e3, s->rank == job->straggler);
	}
	if ((rc = close_out(f, path, err)))
		return rc;
	if (!(f = open_in(dir, "collectives.csv", path, sizeof(path), err)))
		return err->code;
	fprintf(f, "rank,run_id,stream_id,lane,seq,match,collective,redop,dtype,algorithm,"
		"protocol,bytes,communicator,start_ns,dur_us,wait_us,last\n");
	for (size_t r = 0; r < job->n_ranks; r++) {
		const struct kp_rank_sum *s = &job->ranks[r];

		for (size_t i = 0; i < s->n; i++) {
			const struct kp_coll *c = &s->colls[i];

			fprintf(f, "%d,%lld,%lld,%d,%d,", s->rank, (long long)s->run_id,
				(long long)c->stream_id, c->lane, c->seq);
			if (c->match >= 0)
				fprintf(f, "%d", c->match);
			fprintf(f, ",%s,%s,%s,%s,%s,", kp_nccl_coll_name(c->k.coll),
				c->k.redop ? c->k.redop : "", c->k.dtype ? c->k.dtype : "",
				c->k.algo ? c->k.algo : "", c->k.proto ? c->k.proto : "");
			if (c->bytes >= 0)
				fprintf(f, "%lld,", (long long)c->bytes);
			else
				fputs("unknown,", f);
			kp_csv_field(f, c->comm[0] ? c->comm : "unknown");
			fprintf(f, ",%lld,%.3f,", (long long)c->start, (c->end - c->start) / 1e3);
			if (c->wait_ns >= 0)
				fprintf(f, "%.3f", c->wait_ns / 1e3);
			fprintf(f, ",%d\n", c->last);
		}
	}
	return close_out(f, path, err);
}
