/*
 * cost_quantities.h - the launch cost model's quantities (enum kp_cost_q),
 * their units and who measures them, from the one table in
 * cost_quantities.def. Included by the analyzer's cost model
 * (analyzer/cost.h: names, defaults, loading from kp_calibration) and by
 * kplan-calibrate (runtime/calibrate.cu, which prints what it measures
 * under the table's names), so the two agree on every name. Valid C and
 * C++ (nvcc compiles kplan-calibrate); declares no objects.
 */
#ifndef KP_COMMON_COST_QUANTITIES_H
#define KP_COMMON_COST_QUANTITIES_H

/* The quantities, in the table's (stable) order. */
enum kp_cost_q {
#define KP_COST_Q(id, name, unit, by, def, doc) KP_COST_##id,
#include "cost_quantities.def"
	KP_COST__N
};

/* What a quantity's value counts (cost_quantities.def, UNIT). */
enum kp_cost_unit {
	KP_COST_UNIT_NS = 0,          /* nanoseconds (name ends in _ns) */
	KP_COST_UNIT_BYTES,           /* bytes (_bytes) */
	KP_COST_UNIT_BYTES_PER_NS,    /* bytes per nanosecond, GB/s (_bytes_per_ns) */
};

/* Who measures a quantity (cost_quantities.def, BY). */
enum kp_cost_by {
	KP_COST_BY_CALIBRATE = 0,     /* kplan-calibrate, on the GPU */
	KP_COST_BY_WATCH_CHECK,       /* tests/gpu/watch_check.sh; only the default is used */
	KP_COST_BY_CHOICE,            /* a threshold, not measured */
};

#endif
