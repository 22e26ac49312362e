#!/bin/bash
# decode_fusion.sh - where the decode step's time goes with and without
# fusion, and which fused chains keep the bits (GPU; docs/PERFORMANCE.md).
#
#   bench/decode_fusion.sh [BUILD] [OUTDIR]
#
# 1. a graph-only plan (kplan-mkplan) and the captured kernel trace
# 2. fused plans from catalog subsets: GELU chains only (decode_ew), + the
#    residual add -> layer norm chains (decode_layernorm), scale -> mask ->
#    softmax (decode_attn_*, decode_softmax), all of those (no-gemv), the
#    GEMVs with their bias copies alone (gemv), everything (all): output
#    hash, us per token and chains fused for each, against eager
# 3. kplan record of the graph-only and the fully fused runs: GPU time per
#    step by kernel (graph-launched kernels of the last 50 steps; CUPTI adds
#    ~0.2 us to each traced kernel)
set -u
B=${1:-build}
O=${2:-${OUT:-/tmp/kplan-decode-fusion}}
. "$(dirname "$0")/decode_lib.sh"
decode_setup "$B" "$O" || exit 2
K=$BIN/kplan

# a catalog of the named entries of $CAT
subset() {
	awk -v want=" $* " '
		$1 == "kernel" { keep = index(want, " " $2 " ") > 0 }
		keep { print }
		$1 == "end" { keep = 0 }' "$CAT"
}
res() { awk '/^RESULT/ {print $7, $9}'; }
read -r eus eh < <("$BIN/ex_decode" eager 2>/dev/null | res)
printf "%-34s %10s %8s %s\n" variant us/token chains hash
printf "%-34s %10s %8s %s\n" eager "$eus" - "$eh"
read -r gus gh < <("$BIN/ex_decode" runtime "$O/base.kplan" 2>/dev/null | res)
printf "%-34s %10s %8s %s\n" graph-only "$gus" 0 "$gh"
for v in "gelu:decode_ew" "gelu+ln:decode_ew decode_layernorm" \
	 "softmax:decode_attn_scale decode_attn_mask decode_softmax" \
	 "no-gemv:decode_ew decode_layernorm decode_attn_scale decode_attn_mask decode_softmax" \
	 "gemv:decode_bias_copy decode_gemv_768 decode_gemv_3072" \
	 "all:decode_ew decode_layernorm decode_attn_scale decode_attn_mask decode_softmax decode_bias_copy decode_gemv_768 decode_gemv_3072"; do
	name=${v%%:*}
	mkdir -p "$O/$name"
	subset ${v#*:} >"$O/$name/cat.kpcat"
	"$K" plan --base "$O/base.kplan" --kernels "$O/trace.tsv" --catalog "$O/$name/cat.kpcat" \
		-o "$O/$name/fused.kplan" >"$O/$name/plan.log" 2>&1 || { echo "plan $name failed"; continue; }
	out=$(KPLAN_RT_STATS=1 "$BIN/ex_decode" runtime "$O/$name/fused.kplan" 2>&1)
	echo "$out" >"$O/$name/run.log"
	read -r us h < <(echo "$out" | res)
	ch=$(echo "$out" | awk '$1 == "kplan-rt:" && $2 == "fusion.applied" {print $3}')
	printf "%-34s %10s %8s %s %s\n" "$name" "$us" "${ch:-0}" "$h" "$([ "$h" = "$eh" ] && echo same || echo DIFFERENT)"
done

[ "${DF_PROFILE:-1}" = 1 ] || exit 0
# 3: GPU time per step by kernel, recorded
prof() { # LABEL PLAN
	local db=$O/prof-$1.db
	rm -f "$db"*
	if [ -n "$2" ]; then
		"$K" record -o "$db" -- "$BIN/ex_decode" runtime "$2" --steps 300 >"$O/prof-$1.log" 2>&1
	else
		"$K" record -o "$db" -- "$BIN/ex_decode" eager --steps 300 >"$O/prof-$1.log" 2>&1
	fi
	echo "-- $1: graph-launched kernels of the last 50 steps, us per step (count per step)"
	"$K" export "$db" --csv "
		WITH k AS (SELECT k.start, k.end, s.value AS name FROM CUPTI_ACTIVITY_KIND_KERNEL k
			   JOIN StringIds s ON s.id = k.shortName
			   WHERE k.graphNodeId IS NOT NULL OR '$1' = 'eager'),
		     t AS (SELECT max(start) AS hi FROM k),
		     w AS (SELECT k.* FROM k, t WHERE k.start > t.hi - 50 * (SELECT (max(end) - min(start)) / 300.0 FROM k))
		SELECT name, round(sum(end - start) / 50000.0, 1) AS us_per_step,
		       round(count(*) / 50.0, 1) AS per_step,
		       round(avg(end - start) / 1000.0, 2) AS avg_us
		FROM w GROUP BY name ORDER BY 2 DESC" | head -30
	"$K" export "$db" --csv "
		WITH k AS (SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL
			   WHERE graphNodeId IS NOT NULL OR '$1' = 'eager')
		SELECT round(sum(end - start) / 1000.0 / 300, 1) AS kernel_us_per_step,
		       round((max(end) - min(start)) / 1000.0 / 300, 1) AS span_us_per_step FROM k"
}
prof graph "$O/base.kplan"
prof gelu "$O/gelu/fused.kplan"
prof fused "$O/all/fused.kplan"
prof eager ""

# 4: the float operations the compilers chose (contractions into FFMA decide
# the bits): decode's own layer norm and softmax, and the fused kernels
if command -v cuobjdump >/dev/null || [ -x /usr/local/cuda/bin/cuobjdump ]; then
	CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
	ops() { grep -oE "(FFMA|FMUL|FADD|MUFU\.[A-Z0-9]+|FMNMX)[A-Z0-9.]* [^;]*" | sed 's/  */ /g'; }
	exec >"$O/sass.txt"
	for f in _Z9layernormPK6__halfPS_S1_S1_ _Z12softmax_rowsP6__halfi; do
		echo "-- sass $f (float ops)"
		"$CO" -sass -fun "$f" "$BIN/ex_decode" 2>/dev/null | ops | head -60
	done
	for c in "$KPLAN_CACHE_DIR"/*.cubin; do
		[ -f "$c" ] || continue
		n=$("$CO" -sass "$c" 2>/dev/null | grep -c "FFMA\|FMUL\|FADD")
		echo "-- sass $(basename "$c") ($n float ops)"
		"$CO" -sass "$c" 2>/dev/null | ops | head -60
	done
fi
