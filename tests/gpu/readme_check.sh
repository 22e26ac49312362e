#!/bin/bash
# readme_check.sh - the README's PyTorch walk-through, as a new user follows it
# (part `readme` of gpu-check).
#
#   tests/gpu/readme_check.sh [BUILD] [OUTDIR]
#
# Takes the shell lines of README.md's "A PyTorch program, step by step"
# section as written (the `make` line excepted: the build is BUILD) and runs
# them in a fresh directory, then checks what the README promises: the record
# holds the region's NVTX ranges, `kplan plan` analyzes and plans it, `show`
# and `report` work, the run with the plan replays graphs and prints eager's
# checksum. Then the traps a user falls into: `kt.open()` with no path takes
# $KPLAN_PLAN, and without any plan stderr says once that regions run eager.
# Exit 1 on any failure.
set -u
B=${1:-build}
O=${2:-${OUT:-/tmp/kplan-readme-check}}
mkdir -p "$O"
. "$(dirname "$0")/check_lib.sh"
ROOT=$PWD
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	echo "readme_check: no python3 with CUDA torch here; nothing to run" >&2
	exit 2
fi
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# the README's shell lines, in order, from the PyTorch section's sh blocks
awk '/^## A PyTorch program/ {on = 1; next} /^## / {on = 0}
	on && /^ *```sh/ {blk = 1; next} on && /^ *```/ {blk = 0; next}
	on && blk {sub(/^ +/, ""); sub(/ +#.*$/, ""); if ($0 != "" && $1 != "make") print}' \
	README.md >"$O/readme_steps.sh"
echo "README steps:"; sed 's/^/  /' "$O/readme_steps.sh"
[ "$(grep -c . "$O/readme_steps.sh")" -ge 5 ] || bad "found only $(grep -c . "$O/readme_steps.sh") README lines"
# run them as written, from a copy of the tree's examples in a fresh directory
cp -r "$ROOT/examples" "$W/"
ln -s "$ROOT/$B" "$W/build"
ln -s "$ROOT/python" "$W/python"
(cd "$W" && PS4='+ $ ' bash -ex "$O/readme_steps.sh") >"$O/readme_run.log" 2>&1
rc=$?
[ $rc = 0 ] && pass "README steps ran (exit 0)" || bad "README steps exit $rc (see readme_run.log)"
log=$(cat "$O/readme_run.log")
grep -q "analyz" <<<"$log" && pass "kplan plan said it analyzed the run" ||
	bad "kplan plan did not say it analyzed the run"
[ -s "$W/model.kplan" ] && pass "model.kplan written" || bad "no model.kplan"
[ -s "$W/report.html" ] && pass "report.html written ($(wc -c <"$W/report.html") bytes)" ||
	bad "no report.html"
d=$(awk '/^\[region / {r = $2} r == "step]" && $1 == "decision" {print $2; exit}' "$W/model.kplan")
[ "$d" = graph ] && pass "the plan graphs region step" || bad "region step's decision: '$d'"
# the checksum of the recorded (eager) run and of the planned run
sums=$(grep -o 'checksum [-0-9.e+]*' <<<"$log" | awk '{print $2}')
n=$(grep -c . <<<"$sums")
first=$(head -1 <<<"$sums") last=$(tail -1 <<<"$sums")
[ "$n" -ge 2 ] && [ "$first" = "$last" ] && pass "checksum with the plan = eager's ($last)" ||
	bad "checksums: $(tr '\n' ' ' <<<"$sums")"
r=$(counter replays "$(grep '^kplan-torch:' <<<"$log")")
[ "$r" -gt 0 ] && pass "run with the plan: $r replays" || bad "run with the plan: no replays"
grep 'us per step' "$O/readme_run.log" | sed 's/^/  /'

# kt.open() with no path takes $KPLAN_PLAN
cat >"$W/open.py" <<'PY'
import sys, torch
sys.path.insert(0, "python")
import kplan.torch as kt
kt.open()
m = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(12)]).cuda().eval()
x = torch.randn(1, 512, device="cuda")
@kt.region("step")
def step(x):
    return m(x)
with torch.no_grad():
    for _ in range(50):
        y = step(x)
torch.cuda.synchronize()
print("open.py done")
PY
o=$(cd "$W" && KPLAN_PLAN=model.kplan KPLAN_RT_STATS=1 python3 open.py 2>&1)
echo "$o" >"$O/open_env.log"
r=$(counter replays "$(grep '^kplan-torch:' <<<"$o")")
[ "$r" -gt 0 ] && pass "kt.open() with KPLAN_PLAN set: $r replays" ||
	bad "kt.open() with KPLAN_PLAN set: no replays: $(tail -5 <<<"$o")"
o=$(cd "$W" && env -u KPLAN_PLAN KPLAN_RT_STATS=1 python3 open.py 2>&1)
echo "$o" >"$O/open_noplan.log"
n=$(grep -ci "no plan" <<<"$o")
[ "$n" -ge 1 ] && grep -q "open.py done" <<<"$o" &&
	pass "no plan: eager, said $n time(s): $(grep -i 'no plan' <<<"$o" | head -1)" ||
	bad "no plan: nothing said: $(tail -5 <<<"$o")"
exit $fail
