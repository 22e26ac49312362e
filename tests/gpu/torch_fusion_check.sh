#!/bin/bash
# torch_fusion_check.sh - fusion of pointwise ATen chains in kplan.torch on a
# GPU (part `torch_fusion` of gpu-check).
#
#   tests/gpu/torch_fusion_check.sh [BUILD] [OUTDIR]
#
# Runs tests/gpu/torch_fusion_ops.py (every catalog op and dtype, alone and in
# chains, fused against eager ATen bit for bit; fused regions under verify),
# tests/gpu/torch_foreach_ops.py (every _foreach_* op kplan.aten_foreach fuses,
# and four foreach optimizers' steps, bit for bit) and bench/torch_fusion.py on
# GPT-2, its MLP block, the Llama-style StaticCache decode (kplan with and
# without fusion against eager: RoPE with a parked chain, the KV cache updates,
# int64 positions) and a GPT-2 training step with AdamW (its 40 losses). Fails when a fused result differs from eager in
# exact mode, or when a kplan variant's output differs from eager's bits.
# Then the groups shipped with a plan (tests/gpu/torch_fusion_ship.py, GPT-2):
# kplan record + plan, a run with fuse="exact" that saves the groups beside the
# plan, kplan show / sign / check --trust, kplan precompile into an empty kernel
# cache, a second process under the trust key that must fuse with the shipped
# sources only, with no NVRTC compile and the logits bit-identical to eager; the
# same from a signed bundle holding the plan and one for another GPU (the entry's
# groups carried in); and a tampered source, in the bundle and beside the plan:
# check fails, the trusted process uses no shipped group. TORCH_FUSION_SHIP=0 skips that part,
# TORCH_FUSION_SHIP=only runs it alone.
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
ship() {
	local K=$B/bin/kplan P=$O/ship src
	rm -rf "$P" && mkdir -p "$P" || return 1
	"$K" record -o "$P/gpt2.db" -- python3 tests/gpu/torch_fusion_ship.py record \
		>"$P/record.log" 2>&1 || { echo "FAIL ship: kplan record (see $P/record.log)"; return 1; }
	"$K" analyze "$P/gpt2.db" >"$P/analyze.log" 2>&1 &&
		"$K" plan "$P/gpt2.db" -o "$P/gpt2.kplan" >"$P/plan.log" 2>&1 ||
		{ echo "FAIL ship: kplan analyze/plan (see $P/*.log)"; return 1; }
	python3 tests/gpu/torch_fusion_ship.py save "$P/gpt2.kplan" || { echo "FAIL ship: save"; return 1; }
	"$K" show "$P/gpt2.kplan" | tee "$P/show.log" | grep '^torch fusion groups: [1-9]' ||
		{ echo "FAIL ship: kplan show lists no torch fusion groups"; return 1; }
	"$K" keygen -o "$P/release.key" >/dev/null &&
		"$K" sign "$P/gpt2.kplan" --key "$P/release.key" &&
		"$K" check "$P/gpt2.kplan" --trust "$P/release.key.pub" ||
		{ echo "FAIL ship: sign / check --trust"; return 1; }
	# the kernels from `kplan precompile` (no GPU needed) into an empty cache
	KPLAN_CACHE_DIR=$P/cubins "$K" precompile "$P/gpt2.kplan" | tee "$P/precompile.log" ||
		{ echo "FAIL ship: kplan precompile"; return 1; }
	KPLAN_CACHE_DIR=$P/cubins KPLAN_RT_TRUST=$P/release.key.pub \
		python3 tests/gpu/torch_fusion_ship.py load "$P/gpt2.kplan" ||
		{ echo "FAIL ship: the second process did not use the shipped groups as it should"; return 1; }
	# a bundle carries the groups: the plan with one for another GPU (no groups),
	# signed; a process on this GPU uses the entry's groups only, without NVRTC
	"$K" plan "$P/gpt2.db" --cc 8.0 --gpu-name 'NVIDIA A100-SXM4-80GB' --sms 108 \
		-o "$P/a100.kplan" >"$P/plan-a100.log" 2>&1 &&
		"$K" bundle -o "$P/gpt2.kplanb" "$P/gpt2.kplan" "$P/a100.kplan" >"$P/bundle.log" &&
		"$K" show "$P/gpt2.kplanb" | tee "$P/show-bundle.log" |
		grep -q '[1-9][0-9]* torch fusion groups (plan-' &&
		"$K" sign "$P/gpt2.kplanb" --key "$P/release.key" >/dev/null &&
		"$K" check "$P/gpt2.kplanb" --trust "$P/release.key.pub" >"$P/check-bundle.log" ||
		{ echo "FAIL ship: bundle with torch fusion groups (see $P/*bundle*.log)"; return 1; }
	KPLAN_CACHE_DIR=$P/cubins KPLAN_RT_TRUST=$P/release.key.pub \
		python3 tests/gpu/torch_fusion_ship.py load "$P/gpt2.kplanb" ||
		{ echo "FAIL ship: a process did not use the bundle entry's groups as it should"; return 1; }
	src=$(ls "$P"/gpt2.kplanb/kpaten-*.cu | head -1)
	printf '// edited\n' >>"$src"
	if "$K" check "$P/gpt2.kplanb" --trust "$P/release.key.pub" >"$P/check-bundle-tampered.log" 2>&1; then
		echo "FAIL ship: kplan check accepted a bundle with a changed group source"; return 1
	fi
	KPLAN_RT_TRUST=$P/release.key.pub python3 tests/gpu/torch_fusion_ship.py load \
		"$P/gpt2.kplanb" --tampered || { echo "FAIL ship: tampered bundle"; return 1; }
	# a source changed after signing: check fails; the trusted process uses none
	src=$(ls "$P"/kpaten-*.cu | head -1)
	printf '// edited\n' >>"$src"
	if "$K" check "$P/gpt2.kplan" --trust "$P/release.key.pub" >"$P/check-tampered.log" 2>&1; then
		echo "FAIL ship: kplan check accepted a changed source"; return 1
	fi
	KPLAN_RT_TRUST=$P/release.key.pub python3 tests/gpu/torch_fusion_ship.py load "$P/gpt2.kplan" \
		--tampered || { echo "FAIL ship: tampered"; return 1; }
	echo "PASS ship: groups saved, signed, used by a second process without NVRTC, bit-identical; the same from a bundle"
}
if [ "${TORCH_FUSION_SHIP:-1}" = only ]; then
	ship || fail=1
	exit $fail
fi
python3 tests/gpu/torch_fusion_ops.py --lib "$KPLAN_RT_LIB" 2>&1 | tee "$O/ops.log"
[ "${PIPESTATUS[0]}" = 0 ] || { echo "FAIL torch_fusion_ops: a fused result differs from eager"; fail=1; }
python3 tests/gpu/torch_foreach_ops.py --lib "$KPLAN_RT_LIB" 2>&1 | tee "$O/foreach.log"
[ "${PIPESTATUS[0]}" = 0 ] ||
	{ echo "FAIL torch_foreach_ops: a foreach program differs from eager or did not fuse"; fail=1; }
python3 bench/torch_fusion.py --workloads "${TORCH_FUSION_WORKLOADS:-gpt2,mlp,llama,train}" --reps 3 2>&1 |
	tee "$O/bench.log"
[ "${PIPESTATUS[0]}" = 0 ] || { echo "FAIL torch_fusion bench exited non-zero"; fail=1; }
if grep -E '^\| [^|]+ \| kplan(-fuse)? \|.*\| False \|$' "$O/bench.log"; then
	echo "FAIL a kplan variant's output differs from eager"
	fail=1
fi
if [ "${TORCH_FUSION_SHIP:-1}" != 0 ]; then
	ship || fail=1
fi
exit $fail
