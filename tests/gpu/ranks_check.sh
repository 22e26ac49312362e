#!/bin/bash
# ranks_check.sh - a job of two ranks recorded into one database and compared
# (part `ranks` of gpu-check; needs two GPUs and python3 with CUDA torch, so
# it is not in gpu-check's default list: GPU_CHECK_ONLY=ranks runs it).
#
#   tests/gpu/ranks_check.sh [BUILD] [OUTDIR]
#
# Records tests/gpu/ranks_ddp.py under torchrun (2 ranks, DDP, rank 1 late by
# RANKS_LATE_MS per step) and checks: kplan info lists rank 0 and rank 1;
# kplan analyze of rank 0 matches every collective across the ranks, names
# rank 1 the straggler and puts rank 0's wait at no less than half the delay
# per step; no cudaEventQuery is a fatal sync (PyTorch's watchdog polls from
# its own thread); the report draws both ranks' streams.
set -u
B=${1:-build}
O=${2:-${OUT:-/tmp/kplan-ranks-check}}
STEPS=${RANKS_STEPS:-30}
LATE=${RANKS_LATE_MS:-2}
source "$(dirname "$0")/check_lib.sh"
mkdir -p "$O"
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -lt 2 ]; then
	echo "ranks_check: fewer than two GPUs here; nothing to run" >&2
	exit 2
fi
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	echo "ranks_check: no python3 with CUDA torch here; nothing to run" >&2
	exit 2
fi
db=$O/ranks.db
rm -f "$db" "$db-wal" "$db-shm"
"$B/bin/kplan" record -o "$db" -- torchrun --standalone --nproc_per_node 2 \
	tests/gpu/ranks_ddp.py --steps "$STEPS" --late-ms "$LATE" >"$O/record.log" 2>&1 ||
	bad "kplan record of torchrun exited $? (see record.log)"
"$B/bin/kplan" info "$db" >"$O/info.txt" 2>&1
for r in 0 1; do
	grep -q "rank       $r of 2" "$O/info.txt" && pass "info lists rank $r" || bad "info lists no rank $r"
done
# the run of each rank: the "run N" line above its "rank" line
run_of() { awk -v r="$1" '$1 == "run" {n = $2} $1 == "rank" && $2 == r {print n; exit}' "$O/info.txt"; }
r0=$(run_of 0)
r1=$(run_of 1)
[ -n "$r0" ] && [ -n "$r1" ] || { bad "no runs for the ranks"; exit 1; }
"$B/bin/kplan" analyze "$db" --run "$r1" >"$O/analyze1.txt" 2>&1 || bad "analyze rank 1 exited $?"
"$B/bin/kplan" analyze "$db" --run "$r0" --csv "$O/csv" >"$O/analyze0.txt" 2>&1 || bad "analyze rank 0 exited $?"
cat "$O/analyze0.txt"
grep -q "straggler: rank 1 " "$O/analyze0.txt" && pass "rank 1 named the straggler" ||
	bad "rank 1 not named the straggler"
python3 - "$O/csv" "$STEPS" "$LATE" <<'PY' || fail=1
import csv, sys
d, steps, late = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
ranks = {int(r["rank"]): r for r in csv.DictReader(open(d + "/ranks.csv"))}
colls = list(csv.DictReader(open(d + "/collectives.csv")))
bad = 0
def check(ok, what):
    global bad
    print(("PASS " if ok else "FAIL ") + what)
    bad |= not ok
check(set(ranks) == {0, 1}, "ranks.csv has ranks 0 and 1")
for r in (0, 1):
    n, m = int(ranks[r]["collectives"]), int(ranks[r]["matched"])
    check(n >= steps and m == n, "rank %d: %d collectives, %d matched" % (r, n, m))
kinds = {c["collective"] for c in colls}
check("AllReduce" in kinds, "collectives are AllReduce (%s)" % ",".join(sorted(kinds)))
w0 = float(ranks[0]["wait_us"])
check(w0 >= 0.5 * late * 1000 * steps, "rank 0 waited %.0f us (rank 1 late %.1f ms x %d steps)"
      % (w0, late, steps))
blk = list(csv.DictReader(open(d + "/blockers.csv")))
polls = [b for b in blk if b["api_name"] in ("cudaEventQuery", "cuEventQuery") and b["fatal"] == "1"]
check(not polls, "no event query is a fatal sync (%d)" % len(polls))
sys.exit(bad)
PY
"$B/bin/kplan" report "$db" --run "$r0" -o "$O/report.html" >/dev/null 2>&1 || bad "report exited $?"
for r in 0 1; do
	grep -Eq "name:\"rank $r [^\"]*stream" "$O/report.html" && pass "report draws rank $r's streams" ||
		bad "report draws no stream of rank $r"
done
exit $fail
