/*
 * import.h - importing traces recorded by other tools into a kplan database.
 *
 * Two inputs are understood, told apart by content, not by file name:
 *
 *   - Chrome-trace JSON as written by the PyTorch profiler (Kineto), plain or
 *     gzip-compressed. It is streamed (yajl callbacks over zlib's gzread in
 *     fixed-size chunks), so memory does not grow with the file.
 *   - Nsight Systems SQLite exports (`nsys export --type sqlite`).
 *
 * Every import becomes one new row of kp_runs and the trace rows of that run.
 * kp_import() never leaves a half-written database behind: a new output file
 * is written under a temporary name in the same directory and renamed on
 * success; an existing kplan database gets the run inside one transaction
 * that is rolled back on any error.
 *
 * How Kineto's event categories map onto the schema is described in
 * docs/DESIGN.md ("Importers").
 */
#ifndef KP_IMPORT_H
#define KP_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../db/db.h"
#include "../db/writer.h"

enum kp_import_format {
	KP_IMPORT_AUTO = 0,    /* detect from the first bytes */
	KP_IMPORT_CHROME,      /* Chrome-trace JSON (plain or gzip) */
	KP_IMPORT_NSYS,        /* Nsight Systems SQLite export */
};

/* Domain name under which PyTorch cpu_op events are stored (NVTX_EVENTS.domainId). */
#define KP_IMPORT_CPU_OP_DOMAIN "pytorch.cpu_op"
/* The same for python_function events (profiler with_stack=True): text is
 * Kineto's "FILE(LINE): FUNCTION" (or "nn.Module: NAME_N", "<built-in ...>"). */
#define KP_IMPORT_PYTHON_DOMAIN "pytorch.python"
/* libkplanrt's own NVTX domain (its regions); kept through export --chrome */
#define KP_IMPORT_KPLAN_DOMAIN "kplan"

struct kp_import_opts {
	int format;            /* enum kp_import_format; 0 = detect */
	int progress;          /* 1: kp_progress() lines while reading */
};

struct kp_import_stats {
	int format;                  /* the format that was read */
	int64_t run_id;              /* the run the rows belong to */
	int appended;                /* 1: added to an existing database */
	int64_t rows[KP_T__N];       /* rows written per enum kp_table */
	int64_t events;              /* trace events read (Chrome traces) */
	int64_t skipped;             /* events of unknown category or phase */
	int64_t uncorrelated;        /* GPU/API events left without a correlation id */
	int64_t bytes_in;            /* bytes of input read (uncompressed for JSON) */
	int64_t bad_shape_args;      /* a CPU op's shape args (record_shapes) skipped as
					malformed: not an array, too long, a map inside */
	char skipped_detail[256];    /* "Trace 1, phase i 20" (may be cut) */
};

/* "chrome", "nsys" or "auto". */
const char *kp_import_format_name(int format);

/*
 * Detect the format of the file at path from its first bytes: gzip magic
 * (1f 8b) or a JSON object -> KP_IMPORT_CHROME, an SQLite 3 header ->
 * KP_IMPORT_NSYS. A kplan database, an empty file or anything else is a
 * KP_EFORMAT error naming what was found. OUT: *format.
 */
int kp_import_detect(const char *path, int *format, struct kp_err *err);

/*
 * Import trace_path into the kplan database at db_path (created when it
 * does not exist, or is empty). opts and stats may be NULL. Returns 0 or a
 * negative KP_E*: KP_EFORMAT for bad input (message names the file and the
 * byte offset or event index and field), KP_EVERSION for an nsys export of
 * an unknown schema version, KP_EIO / KP_EDB for the output. On error no
 * output file is created and an existing database is left as it was.
 */
int kp_import(const char *trace_path, const char *db_path,
	      const struct kp_import_opts *opts, struct kp_import_stats *stats,
	      struct kp_err *err);

/*
 * The readers behind kp_import(), for callers that manage the database
 * themselves: each inserts one run (source "chrome" / "nsys") into db, the
 * caller's transaction covering it (they open none of their own), and
 * fills *stats (required). On error the caller rolls back.
 */
int kp_import_chrome(struct kp_db *db, const char *path,
		     const struct kp_import_opts *opts,
		     struct kp_import_stats *stats, struct kp_err *err);
int kp_import_nsys(struct kp_db *db, const char *path,
		   const struct kp_import_opts *opts,
		   struct kp_import_stats *stats, struct kp_err *err);

/*
 * Parse a decimal number of microseconds ("4446475346144.640", "-1.5",
 * "2e3") of len bytes into integer nanoseconds, exactly: digits beyond the
 * nanosecond are rounded half away from zero, never through a double.
 * Returns 0, or -1 for text that is not a number or overflows int64.
 */
int kp_import_parse_us(const char *s, size_t len, int64_t *ns);

/*
 * The same for a plain decimal integer value (scale 0); a fraction is
 * rounded half away from zero. Returns 0 or -1.
 */
int kp_import_parse_int(const char *s, size_t len, int64_t *v);

#endif
