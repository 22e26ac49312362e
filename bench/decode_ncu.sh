#!/bin/bash
# decode_ncu.sh - GPU time of decode's short kernels one by one (Nsight
# Compute, serialized, warm caches): the unfused kernels against the fused
# ones, to see what a fused chain costs next to the kernels it replaces.
#
#   bench/decode_ncu.sh [BUILD] [DIR with base.kplan and all/fused.kplan
#                        from bench/decode_fusion.sh]
set -u
B=${1:-build}
D=${2:-/tmp/df}
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
export KPLAN_CACHE_DIR=$D/cache
prof() { # LABEL ARGS...: mean gpu__time_duration per kernel name (ns)
	local l=$1; shift
	"$NCU" --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv \
		-k 'regex:^(ew|layernorm|kp_fused|attn_scale|attn_mask|softmax_rows|bias_copy|gemv)' \
		--launch-skip 1500 --launch-count 300 "$B/bin/ex_decode" "$@" --steps 40 2>/dev/null |
		python3 -c '
import csv, sys, collections
s = collections.defaultdict(list)
for r in csv.DictReader(l for l in sys.stdin if l.startswith("\"")):
    if r.get("Metric Name") == "gpu__time_duration.sum":
        s[r["Kernel Name"].split("(")[0]].append(float(r["Metric Value"].replace(",", "")))
for k, v in sorted(s.items(), key=lambda kv: -sum(kv[1])):
    v.sort()
    print("%-8s %-28s n=%4d median_ns=%8.0f" % (sys.argv[1], k[:28], len(v), v[len(v) // 2]))
' "$l"
}
prof eager eager
prof fused runtime "$D/all/fused.kplan"
