#!/bin/bash
# record_workflow.sh - the PyTorch workflow's traces against their graphs, on
# a GPU: each Hugging Face workload recorded with `kplan record` through
# kplan.torch (bench/record_workflow.py: region "step", no plan, the graph's
# path), then its step measured as one torch.cuda.graph without kplan.
#
#   bash bench/record_workflow.sh BUILD OUTDIR [WORKLOAD...]
#
# Writes OUTDIR/WORKLOAD_rec.db and OUTDIR/ground_truth_rec.csv (rows for
# `kplan validate`: export each database with `kplan export --chrome` into a
# corpus directory beside that GPU's calib.txt). Defaults: gpt2_fp16_t1
# bert_fp16_b1 gpt2_fp16_b8.
set -u
B=${1:?usage: record_workflow.sh BUILD OUTDIR [WORKLOAD...]}
O=${2:?usage: record_workflow.sh BUILD OUTDIR [WORKLOAD...]}
shift 2
W=("$@")
[ ${#W[@]} -gt 0 ] || W=(gpt2_fp16_t1 bert_fp16_b1 gpt2_fp16_b8)
case $B in /*) ;; *) B=$PWD/$B ;; esac   # both as given, before the cd
case $O in /*) ;; *) O=$PWD/$O ;; esac
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$O"
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} KPLAN_RT_LIB=$B/lib
rc=0
for w in "${W[@]}"; do
	rm -f "$O/${w}_rec.db"*
	"$B/bin/kplan" record -o "$O/${w}_rec.db" -- python3 bench/record_workflow.py "$w" \
		>"$O/${w}_rec.log" 2>&1 || rc=1
	# without libkplanrt the regions have no NVTX ranges: nothing to analyze
	if grep -q "cannot load libkplanrt" "$O/${w}_rec.log"; then
		echo "FAIL $w: kplan.torch could not load libkplanrt ($B/lib): no region ranges recorded"
		rc=1
	fi
	tail -3 "$O/${w}_rec.log"
done
python3 bench/record_workflow.py --graph "${W[@]}" >"$O/ground_truth_rec.csv" 2>"$O/graph.log" || rc=1
cat "$O/ground_truth_rec.csv"
exit $rc
