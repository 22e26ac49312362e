#!/bin/sh
# report_render.sh - render kplan reports in headless Chromium and check them.
#
#   sh tests/browser/report_render.sh [BUILD_DIR]     (default: build)
#
# Needs BUILD_DIR/bin/kplan, bench_report and pngcolors (`make test-browser`
# builds them and installs chromium through scripts/deps.sh). Three pages:
#  1. the bundled ResNet-18 trace (tests/fixtures), imported, analyzed and
#     planned: the report of a real run;
#  2. a synthetic run of 1,000,000 kernels (bench_report): the page stays
#     under 5 MB and paints within 2 s;
#  3. a synthetic run of 20,000 kernels with 12 regions (one of them "step")
#     and a kernel named <script>alert("x&y")</script> plus a raw 0xff byte.
# Pages 1 and 2 are opened at 1280x900 with #kp-selftest: the page's
# own test hook (reports/page.js) zooms the timeline with wheel events,
# drags it, clicks a kernel, a gap and a zoomed-out bin through the canvas's
# handlers, sorts a table and measures the layout, then writes JSON into
# <pre id="kp-selftest">, which --dump-dom returns. Checked: no script
# error (the hook's list and Chromium's console log), the document no wider
# than the window and no table scrolling sideways, each interaction's
# effect, the time to a parsed page with its timeline drawn and the first
# contentful paint (a second load with #kp-selftest-late, where Chromium
# records one), the page's size; page 1 also prints to PDF. Page 3: --dump-dom shows 12 region rows, "step" first, one
# <script> element, the markup in a kernel name as text; --screenshot is
# decoded by tests/browser/pngcolors.c (zlib, no Python) and must hold the
# kernel, host-bound and device-side colours and be far from blank.
# The figures (page size, first paint, time to a drawn timeline) are printed
# as "figure:" lines. Chromium runs offline: no network, no first-run, no
# sync, a fresh profile.
set -eu
BUILD=${1:-build}
KPLAN=$BUILD/bin/kplan
BENCH=$BUILD/bin/bench_report
PNGCOLORS=$BUILD/bin/pngcolors
CHROMIUM=${CHROMIUM:-chromium}
TRACE=tests/fixtures/resnet18_b1.json.gz
for b in "$KPLAN" "$BENCH" "$PNGCOLORS"; do
	[ -x "$b" ] || { echo "report_render: $b missing (run 'make test-browser')" >&2; exit 2; }
done
command -v "$CHROMIUM" >/dev/null || { echo "report_render: $CHROMIUM not found (sh scripts/deps.sh chromium)" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kplan-browser-XXXXXX")
[ -n "${KEEP_TMP:-}" ] || trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
: >"$tmp/chromium.log"
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

chrome() {
	# the flags keep Chromium from touching the network or a real profile;
	# console messages and uncaught errors go to the log (--enable-logging)
	timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic \
		--no-first-run --disable-background-networking --disable-component-update \
		--disable-sync --disable-dev-shm-usage --user-data-dir="$tmp/profile" \
		--enable-logging=stderr --v=0 "$@" 2>>"$tmp/chromium.log"
}

# num FILE NAME: a number field of the self-test's JSON ("" when absent)
num() {
	grep -o "\"$2\":-\\{0,1\\}[0-9.]*" "$1" | head -1 | sed 's/.*://'
}
# str FILE NAME: a string field (up to its first quote)
str() {
	grep -o "\"$2\":\"[^\"]*" "$1" | head -1 | sed 's/^[^:]*:"//'
}
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 <= b + 0) }'; }

# selftest NAME HTML: open HTML with the hook, check what it found
selftest() {
	name=$1
	html=$2
	log0=$(wc -l <"$tmp/chromium.log")
	chrome --window-size=1280,900 --dump-dom "file://$html#kp-selftest" >"$tmp/$name.dom" || true
	tr -d '\n' <"$tmp/$name.dom" | grep -o '<pre id="kp-selftest">{[^<]*' | tail -1 >"$tmp/$name.json" || true
	j=$tmp/$name.json
	check "$name: the self-test ran" [ -s "$j" ]
	check "$name: no script errors ($(str "$j" errors)$(grep -o '"errors":\[[^]]*' "$j" | head -1))" \
		grep -q '"errors":\[\]' "$j"
	console=$(tail -n +"$((log0 + 1))" "$tmp/chromium.log" | grep -c 'CONSOLE\|Uncaught' || true)
	check "$name: nothing on the console ($console lines)" [ "$console" -eq 0 ]
	sw=$(num "$j" sw)
	vw=$(num "$j" vw)
	check "$name: document width $sw <= window $vw at 1280 px" le "$sw" "$vw"
	check "$name: no table or chart wider than the page ($(grep -o '"wide":\[[^]]*' "$j"))" \
		grep -q '"wide":\[\]' "$j"
	check "$name: a header click sorts its table" grep -q '"sorted":true' "$j"
	span=$(num "$j" span)
	zspan=$(num "$j" zoom_span)
	check "$name: wheel zoom narrows the view ($(num "$j" zoom_steps) steps, $span -> $zspan ns)" \
		le "$zspan" "$(awk -v s="$span" 'BEGIN { print s / 2 }')"
	check "$name: the zoom kept the point under the cursor" grep -q '"zoom_has_c":true' "$j"
	check "$name: zoomed in, rows are drawn interval by interval ($(str "$j" modes_zoomed))" \
		grep -q '"modes_zoomed":"[^"]*d' "$j"
	pan=$(num "$j" pan_px)
	check "$name: dragging 100 px pans 100 px ($pan)" le 95 "${pan:-0}"
	check "$name: clicking a kernel shows it ($(str "$j" click_kernel | cut -c1-60))" \
		grep -q '"click_kernel":"kernel ' "$j"
	check "$name: clicking a gap shows its cause ($(str "$j" click_gap | cut -c1-60))" \
		grep -q '"click_gap":"gap of [^"]*idle, ' "$j"
	check "$name: clicking the whole run shows something ($(str "$j" click_all | cut -c1-50))" \
		grep -q '"click_all":"[a-z]' "$j"
	# the first paint, from a second load whose hook waits for it (virtual
	# time lets the page's timers run before the dump; it is not always
	# honoured on a busy machine, hence three tries)
	for try in 1 2 3; do
		chrome --window-size=1280,900 --virtual-time-budget=20000 --dump-dom \
			"file://$html#kp-selftest-late" | tr -d '\n' |
			grep -o '<pre id="kp-selftest">{[^<]*' | tail -1 >"$tmp/$name.late" || true
		[ -s "$tmp/$name.late" ] && break
	done
	size=$(wc -c <"$html")
	fcp=$(num "$tmp/$name.late" first-contentful-paint)
	ready=$(num "$j" ready_ms)
	check "$name: the script's time was measured" [ -n "$ready" ]
	check "$name: page $size bytes <= 5 MB" [ "$size" -le 5242880 ]
	# Chromium records a paint entry for a page that paints while it is
	# still being parsed; a small page paints only after its script, so
	# the time the script finished (document parsed, timeline drawn)
	# bounds the first paint either way
	check "$name: parsed and the timeline drawn in ${ready:-?} ms <= 2000 ms" le "$ready" 2000
	[ -z "$fcp" ] || check "$name: first contentful paint $fcp ms <= 2000 ms" le "$fcp" 2000
	echo "figure: $name page_bytes=$size first_contentful_paint_ms=${fcp:-?} timeline_drawn_ms=${ready:-?} redraw_per_zoom_step_ms=$(num "$j" redraw_ms) rows=$(num "$j" rows)"
}

# 1. the bundled trace
"$KPLAN" import "$TRACE" -o "$tmp/r18.db" >/dev/null
"$KPLAN" analyze "$tmp/r18.db" -q
"$KPLAN" plan "$tmp/r18.db" -o "$tmp/r18.kplan" >/dev/null 2>&1
"$KPLAN" report "$tmp/r18.db" -o "$tmp/r18.html" >/dev/null
selftest resnet18 "$tmp/r18.html"
check "resnet18: every interval in the page (rows drawn one by one at the whole run)" \
	grep -q '"modes_all":"d' "$tmp/resnet18.json"
check "resnet18: a section for the region 'step' with its kernels" \
	grep -q 'id="region-1-kernels"' "$tmp/r18.html"
check "resnet18: the plan's decision in the region's section" grep -q '<b>graph</b> (launch-bound)' "$tmp/r18.html"
chrome --print-to-pdf="$tmp/r18.pdf" --no-pdf-header-footer "file://$tmp/r18.html" >/dev/null || true
pages=$(grep -ac '/Type /Page$\|/Type /Page[^s]' "$tmp/r18.pdf" 2>/dev/null || echo 0)
check "resnet18: prints to PDF ($pages pages)" [ "$pages" -ge 2 ]

# 2. one million kernels
"$BENCH" -n 1000000 -o "$tmp/big.db" --out "$tmp/big" >"$tmp/bench.out" || { cat "$tmp/bench.out"; fail=1; }
cat "$tmp/bench.out"
selftest 1M "$tmp/big/report.html"
check "1M: zoomed out, rows are bin summaries ($(str "$tmp/1M.json" modes_all))" \
	grep -q '"modes_all":"b' "$tmp/1M.json"
check "1M: clicking a bin shows its summary" grep -q '"click_all":"summary of ' "$tmp/1M.json"
rm -f "$tmp/big.db"

# 3. twelve regions and a hostile kernel name
"$BENCH" -n 20000 -r 12 -o "$tmp/run.db" --out "$tmp/bench" --keep >/dev/null
"$KPLAN" report "$tmp/run.db" -o "$tmp/report.html" >/dev/null
chrome --dump-dom "file://$tmp/report.html" >"$tmp/dom.html" || true
rows=$(grep -o '<tr class="region"' "$tmp/dom.html" | wc -l)
check "dom: regions table has 12 rows (found $rows)" [ "$rows" -eq 12 ]
first=$(tr '\n' ' ' <"$tmp/dom.html" | sed 's/.*id="regions-table"//' |
	grep -o '<tr class="region"[^>]*><td[^>]*>[0-9]*</td><td>[^<]*' | head -1 | sed 's/.*<td>//')
check "dom: first region is 'step' (found '$first')" [ "$first" = step ]
scripts=$(grep -o '<script' "$tmp/dom.html" | wc -l)
check "dom: one <script> element, the page's own (found $scripts)" [ "$scripts" -eq 1 ]
check "dom: the markup in a kernel name stays text" grep -q '&lt;script&gt;alert\|\\u003cscript\\u003ealert' "$tmp/dom.html"
check "dom: the document is complete" grep -q 'id="calibration-table"' "$tmp/dom.html"
cards=$(grep -o '<section class="card"' "$tmp/dom.html" | wc -l)
check "dom: a section per region (found $cards)" [ "$cards" -eq 12 ]

chrome --screenshot="$tmp/shot.png" --window-size=1280,1400 --hide-scrollbars \
	"file://$tmp/report.html" >/dev/null || true
if [ -s "$tmp/shot.png" ]; then
	# kernel blue, host-bound red, device-side grey: charts, timeline, legends
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
	echo "report_render: FAILED (chromium log: $(grep -v 'dbus\|Fontconfig' "$tmp/chromium.log" | tail -3 | tr '\n' ' '))" >&2
	exit 1
fi
echo "report_render: passed"
