#!/bin/bash
# gpu-check.sh - every GPU end-to-end check, in one go (`make gpu-check`).
#
#   tests/gpu/gpu-check.sh [BUILD] [OUTDIR]
#
# Runs, each under its own time limit and logging to OUTDIR/<name>.log:
#   collector  tests/gpu/collector_check.sh  (kplan record on real programs, overhead)
#   runtime    tests/gpu/runtime_check.sh    (libkplanrt on the examples, safety checks)
#   pipeline   tests/gpu/pipeline_check.sh   (record -> analyze -> plan -> runtime)
#   fusion     tests/gpu/fusion_check.sh     (when present)
#   stress     tests/gpu/stress_check.sh     (when present)
#   corpus     tests/gpu/corpus_check.sh     (real-style programs: record -> plan -> apply vs eager)
#   watch      tests/gpu/watch_check.sh      (the runtime's check before a first capture, 24 cases)
#   torch      tests/gpu/torch_check.sh      (kplan.torch: record -> plan -> apply, vs eager and graph)
#   torch_fusion tests/gpu/torch_fusion_check.sh (kplan.torch's ATen fusion: every op vs eager, GPT-2,
#              a Llama-style decode, groups shipped with a signed plan and used by a second process)
#   sign       tests/gpu/sign_check.sh       (signed plans: trusted key replays, others stay eager)
#   bundle     tests/gpu/bundle_check.sh     (plan bundles: this GPU's entry applies, in any
#              order; one tampered entry makes a signed bundle untrusted)
#   readme     tests/gpu/readme_check.sh     (the README's PyTorch walk-through, line by line)
#   record_path tests/gpu/record_path_check.sh (the PyTorch workflow's recordings of GPT-2 and
#              BERT, on the path their graphs take, predict their graphs within 20 %)
#   never_slower tests/gpu/never_slower_check.sh (whole PyTorch runs under kplan.torch never
#              below 0.99x eager, graphed or with every region eager; the C programs'
#              never-slower checks are in pipeline and corpus)
#   ranks      tests/gpu/ranks_check.sh      (two GPUs: a torchrun job recorded, its ranks
#              compared; not in the default list: GPU_CHECK_ONLY=ranks)
#   ddp        tests/gpu/ddp_check.sh        (two GPUs and NCCL: examples/ddp eager, graph and
#              its generated plan on both ranks, one rank blocking; GPU_CHECK_ONLY=ddp)
# and prints one line per part, then each part's table. Exit 1 if any failed.
# GPU_CHECK_ONLY="runtime pipeline" runs a subset.
set -u
B=${1:-build}
O=${2:-${OUT:-/tmp/kplan-gpu-check}}
mkdir -p "$O"
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "gpu-check: no NVIDIA GPU here (nvidia-smi -L failed); nothing to run" >&2
	exit 2
fi
nvidia-smi -L | tee "$O/device.txt"
parts=${GPU_CHECK_ONLY:-"collector runtime pipeline fusion stress corpus watch torch torch_fusion sign bundle readme record_path never_slower"}
declare -A limit=([collector]=330 [runtime]=150 [pipeline]=300 [fusion]=180 [stress]=120 [corpus]=480 [watch]=120 [torch]=400 [torch_fusion]=540 [sign]=60 [bundle]=60 [readme]=180 [record_path]=240 [ranks]=300 [ddp]=420 [never_slower]=480)
summary=$O/summary.txt
: >"$summary"
fail=0
for p in $parts; do
	script=tests/gpu/${p}_check.sh
	if [ ! -f "$script" ]; then
		echo "skip  $p (no $script)" >>"$summary"
		continue
	fi
	t0=$(date +%s)
	timeout "${limit[$p]:-120}" bash "$script" "$B" "$O/$p" >"$O/$p.log" 2>&1
	rc=$?
	t=$(( $(date +%s) - t0 ))
	case $rc in
	0) echo "ok    $p (${t}s)" >>"$summary" ;;
	124) echo "FAIL  $p: timed out after ${t}s" >>"$summary"; fail=1 ;;
	*) echo "FAIL  $p: exit $rc (${t}s, see $p.log)" >>"$summary"; fail=1 ;;
	esac
done
for p in $parts; do
	[ -f "$O/$p.log" ] || continue
	echo "=== $p"
	grep -E '^(FAIL|WARN|PERF|MISS)|^[a-z]+ +[0-9.]+ ' "$O/$p.log" | head -40
	tail -n 12 "$O/$p.log"
done
echo "=== summary"
cat "$summary"
exit $fail
