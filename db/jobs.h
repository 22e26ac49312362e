/*
 * jobs.h - which runs of a database are the ranks of one multi-process job
 * (torchrun, mpirun, Slurm: one run per process, kp_runs.rank set).
 *
 * A job is the runs with a rank, the same world size and host, whose time
 * spans overlap on the clock the ranks share (kp_runs.clock_base_ns moves
 * an imported trace's times onto it), or that ran the same command where a
 * span is unknown (a launcher may give each rank its own arguments). A rank
 * recorded more than once contributes the run nearest the asked one by run
 * id. The analyzer (analyzer/ranks.h) matches the ranks' collectives; the
 * planner makes one plan that holds for every rank.
 */
#ifndef KP_DB_JOBS_H
#define KP_DB_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

/* One rank of a job. */
struct kp_job_run {
	int64_t run_id;
	int rank;
};

/*
 * The job run run_id (0: kp_db_default_run) is a rank of: its runs, one per
 * rank, by rank, the asked run among them. OUT: *runs (free() it; NULL when
 * none), *n (0 when the run is not a rank), *world_size (kp_runs.world_size,
 * -1 unknown; may be NULL). Returns 0 or negative KP_E*.
 */
int kp_db_job_runs(struct kp_db *db, int64_t run_id, int *world_size, struct kp_job_run **runs,
		   size_t *n, struct kp_err *err);

#endif
