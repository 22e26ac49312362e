#!/bin/sh
# report_render.sh - render a kplan report in headless Chromium and check it.
#
#   sh tests/browser/report_render.sh [BUILD_DIR]     (default: build)
#
# Needs BUILD_DIR/bin/kplan, bench_report and pngcolors (`make test-browser`
# builds them and installs chromium through scripts/deps.sh). Steps:
#  1. bench_report synthesizes a run with 12 regions (one of them "step") and
#     a kernel named <script>alert("x&y")</script> plus a raw 0xff byte;
#  2. kplan report writes the page;
#  3. chromium --dump-dom: the regions table has exactly 12 rows, the first
#     is "step", the evil name is text (the only <script> is the page's own),
#     the sort script ran without breaking the document;
#  4. chromium --screenshot: the PNG is not blank (many colours, non-white
#     area) and shows the timeline's kernel, host-bound and device-side
#     colours.
# Chromium runs offline: no network, no first-run, no sync, a fresh profile.
set -eu
BUILD=${1:-build}
KPLAN=$BUILD/bin/kplan
BENCH=$BUILD/bin/bench_report
PNGCOLORS=$BUILD/bin/pngcolors
CHROMIUM=${CHROMIUM:-chromium}
for b in "$KPLAN" "$BENCH" "$PNGCOLORS"; do
	[ -x "$b" ] || { echo "report_render: $b missing (run 'make test-browser')" >&2; exit 2; }
done
command -v "$CHROMIUM" >/dev/null || { echo "report_render: $CHROMIUM not found (sh scripts/deps.sh chromium)" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kplan-browser-XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
check() {   # check DESCRIPTION COMMAND...
	what=$1
	shift
	if "$@"; then
		echo "ok   $what"
	else
		echo "FAIL $what"
		fail=1
	fi
}

"$BENCH" -n 20000 -r 12 -o "$tmp/run.db" --out "$tmp/bench" --keep >/dev/null
"$KPLAN" report "$tmp/run.db" -o "$tmp/report.html" >/dev/null

chrome() {
	# the flags keep Chromium from touching the network or a real profile
	timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic \
		--no-first-run --disable-background-networking --disable-component-update \
		--disable-sync --disable-dev-shm-usage --user-data-dir="$tmp/profile" "$@" \
		2>>"$tmp/chromium.log"
}

chrome --dump-dom "file://$tmp/report.html" >"$tmp/dom.html" || true
rows=$(grep -o '<tr class="region"' "$tmp/dom.html" | wc -l)
check "dom: regions table has 12 rows (found $rows)" [ "$rows" -eq 12 ]
first=$(tr '\n' ' ' <"$tmp/dom.html" | sed 's/.*id="regions-table"//' |
	grep -o '<tr class="region"[^>]*><td[^>]*>[0-9]*</td><td>[^<]*' | head -1 | sed 's/.*<td>//')
check "dom: first region is 'step' (found '$first')" [ "$first" = step ]
scripts=$(grep -o '<script' "$tmp/dom.html" | wc -l)
check "dom: one <script> element, the page's own (found $scripts)" [ "$scripts" -eq 1 ]
check "dom: the markup in a kernel name stays text" grep -q '&lt;script&gt;alert' "$tmp/dom.html"
check "dom: the document is complete" grep -q 'id="calibration-table"' "$tmp/dom.html"

chrome --screenshot="$tmp/shot.png" --window-size=1280,1400 --hide-scrollbars \
	"file://$tmp/report.html" >/dev/null || true
if [ -s "$tmp/shot.png" ]; then
	# kernel blue, host-bound red, device-side grey: the legend and the strip
	out=$("$PNGCOLORS" "$tmp/shot.png" -c 2f6fde -c e5532d -c 9aa4ae) && cols=0 || cols=1
	echo "     screenshot: $out" | head -1
	n=$(echo "$out" | head -1 | sed 's/.* colors \([0-9]*\) .*/\1/')
	nw=$(echo "$out" | head -1 | sed 's/.* nonwhite \([0-9]*\).*/\1/')
	check "screenshot: timeline colours present" [ "$cols" -eq 0 ]
	check "screenshot: not blank ($n colours, ${nw}% non-white)" [ "$n" -ge 8 -a "$nw" -ge 2 ]
else
	check "screenshot written" false
fi
if [ "$fail" -ne 0 ]; then
	echo "report_render: FAILED (chromium log: $(tail -3 "$tmp/chromium.log" | tr '\n' ' '))" >&2
	exit 1
fi
echo "report_render: passed"
