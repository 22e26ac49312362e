#!/bin/bash
# sign_check.sh - signed plans on a GPU (part `sign` of gpu-check).
#
#   tests/gpu/sign_check.sh [BUILD] [OUTDIR]
#
# Writes a graph plan for the mlp example on this GPU, signs it, and runs the
# example eager and through libkplanrt with KPLAN_RT_TRUST set: a plan signed
# by the trusted key must replay graphs, an unsigned one and one signed by
# another key must run every region eagerly (eager.untrusted-plan); every
# output must equal eager's. Then the same with fused kernels: a decode plan
# with fusion groups from the catalog, signed; with the trusted key the fused
# kernels apply (fusion.applied > 0) and the output equals eager's (decode's
# groups are bit-exact); with one source edited after signing the plan is
# refused (untrusted-plan), output again equal. Exit 1 on any failure.
set -u
B=${1:-build}
O=${2:-${OUT:-/tmp/kplan-sign-check}}
BIN=$B/bin
mkdir -p "$O"
. "$(dirname "$0")/check_lib.sh"
dev=$("$BIN/ex_mlp" device) || { echo "no GPU: $dev"; exit 2; }
set -- $dev
"$BIN/kplan-mkplan" --cc "$2" --cuda "$4" --driver "$6" --sm "$8" --gpu "${dev#* gpu }" \
	-o "$O/mlp.kplan" mlp.forward:graph:warmup=2:keys=1 || exit 2
cp "$O/mlp.kplan" "$O/unsigned.kplan"
cp "$O/mlp.kplan" "$O/other.kplan"
rm -f "$O/key" "$O/key.pub" "$O/other" "$O/other.pub"
"$BIN/kplan" keygen -o "$O/key" >/dev/null && "$BIN/kplan" keygen -o "$O/other" >/dev/null || exit 2
"$BIN/kplan" sign "$O/mlp.kplan" --key "$O/key" >/dev/null || exit 2
"$BIN/kplan" sign "$O/other.kplan" --key "$O/other" >/dev/null || exit 2
"$BIN/kplan" check "$O/mlp.kplan" --trust "$O/key.pub" >"$O/check.txt" 2>&1 &&
	grep -q "signature ok" "$O/check.txt" && pass "kplan check --trust: $(grep signed "$O/check.txt")" ||
	bad "kplan check --trust: $(cat "$O/check.txt")"
ref=$("$BIN/ex_mlp" eager --steps 200 2>/dev/null | awk '/^RESULT/ {print $NF}')
run() { # PLAN -> "hash replays untrusted"
	local o
	o=$(KPLAN_RT_TRUST="$O/key.pub" KPLAN_RT_STATS=1 "$BIN/ex_mlp" runtime "$1" --steps 200 2>&1)
	echo "$o" >>"$O/sign_check.log"
	echo "$(awk '/^RESULT/ {print $NF}' <<<"$o") $(counter replays "$o") \
$(counter eager.untrusted-plan "$o")"
}
read -r h r u <<<"$(run "$O/mlp.kplan")"
[ "$h" = "$ref" ] && [ "$r" -gt 0 ] && [ "$u" = 0 ] &&
	pass "signed by the trusted key: $r replays, output = eager" ||
	bad "signed by the trusted key: hash $h (eager $ref), replays ${r:-0}, untrusted ${u:-0}"
for p in unsigned other; do
	read -r h r u <<<"$(run "$O/$p.kplan")"
	[ "$h" = "$ref" ] && [ "${r:-0}" = 0 ] && [ "${u:-0}" -gt 0 ] &&
		pass "$p plan: every call eager (untrusted-plan x$u), output = eager" ||
		bad "$p plan: hash $h (eager $ref), replays ${r:-0}, untrusted ${u:-0}"
done
# signed fused plan (decode)
"$BIN/kplan-mkplan" --cc "$2" --cuda "$4" --driver "$6" --sm "$8" --gpu "${dev#* gpu }" \
	-o "$O/dbase.kplan" decode.step:graph:warmup=1:keys=8:kernels=100000 || exit 2
rm -f "$O/trace.tsv"
mkdir -p "$O/fused"
KPLAN_FUSION_TRACE=$O/trace.tsv "$BIN/ex_decode" runtime "$O/dbase.kplan" --steps 5 >>"$O/sign_check.log" 2>&1
"$BIN/kplan" plan --base "$O/dbase.kplan" --kernels "$O/trace.tsv" \
	--catalog "${CAT:-fusion/catalog/examples.kpcat}" -o "$O/fused/decode.kplan" >>"$O/sign_check.log" 2>&1 || exit 2
"$BIN/kplan" sign "$O/fused/decode.kplan" --key "$O/key" >/dev/null || exit 2
dref=$("$BIN/ex_decode" eager 2>/dev/null | awk '/^RESULT/ {print $NF}')
drun() { # -> "hash applied untrusted"
	local o
	o=$(KPLAN_RT_TRUST="$O/key.pub" KPLAN_RT_STATS=1 "$BIN/ex_decode" runtime "$O/fused/decode.kplan" 2>&1)
	echo "$o" >>"$O/sign_check.log"
	echo "$(awk '/^RESULT/ {print $NF}' <<<"$o") $(counter fusion.applied "$o") \
$(counter eager.untrusted-plan "$o")"
}
read -r h a u <<<"$(drun)"
[ "$h" = "$dref" ] && [ "$a" -gt 0 ] && [ "$u" = 0 ] &&
	pass "signed fused plan: $a fused chains applied, output = eager" ||
	bad "signed fused plan: hash $h (eager $dref), applied ${a:-0}, untrusted ${u:-0}"
src=$(awk '$1 == "source" && $2 != "-" {print $2; exit}' "$O/fused/decode.kplan")
if [ -n "$src" ]; then
	echo "// edited after signing" >>"$O/fused/$src"
	read -r h a u <<<"$(drun)"
	[ "$h" = "$dref" ] && [ "${a:-0}" = 0 ] && [ "${u:-0}" -gt 0 ] &&
		pass "fused source edited after signing: refused (untrusted-plan x$u), output = eager" ||
		bad "fused source edited after signing: hash $h (eager $dref), applied ${a:-0}, untrusted ${u:-0}"
else
	bad "signed fused plan: no fusion group with a source"
fi
[ $fail = 0 ] && echo "sign_check: OK" || echo "sign_check: FAILED"
exit $fail
