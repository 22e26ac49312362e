# never_slower.sh - sourced by corpus_check.sh and pipeline_check.sh: the
# promise that a plan never makes a program slower than eager, beyond the
# noise. Needs note() and bad() from the caller. Also sourced by
# never_slower_check.sh for pin_near_gpu0.
#
# never_slower ID "EAGER_US..." "WHAT US"...: the promise, beyond the noise.
# The best of each against the best eager run must reach NEVER_MIN (0.99)
# of eager's speed, divided by the spread of the eager runs themselves
# (slowest / fastest: these machines vary 5-10 % between processes), so
# that only a loss larger than eager's own variation fails.
never_slower() {
	local id=$1 e_runs=$2 v what us verdict
	shift 2
	for v in "$@"; do
		read -r what us <<<"$v"
		# "ok|LOSS ratio limit": best eager / us against NEVER_MIN * fastest / slowest eager
		verdict=$(echo "$e_runs" | awk -v p="$us" -v m="${NEVER_MIN:-0.99}" '{ lo = 0; hi = 0
			for (i = 1; i <= NF; i++) { if (lo == 0 || $i < lo) lo = $i; if ($i > hi) hi = $i }
			lim = lo > 0 ? m * lo / hi : m
			if (!(p > 0) || lo <= 0) { printf "LOSS - %.3f", lim; exit }
			printf "%s %.3f %.3f", (lo / p >= lim) ? "ok" : "LOSS", lo / p, lim }')
		note "never-slower $id: $what $us us per step, eager$e_runs: $verdict"
		[ "${verdict%% *}" = ok ] ||
			bad "$id: never-slower: $what $us us per step against eager's best of$e_runs ($verdict)"
	done
}

# pin_near_gpu0 [N]: PIN=(taskset -c FIRST-LAST), the first N (4) CPUs of GPU
# 0's NUMA node, and PIN_NODE its CPU list; PIN=() when taskset or the list is
# missing. A launch-bound run's time depends on the core it lands on:
# unpinned runs of one program differ by 10-20 % between processes here, more
# than the 1 % the promise allows.
pin_near_gpu0() {
	local n=${1:-4} bus first
	PIN=()
	bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 2>/dev/null | tr 'A-F' 'a-f')
	PIN_NODE=$(cat "/sys/bus/pci/devices/${bus: -12}/local_cpulist" 2>/dev/null)
	first=${PIN_NODE%%[-,]*}
	if command -v taskset >/dev/null && [ -n "$first" ]; then
		PIN=(taskset -c "$first-$((first + n - 1))")
	fi
}
