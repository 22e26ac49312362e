/*
 * chrome.c - streaming reader of Chrome-trace JSON written by the PyTorch
 * profiler (Kineto), plain or gzip.
 *
 * The file is read with zlib's gzread (which passes plain files through) in
 * fixed-size chunks and fed to yajl's callback parser; a small state machine
 * follows where in the document each callback lands. One event at a time is
 * held in memory and written through struct kp_writer as soon as its object
 * closes, so memory does not depend on the file size. Top-level keys may come
 * in any order (deviceProperties before or after traceEvents).
 *
 * Numbers arrive as text (yajl_number): microsecond timestamps with a
 * fraction become integer nanoseconds by decimal parsing, never through a
 * double.
 */
#include "import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "chrome_internal.h"
#include "kineto.h"
#include "../common/log.h"
#include "../common/strbuf.h"

#define CHUNK_BYTES (256 * 1024)

/* "parse error: invalid object key (must be a string)" -> first line, trimmed */
static void yajl_message(yajl_handle h, char *out, size_t n)
{
	unsigned char *m = yajl_get_error(h, 0, NULL, 0);
	char *nl;

	snprintf(out, n, "%s", m ? (char *)m : "parse error");
	if (m)
		yajl_free_error(h, m);
	if ((nl = strchr(out, '\n')))
		*nl = '\0';
}

static void skipped_detail(struct kp__chrome *r)
{
	char *p = r->st->skipped_detail;
	size_t left = sizeof(r->st->skipped_detail), i;
	int n;

	*p = '\0';
	for (i = 0; i < r->skipped.cap; i++) {
		struct kp_strmap_slot *s = &r->skipped.slots[i];

		if (!s->key)
			continue;
		n = snprintf(p, left, "%s%s %lld", p == r->st->skipped_detail ? "" : ", ",
			     s->key, (long long)s->value);
		if (n < 0 || (size_t)n >= left)
			break;
		p += n;
		left -= (size_t)n;
		kp_info("%s: skipped %lld events of kind '%s'", r->path, (long long)s->value, s->key);
	}
}

static int finish_run(struct kp__chrome *r)
{
	struct kp__run_update u = {0};
	const struct kp__chrome_gpu *g = NULL;
	size_t i;

	for (i = 0; i < r->gpus.len; i++) {
		if (!g || r->gpus.data[i].rec.id == r->kernel_device)
			g = &r->gpus.data[i];
		if (r->gpus.data[i].rec.id == r->kernel_device)
			break;
	}
	u.pid = r->host_pid;
	if (g) {
		u.device_name = g->name;
		u.compute_major = g->rec.compute_major;
		u.compute_minor = g->rec.compute_minor;
		u.sm_count = g->rec.sm_count;
	}
	u.driver_version = (int)r->versions[0];
	u.runtime_version = (int)r->versions[1];
	u.cupti_version = (int)r->versions[2];
	if (r->rank >= 0) {
		u.has_rank = 1;
		u.rank = (int)r->rank;
		u.world_size = (int)r->world_size;
	}
	u.clock_base_ns = r->base_ns;
	if (kp__run_update(r->db, r->st->run_id, &u, r->err))
		return r->err->code;
	return kp_db_run_finish(r->db, r->st->run_id, 0, NULL, "complete", r->err);
}

int kp_import_chrome(struct kp_db *db, const char *path, const struct kp_import_opts *opts,
		     struct kp_import_stats *stats, struct kp_err *err)
{
	struct kp_run_info ri = { .source = "chrome", .source_path = path };
	struct kp__chrome r;
	yajl_handle h = NULL;
	unsigned char *buf = NULL;
	gzFile gz = NULL;
	struct stat sb;
	int64_t fed = 0, next_progress = 0;
	int rc = 0, n;
	yajl_status ys;

	memset(&r, 0, sizeof(r));
	r.db = db;
	r.path = path;
	r.err = err;
	r.st = stats;
	r.kernel_device = -1;
	r.rank = r.world_size = -1;
	kp_strbuf_init(&r.ev.name);
	kp_strbuf_init(&r.ev.cat_s);
	kp_strmap_init(&r.skipped);
	stats->format = KP_IMPORT_CHROME;

	if (stat(path, &sb))
		sb.st_size = 0;
	gz = gzopen(path, "rb");
	buf = malloc(CHUNK_BYTES);
	r.flows = calloc(FLOW_SLOTS, sizeof(*r.flows));
	if (!gz || !buf || !r.flows) {
		rc = gz ? kp_err_set(err, KP_ENOMEM, "out of memory") :
			  kp_err_set(err, KP_EIO, "%s: cannot open", path);
		goto out;
	}
	gzbuffer(gz, CHUNK_BYTES);
	h = yajl_alloc(&kp__chrome_callbacks, NULL, &r);
	if (!h) {
		rc = kp_err_set(err, KP_ENOMEM, "out of memory");
		goto out;
	}
	rc = kp_db_run_insert(db, &ri, &stats->run_id, err);
	if (rc)
		goto out;
	kp_writer_init(&r.w, db, stats->run_id);

	while ((n = gzread(gz, buf, CHUNK_BYTES)) > 0) {
		ys = yajl_parse(h, buf, (size_t)n);
		if (ys != yajl_status_ok) {
			if (r.rc) {
				rc = r.rc;
			} else {
				char m[200];

				yajl_message(h, m, sizeof(m));
				rc = kp_err_set(err, KP_EFORMAT, "%s: invalid JSON at byte %lld%s: %s",
						path, (long long)(fed + (int64_t)yajl_get_bytes_consumed(h)),
						gzdirect(gz) ? "" : " of the decompressed data", m);
			}
			goto out_writer;
		}
		fed += n;
		if (opts && opts->progress && fed >= next_progress) {
			kp_progress("importing (compressed bytes)", (long long)gzoffset(gz),
				    (long long)sb.st_size);
			next_progress = fed + (64 << 20);
		}
	}
	{
		int zerr = Z_OK;
		const char *zmsg = gzerror(gz, &zerr);

		/* zlib reports a stream cut short as Z_BUF_ERROR after the data */
		if (n >= 0 && gzeof(gz) && zerr == Z_OK)
			goto parsed;

		rc = kp_err_set(err, KP_EFORMAT,
				"%s: %s after %lld bytes of data (%s)", path,
				zerr == Z_BUF_ERROR ? "truncated gzip stream" : "corrupt gzip stream",
				(long long)fed, zmsg ? zmsg : "read error");
		goto out_writer;
	}
parsed:
	ys = yajl_complete_parse(h);
	if (ys != yajl_status_ok) {
		char m[200];

		if (r.rc) {
			rc = r.rc;
		} else {
			yajl_message(h, m, sizeof(m));
			rc = kp_err_set(err, KP_EFORMAT,
					"%s: invalid JSON at byte %lld: %s (file ends inside the document)",
					path, (long long)fed, m);
		}
		goto out_writer;
	}
	if (r.state == S_START) {
		rc = kp_err_set(err, KP_EFORMAT, "%s: not a trace: the file holds no JSON", path);
		goto out_writer;
	}
	if (!r.have_events) {
		rc = kp_err_set(err, KP_EFORMAT,
				"%s: not a trace: the JSON object has no \"traceEvents\" array", path);
		goto out_writer;
	}
	if ((rc = kp__chrome_flush_pending(&r)) || (rc = kp__chrome_tie_collectives(&r)))
		goto out_writer;
	rc = finish_run(&r);
	if (!rc) {
		memcpy(stats->rows, r.w.rows, sizeof(stats->rows));
		stats->bytes_in = fed;
		skipped_detail(&r);
	}
out_writer:
	if (opts && opts->progress)
		kp_progress_done();
	kp_writer_release(&r.w);
out:
	if (h)
		yajl_free(h);
	if (gz)
		gzclose(gz);
	free(buf);
	free(r.flows);
	for (size_t i = 0; i < r.pending.len; i++)
		kp_strbuf_release(&r.pending.data[i].name);
	kp_vec_release(&r.pending);
	kp_vec_release(&r.commops);
	kp_vec_release(&r.nccl_kernels);
	kp_vec_release(&r.gpus);
	kp_strbuf_release(&r.ev.name);
	kp_strbuf_release(&r.ev.cat_s);
	for (int k = 0; k < 4; k++)
		kp_strbuf_release(&r.shp[k]);
	kp_strmap_release(&r.skipped);
	return rc;
}
