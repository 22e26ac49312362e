#!/bin/bash
# decode_ncu_detail.sh - instructions, registers and time of decode's layer
# norm, elementwise kernel and the fused residual-add + layer norm kernel
# (Nsight Compute, clocks left alone). Needs bench/decode_fusion.sh's DIR.
set -u
B=${1:-build}
D=${2:-/tmp/df}
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
export KPLAN_CACHE_DIR=$D/cache
M=gpu__time_duration.sum,sm__inst_executed.sum,launch__registers_per_thread,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
for mode in "eager" "runtime $D/all/fused.kplan"; do
	"$NCU" --cache-control none --clock-control none --metrics "$M" --csv \
		-k 'regex:^(ew|layernorm|kp_fused)' --launch-skip 1200 --launch-count 60 \
		"$B/bin/ex_decode" $mode --steps 8 2>"$D/ncu.err" |
		python3 -c '
import csv, sys, collections
s = collections.defaultdict(lambda: collections.defaultdict(list))
for r in csv.DictReader(l for l in sys.stdin if l.startswith("\"")):
    s[r["Kernel Name"].split("(")[0][:26]][r["Metric Name"]].append(float(r["Metric Value"].replace(",", "")))
for k, m in s.items():
    print(k, " ".join("%s=%g" % (n.split("__")[1].split(".")[0][:22], sorted(v)[len(v)//2]) for n, v in sorted(m.items())))
'
done
