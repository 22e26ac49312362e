#!/bin/sh
# pipeline.sh - the whole CLI over generated traces (`make fuzz-pipeline`).
#
#   sh tests/fuzz/pipeline.sh KPLAN COUNT SEED [WORKDIR]
#
# Generates COUNT random Chrome traces (tests/fuzz/gen_traces.py, SEED) and
# runs import, analyze, plan, report (+CSV), export --chrome, info, show
# and diff on each, and checks that importing the exported Chrome trace
# gives the same row counts and kernel time. Meant for a sanitizer build of kplan (`make
# BUILD=build-asan SANITIZER=address,undefined fuzz-pipeline`): a run fails
# when a command exits with anything but 0/1/2 or prints a sanitizer report.
# The libFuzzer harnesses mutate bytes and mostly exercise the readers; this
# feeds well-formed but hostile traces to the analyzer, planner and reports.
# Prints one line per failure and a summary; exit 1 when something failed.
set -u
K=$1
COUNT=${2:-200}
SEED=${3:-1}
W=${4:-${TMPDIR:-/tmp}/kplan-pipeline-$$}
rm -rf "$W"
mkdir -p "$W/in"
python3 "$(dirname "$0")/gen_traces.py" "$W/in" "$COUNT" "$SEED" || exit 2
n=0; imported=0; bad=0
Q="SELECT (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL)||'/'||(SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME)||'/'||(SELECT count(*) FROM NVTX_EVENTS)||'/'||(SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET)||'/'||(SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY)||'/'||(SELECT coalesce(sum(end - start), 0) FROM CUPTI_ACTIVITY_KIND_KERNEL)"
for f in "$W"/in/*.json; do
	n=$((n + 1))
	rm -f "$W"/r.db*
	"$K" import "$f" -o "$W/r.db" > "$W/c.log" 2>&1
	rc=$?
	if [ $rc -gt 2 ] || grep -q "runtime error\|Sanitizer" "$W/c.log"; then
		echo "pipeline: import exit $rc on $f"; grep -m3 "runtime error\|Sanitizer" "$W/c.log"
		bad=$((bad + 1)); cp "$f" "$W/failed-$n.json"; continue
	fi
	[ $rc = 0 ] || continue
	imported=$((imported + 1))
	for c in "analyze $W/r.db" "plan $W/r.db -o $W/p.kplan --cc 9.0 --cuda-major 13" \
		 "report $W/r.db -o $W/r.html --csv $W/csv" "export $W/r.db --chrome $W/e.json" \
		 "info $W/r.db" "show $W/p.kplan" "diff $W/r.db $W/r.db"; do
		$K $c > "$W/c.log" 2>&1
		rc=$?
		if [ $rc -gt 2 ] || grep -q "runtime error\|Sanitizer" "$W/c.log"; then
			echo "pipeline: 'kplan $c' exit $rc on $f"
			grep -m3 "runtime error\|Sanitizer" "$W/c.log"
			bad=$((bad + 1)); cp "$f" "$W/failed-$n.json"
		fi
	done
	# import(export(db)) keeps the rows (chrome_export.h promises it)
	rm -f "$W"/r2.db*
	if [ -f "$W/e.json" ] && "$K" import "$W/e.json" -o "$W/r2.db" > "$W/c.log" 2>&1; then
		a=$("$K" export "$W/r.db" --csv "$Q" 2>&1 | tail -1)
		b=$("$K" export "$W/r2.db" --csv "$Q" 2>&1 | tail -1)
		if [ "$a" != "$b" ]; then
			echo "pipeline: export/import changed the rows of $f: $a vs $b"
			bad=$((bad + 1)); cp "$f" "$W/failed-$n.json"
		fi
	else
		echo "pipeline: the exported trace of $f does not import: $(tail -1 "$W/c.log")"
		bad=$((bad + 1)); cp "$f" "$W/failed-$n.json"
	fi
	rm -f "$W/e.json"
done
echo "pipeline: $n traces (seed $SEED), $imported imported, $bad failures"
[ $bad = 0 ] && rm -rf "$W"
[ $bad = 0 ]
