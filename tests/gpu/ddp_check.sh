#!/bin/bash
# ddp_check.sh - the data-parallel example (examples/ddp) on two GPUs: eager,
# hand-written graph, and the plan the pipeline makes from a recording of it
# applied on every rank (part `ddp` of gpu-check; needs two GPUs and NCCL, so
# it is not in gpu-check's default list: GPU_CHECK_ONLY=ddp runs it).
#
#   tests/gpu/ddp_check.sh [BUILD] [OUTDIR]
#   make gpu-check-ddp                      (builds what it needs, then runs it)
#
# Finds libnccl.so.2 (KPLAN_NCCL_LIB, else Python's nvidia.nccl, torch's lib
# directory, the loader's path, CUDA's lib directories), then with
# NCCL_NVLS_ENABLE=0 and 2 ranks:
#   1. ex_ddp eager and graph, best of ROUNDS (3) each;
#   2. kplan record -- ex_ddp runtime (no plan: every region eager, the
#      runtime's NVTX range names ddp.step) -> kplan analyze -> kplan plan, for
#      rank 0's run;
#   3. ex_ddp runtime PLAN (KPLAN_RT_STATS=1), best of ROUNDS;
#   4. the same with --sync-on-rank 1 (rank 1 waits for its stream inside the
#      step: its watch objects, and through the ranks' agreement every rank
#      must run the step eagerly);
#   5. a hand-written plan (kplan-mkplan ddp.step:graph) for comparison: it
#      tells a runtime problem from a planning one.
# Checks: every run's RESULT hash (the weights) equal on both ranks and
# across the modes, each rank's loss equal across the modes; the plan replays on both ranks with agreements on both; plan within
# 5 % of graph and faster than eager (the ratios are printed); the sync
# variant replays on no rank, agrees on both and gives eager's results. Exit 0
# when all pass, 1 on a failure, 2 when it cannot run here (skip).
# Environment: ROUNDS (3), DDP_STEPS (1000), DDP_REC_STEPS (DDP_STEPS), DDP_RANKS (2).
# shellcheck disable=SC2015  # "A && pass || bad": pass always succeeds
set -u
B=${1:-build}
O=${2:-${OUT:-/tmp/kplan-ddp-check}}
BIN=$B/bin
K=$B/bin/kplan
ROUNDS=${ROUNDS:-3}
STEPS=${DDP_STEPS:-1000}
REC_STEPS=${DDP_REC_STEPS:-$STEPS}   # a recording as long as the runs it plans for (break-even counts the calls)
N=${DDP_RANKS:-2}
# shellcheck source=tests/gpu/check_lib.sh
. "$(dirname "$0")/check_lib.sh"
mkdir -p "$O"
LOG=$O/ddp_check.log
: >"$LOG"

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpu" -lt "$N" ]; then
	echo "ddp_check: $ngpu GPU(s) here, $N ranks need $N; nothing to run (skip)" >&2
	exit 2
fi

# libnccl.so.2: the first that exists
find_nccl() {
	local d
	[ -n "${KPLAN_NCCL_LIB:-}" ] && { echo "$KPLAN_NCCL_LIB"; return; }
	for d in "$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null)/lib" \
		"$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))' 2>/dev/null)/lib"; do
		[ -f "$d/libnccl.so.2" ] && { echo "$d/libnccl.so.2"; return; }
	done
	d=$(ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" {print $NF; exit}')
	[ -n "$d" ] && { echo "$d"; return; }
	for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu; do
		[ -f "$d/libnccl.so.2" ] && { echo "$d/libnccl.so.2"; return; }
	done
}
KPLAN_NCCL_LIB=$(find_nccl)
if [ -z "$KPLAN_NCCL_LIB" ]; then
	echo "ddp_check: no libnccl.so.2 found (pip install nvidia-nccl-cu12, or set KPLAN_NCCL_LIB); nothing to run (skip)" >&2
	exit 2
fi
export KPLAN_NCCL_LIB NCCL_NVLS_ENABLE=0
echo "nccl: $KPLAN_NCCL_LIB" | tee -a "$LOG"
nvidia-smi -L | head -n "$N" | tee -a "$LOG"

# job NAME MODE PLAN [FLAGS...]: one run of N ranks (PLAN may be ""); output
# in NAME.out / NAME.err and the log; exits the script with 2 when NCCL
# cannot be loaded; returns ex_ddp's exit status
job() {
	local name=$1 mode=$2 plan=$3 rc
	shift 3
	# shellcheck disable=SC2086  # no PLAN: no argument
	timeout 180 "$BIN/ex_ddp" "$mode" $plan --ranks "$N" --steps "$STEPS" "$@" \
		>"$O/$name.out" 2>"$O/$name.err"
	rc=$?
	{ echo "== $name: ex_ddp $mode $plan --ranks $N --steps $STEPS $* (exit $rc)"
	  cat "$O/$name.out" "$O/$name.err"; } >>"$LOG"
	if [ $rc = 2 ] && grep -q "cannot load NCCL" "$O/$name.err"; then
		cat "$O/$name.err" >&2
		exit 2
	fi
	return $rc
}
# FIELD FILE: the value after FIELD on each rank's RESULT line, by rank
res() { awk -v k="$1" '$1 == "RESULT" { for (i = 2; i < NF; i++) { if ($i == "rank") r = $(i + 1); if ($i == k) v[r] = $(i + 1) } }
	END { for (r in v) print r, v[r] }' "$2" | sort -n; }
# FIELD FILE: the value after FIELD on each rank's STATS line, "r0 r1 ..." in rank order
stats() { awk -v k="$1" '$1 == "STATS" { for (i = 2; i < NF; i++) { if ($i == "rank") r = $(i + 1); if ($i == k) v[r] = $(i + 1) } }
	END { for (r in v) print r, v[r] }' "$2" | sort -n | awk '{printf "%s%s", sep, $2; sep = " "} END {print ""}'; }
# FILE: "us hash losses" (us: the slowest rank's; hash: the one hash of
# every rank, else "differ" or "missing"; losses: each rank's, by rank, "L0,L1")
summary() {
	local n h
	n=$(res hash "$1" | wc -l)
	h=$(res hash "$1" | awk '{print $2}' | sort -u)
	[ "$n" = "$N" ] || h=missing
	[ "$(wc -l <<<"$h")" = 1 ] || h=differ
	echo "$(res us_per_step "$1" | awk 'BEGIN {m = 0} $2 > m {m = $2} END {print m}') $h" \
		"$(res loss "$1" | awk '{printf "%s%s", sep, $2; sep = ","} END {print ""}')"
}
# best NAME MODE PLAN [FLAGS...]: ROUNDS runs; sets US (the best run's),
# HASH (the one hash of every run and rank, else "differ" or "missing"),
# LOSS (the ranks' losses, the same in every run, else "differ") and ALL
# (every run's us, comma-separated)
best() {
	local name=$1 mode=$2 plan=$3 i us h l
	shift 3
	US=999999999 HASH='' LOSS='' ALL=''
	for i in $(seq "$ROUNDS"); do
		job "$name.$i" "$mode" "$plan" "$@" || bad "$name run $i exited $? (see $name.$i.err)"
		read -r us h l <<<"$(summary "$O/$name.$i.out")"
		[ -z "$HASH" ] && HASH=$h LOSS=$l
		[ "$h" = "$HASH" ] || HASH=differ
		[ "$l" = "$LOSS" ] || LOSS=differ
		awk -v a="$us" -v b="$US" 'BEGIN {exit !(a > 0 && a < b)}' && US=$us
		ALL="$ALL${ALL:+,}$us"
	done
	[ "$US" = 999999999 ] && US=-
}
# every OP VALUE "v0 v1 ...": one value per rank, each OP VALUE (awk: > 0, == 0)
every() { awk -v s="$3" -v n="$N" -v op="$1" -v x="$2" 'BEGIN { k = split(s, v, " "); if (k != n) exit 1
	for (i = 1; i <= k; i++) if ((op == ">" && !(v[i] > x)) || (op == "==" && v[i] != x)) exit 1 }'; }
# same WHAT HASH LOSSES: hash and each rank's loss equal to eager's
same() {
	[ "$2" = "$e_h" ] && [ "$3" = "$e_l" ] && pass "$1: hash and every rank's loss equal to eager's" ||
		bad "$1: hash $2 losses $3; eager: hash $e_h losses $e_l"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "-" }'; }

# 1. eager and the hand-written graph
best eager eager ""
e_us=$US e_h=$HASH e_l=$LOSS e_all=$ALL
best graph graph ""
g_us=$US g_h=$HASH g_l=$LOSS g_all=$ALL
[ "$e_h" != differ ] && [ "$e_h" != missing ] && [ "$e_l" != differ ] &&
	pass "eager: every rank's RESULT hash equal ($e_h), losses ($e_l) the same in $ROUNDS runs" ||
	bad "eager: RESULT hashes $e_h, losses $e_l across ranks or runs"
same "graph" "$g_h" "$g_l"

# 2. record -> analyze -> plan (rank 0's run)
db=$O/ddp.db
rm -f "$db" "$db-wal" "$db-shm"
if "$K" record -o "$db" -- "$BIN/ex_ddp" runtime --ranks "$N" --steps "$REC_STEPS" >"$O/record.log" 2>&1; then
	pass "kplan record of ex_ddp runtime --ranks $N"
else
	bad "kplan record exited $? (see record.log)"
fi
"$K" info "$db" >"$O/info.txt" 2>&1
run_of() { awk -v r="$1" '$1 == "run" {n = $2} $1 == "rank" && $2 == r {print n; exit}' "$O/info.txt"; }
r0=$(run_of 0)
r1=$(run_of 1)
if [ -n "$r0" ] && [ -n "$r1" ]; then
	pass "kplan info lists rank 0 (run $r0) and rank 1 (run $r1)"
else
	bad "kplan info lists no run for rank 0 or 1 (see info.txt)"
	r0=${r0:-1}
fi
"$K" analyze "$db" --run "$r0" >"$O/analyze.txt" 2>&1 || bad "kplan analyze exited $?"
[ -n "$r1" ] && { "$K" analyze "$db" --run "$r1" >"$O/analyze1.txt" 2>&1 || bad "kplan analyze of rank 1 exited $?"; }
"$K" plan "$db" --run "$r0" -o "$O/ddp.kplan" >"$O/plan.txt" 2>&1 || bad "kplan plan exited $?"
"$K" show "$O/ddp.kplan" >"$O/show.txt" 2>&1
cat "$O/plan.txt" "$O/show.txt" >>"$LOG"
grep -q "ddp.step" "$O/show.txt" && pass "the plan names ddp.step" || bad "the plan has no ddp.step (see show.txt)"

# 3. the generated plan on every rank
export KPLAN_RT_STATS=1
best plan runtime "$O/ddp.kplan"
p_us=$US p_h=$HASH p_l=$LOSS p_all=$ALL
p_rep=$(stats replays "$O/plan.1.out")
p_agr=$(stats agreements "$O/plan.1.out")
same "plan" "$p_h" "$p_l"
every ">" 0 "$p_rep" &&
	pass "plan: replays on every rank ($p_rep)" || bad "plan: replays per rank '$p_rep' (see plan.1.err)"
every ">" 0 "$p_agr" &&
	pass "plan: agreements on every rank ($p_agr)" || bad "plan: agreements per rank '$p_agr'"
pg=$(ratio "$p_us" "$g_us")
pe=$(ratio "$p_us" "$e_us")
awk -v r="$pg" 'BEGIN {exit !(r != "-" && r <= 1.05)}' && pass "plan / graph $pg (<= 1.05)" ||
	bad "plan / graph $pg (> 1.05: plan $p_us us, graph $g_us us)"
awk -v r="$pe" 'BEGIN {exit !(r != "-" && r < 1)}' && pass "plan / eager $pe (< 1)" ||
	bad "plan / eager $pe (not faster: plan $p_us us, eager $e_us us)"

# 4. rank 1 syncs inside the region: every rank eager, same result
job sync runtime "$O/ddp.kplan" --sync-on-rank 1 || bad "sync variant exited $? (see sync.err)"
read -r s_us s_h s_l <<<"$(summary "$O/sync.out")"
s_rep=$(stats replays "$O/sync.out")
s_agr=$(stats agreements "$O/sync.out")
s_wb=$(stats would_break "$O/sync.out")
every "==" 0 "$s_rep" &&
	pass "sync on rank 1: no rank replays ($s_rep)" || bad "sync on rank 1: replays per rank '$s_rep'"
every ">" 0 "$s_agr" &&
	pass "sync on rank 1: agreements on every rank ($s_agr; would-break eager calls $s_wb)" ||
	bad "sync on rank 1: agreements per rank '$s_agr'"
same "sync on rank 1" "$s_h" "$s_l"

# 5. a hand-written plan for the same region (diagnosis: runtime vs planner)
dev=$("$BIN/ex_ddp" device 2>>"$LOG")
read -r _ cc _ cuda _ driver _ sm _ <<<"$dev"
if [ -n "$dev" ] && "$BIN/kplan-mkplan" --cc "$cc" --cuda "$cuda" --driver "$driver" --sm "$sm" \
	--gpu "${dev#* gpu }" -o "$O/hand.kplan" ddp.step:graph:warmup=2:keys=1 >>"$LOG" 2>&1; then
	job hand runtime "$O/hand.kplan" || bad "hand-written plan exited $? (see hand.err)"
	read -r m_us m_h m_l <<<"$(summary "$O/hand.out")"
	m_rep=$(stats replays "$O/hand.out")
	same "hand-written plan ($m_rep replays)" "$m_h" "$m_l"
else
	bad "kplan-mkplan for ddp.step"
	m_us=- m_h=- m_rep=-
fi

{
	echo
	printf "%-16s %10s %9s %9s %-18s %-10s %s\n" run us_per_step "/eager" "/graph" hash replays "all runs (us)"
	printf "%-16s %10s %9s %9s %-18s %-10s %s\n" eager "$e_us" 1.000 "$(ratio "$e_us" "$g_us")" "$e_h" - "$e_all"
	printf "%-16s %10s %9s %9s %-18s %-10s %s\n" graph "$g_us" "$(ratio "$g_us" "$e_us")" 1.000 "$g_h" - "$g_all"
	printf "%-16s %10s %9s %9s %-18s %-10s %s\n" plan "$p_us" "$pe" "$pg" "$p_h" "${p_rep// /,}" "$p_all"
	printf "%-16s %10s %9s %9s %-18s %-10s %s\n" plan-sync-rank1 "$s_us" "$(ratio "$s_us" "$e_us")" \
		"$(ratio "$s_us" "$g_us")" "$s_h" "${s_rep// /,}" -
	printf "%-16s %10s %9s %9s %-18s %-10s %s\n" hand-plan "$m_us" "$(ratio "$m_us" "$e_us")" \
		"$(ratio "$m_us" "$g_us")" "$m_h" "${m_rep// /,}" -
	echo "(us_per_step: the slowest rank's, after ex_ddp's warm-up steps, best of $ROUNDS runs;"
	echo " $N ranks, $STEPS steps; replays: per rank)"
	echo
	[ "$fail" = 0 ] && echo "ddp_check: PASS" || echo "ddp_check: FAIL"
} | tee -a "$LOG"
exit "$fail"
