#!/bin/bash
# torch_check.sh - kplan.torch end to end on a GPU (part `torch` of gpu-check).
#
#   tests/gpu/torch_check.sh [BUILD] [OUTDIR]
#
# Runs bench/torch_bench.py --record (each workload recorded with kplan record,
# analyzed, planned, applied through kplan.torch; also captured without a plan
# and as a hand-written torch.cuda.graph), no torch.compile. Fails when a
# kplan variant crashed, or when a graph-only kplan variant's outputs differ
# from eager while the hand-written graph's do not (the same bits as the
# graph is what a graph-only plan promises), or, with the eager library path
# (the default; not KPLAN_TORCH_LIB_PATH=graph), BERT's differ from eager (kplan's capture then runs transformers' eager path,
# whose bits are eager's; the hand-written graph runs its capture path). Needs python3 with torch.
# TORCH_WORKLOADS (default gpt2,bert,resnet18,mlp,train) picks the workloads.
set -u
B=${1:-build}
O=${2:-${OUT:-/tmp/kplan-torch-check}}
mkdir -p "$O"
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	echo "torch_check: no python3 with CUDA torch here; nothing to run" >&2
	exit 2
fi
KPLAN_RT_LIB=$B/lib/libkplanrt.so python3 bench/torch_bench.py --out "$O" --record --no-compile \
	--kplan-bin "$B/bin/kplan" --workloads "${TORCH_WORKLOADS:-gpt2,bert,resnet18,mlp,train}" \
	--budget 320 2>&1 | tee "$O/torch_check.log"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || { echo "FAIL torch_bench exited $rc"; exit 1; }
python3 - "$O/torch_bench.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
sys.path.insert(0, "python")
import kplan.torch as kt
eager_path = kt._lib_path_setting(None) == "eager"
graph_eq = {r["workload"]: r["equal_to_eager"] == "True" for r in rows if r["variant"] == "graph"}
bad = 0
for r in rows:
    if not r["variant"].startswith("kplan"):
        continue
    if r["status"] == "skipped":
        print("SKIP %s %s: %s" % (r["workload"], r["variant"], r["note"]))
    elif r["status"] != "ok":
        print("FAIL %s %s: %s %s" % (r["workload"], r["variant"], r["status"], r["note"]))
        bad = 1
    elif r["equal_to_eager"] != "True" and graph_eq.get(r["workload"], False):
        print("FAIL %s %s: outputs differ from eager (max |diff| %s), the graph's do not"
              % (r["workload"], r["variant"], r["max_abs_diff"]))
        bad = 1
    elif r["equal_to_eager"] != "True" and r["workload"] == "bert" and eager_path:
        print("FAIL %s %s: outputs differ from eager (max |diff| %s): not transformers' "
              "eager path" % (r["workload"], r["variant"], r["max_abs_diff"]))
        bad = 1
    else:
        print("PASS %s %s: %s ms, %s x eager, replays %s"
              % (r["workload"], r["variant"], r["median_ms"], r["speedup_vs_eager"][:5], r["replays"]))
sys.exit(bad)
PY
