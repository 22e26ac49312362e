#!/bin/bash
# decode_skip.sh - what each kind of kernel costs inside decode's step: µs per
# token with that kind's launches left out (EX_DECODE_SKIP; the output is then
# wrong, the timing is the point), next to the full step, interleaved
# (GPU; docs/PERFORMANCE.md).
#
#   bench/decode_skip.sh [BUILD] [ROUNDS] [MODE] [OUTDIR]
#
# MODE graph (default: the hand-written graph), eager, or fused: the runtime
# with every catalog chain fused, planned for each variant from its own
# captured kernel trace (a chain with a kind left out is a shorter chain).
set -u
B=${1:-build}
R=${2:-2}
M=${3:-graph}
O=${4:-${OUT:-/tmp/kplan-decode-skip}}
kinds="embed layernorm bias_copy gemv_qkv gemv_proj gemv_fc gemv_proj2 gemv_lmhead,argmax
       kv_append attn_scores attn_scale attn_mask softmax attn_pv ew_residual ew_gelu"
. "$(dirname "$0")/decode_lib.sh"
decode_env "$B" "$O"
if [ "$M" = fused ]; then
	decode_base_plan "$BIN" "$O" || exit 2
	for k in none $kinds; do
		sk=$([ $k = none ] || echo $k)
		EX_DECODE_SKIP=$sk decode_trace "$BIN" "$O/base.kplan" "$O/trace-$k.tsv"
		"$BIN/kplan" plan --base "$O/base.kplan" --kernels "$O/trace-$k.tsv" \
			--catalog "$CAT" -o "$O/fused-$k.kplan" \
			>"$O/plan-$k.log" 2>&1 || echo "plan $k failed"
	done
fi
declare -A all
for r in $(seq "$R"); do
	for k in none $kinds; do
		case $M in
		fused) args=(runtime "$O/fused-$k.kplan") ;;
		*) args=("$M") ;;
		esac
		us=$(EX_DECODE_SKIP=$([ $k = none ] || echo $k) "$BIN/ex_decode" "${args[@]}" \
			2>/dev/null | awk '/^RESULT/ {print $7}')
		all[$k]="${all[$k]:-} ${us:-fail}"
	done
done
base=$(echo ${all[none]} | tr ' ' '\n' | sort -g | head -1)
printf "%-24s %-24s %s\n" "left out ($M)" "µs per token (runs)" "saved vs full (best of runs)"
for k in none $kinds; do
	best=$(echo ${all[$k]} | tr ' ' '\n' | sort -g | head -1)
	printf "%-24s %-24s %s\n" "$k" "${all[$k]}" \
		"$(awk -v a="$base" -v b="$best" 'BEGIN {printf "%.1f", a - b}')"
done
