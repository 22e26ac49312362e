#!/bin/sh
# run_examples.sh - run builds of examples/mlp made against an installed
# kplan (scripts/install_test.sh) where a GPU is: each runs eager and through
# the runtime, and the two outputs must hash the same; given kplan-mkplan,
# the runtime gets a plan that graphs mlp.forward, and the region must then
# be replayed as a graph. Without a GPU it prints "skipped: no GPU".
#
#   run_examples.sh MKPLAN|- EXAMPLE...
set -eu
mkplan=$1
shift
fail() { echo "run_examples: $*" >&2; exit 1; }
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skipped: no GPU"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

plan=
if [ "$mkplan" != - ] && [ -x "$mkplan" ]; then
	# "cc 9.0 cuda 13 driver 13000 sm 132 gpu NAME" (examples/excommon.h)
	dev=$("$1" device) || fail "$1 device: $dev"
	f() { echo "$dev" | awk -v i="$1" '{ print $i }'; }
	"$mkplan" --cc "$(f 2)" --cuda "$(f 4)" --driver "$(f 6)" --sm "$(f 8)" \
		--gpu "$(echo "$dev" | sed 's/.* gpu //')" -o "$tmp/ex.kplan" \
		mlp.forward:graph:warmup=2:keys=1 || fail "kplan-mkplan failed"
	plan=$tmp/ex.kplan
fi
for e in "$@"; do
	"$e" eager --steps 50 > "$tmp/eager" 2>&1 || { cat "$tmp/eager" >&2; fail "$e eager failed"; }
	KPLAN_RT_STATS=1 "$e" runtime $plan --steps 50 > "$tmp/rt" 2>&1 ||
		{ cat "$tmp/rt" >&2; fail "$e runtime failed"; }
	h1=$(awk '/^RESULT/ { print $9 }' "$tmp/eager")
	h2=$(awk '/^RESULT/ { print $9 }' "$tmp/rt")
	[ -n "$h1" ] && [ "$h1" = "$h2" ] || fail "$e: eager hash '$h1', runtime hash '$h2'"
	replays=$(awk '$1 == "kplan-rt:" && $2 == "replays" { print $3 }' "$tmp/rt")
	if [ -n "$plan" ] && [ "${replays:-0}" -eq 0 ]; then
		cat "$tmp/rt" >&2
		fail "$e: the plan's region was never replayed"
	fi
done
echo "ran eager and through the runtime${plan:+ with a plan (${replays} replays)}: same outputs"
