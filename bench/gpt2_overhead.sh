#!/bin/bash
# gpt2_overhead.sh - what kplan record costs a PyTorch GPT-2 decode step, by
# the records it leaves out (KPLAN_DISABLE), interleaved runs (GPU host).
#
#   bench/gpt2_overhead.sh [BUILD] [ROUNDS]
#   VARIANTS="none sync" (default: none api kernel sync marker api,kernel all)
set -u
B=${1:-build}
R=${2:-2}
D=$(mktemp -d)
PY="python3 tests/gpu/collector_gpt2.py plain 100"
ms() { sed -n 's/.*median_step_ms \([0-9.]*\).*/\1/p'; }
declare -A t
for r in $(seq "$R"); do
	t[plain]+=" $($PY 2>/dev/null | ms)"
	for v in ${VARIANTS:-none api kernel sync marker api,kernel all}; do
		t[$v]+=" $(KPLAN_DISABLE=$v "$B/bin/kplan" record -o "$D/g.db" -- $PY 2>/dev/null | ms)"
		rm -f "$D"/g.db*
	done
done
for v in plain ${VARIANTS:-none api kernel sync marker api,kernel all}; do
	med=$(echo ${t[$v]} | tr ' ' '\n' | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
	printf "%-28s median %-7s %s\n" "$([ $v = plain ] && echo "no kplan" || echo "record, without $v")" "$med" "${t[$v]}"
done
rm -rf "$D"
