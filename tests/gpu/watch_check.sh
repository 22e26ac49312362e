#!/bin/bash
# watch_check.sh - GPU check of the runtime's capture watch (runtime/watch.c):
# is a region body capturable, told before its first capture?
#
#   tests/gpu/watch_check.sh [BUILD_DIR] [OUT_DIR]
#
# Builds nothing: needs BUILD_DIR/bin/kplan-watch-check and kplan-mkplan
# (`make watch-check`). Writes a plan for this GPU (kplan-watch-check opens a
# runtime with it: planless runtimes have no CUDA backend), then:
#   1. the watch's one-time cost, in a fresh process (watch-cost-* lines)
#   2. every case in a process of its own (PASS/FAIL name)
#   3. every case again in one process (repeated subscribe/unsubscribe)
# Output lines: "PASS name", "FAIL name: why", "watch-cost-... X". Full
# output in OUT_DIR/watch_check.log. Exit 1 when a case fails, 2 when it
# cannot run (no GPU, missing binaries).
set -u
B=${1:-build}
OUT=${2:-${OUT:-/tmp/kplan-watch-check}}
BIN=$B/bin
X=$BIN/kplan-watch-check
mkdir -p "$OUT"
LOG=$OUT/watch_check.log
: >"$LOG"
fail=0

note() { echo "$*" | tee -a "$LOG"; }

for f in "$X" "$BIN/kplan-mkplan"; do
	[ -x "$f" ] || { note "FAIL setup: $f missing (make watch-check)"; exit 2; }
done
dev=$("$X" device 2>&1) || { note "no GPU: $dev"; exit 2; }
note "device: $dev"
cc=$(echo "$dev" | awk '{print $2}')
cuda=$(echo "$dev" | awk '{print $4}')
driver=$(echo "$dev" | awk '{print $6}')
sm=$(echo "$dev" | awk '{print $8}')
gpu=$(echo "$dev" | sed 's/.* gpu //')
PLAN=$OUT/watch.kplan
"$BIN/kplan-mkplan" --cc "$cc" --cuda "$cuda" --driver "$driver" --sm "$sm" --gpu "$gpu" \
	-o "$PLAN" watch.check:graph:warmup=1:keys=1 >>"$LOG" 2>&1 ||
	{ note "FAIL setup: kplan-mkplan"; exit 2; }

# run NAME ARGS...: one process; its PASS/FAIL/SKIP and cost lines, a FAIL
# line of its own when it exits badly without saying why
run() {
	local name=$1 out rc
	shift
	echo "== $name: $X $PLAN $*" >>"$LOG"
	out=$(timeout 120 "$X" "$PLAN" "$@" 2>&1)
	rc=$?
	echo "$out" >>"$LOG"
	echo "$out" | grep -E '^(PASS|FAIL) |^watch-cost-|^eager-'
	if [ $rc -ne 0 ]; then
		fail=1
		echo "$out" | grep -q '^FAIL ' || note "FAIL $name: exit status $rc (see $LOG)"
	fi
}

# 1. cost: the first watch of the process loads and subscribes CUPTI
run cost cost
# once the watch has detached CUPTI, eager launches cost what they did
# before any watch (within the noise the control measures)
cost_out=$(sed -n '/^== cost:/,/^== /p' "$LOG")
val() { echo "$cost_out" | awk -v k="$1" '$1 == k { print $2 }'; }
before=$(val eager-100k-us); again=$(val eager-100k-again-us)
attached=$(val eager-100k-after-watch-us); detached=$(val eager-100k-after-detach-us)
note "PERF eager 100-kernel body: ${before} / ${again} us before any watch, ${attached} us" \
	"attached after a watch, ${detached} us detached ($(val watch-detach-ms) ms after the" \
	"last watch); first watch $(val watch-cost-first-us) us, attaching again" \
	"$(val watch-cost-reattach-us) us"
if [ -z "$detached" ] || awk -v d="$detached" 'BEGIN { exit !(d < 0) }'; then
	note "FAIL cupti-detach: the watch never detached CUPTI"
	fail=1
elif awk -v b="$before" -v a="$again" -v d="$detached" \
	'BEGIN { m = b > a ? b : a; exit !(d > 1.05 * m) }'; then
	note "FAIL cupti-detach: eager body ${detached} us once detached, ${before}/${again} us before"
	fail=1
else
	note "PASS cupti-detach"
fi

# 2. one process per case: a crash names its case
for c in $("$X" list); do
	run "$c" "$c"
done

# 3. all cases in one process
echo "== all: $X $PLAN all" >>"$LOG"
out=$(timeout 300 "$X" "$PLAN" all 2>&1)
rc=$?
echo "$out" >>"$LOG"
echo "$out" | grep '^SKIP '
n=$(echo "$out" | grep -c '^PASS ')
bad=$(echo "$out" | grep '^FAIL ' | head -3 | tr '\n' ';')
if [ $rc -eq 0 ] && [ -z "$bad" ]; then
	note "PASS all-in-one-process ($n cases)"
else
	note "FAIL all-in-one-process: exit $rc, $n passed; ${bad:-no FAIL line}"
	fail=1
fi

[ $fail -eq 0 ] && note "watch_check: all passed" || note "watch_check: FAILED (log: $LOG)"
exit $fail
