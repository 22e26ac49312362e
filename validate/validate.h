/*
 * validate.h - the cost model against measured graph times (`kplan validate`).
 *
 * A validation corpus is a directory (bench/cost_corpus/<gpu>/, written on a
 * GPU by bench/cost_corpus.py) holding
 *   ground_truth.csv   workload,eager_ms,graph_ms,... (the measured times of
 *                      each workload's step eagerly and as one CUDA graph)
 *   WORKLOAD.json.gz   the step traced by the PyTorch profiler (or .json,
 *                      or plain .json), each step in an
 *                      annotation named after the region (default "step")
 *   calib.txt          that GPU's `kplan-calibrate` output (optional: the
 *                      documented defaults otherwise)
 * Each trace is imported into a scratch database, the calibration stored
 * with it, the run analyzed, and the region's predicted graph time (its
 * capturable body: the edges a graph leaves outside, such as loss.item(),
 * are reported apart) compared with the measured one.
 *
 * A pipeline over importers/ and analyzer/, so it is a module of its own
 * above both (validate/module.mk): the analyzer only reads the database.
 */
#ifndef KP_VALIDATE_VALIDATE_H
#define KP_VALIDATE_VALIDATE_H

#include <stdint.h>

#include "../common/err.h"

struct kp_validate_row {
	char workload[128];
	char label[128];           /* ground_truth.csv's label column ("" if none) */
	double eager_ms;           /* measured, from ground_truth.csv */
	double graph_ms;           /* measured */
	/* from the analysis (0 / -1 when the region was not found) */
	int found;
	int64_t occurrences, nodes;
	int64_t eager_ns;          /* profiled eager time per occurrence */
	int64_t pred_ns;           /* predicted graph time of the body */
	int64_t edge_ns;           /* eager cost of the edges left outside */
	int64_t lo_ns, hi_ns;      /* the prediction's interval (edges excluded); 0: none */
	int path_points;           /* capture_path rows: waits the captured path skips */
	int capturable;
	double error;              /* pred / measured - 1 */
	char note[160];            /* why a row has no prediction */
};

/*
 * Read dir/ground_truth.csv (libcsv; the header names the columns, extra
 * columns are ignored; an optional label column names the workload's region
 * where it is not the command line's, e.g. a C program's NVTX range). *rows
 * is malloc'ed; *n its length. KP_EFORMAT for a file without
 * workload/graph_ms columns or with a bad number (the message names the
 * line).
 */
int kp_validate_read_truth(const char *dir, struct kp_validate_row **rows, int *n,
			   struct kp_err *err);

/*
 * Predict row->workload's graph time: import its trace from dir into
 * scratch_db (replaced), store calib (a kplan-calibrate output file; NULL:
 * defaults), analyze, read region `label`. A workload whose trace is
 * missing or does not import gets found = 0 and a note, not an error;
 * errors are for the scratch database.
 */
int kp_validate_one(const char *dir, const char *calib, const char *label,
		    const char *scratch_db, struct kp_validate_row *row, struct kp_err *err);

#endif
