#!/bin/sh
# valgrind.sh - memcheck of the kplan CLI on the bundled trace.
#
#   sh tests/valgrind.sh [BUILD]        (default build; `make valgrind`)
#
# Runs every host verb under valgrind memcheck on the bundled ResNet-18
# profiler trace: import, analyze, plan (also with the examples' fusion
# catalog), report (+CSV), info, export (CSV, SQL, Chrome trace), import of
# the exported trace, show, check (match, soft and hard mismatch), diff;
# plus error paths (corrupt plan, missing file, wrong kind of file, usage).
# Passes when every run exits as expected with zero memcheck errors and zero
# definitely/indirectly lost bytes. Logs in $BUILD/valgrind/<step>.log.
# About 20-30 s on a 2-core machine (not part of `make test`).
set -u
BUILD=${1:-build}
KPLAN=$BUILD/bin/kplan
TRACE=tests/fixtures/resnet18_b1.json.gz
OUT=$BUILD/valgrind
command -v valgrind >/dev/null 2>&1 || { echo "valgrind.sh: valgrind not installed (apt-get install valgrind)" >&2; exit 2; }
[ -x "$KPLAN" ] || { echo "valgrind.sh: $KPLAN not built" >&2; exit 2; }
rm -rf "$OUT"
mkdir -p "$OUT/csv" "$OUT/fused"
DB=$OUT/run.db

bad=""
n=0
# vg NAME EXPECTED_EXIT ARGS... : one kplan run under memcheck
vg() {
	name=$1
	want=$2
	shift 2
	n=$((n + 1))
	valgrind --tool=memcheck --error-exitcode=99 --leak-check=full \
		--show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
		--track-origins=yes --num-callers=30 --log-file="$OUT/$name.log" \
		"$KPLAN" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
	rc=$?
	errs=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$OUT/$name.log" | tail -1)
	lost=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "$OUT/$name.log" | tail -1)
	if [ "$rc" = 99 ] || [ "${errs:-x}" != 0 ]; then
		bad="$bad $name"
		echo "valgrind: $name: ${errs:-?} errors (definitely lost ${lost:-0} bytes), see $OUT/$name.log" >&2
	elif [ "$rc" != "$want" ]; then
		bad="$bad $name"
		echo "valgrind: $name: exit $rc, expected $want: $(tail -n 1 "$OUT/$name.err")" >&2
	else
		printf 'valgrind: %-14s ok (exit %s, 0 errors, %s bytes definitely lost)\n' "$name" "$rc" "${lost:-0}"
	fi
}

start=$(date +%s)
vg import 0 import "$TRACE" -o "$DB"
vg analyze 0 analyze "$DB"
vg plan 0 plan "$DB" -o "$OUT/model.kplan"
vg plan-catalog 0 plan "$DB" -o "$OUT/fused/model.kplan" --catalog fusion/catalog/examples.kpcat
vg report 0 report "$DB" -o "$OUT/report.html" --csv "$OUT/csv"
vg info 0 info "$DB"
vg export-csv 0 export "$DB" --csv CUPTI_ACTIVITY_KIND_KERNEL -o "$OUT/kernels.csv"
vg export-sql 0 export "$DB" --csv "SELECT count(*) FROM NVTX_EVENTS"
vg export-chrome 0 export "$DB" --chrome "$OUT/export.json"
vg reimport 0 import "$OUT/export.json" -o "$OUT/re.db"
vg show 0 show "$OUT/model.kplan"
vg check-match 0 check "$OUT/model.kplan" --gpu-name "NVIDIA H200" --cc 9.0 --sms 132 --driver 13000
vg check-soft 1 check "$OUT/model.kplan" --gpu-name "NVIDIA H100" --cc 9.0 --sms 114 --driver 13000
vg check-hard 2 check "$OUT/model.kplan" --gpu-name "NVIDIA A100" --cc 8.0 --sms 108 --driver 12040
vg diff 0 diff "$DB" "$OUT/re.db"
# error paths: clean exits, no leaks on the way out
printf 'kplan-plan 1\nbody-bytes 3\nbody-hash 0000000000000000\nab\n' > "$OUT/bad.kplan"
vg err-plan 2 show "$OUT/bad.kplan"
vg err-missing 2 info "$OUT/missing.db"
vg err-notdb 2 analyze "$OUT/model.kplan"
vg err-usage 64 plan
end=$(date +%s)

echo "valgrind: $n runs in $((end - start)) s"
if [ -n "$bad" ]; then
	echo "valgrind: FAILED:$bad" >&2
	exit 1
fi
echo "valgrind: all clean"
