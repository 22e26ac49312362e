#!/bin/bash
# ddp_capture.sh - bench/ddp_capture.py's variants on 2 GPUs, one torchrun job
# each, pinned like never_slower_check (cores of GPU 0's NUMA node); logs in
# OUTDIR, a table of rank 0's lines last.
#   bash bench/ddp_capture.sh OUTDIR [VARIANT...]
set -u
O=${1:-/tmp/ddp-capture}
shift
VARIANTS=${*:-"eager kplan kplan-side kplan-side-noaeh"}
mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} KPLAN_RT_LIB=${KPLAN_RT_LIB:-$PWD/build/lib/libkplanrt.so}
# shellcheck source=tests/gpu/never_slower.sh
. "$(dirname "$0")/../tests/gpu/never_slower.sh"   # pin_near_gpu0
pin_near_gpu0 8    # 4 CPUs per rank, as never_slower_check
port=29611
for v in $VARIANTS; do
	port=$((port + 1))
	timeout 240 "${PIN[@]}" torchrun --nproc_per_node 2 --master_port $port bench/ddp_capture.py "$v" \
		>"$O/ddp_$v.out" 2>"$O/ddp_$v.err"
	echo "$v rc=$?" >>"$O/ddp_rc.txt"
done
echo "| variant | rank | total ms | step ms | losses | error | captures/replays | eager |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for v in $VARIANTS; do
	sed 's/}{/}\n{/g' "$O/ddp_$v.out" | grep -h '^{' | python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    s = d.get("stats") or {}
    print("| %s | %s | %s | %s | %s | %s | %s/%s | %s |" % (d["variant"], d["rank"], d["total_ms"],
          d["step_ms"], d["losses"], d["error"], s.get("captures"), s.get("replays"),
          s.get("eager_by_reason")))'
done
