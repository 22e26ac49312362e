#!/bin/bash
# ddp_record_window.sh - what `kplan record` costs a DDP step, measured in one
# process: bench/never_slower.py ddp_side eager (2 ranks, torchrun) under
# `kplan record --profiler-api`, its steps in blocks of 10 alternating
# outside and inside a cudaProfilerStart/Stop window (the collector's live
# window), so that the spread between processes (10-30 % for this job on
# these machines) does not enter. Each variant turns parts of the collector
# off (KPLAN_DISABLE) to show where the cost lies; "plain" runs the same
# blocks without kplan (the window itself then costs nothing).
#
#   bash bench/ddp_record_window.sh BUILD OUTDIR [ROUNDS]
#
# Prints, per run, each rank's median step outside and inside the window and
# their ratio; per variant the median ratio over ROUNDS (2) runs and both
# ranks. Pinned to the cores of GPU 0's NUMA node (16).
set -u
B=${1:?usage: ddp_record_window.sh BUILD OUTDIR [ROUNDS]}
O=${2:?usage: ddp_record_window.sh BUILD OUTDIR [ROUNDS]}
R=${3:-2}
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
note() { echo "$*"; }
bad() { echo "FAIL $*"; }
# shellcheck source=tests/gpu/never_slower.sh
. tests/gpu/never_slower.sh
pin_near_gpu0 16
job=(torchrun --standalone --nproc_per_node 2 bench/never_slower.py ddp_side eager
     --steps 100 --timed 5 --window 10 --blocks "${BLOCKS:-16}")
# variant NAME KPLAN_DISABLE (- for the whole collector, plain for no kplan)
variant() {
	local n=$1 off=$2 log="$O/$1.$r.log"
	if [ "$off" = plain ]; then
		"${PIN[@]}" "${job[@]}" >"$log" 2>&1
	else
		rm -f "$O/$n.db"*
		[ "$off" = - ] && off=""
		KPLAN_DISABLE=$off "${PIN[@]}" "$B/bin/kplan" record --profiler-api -o "$O/$n.db" \
			-- "${job[@]}" >"$log" 2>&1
		"$B/bin/kplan" info "$O/$n.db" >"$O/$n.$r.info" 2>&1
		rm -f "$O/$n.db"*
	fi
	python3 - "$n" "$log" <<'PY' | tee -a "$O/ratios.txt"
import json, sys
for line in open(sys.argv[2]):
    if line.startswith("{") and '"window"' in line:
        d = json.loads(line)
        w = d["window"]
        print("%s rank %d out %.3f in %.3f ratio %.3f" % (
            sys.argv[1], d["rank"], w["out_ms"], w["in_ms"], w["ratio"]))
PY
}
: >"$O/ratios.txt"
for r in $(seq 1 "$R"); do
	variant plain plain
	variant record -
	variant kernels api,sync,attrs
	variant api kernel,sync,attrs
	variant callbacks api,kernel
	variant nothing all
done
python3 - "$O/ratios.txt" <<'EOF2'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    d[f[0]].append(float(f[-1]))
what = {"plain": "no kplan", "record": "kplan record (everything)",
        "kernels": "kernel records only", "api": "API rows only",
        "callbacks": "sync and launch-attribute callbacks only",
        "nothing": "subscribed, nothing enabled"}
print("\n| DDP ddp_side step, 2 ranks, in one process | inside / outside the window (median) | runs |")
print("| --- | --- | --- |")
for n, v in d.items():
    print("| %s | %.3f | %s |" % (what.get(n, n), statistics.median(v), " ".join("%.3f" % x for x in v)))
EOF2
