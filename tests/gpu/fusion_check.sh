#!/bin/bash
# fusion_check.sh - GPU end-to-end check of kernel fusion (fusion/FUSION.md).
#
#   tests/gpu/fusion_check.sh [BUILD_DIR] [OUT_DIR]
#
# Needs, built in BUILD_DIR: kplan, kplan-mkplan, libkplanrt, ex_mlp,
# ex_decode, fusion_ew (tests/gpu/fusion_ew.cu; built here with nvcc when
# missing). Steps:
#   1. a graph-only plan (kplan-mkplan) for ew.chain, mlp.forward, decode.step
#   2. each workload runs once under it with KPLAN_FUSION_TRACE: the captured
#      kernel names per region
#   3. kplan plan --base --kernels --catalog fusion/catalog/examples.kpcat:
#      the fused plan and its kpfuse-*.cu sources
#   4. correctness: fusion_ew (pure elementwise) must be bit-identical to
#      eager; ex_mlp (bias+residual -> layernorm, a row reduction) within the
#      tolerance of FUSION.md; decode's hash is reported
#   5. eager vs graph-only vs fused+graph, best of ROUNDS, per region
#   6. safety: an edited source (hash mismatch) leaves the graph unfused
#      with an output identical to the graph-only run; cold vs warm NVRTC cache
# Exit status 1 when a correctness check fails (speed targets print PASS/MISS).
set -u
B=${1:-build-fus}
OUT=${2:-${OUT:-/tmp/kplan-fusion-check}}
BIN=$B/bin
CAT=${CAT:-fusion/catalog/examples.kpcat}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
LOG=$OUT/fusion_check.log
: >"$LOG"
export KPLAN_CACHE_DIR=$OUT/cache
fail=0

note() { echo "$*" | tee -a "$LOG"; }

if [ ! -x "$BIN/fusion_ew" ]; then
	${NVCC:-nvcc} -O2 -std=c++17 -arch=sm_90 -Iinclude -cudart shared -o "$BIN/fusion_ew" \
		tests/gpu/fusion_ew.cu -L"$B/lib" -lkplanrt -Xlinker -rpath,'$ORIGIN/../lib' || exit 2
fi
dev=$("$BIN/ex_mlp" device) || { note "no GPU: $dev"; exit 2; }
note "device: $dev"
cc=$(echo "$dev" | awk '{print $2}')
cuda=$(echo "$dev" | awk '{print $4}')
driver=$(echo "$dev" | awk '{print $6}')
sm=$(echo "$dev" | awk '{print $8}')
gpu=$(echo "$dev" | sed 's/.* gpu //')
"$BIN/kplan-mkplan" --cc "$cc" --cuda "$cuda" --driver "$driver" --sm "$sm" --gpu "$gpu" \
	-o "$OUT/base.kplan" ew.chain:graph:warmup=1:keys=1:kernels=4 \
	mlp.forward:graph:warmup=2:keys=1:kernels=1000 \
	decode.step:graph:warmup=1:keys=8:kernels=100000 || exit 2

# run EXE MODE PLAN STEPS [ENV...] -> "us hash" (full output in the log);
# PLAN and STEPS may be "" (none, the example's default)
run() {
	local exe=$1 mode=$2 plan=$3 steps=$4; shift 4
	local o
	o=$(env "$@" KPLAN_RT_STATS=1 "$BIN/$exe" "$mode" $plan ${steps:+--steps $steps} 2>&1)
	echo "== $exe $mode $plan $steps $*" >>"$LOG"
	echo "$o" >>"$LOG"
	echo "$o" | awk '/^RESULT/ {print $7, $9}'
}
stat_of() { # EXE MODE PLAN STEPS STAT [ENV...]: one counter from KPLAN_RT_STATS
	local exe=$1 mode=$2 plan=$3 steps=$4 k=$5; shift 5
	env "$@" KPLAN_RT_STATS=1 "$BIN/$exe" "$mode" $plan ${steps:+--steps $steps} 2>&1 |
		tee -a "$LOG" | awk -v k="kplan-rt: $k" 'index($0, k " ") == 1 {print $3}'
}

# 2-3: trace, plan
rm -f "$OUT/trace.tsv"
for exe in fusion_ew ex_mlp ex_decode; do
	KPLAN_FUSION_TRACE=$OUT/trace.tsv "$BIN/$exe" runtime "$OUT/base.kplan" --steps 5 >>"$LOG" 2>&1
done
"$BIN/kplan" plan --fusion tolerant --base "$OUT/base.kplan" --kernels "$OUT/trace.tsv" --catalog "$CAT" \
	-o "$OUT/fused.kplan" 2>&1 | tee -a "$LOG" || exit 2
for r in ew.chain mlp.forward decode.step; do
	n=$(awk -v r="$r" '$1 == "region" && $2 == r' "$OUT/fused.kplan" | wc -l)
	k=$(awk -F'\t' -v r="$r" '$1 == r' "$OUT/trace.tsv" | wc -l)
	note "plan: region $r: $k kernels captured, $n fusion groups"
	[ "$n" = 0 ] && awk -F'\t' -v r="$r" '$1 == r && $2 < 8 {print "    kernel " $2 ": " $3}' "$OUT/trace.tsv" | tee -a "$LOG"
done

# 4: correctness
note ""
note "correctness:"
read -r _ he < <(run fusion_ew eager "" 200)
read -r _ hf < <(run fusion_ew runtime "$OUT/fused.kplan" 200)
app=$(stat_of fusion_ew runtime "$OUT/fused.kplan" 200 fusion.applied)
if [ -n "$he" ] && [ "$he" = "$hf" ] && [ "${app:-0}" -ge 1 ]; then
	note "  PASS fusion_ew: elementwise chain fused ($app applied), output bit-identical to eager ($he)"
else
	note "  FAIL fusion_ew: eager $he fused $hf applied ${app:-0}"; fail=1
fi
steps=200
run ex_mlp eager "" $steps EX_MLP_DUMP="$OUT/mlp_eager.bin" >/dev/null
run ex_mlp runtime "$OUT/base.kplan" $steps EX_MLP_DUMP="$OUT/mlp_graph.bin" >/dev/null
app=$(stat_of ex_mlp runtime "$OUT/fused.kplan" $steps fusion.applied EX_MLP_DUMP="$OUT/mlp_fused.bin")
python3 - "$OUT" "${app:-0}" <<'EOF' | tee -a "$LOG"
import sys, numpy as np
d, app = sys.argv[1], int(sys.argv[2])
e = np.fromfile(d + "/mlp_eager.bin", np.float32)
g = np.fromfile(d + "/mlp_graph.bin", np.float32)
f = np.fromfile(d + "/mlp_fused.bin", np.float32)
scale = float(np.max(np.abs(e)))
err = float(np.max(np.abs(f - e)))
tol = 1e-4 * scale
ok = app >= 1 and e.size == f.size and err <= tol and np.array_equal(e, g)
print("  %s ex_mlp: %d chains fused per capture; graph-only bit-identical to eager: %s; "
      "fused max |diff| %.3g (max |out| %.3g, tolerance 1e-4 x max = %.3g), %d of %d values differ"
      % ("PASS" if ok else "FAIL", app, np.array_equal(e, g), err, scale, tol,
         int(np.count_nonzero(f != e)), e.size))
sys.exit(0 if ok else 1)
EOF
[ "${PIPESTATUS[0]}" = 0 ] || fail=1
read -r _ he < <(run ex_decode eager "" "")
read -r _ hf < <(run ex_decode runtime "$OUT/fused.kplan" "")
app=$(stat_of ex_decode runtime "$OUT/fused.kplan" "" fusion.applied)
if [ -n "$he" ] && [ "$he" = "$hf" ] && [ "${app:-0}" -ge 1 ]; then
	note "  PASS decode (fp16): ${app:-0} chains fused per run, output bit-identical to eager ($he)"
else
	note "  FAIL decode (fp16): eager $he fused-plan $hf (${app:-0} chains fused)"; fail=1
fi
stat_of ex_decode runtime "$OUT/fused.kplan" "" fusion.failures >/dev/null
grep "fusion.failures\|fusion-" "$LOG" | sort | uniq -c | head -8 | tee -a "$LOG"

# 5: timing
note ""
note "timing (best of $ROUNDS, us per region call):"
printf "%-10s %-12s %10s %10s %10s %9s %9s\n" workload region eager_us graph_us fused_us \
	fused/gr fused/eag | tee -a "$LOG"
for w in "fusion_ew ew.chain" "ex_mlp mlp.forward" "ex_decode decode.step"; do
	set -- $w
	e=1e18; g=1e18; f=1e18
	for r in $(seq "$ROUNDS"); do
		read -r us _ < <(run "$1" eager "" ""); e=$(awk -v a="$e" -v b="${us:-1e18}" 'BEGIN{print (b<a?b:a)}')
		read -r us _ < <(run "$1" runtime "$OUT/base.kplan" ""); g=$(awk -v a="$g" -v b="${us:-1e18}" 'BEGIN{print (b<a?b:a)}')
		read -r us _ < <(run "$1" runtime "$OUT/fused.kplan" ""); f=$(awk -v a="$f" -v b="${us:-1e18}" 'BEGIN{print (b<a?b:a)}')
	done
	awk -v w="$1" -v r="$2" -v e="$e" -v g="$g" -v f="$f" 'BEGIN {
		printf "%-10s %-12s %10.2f %10.2f %10.2f %8.2fx %8.2fx\n", w, r, e, g, f, g/f, e/f }' | tee -a "$LOG"
	[ "$1" = ex_decode ] && decode_t="$e $f"
done
# the issue's target for the transformer decode (a performance figure, not a
# failure: the eager time is host-bound and varies by machine)
read -r e f <<<"$decode_t"
awk -v e="$e" -v f="$f" 'BEGIN { printf "  decode fused >= 3x faster than eager: %s (%.2fx)\n",
	(e >= 3 * f ? "PASS" : "MISS"), e / f }' | tee -a "$LOG"

# 6: safety and the cache
note ""
note "safety:"
mkdir -p "$OUT/edited"
cp "$OUT/fused.kplan" "$OUT"/kpfuse-*.cu "$OUT/edited/"
for s in "$OUT"/edited/kpfuse-*.cu; do echo "// edited" >>"$s"; done
read -r _ hg < <(run fusion_ew runtime "$OUT/base.kplan" 200)
read -r _ hx < <(run fusion_ew runtime "$OUT/edited/fused.kplan" 200)
hm=$(stat_of fusion_ew runtime "$OUT/edited/fused.kplan" 200 fusion.failures.fusion-hash)
if [ "${hm:-0}" -ge 1 ] && [ "$hx" = "$hg" ]; then
	note "  PASS edited source: fusion-hash ($hm), graph unfused, output = graph-only"
else
	note "  FAIL edited source: failures ${hm:-0}, hash $hx vs $hg"; fail=1
fi
rm -rf "$KPLAN_CACHE_DIR"
t0=$(date +%s%N); "$BIN/ex_mlp" runtime "$OUT/fused.kplan" --steps 1 >>"$LOG" 2>&1; t1=$(date +%s%N)
"$BIN/ex_mlp" runtime "$OUT/fused.kplan" --steps 1 >>"$LOG" 2>&1; t2=$(date +%s%N)
note "  ex_mlp --steps 1 wall time: cold NVRTC cache $(( (t1 - t0) / 1000000 )) ms, warm $(( (t2 - t1) / 1000000 )) ms ($(ls "$KPLAN_CACHE_DIR" | wc -l) cubins cached)"

note ""
[ $fail = 0 ] && note "fusion_check: OK" || note "fusion_check: FAILED"
exit $fail
