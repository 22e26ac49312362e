/*
 * ranks.h - the ranks of one multi-process job side by side: each rank's
 * NCCL collectives (common/nccl.h), matched across ranks, and how long each
 * rank waited in them for the last one to arrive.
 *
 * A job is the runs of one database that are ranks of the same launch
 * (kp_db_job_runs, db/jobs.h).
 *
 * Matching: NCCL runs a communicator's collectives in the order they were
 * called, on the stream they were given. Each rank's streams that carry
 * collectives are numbered in the order of their first collective (lane 0,
 * 1, ...: a communicator each, in a program that gives each its stream),
 * and the k-th collective of lane L on one rank is matched with the k-th of
 * lane L on every other. A match must be the same collective (and the same
 * reduction and type where the names say); at the first that differs the
 * lane's matching stops and the job says where (mismatch).
 *
 * Arrival is the collective kernel's start: the kernel begins when the
 * stream reaches it and then waits inside for its peers. The processes of
 * one host share CUPTI's time base, so arrivals compare across ranks. A
 * rank's wait at a match is the last arrival minus its own; the rank that
 * arrived last made the others wait (caused_ns: the longest wait it caused).
 * The job's straggler is the rank that caused the most.
 *
 * Bytes and the communicator are in no kernel record: they come from
 * kp_collectives (an imported PyTorch trace's record_param_comms metadata)
 * where it has the kernel, else they are "unknown". An imported rank's
 * times are put on the job's clock with its kp_runs.clock_base_ns.
 */
#ifndef KP_ANALYZER_RANKS_H
#define KP_ANALYZER_RANKS_H

#include <stdint.h>
#include <stdio.h>

#include "../common/err.h"
#include "../common/nccl.h"
#include "../db/db.h"
#include "../db/jobs.h"

/* One collective kernel of one rank. */
struct kp_coll {
	int64_t start, end;          /* ns, the job's shared time base */
	int64_t stream_id;
	int32_t lane, seq;           /* its lane and index in it (see above) */
	int32_t match;               /* index of its match (same for every rank); -1 none */
	struct kp_nccl_kernel k;
	int64_t wait_ns;             /* last arrival - own arrival, at most its own duration; -1 unmatched */
	int last;                    /* arrived last at its match */
	int64_t bytes;               /* what it moved (kp_collectives.bytes); -1 unknown */
	char comm[48];               /* its communicator (process group name); "" unknown */
};

/* One rank of the job. */
struct kp_rank_sum {
	int64_t run_id;
	int rank;
	int64_t n_coll;              /* its collective kernels */
	int64_t coll_ns;             /* their summed duration */
	int64_t n_matched;
	int64_t wait_ns;             /* summed wait at its matches */
	int64_t n_last;              /* matches it arrived last at */
	int64_t caused_ns;           /* summed longest wait of the matches it arrived last at */
	int64_t bytes;               /* summed over its collectives whose bytes are known */
	int64_t n_bytes;             /* those collectives */
	struct kp_coll *colls;       /* its collectives, by lane then seq (in job->colls) */
	size_t n;
};

struct kp_job {
	int world_size;              /* kp_runs.world_size; -1 unknown */
	size_t n_ranks;
	struct kp_rank_sum *ranks;   /* by rank */
	struct kp_coll *colls;       /* all ranks' collectives */
	size_t n_colls;
	int64_t n_matches;           /* matched collectives (one per k-th of a lane) */
	int straggler;               /* rank that caused the most waiting; -1 none */
	int64_t t0, t1;              /* first start, last end of the collectives */
	char mismatch[256];          /* where the ranks' sequences first differ; "" none */
	char comms[256];             /* the communicators, "0 (default_pg, 2 ranks), ..."; "" unknown */
};

/*
 * The job run run_id (0: kp_db_default_run) is a rank of, with every rank's
 * collectives matched. OUT: *out (free with kp_job_free), NULL when the run
 * is not a rank of a job of two or more ranks in db. Returns 0 or negative
 * KP_E*.
 */
int kp_job_load(struct kp_db *db, int64_t run_id, struct kp_job **out, struct kp_err *err);
void kp_job_free(struct kp_job *job);

/*
 * One sentence on what the collectives moved and on which communicators,
 * or that the kernel records do not say, into buf (always NUL-terminated).
 * Returns buf.
 */
char *kp_job_bytes_desc(const struct kp_job *job, char *buf, size_t n);

/* The job's per-rank table and its straggler, for the terminal. */
void kp_job_print(const struct kp_job *job, FILE *f);

/*
 * ranks.csv (one row per rank: run, collectives, time in them, waits,
 * straggler) and collectives.csv (one row per rank and collective: lane,
 * seq, what the name says, bytes and communicator ("unknown" when not
 * known), start, duration, wait) into directory dir, which must exist.
 */
int kp_job_write_csv(const struct kp_job *job, const char *dir, struct kp_err *err);

#endif
