#!/bin/bash
# graph_nodes.sh - where the time of a hand-written graph goes, node by node.
#
#   bench/graph_nodes.sh [BUILD] [OUTDIR]
#
# For each example (mlp, solver, decode): the plain graph and eager runs
# (RESULT and BODY lines), then the same under `kplan record` with few steps,
# exported as CSV: every kernel (start, end, stream, graph ids, PDL flag,
# short name), memcpy, memset and runtime call. The graph run's BODY replays
# (back to back) are in its trace too: what the cost model predicts is their
# period. OUTDIR/nodes.tar.gz holds the CSVs; the databases are removed.
set -u
B=${1:-build}
O=${2:-${OUT:-/tmp/kplan-graph-nodes}}
K=$B/bin/kplan
mkdir -p "$O/csv"
LOG=$O/graph_nodes.log
: >"$LOG"
steps() { case $1 in mlp) echo 40 ;; solver) echo 400 ;; decode) echo 300 ;; esac; }
for ex in mlp solver decode; do
	for mode in graph eager; do
		for _ in 1 2; do
			echo "== $ex $mode: $("$B/bin/ex_$ex" "$mode" 2>>"$LOG" | grep '^BODY\|^RESULT' | tr '\n' ' ')" |
				tee -a "$LOG"
		done
		db=$O/$ex-$mode.db
		rm -f "$db"
		"$K" record -o "$db" -- "$B/bin/ex_$ex" "$mode" --steps "$(steps "$ex")" >>"$LOG" 2>&1 ||
			echo "record $ex $mode failed" | tee -a "$LOG"
		"$K" export "$db" --csv "SELECT k.start, k.end, k.streamId, k.graphId, k.graphNodeId,
			k.correlationId, coalesce(a.pdl, 0) AS pdl, k.gridX, k.blockX, s.value AS name
			FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
			LEFT JOIN kp_launch_attrs a ON a.runId = k.runId AND a.correlationId = k.correlationId
			ORDER BY k.start" >"$O/csv/$ex-$mode-kernels.csv" 2>>"$LOG"
		"$K" export "$db" --csv "SELECT start, end, streamId, bytes, copyKind, graphNodeId
			FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY start" >"$O/csv/$ex-$mode-memcpy.csv" 2>>"$LOG"
		"$K" export "$db" --csv "SELECT start, end, streamId, bytes, graphNodeId
			FROM CUPTI_ACTIVITY_KIND_MEMSET ORDER BY start" >"$O/csv/$ex-$mode-memset.csv" 2>>"$LOG"
		"$K" export "$db" --csv "SELECT r.start, r.end, r.correlationId, s.value AS name
			FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
			ORDER BY r.start" >"$O/csv/$ex-$mode-api.csv" 2>>"$LOG"
		rm -f "$db" "$db-wal" "$db-shm"
	done
done
tar -C "$O" -czf "$O/nodes.tar.gz" csv && rm -rf "$O/csv"
grep "^==" "$LOG"
