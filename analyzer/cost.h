/*
 * cost.h - the launch cost model's constants, per GPU and driver.
 *
 * `kplan calibrate` measures each quantity on a GPU and stores it in
 * kp_calibration (gpu_name, driver_version, quantity, value_ns) under the
 * quantity's stable string name (kp_cost_name). The analyzer and the planner
 * load the constants for a run's GPU with kp_cost_load / kp_cost_load_run;
 * what is not calibrated comes from the documented defaults (measured on
 * H100/H200, CUDA 13.0, driver 580: ../shared/design/ARCHITECTURE.md).
 *
 * The quantities (enum kp_cost_q), their stable names, units, defaults and
 * meaning are the rows of common/cost_quantities.def, which kplan-calibrate
 * prints from as well. All values are doubles, stored in
 * kp_calibration.value_ns whatever the unit.
 */
#ifndef KP_ANALYZER_COST_H
#define KP_ANALYZER_COST_H

#include <stdint.h>
#include <stdio.h>
#include "../common/cost_quantities.h"
#include "../db/db.h"

/* Where a loaded constant came from. */
enum kp_cost_src {
	KP_COST_SRC_DEFAULT = 0,      /* documented default */
	KP_COST_SRC_EXACT = 1,        /* kp_calibration, same GPU and driver */
	KP_COST_SRC_GPU = 2,          /* kp_calibration, same GPU, other driver */
};

struct kp_cost {
	double v[KP_COST__N];         /* index with enum kp_cost_q */
	unsigned char src[KP_COST__N];/* enum kp_cost_src per quantity */
	int n_calibrated;             /* quantities not from defaults */
	char gpu_name[128];           /* what was looked up ("" when unknown) */
	int driver_version;
};

/* Stable name of q ("launch_host_ns"), NULL when q is out of range. */
const char *kp_cost_name(int q);
/* Quantity for a stored name, or -1 when unknown. */
int kp_cost_from_name(const char *name);
/* One-line description of q (for reports and --help). */
const char *kp_cost_doc(int q);
/* The documented default of q. */
double kp_cost_default(int q);
/* q's unit (enum kp_cost_unit), -1 when q is out of range. */
int kp_cost_unit(int q);
/* Who measures q (enum kp_cost_by), -1 when q is out of range. */
int kp_cost_by(int q);

/*
 * Short kernels (fusion candidates) reach about this share of the DRAM
 * bandwidth: the bandwidth a fusion's saved traffic is valued at.
 */
#define KP_COST_SHORT_BW_SHARE 0.5

/*
 * The predicted saving of fusing memory-bound kernels, per occurrence, in
 * ns: saved_bytes of DRAM traffic (intermediates no longer written and read
 * back, inputs read once) at KP_COST_SHORT_BW_SHARE of dram_bytes_per_ns,
 * plus graph_node_ns per kernel saved. The score of the analyzer's fusion
 * candidates (without their occupancy penalty) and the gain of kplan.torch's
 * fusion groups (python/kplan/aten_plan.py computes it with the defaults).
 */
double kp_cost_fusion_gain_ns(const struct kp_cost *c, double saved_bytes,
			      double saved_kernels);

/* Fill c with the defaults (src all KP_COST_SRC_DEFAULT). */
void kp_cost_defaults(struct kp_cost *c);

/*
 * Load the constants for gpu_name + driver_version from kp_calibration:
 * rows for the exact GPU name and driver first; for quantities still
 * missing, the newest driver's rows for the same GPU name; the rest stay at
 * their defaults. gpu_name NULL or "" gives the defaults. A database without
 * kp_calibration (or read-only) is not an error. Returns 0 or a negative
 * KP_E* (sqlite failure).
 */
int kp_cost_load(struct kp_db *db, const char *gpu_name, int driver_version,
		 struct kp_cost *c, struct kp_err *err);

/* kp_cost_load for the GPU and driver recorded in run_id's kp_runs row. */
int kp_cost_load_run(struct kp_db *db, int64_t run_id, struct kp_cost *c,
		     struct kp_err *err);

/*
 * Store one measured constant (insert or replace) for gpu_name +
 * driver_version under kp_cost_name(q). n_samples may be 0. For
 * `kplan calibrate`; the caller owns the transaction.
 */
int kp_cost_store(struct kp_db *db, const char *gpu_name, int driver_version,
		  int q, double value, int64_t n_samples, struct kp_err *err);

/*
 * The text kplan-calibrate prints (and that a calibration file keeps):
 * "gpu NAME", "driver VERSION", then "QUANTITY VALUE N_SAMPLES" lines with
 * the names above. Unknown quantities and other lines are skipped with a
 * warning on stderr naming `what` (the program or file).
 */
struct kp_cost_file {
	char gpu[512];
	int driver;                   /* -1 until read */
	int n;                        /* rows */
	struct {
		int q;
		double value;
		long long n_samples;
	} row[KP_COST__N];
};

/* Read f to its end into cf. KP_EFORMAT when the gpu or driver line or
 * every quantity is missing. */
int kp_cost_read(FILE *f, const char *what, struct kp_cost_file *cf, struct kp_err *err);

/* kp_cost_read of the file at path. */
int kp_cost_read_path(const char *path, struct kp_cost_file *cf, struct kp_err *err);

/* Store every row of cf (kp_cost_store; the caller owns the transaction). */
int kp_cost_store_file(struct kp_db *db, const struct kp_cost_file *cf, struct kp_err *err);

/* Store cf in the database at db_path (created if missing), one transaction. */
int kp_cost_store_at(const char *db_path, const struct kp_cost_file *cf, struct kp_err *err);

#endif
