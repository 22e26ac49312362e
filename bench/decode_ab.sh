#!/bin/bash
# decode_ab.sh - A/B of examples/decode variants over interleaved rounds:
# µs per token for eager, the hand-written graph, the runtime with a
# graph-only plan and with every catalog chain fused; every output hash
# checked against the same variant's first eager run (GPU; docs/PERFORMANCE.md).
#
#   bench/decode_ab.sh BUILD OUTDIR ROUNDS 'LABEL|ENV...|BINARY' ...
#
# ENV is a space-separated list of NAME=VALUE set for that variant's runs and
# its fused plan (so KPLAN_FUSION_* settings reach the generator; DECODE_CAT=FILE
# plans that variant with another catalog); BINARY is
# relative to BUILD/bin (default ex_decode). Examples:
#   bench/decode_ab.sh build /tmp/ab 3 'after|EX_DECODE_PDL_EARLY=0|' \
#       'before|EX_DECODE_PDL_EARLY=1 KPLAN_FUSION_PDL_EARLY=1|'
#   bench/decode_ab.sh build /tmp/ab 3 'prev||ex_decode_prev' 'new||ex_decode'
set -u
B=${1:-build}
O=${2:-${OUT:-/tmp/kplan-decode-ab}}
R=${3:-3}
shift 3
. "$(dirname "$0")/decode_lib.sh"
decode_setup "$B" "$O" || exit 2
labels=()
declare -A envs bins all
n=0
for v in "$@"; do
	IFS='|' read -r lab env bin <<<"$v"
	labels+=("$lab")
	envs[$lab]=$env
	bins[$lab]=${bin:-ex_decode}
	cv=$CAT   # DECODE_CAT=FILE in ENV: that variant's catalog
	for kv in $env; do case $kv in DECODE_CAT=*) cv=${kv#DECODE_CAT=} ;; esac; done
	env $env "$BIN/kplan" plan --base "$O/base.kplan" --kernels "$O/trace.tsv" --catalog "$cv" \
		-o "$O/fused-$n.kplan" >"$O/plan-$n.log" 2>&1 || { echo "plan $lab failed"; exit 2; }
	plan[$n]=$O/fused-$n.kplan
	idx[$n]=$lab
	n=$((n + 1))
done
res() { awk '/^RESULT/ {print $7, $9}'; }
declare -A eh
for r in $(seq "$R"); do
	for ((k = 0; k < n; k++)); do
		lab=${idx[$k]}
		for m in eager graph plan fused; do
			case $m in
			eager | graph) args=($m) ;;
			plan) args=(runtime "$O/base.kplan") ;;
			fused) args=(runtime "${plan[$k]}") ;;
			esac
			read -r us h < <(env ${envs[$lab]} "$BIN/${bins[$lab]}" "${args[@]}" 2>/dev/null | res)
			[ -n "${eh[$lab]:-}" ] || eh[$lab]=$h
			[ "$h" = "${eh[$lab]}" ] || echo "DIFFERENT output: $lab $m (hash $h, eager ${eh[$lab]})"
			all[$m.$lab]="${all[$m.$lab]:-} $us"
		done
	done
done
med() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf "%-8s" mode
for lab in "${labels[@]}"; do printf " %-30s" "$lab (median; runs)"; done
echo
for m in eager graph plan fused; do
	printf "%-8s" $m
	for lab in "${labels[@]}"; do
		printf " %-30s" "$(echo ${all[$m.$lab]} | med);${all[$m.$lab]}"
	done
	echo
done
for lab in "${labels[@]}"; do echo "hash $lab ${eh[$lab]}"; done
