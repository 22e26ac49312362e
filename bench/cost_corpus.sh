#!/bin/bash
# cost_corpus.sh - write a whole validation corpus for this GPU, on a GPU.
#
#   bench/cost_corpus.sh [BUILD] DIR
#
# kplan-calibrate (DIR/calib.txt), the PyTorch workloads
# (bench/cost_corpus.py), then the C examples (bench/example_corpus.sh), all
# on the same machine. Check it with `kplan validate DIR`.
set -u
B=${1:-build}
D=${2:?usage: cost_corpus.sh BUILD DIR}
mkdir -p "$D"
nvidia-smi -L
"$B/bin/kplan-calibrate" >"$D/calib.txt" 2>"$D/calib.log" || { echo "kplan-calibrate failed" >&2; exit 1; }
cat "$D/calib.txt"
grep "traced gap" "$D/calib.log"
t0=$(date +%s)
python3 bench/cost_corpus.py --out "$D" >"$D/cost_corpus.log" 2>&1 || echo "cost_corpus.py: exit $?" >&2
echo "PyTorch workloads: $(( $(date +%s) - t0 )) s"
bash bench/example_corpus.sh "$B" "$D" || echo "example_corpus.sh: exit $?" >&2
cat "$D/ground_truth.csv"
