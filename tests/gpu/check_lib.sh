# check_lib.sh - what the GPU check scripts share, sourced by them (bash):
# PASS/FAIL lines with the exit status in $fail, and the counters that
# KPLAN_RT_STATS=1 prints.
fail=0
pass() { echo "PASS $*"; }
bad() { echo "FAIL $*"; fail=1; }
counter() { # NAME OUTPUT -> the KPLAN_RT_STATS counter, 0 when not printed
	awk -v k="$1" '$2 == k {v = $3} END {print v + 0}' <<<"$2"
}
