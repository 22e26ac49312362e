#!/bin/bash
# bundle_check.sh - plan bundles on a GPU (part `bundle` of gpu-check).
#
#   tests/gpu/bundle_check.sh [BUILD] [OUTDIR]
#
# Makes three plans for the mlp example: one for this GPU (its name, SM count,
# compute capability, CUDA major; region graph), one for a described other GPU
# of the same compute capability (another name and SM count; region eager, so
# that choosing it shows as no replays), one for another compute capability.
# Bundles them in two orders; through libkplanrt each bundle must apply this
# GPU's entry (kp_rt_stats.bundle_entry, bundle_match "gpu-name and sm-count"),
# replay graphs and give eager's output; `kplan check` must name that entry.
# Then signed: the bundle applies under KPLAN_RT_TRUST; with the other GPU's
# entry replaced after signing (the old signature put back) the whole bundle
# is untrusted (eager.untrusted-plan, no replays), output again eager's.
# Exit 1 on any failure.
set -u
B=${1:-build}
O=${2:-${OUT:-/tmp/kplan-bundle-check}}
BIN=$B/bin
mkdir -p "$O"
. "$(dirname "$0")/check_lib.sh"
dev=$("$BIN/ex_mlp" device) || { echo "no GPU: $dev"; exit 2; }
set -- $dev
cc=$2 cuda=$4 driver=$6 sms=$8 name=${dev#* gpu }
other_cc=$([ "${cc%%.*}" = 8 ] && echo 9.0 || echo 8.0)
mk() { # OUT NAME SMS CC REGION-SPEC
	"$BIN/kplan-mkplan" --cc "$4" --cuda "$cuda" --driver "$driver" --sm "$3" --gpu "$2" \
		-o "$O/$1" "$5" >/dev/null || exit 2
}
mk here.kplan "$name" "$sms" "$cc" mlp.forward:graph:warmup=2:keys=1
mk other.kplan "Other GPU $name" $((sms + 1)) "$cc" mlp.forward:eager
mk old.kplan "Older GPU" 80 "$other_cc" mlp.forward:graph:warmup=2:keys=1
rm -rf "$O/fwd.kplanb" "$O/rev.kplanb" "$O/key" "$O/key.pub"
"$BIN/kplan" bundle -o "$O/fwd.kplanb" "$O/here.kplan" "$O/other.kplan" "$O/old.kplan" \
	>"$O/bundle.txt" 2>&1 || { cat "$O/bundle.txt"; exit 2; }
"$BIN/kplan" bundle -o "$O/rev.kplanb" "$O/old.kplan" "$O/other.kplan" "$O/here.kplan" \
	>>"$O/bundle.txt" 2>&1 || { cat "$O/bundle.txt"; exit 2; }
cmp -s "$O/fwd.kplanb/bundle" "$O/rev.kplanb/bundle" &&
	pass "bundles of the plans in two orders are the same bytes" ||
	bad "bundles of the plans in two orders differ"
# this GPU's entry number, as kplan show lists them
want=$("$BIN/kplan" show "$O/fwd.kplanb" | awk -v n="$name, $sms SMs" \
	'index($0, "#") && index($0, n) {sub(/^ *#/, ""); print $1 + 0; exit}')
"$BIN/kplan" check "$O/fwd.kplanb" >"$O/check.txt" 2>&1
grep -q "entry #$want .*applies on .*gpu-name and sm-count match" "$O/check.txt" &&
	pass "kplan check: $(grep 'applies on' "$O/check.txt")" ||
	bad "kplan check (want entry #$want): $(cat "$O/check.txt")"
ref=$("$BIN/ex_mlp" eager --steps 200 2>/dev/null | awk '/^RESULT/ {print $NF}')
run() { # BUNDLE [TRUST] -> "hash replays entry untrusted"
	local o
	o=$(KPLAN_RT_TRUST="${2:-}" KPLAN_RT_STATS=1 "$BIN/ex_mlp" runtime "$1" --steps 200 2>&1)
	echo "$o" >>"$O/bundle_check.log"
	echo "$(awk '/^RESULT/ {print $NF}' <<<"$o") $(counter replays "$o") \
$(counter bundle_entry "$o") $(counter eager.untrusted-plan "$o")"
}
for b in fwd rev; do
	read -r h r e u <<<"$(run "$O/$b.kplanb")"
	[ "$h" = "$ref" ] && [ "$r" -gt 0 ] && [ "$e" = "$want" ] &&
		pass "$b bundle: entry #$e (this GPU's), $r replays, output = eager" ||
		bad "$b bundle: hash $h (eager $ref), replays ${r:-0}, entry ${e:-0} (want $want)"
done
"$BIN/kplan" keygen -o "$O/key" >/dev/null &&
	"$BIN/kplan" sign "$O/fwd.kplanb" --key "$O/key" >/dev/null || exit 2
read -r h r e u <<<"$(run "$O/fwd.kplanb" "$O/key.pub")"
[ "$h" = "$ref" ] && [ "$r" -gt 0 ] && [ "$u" = 0 ] &&
	pass "signed bundle under a trust key: $r replays, output = eager" ||
	bad "signed bundle: hash $h (eager $ref), replays ${r:-0}, untrusted ${u:-0}"
# tamper with the other GPU's entry only, and keep the old signature
cp "$O/fwd.kplanb/bundle.sig" "$O/saved.sig"
mk other.kplan "Other GPU $name" $((sms + 1)) "$cc" mlp.forward:eager:warmup=7
"$BIN/kplan" bundle -o "$O/fwd.kplanb" "$O/other.kplan" >>"$O/bundle.txt" 2>&1 || exit 2
cp "$O/saved.sig" "$O/fwd.kplanb/bundle.sig"
read -r h r e u <<<"$(run "$O/fwd.kplanb" "$O/key.pub")"
[ "$h" = "$ref" ] && [ "${r:-0}" = 0 ] && [ "${u:-0}" -gt 0 ] &&
	pass "another GPU's entry changed after signing: whole bundle untrusted (x$u), output = eager" ||
	bad "tampered bundle: hash $h (eager $ref), replays ${r:-0}, untrusted ${u:-0}"
[ $fail = 0 ] && echo "bundle_check: OK" || echo "bundle_check: FAILED"
exit $fail
