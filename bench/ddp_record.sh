#!/bin/bash
# ddp_record.sh - what `kplan record` costs a DDP job: the same torchrun job
# (bench/never_slower.py ddp_side eager, 2 ranks) recorded and not, rounds
# alternating, pinned to the cores of GPU 0's NUMA node (8 per rank).
#
#   bash bench/ddp_record.sh BUILD OUTDIR [ROUNDS] [STEPS]
#
# Per run, rank 0's whole run (STEPS steps from the first, one synchronize at
# the end) divided by STEPS, and the median of the 30 synchronised steps
# after it; per variant the median over ROUNDS (3) runs; the ratio recorded /
# unrecorded of both, and the rows each rank recorded (kernels, API calls,
# dropped). Prints a table last.
set -u
B=${1:?usage: ddp_record.sh BUILD OUTDIR [ROUNDS] [STEPS]}
O=${2:?usage: ddp_record.sh BUILD OUTDIR [ROUNDS] [STEPS]}
R=${3:-3}
S=${4:-600}
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
note() { echo "$*"; }
bad() { echo "FAIL $*"; }
# shellcheck source=tests/gpu/never_slower.sh
. tests/gpu/never_slower.sh
pin_near_gpu0 16
job=(torchrun --standalone --nproc_per_node 2 bench/never_slower.py ddp_side eager --steps "$S")
for r in $(seq 1 "$R"); do
	"${PIN[@]}" "${job[@]}" >"$O/plain$r.log" 2>&1
	rm -f "$O/rec$r.db"*
	"${PIN[@]}" "$B/bin/kplan" record -o "$O/rec$r.db" -- "${job[@]}" >"$O/rec$r.log" 2>&1
	"$B/bin/kplan" info "$O/rec$r.db" >"$O/rec$r.info" 2>&1
	rm -f "$O/rec$r.db"*
done
python3 - "$O" "$R" "$S" <<'EOF'
import json, statistics, sys
o, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
res = {"plain": [], "rec": []}
for v in res:
    for r in range(1, rounds + 1):
        for line in open("%s/%s%d.log" % (o, v, r)):
            if line.startswith("{") and '"rank": 0' in line:
                d = json.loads(line)
                res[v].append((d["total_ms"] / steps, d["step_ms"], d["losses"]))
for v, runs in res.items():
    print("%-6s whole run ms/step %s | synchronised step ms %s" % (
        v, " ".join("%.3f" % x[0] for x in runs), " ".join("%.3f" % x[1] for x in runs)))
if not res["plain"] or not res["rec"]:
    print("ddp_record: a variant printed no rank-0 line (see %s/*.log)" % o)
    sys.exit(1)
med = {v: (statistics.median(x[0] for x in runs), statistics.median(x[1] for x in runs))
       for v, runs in res.items()}
same = len({x[2] for x in res["plain"] + res["rec"]}) == 1
print("\n| DDP ddp_side, 2 ranks, %d steps, %d rounds | unrecorded | recorded | ratio |" % (
    steps, rounds))
print("| --- | --- | --- | --- |")
for i, what in enumerate(("whole run / steps, ms", "synchronised step, median ms")):
    print("| %s | %.3f | %.3f | %.3f |" % (what, med["plain"][i], med["rec"][i],
                                          med["rec"][i] / med["plain"][i]))
print("losses identical in every run: %s" % same)
EOF
grep -h "kernels\|rank" "$O"/rec1.info | head -6
