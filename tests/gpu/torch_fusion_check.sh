#!/bin/bash
# torch_fusion_check.sh - fusion of pointwise ATen chains in kplan.torch on a
# GPU (part `torch_fusion` of gpu-check).
#
#   tests/gpu/torch_fusion_check.sh [BUILD] [OUTDIR]
#
# Runs tests/gpu/torch_fusion_ops.py (every catalog op and dtype, alone and in
# chains, fused against eager ATen bit for bit; fused regions under verify)
# and bench/torch_fusion.py on GPT-2 and its MLP block (kplan with and without
# fusion against eager). Fails when a fused result differs from eager in
# exact mode, or when a kplan variant's output differs from eager's bits.
# Needs python3 with CUDA torch (and transformers for the benchmark).
set -u
B=${1:-build}
O=${2:-${OUT:-/tmp/kplan-torch-fusion-check}}
mkdir -p "$O"
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	echo "torch_fusion_check: no python3 with CUDA torch here; nothing to run" >&2
	exit 2
fi
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} KPLAN_RT_LIB=$B/lib/libkplanrt.so
export KPLAN_CACHE_DIR=$O/cache
fail=0
python3 tests/gpu/torch_fusion_ops.py --lib "$KPLAN_RT_LIB" 2>&1 | tee "$O/ops.log"
[ "${PIPESTATUS[0]}" = 0 ] || { echo "FAIL torch_fusion_ops: a fused result differs from eager"; fail=1; }
python3 bench/torch_fusion.py --workloads "${TORCH_FUSION_WORKLOADS:-gpt2,mlp}" --reps 3 2>&1 |
	tee "$O/bench.log"
[ "${PIPESTATUS[0]}" = 0 ] || { echo "FAIL torch_fusion bench exited non-zero"; fail=1; }
if grep -E '^\| [a-z0-9 ]+ \| kplan(-fuse)? \|.*\| False \|$' "$O/bench.log"; then
	echo "FAIL a kplan variant's output differs from eager"
	fail=1
fi
exit $fail
