#!/bin/bash
# runtime_check.sh - GPU end-to-end checks of libkplanrt on the examples.
#
#   tests/gpu/runtime_check.sh [BUILD_DIR] [OUT_DIR]
#
# For each example (mlp, decode, solver): runs it eager, with the runtime
# (a plan written by kplan-mkplan for this GPU) and as a hand-written CUDA
# graph, 3 rounds, and checks the outputs are bit-identical (same hash).
# Then safety checks (verify mode, a sync inside the region, a wrong
# fingerprint, a plan for another GPU, KPLAN_RT_DISABLE, a planned-eager
# region) and kplan-calibrate. Prints a table; exit status 1 when a
# correctness check fails (performance targets are reported PASS/MISS).
set -u
B=${1:-build-rt}
OUT=${2:-${OUT:-/tmp/kplan-rt-check}}
BIN=$B/bin
mkdir -p "$OUT"
LOG=$OUT/runtime_check.log
: >"$LOG"
fail=0
ROUNDS=${ROUNDS:-3}

note() { echo "$*" | tee -a "$LOG"; }

dev=$("$BIN/ex_mlp" device) || { note "no GPU: $dev"; exit 2; }
note "device: $dev"
cc=$(echo "$dev" | awk '{print $2}')
cuda=$(echo "$dev" | awk '{print $4}')
driver=$(echo "$dev" | awk '{print $6}')
sm=$(echo "$dev" | awk '{print $8}')
gpu=$(echo "$dev" | sed 's/.* gpu //')
MK="$BIN/kplan-mkplan --cc $cc --cuda $cuda --driver $driver --sm $sm --gpu"
$MK "$gpu" -o "$OUT/examples.kplan" mlp.forward:graph:warmup=2:keys=1 \
	decode.step:graph:warmup=1:keys=8 solver.block:graph:warmup=1:keys=1 || exit 2
$MK "$gpu" -o "$OUT/badfp.kplan" decode.step:graph:warmup=1:keys=8:fp=0123456789abcdef \
	solver.block:graph:fp=0123456789abcdef mlp.forward:graph:fp=0123456789abcdef || exit 2
$MK "$gpu" -o "$OUT/eager.kplan" decode.step:eager mlp.forward:eager solver.block:eager || exit 2
"$BIN/kplan-mkplan" --cc 8.0 --cuda "$cuda" -o "$OUT/a100.kplan" decode.step:graph || exit 2

# run EX MODE [ENV...] -> prints "us hash", full output to the log
run() {
	local ex=$1 mode=$2 plan=$3; shift 3
	local o
	o=$(env "$@" KPLAN_RT_STATS=1 "$BIN/ex_$ex" "$mode" $plan 2>&1)
	echo "== $ex $mode $plan $*" >>"$LOG"
	echo "$o" >>"$LOG"
	echo "$o" | awk '/^RESULT/ {print $7, $9}'
}

rtstat() { # stat FILE-CONTENT NAME
	echo "$1" | awk -v k="kplan-rt: $2" 'index($0, k " ") == 1 {print $3}'
}

declare -A T H
printf "%-7s %10s %10s %10s %8s %8s %8s  %s\n" example eager_us rt_us graph_us \
	speedup rt/graph rt/eager identical | tee -a "$LOG"
for ex in mlp decode solver; do
	for m in eager runtime graph; do T[$m]=999999999; H[$m]=; done
	for r in $(seq "$ROUNDS"); do
		for m in eager runtime graph; do
			plan=; [ $m = runtime ] && plan=$OUT/examples.kplan
			read -r us h < <(run $ex $m "$plan")
			[ -z "$us" ] && { note "$ex $m: no result (see log)"; fail=1; continue; }
			if [ -n "${H[$m]}" ] && [ "${H[$m]}" != "$h" ]; then
				note "$ex $m: hash differs between rounds"; fail=1
			fi
			H[$m]=$h
			T[$m]=$(awk -v a="${T[$m]}" -v b="$us" 'BEGIN {print (b < a ? b : a)}')
		done
	done
	same=yes
	[ "${H[eager]}" = "${H[runtime]}" ] && [ "${H[eager]}" = "${H[graph]}" ] || { same=NO; fail=1; }
	awk -v ex=$ex -v e="${T[eager]}" -v r="${T[runtime]}" -v g="${T[graph]}" -v s=$same \
		'BEGIN {printf "%-7s %10.2f %10.2f %10.2f %8.2f %8.3f %8.3f  %s\n", ex, e, r, g, e/r, r/g, r/e, s}' |
		tee -a "$LOG"
	echo "$ex ${T[eager]} ${T[runtime]} ${T[graph]}" >>"$OUT/times.txt"
done

note ""
note "targets:"
while read -r ex e r g; do
	awk -v ex=$ex -v e=$e -v r=$r -v g=$g 'BEGIN {
		printf "  %-7s within 5%% of hand-written graph: %s (%.3f)\n", ex, (r <= g*1.05 ? "PASS" : "MISS"), r/g;
		printf "  %-7s not >2%% slower than eager:      %s (%.3f)\n", ex, (r <= e*1.02 ? "PASS" : "MISS"), r/e;
		if (ex == "decode") printf "  decode  >= 3x faster than eager:         %s (%.2fx)\n", (e/r >= 3 ? "PASS" : "MISS"), e/r }' |
		tee -a "$LOG"
done <"$OUT/times.txt"

# host cost of begin+end on replay, from the runtime's own timing
note ""
note "replay host cost (KPLAN_RT_STATS timing; 'overhead' excludes cudaGraphLaunch):"
for ex in mlp decode solver; do
	s=$(KPLAN_RT_STATS=1 "$BIN/ex_$ex" runtime "$OUT/examples.kplan" 2>&1)
	echo "== stats $ex" >>"$LOG"; echo "$s" >>"$LOG"
	rep=$(rtstat "$s" replays); pn=$(rtstat "$s" patched_nodes)
	host=$(rtstat "$s" replay_host_ns_avg); lau=$(rtstat "$s" replay_launch_ns_avg)
	awk -v ex=$ex -v rep="$rep" -v pn="${pn:-0}" -v h="$host" -v l="$lau" 'BEGIN {
		ppr = rep ? pn / rep : 0; ov = h - l; lim = 1000 + 700 * ppr;
		printf "  %-7s replays %d, patched nodes/replay %.2f, begin+end %.0f ns, in launch %.0f ns, overhead %.0f ns, limit %.0f ns: %s\n",
			ex, rep, ppr, h, l, ov, lim, (ov <= lim ? "PASS" : "MISS") }' | tee -a "$LOG"
done

note ""
note "safety checks (outputs must equal eager):"
check() { # check NAME EX EXPECT_STAT PLAN ENV...
	local name=$1 ex=$2 want=$3 plan=$4; shift 4
	local o h ok
	o=$(env "$@" KPLAN_RT_STATS=1 "$BIN/ex_$ex" runtime $plan 2>&1)
	echo "== check $name" >>"$LOG"; echo "$o" >>"$LOG"
	h=$(echo "$o" | awk '/^RESULT/ {print $9}')
	ref=$("$BIN/ex_$ex" eager 2>/dev/null | awk '/^RESULT/ {print $9}')
	ok=PASS
	[ -n "$h" ] && [ "$h" = "$ref" ] || ok=FAIL
	if [ -n "$want" ] && ! echo "$o" | grep -q "kplan-rt: $want"; then ok=FAIL; fi
	[ $ok = FAIL ] && fail=1
	note "  $ok $name ($ex; expects '$want')"
}
check "verify mode, 5 replays per graph compared" decode "verified 40" "$OUT/examples.kplan" KPLAN_RT_VERIFY=5
check "verify mode on mlp (cuBLAS patched)" mlp "verified 5" "$OUT/examples.kplan" KPLAN_RT_VERIFY=5
check "sync inside the region" solver "failures.capture-failed" "$OUT/examples.kplan" EX_SOLVER_SYNC_IN_REGION=1
check "wrong fingerprint" decode "failures.fingerprint" "$OUT/badfp.kplan"
check "plan for another gpu" decode "eager.plan-mismatch" "$OUT/a100.kplan"
check "KPLAN_RT_DISABLE=1" decode "eager.disabled" "$OUT/examples.kplan" KPLAN_RT_DISABLE=1
check "no plan" mlp "eager.no-plan" ""

note ""
note "decode with one exec patched in place (KPLAN_RT_EXECS=1) vs two alternating (default):"
one=999999999; two=999999999
for r in $(seq "$ROUNDS"); do
	read -r us _ < <(run decode runtime "$OUT/examples.kplan" KPLAN_RT_EXECS=1)
	one=$(awk -v a=$one -v b=$us 'BEGIN{print (b<a?b:a)}')
	read -r us _ < <(run decode runtime "$OUT/examples.kplan")
	two=$(awk -v a=$two -v b=$us 'BEGIN{print (b<a?b:a)}')
done
note "  one exec ${one} us/step, two execs ${two} us/step"

note ""
note "pass-through cost of planned-eager regions (runtime with eager plan vs eager, best of $((ROUNDS + 2))):"
for ex in mlp decode solver; do
	e=999999999; p=999999999
	for r in $(seq $((ROUNDS + 2))); do
		read -r us _ < <(run $ex eager ""); e=$(awk -v a=$e -v b=$us 'BEGIN{print (b<a?b:a)}')
		read -r us _ < <(run $ex runtime "$OUT/eager.kplan"); p=$(awk -v a=$p -v b=$us 'BEGIN{print (b<a?b:a)}')
	done
	awk -v ex=$ex -v e=$e -v p=$p 'BEGIN {printf "  %-7s eager %.2f us, through runtime %.2f us: %.3f %s\n", ex, e, p, p/e, (p <= e*1.02 ? "PASS" : "MISS")}' | tee -a "$LOG"
done

note ""
note "kplan-calibrate:"
"$BIN/kplan-calibrate" 2>&1 | tee "$OUT/calibrate.txt" | tee -a "$LOG"
[ "${PIPESTATUS[0]}" = 0 ] || fail=1

note ""
[ $fail = 0 ] && note "runtime_check: OK" || note "runtime_check: FAILED"
exit $fail
