#!/bin/bash
# corpus_check.sh - the corpus (examples/corpus/) through the whole loop, on a GPU.
#
#   tests/gpu/corpus_check.sh [BUILD] [OUTDIR]
#
# For each program (seed_lr twice: with and without its value binds):
#   eager      twice with --eager (no kplan call at all): the reference hash
#              (both runs must agree) and the best us_per_step
#   runtime    once through libkplanrt without a plan (must match eager)
#   record     kplan record --args -o OUT/ID.db -- corpus_NAME --steps 60
#              (through the runtime without a plan: the regions' NVTX ranges)
#   analyze    kplan analyze OUT/ID.db > OUT/ID.analyze.txt
#   plan       kplan plan OUT/ID.db --run-length RUN/REC -o OUT/ID.kplan
#              (OUT/ID.plan.log): the plan is for the timed runs, the
#              programs' default CORPUS_RUN_STEPS (200), not the REC_STEPS
#              recorded (60), so break-even and the saving count 200/60 =
#              3.3333 times the recorded calls (awk, 4 decimals)
#   plan run   --plan OUT/ID.kplan with KPLAN_RT_STATS=1 (stderr in
#              OUT/ID.run.err: the counters, eager.REASON, the runtime's
#              warnings), then twice with KPLAN_PLAN=OUT/ID.kplan, timed
# and reports per program: regions in the plan, regions graphed (plan says
# graph AND the runtime replayed it: the programs print per-region counters,
# "REGION name calls N replays R captures C eager E reasons r:n,..."),
# regions eager with the plan's and the runtime's reasons (warm-up aside),
# speed-up (eager / plan us_per_step, best of 2 each), identical (every
# runtime and plan run's hash = eager's) and the exit codes. Outcomes that
# differ from the one each program's header comment expects are MISS lines
# (reported, not failures). Never slower: a third eager run, and the same
# plan with every region eager (kplan plan --min-gain 100) timed twice;
# the plan's and the all-eager plan's best us_per_step must be at least
# NEVER_MIN (0.99) of eager's speed, the whole default run (warm-up, watch,
# capture) included, within the spread of the eager runs (never_slower), else
# FAIL.
#
# Writes OUT/corpus.md, OUT/corpus.csv, OUT/corpus.log and every command's
# output under OUT; prints the table last. Exit 1 if any program crashed or
# timed out, any command returned non-zero, or any output differed from
# eager. The database of each program starts as a copy of one calibration
# (OUT/calib.db, kplan calibrate) when that works.
#
# Environment: CORPUS_ONLY="cublaslt memset" runs a subset (IDs below),
# CORPUS_REC_STEPS (60), CORPUS_RUN_STEPS (200: the programs' default --steps,
# the length of the timed runs the plan is for), CORPUS_T_RUN (30 s per
# program run), CORPUS_T_REC (120 s per record), CORPUS_T_KPLAN (120 s per
# analyze / plan).
set -u
B=${1:-build}
O=${2:-${OUT:-/tmp/kplan-corpus}}
K=$B/bin/kplan
BIN=$B/bin
REC_STEPS=${CORPUS_REC_STEPS:-60}
RUN_STEPS=${CORPUS_RUN_STEPS:-200}
# the timed runs' calls per region over the recorded run's (kplan plan --run-length)
RUN_LENGTH=$(awk -v r="$RUN_STEPS" -v s="$REC_STEPS" 'BEGIN { printf "%.4f", r / s }')
T_RUN=${CORPUS_T_RUN:-30}
T_REC=${CORPUS_T_REC:-120}
T_KPLAN=${CORPUS_T_KPLAN:-120}
mkdir -p "$O"
LOG=$O/corpus.log
: >"$LOG"
fail=0
note() { echo "$*" | tee -a "$LOG"; }
bad() { note "FAIL $*"; fail=1; }

# ID -> binary name and flags
declare -A prog=([legacy_launch]=legacy_launch [cublaslt]=cublaslt [memset]=memset
	[seed_lr]=seed_lr [seed_lr_nobinds]=seed_lr [per_thread]=per_thread
	[side_streams]=side_streams [host_callback]=host_callback
	[malloc_async]=malloc_async [warmup_only]=warmup_only)
declare -A flags=([seed_lr_nobinds]=--no-value-binds)
# what each program's header comment expects: graph:REGION (planned graph and
# replayed), eager:REGION (not replayed), any:REGION (either, with a reason)
declare -A expect=(
	[legacy_launch]="eager:legacy.train graph:legacy.eval"
	[cublaslt]="graph:lt.train"
	[memset]="graph:memset.train eager:memset.stats"
	[seed_lr]="graph:seed.train"
	[seed_lr_nobinds]="eager:seed.train"
	[per_thread]="any:ptds.train any:ptds.eval"
	[side_streams]="graph:side.fork_join eager:side.no_join"
	[host_callback]="graph:cb.hostfunc eager:cb.callback"
	[malloc_async]="graph:ma.train"
	[warmup_only]="graph:wu.train")
IDS=${CORPUS_ONLY:-"legacy_launch cublaslt memset seed_lr seed_lr_nobinds per_thread side_streams host_callback malloc_async warmup_only"}

# field of the RESULT line: 8 = us_per_step, 10 = hash
result() { awk -v f="$2" '/^RESULT / {v = $f} END {print v}' "$1"; }

# run ID STEP CMD...: OUT/ID.STEP.out / .err, rc in $rc; notes crashes
run() {
	local id=$1 step=$2
	shift 2
	echo "== $id $step: $*" >>"$LOG"
	( "${PIN[@]}" "$@" ) >"$O/$id.$step.out" 2>"$O/$id.$step.err"   # a subshell: its crash report goes to .err
	rc=$?
	if [ $rc -ne 0 ]; then
		rcs="$rcs $step=$rc"
		case $rc in
		124 | 137) bad "$id: $step timed out (see $O/$id.$step.err)" ;;
		*) if [ $rc -gt 128 ]; then
			bad "$id: $step crashed, signal $((rc - 128)) (see $O/$id.$step.err)"
		   else
			bad "$id: $step exit $rc (see $O/$id.$step.err)"
		   fi ;;
		esac
		tail -n 5 "$O/$id.$step.err" | sed "s/^/  $id $step: /" | tee -a "$LOG"
	fi
}

q() { printf '"%s"' "${1//\"/\"\"}"; }   # a CSV field
. "$(dirname "$0")/never_slower.sh"   # never_slower ID "EAGER_US..." "WHAT US"...
pin_near_gpu0   # every run on the same CPUs near GPU 0, so runs compare
[ ${#PIN[@]} -gt 0 ] && echo "runs pinned: ${PIN[*]} (GPU 0's NUMA node: $PIN_NODE)" >>"$LOG"
faster() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && (b == "" || a + 0 < b + 0)) }'; }

# plan regions: "LABEL DECISION REASON PARENT" (top level and parts)
plan_regions() {
	awk '/^\[/ { if (n != "") print n, d, r, p; n = ""
		if ($0 ~ /^\[region /) { n = substr($0, 9, length($0) - 9); d = "-"; r = "-"; p = "-" } }
		n != "" && $1 == "decision" { d = $2 } n != "" && $1 == "reason" { r = $2 }
		n != "" && $1 == "parent" { p = $2 }
		END { if (n != "") print n, d, r, p }' "$1"
}

if [ ! -x "$K" ]; then
	echo "corpus_check: $K missing (make gpu-build)" >&2
	exit 2
fi
CAL=$O/calib.db
rm -f "$CAL" "$CAL-wal" "$CAL-shm"
if timeout "$T_KPLAN" "$K" calibrate -o "$CAL" >>"$LOG" 2>&1; then
	note "PASS calibrate ($CAL)"
else
	note "WARN calibrate failed: the analyzer uses its default costs (see $LOG)"
	rm -f "$CAL"
fi

csv=$O/corpus.csv
md=$O/corpus.md
details=$O/details.md
echo "program,regions,graphed,eager_reason,eager_us,plan_us,speedup,identical,rc" >"$csv"
: >"$details"
rows=()
for id in $IDS; do
	p=${prog[$id]:-}
	if [ -z "$p" ]; then
		bad "$id: unknown program (CORPUS_ONLY)"
		continue
	fi
	exe=$BIN/corpus_$p
	fl=${flags[$id]:-}
	rcs=""
	if [ ! -x "$exe" ]; then
		bad "$id: $exe missing (make corpus)"
		rows+=("$id|-|-|-|-|-|-|missing")
		continue
	fi
	# eager reference, twice
	e_us="" e_h="" e_all="" same=yes
	for i in 1 2; do
		run "$id" "eager$i" timeout "$T_RUN" "$exe" --eager $fl
		us=$(result "$O/$id.eager$i.out" 8)
		h=$(result "$O/$id.eager$i.out" 10)
		faster "$us" "$e_us" && e_us=$us
		e_all="$e_all $us"
		if [ -z "$e_h" ]; then
			e_h=$h
		elif [ "$h" != "$e_h" ]; then
			bad "$id: two eager runs differ ($e_h, $h): the program is not deterministic"
			same=NO
		fi
	done
	[ -n "$e_h" ] || { bad "$id: eager printed no RESULT line"; same=NO; }
	# through the runtime, no plan
	run "$id" runtime timeout "$T_RUN" "$exe" $fl
	h=$(result "$O/$id.runtime.out" 10)
	[ "$h" = "$e_h" ] || { bad "$id: runtime without a plan differs from eager (${h:-no RESULT} vs $e_h)"; same=NO; }
	# record -> analyze -> plan
	db=$O/$id.db
	rm -f "$db" "$db-wal" "$db-shm"
	[ -f "$CAL" ] && cp "$CAL" "$db"
	run "$id" record timeout "$T_REC" "$K" record --args -o "$db" -- "$exe" --steps "$REC_STEPS" $fl
	run "$id" analyze timeout "$T_KPLAN" "$K" analyze "$db"
	cp "$O/$id.analyze.out" "$O/$id.analyze.txt" 2>/dev/null
	cat "$O/$id.analyze.err" >>"$O/$id.analyze.txt" 2>/dev/null
	pl=$O/$id.kplan
	rm -f "$pl"
	run "$id" plan timeout "$T_KPLAN" "$K" plan "$db" --run-length "$RUN_LENGTH" -o "$pl"
	cat "$O/$id.plan.out" "$O/$id.plan.err" >"$O/$id.plan.log" 2>/dev/null
	# with the plan: counters, then timed (KPLAN_PLAN, the other way in)
	p_us="" f_us="" n_regions=0 graphed="" eager=""
	if [ -s "$pl" ]; then
		run "$id" run env KPLAN_RT_STATS=1 timeout "$T_RUN" "$exe" --plan "$pl" $fl
		h=$(result "$O/$id.run.out" 10)
		[ "$h" = "$e_h" ] || { bad "$id: plan run differs from eager (${h:-no RESULT} vs $e_h)"; same=NO; }
		"$K" plan "$db" --min-gain 100 --no-store -o "$O/$id.eager.kplan" >>"$LOG" 2>&1 ||
			bad "$id: plan --min-gain 100"
		for i in 1 2; do
			run "$id" "timed$i" env KPLAN_PLAN="$pl" timeout "$T_RUN" "$exe" $fl
			us=$(result "$O/$id.timed$i.out" 8)
			h=$(result "$O/$id.timed$i.out" 10)
			faster "$us" "$p_us" && p_us=$us
			[ "$h" = "$e_h" ] || { bad "$id: plan run $i differs from eager (${h:-no RESULT} vs $e_h)"; same=NO; }
			run "$id" "forced$i" env KPLAN_PLAN="$O/$id.eager.kplan" timeout "$T_RUN" "$exe" $fl
			us=$(result "$O/$id.forced$i.out" 8)
			h=$(result "$O/$id.forced$i.out" 10)
			faster "$us" "$f_us" && f_us=$us
			[ "$h" = "$e_h" ] || { bad "$id: all-eager plan run $i differs from eager (${h:-no RESULT} vs $e_h)"; same=NO; }
		done
		run "$id" eager3 timeout "$T_RUN" "$exe" --eager $fl
		us=$(result "$O/$id.eager3.out" 8)
		faster "$us" "$e_us" && e_us=$us
		e_all="$e_all $us"
		never_slower "$id" "$e_all" "plan $p_us" "every-region-eager $f_us"
		# per region: the plan's decision and the runtime's counters
		declare -A dec=() rsn=() seen=()
		order=()
		while read -r lab d r par; do
			dec[$lab]=$d rsn[$lab]=$r
			[ "$par" = "-" ] || continue
			n_regions=$((n_regions + 1))
			seen[$lab]=1
			order+=("$lab")
		done < <(plan_regions "$pl")
		while read -r _ lab _; do
			[ -n "${seen[$lab]:-}" ] || { seen[$lab]=1; order+=("$lab"); }
		done < <(grep '^REGION ' "$O/$id.run.out")
		{
			echo "### $id"
			echo
			echo "plan: $pl; analyzer: $O/$id.analyze.txt; runtime: $O/$id.run.err"
			echo
		} >>"$details"
		for lab in "${order[@]}"; do
			line=$(awk -v l="$lab" '$1 == "REGION" && $2 == l' "$O/$id.run.out")
			rep=$(awk '{print $6}' <<<"$line")
			why=$(awk '{print $12}' <<<"$line" | tr ',' '\n' | grep -v '^warmup:\|^planned-eager:\|^-$' | sed 's/:[0-9]*$//' | paste -sd+)
			d=${dec[$lab]:-not-in-plan}
			if [ "$d" = graph ] && [ "${rep:-0}" -gt 0 ]; then
				graphed="$graphed${graphed:+ }$lab"
				state=graph
			else
				pr="plan $d/${rsn[$lab]:--}"
				[ "$d" = not-in-plan ] && pr="not in plan"
				[ -n "$line" ] || pr="$pr, never entered"
				eager="$eager${eager:+; }$lab: $pr${why:+, rt $why}"
				state="eager ($pr${why:+, rt $why})"
			fi
			{
				echo "- \`$lab\`: plan $d (${rsn[$lab]:--}): $(awk -v l="[region $lab]" '$0 == l {f = 1; next} /^\[/ {f = 0} f && $1 == "reason-text" {sub(/^reason-text /, ""); print}' "$pl")"
				echo "  runtime: ${line:-no REGION line}"
				grep -F "region '$lab'" "$O/$id.run.err" | head -3 | sed 's/^/  log: /'
			} >>"$details"
			for ex in ${expect[$id]:-}; do
				[ "${ex#*:}" = "$lab" ] || continue
				case ${ex%%:*} in
				graph) [ "$state" = graph ] || note "MISS $id: $lab expected graphed, got $state" ;;
				eager) [ "$state" != graph ] || note "MISS $id: $lab expected eager, but it was replayed" ;;
				any) [ "$state" = graph ] || [ -n "$why" ] || [ "$d" != graph ] ||
					note "MISS $id: $lab neither graphed nor eager with a reason" ;;
				esac
			done
		done
		unset dec rsn seen
		echo >>"$details"
		grep -h "^patched_values\|^graph_mem_bytes\|^tally" "$O/$id.run.out" | sed "s/^/  $id /" >>"$LOG"
	else
		bad "$id: no plan written (see $O/$id.plan.log)"
		same=NO
	fi
	for ex in ${expect[$id]:-}; do   # expected regions the plan and the run never named
		lab=${ex#*:}
		grep -qF "$lab" <<<" $graphed ; $eager" || note "MISS $id: region $lab neither in the plan nor run"
	done
	sp=$(awk -v e="$e_us" -v p="$p_us" 'BEGIN { if (p > 0 && e > 0) printf "%.2fx", e / p; else print "-" }')
	fsp=$(awk -v e="$e_us" -v p="$f_us" 'BEGIN { if (p > 0 && e > 0) printf "%.2fx", e / p; else print "-" }')
	rc=${rcs:- 0}
	rc=${rc# }
	rows+=("$id|$n_regions|${graphed:--}|${eager:--}|$sp|$fsp|$same|$rc")
	note "$id: eager ${e_us:-?} us/step, plan ${p_us:-?} us/step ($sp), every region eager ${f_us:-?} ($fsp), identical $same, rc $rc"
	echo "$id,$n_regions,$(q "${graphed:--}"),$(q "${eager:--}"),${e_us:--},${p_us:--},$sp,$same,$(q "$rc")" >>"$csv"
done

# the table: markdown file, then printed
{
	echo "# kplan corpus: record -> analyze -> plan -> apply"
	echo
	echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi -L 2>/dev/null | head -1)"
	echo
	echo "| program | regions | graphed | eager (reason) | speed-up | all eager | identical | rc |"
	echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
	for r in "${rows[@]}"; do
		echo "| ${r//|/ | } |"
	done
	echo
	echo "speed-up: eager us_per_step / plan us_per_step (best of 3 eager and 2 plan runs, the programs' default length); all eager: the same with the plan made by --min-gain 100;"
	echo "graphed: the plan says graph and the runtime replayed it; eager: the plan's decision/reason, then the runtime's eager reasons other than warmup."
	echo
	echo "## Regions"
	echo
	cat "$details"
} >"$md"
rm -f "$details"
{
	printf "%-16s | %-7s | %-34s | %-60s | %-8s | %-9s | %-9s | %s\n" program regions graphed "eager (reason)" speed-up "all eager" identical rc
	for r in "${rows[@]}"; do
		IFS='|' read -r a1 a2 a3 a4 a5 a6 a7 a8 <<<"$r"
		printf "%-16s | %-7s | %-34s | %-60s | %-8s | %-9s | %-9s | %s\n" "$a1" "$a2" "$a3" "$a4" "$a5" "$a6" "$a7" "$a8"
	done
} | tee -a "$LOG" >"$O/table.txt"
note "(table: $md, $csv; log: $LOG)"
cat "$O/table.txt"
exit $fail
