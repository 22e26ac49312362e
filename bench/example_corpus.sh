#!/bin/bash
# example_corpus.sh - add the C examples to a cost-model validation corpus.
#
#   bench/example_corpus.sh [BUILD] DIR
#
# On a GPU, for each workload below: `kplan record` of the example run
# through the runtime with no plan (each region an NVTX range, every kernel
# eager), exported with `kplan export --chrome` to DIR/WORKLOAD.json.gz; the
# hand-written graph's replay period per region occurrence (the example's
# BODY line, best of 3 runs) as graph_ms, the eager step (default length) as
# eager_ms. The rows are merged into DIR/ground_truth.csv (written by
# bench/cost_corpus.py, or created) with a label column naming the region;
# DIR/calib.txt is written by kplan-calibrate when missing.
# `kplan validate DIR` then checks the cost model on them.
#
# Few steps keep the traces small: decode at 24 tokens (its KV length 128
# graph), with and without programmatic dependent launch and pre-wait weight
# loads; solver's region is a block of 10 iterations.
set -u
B=${1:-build}
D=${2:?usage: example_corpus.sh BUILD DIR}
K=$B/bin/kplan
mkdir -p "$D"
LOG=$D/example_corpus.log
: >"$LOG"
[ -s "$D/calib.txt" ] || "$B/bin/kplan-calibrate" >"$D/calib.txt" 2>>"$LOG"
# name example steps label steps-per-occurrence environment
W="mlp_b8 mlp 30 mlp.forward 1 -
solver_n512 solver 200 solver.block 10 -
decode_t128 decode 24 decode.step 1 -
decode_t128_nopdl decode 24 decode.step 1 EX_DECODE_PDL=0
decode_t128_noprefetch decode 24 decode.step 1 EX_DECODE_PREFETCH=0"
rows=$D/examples.csv
echo "workload,eager_ms,graph_ms,label" >"$rows"
field() { awk -v k="$1" -v f="$2" '$1 == k {print $f}' | sort -g | head -1; }
while read -r name ex steps label per envs; do
	[ "$envs" = - ] && envs=
	db=$D/$name.db
	rm -f "$db" "$db-wal" "$db-shm"
	if ! env $envs "$K" record -o "$db" -- "$B/bin/ex_$ex" runtime --steps "$steps" >>"$LOG" 2>&1 ||
		! "$K" export "$db" --chrome "$D/$name.json" >>"$LOG" 2>&1; then
		echo "example_corpus: $name: record or export failed (see $LOG)" >&2
		continue
	fi
	rm -f "$db" "$db-wal" "$db-shm" "$D/$name.json.gz"
	gzip -9 "$D/$name.json"
	g=$(for _ in 1 2 3; do env $envs "$B/bin/ex_$ex" graph --steps "$steps" 2>>"$LOG"; done |
		field BODY 4)
	e=$(for _ in 1 2; do env $envs "$B/bin/ex_$ex" eager 2>>"$LOG"; done | field RESULT 7)
	if [ -z "$g" ] || [ -z "$e" ]; then
		echo "example_corpus: $name: no BODY or RESULT line (see $LOG)" >&2
		continue
	fi
	awk -v n="$name" -v e="$e" -v g="$g" -v p="$per" -v l="$label" \
		'BEGIN { printf "%s,%.4f,%.4f,%s\n", n, e * p / 1e3, g * p / 1e3, l }' | tee -a "$rows"
done <<<"$W"
# merge: the examples' rows replace earlier ones of the same name
python3 - "$D/ground_truth.csv" "$rows" <<'EOF'
import csv, os, sys
truth, new = sys.argv[1], sys.argv[2]
old = list(csv.DictReader(open(truth))) if os.path.exists(truth) else []
add = list(csv.DictReader(open(new)))
names = {r["workload"] for r in add}
rows = [r for r in old if r["workload"] not in names] + add
cols = []
for r in rows:
    cols += [c for c in r if c not in cols]
with open(truth, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=cols, restval="", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
EOF
rm -f "$rows"
