#!/bin/bash
# example_corpus.sh - add the C examples and the corpus programs to a
# cost-model validation corpus.
#
#   bench/example_corpus.sh [BUILD] DIR
#
# On a GPU, for each workload below: `kplan record` of the program run
# through the runtime with no plan (each region an NVTX range, every kernel
# eager), exported with `kplan export --chrome` to DIR/WORKLOAD.json.gz; the
# hand-written graph's replay period per region occurrence (the program's
# BODY line, best of 3 runs) as graph_ms, the eager step (default length,
# best of 2 runs) times the steps per occurrence as eager_ms. The rows are
# merged into DIR/ground_truth.csv (written by bench/cost_corpus.py, or
# created) with a label column naming the region; DIR/calib.txt is written
# by kplan-calibrate when missing. `kplan validate DIR` then checks the cost
# model on them.
#
# Two kinds of workload:
#   ex_X          (examples/X/) recorded as `ex_X runtime --steps N`; graph_ms
#                 from `ex_X graph --steps N` ("BODY X replay_us_per_step T":
#                 per step, times the steps per occurrence); eager_ms from
#                 `ex_X eager` (RESULT field 7)
#   corpus_NAME   (examples/corpus/NAME.cu) recorded as `corpus_NAME --steps
#                 N` (libkplanrt without a plan); graph_ms from `corpus_NAME
#                 --graph-body --steps N` ("BODY <label> replay_us T": one
#                 region call captured by hand, T already per occurrence);
#                 eager_ms from `corpus_NAME --eager` (RESULT field 8). One
#                 workload per region kplan graphs (those eager by design are
#                 left out), named corpus_<label with . as _>; every region
#                 runs once per step. Where a program has two regions
#                 (legacy_launch, memset, per_thread, side_streams,
#                 host_callback) its eager step includes the other region too.
#
# Few steps keep the traces small: decode at 24 tokens (its KV length 128
# graph), with and without programmatic dependent launch and pre-wait weight
# loads; solver's region is a block of 10 iterations; the corpus programs
# 20 steps (warmup_only's first 2 calls are its library's warm-up).
set -u
B=${1:-build}
D=${2:?usage: example_corpus.sh BUILD DIR}
K=$B/bin/kplan
mkdir -p "$D"
LOG=$D/example_corpus.log
: >"$LOG"
[ -s "$D/calib.txt" ] || "$B/bin/kplan-calibrate" >"$D/calib.txt" 2>>"$LOG"
# name example steps label steps-per-occurrence environment (example: X for
# ex_X, corpus_NAME for a corpus program)
W="mlp_b8 mlp 30 mlp.forward 1 -
solver_n512 solver 200 solver.block 10 -
decode_t128 decode 24 decode.step 1 -
decode_t128_nopdl decode 24 decode.step 1 EX_DECODE_PDL=0
decode_t128_noprefetch decode 24 decode.step 1 EX_DECODE_PREFETCH=0
corpus_legacy_eval corpus_legacy_launch 20 legacy.eval 1 -
corpus_lt_train corpus_cublaslt 20 lt.train 1 -
corpus_memset_train corpus_memset 20 memset.train 1 -
corpus_seed_train corpus_seed_lr 20 seed.train 1 -
corpus_ptds_train corpus_per_thread 20 ptds.train 1 -
corpus_ptds_eval corpus_per_thread 20 ptds.eval 1 -
corpus_side_fork_join corpus_side_streams 20 side.fork_join 1 -
corpus_cb_hostfunc corpus_host_callback 20 cb.hostfunc 1 -
corpus_ma_train corpus_malloc_async 20 ma.train 1 -
corpus_wu_train corpus_warmup_only 20 wu.train 1 -"
rows=$D/examples.csv
echo "workload,eager_ms,graph_ms,label" >"$rows"
# field KEY F [NAME]: the smallest field F of the lines starting with KEY
# (and NAME as field 2 when given); "-" (not measured) is no value
field() {
	awk -v k="$1" -v f="$2" -v n="${3-}" '$1 == k && (n == "" || $2 == n) && $f != "-" {print $f}' |
		sort -g | head -1
}
while read -r name ex steps label per envs; do
	[ "$envs" = - ] && envs=
	case $ex in
	corpus_*)   # a corpus program: flags, BODY per region call, RESULT field 8
		bin=$B/bin/$ex rec= graph=--graph-body eager=--eager gsel=$label rf=8 gp=1 ;;
	*)          # an example: a mode, BODY per step, RESULT field 7
		bin=$B/bin/ex_$ex rec=runtime graph=graph eager=eager gsel= rf=7 gp=$per ;;
	esac
	db=$D/$name.db
	rm -f "$db" "$db-wal" "$db-shm"
	if ! env $envs "$K" record -o "$db" -- "$bin" $rec --steps "$steps" >>"$LOG" 2>&1 ||
		! "$K" export "$db" --chrome "$D/$name.json" >>"$LOG" 2>&1; then
		echo "example_corpus: $name: record or export failed (see $LOG)" >&2
		continue
	fi
	rm -f "$db" "$db-wal" "$db-shm" "$D/$name.json.gz"
	gzip -9 "$D/$name.json"
	g=$(for _ in 1 2 3; do env $envs "$bin" $graph --steps "$steps" 2>>"$LOG"; done |
		field BODY 4 "$gsel")
	e=$(for _ in 1 2; do env $envs "$bin" $eager 2>>"$LOG"; done | field RESULT "$rf")
	if [ -z "$g" ] || [ -z "$e" ]; then
		echo "example_corpus: $name: no BODY or RESULT line (see $LOG)" >&2
		continue
	fi
	awk -v n="$name" -v e="$e" -v g="$g" -v p="$per" -v gp="$gp" -v l="$label" \
		'BEGIN { printf "%s,%.4f,%.4f,%s\n", n, e * p / 1e3, g * gp / 1e3, l }' | tee -a "$rows"
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
