/*
 * page.js - the report's interactive timeline (embedded in the page by
 * reports/page_js.S, after the KP_TL data that reports/tlpage.c writes).
 *
 * One canvas, one row per KP_TL row. Zoomed out, a row shows its bins:
 * per bin, the share of time per class as a stacked column (streams:
 * kernels in the colour of the region most of the bin belongs to, then
 * host-bound, device-side and unexplained idle time). The page picks the
 * level whose bins are about a pixel wide. Where the view lies inside a
 * detail window (the whole run when it fits), intervals are drawn one by
 * one, and a click shows what was clicked. No network, no library.
 *
 * Test hook: with #kp-selftest in the address, the page zooms with wheel
 * events, pans with a drag, clicks a kernel, a gap and a bin through the
 * canvas's own handlers, measures the layout and writes the results as
 * JSON into a pre element with the id kp-selftest (tests/browser/report_render.sh).
 */
(function () {
'use strict';
var T_START = window.performance ? performance.now() : 0;
var errs = [];
window.addEventListener('error', function (e) { errs.push(String(e.message || e)); });

var PAL = ['#2f6fde', '#8250df', '#1a7f37', '#bf3989', '#0e8a9a', '#9a6700',
	   '#5a32a3', '#2da44e', '#cf4d9e', '#1b4f9c', '#7d4e24', '#4c9ee8'];
var NOREG = '#57606a';
var GAPC = ['', '#e5532d', '#9aa4ae', '#e8d36a'];
var GAPN = ['', 'idle, host-bound: the launch call began after the previous op ended, so the GPU waited for the CPU',
	    'idle, device-side: the op was queued in time; the GPU waited on something else',
	    'idle, no launch record for this op'];
var APIC = ['#6f42c1', '#24292f', '#0e8a9a', '#8c959f'];
var APIN = ['launch', 'synchronize or wait', 'copy or set', 'other'];
var ROWK = { REGIONS: 0, NVTX: 1, CPU: 2, API: 3, STREAM: 4 };
var LEFT = 150, TOP = 20, RH = 22, MAXDRAW = 40000;

function fmt(ns) {
	var a = Math.abs(ns);
	if (a < 1e3) return Math.round(ns) + ' ns';
	if (a < 1e6) return (ns / 1e3).toFixed(2) + ' us';
	if (a < 1e9) return (ns / 1e6).toFixed(2) + ' ms';
	return (ns / 1e9).toFixed(2) + ' s';
}
function regColor(i) { return i < 0 ? NOREG : PAL[i % PAL.length]; }
function strColor(i) { return PAL[(i * 7 + 3) % PAL.length]; }

/* sortable tables: a region's row leads to its section */
Array.prototype.forEach.call(document.querySelectorAll('tr.region[data-region]'), function (tr) {
	tr.addEventListener('click', function (e) {
		var c = document.getElementById('region-' + tr.getAttribute('data-region'));
		if (c && !(e.target && e.target.closest && e.target.closest('summary'))) c.scrollIntoView();
	});
});

var D = window.KP_TL, cv = document.getElementById('tl-canvas');
var panel = document.getElementById('tl-detail'), status = document.getElementById('tl-status');
var st = { v0: 0, v1: 1, px: 1, modes: [], levels: [] };
var rows = [];

var B64 = new Int8Array(128);
(function () {
	var s = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
	for (var i = 0; i < 64; i++) B64[s.charCodeAt(i)] = i;
})();

/* bin b of level l of row r: [q0, q1, q2, q3, count, key] */
function bin(r, l, b, out) {
	var s = r.lv[l], o = b * 9;
	for (var c = 0; c < 4; c++) out[c] = B64[s.charCodeAt(o + c)];
	out[4] = B64[s.charCodeAt(o + 4)] << 12 | B64[s.charCodeAt(o + 5)] << 6 | B64[s.charCodeAt(o + 6)];
	out[5] = (B64[s.charCodeAt(o + 7)] << 6 | B64[s.charCodeAt(o + 8)]) - 1;
	return out;
}
function nbins(l) { return 1024 << (2 * l); }

function decode(r) {
	var it = r.it, n = it.length / 5, t = 0, md = 0;
	r.s = new Float64Array(n); r.e = new Float64Array(n);
	r.a = new Int32Array(n); r.b = new Int32Array(n); r.c = new Int8Array(n); r.g = new Float64Array(n);
	for (var j = 0, o = 0; j < n; j++, o += 5) {
		t += it[o];
		r.s[j] = t; r.e[j] = t + it[o + 1];
		r.a[j] = it[o + 2]; r.b[j] = it[o + 3];
		r.c[j] = it[o + 4] % 4; r.g[j] = Math.floor(it[o + 4] / 4);
		if (it[o + 1] > md) md = it[o + 1];
	}
	r.maxDur = md;
	r.it = null;
}

/* first index j with r.s[j] >= t */
function lb(arr, t) {
	var lo = 0, hi = arr.length;
	while (lo < hi) { var m = (lo + hi) >> 1; if (arr[m] < t) lo = m + 1; else hi = m; }
	return lo;
}

function inWindow(a, b) {
	if (D.full) return true;
	for (var i = 0; i < D.win.length; i += 2) if (D.win[i] <= a && b <= D.win[i + 1]) return true;
	return false;
}

function kname(j) {
	if (j === -1) return ['[memcpy]', 0];
	if (j === -2) return ['[memset]', 0];
	return D.kn[j] || ['(kernel)', 0];
}
function itemName(r, j) {
	if (r.k === ROWK.STREAM) return kname(r.a[j])[0];
	if (r.k === ROWK.REGIONS) return D.regs[r.a[j]] ? D.regs[r.a[j]][0] : 'region';
	return D.strs[r.a[j]] || '';
}
function itemColor(r, j) {
	if (r.k === ROWK.STREAM) return regColor(r.b[j]);
	if (r.k === ROWK.REGIONS) return regColor(r.a[j]);
	if (r.k === ROWK.API) return APIC[r.c[j]];
	return strColor(r.a[j]);
}

var ctx = cv ? cv.getContext('2d') : null;

function label(text, x, y, w) {
	if (w < 40) return;
	var t = text, m = ctx.measureText(t).width;
	if (m > w - 4) {
		var n = Math.max(1, Math.floor(t.length * (w - 12) / m));
		t = t.slice(0, n) + '\u2026';
	}
	ctx.fillText(t, x + 2, y);
}

function drawItems(r, i, a, b) {
	var y = TOP + i * RH + 2, h = RH - 4, px = st.px, v0 = st.v0;
	var lo = lb(r.s, a - r.maxDur), hi = lb(r.s, b + 1), n = 0;
	for (var j = lo; j < hi; j++) {
		if (r.e[j] < a) continue;
		var x0 = LEFT + (r.s[j] - v0) / px, x1 = LEFT + (r.e[j] - v0) / px;
		if (r.k === ROWK.STREAM && r.c[j] > 0 && r.g[j] > 0) {
			var g0 = LEFT + (r.s[j] - r.g[j] - v0) / px;
			ctx.fillStyle = GAPC[r.c[j]];
			ctx.fillRect(g0, y + h * 0.3, Math.max(x0 - g0, 0.5), h * 0.4);
		}
		ctx.fillStyle = itemColor(r, j);
		ctx.fillRect(x0, y, Math.max(x1 - x0, 0.6), h);
		if (x1 - x0 >= 40) {
			ctx.fillStyle = '#fff';
			label(itemName(r, j), Math.max(x0, LEFT), y + h / 2, x1 - Math.max(x0, LEFT));
		}
		n++;
	}
	return n;
}

function visibleItems(r, a, b) {
	if (!r.s) return 0;
	return lb(r.s, b + 1) - lb(r.s, a - r.maxDur);
}

function pickLevel() {
	var span = D.span;
	for (var l = 0; l < D.levels; l++) if (span / nbins(l) <= st.px) return l;
	return D.levels - 1;
}

function drawBins(r, i, l) {
	var y = TOP + i * RH + 2, h = RH - 4, nb = nbins(l), bw = D.span / nb, px = st.px;
	var b0 = Math.max(0, Math.floor(st.v0 / bw)), b1 = Math.min(nb - 1, Math.floor(st.v1 / bw));
	var q = [0, 0, 0, 0, 0, 0];
	for (var b = b0; b <= b1; b++) {
		bin(r, l, b, q);
		if (!(q[0] | q[1] | q[2] | q[3])) continue;
		var x = LEFT + (b * bw - st.v0) / px, w = Math.max(bw / px, 1), yy = y + h;
		for (var c = 0; c < 4; c++) {
			if (!q[c]) continue;
			var hh = Math.min(h * q[c] / 63, yy - y);
			if (hh <= 0) break;
			if (r.k === ROWK.STREAM) ctx.fillStyle = c ? GAPC[c] : regColor(q[5]);
			else if (r.k === ROWK.API) ctx.fillStyle = APIC[c];
			else if (r.k === ROWK.REGIONS) ctx.fillStyle = regColor(q[5]);
			else ctx.fillStyle = strColor(q[5]);
			yy -= hh;
			ctx.fillRect(x, yy, w, hh);
		}
	}
}

function axis(W) {
	var span = st.v1 - st.v0, step = Math.pow(10, Math.floor(Math.log(span / 6) / Math.LN10));
	if (span / step > 12) step *= 5; else if (span / step > 6) step *= 2;
	ctx.fillStyle = '#57606a';
	ctx.strokeStyle = '#eaeef2';
	ctx.textBaseline = 'middle';
	for (var t = Math.ceil(st.v0 / step) * step; t <= st.v1; t += step) {
		var x = LEFT + (t - st.v0) / st.px;
		ctx.fillRect(x, TOP - 4, 1, 4);
		ctx.fillText(fmt(t), x + 2, TOP - 10);
		ctx.beginPath(); ctx.moveTo(x + 0.5, TOP); ctx.lineTo(x + 0.5, TOP + rows.length * RH); ctx.stroke();
	}
}

function draw() {
	var dpr = window.devicePixelRatio || 1, W = Math.max(cv.clientWidth || 1000, LEFT + 100);
	var H = TOP + rows.length * RH + 4;
	if (cv.width !== Math.round(W * dpr) || cv.height !== Math.round(H * dpr)) {
		cv.width = Math.round(W * dpr); cv.height = Math.round(H * dpr);
		cv.style.height = H + 'px';
	}
	ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
	ctx.clearRect(0, 0, W, H);
	ctx.font = '11px sans-serif';
	st.W = W;
	st.px = (st.v1 - st.v0) / (W - LEFT - 2);
	axis(W);
	var detail = 0, lvl = -1;
	for (var i = 0; i < rows.length; i++) {
		var r = rows[i];
		ctx.save();
		ctx.beginPath(); ctx.rect(LEFT, TOP + i * RH, W - LEFT, RH); ctx.clip();
		if (!r.cap && inWindow(st.v0, st.v1) && visibleItems(r, st.v0, st.v1) <= MAXDRAW) {
			drawItems(r, i, st.v0, st.v1);
			st.modes[i] = 'd';
			detail++;
		} else {
			var l = pickLevel();
			drawBins(r, i, l);
			st.modes[i] = 'b' + l;
			lvl = l;
			/* where bins are coarse, the detail windows in view draw over them */
			if (!r.cap && !D.full && D.span / nbins(l) > 2 * st.px) {
				for (var w = 0; w < D.win.length; w += 2) {
					var a = Math.max(st.v0, D.win[w]), b = Math.min(st.v1, D.win[w + 1]);
					if (a >= b || visibleItems(r, a, b) > MAXDRAW) continue;
					var xa = LEFT + (a - st.v0) / st.px, xb = LEFT + (b - st.v0) / st.px;
					ctx.clearRect(xa, TOP + i * RH + 1, xb - xa, RH - 2);
					drawItems(r, i, a, b);
					st.modes[i] = 'o' + l;
				}
			}
		}
		ctx.restore();
	}
	ctx.fillStyle = '#fff';
	ctx.fillRect(0, 0, LEFT - 2, H);
	ctx.textBaseline = 'middle';
	for (i = 0; i < rows.length; i++) {
		ctx.fillStyle = '#1b1f24';
		label(rows[i].name, 0, TOP + i * RH + RH / 2, LEFT - 4);
	}
	if (status) {
		status.textContent = 'showing ' + fmt(st.v0) + ' to ' + fmt(st.v1) + ' of ' + fmt(D.span) +
			(lvl >= 0 ? '; summaries per ' + fmt(D.span / nbins(lvl)) : '') +
			(detail ? '; ' + detail + ' row' + (detail > 1 ? 's' : '') + ' drawn interval by interval' : '');
	}
}

function setView(a, b) {
	var span = D.span, w = b - a;
	if (w < 100) { var c = (a + b) / 2; a = c - 50; b = c + 50; w = 100; }
	if (w >= span) { a = 0; b = span; } else {
		if (a < 0) { b -= a; a = 0; }
		if (b > span) { a -= b - span; b = span; }
	}
	st.v0 = a; st.v1 = b;
	draw();
}
function zoomAt(f, t) { setView(t - (t - st.v0) * f, t + (st.v1 - t) * f); }
function pos(e) { var rc = cv.getBoundingClientRect(); return { x: e.clientX - rc.left, y: e.clientY - rc.top }; }
function tAt(x) { return st.v0 + (x - LEFT) * st.px; }

function line(text, bold) {
	var d = document.createElement('div');
	if (bold) { var b = document.createElement('b'); b.textContent = text; d.appendChild(b); }
	else d.textContent = text;
	panel.appendChild(d);
}
function show(info) {
	panel.textContent = '';
	if (!info) { line('Nothing there: click a kernel, a gap or a bin.'); return; }
	line(info[0], true);
	for (var i = 1; i < info.length; i++) if (info[i]) line(info[i]);
}

function regLine(ri) {
	var g = D.regs[ri];
	if (!g) return 'outside any region';
	return 'region ' + g[0] + ' (id ' + g[1] + ', ' + g[3] + ' occurrences of ' + fmt(g[4]) +
		', plan: ' + g[2] + ')';
}

function itemInfo(r, j) {
	var d = fmt(r.e[j] - r.s[j]), at = 'at ' + fmt(r.s[j]) + ' for ' + d;
	if (r.k === ROWK.STREAM) {
		var kn = kname(r.a[j]);
		return ['kernel ' + kn[0], kn[1] ? 'full name: ' + kn[1] : '', r.name + ', ' + at,
			regLine(r.b[j]),
			r.c[j] > 0 && r.g[j] > 0 ? 'gap before it: ' + fmt(r.g[j]) + ', ' + GAPN[r.c[j]] : 'no idle gap before it'];
	}
	if (r.k === ROWK.REGIONS)
		return ['region occurrence ' + r.b[j] + ' of ' + itemName(r, j), at, regLine(r.a[j])];
	if (r.k === ROWK.API)
		return ['CUDA API call ' + itemName(r, j), at, 'class: ' + APIN[r.c[j]]];
	return [(r.k === ROWK.CPU ? 'CPU op ' : 'NVTX range ') + itemName(r, j), at];
}

function pick(x, y) {
	var i = Math.floor((y - TOP) / RH);
	if (i < 0 || i >= rows.length || x < LEFT) return null;
	var r = rows[i], t = tAt(x), tol = 3 * st.px, m = st.modes[i] || '';
	if (m === 'd' || (m.charAt(0) === 'o' && inWindow(t, t))) {
		var lo = lb(r.s, t - r.maxDur - tol), hi = Math.min(r.s.length, lb(r.s, t + tol + 1) + 1), best = -1, near = -1;
		for (var j = lo; j < hi; j++) {
			if (r.s[j] <= t && t <= r.e[j]) best = j;
			else if (r.s[j] - tol <= t && t <= r.e[j] + tol && near < 0) near = j;
			if (r.k === ROWK.STREAM && r.c[j] > 0 && r.s[j] - r.g[j] <= t && t < r.s[j] && best < 0) {
				var kn = kname(r.a[j]);
				return ['gap of ' + fmt(r.g[j]) + ' on ' + r.name, GAPN[r.c[j]],
					'from ' + fmt(r.s[j] - r.g[j]) + ' to ' + fmt(r.s[j]) + ', before kernel ' + kn[0],
					regLine(r.b[j])];
			}
		}
		if (best < 0) best = near;
		return best < 0 ? null : itemInfo(r, best);
	}
	var l = +m.slice(1) || 0, bw = D.span / nbins(l), b = Math.floor(t / bw), q = bin(r, l, b, [0, 0, 0, 0, 0, 0]);
	if (!(q[0] | q[1] | q[2] | q[3])) return null;
	var pct = function (v) { return Math.round(100 * v / 63) + '%'; };
	var info = ['summary of ' + r.name + ' from ' + fmt(b * bw) + ' to ' + fmt((b + 1) * bw),
		    q[4] + ' intervals start here (zoom in for each one)'];
	if (r.k === ROWK.STREAM) {
		info.push('kernels ' + pct(q[0]) + ', idle host-bound ' + pct(q[1]) + ', device-side ' + pct(q[2]) +
			  ', no launch record ' + pct(q[3]) + ' of the time');
		info.push('mostly ' + regLine(q[5]));
	} else if (r.k === ROWK.API) {
		info.push('launch ' + pct(q[0]) + ', sync ' + pct(q[1]) + ', copy ' + pct(q[2]) + ', other ' + pct(q[3]) +
			  '; mostly ' + (D.strs[q[5]] || '?'));
	} else {
		info.push('covered ' + pct(q[0]) + '; mostly ' + (r.k === ROWK.REGIONS ? regLine(q[5]) : D.strs[q[5]] || '?'));
	}
	return info;
}

function init() {
	rows = D.rows;
	for (var i = 0; i < rows.length; i++) decode(rows[i]);
	st.v0 = 0; st.v1 = D.span;
	var drag = null;
	cv.addEventListener('wheel', function (e) {
		e.preventDefault();
		zoomAt(e.deltaY < 0 ? 0.8 : 1.25, tAt(pos(e).x));
	}, { passive: false });
	cv.addEventListener('mousedown', function (e) {
		drag = { x: e.clientX, v0: st.v0, v1: st.v1, px: st.px, moved: false };
	});
	window.addEventListener('mousemove', function (e) {
		if (!drag) return;
		var dx = e.clientX - drag.x;
		if (Math.abs(dx) > 2) drag.moved = true;
		if (drag.moved) setView(drag.v0 - dx * drag.px, drag.v1 - dx * drag.px);
	});
	window.addEventListener('mouseup', function () {
		if (drag) { st.dragged = drag.moved; drag = null; }
	});
	cv.addEventListener('click', function (e) {
		if (st.dragged) { st.dragged = false; return; }
		var p = pos(e);
		show(pick(p.x, p.y));
	});
	cv.addEventListener('keydown', function (e) {
		var c = (st.v0 + st.v1) / 2, w = st.v1 - st.v0;
		if (e.key === '+' || e.key === '=') zoomAt(0.5, c);
		else if (e.key === '-') zoomAt(2, c);
		else if (e.key === 'ArrowLeft') setView(st.v0 - w / 4, st.v1 - w / 4);
		else if (e.key === 'ArrowRight') setView(st.v0 + w / 4, st.v1 + w / 4);
		else return;
		e.preventDefault();
	});
	var btn = function (id, fn) { var b = document.getElementById(id); if (b) b.addEventListener('click', fn); };
	btn('tl-in', function () { zoomAt(0.5, (st.v0 + st.v1) / 2); });
	btn('tl-out', function () { zoomAt(2, (st.v0 + st.v1) / 2); });
	btn('tl-all', function () { setView(0, D.span); });
	btn('tl-typical', function () { setView(D.view[0], D.view[1]); });
	Array.prototype.forEach.call(document.querySelectorAll('button.tl-go'), function (b) {
		b.addEventListener('click', function () {
			var a = +b.getAttribute('data-t0'), z = +b.getAttribute('data-t1'), m = (z - a) / 50;
			setView(a - m, z + m);
			cv.scrollIntoView();
		});
	});
	window.addEventListener('resize', draw);
	draw();
}

if (D && cv && ctx) init();
var T_DRAWN = window.performance ? performance.now() : 0;

/* ---- the browser test's hook (tests/browser/report_render.sh) ---- */
function selftest() {
	var r = { errors: errs, vw: window.innerWidth, sw: document.documentElement.scrollWidth,
		  script_ms: Math.round(T_DRAWN - T_START), ready_ms: Math.round(T_DRAWN) };
	var wide = [];
	Array.prototype.forEach.call(document.querySelectorAll('.tw'), function (el) {
		if (el.scrollWidth > el.clientWidth + 1) wide.push(el.firstElementChild ? el.firstElementChild.id : '?');
	});
	Array.prototype.forEach.call(document.querySelectorAll('table, .card, svg, canvas, pre, .crow'), function (el) {
		if (el.getBoundingClientRect().right > window.innerWidth + 1) wide.push(el.id || el.tagName);
	});
	r.wide = wide;
	/* a table sorts: kernels by count, descending after two clicks */
	var t = document.getElementById('kernels-by-time');
	if (t) {
		var th = t.tHead.rows[0].cells[1];
		th.click(); th.click();
		var v = Array.prototype.map.call(t.tBodies[0].rows, function (tr) { return +tr.cells[1].getAttribute('data-v'); });
		r.sorted = v.length > 1 && v.every(function (x, i) { return !i || v[i - 1] >= x; });
	}
	if (D && cv && ctx) {
		var rc = cv.getBoundingClientRect(), ev = function (type, x, y, extra) {
			var o = { clientX: rc.left + x, clientY: rc.top + y, bubbles: true, cancelable: true, view: window };
			for (var k in extra) o[k] = extra[k];
			var e = type === 'wheel' ? new WheelEvent(type, o) : new MouseEvent(type, o);
			(type === 'mousemove' || type === 'mouseup' ? window : cv).dispatchEvent(e);
		};
		r.rows = rows.length;
		r.row_names = rows.map(function (x) { return x.name; });
		r.span = D.span;
		r.modes_all = st.modes.join(',');
		/* zoom with the wheel towards the typical occurrence until it fills the view */
		var c = (D.view[0] + D.view[1]) / 2, want = Math.max(D.view[1] - D.view[0], 1000), n = 0;
		var tz = performance.now();
		while (st.v1 - st.v0 > want && n < 300) {
			ev('wheel', LEFT + (c - st.v0) / st.px, TOP + 5, { deltaY: -100 });
			n++;
		}
		r.redraw_ms = Math.round(10 * (performance.now() - tz) / Math.max(n, 1)) / 10;
		r.zoom_steps = n;
		r.zoom_span = st.v1 - st.v0;
		r.zoom_has_c = st.v0 <= c && c <= st.v1;
		r.modes_zoomed = st.modes.join(',');
		/* pan: drag 100 px to the left */
		var v0 = st.v0, px = st.px;
		ev('mousedown', LEFT + 300, TOP + 5);
		ev('mousemove', LEFT + 250, TOP + 5);
		ev('mousemove', LEFT + 200, TOP + 5);
		ev('mouseup', LEFT + 200, TOP + 5);
		r.pan_px = Math.round((st.v0 - v0) / px);
		st.dragged = false;
		setView(D.view[0], D.view[1]);
		/* click the widest kernel in view, then the widest gap */
		var bestK = null, bestG = null;
		rows.forEach(function (row, i) {
			if (row.k !== ROWK.STREAM || st.modes[i] === undefined || st.modes[i].charAt(0) === 'b' || !row.s) return;
			for (var j = lb(row.s, st.v0); j < row.s.length && row.s[j] < st.v1; j++) {
				var x0 = LEFT + (row.s[j] - st.v0) / st.px, x1 = LEFT + (Math.min(row.e[j], st.v1) - st.v0) / st.px;
				if (!bestK || x1 - x0 > bestK.w) bestK = { w: x1 - x0, x: (x0 + x1) / 2, y: TOP + i * RH + RH / 2 };
				if (row.c[j] > 0 && row.g[j] > 0) {
					var g0 = LEFT + (Math.max(row.s[j] - row.g[j], st.v0) - st.v0) / st.px;
					if (!bestG || x0 - g0 > bestG.w) bestG = { w: x0 - g0, x: (g0 + x0) / 2, y: TOP + i * RH + RH / 2 };
				}
			}
		});
		if (bestK) { ev('click', bestK.x, bestK.y); r.click_kernel = panel.textContent; r.click_kernel_px = Math.round(bestK.w); }
		if (bestG) { ev('click', bestG.x, bestG.y); r.click_gap = panel.textContent; r.click_gap_px = Math.round(bestG.w); }
		/* the whole run again, and a click on the first stream row's busiest column */
		document.getElementById('tl-all').click();
		r.modes_all2 = st.modes.join(',');
		for (var i = 0; i < rows.length; i++) if (rows[i].k === ROWK.STREAM) break;
		if (i < rows.length) {
			ev('click', LEFT + (st.W - LEFT) / 2, TOP + i * RH + RH / 2);
			r.click_all = panel.textContent;
		}
	}
	var paint = window.performance && performance.getEntriesByType ? performance.getEntriesByType('paint') : [];
	for (var pi = 0; pi < paint.length; pi++) r[paint[pi].name] = Math.round(paint[pi].startTime);
	r.errors = errs;
	var pre = document.createElement('pre');
	pre.id = 'kp-selftest';
	pre.textContent = JSON.stringify(r);
	document.body.appendChild(pre);
}
function runSelftest() {
	try { selftest(); } catch (e) {
		errs.push('selftest: ' + e);
		var p = document.createElement('pre'); p.id = 'kp-selftest';
		p.textContent = JSON.stringify({ errors: errs }); document.body.appendChild(p);
	}
}
/* #kp-selftest: now (for --dump-dom); #kp-selftest-late: after the first paint (with --virtual-time-budget) */
if (location.hash === '#kp-selftest') runSelftest();
else if (location.hash === '#kp-selftest-late')
	window.addEventListener('load', function () {
		var tries = 0, wait = function () {
			/* until the browser has recorded its first paint */
			var p = window.performance && performance.getEntriesByType ? performance.getEntriesByType('paint') : [];
			if (p.length || ++tries > 20) runSelftest();
			else setTimeout(wait, 50);
		};
		requestAnimationFrame(function () { setTimeout(wait, 50); });
	});
})();
