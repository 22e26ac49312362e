#!/bin/bash
# record_path_check.sh - the documented PyTorch workflow's traces predict
# their graphs. bench/record_workflow.sh records GPT-2 small (one token, and
# 8 x 128) and BERT-base through kplan.torch with no plan (so on the path
# its graph takes) and measures each step as one CUDA graph captured as kplan.torch
# captures it (bench/graph_step.py kplan_path); each database is
# exported and validated with this GPU's corpus calibration
# (bench/cost_corpus/<gpu>/calib.txt). Passes when every workload is within
# +-20 % (kplan validate --max-error 20) and each recorded step took the
# library path its graph was captured on (kplan.torch's capture: by default
# BERT's eager path, and GPT-2's graph path, whose eager mask check
# synchronises; with KPLAN_TORCH_LIB_PATH=graph, the graph's path for all).
#
#   tests/gpu/record_path_check.sh BUILD OUTDIR
#
# RW_REUSE=1 validates what OUTDIR holds from an earlier run (the databases
# and ground_truth_rec.csv) without recording: no GPU needed.
set -u
B=${1:?usage: record_path_check.sh BUILD OUTDIR}
O=${2:?usage: record_path_check.sh BUILD OUTDIR}
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$O"
case $B in /*) ;; *) B=$PWD/$B ;; esac
if [ "${RW_REUSE:-0}" != 1 ]; then
	bash bench/record_workflow.sh "$B" "$O" || { echo "FAIL bench/record_workflow.sh"; exit 1; }
fi
gpu=$(awk -F, 'NR == 1 { print $7 }' "$O/ground_truth_rec.csv" 2>/dev/null)
case $gpu in
*H100*) c=h100 ;;
*H200*) c=h200 ;;
*) echo "FAIL no corpus calibration for the GPU '$gpu' ($O/ground_truth_rec.csv)"; exit 1 ;;
esac
V=$O/corpus
rm -rf "$V"
mkdir -p "$V"
cp "bench/cost_corpus/$c/calib.txt" "$V/"
{ head -1 "bench/cost_corpus/$c/ground_truth.csv"; cat "$O/ground_truth_rec.csv"; } >"$V/ground_truth.csv"
for db in "$O"/*_rec.db; do
	w=$(basename "$db" .db)
	"$B/bin/kplan" export "$db" --chrome "$V/$w.json" >/dev/null 2>&1 && gzip -f "$V/$w.json" ||
		{ echo "FAIL kplan export $db"; exit 1; }
done
"$B/bin/kplan" validate "$V" --max-error 20 >"$O/validate.txt" 2>&1
rc=$?
cat "$O/validate.txt"
for log in "$O"/*_rec.log; do
	w=$(basename "$log" _rec.log)
	rec=$(sed -n "s/^$w: recorded path: //p" "$log")
	cap=$(sed -n "s/^$w: captured path: //p" "$O/graph.log")
	if [ -z "$rec" ] || [ "$rec" != "$cap" ]; then
		echo "FAIL $w: recorded on the '$rec' path, its graph captured on the '$cap' path"
		rc=1
	else
		echo "$w: recorded and captured on the $rec path"
	fi
done
bert=$(sed -n 's/^bert_fp16_b1: captured path: //p' "$O/graph.log")
want=$(python3 -c 'import kplan.torch as kt; print(kt._lib_path_setting(None))')
if [ -f "$O/bert_fp16_b1_rec.log" ] && [ "$want" = eager ] && [ "$bert" != eager ]; then
	echo "FAIL BERT's graph was captured on the '$bert' path, not transformers' eager path"
	rc=1
fi
# the kernels say which path the recording took: BERT's eager path has 165 a
# step, its graph's path 376 (H100) or 388 (H200)
nodes=$(awk '$1 == "bert_fp16_b1_rec" { print $2 }' "$O/validate.txt")
if ! [ "$nodes" -gt 0 ] 2>/dev/null; then
	echo "FAIL BERT's recorded step was not analyzed (nodes '$nodes')"
	rc=1
elif [ "$bert" = graph ] && [ "$nodes" -le 300 ]; then
	echo "FAIL BERT's recorded step has $nodes kernels: the eager path, not the graph's"
	rc=1
elif [ "$bert" = eager ] && [ "$nodes" -gt 300 ]; then
	echo "FAIL BERT's recorded step has $nodes kernels: the graph's path, not the eager one"
	rc=1
fi
[ $rc -eq 0 ] && echo "record_path: PASS ($gpu)" || echo "record_path: FAIL ($gpu)"
exit $rc
