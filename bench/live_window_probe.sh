#!/bin/bash
# live_window_probe.sh - host time per launch (one-block kernels, 20,000 per
# timed loop, median of 11 loops) with `kplan record --profiler-api`: never
# started (the cost of being injected), and inside vs outside the window in
# one process (what tracing adds), with what the window traces narrowed by
# KPLAN_DISABLE to attribute it. Plain and fully recorded runs for reference.
#
#   bench/live_window_probe.sh [BUILD] [ROUNDS]
set -u
B=${1:-build}
R=${2:-2}
K=$B/bin/kplan
L="$B/gpu/collector_launch 20000 11"
DB=$(mktemp -d)/p.db
p() { "$@" 2>/dev/null | grep -o "median_ns_per_launch[_in]* [0-9.]*" | tr '\n' ' '; echo; }
for r in $(seq "$R"); do
	echo "round $r"
	echo "  plain:                                 $(p $L)"
	echo "  --profiler-api, never started:         $(p "$K" record -o "$DB" --profiler-api -- $L)"
	echo "  --profiler-api window (out, in):       $(p "$K" record -o "$DB" --profiler-api -- $L window)"
	echo "  same, kernel records only in window:   $(KPLAN_DISABLE=api p "$K" record -o "$DB" --profiler-api -- $L window)"
	echo "  same, API records only in window:      $(KPLAN_DISABLE=kernel p "$K" record -o "$DB" --profiler-api -- $L window)"
	echo "  recorded, no window:                   $(p "$K" record -o "$DB" -- $L)"
	echo "  recorded, API rows from callbacks:     $(KPLAN_API_CALLBACKS=1 p "$K" record -o "$DB" -- $L)"
	echo "  API records only (CUPTI's):            $(KPLAN_DISABLE=kernel p "$K" record -o "$DB" -- $L)"
	echo "  API records only (callbacks):          $(KPLAN_DISABLE=kernel KPLAN_API_CALLBACKS=1 p "$K" record -o "$DB" -- $L)"
done
rm -rf "$(dirname "$DB")"
